"""A fault-injecting HTTP proxy in front of a sidecar (the agent's tests, the fault matrix) or a Connect worker's REST
API (auto-restart's tests, which read the times of the requests it saw, ``seen``): each request is forwarded as it
is, or answered 503 (``Refusal.UNAVAILABLE``), or held for a while before it is forwarded (``delay_s``: a sidecar that
answers late; ``delays``: a worker slow to answer some requests, by the start of their request line), or its connection
closed at once (``Refusal.CLOSE``: nothing listens).

An agent's writes (``POST /agent/statuses``; every other request is forwarded) can be answered wrongly
(``answer_fault``), each the real fault on the wire:

- ``TRICKLE``: forwarded, and the sidecar's answer sent a byte every ``TRICKLE_S`` seconds;
- ``RESET``: forwarded (the sidecar takes the writes), then the agent's connection reset (a TCP RST) instead of the
  answer;
- ``WRONG_SHAPE``: not forwarded; a 200 of JSON the protocol does not allow (``accepted`` not a list);
- ``DEEP_JSON``: not forwarded; a 200 of JSON arrays nested ``DEEP_JSON_LEVELS`` deep;
- ``WRITTEN_UNTRULY``: not forwarded; a 200 saying every write ``written``;
- ``PENDING_FOREVER``: not forwarded; a 200 saying every write ``pending``, and never an outcome.

The lying answers carry the sidecar's real ``instance`` (asked of its ``GET /`` each time), so the agent takes them
for the sidecar's. One request per connection (``Connection: close`` both ways): the agent's client opens a connection
per request. It runs an event loop of its own in a thread, so synchronous tests can use it; stopped by ``close``.
"""

from __future__ import annotations

import asyncio
import enum
import json
import socket
import struct
import threading
import time
from typing import Any

from status_store.connect.model import TaskId, connector_key, task_key, topic_key

from . import free_port

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
AGENT_WRITES = b"POST /agent/statuses "
TRICKLE_S = 3.0
DEEP_JSON_LEVELS = 100_000


class Refusal(enum.Enum):
    """What the proxy does with a request."""

    NONE = "none"
    UNAVAILABLE = "unavailable"
    CLOSE = "close"


class AnswerFault(enum.Enum):
    """How the proxy answers an agent's writes (``POST /agent/statuses``); the module's docstring says each."""

    NONE = "none"
    TRICKLE = "trickle"
    RESET = "reset"
    WRONG_SHAPE = "wrong shape"
    DEEP_JSON = "deep JSON"
    WRITTEN_UNTRULY = "written untruly"
    PENDING_FOREVER = "pending forever"


class HttpFaultProxy:
    """A proxy on 127.0.0.1 in front of the HTTP server at 127.0.0.1:``upstream_port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.refusal = Refusal.NONE
        self.answer_fault = AnswerFault.NONE
        self.delay_s = 0.0
        # Requests whose request line starts with one of these are held this long (seconds) before they are forwarded.
        self.delays: dict[str, float] = {}
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

    def listen(self, on: bool) -> None:
        """Listen on the proxy's port (True, as from the start), or not at all (False): a connection is then refused,
        as it is where nothing listens. A proxy in front of a sidecar that is not running must not listen: one that
        accepts the connection and closes it once it finds no sidecar behind it tells the agent its request may have
        reached the sidecar, where a refused connection tells it surely not (agent/PROTOCOL.md, rule 3)."""
        loop = self._loop
        assert loop is not None, "the proxy is not running"
        asyncio.run_coroutine_threadsafe(self._listen(on), loop).result(10)

    async def _listen(self, on: bool) -> None:
        if on and self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        elif not on and self._server is not None:
            # Closed, not waited for: requests under way (a trickling answer) end as they would.
            self._server.close()
            self._server = None

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(self._stop_loop)
            thread.join(10)

    def _stop_loop(self) -> None:
        # Answers still trickling end with the proxy.
        assert self._loop is not None
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.stop()

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
            if self._server is not None:
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
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            self.seen.append((time.time(), request_line))
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
            held = next((seconds for start, seconds in list(self.delays.items())
                         if request_line.startswith(start)), 0.0)
            if held:
                await asyncio.sleep(held)
            fault = self.answer_fault if head.startswith(AGENT_WRITES) else AnswerFault.NONE
            if fault is AnswerFault.NONE:
                await self._forward(head, body, writer)
            else:
                await self._misanswer(fault, head, body, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            return
        finally:
            writer.close()

    async def _forward(self, head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await self._send_upstream(head, body)
        try:
            while chunk := await asyncio.wait_for(upstream_reader.read(65536), 60):
                writer.write(chunk)
                await writer.drain()
        finally:
            upstream_writer.close()

    async def _send_upstream(self, head: bytes, body: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        lines = [line for line in head.rstrip(b"\r\n").split(b"\r\n") if not line.lower().startswith(b"connection:")]
        request = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
        upstream_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
        upstream_writer.write(request)
        await upstream_writer.drain()
        return upstream_reader, upstream_writer

    async def _upstream(self, head: bytes, body: bytes) -> bytes:
        """The sidecar's whole answer to a request."""
        upstream_reader, upstream_writer = await self._send_upstream(head, body)
        try:
            return await asyncio.wait_for(upstream_reader.read(), 60)  # to its end: Connection: close
        finally:
            upstream_writer.close()

    async def _misanswer(self, fault: AnswerFault, head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        if fault is AnswerFault.TRICKLE:
            answer = await self._upstream(head, body)
            for byte in answer:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(TRICKLE_S)
            return
        if fault is AnswerFault.RESET:
            await self._upstream(head, body)
            # SO_LINGER with a zero timeout: closing the socket sends a RST, not a FIN.
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if fault is AnswerFault.DEEP_JSON:
            text = b"[" * DEEP_JSON_LEVELS + b"]" * DEEP_JSON_LEVELS
        else:
            text = json.dumps(lie(fault, await self._sidecar_instance(), json.loads(body))).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
                     + str(len(text)).encode() + b"\r\n\r\n" + text)
        await writer.drain()

    async def _sidecar_instance(self) -> str:
        """The sidecar's instance now (asked each time: a restarted sidecar has a new one)."""
        answer = await self._upstream(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n", b"")
        instance: str = json.loads(answer.partition(b"\r\n\r\n")[2])["instance"]
        return instance


def lie(fault: AnswerFault, instance: str, request: dict[str, Any]) -> dict[str, Any]:
    """The answer a lying sidecar gives to an agent's request (``WRONG_SHAPE``, ``WRITTEN_UNTRULY``,
    ``PENDING_FOREVER``): nothing of it was written."""
    updates = request.get("updates") or []
    if fault is AnswerFault.WRONG_SHAPE:
        return {"instance": instance, "accepted": "every update", "outcomes": []}
    accepted = [{"seq": update["seq"], "result": "pending"} for update in updates]
    if fault is AnswerFault.PENDING_FOREVER:
        return {"instance": instance, "accepted": accepted, "outcomes": []}
    assert fault is AnswerFault.WRITTEN_UNTRULY
    return {"instance": instance, "accepted": accepted,
            "outcomes": [{"seq": update["seq"], "key": _key(update), "result": "written", "attempts": 1}
                         for update in updates]}


def _key(update: dict[str, Any]) -> str:
    """The status key an agent's update writes (agent/PROTOCOL.md's kinds)."""
    if update["kind"] == "connector":
        return connector_key(update["connector"])
    if update["kind"] == "task":
        return task_key(TaskId(update["connector"], update["task"]))
    return topic_key(update["connector"], update["topic"])
