"""Status changes as they are read from the status topic, for ``GET /events`` (Server-Sent Events).

Every record the cache applies is an event: a connector's, task's or topic's status set, or deleted (a
tombstone). Records the cache discards (garbled, or a task's UNASSIGNED older than its RUNNING) are not.

**Event ids are positions in the topic.** An event's id lists, for every partition read so far, the offset of
the last record delivered from it (``0:12,1:40,2:7``): everything up to those offsets has been delivered. A
client that reconnects with ``Last-Event-ID`` gets the kept events past those offsets, in the order they were
read, so it loses and repeats nothing. The last ``sidecar.events.buffer.max`` events are kept, and no more
than ``sidecar.events.buffer.max.bytes`` of them; an event keeps only what it sends (a trace's first line, not
the record's value), also while the topic is read again at a start. An id that needs events no longer kept
(or, after a restart, records this process read before it kept events) is refused as too old
(``EventIdTooOld``): the client reads the current statuses and subscribes anew.

**A subscriber is handed events, never waited for.** Each event is added once to one list, whatever the
subscribers; a subscriber keeps its place in it. At most ``FANOUT_PER_TURN`` subscribers are given their turn
per turn of the event loop, each taking one chunk (at most ``CHUNK_EVENTS`` events and ``CHUNK_BYTES``), so
the fan-out's work in one turn is bounded, and the reader, the writes and the probes get their turns. A
subscriber further behind than ``sidecar.events.subscriber.queue.max`` events (of any connector) or
``sidecar.events.buffer.max.bytes`` is dropped (its stream ends with an ``error`` event when it can still be
written, and the connection is closed); the events before the window stay only while a subscriber has still to
be handed them, so what is held stays bounded. A client whose connection stops taking data is let go by the
HTTP server (``http_server.WRITE_STALL_TIMEOUT_S``).

**A subscriber's slot is not held for ever.** A client that never reads is not seen by the server: the heartbeats
fit in the kernel's buffers for hours. So a stream lives ``sidecar.events.stream.max.ms`` at most, and ends with an
``error`` event that asks the client to reconnect with its last event's id (it misses nothing); and at the subscriber
bound a new client takes the place of the one connected longest once that one has had a fifth of that time
(``REPLACEABLE_SHARE``): clients that never read cannot lock the status page out.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import enum
import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..connect.cache import StatusCache, StatusRecord
from ..connect.model import INT32_MAX, Key
from ..logs import RateLimit
from .event import EventIdTooOld, StatusEvent, built_frame, parse_event_id

log = logging.getLogger(__name__)

# Subscribers given their turn per turn of the event loop, each taking a chunk of at most CHUNK_EVENTS and
# CHUNK_BYTES (the last event may pass it); a subscriber of one connector looks through SCAN_EVENTS at most.
FANOUT_PER_TURN = 16
CHUNK_EVENTS = 1000
CHUNK_BYTES = 256 * 1024
SCAN_EVENTS = 50_000
# Events before the kept window are let go of in steps of at least this many (and an eighth of those held).
TRIM_STEP = 1024
DROP_LOG_INTERVAL_S = 10.0
DEFAULT_BUFFER_MAX_BYTES = 64 * 1024 * 1024
# At the subscriber bound, the subscriber connected longest gives its place to a new one once it has had this share of
# a stream's life.
REPLACEABLE_SHARE = 0.2


class Ended(enum.Enum):
    """Why a subscription ended (what its stream's last event says)."""

    DROPPED = "this client fell too far behind and was dropped: reconnect with the id of the last event received"
    EXPIRED = ("this stream reached its time bound (sidecar.events.stream.max.ms): reconnect with the id of the last "
               "event received")
    REPLACED = ("as many clients as allowed are subscribed, and another took the place of this one, the longest "
                "connected (sidecar.events.subscribers.max): reconnect with the id of the last event received")
    STOPPING = "the server is stopping"


class TooManySubscribers(Exception):
    """As many subscribers as allowed are there already."""


class Subscription:
    """One subscriber: the kept events it asked to resume with, then the live events from where it subscribed.

    Its position in the hub's events (``cursor``) says what it has been handed; ``ended`` is set when it is dropped
    or the stream is closed.
    """

    __slots__ = ("backlog", "backlog_at", "connector", "cursor", "cursor_bytes", "ended", "reason", "started", "turn")

    def __init__(self, connector: str | None, backlog: list[StatusEvent], cursor: int, cursor_bytes: int,
                 started: float) -> None:
        self.connector = connector
        self.backlog = backlog
        self.backlog_at = 0
        # The sequence number of the next live event to look at, and the bytes of the events before it.
        self.cursor, self.cursor_bytes = cursor, cursor_bytes
        # When it began (the event loop's time).
        self.started = started
        self.ended = asyncio.Event()
        # Why it ended (set with ``ended``).
        self.reason = Ended.STOPPING
        # Resolved when the hub gives it its turn to take a chunk (or it ends).
        self.turn: asyncio.Future[None] | None = None


class EventsCollector(Collector):
    """``status_events_subscribers`` and the counts of clients dropped, refused, replaced and timed out, read from the
    hub at each scrape."""

    def __init__(self, hub: StatusEvents) -> None:
        self._hub = hub

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("status_events_subscribers", "Clients of GET /events now.",
                                value=self._hub.subscribers)
        yield CounterMetricFamily("status_events_dropped", "Clients of GET /events dropped for falling behind "
                                  "(sidecar.events.subscriber.queue.max, sidecar.events.buffer.max.bytes).",
                                  value=self._hub.dropped)
        yield CounterMetricFamily("status_events_refused", "Clients of GET /events refused (503) because as many as "
                                  "allowed were there (sidecar.events.subscribers.max).", value=self._hub.refused)
        yield CounterMetricFamily("status_events_replaced", "Clients of GET /events whose stream ended to make room "
                                  "for a new client at sidecar.events.subscribers.max (the longest connected).",
                                  value=self._hub.replaced)
        yield CounterMetricFamily("status_events_expired", "GET /events streams ended at their time bound "
                                  "(sidecar.events.stream.max.ms); their clients reconnect.", value=self._hub.expired)


class StatusEvents:
    """The events of the records a cache applies: kept for resumption, and handed to subscribers.

    ``from_start``: attached before the store read anything, so the kept events began with the topic's first
    records; otherwise records read before are unknown, and ids naming their partitions may be too old.

    The events are one list in the order read, numbered (sequence numbers); the last of them are the window kept
    for resumption, and those before it stay only while a subscriber has still to be handed them.
    """

    def __init__(self, cache: StatusCache, buffer_max: int, queue_max: int, from_start: bool,
                 buffer_max_bytes: int = DEFAULT_BUFFER_MAX_BYTES, max_subscribers: int = INT32_MAX,
                 max_life_s: float | None = None) -> None:
        """``max_life_s``: a stream's longest life (None: unbounded, as for a hub used without a server)."""
        self._cache = cache
        self.max_subscribers = max_subscribers
        self._max_life_s = max_life_s
        self._buffer_max = buffer_max
        self._buffer_max_bytes = buffer_max_bytes
        self._queue_max = queue_max
        # The events from sequence number _base on; beside them each one's connector (for list.index, which looks
        # through a list at C speed), and the bytes of every event up to and including it.
        self._events: list[StatusEvent] = []
        self._connectors: list[str] = []
        self._ends: list[int] = []
        self._base = 0
        self._base_bytes = 0
        self._appended_bytes = 0
        # The sequence number of the first event kept for resumption, and the bytes of the events from it on.
        self._window = 0
        self._window_bytes = 0
        # The partitions read so far, sorted, and the offset of the last event published from each (an event
        # keeps a copy of the offsets: its id, built when a subscriber needs it).
        self._partitions: tuple[int, ...] = ()
        self._offsets: list[int] = []
        self._index: dict[int, int] = {}
        # Per partition: the highest offset of the events no longer kept (or never kept); ids before it are too old.
        self._forgotten: dict[int, int] = {}
        self._from_start = from_start
        self._subscriptions: set[Subscription] = set()
        # Subscribers waiting for events, and those that have some waiting for their turn (in the order served).
        self._waiting: set[Subscription] = set()
        self._ready: collections.deque[Subscription] = collections.deque()
        # Connectors of the events read since the last pass over the subscribers.
        self._news: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pass_scheduled = False
        self._drop_log = RateLimit(DROP_LOG_INTERVAL_S)
        self._refusal_log = RateLimit(DROP_LOG_INTERVAL_S)
        self._replace_log = RateLimit(DROP_LOG_INTERVAL_S)
        self.dropped = 0
        self.refused = 0
        self.replaced = 0
        self.expired = 0
        cache.subscribe(self._applied)

    @property
    def subscribers(self) -> int:
        """Subscribers now."""
        return len(self._subscriptions)

    @property
    def position(self) -> dict[int, int]:
        """Where the stream stands: each partition read so far and the offset of the last event published from it
        (an event's id, as a mapping); empty before anything was read."""
        return dict(zip(self._partitions, self._offsets, strict=True))

    @property
    def kept_bytes(self) -> int:
        """The bytes the events kept for resumption hold."""
        return self._window_bytes

    @property
    def _head(self) -> int:
        """The sequence number the next event will have."""
        return self._base + len(self._events)

    def _bytes_before(self, sequence: int) -> int:
        return self._base_bytes if sequence == self._base else self._ends[sequence - self._base - 1]

    def _applied(self, record: StatusRecord, key: Key) -> None:
        partition, offset = record.partition, record.offset
        index = self._index.get(partition)
        if index is None:
            index = self._add_partition(partition, offset)
        elif offset <= self._offsets[index]:
            return  # a partition read again from an earlier offset: delivered already
        offsets = self._offsets
        offsets[index] = offset
        status = self._cache.value_of(key) if record.value is not None else None
        self._append(StatusEvent(key, status, partition, offset, record.timestamp, self._partitions, tuple(offsets)))

    def publish(self, event: StatusEvent) -> None:
        """Hand subscribers an event that is no record of the topic (an action of this sidecar: a restart, a worker
        gone). Its id is the stream's position when it happened, and its partition and offset -1: a client that
        resumes is not handed it again."""
        self._append(event)

    def _append(self, event: StatusEvent) -> None:
        events = self._events
        events.append(event)
        self._connectors.append(event.connector)
        self._appended_bytes += event.size
        self._ends.append(self._appended_bytes)
        self._window_bytes += event.size
        while self._window_bytes > self._buffer_max_bytes or self._base + len(events) - self._window > self._buffer_max:
            forgotten = events[self._window - self._base]
            self._forget(forgotten)
            self._window_bytes -= forgotten.size
            self._window += 1
        if self._subscriptions:
            self._news.add(event.connector)
            self._schedule_pass()
        else:
            self._trim(self._window)

    def _add_partition(self, partition: int, offset: int) -> int:
        """A partition read for the first time: its place in the positions."""
        if not self._from_start:
            self._forgotten[partition] = offset - 1  # what came before was read before events were kept
        known = dict(zip(self._partitions, self._offsets, strict=True))
        known[partition] = -1
        self._partitions = tuple(sorted(known))
        self._offsets = [known[p] for p in self._partitions]
        self._index = {p: i for i, p in enumerate(self._partitions)}
        return self._index[partition]

    def _forget(self, event: StatusEvent) -> None:
        """An event no longer kept for resumption: ids from before it are too old."""
        partition, offset = event.partition, event.offset
        if offset > self._forgotten.get(partition, -1):
            self._forgotten[partition] = offset

    def _trim(self, keep: int) -> None:
        """Let go of the events before sequence number ``keep`` (in steps: a list gives up its start by moving the
        rest)."""
        dead = keep - self._base
        if dead >= TRIM_STEP and dead >= len(self._events) >> 3:
            self._base_bytes = self._ends[dead - 1]
            del self._events[:dead], self._connectors[:dead], self._ends[:dead]
            self._base += dead

    # ----------------------------------------------------------------------------- subscribers

    def subscribe(self, connector: str | None = None, last_event_id: str | None = None) -> Subscription:
        """A new subscriber (of one connector's events, or all): from now, or past ``last_event_id``.

        ValueError: a malformed id, or one naming a partition (or an offset of one) this stream has not read;
        EventIdTooOld: it needs events no longer kept; TooManySubscribers: as many as ``max_subscribers`` are there,
        none of them connected long enough to give its place.
        """
        self._loop = _running_loop() or self._loop
        now = self._loop.time() if self._loop is not None else 0.0
        backlog: list[StatusEvent] = []
        if last_event_id:
            seen = parse_event_id(last_event_id)
            self._check_resumable(seen)
            backlog = [event for event in self._events[self._window - self._base:]
                       if event.offset > seen.get(event.partition, -1)
                       and (connector is None or event.connector == connector)]
        if len(self._subscriptions) >= self.max_subscribers:
            self._make_room(now)
        subscription = Subscription(connector, backlog, self._head, self._appended_bytes, now)
        self._subscriptions.add(subscription)
        return subscription

    def _make_room(self, now: float) -> None:
        """At the bound: the subscriber connected longest gives its place, once it has had its share of a stream's
        life; else TooManySubscribers."""
        oldest = min(self._subscriptions, key=lambda s: s.started)
        if self._max_life_s is not None and now - oldest.started >= self._max_life_s * REPLACEABLE_SHARE:
            self.replaced += 1
            self._replace_log.log(log, logging.WARNING, "GET /events is at its bound (sidecar.events.subscribers.max="
                                  "%d): ending the stream connected longest to make room for a new client",
                                  self.max_subscribers)
            self._end(oldest, Ended.REPLACED)
            return
        self.refused += 1
        self._refusal_log.log(log, logging.WARNING, "Refusing a GET /events client: %d are there already "
                              "(sidecar.events.subscribers.max)", self.max_subscribers)
        raise TooManySubscribers(f"{self.max_subscribers} clients of GET /events are there already "
                                 "(sidecar.events.subscribers.max)")

    def _check_resumable(self, seen: dict[int, int]) -> None:
        for partition, forgotten in self._forgotten.items():
            if seen.get(partition, -1) < forgotten:
                raise EventIdTooOld(f"events of partition {partition} after offset {seen.get(partition, -1)} are no "
                                    f"longer kept (sidecar.events.buffer.max={self._buffer_max}, "
                                    f"sidecar.events.buffer.max.bytes={self._buffer_max_bytes})")
        for partition, offset in zip(self._partitions, self._offsets, strict=True):
            if seen.get(partition, -1) > offset:
                # Resuming would skip the partition's events up to there: an id of another topic (or of this one before
                # it was deleted and made again), or made up.
                raise ValueError(f"not an event id of this stream: partition {partition} has no record read past "
                                 f"offset {offset}")
        unknown = sorted(set(seen) - set(self._partitions))
        if unknown and not self._from_start:
            raise EventIdTooOld(f"partition {unknown[0]} was read before this process kept events")
        if unknown:
            # Kept from the topic's start: every partition an id of this stream names has been read.
            raise ValueError(f"not an event id of this stream: partition {unknown[0]} has no record read")

    def take(self, subscription: Subscription) -> list[StatusEvent]:
        """The events to send to the subscriber next, at most a chunk (``CHUNK_EVENTS``, ``CHUNK_BYTES``): its
        backlog first, then the live events of its connector; it is moved past them (and past the events of
        other connectors looked through)."""
        taken: list[StatusEvent] = []
        size = 0
        backlog = subscription.backlog
        if subscription.backlog_at < len(backlog):
            at = subscription.backlog_at
            while at < len(backlog) and len(taken) < CHUNK_EVENTS and size < CHUNK_BYTES:
                taken.append(backlog[at])
                size += backlog[at].size
                at += 1
            subscription.backlog_at = at
            if at == len(backlog):
                subscription.backlog = []
                subscription.backlog_at = 0
            return taken
        events, connector = self._events, subscription.connector
        position, end = subscription.cursor - self._base, self._head - self._base
        if connector is None:
            end = min(end, position + CHUNK_EVENTS)
            # Up to the first event whose end reaches CHUNK_BYTES, that one included.
            end = min(end, bisect.bisect_left(self._ends, subscription.cursor_bytes + CHUNK_BYTES, position, end) + 1)
            taken = events[position:end]
            position = end
        else:
            end = min(end, position + SCAN_EVENTS)
            connectors = self._connectors
            while len(taken) < CHUNK_EVENTS and size < CHUNK_BYTES:
                try:
                    found = connectors.index(connector, position, end)
                except ValueError:
                    position = end
                    break
                taken.append(events[found])
                size += events[found].size
                position = found + 1
        subscription.cursor = self._base + position
        subscription.cursor_bytes = self._bytes_before(subscription.cursor)
        return taken

    async def next_chunk(self, subscription: Subscription, timeout: float) -> bytes | None:
        """The subscriber's next events as one chunk of frames, once the hub gives it its turn (at most
        ``FANOUT_PER_TURN`` subscribers take a chunk per turn of the event loop); ``b""`` when none came within
        ``timeout`` seconds; None once the subscription has ended (at its time bound too)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        deadline = loop.time() + timeout
        if self._max_life_s is not None:
            end_of_life = subscription.started + self._max_life_s
            if loop.time() >= end_of_life:
                self.expired += 1
                self._end(subscription, Ended.EXPIRED)
                return None
            deadline = min(deadline, end_of_life)
        while not subscription.ended.is_set():
            turn = subscription.turn = loop.create_future()
            if subscription.backlog or subscription.cursor < self._head:
                # Its turn comes within a few turns of the loop: no heartbeat is due meanwhile.
                self._ready.append(subscription)
                self._schedule_pass()
                await turn
            else:
                self._waiting.add(subscription)
                done, _ = await asyncio.wait((turn,), timeout=max(0.0, deadline - loop.time()))
                if not done:
                    self._waiting.discard(subscription)
                    turn.cancel()
                    return b""
            if subscription.ended.is_set():
                break
            taken = self.take(subscription)
            if taken:
                # Each frame is built once, by the first subscriber to send it; the others find it at C speed.
                frames = list(map(built_frame, taken))
                if None in frames:
                    frames = [event.frame() for event in taken]
                return b"".join(frames)
        return None

    def _schedule_pass(self) -> None:
        if not self._pass_scheduled and self._loop is not None:
            self._pass_scheduled = True
            self._loop.call_soon(self._pass)

    def _pass(self) -> None:
        """Once per turn of the event loop while there is something to hand out: drop the subscribers too far
        behind, queue those waiting that have events now, give the first ``FANOUT_PER_TURN`` in the queue their
        turn, and let go of the events no one needs any more."""
        self._pass_scheduled = False
        head, appended = self._head, self._appended_bytes
        for subscription in list(self._subscriptions):
            if (head - subscription.cursor > self._queue_max
                    or appended - subscription.cursor_bytes > self._buffer_max_bytes):
                self._drop(subscription)
        news, self._news = self._news, set()
        if news:
            for subscription in list(self._waiting):
                if subscription.connector is None or subscription.connector in news:
                    self._waiting.discard(subscription)
                    self._ready.append(subscription)
                else:
                    # Every event read since it began waiting is another connector's: it is past them all.
                    subscription.cursor, subscription.cursor_bytes = head, appended
        given = 0
        while self._ready and given < FANOUT_PER_TURN:
            turn = self._ready.popleft().turn
            if turn is not None and not turn.done():
                turn.set_result(None)
                given += 1
        if self._ready:
            self._schedule_pass()
        # The events before the window that no subscriber has still to be handed.
        self._trim(min(self._window, min((s.cursor for s in self._subscriptions), default=self._window)))

    def _drop(self, subscription: Subscription) -> None:
        self.dropped += 1
        self._drop_log.log(log, logging.WARNING, "Dropping a GET /events subscriber: more than %d events or %d bytes "
                           "wait for it (sidecar.events.subscriber.queue.max, sidecar.events.buffer.max.bytes); it "
                           "may reconnect with its Last-Event-ID", self._queue_max, self._buffer_max_bytes)
        self._end(subscription, Ended.DROPPED)

    def unsubscribe(self, subscription: Subscription) -> None:
        """The subscriber is gone: no more events for it."""
        self._end(subscription, Ended.STOPPING)

    def close(self) -> None:
        """End every subscriber's stream (the server is stopping)."""
        for subscription in list(self._subscriptions):
            self._end(subscription, Ended.STOPPING)

    def _end(self, subscription: Subscription, reason: Ended) -> None:
        if subscription.ended.is_set():
            return
        self._subscriptions.discard(subscription)
        self._waiting.discard(subscription)
        subscription.reason = reason
        subscription.ended.set()
        if subscription.turn is not None and not subscription.turn.done():
            subscription.turn.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running now; None outside one (where events are handed out with ``take`` only)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
