"""The FastAPI application."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from .. import __version__
from ..store import StatusStore
from .routes import metrics, server


def create_app(store: StatusStore | None, registry: CollectorRegistry | None = None) -> FastAPI:
    """The HTTP API over a started store (None only to render the OpenAPI document) and its metrics."""
    app = FastAPI(
        title="status-store",
        version=__version__,
        description="Kafka Connect's status backing store as a sidecar service.",
    )
    app.state.store = store
    app.state.registry = registry if registry is not None else CollectorRegistry()
    app.include_router(server.router)
    app.include_router(metrics.router)
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the API, as written to ``api/openapi.json``."""
    return create_app(None).openapi()
