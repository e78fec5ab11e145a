"""StatusStore: Connect's status backing store semantics on a Kafka log.

Writes follow Connect's ``KafkaStatusBackingStore``: every write bumps the key's local sequence
and the store's generation; ``put_safe`` drops a write that could overwrite a newer status of
another worker. Reads follow Connect too: the cache changes only when a record is read back from
the topic (a write is visible after read-back), tombstones delete, garbled records are skipped,
and a task's stale UNASSIGNED never hides a RUNNING status of the same or a newer generation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Message

from . import codec
from .codec import GarbledValue, StatusValue
from .config import StoreConfig
from .kafka_log import Delivery, KafkaLog, ensure_topic
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

log = logging.getLogger(__name__)

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


class StatusStore:
    """Connector, task and topic statuses kept in Connect's compacted status topic."""

    def __init__(self, config: StoreConfig, bootstrap_servers: str) -> None:
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        self.generation = 0
        self.stats = ReadStats()
        self._connectors: dict[str, _Entry] = {}
        self._tasks: dict[str, dict[int, _Entry]] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
        self._log = KafkaLog(config.topic, bootstrap_servers, config.client_configs, self._apply)

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Set up the topic and read it to the end; bounded by ``sidecar.startup.timeout.ms``."""
        cfg = self.config
        async with asyncio.timeout(cfg.startup_timeout_s):
            await ensure_topic(self.bootstrap_servers, cfg.client_configs, cfg.topic, cfg.partitions,
                               cfg.replication_factor, cfg.topic_configs, cfg.startup_timeout_s)
        await self._log.start(cfg.startup_timeout_s)
        log.info("Status store ready: topic %s, %d partitions, %d connectors cached",
                 cfg.topic, len(self._log.partitions), len(self._connectors))

    async def stop(self) -> int:
        """Flush for at most ``sidecar.shutdown.timeout.ms``; returns the writes that were lost."""
        return await self._log.stop(self.config.shutdown_timeout_s)

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster id, once started."""
        return self._log.cluster_id

    @property
    def partitions(self) -> tuple[int, ...]:
        """The status topic's partitions, once started."""
        return self._log.partitions

    @property
    def pending_writes(self) -> int:
        """Writes Kafka has not yet acknowledged or failed."""
        return self._log.pending_writes

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until everything written to the topic before this call is in the cache."""
        await self._log.read_to_end(timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every write made so far is acknowledged or failed (not necessarily read back)."""
        await self._log.flush(timeout)

    async def read_your_writes(self, timeout: float | None = None) -> None:
        """Wait until every write made through this store so far is acknowledged and read back."""
        await self._log.read_own_writes(timeout)

    # ----------------------------------------------------------------------------- writes

    def put(self, status: Status) -> asyncio.Future[Delivery]:
        """Write a status unconditionally. Never blocks; the future resolves when Kafka has it."""
        future = self._send_status(status, safe=False)
        assert future is not None
        return future

    def put_safe(self, status: Status) -> asyncio.Future[Delivery] | None:
        """Write a status unless it could overwrite a newer status of another worker.

        Written when nothing is cached for the key, the cached status came from the same worker,
        or its generation is not newer; otherwise dropped (returns None), as Connect does.
        """
        return self._send_status(status, safe=True)

    def delete_connector(self, connector: str) -> asyncio.Future[list[Delivery]]:
        """Tombstones for every known task of the connector, then for the connector itself."""
        tasks = sorted(self._tasks.get(connector, ()))
        futures = [self._send(task_key(TaskId(connector, task)), None) for task in tasks]
        futures.append(self._send(connector_key(connector), None))
        return asyncio.gather(*futures)

    def put_topic(self, status: TopicStatus) -> asyncio.Future[Delivery]:
        """Record that a connector uses a topic."""
        return self._send(topic_key(status.connector, status.topic), codec.encode_topic_status(status))

    def delete_topic(self, connector: str, topic: str) -> asyncio.Future[Delivery]:
        """Forget that a connector uses a topic (a tombstone)."""
        return self._send(topic_key(connector, topic), None)

    def reset_topics(self, connector: str) -> asyncio.Future[list[Delivery]]:
        """Tombstones for every topic known for the connector."""
        topics = sorted(self._topics.get(connector, ()))
        return asyncio.gather(*(self.delete_topic(connector, topic) for topic in topics))

    def _send_status(self, status: Status, safe: bool) -> asyncio.Future[Delivery] | None:
        if isinstance(status, ConnectorStatus):
            entry = self._connector_entry(status.connector)
            key = connector_key(status.connector)
        else:
            entry = self._task_entry(status.id.connector, status.id.task)
            key = task_key(status.id)
        self.generation = status.generation
        if safe and not entry.can_write_safely(status):
            log.debug("put_safe dropped %s: cached status of another worker is newer", key)
            return None
        entry.sequence += 1
        return self._send(key, codec.encode_status(status.state, status.worker_id, status.generation, status.trace))

    def _send(self, key: str, value: bytes | None) -> asyncio.Future[Delivery]:
        return self._log.send(key.encode(), value)

    # ----------------------------------------------------------------------------- reads

    def get_connector(self, connector: str) -> ConnectorStatus | None:
        """The connector's status as last read from the topic."""
        entry = self._connectors.get(connector)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return ConnectorStatus(connector, value.state, value.worker_id, value.generation, value.trace)

    def get_task(self, task: TaskId) -> TaskStatus | None:
        """The task's status as last read from the topic."""
        entry = self._tasks.get(task.connector, {}).get(task.task)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return TaskStatus(task, value.state, value.worker_id, value.generation, value.trace)

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
        if status.state is State.STOPPED:
            raise ValueError("a task cannot be STOPPED")
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
