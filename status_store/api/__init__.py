"""The HTTP API: FastAPI app (``app``), one router per resource (``routes/``), the status page (``ui/``), and the HTTP
server's bounds (``http_server``) with its log limits (``http_logs``).

Their parts: ``routing`` (every endpoint's route class: a write authenticated and its media type checked first),
``middleware`` (Connect's path rules, body limits, request metrics), ``deps`` (what the routers share: the store, path
names, waiting for outcomes), ``schemas`` (the bodies, also the OpenAPI document's), ``responses`` (Connect's JSON, byte
for byte), ``shared_answers`` (the answers about the whole fleet, built off the event loop), ``credentials`` (the
REST API's TLS material and write credentials that rotate) and ``starting`` (the API while a topic the service needs
does not exist yet: it waits and says so).

May import: the store, ``status_store.fleet``, ``status_store.retry`` (the update handles it answers with),
``status_store.connect``, ``status_store.errors``, ``status_store.logs``.
"""

from .app import create_app, openapi_document

__all__ = ["create_app", "openapi_document"]
