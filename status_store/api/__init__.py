"""The HTTP API: FastAPI app, one router per resource (``routes/``), the status page (``ui/``), and the HTTP server's
bounds (``http_server``).

May import: the store, ``status_store.fleet``, ``status_store.retry`` (the update handles it answers with),
``status_store.connect``, ``status_store.errors``, ``status_store.logs``.
"""

from .app import create_app, openapi_document

__all__ = ["create_app", "openapi_document"]
