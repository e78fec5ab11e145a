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

**A slow subscriber is dropped, never waited for.** Each subscriber has a queue of at most
``sidecar.events.subscriber.queue.max`` events; the reader puts events in without waiting, and a subscriber
whose queue is full is dropped (its stream ends with an ``error`` event when it can still be written, and
the connection is closed). The reader and the event loop go on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import codec
from .cache import StatusCache, StatusRecord
from .codec import StatusValue
from .model import Key, TaskKey, TopicKey, TopicStatus

log = logging.getLogger(__name__)

# A trace is cut to its first line, and to this many characters: the whole trace is in GET .../status.
TRACE_EXCERPT_CHARS = 200
_NOT_SPACE = re.compile(r"\S")
# What an event holds beyond its text: the event, its key, its status, its id's offsets, its frame's fixed part.
EVENT_OVERHEAD_BYTES = 600
DEFAULT_BUFFER_MAX_BYTES = 64 * 1024 * 1024
_EVENT_ID = re.compile(r"(\d+):(-1|\d+)(,(\d+):(-1|\d+))*")


class EventIdTooOld(Exception):
    """A ``Last-Event-ID`` that needs events no longer kept: resuming from it would lose events."""


class StatusEvent:
    """One record applied, as its event sends it: its key and status (the trace cut to its excerpt), where it was
    read, and the id of the stream after it. Nothing else of the record is kept: a value may be a megabyte.

    ``size``: the bytes it holds, estimated (its text twice, as fields and in its frame once built).
    """

    __slots__ = ("_frame", "_offsets", "_partitions", "key", "offset", "partition", "size", "status", "timestamp")

    def __init__(self, key: Key, status: StatusValue | TopicStatus | None, partition: int, offset: int,
                 timestamp: float | None, partitions: tuple[int, ...], offsets: tuple[int, ...]) -> None:
        self.key = key
        if isinstance(status, StatusValue) and status.trace is not None:
            status = status._replace(trace=trace_excerpt(status.trace))
        # None: a tombstone.
        self.status = status
        self.partition, self.offset, self.timestamp = partition, offset, timestamp
        # The stream's position after this event: each partition read so far (sorted) and its last offset.
        self._partitions = partitions
        self._offsets = offsets
        self._frame: bytes | None = None
        texts: tuple[str | None, ...]
        if isinstance(status, TopicStatus):
            texts = (key.connector, status.topic, status.connector)
        elif status is not None:
            texts = (key.connector, status.worker_id, status.trace)
        else:
            texts = (key.connector, key.topic if isinstance(key, TopicKey) else None)
        self.size = (EVENT_OVERHEAD_BYTES + 8 * len(offsets)
                     + 2 * sum(sys.getsizeof(text) for text in texts if text is not None))

    @property
    def id(self) -> str:
        """The event's id: ``partition:offset`` of every partition read so far, in partition order."""
        return ",".join(f"{p}:{o}" for p, o in zip(self._partitions, self._offsets, strict=True))

    @property
    def connector(self) -> str:
        """The connector the status is of."""
        return self.key.connector

    @property
    def name(self) -> str:
        """The SSE event type: ``status`` for a status set, ``deleted`` for a tombstone."""
        return "deleted" if self.status is None else "status"

    def data(self) -> str:
        """The event's JSON."""
        # Strings escaped as the REST routes escape them (Jackson's way): a lone surrogate, which Connect writes
        # when a Java string is cut inside a pair, becomes \\uD800 instead of text UTF-8 cannot encode.
        return "{" + ",".join(f'"{name}":{codec.json_scalar(value)}' for name, value in self._fields().items()) + "}"

    def frame(self) -> bytes:
        """The event as a text/event-stream sends it (built once, however many subscribers get it)."""
        if self._frame is None:
            self._frame = f"id: {self.id}\nevent: {self.name}\ndata: {self.data()}\n\n".encode()
        return self._frame

    def _fields(self) -> dict[str, str | int | float | None]:
        key, status = self.key, self.status
        fields: dict[str, str | int | float | None] = {"connector": key.connector}
        if isinstance(key, TaskKey):
            fields.update(kind="task", task=key.task)
        elif isinstance(key, TopicKey):
            fields.update(kind="topic", topic=key.topic)
        else:
            fields.update(kind="connector")
        if isinstance(status, TopicStatus):
            fields.update(task=status.task, discover_timestamp=status.discover_timestamp)
        elif status is not None:
            fields.update(state=status.state.value, worker_id=status.worker_id, generation=status.generation,
                          trace=status.trace)
        fields.update(partition=self.partition, offset=self.offset, timestamp=self.timestamp)
        return fields


def trace_excerpt(trace: str | None) -> str | None:
    """A trace's first line, at most ``TRACE_EXCERPT_CHARS`` characters (``…`` marks a cut); it reads no further
    than it needs into a long trace."""
    if trace is None:
        return None
    end = trace.find("\n")
    if end < 0:
        end = len(trace)
    line = trace[:min(end, TRACE_EXCERPT_CHARS + 1)]
    if end <= TRACE_EXCERPT_CHARS + 1:  # the whole first line
        line = line.rstrip("\r")
    cut = len(line) > TRACE_EXCERPT_CHARS or _NOT_SPACE.search(trace, end) is not None
    return line[:TRACE_EXCERPT_CHARS] + ("…" if cut else "")


