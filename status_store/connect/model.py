"""Status values and record keys of Kafka Connect's status topic (pure: no Kafka, no I/O).

Key formats follow Connect's ``KafkaStatusBackingStore``:

- connector: ``status-connector-<connector>``
- task:      ``status-task-<connector>-<task>``
- topic:     ``status-topic-<topic>:connector-<connector>``
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import NamedTuple

CONNECTOR_PREFIX = "status-connector-"
TASK_PREFIX = "status-task-"
TOPIC_PREFIX = "status-topic-"
TOPIC_SEPARATOR = ":connector-"

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# ``new_tuple(NamedTupleClass, fields)``: a named tuple made from a tuple of its fields in C, for those made once
# per write or per record (the named tuple's own constructor is a Python function).
new_tuple = tuple.__new__

# Java's Integer.parseInt: an optional sign, then decimal digits of any script (Character.digit) in the Basic
# Multilingual Plane. It reads a Java string one UTF-16 unit at a time, and a digit above U+FFFF (e.g. U+1D7CF,
# MATHEMATICAL BOLD DIGIT ONE) is two surrogate units, neither of them a digit.
_JAVA_INT = re.compile(r"[+-]?(?:(?![\U00010000-\U0010FFFF])\d)+")


class State(enum.StrEnum):
    """A connector or task state, as Connect names it."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    # Never serialized: a DESTROYED status is written as a tombstone.
    DESTROYED = "DESTROYED"
    RESTARTING = "RESTARTING"
    # Connectors only (KIP-875).
    STOPPED = "STOPPED"


class Unversioned(enum.Enum):
    """The type of ``UNVERSIONED``."""

    UNVERSIONED = "unversioned"


# A status without a ``version`` field: what Connect 3.x writes (and any writer that does not know KIP-891).
UNVERSIONED = Unversioned.UNVERSIONED
# The version of the plugin a connector or task runs (KIP-891, Connect 4.1+): a string; None, which Connect 4.x writes
# as ``"version":null`` when it knows none (a task's UNASSIGNED, say); or UNVERSIONED, no field at all.
PluginVersion = str | None | Unversioned


