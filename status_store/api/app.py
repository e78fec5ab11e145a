"""The FastAPI application: routers per resource, Connect's error bodies, limits and metrics."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry
from starlette.exceptions import HTTPException
from starlette.routing import Route

from .. import __version__
from ..act.actions import Actions
from ..agents import AgentsCollector, AgentSessions
from ..errors import RecordTooLargeError, StoreClosedError, WriteRejectedError
from ..fleet.config_topic import ConfigTopic
from ..fleet.events import EventsCollector, StatusEvents
from ..logs import RateLimit
from ..store import StatusStore
from .credentials import WriteTokens
from .http_server import ClosedConnections, connection_limit
from .middleware import ConnectHttp
from .responses import (
    http_error_handler,
    record_too_large_handler,
    store_closed_handler,
    unexpected_error_handler,
    validation_error_handler,
    write_rejected_handler,
)
from .routes import (
    agent,
    connectors,
    events,
    health,
    history,
    metrics,
    not_served,
    retries,
    server,
    spool,
    statuses,
    topics,
    ui,
)
from .routes.docs import docs_router
from .routing import REFUSED_LOG_INTERVAL_S
from .shared_answers import SharedAnswers, SharedAnswersCollector

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1 << 20


def create_app(store: StatusStore | None, registry: CollectorRegistry | None = None,
               token: str | WriteTokens | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, config_topic: ConfigTopic | None = None,
               status_events: StatusEvents | None = None, actions: Actions | None = None,
               docs: bool = False) -> FastAPI:
    """The HTTP API over a started store (None only to render the OpenAPI document).

    ``token``: when set (a token, or ``WriteTokens`` read from a file), every write needs
    ``Authorization: Bearer <token>``; reads stay open, as Connect's status endpoints are. ``config_topic``:
    Connect's config topic, started, when configured.
    ``status_events``: the store's status changes for ``GET /events``, attached before the store started
    (then a client can resume across a restart); without it they are kept from now on. ``actions``: what the
    sidecar acts on (workers gone, auto-restart, health words) for ``/fleet`` and ``/fleet/health``. ``docs``:
    serve the documentation pages (``sidecar.rest.docs.enable``, see ``routes/docs.py``).
    """
    app = FastAPI(
        title="status-store",
        version=__version__,
        description="Kafka Connect's status backing store as a sidecar service: Connect's status endpoints, "
                    "Connect's connector endpoints from its config topic when one is configured, "
                    "write endpoints for the worker beside it, and operations endpoints. Errors use Connect's "
                    'body, {"error_code": ..., "message": ...}.',
        docs_url=None, redoc_url=None,
    )
    app.state.store = store
    app.state.config_topic = config_topic
    app.state.actions = actions
    if status_events is None and store is not None:
        status_events = store_events(store, from_start=False)
    app.state.events = status_events
    app.state.events_heartbeat_s = store.config.events_heartbeat_ms / 1000 if store is not None else None
    app.state.registry = registry if registry is not None else CollectorRegistry()
    if status_events is not None:
        app.state.registry.register(EventsCollector(status_events))
    app.state.closed_connections = ClosedConnections()
    app.state.registry.register(app.state.closed_connections)
    app.state.shared_answers = SharedAnswers()
    app.state.registry.register(SharedAnswersCollector(app.state.shared_answers))
    app.state.token = token if isinstance(token, WriteTokens) else WriteTokens(token)
    app.state.agents = AgentSessions()
    app.state.registry.register(AgentsCollector(app.state.agents))
    app.state.refused_log = RateLimit(REFUSED_LOG_INTERVAL_S)
    # Connect serves a path with a trailing slash as the path without it (ConnectHttp), never a redirect.
    app.router.redirect_slashes = False
    # Routes are tried in order: the routers of the hot writes first (no two routers' paths overlap).
    served: tuple[APIRouter, ...] = (connectors.router, statuses.router, agent.router, server.router, topics.router,
                                     retries.router, metrics.router, events.router, ui.router, health.router,
                                     history.router, spool.router)
    if docs:
        served = (*served, docs_router(app.openapi_url or "/openapi.json"))
    for router in (*served, not_served.router):
        app.include_router(router)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(WriteRejectedError, write_rejected_handler)
    app.add_exception_handler(RecordTooLargeError, record_too_large_handler)
    app.add_exception_handler(StoreClosedError, store_closed_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
    # What OPTIONS lists: the routes of what is served, and FastAPI's own (the OpenAPI document and its pages).
    served_routes = [route for router in served for route in router.routes]
    served_routes += [route for route in app.router.routes if isinstance(route, Route)]
    app.add_middleware(ConnectHttp, registry=app.state.registry, max_bytes=max_body_bytes, served=served_routes)
    fastapi_openapi = app.openapi
    app.openapi = lambda: with_connect_error_bodies(fastapi_openapi())  # type: ignore[method-assign]
    return app


def store_events(store: StatusStore, from_start: bool) -> StatusEvents:
    """The store's status changes as its configuration bounds them (``from_start``: the store has read nothing yet).

    Event streams take at most half the HTTP connection limit, whatever ``sidecar.events.subscribers.max`` says:
    the rest stays for the probes and the writes."""
    config = store.config
    max_subscribers = min(config.events_subscribers_max, max(1, connection_limit() // 2))
    if max_subscribers < config.events_subscribers_max:
        log.info("GET /events takes %d clients at most, half the HTTP connection limit (the limit of open files "
                 "lowers it), not sidecar.events.subscribers.max=%d", max_subscribers, config.events_subscribers_max)
    return StatusEvents(store.cache, config.events_buffer_max, config.events_subscriber_queue_max, from_start,
                        config.events_buffer_max_bytes, max_subscribers, config.events_stream_max_ms / 1000)


def with_connect_error_bodies(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with Connect's error body for 422, where FastAPI documents its own
    ``{"detail": [...]}`` (the live answer is Connect's body). Changes ``document`` in place."""
    error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for operations in document["paths"].values():
        for operation in operations.values():
            invalid = operation.get("responses", {}).get("422")
            if invalid is not None:
                invalid["content"] = error_body
    for fastapi_body in ("HTTPValidationError", "ValidationError"):
        document["components"]["schemas"].pop(fastapi_body, None)
    return document


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the API, as written to ``api/openapi.json``."""
    return create_app(None).openapi()
