"""A fault-injecting HTTP proxy in front of a sidecar (the agent's tests) or a Connect worker's REST API (auto-restart's
tests, which read the times of the requests it saw, ``seen``): each request is forwarded as it is, or
answered 503 (``Refusal.UNAVAILABLE``), or held for a while before it is forwarded (``delay_s``: a sidecar that
answers late), or its connection closed at once (``Refusal.CLOSE``: nothing listens).

One request per connection (``Connection: close`` both ways): the agent's client opens a connection per request.
It runs an event loop of its own in a thread, so synchronous tests can use it; stopped by ``close``.
"""

from __future__ import annotations

import asyncio
import enum
import threading
import time

from . import free_port

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


class Refusal(enum.Enum):
    """What the proxy does with a request."""

    NONE = "none"
    UNAVAILABLE = "unavailable"
    CLOSE = "close"


class HttpFaultProxy:
    """A proxy on 127.0.0.1 in front of the HTTP server at 127.0.0.1:``upstream_port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.refusal = Refusal.NONE
        self.delay_s = 0.0
        self.requests = 0
        # Each request's arrival (seconds since the epoch) and request line ("POST /connectors/c/restart HTTP/1.1").
        self.seen: list[tuple[float, str]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name=f"http-proxy-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the HTTP proxy did not start")

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    def __enter__(self) -> HttpFaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            if len(head) > MAX_HEAD:
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await asyncio.wait_for(reader.readexactly(min(length, MAX_BODY)), 30) if length else b""
            self.requests += 1
            self.seen.append((time.time(), head.split(b"\r\n", 1)[0].decode("latin-1")))
            refusal = self.refusal
            if refusal is Refusal.CLOSE:
                return
            if refusal is Refusal.UNAVAILABLE:
                message = b'{"error_code":503,"message":"unavailable (a test\'s proxy)"}'
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                             b"Connection: close\r\nContent-Length: " + str(len(message)).encode() + b"\r\n\r\n"
                             + message)
                await writer.drain()
                return
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            await self._forward(head, body, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            return
        finally:
            writer.close()

    async def _forward(self, head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        lines = [line for line in head.rstrip(b"\r\n").split(b"\r\n") if not line.lower().startswith(b"connection:")]
        request = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
        upstream_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
        try:
            upstream_writer.write(request)
            await upstream_writer.drain()
            while chunk := await asyncio.wait_for(upstream_reader.read(65536), 60):
                writer.write(chunk)
                await writer.drain()
        finally:
            upstream_writer.close()
