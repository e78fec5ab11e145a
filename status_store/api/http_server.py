"""uvicorn, bounded against slow, idle and too many clients.

uvicorn reads a request's head (request line and headers) with no time limit, before any ASGI code
runs, and keeps every connection it accepts: clients that open connections and send half a request
hold a file descriptor each until the process runs out, and then nothing (``/health``, ``/ready``)
is answered any more. The bounds here:

- **Request head timeout** (``HEADER_TIMEOUT_S``): from when a connection is opened, and from each
  answer on it, the client has this long to send the next request's complete head (and the rest
  of a body the answer left unread); otherwise the connection is closed. A client that trickles
  bytes does not extend it.
- **Keep-alive timeout** (``KEEP_ALIVE_TIMEOUT_S``): an idle connection is closed after this long.
- **Request head size** (``MAX_HEADER_BYTES``): a longer head is answered 400 by h11.
- **Open connections** (``connection_limit()``): when a new connection would pass the limit, the
  connection that has waited longest for its request head is closed (the new one, if no other
  waits). A probe sends its request at once, so it is served while idle clients are shed; one whose
  request is in the kernel but not yet read by the loop (accepted in the same turn) looks idle, so
  the oldest few are looked at there first and a probe's passed over (``SHED_CANDIDATES``). When no
  other waits (every connection's request under way: a storm's, read while the probe waited in the
  listen backlog), a new connection whose request, already received, is a probe's (``GET`` or
  ``HEAD`` of ``/health`` or ``/ready``, over plain HTTP) is kept and answered, and one that has
  sent nothing yet is given ``HEAD_CHANCE_S`` to send a head (a probe accepted between its connect
  and its send), up to ``PROBES_PAST_LIMIT`` past the limit; any other is closed unread. (Keeping
  every request past the limit instead, tried on the storm test's 2,000 clients, had the sidecar
  answer all of them and take 37 s, against 20 s, to accept them, while a probe waited in the
  listen backlog.)
- **Write stall timeout** (``WRITE_STALL_TIMEOUT_S``): a connection whose client takes none of what is
  sent to it for this long (the send buffer stays above its high-water mark; an event stream to a client
  that stopped reading, an answer never read) is aborted, and so is one closed with data it cannot send
  after this long: neither holds its buffers and its file descriptor for as long as the client likes.
- **Accepts per loop turn** (``ACCEPTS_PER_TURN``), so the limit holds within a burst of connections.
- **Listen backlog** (``listen_backlog()``, set by ``BoundedServer``): the kernel's queue of connections it
  completed and the server has not yet accepted holds a burst of twice the connection limit (as much as the
  kernel allows), so the connections of a burst wait there while the loop is busy rather than being dropped.
- The error asyncio logs when ``accept()`` fails (out of file descriptors) with a traceback, up to
  ``ACCEPTS_PER_TURN`` times per loop turn, is logged at most once per ``LIMIT_LOG_INTERVAL_S``, as are
  uvicorn's warning per malformed request, the shedding of connections at the limit and the stalled
  connections aborted. ``http_connections_closed_total`` counts the connections closed by these bounds.

A request body is bounded in time and size by the ``ConnectHttp`` middleware.

What one turn of the event loop writes to a connection goes out in one write (``OneWritePerTurn``):
uvicorn writes an answer's head and its body separately, which costs every answer with a body two
``send`` calls and two TCP segments, each handled by the kernel, the client and its event loop. A complete
answer goes at once, before the app's coroutines unwind and its metrics are counted.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import resource
import socket
import ssl
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import uvicorn
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from ..logs import RateLimit
from .http_logs import LIMIT_LOG_INTERVAL_S

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0
WRITE_STALL_TIMEOUT_S = 10.0
KEEP_ALIVE_TIMEOUT_S = 5
MAX_HEADER_BYTES = 16 * 1024
MAX_CONNECTIONS = 1000
# asyncio's ``backlog`` is both how many connections one turn of the loop accepts and the listen() backlog. It is
# given this, the accepts per turn (each costs a file descriptor before the connection limit can shed one); the
# listen backlog is set apart afterwards (``listen_backlog``).
ACCEPTS_PER_TURN = 128
# Probes kept past the connection limit at most (``LimitedH11Protocol._make_room``), and the request lines they are
# known by (what the client sent, read from the kernel without taking it).
PROBES_PAST_LIMIT = ACCEPTS_PER_TURN
# At the limit, how many of the connections that look idle longest are looked at for a probe's request not yet
# read before one is shed.
SHED_CANDIDATES = 8
# How long a connection kept past the limit having sent nothing yet has to send its request head.
HEAD_CHANCE_S = 1.0
PROBE_REQUESTS = tuple(f"{method} /{path}{end}".encode() for method in ("GET", "HEAD") for path in ("health", "ready")
                       for end in (" ", "?"))
# Linux silently lowers a listen() backlog to this sysctl (the kernel's own default where it cannot be read).
_SOMAXCONN = Path("/proc/sys/net/core/somaxconn")


def connection_limit(max_connections: int = MAX_CONNECTIONS) -> int:
    """Open HTTP connections allowed: ``max_connections``, or fewer when file descriptors are scarce, so
    that at least half of those left after a burst of accepts and the probes kept past the limit
    (``PROBES_PAST_LIMIT``) stay for the Kafka clients and the spool."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, (soft - ACCEPTS_PER_TURN - PROBES_PAST_LIMIT) // 2))


