"""The server resource: version and cluster (Connect's ``GET /``), liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from ... import __version__
from ...errors import StoreClosedError
from ..deps import StoreDep
from ..responses import ApiError
from ..routing import ConnectRoute
from ..schemas import ErrorBody, Readiness

READY_TIMEOUT_S = 2.0

router = APIRouter(tags=["server"], route_class=ConnectRoute)


class ServerInfo(BaseModel):
    """What ``GET /`` answers: Connect's fields, plus where the statuses live."""

    version: str
    kafka_cluster_id: str | None
    bootstrap_servers: str
    status_topic: str
    embedded_broker: bool


class Health(BaseModel):
    """Liveness, in the shape of Connect's ``GET /health``."""

    status: str
    message: str


@router.get("/", response_model=ServerInfo)
async def server_info(store: StoreDep) -> ServerInfo:
    """Version of this service, the Kafka cluster id and the status topic."""
    return ServerInfo(
        version=__version__,
        kafka_cluster_id=store.cluster_id,
        bootstrap_servers=store.bootstrap_servers,
        status_topic=store.config.topic,
        embedded_broker=store.config.embedded,
    )


@router.get("/health", response_model=Health)
async def health() -> Health:
    """Liveness: the process is up and serving requests."""
    return Health(status="healthy", message="status-store has completed startup and is serving requests.")


@router.get("/ready", response_model=Readiness, responses={503: {"model": ErrorBody}})
async def ready(store: StoreDep) -> Readiness:
    """Readiness: a fresh Fetch from every partition shows the cache has caught up with the topic."""
    try:
        await store.read_to_end(READY_TIMEOUT_S)
    except (TimeoutError, StoreClosedError) as e:
        reason = "the store is stopped" if isinstance(e, StoreClosedError) else (
            f"the status topic was not read to its end within {READY_TIMEOUT_S:g} s (are the brokers reachable?)")
        raise ApiError(503, f"Not ready: {reason}") from None
    return Readiness(status="ready", message="The brokers answer and the cache has caught up with the status topic.")
