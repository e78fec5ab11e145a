"""The HTTP API: FastAPI app, one router per resource."""

from .app import create_app, openapi_document

__all__ = ["create_app", "openapi_document"]
