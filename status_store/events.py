"""Status changes as they are read from the status topic, for ``GET /events`` (Server-Sent Events).

Every record the cache applies is an event: a connector's, task's or topic's status set, or deleted (a
tombstone). Records the cache discards (garbled, or a task's UNASSIGNED older than its RUNNING) are not.

**Event ids are positions in the topic.** An event's id lists, for every partition read so far, the offset of
the last record delivered from it (``0:12,1:40,2:7``): everything up to those offsets has been delivered. A
client that reconnects with ``Last-Event-ID`` gets the kept events past those offsets, in the order they were
read, so it loses and repeats nothing. The last ``sidecar.events.buffer.max`` events are kept; an id that
needs events no longer kept (or, after a restart, records this process read before it kept events) is
refused as too old (``EventIdTooOld``): the client reads the current statuses and subscribes anew.

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
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import codec
from .cache import StatusCache, StatusRecord
from .model import Key, TaskKey, TopicKey

log = logging.getLogger(__name__)

# A trace is cut to its first line, and to this many characters: the whole trace is in GET .../status.
TRACE_EXCERPT_CHARS = 200
_EVENT_ID = re.compile(r"(\d+):(-1|\d+)(,(\d+):(-1|\d+))*")


class EventIdTooOld(Exception):
    """A ``Last-Event-ID`` that needs events no longer kept: resuming from it would lose events."""


class StatusEvent:
    """One record applied: its key, where it was read, and the id of the stream after it."""

    __slots__ = ("_data", "_frame", "_offsets", "_partitions", "key", "record")

    def __init__(self, key: Key, record: StatusRecord, partitions: tuple[int, ...], offsets: tuple[int, ...]) -> None:
        self.key = key
        self.record = record
        # The stream's position after this event: each partition read so far (sorted) and its last offset.
        self._partitions = partitions
        self._offsets = offsets
        self._data: str | None = None
        self._frame: bytes | None = None

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
        return "deleted" if self.record.value is None else "status"

    def data(self) -> str:
        """The event's JSON (built once, when the first subscriber needs it)."""
        if self._data is None:
            # Strings escaped as the REST routes escape them (Jackson's way): a lone surrogate, which Connect writes
            # when a Java string is cut inside a pair, becomes \\uD800 instead of text UTF-8 cannot encode.
            self._data = "{" + ",".join(f'"{name}":{codec.json_scalar(value)}'
                                        for name, value in self._fields().items()) + "}"
        return self._data

    def frame(self) -> bytes:
        """The event as a text/event-stream sends it (built once, however many subscribers get it)."""
        if self._frame is None:
            self._frame = f"id: {self.id}\nevent: {self.name}\ndata: {self.data()}\n\n".encode()
        return self._frame

    def _fields(self) -> dict[str, str | int | float | None]:
        key, record = self.key, self.record
        fields: dict[str, str | int | float | None] = {"connector": key.connector}
        if isinstance(key, TaskKey):
            fields.update(kind="task", task=key.task)
        elif isinstance(key, TopicKey):
            fields.update(kind="topic", topic=key.topic)
        else:
            fields.update(kind="connector")
        if record.value is not None:
            if isinstance(key, TopicKey):
                topic = codec.decode_topic_status(record.value)
                fields.update(task=topic.task, discover_timestamp=topic.discover_timestamp)
            else:
                status = codec.decode_status(record.value)
                fields.update(state=status.state.value, worker_id=status.worker_id, generation=status.generation,
                              trace=trace_excerpt(status.trace))
        fields.update(partition=record.partition, offset=record.offset, timestamp=record.timestamp)
        return fields


def trace_excerpt(trace: str | None) -> str | None:
    """A trace's first line, at most ``TRACE_EXCERPT_CHARS`` characters (``…`` marks a cut)."""
    if trace is None:
        return None
    line = trace.split("\n", 1)[0].rstrip("\r")
    cut = len(line) > TRACE_EXCERPT_CHARS or len(line) < len(trace.rstrip())
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

    def __init__(self, cache: StatusCache, buffer_max: int, queue_max: int, from_start: bool) -> None:
        self._cache = cache
        self._buffer_max = buffer_max
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
        event = StatusEvent(key, record, self._partitions, tuple(offsets))
        kept = self._kept
        kept.append(event)
        if len(kept) > self._buffer_max:
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
        partition, offset = event.record.partition, event.record.offset
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
            backlog = [event for event in self._kept if event.record.offset > seen.get(event.record.partition, -1)
                       and (connector is None or event.connector == connector)]
        subscription = Subscription(connector, backlog, asyncio.Queue(self._queue_max))
        self._subscriptions.add(subscription)
        return subscription

    def _check_resumable(self, seen: dict[int, int]) -> None:
        for partition, forgotten in self._forgotten.items():
            if seen.get(partition, -1) < forgotten:
                raise EventIdTooOld(f"events of partition {partition} after offset {seen.get(partition, -1)} are no "
                                    f"longer kept (sidecar.events.buffer.max={self._buffer_max})")
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

