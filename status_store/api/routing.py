"""The route class of every endpoint: a write is authenticated, and its media type checked, before its
body is read; the hot writes' common requests are served without FastAPI's parameter solving, and those of a write
route with a fixed path (``POST /agent/statuses``, ``POST /agent/wake``, ``POST /statuses``) without the router either
(``serve_directly``).

FastAPI reads and parses a request's body before it solves the route's dependencies, so a token
checked in a dependency would come after the JSON parser had spoken (and worked) for anyone. Here
the checks wrap the route's handler, which runs before the body is read.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

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
# An exception handler of the app.
Handled = Callable[[Request, Exception], Awaitable[Response]]
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


def direct_routes(routes: Iterable[object]) -> dict[tuple[str, str], ConnectRoute]:
    """The write routes ``served_directly`` whose path has no parameters, by method and path: ``ConnectHttp`` hands
    their requests to ``serve_directly``."""
    return {(method, route.path): route for route in routes
            if isinstance(route, ConnectRoute) and "{" not in route.path and route.methods
            and not route.methods <= READ_METHODS and getattr(route.endpoint, _DIRECT_ARGUMENTS, None) is not None
            for method in route.methods}


async def serve_directly(route: ConnectRoute, scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """Serve a request of ``route`` (one of ``direct_routes``) without the router, the exception middleware and
    FastAPI's request handler, each of which a request of the hot path paid for in coroutine frames, wrapped sends
    and objects: the checks of ``ConnectRoute`` (token, media type), then the endpoint's arguments read by its
    ``served_directly`` function, then the endpoint. An error is answered by the app's handler for it, as the exception
    middleware answers it (one with no handler but the catch-all goes on up, as it does from there). None once
    answered; when the request is not a common one (its arguments read as None), a ``receive`` that gives its body
    again, for the app to serve the request as it serves any other."""
    arguments: DirectArguments = getattr(route.endpoint, _DIRECT_ARGUMENTS)
    scope["route"], scope["endpoint"], scope["path_params"] = route, route.endpoint, {}
    request = Request(scope, receive)
    try:
        authenticate(request)
        require_json(request)
        direct = await arguments(request)
        if direct is None:
            return _again(await request.body(), receive)
        response: Response = await route.endpoint(**direct)
    except Exception as error:
        handler = _handler(scope["app"].exception_handlers, error)
        if handler is None:
            raise
        response = await handler(request, error)
        error.__traceback__ = None  # as Starlette does: an instance raised again keeps no old tracebacks
    await response(scope, receive, send)
    return None


def _handler(handlers: dict[Any, Handled], error: Exception) -> Handled | None:
    """The app's handler of ``error`` as Starlette's exception middleware finds it: an ``HTTPException``'s by its
    status, then by the error's classes in order, where the catch-all (``Exception``, 500) is not one of them (that one
    answers further up, in Starlette's server error middleware)."""
    if isinstance(error, HTTPException) and error.status_code in handlers and error.status_code != 500:
        return handlers[error.status_code]
    for kind in type(error).__mro__:
        if kind is Exception:
            return None
        if kind in handlers:
            return handlers[kind]
    return None


def _again(body: bytes, receive: Receive) -> Receive:
    """``receive`` whose first message is the whole body, read already."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


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
