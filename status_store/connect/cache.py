"""StatusCache: the status topic as Connect's ``KafkaStatusBackingStore`` materializes it (pure: no Kafka).

The cache is fed the topic's records in the order they are read and applies Connect's read rules:

- a null value is a tombstone: a connector's deletes the connector and all its tasks, a task's one task,
  a topic's one topic status (empty bytes are garbage, not a tombstone);
- a record whose key Connect cannot parse, or whose value it cannot decode (not JSON, an unknown state,
  a generation that is not an integer...), is logged and skipped: the value cached before stays;
- a task's UNASSIGNED is ignored while the cached status is RUNNING of the same or a newer generation
  (a worker that lost the task in a rebalance may write it after the new owner's RUNNING).

Besides the statuses it keeps what the write side asks: each key's entry with its deletion mark (entries
exist before anything is read back, as Connect's ``getOrAdd`` makes them; Connect's per-key write sequence has no
place here: the retry queue's slot per key drops an older write for a newer one itself), each
key's last offset and each connector's last tombstone (for the spool's replay check), and the connector
types writers hinted (the topic has no such field).

For the fleet's metrics each connector and task entry also notes when its state last changed (the Kafka
timestamp of the record that changed it) and how many times its state changed since it was first read.

``version`` counts the changes a reader of the whole fleet can see (records applied, types hinted), and ``view``
hands such a reader what the cache holds, to read on another thread while the cache goes on changing.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from . import codec
from .codec import GarbledValue, StatusValue, connector_status, task_status
from .model import (
    ConnectorKey,
    ConnectorStatus,
    Key,
    State,
    Status,
    TaskId,
    TaskKey,
    TaskStatus,
    TopicKey,
    TopicStatus,
    parse_key,
    topic_key,
)

log = logging.getLogger(__name__)


class StatusRecord(NamedTuple):
    """One record of the status topic, as read: ``value`` None is a tombstone.

    ``timestamp`` is the record's Kafka timestamp in seconds since the epoch (None: it has none, and the
    cache's clock stands in).
    """

    key: bytes | None
    value: bytes | None
    partition: int = 0
    offset: int = 0
    timestamp: float | None = None


# Told of a record that changed the cache, with its parsed key.
Applied = Callable[["StatusRecord", Key], None]


class FleetObject(NamedTuple):
    """A connector (``task`` None) or task with its status, when its state last changed and how many times."""

    connector: str
    task: int | None
    value: StatusValue
    changed_at: float
    changes: int


class CacheEntry:
    """A cached status with Connect's deletion mark.

    It keeps the decoded wire value (shared between records with equal bytes); the status object
    is built when someone asks for it, so reading a large topic allocates little. ``changed_at`` is when the
    state last changed (seconds since the epoch) and ``changes`` how many times it changed since the first
    status read: both as records are read, for the fleet's metrics.
    """

    __slots__ = ("changed_at", "changes", "deleted", "value")

    def __init__(self) -> None:
        self.value: StatusValue | None = None
        self.deleted = False
        self.changed_at = 0.0
        self.changes = 0

    def read(self, value: StatusValue, at: float) -> None:
        """A status read from the topic at this time: noted as a change when its state differs."""
        cached = self.value
        if cached is None or cached.state is not value.state:
            if cached is not None:
                self.changes += 1
            self.changed_at = at
        self.value = value

    def can_write_safely(self, status: Status) -> bool:
        """Connect's rule for a safe write: no status cached, the same worker's, or one of an older generation."""
        value = self.value
        if value is None:
            return True
        # Connect compares with the cached worker id's equals(): over a status read without one it throws, and
        # nothing is written.
        return value.worker_id is not None and (value.worker_id == status.worker_id
                                                or value.generation <= status.generation)


class StatusReads(Protocol):
    """The reads of statuses that Connect's routes answer from: the cache's, or a view's (values as read, no status
    objects made: a fleet's answer reads a million)."""

    def connectors(self) -> list[str]: ...

    def connector_value(self, connector: str) -> StatusValue | None: ...

    def task_values(self, connector: str) -> list[tuple[int, StatusValue]]: ...

    def connector_type(self, connector: str) -> str: ...


@dataclass(slots=True)
class ReadStats:
    """What the reader has seen: records applied and records Connect would discard."""

    applied: int = 0
    invalid_keys: int = 0
    garbled_values: int = 0
    stale_unassigned: int = 0