def parse_event_id(text: str) -> dict[int, int]:
    """An event id's positions: partition -> offset of the last record delivered. ValueError when malformed."""
    if _EVENT_ID.fullmatch(text) is None:
        raise ValueError(f"not an event id of this stream: {text[:100]!r} (expected partition:offset,...)")
    positions: dict[int, int] = {}
    for part in text.split(","):
        partition, offset = part.split(":")
        positions[int(partition)] = int(offset)
    return positions


@dataclass(eq=False)
class Subscription:
    """One subscriber: the kept events it asked to resume with, then live events through a bounded queue."""

    connector: str | None
    backlog: list[StatusEvent]
    queue: asyncio.Queue[StatusEvent]
    # Set when the subscriber is dropped (its queue was full) or the stream is closed.
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False

    def wants(self, event: StatusEvent) -> bool:
        """Whether the event is of the connector asked for (any, when none was)."""
        return self.connector is None or event.connector == self.connector


class EventsCollector(Collector):
    """``status_events_subscribers`` and ``status_events_dropped_total``, read from the hub at each scrape."""

    def __init__(self, hub: StatusEvents) -> None:
        self._hub = hub

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("status_events_subscribers", "Clients of GET /events now.",
                                value=self._hub.subscribers)
        yield CounterMetricFamily("status_events_dropped", "Clients of GET /events dropped for falling behind "
                                  "(sidecar.events.subscriber.queue.max).", value=self._hub.dropped)


class StatusEvents:
    """The events of the records a cache applies: kept for resumption, and handed to subscribers.

    ``from_start``: attached before the store read anything, so the kept events began with the topic's first
    records; otherwise records read before are unknown, and ids naming their partitions may be too old.
    """

    def __init__(self, cache: StatusCache, buffer_max: int, queue_max: int, from_start: bool,
                 buffer_max_bytes: int = DEFAULT_BUFFER_MAX_BYTES) -> None:
        self._cache = cache
        self._buffer_max = buffer_max
        self._buffer_max_bytes = buffer_max_bytes
        # The bytes the kept events hold (StatusEvent.size).
        self.kept_bytes = 0
        self._queue_max = queue_max
        self._kept: collections.deque[StatusEvent] = collections.deque()
        # The partitions read so far, sorted, and the offset of the last event published from each (an event
        # keeps a copy of the offsets: its id, built when a subscriber needs it).
        self._partitions: tuple[int, ...] = ()
        self._offsets: list[int] = []
        self._index: dict[int, int] = {}
        # Per partition: the highest offset of the events no longer kept (or never kept); ids before it are too old.
        self._forgotten: dict[int, int] = {}
        self._from_start = from_start
        self._subscriptions: set[Subscription] = set()
        self.dropped = 0
        cache.on_applied = self._applied

    @property
    def subscribers(self) -> int:
        """Subscribers now."""
        return len(self._subscriptions)

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
        event = StatusEvent(key, status, partition, offset, record.timestamp, self._partitions, tuple(offsets))
        kept = self._kept
        kept.append(event)
        self.kept_bytes += event.size
        while kept and (len(kept) > self._buffer_max or self.kept_bytes > self._buffer_max_bytes):
            self._forget(kept.popleft())
        if self._subscriptions:
            for subscription in list(self._subscriptions):
                if subscription.wants(event):
                    self._offer(subscription, event)

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
        """An event no longer kept: ids from before it are too old."""
        self.kept_bytes -= event.size
        partition, offset = event.partition, event.offset
        if offset > self._forgotten.get(partition, -1):
            self._forgotten[partition] = offset

    def _offer(self, subscription: Subscription, event: StatusEvent) -> None:
        try:
            subscription.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("Dropping a GET /events subscriber: %d events wait for it "
                        "(sidecar.events.subscriber.queue.max); it may reconnect with its Last-Event-ID",
                        self._queue_max)
            subscription.dropped = True
            self._end(subscription)

    def subscribe(self, connector: str | None = None, last_event_id: str | None = None) -> Subscription:
        """A new subscriber (of one connector's events, or all): from now, or past ``last_event_id``.

        ValueError: a malformed id; EventIdTooOld: it needs events no longer kept.
        """
        backlog: list[StatusEvent] = []
        if last_event_id:
            seen = parse_event_id(last_event_id)
            self._check_resumable(seen)
            backlog = [event for event in self._kept if event.offset > seen.get(event.partition, -1)
                       and (connector is None or event.connector == connector)]
        subscription = Subscription(connector, backlog, asyncio.Queue(self._queue_max))
        self._subscriptions.add(subscription)
        return subscription

    def _check_resumable(self, seen: dict[int, int]) -> None:
        for partition, forgotten in self._forgotten.items():
            if seen.get(partition, -1) < forgotten:
                raise EventIdTooOld(f"events of partition {partition} after offset {seen.get(partition, -1)} are no "
                                    f"longer kept (sidecar.events.buffer.max={self._buffer_max}, "
                                    f"sidecar.events.buffer.max.bytes={self._buffer_max_bytes})")
        if not self._from_start:
            unknown = sorted(set(seen) - set(self._partitions))
            if unknown:
                raise EventIdTooOld(f"partition {unknown[0]} was read before this process kept events")

    def unsubscribe(self, subscription: Subscription) -> None:
        """The subscriber is gone: no more events for it."""
        self._end(subscription)

    def close(self) -> None:
        """End every subscriber's stream (the server is stopping)."""
        for subscription in list(self._subscriptions):
            self._end(subscription)

    def _end(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)
        subscription.ended.set()

