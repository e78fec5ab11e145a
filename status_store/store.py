"""StatusStore: Connect's status backing store semantics on a Kafka log.

Writes follow Connect's ``KafkaStatusBackingStore``: every write bumps the key's local sequence
and the store's generation; ``put_safe`` drops a write that could overwrite a newer status of
another worker. Reads come from a ``StatusCache`` (cache.py, Connect's read rules) that the reader
feeds: it changes only when a record is read back from the topic, so a write is visible after read-back.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Message, murmur2

from . import codec
from .backoff import Backoff, Random, backoff_policy
from .budget import RetryBudget
from .cache import CacheEntry, ReadStats, StatusCache, StatusRecord, connector_status, task_status
from .config import ExhaustedAction, RetryConfig, StoreConfig
from .errors import ErrorKind, RecordTooLargeError, classify
from .history import AppendLog, HistorySink, dead_letter
from .kafka import TopicProducer, TopicReader, ensure_topic, topic_exists
from .model import (
    ConnectorKey,
    ConnectorStatus,
    Status,
    TaskId,
    TaskKey,
    TaskStatus,
    TopicStatus,
    connector_key,
    parse_key,
    task_key,
    topic_key,
)
from .retry_queue import Outcome, Result, RetryListener, RetryPolicy, RetryQueue, StatusUpdate
from .spool import Spool, SpooledUpdate

log = logging.getLogger(__name__)

# While writes fail, whether the status topic still exists is checked at most this often.
TOPIC_CHECK_INTERVAL_S = 10.0
# librdkafka's default message.max.bytes, and what a record adds to its key and value on the wire at most.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
RECORD_OVERHEAD_BYTES = 64
# Replayed updates the topic made obsolete are logged one by one up to this many, then summed up.
_REPLAY_LOG_LINES = 20


@dataclass(slots=True)
class ExhaustedStats:
    """What became of updates after their last retry (``status.storage.retry.exhausted.action``)."""

    parked: int = 0
    dead_lettered: int = 0
    dead_letter_failed: int = 0


class StatusStore:
    """Connector, task and topic statuses kept in Connect's compacted status topic."""

    def __init__(self, config: StoreConfig, bootstrap_servers: str,
                 listeners: Sequence[RetryListener] = (), rng: Random = random.random) -> None:
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        self.generation = 0
        # What the reader has read back, with Connect's read rules: every read goes here.
        self._cache = StatusCache()
        self.exhausted = ExhaustedStats()
        self._topic_check: asyncio.Task[None] | None = None
        self._next_topic_check = 0.0
        self._spool = (Spool(config.spool_path, keep=self._keeps, tokens=self._tokens)
                       if config.spool_path is not None else None)
        retry = config.retry
        self._max_record_bytes = _max_record_bytes(config)
        self._reader = TopicReader(config.topic, bootstrap_servers, config.client_configs, self._apply)
        self._producer = TopicProducer(config.topic, bootstrap_servers, config.client_configs,
                                       retry.delivery_timeout_ms, on_restart=self._reader.restart)
        # The event topics retry like status writes, but outside the status writes' retry budget and bound.
        policy = _retry_policy(retry, rng, budgeted=False)
        self._history = self._dead_letters = None
        if config.history_topic is not None:
            self._history = AppendLog(config.history_topic, bootstrap_servers, config.client_configs, policy,
                                      retry.delivery_timeout_ms, "history", max_pending=config.history_max_pending)
            listeners = [*listeners, HistorySink(self._history, config.name)]
        if config.exhausted_action is ExhaustedAction.DEAD_LETTER:
            assert config.dead_letter_topic is not None
            self._dead_letters = AppendLog(config.dead_letter_topic, bootstrap_servers, config.client_configs,
                                           policy, retry.delivery_timeout_ms, "dead-letter")
        # The spool comes last: it asks _keeps, which the store's own listener has decided by then.
        listeners = [*listeners, _AfterLastRetry(self)]
        if self._spool is not None:
            listeners.append(self._spool)
        self._queue = RetryQueue(self._producer.send, _retry_policy(retry, rng, budgeted=True), listeners,
                                 route=self._partition_of, name=config.topic)
        for events in self.event_logs:
            events.yield_to = self._queue

    def _partition_of(self, key: str) -> int:
        """The key's partition, as Java's partitioner (and so Connect) places it."""
        return murmur2(key.encode(), len(self._producer.partitions))

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Set up the topic and read it to the end; bounded by ``sidecar.startup.timeout.ms``."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.startup_timeout_s
        async with asyncio.timeout(cfg.startup_timeout_s):
            await ensure_topic(self.bootstrap_servers, cfg.client_configs, cfg.topic, cfg.partitions,
                               cfg.replication_factor, cfg.topic_configs, cfg.startup_timeout_s)
        for events, role in ((self._history, "history topic"), (self._dead_letters, "dead-letter topic")):
            if events is not None:
                async with asyncio.timeout(max(0.001, deadline - loop.time())):
                    await ensure_topic(self.bootstrap_servers, cfg.client_configs, events.topic, cfg.partitions,
                                       cfg.replication_factor, {}, cfg.startup_timeout_s, compacted=False, role=role)
                await events.start(max(0.001, deadline - loop.time()))
        # One bound for the whole start: reading to the end gets what the topic set-up left.
        await self._producer.start(max(0.001, deadline - loop.time()))
        try:
            await self._reader.start(max(0.001, deadline - loop.time()))
        except BaseException:
            await self._producer.stop(0.0)
            raise
        if self._spool is not None:
            self._replay(self._spool)
        log.info("Status store ready: topic %s, %d partitions, %d connectors cached",
                 cfg.topic, len(self._producer.partitions), len(self._cache.connectors()))

    async def stop(self) -> list[StatusUpdate]:
        """Settle pending updates for at most ``sidecar.shutdown.timeout.ms``, then close.

        Returns the updates that failed because the store stopped first (also logged); never waits
        longer than the bound (KAFKA-15563).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_s
        if self._topic_check is not None:
            self._topic_check.cancel()
        lost = await self._queue.stop(self.config.shutdown_timeout_s)
        parked = self._queue.parked()
        if parked and self._spool is None:
            lost += parked
            log.error("Stopped with %d parked status update(s) and no spool: they are lost", len(parked))
        elif parked:
            log.warning("Stopped with %d parked status update(s); the spool keeps them for the next start",
                        len(parked))
        if lost:
            keys = ", ".join(u.key for u in lost[:10]) + (", ..." if len(lost) > 10 else "")
            log.error("Stopped with %d status update(s) not durable: %s", len(lost), keys)
        # The outcomes above are events too: the append-only topics stop after the status queue.
        for events in (self._dead_letters, self._history):
            if events is not None:
                await events.stop(max(0.0, deadline - loop.time()))
        await self._producer.stop(0.0)
        await self._reader.stop()
        if self._spool is not None:
            self._spool.close()
        return lost

    def _replay(self, spool: Spool) -> None:
        """Submit what the spool kept from an earlier run, as the retries they are: an update whose key another
        writer wrote after it was accepted (or whose connector was deleted since) is dropped, counted as
        superseded; the rest go as the writes they were (safe ones checked against the topic again)."""
        spooled = spool.pending()
        if spooled:
            log.warning("Replaying %d status update(s) that the spool %s kept from an earlier run",
                        len(spooled), spool.path)
        dropped = 0
        for item in spooled:
            if self._cache.holds(item.key, item.value) and item.base is not None:
                log.debug("Not replaying the update of %s: the topic holds it already", item.key)
                spool.forget(item.key)
                continue
            reason = self._replay_conflict(item)
            if reason is not None:
                dropped += 1
                if dropped <= _REPLAY_LOG_LINES:
                    log.warning("Not replaying the spooled update of %s: %s", item.key, reason)
                self._queue.supersede(StatusUpdate(item.key, item.value, item.kind, safe=item.safe), reason)
                continue
            parsed = parse_key(item.key)
            if item.value is None or not isinstance(parsed, ConnectorKey | TaskKey):
                self._submit(item.key, item.value, item.kind)
                continue
            value = codec.decode_status(item.value)
            status: Status = (connector_status(parsed.connector, value) if isinstance(parsed, ConnectorKey)
                              else task_status(TaskId(parsed.connector, parsed.task), value))
            if self._send_status(status, item.safe) is None:
                spool.forget(item.key)
        if dropped:
            log.warning("%d spooled update(s) were not replayed: the topic has newer records of their keys "
                        "(counted in status_update_superseded_total)", dropped)

    def _replay_conflict(self, item: SpooledUpdate) -> str | None:
        """Why a spooled update must not be written now, or None: compare-and-set on what was read of its key
        when it was accepted (rows of an older spool format kept nothing to compare: Connect's rules decide)."""
        if item.base is None:
            return None
        parsed = parse_key(item.key)
        if item.deleted_base is not None and isinstance(parsed, TaskKey):
            deleted = self._cache.deleted_at(parsed.connector)
            if deleted > item.deleted_base:
                return (f"connector {parsed.connector!r} was deleted (a tombstone at offset {deleted}) after it was "
                        "accepted")
        current = self._cache.last_offset(item.key)
        # At or below what was read then: nothing newer (a log that started over holds nothing newer either).
        if current <= item.base or (item.sent is not None and self._cache.holds(item.key, item.sent)):
            return None
        return (f"another writer wrote the key after it was accepted (its last record is at offset {current}, "
                f"it was at {item.base})")

    def _tokens(self, key: str) -> tuple[int, int]:
        """What the store has read of a key (for the spool): its last record's offset, and for a task its
        connector's last tombstone's (-1: none)."""
        parsed = parse_key(key)
        deleted = self._cache.deleted_at(parsed.connector) if isinstance(parsed, TaskKey) else -1
        return self._cache.last_offset(key), deleted

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster id, once started."""
        return self._producer.cluster_id

    @property
    def partitions(self) -> tuple[int, ...]:
        """The status topic's partitions, once started."""
        return self._producer.partitions

    @property
    def queue(self) -> RetryQueue:
        """The retry queue of this store (for observing pending updates)."""
        return self._queue

    @property
    def event_logs(self) -> list[AppendLog]:
        """The append-only topics this store writes besides the status topic (history, dead letters)."""
        return [events for events in (self._history, self._dead_letters) if events is not None]

    def commit_spool(self) -> bool:
        """Make the spool's record of every update submitted so far durable now (the HTTP API does this
        before it answers; otherwise it happens at the end of the event loop's turn). False when the spool
        could not be written now (another process holds it locked): the changes wait and are tried again."""
        return self._spool.commit() if self._spool is not None else True

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return self._queue.parked_count

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, oldest first in each partition (the probe in flight is not
        among them)."""
        return self._queue.parked()

    def check_room(self, count: int = 1) -> None:
        """Raise ``WriteRejectedError`` if ``count`` new writes would grow the retry queue past
        ``status.storage.retry.max.pending`` (a batch asks once, before it submits anything)."""
        self._queue.check_room(None, count)

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until everything written to the topic before this call is in the cache."""
        await self._reader.read_to_end(timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every update submitted so far has an outcome (written, failed or superseded)."""
        await self._queue.flush(timeout)

    async def wait_visible(self, updates: Sequence[StatusUpdate], timeout: float | None = None) -> None:
        """Wait until these updates are settled and the written ones have been read back into the cache."""
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(update.result() for update in updates))
            targets: dict[int, int] = {}
            for update in updates:
                delivery = update.outcome.delivery if update.outcome is not None else None
                if delivery is not None:
                    targets[delivery.partition] = max(targets.get(delivery.partition, 0), delivery.offset + 1)
            await self._reader.wait_applied(targets)

    async def read_your_writes(self, timeout: float | None = None) -> None:
        """Wait until every update submitted so far has an outcome and the written ones are read back."""
        async with asyncio.timeout(timeout):
            await self._queue.flush()
            await self._reader.wait_applied(self._producer.written_targets())

    # ----------------------------------------------------------------------------- writes

    def put(self, status: Status) -> StatusUpdate:
        """Write a status unconditionally. Never blocks; await ``result()`` on the update for its outcome."""
        update = self._send_status(status, safe=False)
        assert update is not None
        return update

    def put_safe(self, status: Status) -> StatusUpdate | None:
        """Write a status unless it could overwrite a newer status of another worker.

        Written when nothing is cached for the key, the cached status came from the same worker,
        or its generation is not newer; otherwise dropped (returns None), as Connect does. The check
        is repeated before every retry.
        """
        return self._send_status(status, safe=True)

    def delete_connector(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every known task of the connector, then for the connector itself."""
        tasks = self._cache.task_numbers(connector)
        self._queue.check_room(None, len(tasks) + 1)
        self._cache.forget_connector_type(connector)
        updates = [self._submit(task_key(TaskId(connector, task)), None, "task") for task in tasks]
        updates.append(self._submit(connector_key(connector), None, "connector"))
        return updates

    def put_topic(self, status: TopicStatus) -> StatusUpdate:
        """Record that a connector uses a topic."""
        key = topic_key(status.connector, status.topic)
        value = codec.encode_topic_status(status)
        self._check_size(key, value)
        return self._submit(key, value, "topic")

    def delete_topic(self, connector: str, topic: str) -> StatusUpdate:
        """Forget that a connector uses a topic (a tombstone)."""
        return self._submit(topic_key(connector, topic), None, "topic")

    def reset_topics(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every topic known for the connector."""
        topics = self._cache.topic_names(connector)
        self._queue.check_room(None, len(topics))
        return [self.delete_topic(connector, topic) for topic in topics]

    def _send_status(self, status: Status, safe: bool) -> StatusUpdate | None:
        if isinstance(status, ConnectorStatus):
            key, kind = connector_key(status.connector), "connector"
        else:
            key, kind = task_key(status.id), "task"
        # Refusals first: a write refused for room or size changes nothing.
        self._queue.check_room(key)
        value = self._encode(key, status)
        entry = (self._cache.connector_entry(status.connector) if isinstance(status, ConnectorStatus)
                 else self._cache.task_entry(status.id))
        self.generation = status.generation
        if safe and not entry.can_write_safely(status):
            log.debug("put_safe dropped %s: cached status of another worker is newer", key)
            return None
        entry.sequence += 1
        return self._submit(key, value, kind, functools.partial(self._abandon_reason, entry, status, safe), safe)

    def check_record(self, status: Status) -> None:
        """Raise ``RecordTooLargeError`` if this status could not be written even with its trace cut (a batch
        checks every item before it submits any)."""
        key = connector_key(status.connector) if isinstance(status, ConnectorStatus) else task_key(status.id)
        # Escaping at most sextuples a character's bytes: most statuses are clearly small enough.
        if 6 * (len(key) + len(status.worker_id)) + 128 <= self._max_record_bytes:
            return
        self._encode(key, status)

    def _encode(self, key: str, status: Status) -> bytes | None:
        """The record value, its trace cut so that the record fits the producer's limit (a FAILED status with a
        long trace is worth more written with the trace's head than refused); a record that cannot fit even
        so is refused (``RecordTooLargeError``)."""
        value = codec.encode_status(status.state, status.worker_id, status.generation, status.trace)
        if value is None or len(key.encode()) + len(value) <= self._max_record_bytes or not status.trace:
            self._check_size(key, value)
            return value
        trace = status.trace
        room = self._max_record_bytes - len(key.encode()) - (len(value) - len(codec.json_string(trace).encode()))
        low, high = 0, len(trace)
        while low < high:  # the longest head of the trace whose note and escaped text fit
            middle = (low + high + 1) // 2
            if len(codec.json_string(_cut(trace, middle)).encode()) <= room:
                low = middle
            else:
                high = middle - 1
        cut = _cut(trace, low)
        log.warning("The trace of %s is cut to %d of %d characters: the whole record would exceed the producer's "
                    "limit of %d bytes (message.max.bytes)", key, low, len(trace), self._max_record_bytes)
        value = codec.encode_status(status.state, status.worker_id, status.generation, cut)
        self._check_size(key, value)
        return value

    def _check_size(self, key: str, value: bytes | None) -> None:
        size = len(key.encode()) + (len(value) if value is not None else 0)
        if size > self._max_record_bytes:
            raise RecordTooLargeError(key, size, self._max_record_bytes)

    def _abandon_reason(self, entry: CacheEntry, status: Status, safe: bool, retry: bool) -> str | None:
        """Connect's reasons not to send: on a retry, the key is gone or the generation moved on; on any
        send, a safe write that is no longer safe. (A newer write of the key supersedes in the queue.)"""
        if retry and entry.deleted:
            return "the key was deleted (a tombstone was read)"
        if retry and status.generation != self.generation:
            return f"the store's generation moved from {status.generation} to {self.generation}"
        if safe and not entry.can_write_safely(status):
            return "another worker's newer status was read"
        return None

    def _submit(self, key: str, value: bytes | None, kind: str,
                abandon: Callable[[bool], str | None] | None = None, safe: bool = False) -> StatusUpdate:
        return self._queue.submit(StatusUpdate(key, value, kind, abandon, safe))

    # ----------------------------------------------------------------------------- after the last retry

    def _keeps(self, update: StatusUpdate, outcome: Outcome) -> bool:
        """Whether the spool keeps a failed update's row: parked, or until its dead letter is written."""
        return self._queue.is_parked(update) or (
            self._dead_letters is not None and outcome.result is Result.FAILED and not outcome.stopped)

    def _exhausted(self, update: StatusUpdate, outcome: Outcome) -> None:
        """An update failed for good (not because the store stopped): apply the configured action."""
        action = self.config.exhausted_action
        error = outcome.error
        if action is ExhaustedAction.PARK and error is not None and classify(error.code) is not ErrorKind.FATAL:
            if self._queue.park(update):
                self.exhausted.parked += 1
                log.debug("Parked the status update of %s: it is sent again once its partition takes writes",
                          update.key)
        elif self._dead_letters is not None:
            record = dead_letter(update, outcome, self.config.name)
            if not self._dead_letters.append(update.key, record, lambda result: self._dead_lettered(update, result)):
                self._dead_lettered(update, None)

    def _dead_lettered(self, update: StatusUpdate, outcome: Outcome | None) -> None:
        if outcome is not None and outcome.ok:
            self.exhausted.dead_lettered += 1
            if self._spool is not None:
                self._spool.release(update)
            return
        self.exhausted.dead_letter_failed += 1
        reason = outcome.reason if outcome is not None else "not queued"
        log.error("The dead letter of %s could not be written either (%s)%s", update.key, reason,
                  "; the spool keeps the update for the next start" if self._spool is not None else "")

    def _write_failed(self) -> None:
        """A write failed: now and then, check that the status topic still exists."""
        now = asyncio.get_running_loop().time()
        if self._topic_check is None and now >= self._next_topic_check:
            self._next_topic_check = now + TOPIC_CHECK_INTERVAL_S
            self._topic_check = asyncio.get_running_loop().create_task(self._recreate_lost_topic())

    async def _recreate_lost_topic(self) -> None:
        """Create the status topic again if the cluster lost it (deleted, or a broker without durable
        storage restarted): otherwise no write could ever succeed again until a restart."""
        cfg = self.config
        try:
            if await topic_exists(self.bootstrap_servers, cfg.client_configs, cfg.topic, TOPIC_CHECK_INTERVAL_S):
                return
            log.error("The status topic %s no longer exists on the cluster (deleted, or the brokers lost it): "
                      "creating it again; statuses written before are gone from Kafka, pending and parked ones "
                      "are written again", cfg.topic)
            await ensure_topic(self.bootstrap_servers, cfg.client_configs, cfg.topic, cfg.partitions,
                               cfg.replication_factor, cfg.topic_configs, TOPIC_CHECK_INTERVAL_S)
        except Exception as e:  # unreachable brokers, refused creation: the next failed write checks again
            log.warning("Could not check or create the status topic %s: %s", cfg.topic, e)
        finally:
            self._topic_check = None

    def _settled(self, update: StatusUpdate, outcome: Outcome) -> None:
        delivery = outcome.delivery
        if delivery is not None:
            self._cache.note_written(update.key, delivery.offset)
        elif outcome.result is Result.FAILED and not outcome.stopped:
            self._write_failed()
            self._exhausted(update, outcome)

    # ----------------------------------------------------------------------------- reads

    @property
    def stats(self) -> ReadStats:
        """What the reader has seen: records applied and records Connect would discard."""
        return self._cache.stats

    def get_connector(self, connector: str) -> ConnectorStatus | None:
        """The connector's status as last read from the topic."""
        return self._cache.get_connector(connector)

    def get_task(self, task: TaskId) -> TaskStatus | None:
        """The task's status as last read from the topic."""
        return self._cache.get_task(task)

    def get_all_tasks(self, connector: str) -> list[TaskStatus]:
        """The statuses of the connector's tasks, by task id."""
        return self._cache.get_all_tasks(connector)

    def connectors(self) -> list[str]:
        """Names of connectors with a status, sorted."""
        return self._cache.connectors()

    def get_topic(self, connector: str, topic: str) -> TopicStatus | None:
        """One topic status of a connector."""
        return self._cache.get_topic(connector, topic)

    def get_all_topics(self, connector: str) -> list[TopicStatus]:
        """The topics a connector uses, sorted by name."""
        return self._cache.get_all_topics(connector)

    def set_connector_type(self, connector: str, connector_type: str) -> None:
        """Remember a writer's hint of a connector's type (kept in memory only)."""
        self._cache.set_connector_type(connector, connector_type)

    def connector_type(self, connector: str) -> str:
        """``source``, ``sink``, or ``unknown`` when no writer said."""
        return self._cache.connector_type(connector)

    def _apply(self, records: Sequence[Message]) -> None:
        """Hand the reader's records to the cache."""
        self._cache.apply(StatusRecord(record.key(), record.value(), record.partition() or 0, record.offset() or 0)
                          for record in records)


class _AfterLastRetry(RetryListener):
    """The store's own listener of its retry queue: notes its writes' offsets, parks or dead-letters exhausted
    updates, and checks the topic when writes fail."""

    def __init__(self, store: StatusStore) -> None:
        self._store = store

    def on_retry(self, update: StatusUpdate) -> None:
        self._store._write_failed()

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        self._store._settled(update, outcome)


def _retry_policy(retry: RetryConfig, rng: Random, budgeted: bool) -> RetryPolicy:
    """The retry queue's policy from the retry settings; the status queue has the budget and the bound."""
    def backoff(max_ms: int) -> Backoff:
        return backoff_policy(retry.jitter_mode, retry.initial_backoff_ms, max_ms, retry.backoff_multiplier,
                              retry.jitter_factor, rng)

    budget = RetryBudget(retry.budget) if budgeted and retry.budget.enabled else None
    timeout = retry.timeout_ms / 1000 if retry.timeout_ms is not None else None
    probe_ms = min(retry.max_backoff_ms, max(retry.initial_backoff_ms, retry.probe_max_backoff_ms))
    return RetryPolicy(backoff(retry.max_backoff_ms), retry.max_retries, timeout, budget, retry.mode,
                       backoff(probe_ms), retry.max_pending if budgeted else None)


def _max_record_bytes(config: StoreConfig) -> int:
    """The largest key + value the producer and the topic take (message.max.bytes, the topic's
    max.message.bytes when set), less what a record adds on the wire."""
    producer = config.client_configs.get("message.max.bytes", "").strip()
    limit = int(producer) if producer.isdigit() else DEFAULT_MAX_MESSAGE_BYTES
    topic = config.topic_configs.get("max.message.bytes", "").strip()
    if topic.isdigit():
        limit = min(limit, int(topic))
    return limit - RECORD_OVERHEAD_BYTES


def _cut(trace: str, length: int) -> str:
    """A trace's head with a note of what was cut."""
    return f"{trace[:length]}\n\t... {len(trace) - length} more characters cut by status-store (record size limit)"