class StatusCache:
    """Connector, task and topic statuses as last read from the status topic."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.stats = ReadStats()
        self._clock = clock
        self._connectors: dict[str, CacheEntry] = {}
        self._tasks: dict[str, dict[int, CacheEntry]] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
        # Connector types as writers hinted them ("source" or "sink"); Connect's topic has no such field.
        self._types: dict[str, str] = {}
        # Each key's last record: its offset (read, or a write of ours acknowledged).
        self._offsets: dict[str, int] = {}
        # Each connector's last tombstone read (it deleted the connector's tasks too).
        self._deleted_at: dict[str, int] = {}
        # Told of each record that changed the cache (not of those discarded or ignored), after it (``subscribe``).
        self._subscribers: list[Applied] = []
        # Exceptions raised by subscribers, by subscriber name; each cause (subscriber, exception class) logged once.
        self.subscriber_errors: collections.Counter[str] = collections.Counter()
        self._logged_causes: set[tuple[str, str]] = set()
        # Changes a reader of the whole fleet can see so far (records applied, types hinted): a number that grows.
        self.version = 0

    def subscribe(self, applied: Applied) -> None:
        """Call ``applied(record, key)`` after each record that changes the cache, in the order read. A subscriber
        that raises is logged once per cause and counted (``subscriber_errors``), never allowed to stop the reading:
        the batch is applied whole and the read barriers move on, so read-your-writes and ``?wait=true`` hold."""
        self._subscribers.append(applied)

    # ----------------------------------------------------------------------------- reading records

    def apply(self, records: Iterable[StatusRecord]) -> None:
        """Apply records in the order they were read."""
        applied = 0
        read_task, read_connector, read_topic = self._read_task, self._read_connector, self._read_topic
        offsets, subscribers = self._offsets, self._subscribers
        for record in records:
            raw_key, value, _, offset, timestamp = record
            if raw_key is None:
                self._discard("invalid_keys", "no key", record)
                continue
            key = raw_key.decode("utf-8", "replace")
            if offset > offsets.get(key, -1):
                offsets[key] = offset
            parsed = parse_key(key)
            at = self._clock() if timestamp is None else timestamp
            changed = True
            try:
                if type(parsed) is TaskKey:
                    changed = read_task(parsed.connector, parsed.task, value, at)
                elif type(parsed) is ConnectorKey:
                    read_connector(parsed.connector, value, offset, at)
                elif type(parsed) is TopicKey:
                    read_topic(parsed, value)
                else:
                    self._discard("invalid_keys", f"invalid key {key!r}", record)
                    continue
            except (GarbledValue, ValueError) as e:
                self._discard("garbled_values", f"garbled value for {key!r}: {e}", record)
                continue
            applied += 1
            if subscribers and changed:
                for applied_to in subscribers:
                    try:
                        applied_to(record, parsed)
                    except Exception as e:
                        self._subscriber_failed(applied_to, e)
        self.stats.applied += applied
        self.version += applied

    def _subscriber_failed(self, applied: Applied, error: Exception) -> None:
        owner = getattr(applied, "__self__", applied)
        name = type(owner).__name__ if owner is not applied else getattr(applied, "__qualname__", repr(applied))
        self.subscriber_errors[name] += 1
        cause = (name, type(error).__name__)
        if cause not in self._logged_causes:
            self._logged_causes.add(cause)
            log.error("A subscriber of the status cache (%s) raised (logged once per cause, counted in "
                      "status_listener_errors_total{listener=\"cache:%s\"}); the cache goes on", name, name,
                      exc_info=error)

    def _discard(self, counter: str, reason: str, record: StatusRecord) -> None:
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        log.warning("Discarding record at partition %s offset %s: %s", record.partition, record.offset, reason)

    def _read_connector(self, connector: str, value: bytes | None, offset: int, at: float) -> None:
        if value is None:
            if offset > self._deleted_at.get(connector, -1):
                self._deleted_at[connector] = offset
            removed = self._connectors.pop(connector, None)
            if removed is not None:
                removed.deleted = True
            for entry in self._tasks.pop(connector, {}).values():
                entry.deleted = True
            return
        self.connector_entry(connector).read(codec.decode_status(value), at)

    def _read_task(self, connector: str, task: int, value: bytes | None, at: float) -> bool:
        """Take a task's record; False when Connect's rules ignore it (a stale UNASSIGNED)."""
        if value is None:
            tasks = self._tasks.get(connector)
            removed = tasks.pop(task, None) if tasks is not None else None
            if removed is not None:
                removed.deleted = True
            return True
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
            return False
        entry.read(status, at)
        return True

    def _read_topic(self, key: TopicKey, value: bytes | None) -> None:
        if value is None:
            topics = self._topics.get(key.connector)
            if topics is not None:
                topics.pop(key.topic, None)
            return
        self._topics.setdefault(key.connector, {})[key.topic] = codec.decode_topic_status(value)

    # ----------------------------------------------------------------------------- entries for the write side

    def connector_entry(self, connector: str) -> CacheEntry:
        """The connector's entry, added (with no status) if there is none."""
        entry = self._connectors.get(connector)
        if entry is None:
            entry = self._connectors[connector] = CacheEntry()
        return entry

    def task_entry(self, task: TaskId) -> CacheEntry:
        """The task's entry, added (with no status) if there is none."""
        return self._task_entry(task.connector, task.task)

    def _task_entry(self, connector: str, task: int) -> CacheEntry:
        tasks = self._tasks.get(connector)
        if tasks is None:
            tasks = self._tasks[connector] = {}
        entry = tasks.get(task)
        if entry is None:
            entry = tasks[task] = CacheEntry()
        return entry

    def note_written(self, key: str, offset: int) -> None:
        """A write of the key was acknowledged at this offset: the key's last record is at least there."""
        if offset > self._offsets.get(key, -1):
            self._offsets[key] = offset

    def last_offset(self, key: str) -> int:
        """The offset of the key's last record read or written (-1: none)."""
        return self._offsets.get(key, -1)

    def deleted_at(self, connector: str) -> int:
        """The offset of the connector's last tombstone read (-1: none)."""
        return self._deleted_at.get(connector, -1)

    def holds(self, key: str, value: bytes | None) -> bool:
        """Whether the key's cached status is this value (decoded, as every reader sees it)."""
        parsed = parse_key(key)
        try:
            if isinstance(parsed, ConnectorKey):
                entry = self._connectors.get(parsed.connector)
                cached: object = entry.value if entry is not None else None
                return cached == (codec.decode_status(value) if value is not None else None)
            if isinstance(parsed, TaskKey):
                task = self._tasks.get(parsed.connector, {}).get(parsed.task)
                cached = task.value if task is not None else None
                return cached == (codec.decode_status(value) if value is not None else None)
            if isinstance(parsed, TopicKey):
                topic = self._topics.get(parsed.connector, {}).get(parsed.topic)
                return topic == (codec.decode_topic_status(value) if value is not None else None)
        except GarbledValue:
            return False
        return False

    # ----------------------------------------------------------------------------- queries

    def get_connector(self, connector: str) -> ConnectorStatus | None:
        """The connector's status as last read from the topic."""
        entry = self._connectors.get(connector)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return connector_status(connector, value)

    def get_task(self, task: TaskId) -> TaskStatus | None:
        """The task's status as last read from the topic."""
        entry = self._tasks.get(task.connector, {}).get(task.task)
        value = entry.value if entry is not None else None
        if value is None:
            return None
        return task_status(task, value)

    def get_all_tasks(self, connector: str) -> list[TaskStatus]:
        """The statuses of the connector's tasks, by task id."""
        return [task_status(TaskId(connector, task), value) for task, value in self.task_values(connector)]

    def connector_value(self, connector: str) -> StatusValue | None:
        """The connector's status as last read, as decoded."""
        entry = self._connectors.get(connector)
        return entry.value if entry is not None else None

    def task_values(self, connector: str) -> list[tuple[int, StatusValue]]:
        """The connector's tasks' statuses as last read, as decoded, by task number."""
        tasks = self._tasks.get(connector)
        if not tasks:
            return []
        return [(task, entry.value) for task, entry in sorted(tasks.items()) if entry.value is not None]

    def task_numbers(self, connector: str) -> list[int]:
        """The connector's tasks that have an entry (a status read, or a write of ours under way), sorted."""
        return sorted(self._tasks.get(connector, ()))

    def topic_names(self, connector: str) -> list[str]:
        """The topics of the connector's topic statuses (as their keys name them), sorted."""
        return sorted(self._topics.get(connector, ()))

    def topic_keys(self, connector: str) -> list[str]:
        """The keys of the connector's topic statuses: the key each status's value names (as Connect's reset
        tombstones them), and a record's own key where its value names another (no Connect worker writes one)."""
        keys: dict[str, None] = {}
        for topic, status in sorted(self._topics.get(connector, {}).items()):
            keys.update(dict.fromkeys((topic_key(status.connector, status.topic), topic_key(connector, topic))))
        return list(keys)

    def connectors(self) -> list[str]:
        """Names of connectors with a status, sorted."""
        return sorted(name for name, entry in self._connectors.items() if entry.value is not None)

    def names(self) -> list[str]:
        """Names of connectors with an entry or tasks (in no order)."""
        return list(dict.fromkeys([*self._connectors, *self._tasks]))

    def fleet(self) -> Iterator[FleetObject]:
        """Every connector and task with a status read: the connectors, then the tasks."""
        for name, entry in self._connectors.items():
            if entry.value is not None:
                yield FleetObject(name, None, entry.value, entry.changed_at, entry.changes)
        for name, entries in self._tasks.items():
            for task, entry in entries.items():
                if entry.value is not None:
                    yield FleetObject(name, task, entry.value, entry.changed_at, entry.changes)

    def value_of(self, key: Key) -> StatusValue | TopicStatus | None:
        """The decoded value the key's last record applied left (None: none, or a tombstone)."""
        if isinstance(key, TopicKey):
            return self._topics.get(key.connector, {}).get(key.topic)
        entry = (self._tasks.get(key.connector, {}).get(key.task) if isinstance(key, TaskKey)
                 else self._connectors.get(key.connector))
        return entry.value if entry is not None else None

    def get_topic(self, connector: str, topic: str) -> TopicStatus | None:
        """One topic status of a connector."""
        return self._topics.get(connector, {}).get(topic)

    def get_all_topics(self, connector: str) -> list[TopicStatus]:
        """The topics a connector uses, sorted by name."""
        topics = self._topics.get(connector, {})
        return [topics[name] for name in self.topic_names(connector)]

    # ----------------------------------------------------------------------------- connector types

    def set_connector_type(self, connector: str, connector_type: str) -> None:
        """Remember a writer's hint of a connector's type (kept in memory only)."""
        if self._types.get(connector) != connector_type:
            self._types[connector] = connector_type
            self.version += 1

    def forget_connector_type(self, connector: str) -> None:
        """Drop the hint of a connector's type (the connector is being deleted)."""
        if self._types.pop(connector, None) is not None:
            self.version += 1

    def connector_type(self, connector: str) -> str:
        """``source``, ``sink``, or ``unknown`` when no writer said."""
        return self._types.get(connector, "unknown")

    # ----------------------------------------------------------------------------- the whole fleet, elsewhere

    def view(self) -> FleetView:
        """What the cache holds now, for a reader on another thread (see ``FleetView``); taken on the cache's own
        thread, in a few copies of its maps (milliseconds for 100,000 connectors)."""
        return FleetView(self._connectors.copy(), self._tasks.copy(), self._types.copy())


