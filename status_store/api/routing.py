"""The route class of every endpoint: a write is authenticated, and its media type checked, before its
body is read; the hot writes' common requests are served without FastAPI's parameter solving.

FastAPI reads and parses a request's body before it solves the route's dependencies, so a token
checked in a dependency would come after the JSON parser had spoken (and worked) for anyone. Here
the checks wrap the route's handler, which runs before the body is read.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute

from ..logs import RateLimit
from .credentials import WriteTokens
from .responses import ApiError

log = logging.getLogger(__name__)

# Routes for these methods only read; every other route writes.
READ_METHODS = frozenset({"GET", "HEAD"})
# A refused token is logged at most once per this many seconds (a client can be refused at will).
REFUSED_LOG_INTERVAL_S = 10.0

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
# Reads an endpoint's arguments from a request, or None for a request FastAPI is to read (see served_directly).
DirectArguments = Callable[[Request], Awaitable[dict[str, Any] | None]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])
_DIRECT_ARGUMENTS = "direct_arguments"
_READS_CONFIGURATIONS = "reads_configurations"


def reads_configurations(endpoint: Endpoint) -> Endpoint:
    """Marks a read endpoint that answers connector configurations, which may hold credentials: it needs the
    bearer token when one is configured, as writes do."""
    setattr(endpoint, _READS_CONFIGURATIONS, True)
    return endpoint


def served_directly(arguments: DirectArguments) -> Callable[[Endpoint], Endpoint]:
    """Marks a write endpoint whose common requests its route serves without FastAPI's request handler:
    ``arguments`` reads the endpoint's arguments from the request itself (FastAPI solves dependencies,
    parses JSON and then validates it, matches parameters one by one: a third of a small write's cost).
    When ``arguments`` answers None (anything but the common request, e.g. a body that does not validate),
    FastAPI's handler serves the request, so every error answer is FastAPI's own. The endpoint's signature
    still declares its parameters and body: it is what the OpenAPI document describes, and what FastAPI
    reads for the other requests."""

    def mark(endpoint: Endpoint) -> Endpoint:
        setattr(endpoint, _DIRECT_ARGUMENTS, arguments)
        return endpoint

    return mark


class ConnectRoute(APIRoute):
    """An API route; a write route checks, before the body is read: the bearer token when one is
    configured (401), then that a body is JSON (415, as Connect's JAX-RS resources answer). An endpoint
    ``served_directly`` gets its common requests' arguments without FastAPI's handler. A read route that
    ``reads_configurations`` checks the token too."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()
        if self.methods is None or self.methods <= READ_METHODS:
            if not getattr(self.endpoint, _READS_CONFIGURATIONS, False):
                return handler

            async def authenticated_handler(request: Request) -> Response:
                authenticate(request)
                return await handler(request)

            return authenticated_handler
        endpoint = self.endpoint
        direct_arguments: DirectArguments | None = getattr(endpoint, _DIRECT_ARGUMENTS, None)

        async def checked_handler(request: Request) -> Response:
            authenticate(request)
            require_json(request)
            if direct_arguments is not None:
                # The body read here stays in the request for FastAPI's handler when it serves the request.
                arguments = await direct_arguments(request)
                if arguments is not None:
                    response: Response = await endpoint(**arguments)
                    return response
            return await handler(request)

        return checked_handler


def authenticate(request: Request) -> None:
    """Writes and configuration reads need ``Authorization: Bearer <token>`` when a token is configured (compared
    in constant time). A refusal is logged, rate-limited."""
    tokens: WriteTokens = request.app.state.token
    if not tokens.required:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and tokens.accepts(given.strip()):
        return
    limit: RateLimit = request.app.state.refused_log
    client = request.client.host if request.client is not None else "unknown"
    limit.log(log, logging.WARNING, "Refused %s %s from %s: %s", request.method, request.scope["path"], client,
              "wrong bearer token" if scheme.lower() == "bearer" else "no bearer token")
    raise ApiError(401, "A valid bearer token is required for writes and configuration reads",
                   {"WWW-Authenticate": "Bearer"})


def require_json(request: Request) -> None:
    """A request body must be JSON (``application/json`` or ``application/*+json``): 415 otherwise."""
    headers = request.headers
    if headers.get("content-length", "0").strip("0") == "" and "transfer-encoding" not in headers:
        return
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    kind, _, subtype = media_type.partition("/")
    if kind != "application" or not (subtype == "json" or subtype.endswith("+json")):
        raise ApiError(415, "HTTP 415 Unsupported Media Type")
