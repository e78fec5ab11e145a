"""A fault-injecting TCP proxy in front of a Kafka broker, that also counts the requests it forwards.

Brokers advertise the proxy's address to clients (``KafkaCluster(..., proxied=True)``), so every client
connection to a broker goes through it, while the brokers replicate to each other directly. The proxy reads
each request's header (Kafka's request header: size, API key, API version, correlation id, client id) to
count requests by client id and API key, and can:

- ``set_fault(Fault.REFUSE)``: close new connections at once (a broker whose port is closed);
- ``set_fault(Fault.BLACKHOLE)``: keep connections open and forward nothing either way (a broker that hangs,
  a network partition: clients see timeouts, not errors);
- ``set_fault(Fault.UNANSWERED)``: forward requests, hold the broker's answers (a broker whose answers are slow to
  come: what a client sends while one is unanswered reaches the broker);
- ``delay``: hold each request this long before forwarding it;
- ``cut``: close every connection now (what a broker's crash looks like to its clients).

It runs an event loop of its own in a thread, so synchronous tests and benchmarks can use it.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import struct
import threading
from collections.abc import Iterable

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3


class Fault(enum.Enum):
    """What the proxy does to new connections and requests."""

    NONE = "none"
    REFUSE = "refuse"
    BLACKHOLE = "blackhole"
    UNANSWERED = "unanswered"


class KafkaProxy:
    """A proxy on 127.0.0.1 in front of the broker at 127.0.0.1:``upstream_port``."""

    def __init__(self, upstream_port: int, port: int) -> None:
        self.upstream_port, self.port = upstream_port, port
        self.fault = Fault.NONE
        self.delay_s = 0.0
        # Set while traffic flows; cleared while the proxy is a black hole (on the proxy's loop).
        self._flowing: asyncio.Event | None = None
        # Set while the broker's answers flow; cleared while they are held (a black hole, or unanswered).
        self._answering: asyncio.Event | None = None
        self._counts: collections.Counter[tuple[str, int]] = collections.Counter()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    # ----------------------------------------------------------------------------- control (any thread)

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name=f"kafka-proxy-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise TimeoutError(f"the proxy on port {self.port} did not start")

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def set_fault(self, fault: Fault) -> None:
        """Refuse new connections, hold all traffic, hold the answers, or none of these."""
        self.fault = fault
        if self._loop is not None and self._flowing is not None and self._answering is not None:
            flowing, answering = self._flowing, self._answering
            self._loop.call_soon_threadsafe(flowing.clear if fault is Fault.BLACKHOLE else flowing.set)
            self._loop.call_soon_threadsafe(
                answering.clear if fault in (Fault.BLACKHOLE, Fault.UNANSWERED) else answering.set)

    def cut(self) -> None:
        """Close every open connection (new ones are accepted unless a fault says otherwise)."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result(10)

    def counts(self) -> dict[tuple[str, int], int]:
        """Requests forwarded so far, by (client id, API key)."""
        with self._lock:
            return dict(self._counts)

    def requests(self, api_key: int, client_ids: Iterable[str] | None = None) -> int:
        """Requests of one API forwarded so far, of every client or of those whose id is in ``client_ids``."""
        wanted = set(client_ids) if client_ids is not None else None
        return sum(n for (client, key), n in self.counts().items()
                   if key == api_key and (wanted is None or client in wanted))

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()

    # ----------------------------------------------------------------------------- the proxy's loop

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._answering = asyncio.Event()
        self._answering.set()
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _cut(self) -> None:
        for writer in list(self._connections):
            writer.transport.abort()
        self._connections.clear()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.fault is Fault.REFUSE:
            client_writer.transport.abort()
            return
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_writer.transport.abort()
            return
        self._connections.update((client_writer, broker_writer))
        try:
            await asyncio.gather(self._requests(client_reader, broker_writer),
                                 self._responses(broker_reader, client_writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for writer in (client_writer, broker_writer):
                self._connections.discard(writer)
                writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            size_bytes = await reader.readexactly(4)
            (size,) = struct.unpack(">i", size_bytes)
            body = await reader.readexactly(size)
            api_key, _, _, client_length = struct.unpack(">hhih", body[:10])
            client = body[10:10 + client_length].decode("utf-8", "replace") if client_length >= 0 else ""
            assert self._flowing is not None
            await self._flowing.wait()  # a black hole holds it: nothing goes through, the connection stays open
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            with self._lock:
                self._counts[(client, api_key)] += 1
            writer.write(size_bytes + body)
            await writer.drain()

    async def _responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                raise OSError("the broker closed the connection")
            assert self._answering is not None
            await self._answering.wait()
            writer.write(data)
            await writer.drain()
