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

With ``timed`` set, the connections made from then on also note each request's answer (``answers``): when the proxy
sent the request on, when the broker's answer came back, and whether another request of that connection was still
unanswered when it was sent (a broker reads a connection's next request only once it has answered the one before).

It runs an event loop of its own in a thread, so synchronous tests and benchmarks can use it.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3


# Answers kept per proxy (the oldest go first), and requests of one connection awaiting theirs (a Produce request with
# acks=0 is never answered, and is not awaited).
KEPT_ANSWERS = 200_000
AWAITED_PER_CONNECTION = 1_000
# A timed connection's requests awaiting their answers, by correlation id: (client, API key, sent on, behind another).
Awaited = dict[int, tuple[str, int, float, bool]]


@dataclass(frozen=True, slots=True)
class Answer:
    """A request the broker answered, as the proxy saw it (``time.monotonic()`` seconds)."""

    client: str
    api_key: int
    sent: float  # the proxy sent it on to the broker
    answered: float  # the broker's answer reached the proxy
    behind: bool  # another request of its connection was unanswered when it was sent

    @property
    def seconds(self) -> float:
        return self.answered - self.sent


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
        # Whether connections made from now on note their answers (``answers``).
        self.timed = False
        self._answers: collections.deque[Answer] = collections.deque(maxlen=KEPT_ANSWERS)
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

    def answers(self, api_key: int, client_ids: Iterable[str] | None = None, since: float = 0.0) -> list[Answer]:
        """The answers to one API's requests sent on since ``since`` (``time.monotonic()``), of every client or of
        those whose id is in ``client_ids``, on the connections made while ``timed`` was set."""
        wanted = set(client_ids) if client_ids is not None else None
        with self._lock:
            return [answer for answer in self._answers if answer.api_key == api_key and answer.sent >= since
                    and (wanted is None or answer.client in wanted)]

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
        awaited: Awaited | None = {} if self.timed else None
        try:
            await asyncio.gather(self._requests(client_reader, broker_writer, awaited),
                                 self._responses(broker_reader, client_writer, awaited))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for writer in (client_writer, broker_writer):
                self._connections.discard(writer)
                writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        awaited: Awaited | None) -> None:
        while True:
            size_bytes = await reader.readexactly(4)
            (size,) = struct.unpack(">i", size_bytes)
            body = await reader.readexactly(size)
            api_key, version, correlation, client_length = struct.unpack(">hhih", body[:10])
            client = body[10:10 + client_length].decode("utf-8", "replace") if client_length >= 0 else ""
            assert self._flowing is not None
            await self._flowing.wait()  # a black hole holds it: nothing goes through, the connection stays open
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            with self._lock:
                self._counts[(client, api_key)] += 1
            if awaited is not None and is_answered(api_key, version, body, 10 + max(client_length, 0)):
                if len(awaited) >= AWAITED_PER_CONNECTION:
                    del awaited[next(iter(awaited))]
                awaited[correlation] = (client, api_key, time.monotonic(), bool(awaited))
            writer.write(size_bytes + body)
            await writer.drain()

    async def _responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         awaited: Awaited | None) -> None:
        framing = _Framing()
        while True:
            data = await reader.read(65536)
            if not data:
                raise OSError("the broker closed the connection")
            if awaited is not None:
                self._note_answers(data, framing, awaited)
            assert self._answering is not None
            await self._answering.wait()
            writer.write(data)
            await writer.drain()

    def _note_answers(self, data: bytes, framing: _Framing, awaited: Awaited) -> None:
        """Note each answer whose head (size, correlation id) is in ``data``, the broker's bytes as they come."""
        now, at = time.monotonic(), 0
        while at < len(data):
            if framing.rest:  # the body of an answer already noted
                step = min(framing.rest, len(data) - at)
                framing.rest -= step
                at += step
                continue
            take = min(8 - len(framing.head), len(data) - at)
            framing.head += data[at:at + take]
            at += take
            if len(framing.head) < 8:
                break
            size, correlation = struct.unpack(">ii", framing.head)
            framing.head, framing.rest = b"", max(size - 4, 0)
            if (request := awaited.pop(correlation, None)) is not None:
                client, api_key, sent, behind = request
                with self._lock:
                    self._answers.append(Answer(client, api_key, sent, now, behind))


class _Framing:
    """Where a connection's answers are in the broker's bytes: the head of the next one read so far, and the bytes of
    the current one's body still to come."""

    __slots__ = ("head", "rest")

    def __init__(self) -> None:
        self.head, self.rest = b"", 0


def is_answered(api_key: int, version: int, body: bytes, offset: int) -> bool:
    """Whether the broker answers this request: every one but a Produce request with acks=0. ``offset``: where the
    request header's client id ends in ``body``."""
    if api_key != PRODUCE:
        return True
    try:
        if version >= 9:  # flexible: the header's tagged fields, then a compact nullable transactional id
            offset = _skip_tagged_fields(body, offset)
            length, offset = _varint(body, offset)
            offset += max(length - 1, 0)
        else:
            (length,) = struct.unpack_from(">h", body, offset)
            offset += 2 + max(length, 0)
        acks: int = struct.unpack_from(">h", body, offset)[0]
    except (struct.error, IndexError):
        return True  # not understood: awaited, and forgotten once the connection has many more
    return acks != 0


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """An unsigned varint at ``offset``, and the offset after it."""
    value = shift = 0
    while True:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def _skip_tagged_fields(data: bytes, offset: int) -> int:
    count, offset = _varint(data, offset)
    for _ in range(count):
        _, offset = _varint(data, offset)
        size, offset = _varint(data, offset)
        offset += size
    return offset
