"""Append-only event topics beside the status topic: the status history and the dead letters.

The status topic is compacted: it says what a status is now, not how it got there. With
``status.storage.history.topic`` set, every status change the store accepts and every outcome of
its retry queue (written after N attempts, failed, superseded) is appended as an event to a
non-compacted topic, keyed like the status topic (the event format is in docs/analytics.md; the
PySpark pipeline reads it). With ``status.storage.retry.exhausted.action=dead-letter``, an update
that ran out of retries is appended, with its error and attempts, to a dead-letter topic.

Both go through their own ``RetryQueue`` (the same engine and policy as status writes) over their
own producer, and yield to status writes: a writer only queues the event's fields (no encoding);
events are encoded and sent on later turns of the event loop, all at once while no status write is
pending, else a chunk at a time between status work, so status writes keep their rate and latency
and events catch up when the store is idle. Events are never coalesced (every event is kept, where
status writes keep the latest), and at most ``max_pending`` wait at once; beyond that an event is
dropped and counted, never blocking the writer (a broker outage must not grow memory without bound).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import ExhaustedAction, StoreConfig
from ..connect import codec
from ..connect.codec import GarbledValue
from ..connect.model import ConnectorKey, TaskKey, TopicKey, parse_key
from ..kafka.producer import TopicProducer
from ..kafka.topics import ensure_topic
from ..retry.queue import RetryQueue
from ..retry.updates import Outcome, RetryListener, RetryPolicy, StatusUpdate, UpdateKind

log = logging.getLogger(__name__)

DEFAULT_MAX_PENDING = 100_000
# Events sent per turn of the event loop: while status writes are pending (then every _BUSY_PAUSE_S), and when not.
_BUSY_CHUNK = 50
_BUSY_PAUSE_S = 0.01
_IDLE_CHUNK = 2000
# An event's value, or how to encode it (encoding is deferred to the send, off the status write path).
EventValue = bytes | Callable[[], bytes]


def _report(done: Callable[[Outcome], None], future: asyncio.Future[Outcome]) -> None:
    if not future.cancelled():
        done(future.result())


def _now_ms() -> int:
    return int(time.time() * 1000)


def key_fields(key: str) -> dict[str, Any]:
    """The parts of a status key as event fields: kind, connector, task (and topic for topic keys)."""
    parsed = parse_key(key)
    if isinstance(parsed, TaskKey):
        return {"kind": "task", "connector": parsed.connector, "task": parsed.task}
    if isinstance(parsed, ConnectorKey):
        return {"kind": "connector", "connector": parsed.connector, "task": None}
    if isinstance(parsed, TopicKey):
        return {"kind": "topic", "connector": parsed.connector, "task": None, "topic": parsed.topic}
    return {"kind": "unknown", "connector": None, "task": None}


def value_fields(kind: str, value: bytes | None) -> dict[str, Any]:
    """A status value as event fields; a tombstone is the state DESTROYED (as Connect writes it)."""
    if value is None:
        return {"state": "DESTROYED", "worker_id": None, "generation": None, "trace": None}
    if kind == "topic":
        return {"state": None}
    try:
        status = codec.decode_status(value)
    except GarbledValue:
        return {"state": None}
    return {"state": status.state.value, "worker_id": status.worker_id, "generation": status.generation,
            "trace": status.trace}


def encode_event(event: Mapping[str, Any]) -> bytes:
    """An event of an append-only topic as its record's value: UTF-8 JSON."""
    # A status may hold a lone surrogate (Connect reads "\\ud800"), which has no UTF-8 form. It can only be in a
    # string, where backslashreplace's "\\ud800" is that very JSON escape.
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "backslashreplace")


class AppendLog:
    """An append-only topic written through its own retry queue; ``append`` never blocks."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str], policy: RetryPolicy,
                 delivery_timeout_ms: int, kind: UpdateKind, listeners: Sequence[RetryListener] = (),
                 max_pending: int = DEFAULT_MAX_PENDING, yield_to: RetryQueue | None = None) -> None:
        """``yield_to``: the status queue whose pending writes these events make way for."""
        self.topic = topic
        self.kind = kind
        self.max_pending = max_pending
        self.dropped = 0
        self.written = 0
        self.failed = 0
        self._log = TopicProducer(topic, bootstrap_servers, client_configs, delivery_timeout_ms)
        # Every event is written: no coalescing of events with one key.
        self._queue = RetryQueue(self._log.send, policy, [*listeners, _Tally(self)], route=self._log.partition_of,
                                 name=topic, coalesce=False)
        self._buffer: collections.deque[tuple[str, EventValue, Callable[[Outcome], None] | None]] = collections.deque()
        self._drain: asyncio.Handle | None = None
        self._running = False
        self._yield_to = yield_to

    @property
    def pending(self) -> int:
        """Events not written yet (queued or in the retry queue)."""
        return len(self._buffer) + self._queue.unsettled

    async def start(self, timeout: float) -> None:
        """Connect and find the topic's partitions (the topic must exist: see ``ensure_topic``)."""
        await self._log.start(timeout)
        self._running = True

    async def stop(self, timeout: float) -> list[StatusUpdate]:
        """Send what is queued, wait at most ``timeout`` s, then close; returns the events not written."""
        self._running = False
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None
        self._send(len(self._buffer))
        lost = await self._queue.stop(timeout)
        await self._log.stop(0.0)
        if lost:
            log.warning("%d event(s) for %s were not written before the store stopped", len(lost), self.topic)
        return lost

    def append(self, key: str, value: EventValue, done: Callable[[Outcome], None] | None = None) -> bool:
        """Queue one event for a later turn of the event loop; False (and counted) when it is dropped.

        ``done`` runs with the event's outcome (written, or failed after the retry policy ran out).
        """
        if not self._running or len(self._buffer) + self._queue.unsettled >= self.max_pending:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                log.warning("Dropped %d event(s) for %s: %s", self.dropped, self.topic,
                            "too many pending (the topic is unreachable?)" if self._running else "not running")
            return False
        self._buffer.append((key, value, done))
        if self._drain is None:
            self._drain = asyncio.get_running_loop().call_soon(self._send_some)
        return True

    def _send_some(self) -> None:
        self._drain = None
        busy = self._yield_to is not None and self._yield_to.unsettled > 0
        self._send(_BUSY_CHUNK if busy else _IDLE_CHUNK)
        if self._buffer and self._running:
            loop = asyncio.get_running_loop()
            self._drain = loop.call_later(_BUSY_PAUSE_S, self._send_some) if busy else loop.call_soon(self._send_some)

    def _send(self, count: int) -> None:
        buffer, submit = self._buffer, self._queue.submit
        for _ in range(min(count, len(buffer))):
            key, value, done = buffer.popleft()
            encoded = value if isinstance(value, bytes) else value()
            update = submit(StatusUpdate(key, encoded, self.kind))
            if done is not None:
                asyncio.ensure_future(update.result()).add_done_callback(functools.partial(_report, done))


