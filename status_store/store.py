"""StatusStore: Connect's status backing store semantics on a Kafka log.

Writes follow Connect's ``KafkaStatusBackingStore``: every write bumps the key's local sequence
and the store's generation; ``put_safe`` drops a write that could overwrite a newer status of
another worker. Reads follow Connect too: the cache changes only when a record is read back from
the topic (a write is visible after read-back), tombstones delete, garbled records are skipped,
and a task's stale UNASSIGNED never hides a RUNNING status of the same or a newer generation.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Message

from . import codec
from .backoff import Random, backoff_policy
from .budget import RetryBudget
from .codec import GarbledValue, StatusValue
from .config import ExhaustedAction, StoreConfig
from .errors import ErrorKind, classify
from .history import AppendLog, HistorySink, dead_letter
from .kafka_log import KafkaLog, ensure_topic, topic_exists
from .model import (
    ConnectorKey,
    ConnectorStatus,
    State,
    Status,
    TaskId,
    TaskKey,
    TaskStatus,
    TopicKey,
    TopicStatus,
    connector_key,
    parse_key,
    task_key,
    topic_key,
)
from .retry_queue import Outcome, Result, RetryListener, RetryPolicy, RetryQueue, StatusUpdate
from .spool import Spool

log = logging.getLogger(__name__)

# While writes fail, whether the status topic still exists is checked at most this often.
TOPIC_CHECK_INTERVAL_S = 10.0


class _Entry:
    """A cached status with Connect's per-key write sequence and deletion mark.

    It keeps the decoded wire value (shared between records with equal bytes); the status object
    is built when someone asks for it, so reading a large topic allocates little.
    """

    __slots__ = ("deleted", "sequence", "value")

    def __init__(self) -> None:
        self.value: StatusValue | None = None
        self.sequence = 0
        self.deleted = False

    def can_write_safely(self, status: Status) -> bool:
        value = self.value
        return value is None or value.worker_id == status.worker_id or value.generation <= status.generation


@dataclass(slots=True)
class ReadStats:
    """What the reader has seen: records applied and records Connect would discard."""

    applied: int = 0
    invalid_keys: int = 0
    garbled_values: int = 0
    stale_unassigned: int = 0


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
        self.stats = ReadStats()
        self._connectors: dict[str, _Entry] = {}
        self._tasks: dict[str, dict[int, _Entry]] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
        # Connector types as writers hinted them ("source" or "sink"); Connect's topic has no such field.
        self._types: dict[str, str] = {}
        self.exhausted = ExhaustedStats()
        # Parked updates (exhausted.action=park) by key, oldest first, and the one sent as a probe.
        self._parked: dict[str, StatusUpdate] = {}
        self._probe: StatusUpdate | None = None
        self._probe_timer: asyncio.TimerHandle | None = None
        self._topic_check: asyncio.Task[None] | None = None
        self._next_topic_check = 0.0
        self._spool = Spool(config.spool_path, keep=self._keeps) if config.spool_path is not None else None
        retry = config.retry
        self._log = KafkaLog(config.topic, bootstrap_servers, config.client_configs, self._apply,
                             retry.delivery_timeout_ms)
        backoff = backoff_policy(retry.jitter_mode, retry.initial_backoff_ms, retry.max_backoff_ms,
                                 retry.backoff_multiplier, retry.jitter_factor, rng)
        timeout = retry.timeout_ms / 1000 if retry.timeout_ms is not None else None
        # The event topics retry like status writes, but outside the status writes' retry budget.
        policy = RetryPolicy(backoff, retry.max_retries, timeout)
        self._history = self._dead_letters = None
        if config.history_topic is not None:
            self._history = AppendLog(config.history_topic, bootstrap_servers, config.client_configs, policy,
                                      retry.delivery_timeout_ms, "history", max_pending=config.history_max_pending)
            listeners = [*listeners, HistorySink(self._history, config.sidecar_name)]
        if config.exhausted_action is ExhaustedAction.DEAD_LETTER:
            assert config.dead_letter_topic is not None
            self._dead_letters = AppendLog(config.dead_letter_topic, bootstrap_servers, config.client_configs,
                                           policy, retry.delivery_timeout_ms, "dead-letter")
        # The spool comes last: it asks _keeps, which the store's own listener has decided by then.
        listeners = [*listeners, _AfterLastRetry(self)]
        if self._spool is not None:
            listeners.append(self._spool)
        budget = RetryBudget(retry.budget) if retry.budget.enabled else None
        self._queue = RetryQueue(self._log.send, RetryPolicy(backoff, retry.max_retries, timeout, budget), listeners)
        for events in self.event_logs:
            events.yield_to = self._queue

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
        await self._log.start(max(0.001, deadline - loop.time()))
        if self._spool is not None:
            self._replay(self._spool)
        log.info("Status store ready: topic %s, %d partitions, %d connectors cached",
                 cfg.topic, len(self._log.partitions), len(self._connectors))

    async def stop(self) -> list[StatusUpdate]:
        """Settle pending updates for at most ``sidecar.shutdown.timeout.ms``, then close.

        Returns the updates that failed because the store stopped first (also logged); never waits
        longer than the bound (KAFKA-15563).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_s
        if self._probe_timer is not None:
            self._probe_timer.cancel()
        if self._topic_check is not None:
            self._topic_check.cancel()
        lost = await self._queue.stop(self.config.shutdown_timeout_s)
        parked = list(self._parked.values())
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
        await self._log.stop(0.0)
        if self._spool is not None:
            self._spool.close()
        return lost

    def _replay(self, spool: Spool) -> None:
        """Submit what the spool kept from an earlier run, as the writes they were (safe ones checked again)."""
        spooled = spool.pending()
        if spooled:
            log.warning("Replaying %d status update(s) that the spool %s kept from an earlier run",
                        len(spooled), spool.path)
        for item in spooled:
            parsed = parse_key(item.key)
            if item.value is None or not isinstance(parsed, ConnectorKey | TaskKey):
                self._submit(item.key, item.value, item.kind)
                continue
            value = codec.decode_status(item.value)
            status: Status = (_connector_status(parsed.connector, value) if isinstance(parsed, ConnectorKey)
                              else _task_status(TaskId(parsed.connector, parsed.task), value))
            if self._send_status(status, item.safe) is None:
                spool.forget(item.key)

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster id, once started."""
        return self._log.cluster_id

    @property
    def partitions(self) -> tuple[int, ...]:
        """The status topic's partitions, once started."""
        return self._log.partitions

    @property
    def queue(self) -> RetryQueue:
        """The retry queue of this store (for observing pending updates)."""
        return self._queue

    @property
    def event_logs(self) -> list[AppendLog]:
        """The append-only topics this store writes besides the status topic (history, dead letters)."""
        return [events for events in (self._history, self._dead_letters) if events is not None]

    def commit_spool(self) -> None:
        """Make the spool's record of every update submitted so far durable now (the HTTP API does this
        before it answers; otherwise it happens at the end of the event loop's turn)."""
        if self._spool is not None:
            self._spool.commit()

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return len(self._parked)

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, oldest first (the probe in flight is not among them)."""
        return list(self._parked.values())

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until everything written to the topic before this call is in the cache."""
        await self._log.read_to_end(timeout)

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
            await self._log.wait_applied(targets)

    async def read_your_writes(self, timeout: float | None = None) -> None:
        """Wait until every update submitted so far has an outcome and the written ones are read back."""
        async with asyncio.timeout(timeout):
            await self._queue.flush()
            await self._log.read_own_writes()

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

    def set_connector_type(self, connector: str, connector_type: str) -> None:
        """Remember a writer's hint of a connector's type (kept in memory only)."""
        self._types[connector] = connector_type

    def connector_type(self, connector: str) -> str:
        """``source``, ``sink``, or ``unknown`` when no writer said."""
        return self._types.get(connector, "unknown")

    def delete_connector(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every known task of the connector, then for the connector itself."""
        self._types.pop(connector, None)
        tasks = sorted(self._tasks.get(connector, ()))
        updates = [self._submit(task_key(TaskId(connector, task)), None, "task") for task in tasks]
        updates.append(self._submit(connector_key(connector), None, "connector"))
        return updates

    def put_topic(self, status: TopicStatus) -> StatusUpdate:
        """Record that a connector uses a topic."""
        return self._submit(topic_key(status.connector, status.topic), codec.encode_topic_status(status), "topic")

    def delete_topic(self, connector: str, topic: str) -> StatusUpdate:
        """Forget that a connector uses a topic (a tombstone)."""
        return self._submit(topic_key(connector, topic), None, "topic")

    def reset_topics(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every topic known for the connector."""
        return [self.delete_topic(connector, topic) for topic in sorted(self._topics.get(connector, ()))]

    def _send_status(self, status: Status, safe: bool) -> StatusUpdate | None:
        if isinstance(status, ConnectorStatus):
            entry = self._connector_entry(status.connector)
            key, kind = connector_key(status.connector), "connector"
        else:
            entry = self._task_entry(status.id.connector, status.id.task)
            key, kind = task_key(status.id), "task"
        self.generation = status.generation
        if safe and not entry.can_write_safely(status):
            log.debug("put_safe dropped %s: cached status of another worker is newer", key)
            return None
        entry.sequence += 1
        value = codec.encode_status(status.state, status.worker_id, status.generation, status.trace)
        return self._submit(key, value, kind, functools.partial(self._abandon_reason, entry, status, safe), safe)

    def _abandon_reason(self, entry: _Entry, status: Status, safe: bool, retry: bool) -> str | None:
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
        update = self._queue.submit(StatusUpdate(key, value, kind, abandon, safe))
        parked = self._parked.pop(key, None) if self._parked else None
        if parked is not None:
            # The newer value replaces the parked one (in the spool too: the key's row now holds it).
            self._unpark(parked)
        return update

    # ----------------------------------------------------------------------------- after the last retry

    def _keeps(self, update: StatusUpdate, outcome: Outcome) -> bool:
        """Whether the spool keeps a failed update's row: parked, or until its dead letter is written."""
        return self._parked.get(update.key) is update or (
            self._dead_letters is not None and outcome.result is Result.FAILED and not outcome.stopped)

    def _exhausted(self, update: StatusUpdate, outcome: Outcome) -> None:
        """An update failed for good (not because the store stopped): apply the configured action."""
        action = self.config.exhausted_action
        error = outcome.error
        if action is ExhaustedAction.PARK and error is not None and classify(error.code) is not ErrorKind.FATAL:
            self._parked[update.key] = update
            self.exhausted.parked += 1
            log.warning("Parked the status update of %s: it is sent again once Kafka takes writes", update.key)
            self._arm_probe()
        elif self._dead_letters is not None:
            record = dead_letter(update, outcome, self.config.sidecar_name)
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

    def _written(self) -> None:
        """A write got through: Kafka takes writes again, so parked updates are sent now."""
        if self._parked:
            asyncio.get_running_loop().call_soon(self._release_parked)

    def _release_parked(self) -> None:
        parked, self._parked = self._parked, {}
        if parked:
            log.info("Kafka takes writes again: sending %d parked status update(s)", len(parked))
        for update in parked.values():
            self._resubmit(update)

    def _resubmit(self, update: StatusUpdate) -> StatusUpdate | None:
        reason = update.abandon(True) if update.abandon is not None else None
        if reason is not None:
            log.info("Not sending the parked update of %s again: %s", update.key, reason)
            if self._spool is not None:
                self._spool.release(update, forget=True)
            return None
        again = self._queue.submit(StatusUpdate(update.key, update.value, update.kind, update.abandon, update.safe))
        self._unpark(update)
        return again

    def _unpark(self, update: StatusUpdate) -> None:
        if self._spool is not None:
            self._spool.release(update)

    def _arm_probe(self) -> None:
        if self._probe is None and self._probe_timer is None and self._parked:
            interval = max(1.0, self.config.retry.max_backoff_ms / 1000)
            self._probe_timer = asyncio.get_running_loop().call_later(interval, self._send_probe)

    def _send_probe(self) -> None:
        """Send one parked update (the oldest): if it gets through, the others follow."""
        self._probe_timer = None
        while self._parked and self._probe is None:
            key = next(iter(self._parked))
            self._probe = self._resubmit(self._parked.pop(key))

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
        if update is self._probe:
            self._probe = None
        if outcome.result is Result.WRITTEN:
            self._written()
        elif outcome.result is Result.FAILED and not outcome.stopped:
            self._write_failed()
            self._exhausted(update, outcome)
        self._arm_probe()

    # ----------------------------------------------------------------------------- reads

    def get_connector(self, connector: str) -> ConnectorStatus | None:
        """The connector's status as last read from the topic."""
        entry = self._connectors.get(connector)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return _connector_status(connector, value)

    def get_task(self, task: TaskId) -> TaskStatus | None:
        """The task's status as last read from the topic."""
        entry = self._tasks.get(task.connector, {}).get(task.task)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return _task_status(task, value)

    def get_all_tasks(self, connector: str) -> list[TaskStatus]:
        """The statuses of the connector's tasks, by task id."""
        found = (self.get_task(TaskId(connector, task)) for task in sorted(self._tasks.get(connector, ())))
        return [status for status in found if status is not None]

    def connectors(self) -> list[str]:
        """Names of connectors with a status, sorted."""
        return sorted(name for name, entry in self._connectors.items() if entry.value is not None)

    def get_topic(self, connector: str, topic: str) -> TopicStatus | None:
        """One topic status of a connector."""
        return self._topics.get(connector, {}).get(topic)

    def get_all_topics(self, connector: str) -> list[TopicStatus]:
        """The topics a connector uses, sorted by name."""
        topics = self._topics.get(connector, {})
        return [topics[name] for name in sorted(topics)]

    def _apply(self, records: Sequence[Message]) -> None:
        applied = 0
        read_task, read_connector, read_topic = self._read_task, self._read_connector, self._read_topic
        for record in records:
            raw_key = record.key()
            if raw_key is None:
                self._discard("invalid_keys", "no key", record)
                continue
            key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
            parsed = parse_key(key)
            try:
                if type(parsed) is TaskKey:
                    read_task(parsed.connector, parsed.task, record.value())
                elif type(parsed) is ConnectorKey:
                    read_connector(parsed.connector, record.value())
                elif type(parsed) is TopicKey:
                    read_topic(parsed, record.value())
                else:
                    self._discard("invalid_keys", f"invalid key {key!r}", record)
                    continue
            except (GarbledValue, ValueError) as e:
                self._discard("garbled_values", f"garbled value for {key!r}: {e}", record)
                continue
            applied += 1
        self.stats.applied += applied

    def _discard(self, counter: str, reason: str, record: Message) -> None:
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        log.warning("Discarding record at partition %s offset %s: %s", record.partition(), record.offset(), reason)

    def _connector_entry(self, connector: str) -> _Entry:
        entry = self._connectors.get(connector)
        if entry is None:
            entry = self._connectors[connector] = _Entry()
        return entry

    def _task_entry(self, connector: str, task: int) -> _Entry:
        tasks = self._tasks.get(connector)
        if tasks is None:
            tasks = self._tasks[connector] = {}
        entry = tasks.get(task)
        if entry is None:
            entry = tasks[task] = _Entry()
        return entry

    def _read_connector(self, connector: str, value: bytes | None) -> None:
        if value is None:
            removed = self._connectors.pop(connector, None)
            if removed is not None:
                removed.deleted = True
            for entry in self._tasks.pop(connector, {}).values():
                entry.deleted = True
            return
        self._connector_entry(connector).value = codec.decode_status(value)

    def _read_task(self, connector: str, task: int, value: bytes | None) -> None:
        if value is None:
            tasks = self._tasks.get(connector)
            removed = tasks.pop(task, None) if tasks is not None else None
            if removed is not None:
                removed.deleted = True
            return
        if not connector or task < 0:
            # Java parses these, but no connector can have written them; our status model refuses them.
            raise ValueError(f"no connector can have task {task} of connector {connector!r}")
        status = codec.decode_status(value)
        entry = self._task_entry(connector, task)
        cached = entry.value
        if (status.state is State.UNASSIGNED and cached is not None and cached.state is State.RUNNING
                and cached.generation >= status.generation):
            self.stats.stale_unassigned += 1
            log.debug("Ignoring stale UNASSIGNED for task %s-%d: RUNNING at generation %d is newer",
                      connector, task, cached.generation)
            return
        entry.value = status

    def _read_topic(self, key: TopicKey, value: bytes | None) -> None:
        if value is None:
            topics = self._topics.get(key.connector)
            if topics is not None:
                topics.pop(key.topic, None)
            return
        self._topics.setdefault(key.connector, {})[key.topic] = codec.decode_topic_status(value)


class _AfterLastRetry(RetryListener):
    """The store's own listener of its retry queue: parks or dead-letters exhausted updates."""

    def __init__(self, store: StatusStore) -> None:
        self._store = store

    def on_retry(self, update: StatusUpdate) -> None:
        self._store._write_failed()

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        self._store._settled(update, outcome)


def _connector_status(connector: str, value: StatusValue) -> ConnectorStatus:
    return ConnectorStatus(connector, value.state, value.worker_id, value.generation, value.trace)


def _task_status(task: TaskId, value: StatusValue) -> TaskStatus:
    return TaskStatus(task, value.state, value.worker_id, value.generation, value.trace)
