"""The ASGI middleware: Connect's path rules, request body limits, and HTTP request metrics with labels
from closed sets."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .responses import ApiError, send_error
from .routing import direct_routes, serve_directly

# A client that stops sending a body it announced is answered 408 after this long.
BODY_TIMEOUT_S = 30.0
# The error answers that leave a body unread close the connection: what follows on it is not a request.
_CLOSE = {"Connection": "close"}
# Label values must come from closed sets, or any client can make a series per request (a made-up
# method, a random path): methods outside this set count as "other", paths no route matches as "unmatched".
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"})
OTHER_METHOD = "other"
UNMATCHED_ROUTE = "unmatched"
# A request target in absolute form: scheme and authority before the path.
_ABSOLUTE_FORM = re.compile(rb"^[A-Za-z][A-Za-z0-9+.-]*://([^/]*)")
# The order in which Jersey's HashSet of allowed methods iterates (by String.hashCode), so that an OPTIONS answer's
# Allow header and body are Connect's, byte for byte.
_JERSEY_ORDER = ("HEAD", "DELETE", "POST", "GET", "OPTIONS", "PUT", "PATCH")



def _preferred_media_type(scope: Scope) -> str:
    """The media type the request's ``Accept`` prefers, as Jersey ranks them: the highest quality first, then the
    most specific (``a/b`` before ``a/*`` before ``*/*``), then the order given; ``*/*`` when there is none."""
    ranked: list[tuple[float, int, int, str]] = []
    for name, value in scope["headers"]:
        if name != b"accept":
            continue
        for entry in value.decode("latin-1").split(","):
            media_type, *parameters = (part.strip() for part in entry.split(";"))
            quality = 1.0
            for parameter in parameters:
                key, _, number = parameter.partition("=")
                if key.strip().lower() == "q":
                    try:
                        quality = float(number)
                    except ValueError:
                        quality = 0.0
            if media_type and quality > 0:
                wildcards = media_type.count("*")
                ranked.append((-quality, wildcards, len(ranked), media_type.lower()))
    return min(ranked)[3] if ranked else "*/*"