@dataclass(frozen=True, slots=True)
class TaskId:
    """A task of a connector (Connect's ``ConnectorTaskId``)."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass(frozen=True, slots=True)
class ConnectorStatus:
    """The status of a connector."""

    connector: str
    state: State
    # None only in a status read from the topic whose writer left it out (it cannot be written).
    worker_id: str | None
    generation: int
    trace: str | None = None
    version: PluginVersion = UNVERSIONED

    def __post_init__(self) -> None:
        _check_status(self.connector, self.state, self.worker_id, self.generation, self.trace, self.version)


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """The status of one task of a connector."""

    id: TaskId
    state: State
    # As in ConnectorStatus.
    worker_id: str | None
    generation: int
    trace: str | None = None
    version: PluginVersion = UNVERSIONED

    def __post_init__(self) -> None:
        _check_status(self.id.connector, self.state, self.worker_id, self.generation, self.trace, self.version)
        _check_int("task", self.id.task, 0, INT32_MAX)


@dataclass(frozen=True, slots=True)
class TopicStatus:
    """A topic a connector has used (KIP-558 active topics).

    It holds whatever Connect reads from the topic (any strings, any 32-bit task); only a status that
    ``check_writable`` accepts is written.
    """

    topic: str
    connector: str
    task: int
    discover_timestamp: int

    def __post_init__(self) -> None:
        for what, name in (("topic", self.topic), ("connector", self.connector)):
            if not isinstance(name, str):
                raise ValueError(f"{what} name must be a string, got {name!r}")
        _check_int("task", self.task, INT32_MIN, INT32_MAX)
        _check_int("discover_timestamp", self.discover_timestamp, INT64_MIN, INT64_MAX)

    def check_writable(self) -> None:
        """Raise ``ValueError`` unless the status can be read back under its key: non-empty UTF-8 names, no
        ``:`` in the topic (the key's topic part ends at the first one), a task number of at least 0."""
        _check_name("topic", self.topic)
        if ":" in self.topic:
            raise ValueError(f"topic must not contain ':': {self.topic!r}")
        _check_name("connector", self.connector)
        _check_int("task", self.task, 0, INT32_MAX)


Status = ConnectorStatus | TaskStatus


# Parsed keys are NamedTuples: the reader builds one per record, so they must be cheap.
class ConnectorKey(NamedTuple):
    """A parsed ``status-connector-`` key."""

    connector: str


class TaskKey(NamedTuple):
    """A parsed ``status-task-`` key."""

    connector: str
    task: int


class TopicKey(NamedTuple):
    """A parsed ``status-topic-`` key."""

    topic: str
    connector: str


Key = ConnectorKey | TaskKey | TopicKey


def connector_key(connector: str) -> str:
    """The record key of a connector's status."""
    return CONNECTOR_PREFIX + connector


def task_key(task: TaskId) -> str:
    """The record key of a task's status."""
    return f"{TASK_PREFIX}{task.connector}-{task.task}"


def topic_key(connector: str, topic: str) -> str:
    """The record key of a connector's topic status."""
    return f"{TOPIC_PREFIX}{topic}{TOPIC_SEPARATOR}{connector}"


def status_key(status: Status) -> str:
    """The record key of a connector or task status."""
    if isinstance(status, ConnectorStatus):
        return connector_key(status.connector)
    return task_key(status.id)


def parse_key(key: str) -> Key | None:
    """Parse a record key the way Connect reads it; ``None`` for a key Connect discards."""
    if key.startswith(TASK_PREFIX):  # the most common keys first
        return _parse_task_key(key)
    if key.startswith(CONNECTOR_PREFIX):
        connector = key[len(CONNECTOR_PREFIX) :]
        return ConnectorKey(connector) if connector else None
    if key.startswith(TOPIC_PREFIX):
        return _parse_topic_key(key)
    return None


def _parse_task_key(key: str) -> TaskKey | None:
    if not key.endswith("-"):
        # Common case, same result as the split below: the task number follows the last '-'.
        connector, dash, number = key[len(TASK_PREFIX) :].rpartition("-")
        if not dash:
            return None
        if number.isascii() and number.isdecimal() and len(number) < 10:
            return new_tuple(TaskKey, (connector, int(number)))
    found = split_task_key(key, 2)
    return TaskKey(*found) if found is not None else None


def split_task_key(key: str, prefix_parts: int) -> tuple[str, int] | None:
    """(connector, task) of a task key as Connect parses one (``status-task-<c>-<n>`` in the status topic,
    ``task-<c>-<n>`` in the config topic): the key split on '-' as Java's ``String.split`` does (trailing
    empty parts dropped), the last part the task (Java's ``Integer.parseInt``), the parts after the prefix's
    ``prefix_parts`` and before the last, re-joined with '-', the connector. None for a key Connect discards."""
    parts = key.split("-")
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) < prefix_parts + 2 or not _JAVA_INT.fullmatch(parts[-1]):
        return None
    task = int(parts[-1])
    if not INT32_MIN <= task <= INT32_MAX:
        return None
    return "-".join(parts[prefix_parts:-1]), task


def _parse_topic_key(key: str) -> TopicKey | None:
    # The topic ends at the FIRST ':' (topic names cannot contain one; connector names can). Like Connect,
    # the separator's length is skipped without looking at it.
    colon = key.find(":", len(TOPIC_PREFIX))
    if colon < 0:
        return None
    topic = key[len(TOPIC_PREFIX) : colon]
    connector = key[colon + len(TOPIC_SEPARATOR) :]
    if not topic or not connector:
        return None
    return TopicKey(topic, connector)


def _check_name(what: str, name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    _check_unicode(what, name)


def _check_unicode(what: str, text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} is not valid Unicode (lone surrogate): {text!r}") from None


def _check_int(what: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer in [{low}, {high}], got {value!r}")


def _check_status(connector: str, state: State, worker_id: str | None, generation: int, trace: str | None,
                  version: PluginVersion) -> None:
    # Names come from record keys (UTF-8); worker_id and trace are Java strings, which may hold lone surrogates.
    _check_name("connector", connector)
    if not isinstance(state, State):
        raise ValueError(f"state must be a State, got {state!r}")
    if not isinstance(worker_id, str | None):
        raise ValueError(f"worker_id must be a string or None, got {worker_id!r}")
    _check_int("generation", generation, INT32_MIN, INT32_MAX)
    if not isinstance(trace, str | None):
        raise ValueError(f"trace must be a string or None, got {trace!r}")
    if not isinstance(version, str | None | Unversioned):
        raise ValueError(f"version must be a string, None or UNVERSIONED, got {version!r}")
