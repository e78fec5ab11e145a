"""The server resource: version and cluster (Connect's ``GET /``), liveness and readiness."""

from __future__ import annotations

import functools
import json
from importlib import metadata

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ... import __version__
from ...agents import PROTOCOL
from ...errors import StoreClosedError
from ...kafka.security_failures import security_failures
from ..deps import ConfigTopicDep, StoreDep
from ..responses import ApiError
from ..routing import ConnectRoute
from ..schemas import ErrorBody, Readiness
from .agent import AgentsDep

READY_TIMEOUT_S = 2.0

router = APIRouter(tags=["server"], route_class=ConnectRoute)


# What Connect's GET / answers as its commit when its build recorded none (Kafka's AppInfoParser).
UNKNOWN_COMMIT = "unknown"


class ServerInfo(BaseModel):
    """What ``GET /`` answers: Connect's fields (``version`` and ``commit`` are this service's), plus where the
    statuses and configurations live."""

    version: str
    commit: str
    kafka_cluster_id: str | None
    bootstrap_servers: str
    status_topic: str
    config_topic: str | None
    embedded_broker: bool
    instance: str = Field(description="This process's id, new at each start: a worker's agent that sees it change "
                                      "knows the sidecar restarted")
    agent_protocol: int = Field(description="The version of POST /agent/statuses this sidecar speaks")
    write_bound_ms: int = Field(description="The longest a status write this sidecar started may take to land "
                                            "(status.storage.retry.delivery.timeout.ms): a worker's agent waits it out "
                                            "before its worker writes through Connect's own store")


class Health(BaseModel):
    """Liveness, in the shape of Connect's ``GET /health``."""

    status: str
    message: str


@functools.cache
def commit_id() -> str:
    """The git commit this service was installed from, as pip records it for an install from a repository
    (``pip install git+...``); otherwise ``unknown``, as Connect answers when its build recorded none."""
    try:
        recorded = metadata.distribution("status-store").read_text("direct_url.json")
        commit = json.loads(recorded or "{}").get("vcs_info", {}).get("commit_id")
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return UNKNOWN_COMMIT
    return commit if isinstance(commit, str) and commit else UNKNOWN_COMMIT


@router.get("/", response_model=ServerInfo)
async def server_info(store: StoreDep, agents: AgentsDep) -> ServerInfo:
    """Version and commit of this service, the Kafka cluster id, and the topics."""
    return ServerInfo(
        version=__version__,
        commit=commit_id(),
        kafka_cluster_id=store.cluster_id,
        bootstrap_servers=store.bootstrap_servers,
        status_topic=store.config.topic,
        config_topic=store.config.config_topic,
        embedded_broker=store.config.embedded,
        instance=agents.instance,
        agent_protocol=PROTOCOL,
        write_bound_ms=store.config.retry.delivery_timeout_ms,
    )


@router.get("/health", response_model=Health)
async def health() -> Health:
    """Liveness: the process is up and serving requests."""
    return Health(status="healthy", message="status-store has completed startup and is serving requests.")


@router.get("/ready", response_model=Readiness, responses={503: {"model": ErrorBody}})
async def ready(store: StoreDep, config_topic: ConfigTopicDep) -> Readiness:
    """Readiness: the spool, when one is configured, takes writes, and a fresh Fetch from every partition shows the
    cache has caught up with the status topic (and with Connect's config topic, when one is configured). ``degraded``
    (200) while accepted writes a start found lost in the spool are not acknowledged (``DELETE /spool/loss``)."""
    spool = store.spool
    if spool is not None and not spool.writable:
        raise ApiError(503, f"Not ready: the spool ({spool.path}) cannot be written ({spool.failure}); writes are "
                            f"refused until it can (status_spool_writable)")
    topic, reader = "status topic", "store"
    try:
        await store.read_to_end(READY_TIMEOUT_S)
        if config_topic is not None:
            topic, reader = "config topic", "config topic's reader"
            await config_topic.read_to_end(READY_TIMEOUT_S)
    except (TimeoutError, StoreClosedError) as e:
        reason = f"the {reader} is stopped" if isinstance(e, StoreClosedError) else (
            f"the {topic} was not read to its end within {READY_TIMEOUT_S:g} s (are the brokers reachable?)")
        # A refused login or certificate is why, when one is seen now.
        problem = security_failures.current()
        if problem is not None and not isinstance(e, StoreClosedError):
            reason = f"the {topic} was not read to its end within {READY_TIMEOUT_S:g} s: {problem.explanation}"
        raise ApiError(503, f"Not ready: {reason}") from None
    losses = spool.losses if spool is not None else []
    if losses:
        # Ready all the same: taking the pod out of its Service (the Connect worker with it, in a sidecar pod) would
        # turn a past loss into a present outage and bring nothing back (docs/operations.md, "The spool").
        return Readiness(status="degraded", message="Ready, but the spool lost accepted writes: " + "; ".join(
            loss.describe() for loss in losses) + ". Acknowledge with DELETE /spool/loss once handled.")
    return Readiness(status="ready", message="The brokers answer and the cache has caught up with the topics.")