class ConnectHttp:
    """The HTTP rules around every request, in one ASGI middleware (nested ones would each add coroutine frames
    and a wrapped ``send`` to every request):

    - **Metrics**: ``http_requests_total`` and ``http_request_duration_seconds`` by method, route template and
      status, for every answer (the ones given here too).
    - **Connect's path rules**, which Starlette's router lacks. A path must be valid UTF-8 once
      percent-decoded, and must not encode a ``/`` (``%2F``): the server decodes the path before routing, so
      ``a%2Fstatus`` would address another resource. Both are 400 (Jetty 12, Connect's server since Kafka 4,
      refuses an encoded ``/`` too), so a connector name with a ``/`` is refused everywhere (the batch refuses
      it as well). An empty segment (``//``) is 400 too, as Jetty 12 answers it. A trailing slash is served as
      the path without it (Connect serves ``/connectors/``), never redirected: a redirect would be built from
      the client's ``Host`` header. ``HEAD`` is answered wherever ``GET`` is: the ``GET`` answer without its
      body. ``OPTIONS`` is answered wherever a route serves the path, as Jersey answers it in Connect: 200 with
      ``Allow`` (and the same list as text when the client takes ``text/plain``).
    - **Body limits**: 413 (Connect's error body) for a request body larger than ``max_bytes``, whether
      announced by ``Content-Length`` or streamed (chunked), and 408 when the body does not arrive within
      ``timeout_s``.
    - **The hot writes' fast lane**: a request of a write route with a fixed path that is ``served_directly``
      (``routing.direct_routes``: an agent's, a batch) is served by ``routing.serve_directly``, past the router and
      the exception middleware, with the same checks and the same answers.
    """

    def __init__(self, app: ASGIApp, registry: CollectorRegistry, max_bytes: int, served: Sequence[BaseRoute] = (),
                 timeout_s: float = BODY_TIMEOUT_S) -> None:
        """``served``: the routes of what the app serves, each as a path and methods (for OPTIONS)."""
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s
        self.served = served
        self.direct = direct_routes(served)
        self.requests = Counter("http_requests", "HTTP requests answered.", ["method", "route", "status"],
                                registry=registry)
        self.duration = Histogram("http_request_duration_seconds", "Time to answer an HTTP request.",
                                  ["method", "route"], registry=registry,
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30))
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._durations: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"]
        head = method == "HEAD"
        status = 500

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            await self._serve(scope, receive, answer)
        finally:
            self._record(method, scope, status, time.perf_counter() - started)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The path rules and the announced body size, then the app on the body limits."""
        # httpx's ASGI transport passes the query in raw_path; servers do not.
        raw_path = (scope.get("raw_path") or scope["path"].encode()).partition(b"?")[0]
        absolute = _ABSOLUTE_FORM.match(raw_path)
        if absolute is not None:
            # A request target in absolute form (RFC 9112 3.2.2: what a client sends a proxy; a server must take it):
            # routed by its path, as Connect's server (Jetty 12) routes it, when its authority is the Host header's;
            # else Jetty's 400. uvicorn took the whole target for the path.
            host = next((value for name, value in scope["headers"] if name == b"host"), b"")
            if absolute.group(1).lower() != host.lower():
                await send_error(send, 400, "Authority!=Host")
                return
            raw_path = raw_path[absolute.end():] or b"/"
            scope["raw_path"], scope["path"] = raw_path, unquote_to_bytes(raw_path).decode("utf-8", "replace")
        problem = path_problem(raw_path)
        if problem is not None:
            await send_error(send, 400, problem)
            return
        path = scope["path"]
        if len(path) > 1 and path.endswith("/"):
            scope["path"], scope["raw_path"] = path[:-1], raw_path[:-1]
        if scope["method"] == "OPTIONS" and await self._options(scope, send):
            return
        declared = next((value for name, value in reversed(scope["headers"]) if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(send, 413, self._too_large_message(), _CLOSE)
            return
        if scope["method"] != "HEAD":
            receive = self._limited(receive)
            route = self.direct.get((scope["method"], scope["path"]))
            if route is not None:
                again = await serve_directly(route, scope, receive, send)
                if again is None:
                    return
                receive = again
            await self.app(scope, receive, send)
            return
        # The scope is changed in place (not copied) so that the route the router finds stays visible to the
        # metrics; the method is restored for everything outside.
        scope["method"] = "GET"
        try:
            await self.app(scope, self._limited(receive), send)
        finally:
            scope["method"] = "HEAD"

    async def _options(self, scope: Scope, send: Send) -> bool:
        """Answer OPTIONS as Jersey's default does in Connect: 200, ``Allow`` listing the methods the path's routes
        take (``HEAD`` with ``GET``, and ``OPTIONS``), the same list as the body when the client takes text
        prefers text (its most preferred type is ``text/plain``, ``text/*`` or ``*/*``, or it sends no ``Accept``),
        else an empty body labelled with the type it prefers. False for a path no route serves: the app answers
        (404, or 501 for Connect's routes status-store does not serve)."""
        methods: set[str] = set()
        for route in self.served:
            if route.matches(scope)[0] is not Match.NONE:
                methods.update(getattr(route, "methods", None) or ())
                scope.setdefault("route", route)  # the metrics' label
        if not methods:
            return False
        if "GET" in methods:
            methods.add("HEAD")
        allowed = [method for method in _JERSEY_ORDER if method in methods or method == "OPTIONS"]
        headers = [(b"allow", ",".join(allowed).encode())]
        body = b""
        preferred = _preferred_media_type(scope)
        if preferred in ("*/*", "text/*", "text/plain"):
            body = ", ".join(allowed).encode()
            headers.append((b"content-type", b"text/plain"))
        else:
            headers.append((b"content-type", preferred.encode("latin-1")))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return True

    def _limited(self, receive: Receive) -> Receive:
        """``receive`` within the body limits."""
        received = 0
        complete = False
        deadline: float | None = None

        async def limited_receive() -> Message:
            nonlocal received, complete, deadline
            if complete:
                return await receive()
            if deadline is None:
                deadline = asyncio.get_running_loop().time() + self.timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise ApiError(408, f"The request body did not arrive within {self.timeout_s:g} s", _CLOSE) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # An HTTPException: FastAPI passes it on from its body reading instead of answering 400.
                    raise ApiError(413, self._too_large_message(), _CLOSE)
                complete = not message.get("more_body", False)
            return message

        return limited_receive

    def _too_large_message(self) -> str:
        return f"The request body is larger than {self.max_bytes} bytes"

    def _record(self, method: str, scope: Scope, status: int, seconds: float) -> None:
        """Counts an answer and its duration, with labels from closed sets."""
        method = method if method in KNOWN_METHODS else OTHER_METHOD
        # The router leaves the matched route in the scope; a request answered before routing has none.
        route = getattr(scope.get("route"), "path", UNMATCHED_ROUTE)
        key = (method, route, str(status))
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = self.requests.labels(*key)
        counter.inc()
        duration = self._durations.get(key[:2])
        if duration is None:
            duration = self._durations[key[:2]] = self.duration.labels(method, route)
        duration.observe(seconds)


def climbs_above_root(raw_path: bytes) -> bool:
    """Whether the path's plain ".." segments, resolved (RFC 3986 5.2.4), would climb above the root. Jetty 12
    refuses such a path; it routes others as they are (``/connectors/./status`` names the connector ".")."""
    depth = 0
    for segment in raw_path.split(b"/")[1:]:
        if segment == b"..":
            depth -= 1
            if depth < 0:
                return True
        elif segment != b".":
            depth += 1
    return False


def path_problem(raw_path: bytes) -> str | None:
    """Why a raw (percent-encoded) request path cannot address a resource; None when it can."""
    lowered = raw_path.lower()
    if b"%2f" in lowered:
        return "The path must not contain an encoded '/' (%2F): names with '/' cannot be addressed"
    # Jetty 12's URI checks, in Jetty's words (Connect's server refuses these before any route): an empty segment
    # (the path that would name the connector ""), an encoded "." or ".." segment (plain ones name what they say,
    # unless they climb above the root), a backslash, encoded or not.
    if b"//" in raw_path:
        return "Ambiguous URI empty segment"
    if b"%2e" in lowered and any(unquote_to_bytes(segment) in (b".", b"..") for segment in raw_path.split(b"/")):
        return "Ambiguous URI path segment"
    if b"/.." in raw_path and climbs_above_root(raw_path):
        return "Bad URI: the path climbs above its root"
    if b"\\" in raw_path or b"%5c" in lowered:
        return "Suspicious Path Character"
    if b"%00" in raw_path:
        return "The path must not contain a NUL character (%00)"
    try:
        unquote_to_bytes(raw_path).decode("utf-8")
    except UnicodeDecodeError:
        return "The path is not valid UTF-8 once percent-decoded"
    return None