def listen_backlog(max_connections: int) -> int:
    """The listen() backlog for a server with this connection limit: twice the limit, within what the kernel allows.

    The kernel queues the connections it completed until the server accepts them. When that queue is full it drops
    a new connection's SYN (and the handshake's last ACK) without a word: the client tries again 1, 3, 7, 15 s
    later, and a probe or an event stream that comes during a burst goes unanswered for as long, uncounted. A
    queue of only the accepts of one loop turn (128) overflowed in a burst of 2,000 clients of ``/events`` while
    the loop was busy. The queue holds a burst to the connection limit, and as many again: past the limit the
    server, not the kernel, chooses whom to shed (the connection waiting longest for its request head, counted),
    so a probe that sends its request at once is still served. A queued connection costs kernel memory only (no
    file descriptor until accepted). Linux lowers a larger backlog to ``net.core.somaxconn`` itself; it is read
    here so that a backlog lowered below the connection limit is known (``BoundedServer`` warns)."""
    try:
        kernel_max = int(_SOMAXCONN.read_text())
    except (OSError, ValueError):
        kernel_max = socket.SOMAXCONN
    return max(ACCEPTS_PER_TURN, min(2 * max_connections, kernel_max))


class ClosedConnections(Collector):
    """The connections the server closed by its bounds, by reason: ``http_connections_closed_total``."""

    REASONS = ("head_timeout", "connection_limit", "stalled")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.REASONS, 0)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("http_connections_closed", "HTTP connections the server closed by its bounds, by "
                                     "reason: head_timeout (no complete request head in time), connection_limit "
                                     "(shed at the connection limit), stalled (the client took none of the data "
                                     "sent to it in time).", labels=["reason"])
        for reason, count in self.counts.items():
            family.add_metric([reason], count)
        yield family


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the request head timeout, the write stall timeout and the connection limit."""

    header_timeout_s: ClassVar[float] = HEADER_TIMEOUT_S
    write_stall_timeout_s: ClassVar[float] = WRITE_STALL_TIMEOUT_S
    max_connections: ClassVar[int] = MAX_CONNECTIONS
    closed: ClassVar[ClosedConnections] = ClosedConnections()
    _shed_log: ClassVar[RateLimit] = RateLimit(LIMIT_LOG_INTERVAL_S)
    _stall_log: ClassVar[RateLimit] = RateLimit(LIMIT_LOG_INTERVAL_S)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # One timer serves many requests: it is armed when the connection starts waiting with none armed, and
        # when it fires it closes the connection or re-arms for the wait in progress. Arming and cancelling
        # one per request would cost every request a timer of the event loop's heap.
        self._head_timer: asyncio.TimerHandle | None = None
        # Since when the connection waits for a request head; None while a request is in progress.
        self._waiting_since: float | None = None
        # The request that was in progress when the wait began: a different one means a new head arrived.
        self._cycle_at_wait: RequestResponseCycle | None = None
        # Armed while the transport's send buffer is above its high-water mark (writing paused).
        self._stall_timer: asyncio.TimerHandle | None = None
        # Armed while a connection kept past the limit has its chance to send a request head.
        self._chance_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = OneWritePerTurn(transport, self.loop, self.write_stall_timeout_s)
        self._await_head()
        self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_since is not None and self.cycle is not self._cycle_at_wait:
            self._waiting_since = None

    def on_response_complete(self) -> None:
        # The answer is whole: it leaves now, not once the app's coroutines have unwound and counted it.
        if isinstance(self.transport, OneWritePerTurn):
            self.transport.flush()
        cycle = self.cycle
        super().on_response_complete()
        # uvicorn may have started a pipelined request already; otherwise the next head is awaited.
        if self.cycle is cycle and not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._chance_timer is not None:
            self._chance_timer.cancel()
            self._chance_timer = None
        self._stop_head_timer()
        self._stop_stall_timer()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.write_stall_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        self._stop_stall_timer()
        super().resume_writing()

    def _stop_stall_timer(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _stalled(self) -> None:
        """The client took none of the data sent for the stall timeout: the connection is aborted (a close would
        wait for the data to go), which ends what was sending to it as a disconnection does."""
        self._stall_timer = None
        self.closed.counts["stalled"] += 1
        self._stall_log.log(log, logging.WARNING, "Aborting an HTTP connection whose client took none of the data sent "
                            "to it for %g s", self.write_stall_timeout_s)
        reset(self.transport)

    def _await_head(self) -> None:
        self._waiting_since = self.loop.time()
        self._cycle_at_wait = self.cycle
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(self._waiting_since + self.header_timeout_s, self._check_head)

    @property
    def waiting_since(self) -> float | None:
        """When this connection began to wait for a request's head (loop time); None while it does not."""
        return self._waiting_since

    def _kept_past_limit(self) -> bool:
        """Whether this new connection is kept past the limit when no other waits for a request head: its client
        sent a probe's request (``PROBE_REQUESTS``), or nothing yet (then it has ``HEAD_CHANCE_S`` to send a head)."""
        sent = self._sent_unread()
        if sent == b"":
            self._chance_timer = self.loop.call_later(HEAD_CHANCE_S, self._chance_over)
            return True
        return sent is not None and sent.startswith(PROBE_REQUESTS)

    def sent_a_probe_unread(self) -> bool:
        """Whether a probe's request waits in the kernel's buffer for this connection (accepted in the turn that
        passed the limit, or whose bytes came since: the loop reads them on its next turn)."""
        sent = self._sent_unread()
        return sent is not None and sent.startswith(PROBE_REQUESTS)

    def _sent_unread(self) -> bytes | None:
        """The start of what the client sent that the loop has not read yet (read from the kernel's buffer without
        taking it); b"" when nothing is there, None when the socket cannot tell."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return None
        try:
            # asyncio's socket wrapper has no recv(): a duplicate of the descriptor reads the same buffer.
            with sock.dup() as connection:
                sent: bytes = connection.recv(max(map(len, PROBE_REQUESTS)), socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""
        except OSError:
            return None
        return sent or None  # b"" from recv: the client closed its side

    @property
    def has_its_chance(self) -> bool:
        """Whether this connection, kept past the limit having sent nothing, still has its time to send a head."""
        return self._chance_timer is not None

    def _chance_over(self) -> None:
        """A connection kept past the limit having sent nothing: closed if it has not sent a request head since."""
        self._chance_timer = None
        if self._waiting_since is not None and not self.transport.is_closing():
            self.closed.counts["connection_limit"] += 1
            self.shed()

    def shed(self) -> None:
        """Close this connection to make room for another (it waited longest for a request)."""
        self._stop_head_timer()
        self.transport.close()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _check_head(self) -> None:
        """The head timer fired: close the connection if its wait has lasted the timeout, re-arm for a wait
        that began later, stay unarmed while a request is in progress (its answer arms again)."""
        self._head_timer = None
        if self._waiting_since is None:
            return
        deadline = self._waiting_since + self.header_timeout_s
        if self.loop.time() < deadline:
            self._head_timer = self.loop.call_at(deadline, self._check_head)
            return
        self._waiting_since = None
        self.closed.counts["head_timeout"] += 1
        self.transport.close()

    def _make_room(self) -> None:
        if len(self.connections) <= self.max_connections:
            return
        # Closed connections stay in the set until the loop's next turn.
        open_connections = [c for c in self.connections
                            if isinstance(c, LimitedH11Protocol) and not c.transport.is_closing()]
        if len(open_connections) <= self.max_connections:
            return
        # Those kept past the limit are not shed while they have their chance to send a head (``_kept_past_limit``).
        waiting = [(since, c) for c in open_connections
                   if c is not self and (since := c.waiting_since) is not None and not c.has_its_chance]
        # One that looks idle may hold a probe's request the loop has not read yet: the oldest that does not is shed
        # (looked at in order of age, at most SHED_CANDIDATES of them, so that a flood of probes costs little).
        oldest = next((c for _, c in heapq.nsmallest(SHED_CANDIDATES, waiting, key=lambda pair: pair[0])
                       if not c.sent_a_probe_unread()), None)
        if oldest is None:
            if len(open_connections) <= self.max_connections + PROBES_PAST_LIMIT and self._kept_past_limit():
                return  # answered, then closed (a probe's Connection: close) or shed once it waits again
            oldest = self  # this connection waits for its head too: the one closed when no other waits
        self._shed_log.log(log, logging.WARNING, "The HTTP connection limit (%d) is reached: closing the connection "
                           "that waited longest for a request", self.max_connections)
        self.closed.counts["connection_limit"] += 1
        oldest.shed()


class OneWritePerTurn(asyncio.Transport):
    """A connection's transport whose writes of one turn of the event loop go out together, at the end of the
    turn (or once an answer is complete, or before the connection is closed or half-closed), in their order. Once
    ``FLUSH_BYTES`` wait, they go at once: a long answer written in one turn meets asyncio's flow control as it would
    without this.

    Closed with data still to send (asyncio then waits for the client to take it, for ever if it never reads),
    the connection is aborted after ``linger_s``."""

    FLUSH_BYTES: ClassVar[int] = 64 * 1024

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 linger_s: float = WRITE_STALL_TIMEOUT_S) -> None:
        super().__init__()
        self._transport, self._loop, self._linger_s = transport, loop, linger_s
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._flush_scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        chunk = bytes(data)
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)  # in bytes: a memoryview's len counts its items
        if self._pending_bytes >= self.FLUSH_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_at_end_of_turn)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Send what waits now (an answer that is complete), not at the end of the turn."""
        self._flush()

    def _flush_at_end_of_turn(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        # A TLS transport whose connection is lost answers nothing more (asyncio's, about its buffer, would raise).
        if self._transport.is_closing():
            self._transport.close()
            return
        self._transport.close()
        if self._transport.get_write_buffer_size():
            # A reset after the connection is lost does nothing.
            self._loop.call_later(self._linger_s, reset, self._transport)

    def abort(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0
        self._transport.abort()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._pending_bytes

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


def reset(transport: asyncio.Transport) -> None:
    """Abort the connection with a reset: the kernel drops what it still holds to send (a close, even asyncio's
    abort, leaves the kernel sending it to a client that may never read it), and the client learns at once.
    Nothing when the connection is gone already (a linger's reset that comes after the client took everything:
    asyncio's transport, closed, would fail in its callback)."""
    try:
        sock = transport.get_extra_info("socket")
    except AttributeError:  # a TLS transport whose connection is lost already (asyncio's raises then)
        return
    if sock is not None:
        if sock.fileno() < 0:
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def http_config(app: Any, host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S,
                max_connections: int | None = None, write_stall_timeout_s: float = WRITE_STALL_TIMEOUT_S,
                tls: ssl.SSLContext | None = None) -> uvicorn.Config:
    """uvicorn's configuration for the API (``create_app``'s: the connections closed are counted on its
    ``closed_connections``), with the bounds above; ``tls``: serve HTTPS with this context (``ServerTls.context``,
    which serves each handshake with the files' current content)."""
    limits = {"header_timeout_s": header_timeout_s, "write_stall_timeout_s": write_stall_timeout_s,
              "max_connections": connection_limit() if max_connections is None else max_connections,
              "closed": app.state.closed_connections}
    protocol = type("LimitedH11Protocol", (LimitedH11Protocol,), limits)
    return _Config(app, host=host, port=port, http=protocol, log_config=None, access_log=False,
                   timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
                   backlog=ACCEPTS_PER_TURN, tls=tls)


class _Config(uvicorn.Config):
    """uvicorn's configuration serving a TLS context of our own: uvicorn builds its own from file names, once, and
    the certificate could then never change without a restart."""

    def __init__(self, *args: Any, tls: ssl.SSLContext | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tls = tls

    def load(self) -> None:
        super().load()
        if self._tls is not None:
            self.ssl = self._tls


class BoundedServer(uvicorn.Server):
    """uvicorn's server, its listening sockets given the listen backlog of its connection limit (``listen_backlog``)
    once asyncio has made them listen with the accepts per turn."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        protocol = self.config.http_protocol_class
        if not (self.started and isinstance(protocol, type) and issubclass(protocol, LimitedH11Protocol)):
            return
        backlog = listen_backlog(protocol.max_connections)
        if backlog < protocol.max_connections:
            log.warning("The kernel queues at most %d HTTP connections not yet accepted (net.core.somaxconn), fewer "
                        "than the connection limit (%d): a burst of connections past it waits seconds to connect",
                        backlog, protocol.max_connections)
        for server in self.servers:
            for sock in server.sockets:
                # asyncio's socket wrapper has no listen(): a duplicate of the descriptor is the same socket. On a
                # listening socket, listen() again only sets the backlog; the connections queued stay.
                with sock.dup() as listening:
                    listening.listen(backlog)
