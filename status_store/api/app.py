"""The FastAPI application."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from .. import __version__
from ..store import StatusStore
from .routes import server


def create_app(store: StatusStore | None) -> FastAPI:
    """The HTTP API over a started store (None only to render the OpenAPI document)."""
    app = FastAPI(
        title="status-store",
        version=__version__,
        description="Kafka Connect's status backing store as a sidecar service.",
    )
    app.state.store = store
    app.include_router(server.router)
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the API, as written to ``api/openapi.json``."""
    return create_app(None).openapi()
