"""The server resource: version, cluster and liveness (Connect's ``GET /`` and ``GET /health``)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from ... import __version__
from ..deps import StoreDep

router = APIRouter(tags=["server"])


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
def server_info(store: StoreDep) -> ServerInfo:
    """Version of this service, the Kafka cluster id and the status topic."""
    return ServerInfo(
        version=__version__,
        kafka_cluster_id=store.cluster_id,
        bootstrap_servers=store.bootstrap_servers,
        status_topic=store.config.topic,
        embedded_broker=store.config.embedded,
    )


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: the process is up and serving requests."""
    return Health(status="healthy", message="status-store has completed startup and is serving requests.")