class FleetView:
    """The connectors and tasks of a cache, to read on another thread while the cache goes on changing on its own.

    The maps of connectors, of each connector's tasks and of types are copied when taken, and a connector's tasks
    when read, each in one call that runs whole under the interpreter's lock (a copy of a dict of strings and
    numbers calls no Python code), so no read meets a map changing under it. Entries are shared with the cache: a
    status read through the view is the entry's value when it is read, as new as or newer than when the view was
    taken (values only move forward), never older. A reader that answers with a position in the topic takes the
    position before the view: the answer then holds everything up to it, and the changes after it may show twice
    (a client applies them again), never be missed.
    """

    __slots__ = ("_connectors", "_tasks", "_types")

    def __init__(self, connectors: dict[str, CacheEntry], tasks: dict[str, dict[int, CacheEntry]],
                 types: dict[str, str]) -> None:
        self._connectors, self._tasks, self._types = connectors, tasks, types

    def fleet(self) -> Iterator[FleetObject]:
        """Every connector and task with a status, as ``StatusCache.fleet`` lists them."""
        for name, entry in self._connectors.items():
            if entry.value is not None:
                yield FleetObject(name, None, entry.value, entry.changed_at, entry.changes)
        for name, tasks in self._tasks.items():
            for task, entry in tasks.copy().items():
                if entry.value is not None:
                    yield FleetObject(name, task, entry.value, entry.changed_at, entry.changes)

    def names(self) -> list[str]:
        """Every connector with a status or a task's status (or an entry for one), sorted."""
        return sorted({*self._connectors, *self._tasks})

    def connectors(self) -> list[str]:
        """Names of connectors with a status, sorted (as ``StatusCache.connectors``)."""
        return sorted(name for name, entry in self._connectors.items() if entry.value is not None)

    def connector_object(self, connector: str) -> FleetObject | None:
        """The connector with its status, when it has one."""
        entry = self._connectors.get(connector)
        if entry is None or entry.value is None:
            return None
        return FleetObject(connector, None, entry.value, entry.changed_at, entry.changes)

    def task_objects(self, connector: str) -> list[FleetObject]:
        """The connector's tasks with a status, by task number."""
        tasks = self._tasks.get(connector)
        found = []
        for task, entry in sorted(tasks.copy().items()) if tasks else ():
            value = entry.value
            if value is not None:
                found.append(FleetObject(connector, task, value, entry.changed_at, entry.changes))
        return found

    def connector_value(self, connector: str) -> StatusValue | None:
        entry = self._connectors.get(connector)
        return entry.value if entry is not None else None

    def task_values(self, connector: str) -> list[tuple[int, StatusValue]]:
        return [(o.task, o.value) for o in self.task_objects(connector) if o.task is not None]

    def connector_type(self, connector: str) -> str:
        return self._types.get(connector, "unknown")
