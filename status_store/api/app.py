"""The FastAPI application: routers per resource, Connect's error bodies, limits and metrics."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry
from starlette.exceptions import HTTPException

from .. import __version__
from ..store import StatusStore
from .middleware import BodyLimit, HttpMetrics
from .responses import (
    ApiError,
    api_error_handler,
    http_error_handler,
    unexpected_error_handler,
    validation_error_handler,
)
from .routes import connectors, metrics, retries, server, statuses, topics

DEFAULT_MAX_BODY_BYTES = 1 << 20


def create_app(store: StatusStore | None, registry: CollectorRegistry | None = None, token: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The HTTP API over a started store (None only to render the OpenAPI document).

    ``token``: when set, every write needs ``Authorization: Bearer <token>``; reads stay open, as
    Connect's status endpoints are.
    """
    app = FastAPI(
        title="status-store",
        version=__version__,
        description="Kafka Connect's status backing store as a sidecar service: Connect's status endpoints, "
                    "write endpoints for the worker beside it, and operations endpoints. Errors use Connect's "
                    'body, {"error_code": ..., "message": ...}.',
    )
    app.state.store = store
    app.state.registry = registry if registry is not None else CollectorRegistry()
    app.state.token = token
    for router in (server.router, connectors.router, topics.router, statuses.router, retries.router,
                   metrics.router):
        app.include_router(router)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(HttpMetrics, registry=app.state.registry)
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the API, as written to ``api/openapi.json``."""
    return create_app(None).openapi()