class _Tally(RetryListener):
    """Counts the outcomes of an AppendLog's events."""

    def __init__(self, events: AppendLog) -> None:
        self._events = events

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        if outcome.ok:
            self._events.written += 1
        else:
            self._events.failed += 1


class HistorySink(RetryListener):
    """A retry-queue listener that appends every accepted status change and every outcome to the history topic."""

    def __init__(self, events: AppendLog, sidecar: str) -> None:
        self._events = events
        self._sidecar = sidecar

    def on_submitted(self, update: StatusUpdate) -> None:
        self._events.append(update.key, functools.partial(self._status_event, update.key, update.value, _now_ms()))

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        # submitted_at is the event loop's clock.
        latency_ms = max(0, round((asyncio.get_running_loop().time() - update.submitted_at) * 1000))
        self._events.append(update.key, functools.partial(self._outcome_event, update.key, update.value, outcome,
                                                          _now_ms(), latency_ms))

    def _status_event(self, key: str, value: bytes | None, time_ms: int) -> bytes:
        fields = key_fields(key)
        return encode_event({"event": "status", "time": time_ms, "sidecar": self._sidecar, "key": key, **fields,
                        **value_fields(fields["kind"], value)})

    def _outcome_event(self, key: str, value: bytes | None, outcome: Outcome, time_ms: int, latency_ms: int) -> bytes:
        fields = key_fields(key)
        return encode_event({"event": "outcome", "time": time_ms, "sidecar": self._sidecar, "key": key, **fields,
                        "state": value_fields(fields["kind"], value)["state"], "result": outcome.result.value,
                        "attempts": outcome.attempts,
                        "error": outcome.error.name if outcome.error is not None else None,
                        "reason": outcome.reason, "latency_ms": latency_ms})


def dead_letter(update: StatusUpdate, outcome: Outcome, sidecar: str) -> bytes:
    """The dead-letter record of an update that ran out of retries: the value, its error and attempts."""
    value = update.value.decode("utf-8", "replace") if update.value is not None else None
    error = outcome.error
    return encode_event({"key": update.key, **key_fields(update.key), "value": value, "time": _now_ms(),
                    "sidecar": sidecar, "attempts": outcome.attempts, "reason": outcome.reason,
                    "error": error.name if error is not None else None,
                    "error_message": str(error) if error is not None else None})


class EventTopics:
    """The append-only topics a store writes besides its status topic, as the configuration asks: the history
    (every accepted status change and every outcome) and the dead letters (updates that ran out of retries)."""

    def __init__(self, config: StoreConfig, bootstrap_servers: str, policy: RetryPolicy, status_queue: RetryQueue,
                 ) -> None:
        """The topics' events make way for ``status_queue``'s writes, and the history hears of its updates."""
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        timeout_ms = config.retry.delivery_timeout_ms
        self.history = self.dead_letters = None
        if config.history_topic is not None:
            self.history = AppendLog(config.history_topic, bootstrap_servers, config.client_configs, policy,
                                     timeout_ms, UpdateKind.HISTORY, max_pending=config.history_max_pending,
                                     yield_to=status_queue)
            status_queue.subscribe(HistorySink(self.history, config.name))
        if config.exhausted_action is ExhaustedAction.DEAD_LETTER:
            assert config.dead_letter_topic is not None
            self.dead_letters = AppendLog(config.dead_letter_topic, bootstrap_servers, config.client_configs,
                                          policy, timeout_ms, UpdateKind.DEAD_LETTER, yield_to=status_queue)

    @property
    def logs(self) -> list[AppendLog]:
        """The topics in use."""
        return [events for events in (self.history, self.dead_letters) if events is not None]

    async def start(self, deadline: float) -> None:
        """Create the topics where missing and connect, by ``deadline`` (loop time)."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        for events, role in ((self.history, "history topic"), (self.dead_letters, "dead-letter topic")):
            if events is not None:
                async with asyncio.timeout(max(0.001, deadline - loop.time())):
                    await ensure_topic(self.bootstrap_servers, cfg.client_configs, events.topic, cfg.partitions,
                                       cfg.replication_factor, {}, cfg.startup_timeout_s, compacted=False, role=role)
                await events.start(max(0.001, deadline - loop.time()))

    async def stop(self, deadline: float) -> None:
        """Send what is queued until ``deadline`` (loop time), dead letters first: they stand for lost updates."""
        loop = asyncio.get_running_loop()
        for events in (self.dead_letters, self.history):
            if events is not None:
                await events.stop(max(0.0, deadline - loop.time()))
