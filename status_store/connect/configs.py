"""Connect's config topic, read only: connector and task configurations as Connect's workers see them.

Connect's ``KafkaConfigBackingStore`` writes the topic and every worker reads it whole, from the beginning,
then tails it. status-store reads it the same way (``fleet.config_topic.ConfigTopic``) and keeps what Connect
keeps (``ConnectorConfigs``, pure), so that it can serve what Connect serves from it: the configured connectors, their
configurations, their tasks and their type. It never writes the topic, never creates it, never resolves a
``${provider:path:key}`` placeholder (Connect resolves them in the worker, never in the topic) and never logs
a configuration value: values may hold secrets.

Records (values are JSON, written by Connect's internal JsonConverter without schemas, and read here as that
converter reads them: Jackson's reader, ``jackson.read_value``, with its encodings, byte order marks, leading zeros
and limits; a null value, or one without content, is a tombstone):

- ``connector-<name>`` -> ``{"properties":{...}}``: the connector's configuration; a tombstone deletes the
  connector, its task count and its task configurations.
- ``task-<name>-<n>`` -> ``{"properties":{...}}``: a task's configuration, pending until ...
- ``commit-<name>`` -> ``{"tasks":N}``: ... commits the pending task configurations when those of tasks 0 to
  N-1 are all there, and sets the task count; otherwise the connector is inconsistent (it has no tasks) until
  a complete set is committed. Pending configurations are dropped at every commit.
- ``target-state-<name>`` -> ``{"state":...,"state.v2":...}``: STARTED, PAUSED or STOPPED (``state.v2``
  when present and valid, else ``state``, which older workers wrote alone).
- ``tasks-fencing-<name>``, ``restart-connector-<name>``, ``session-key``, ``logger-cluster-<ns>``:
  nothing the REST API serves; read and left alone.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any

from .codec import connect_data_json
from .jackson import NoContent, read_value
from .model import INT32_MIN, split_task_key

log = logging.getLogger(__name__)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
# Records of the topic that hold nothing the REST API serves.
IGNORED_PREFIXES = ("restart-connector-", "tasks-fencing-", "logger-cluster-")
SESSION_KEY = "session-key"

# Kafka's own connectors whose configuration misleads the type rule: MirrorMaker 2's source connectors take a
# ``topics`` setting (the topics to replicate), which a sink's configuration has.
KAFKA_CONNECTOR_TYPES: Mapping[str, str] = {
    "org.apache.kafka.connect.mirror.MirrorSourceConnector": "source",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector": "source",
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector": "source",
}

# A configuration: string values (null allowed), shown exactly as stored. A value of another kind (no Connect worker
# writes one) is held as the JSON text Jackson would write of what Connect's converter makes of it (a ConnectJSON).
Config = dict[str, Any]


class TargetState(enum.StrEnum):
    """The state a connector is asked to be in (Connect's ``TargetState``)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class ConnectorConfigs:
    """What Connect's ``KafkaConfigBackingStore`` keeps of the config topic, and its snapshot's reads (pure)."""

    def __init__(self) -> None:
        self._configs: dict[str, Config] = {}
        # Committed task configurations, and those waiting for their commit record, by connector and task.
        self._task_configs: dict[str, dict[int, Config]] = {}
        self._pending: dict[str, dict[int, Config]] = {}
        self._task_counts: dict[str, int] = {}
        self._target_states: dict[str, TargetState] = {}
        # Connectors whose last commit record found task configurations missing: they have no tasks.
        self._inconsistent: set[str] = set()
        # Records applied so far: a number that grows with every change a reader could see.
        self.version = 0

    # ----------------------------------------------------------------------------- reads

    def connectors(self) -> list[str]:
        """The configured connectors, sorted (Connect lists them in no particular order)."""
        return sorted(self._configs)

    def contains(self, connector: str) -> bool:
        """Whether the connector has a configuration."""
        return connector in self._configs

    def connector_config(self, connector: str) -> Config | None:
        """The connector's configuration as stored (placeholders unresolved); None when it has none."""
        return self._configs.get(connector)

    def task_count(self, connector: str) -> int:
        """The task count of the connector's last commit record (0 without one)."""
        return self._task_counts.get(connector, 0)

    def tasks(self, connector: str) -> range:
        """The connector's tasks (Connect's ``ClusterConfigState.tasks``): 0 to the task count, none while the
        connector is inconsistent."""
        if connector in self._inconsistent:
            return range(0)
        return range(self._task_counts.get(connector, 0))

    def task_config(self, connector: str, task: int) -> Config | None:
        """A task's committed configuration as stored; None when it has none."""
        return self._task_configs.get(connector, {}).get(task)

    def target_state(self, connector: str) -> TargetState | None:
        """The state the connector is asked to be in; None for a connector without a configuration or target
        state record."""
        return self._target_states.get(connector)

    # ----------------------------------------------------------------------------- records

    def apply(self, key: str, value: bytes | None) -> None:
        """Apply one record of the config topic as Connect's reader does; a record Connect would log and skip is
        logged (its key, never its value) and skipped."""
        self.version += 1
        try:
            data = json_value(value)
        except ValueError as e:
            # The reason names a position and at most one character: never the value, which may hold secrets.
            log.error("Skipping the config topic record %r: its value is not JSON as Connect reads it (%s)", key, e)
            return
        if key.startswith(TARGET_STATE_PREFIX):
            self._read_target_state(key[len(TARGET_STATE_PREFIX):], data)
        elif key.startswith(CONNECTOR_PREFIX):
            self._read_connector_config(key[len(CONNECTOR_PREFIX):], data)
        elif key.startswith(TASK_PREFIX):
            task = split_task_key(key, 1)
            if task is None:
                log.error("Skipping the config topic record %r: not a task configuration key", key)
                return
            self._read_task_config(*task, data)
        elif key.startswith(COMMIT_PREFIX):
            self._read_commit(key[len(COMMIT_PREFIX):], data)
        elif not key.startswith(IGNORED_PREFIXES) and key != SESSION_KEY:
            log.error("Skipping the config topic record %r: not a key Connect writes", key)

    def _read_connector_config(self, connector: str, data: object) -> None:
        if data is None:
            self._remove(connector)
            return
        properties = _properties(data)
        if properties is None:
            log.error("Skipping the configuration of connector %r: it is not {\"properties\": {...}}", connector)
            return
        self._configs[connector] = properties
        self._target_states.setdefault(connector, TargetState.STARTED)

    def _remove(self, connector: str) -> None:
        # Connect keeps the target state (its own tombstone removes it) and the inconsistent mark.
        self._configs.pop(connector, None)
        self._task_counts.pop(connector, None)
        self._task_configs.pop(connector, None)
        self._pending.pop(connector, None)

    def _read_task_config(self, connector: str, task: int, data: object) -> None:
        properties = _properties(data) if data is not None else None
        if properties is None:
            log.error("Skipping the configuration of task %s-%d: it is not {\"properties\": {...}}", connector, task)
            return
        self._pending.setdefault(connector, {})[task] = properties

    def _read_commit(self, connector: str, data: object) -> None:
        if connector not in self._configs:
            # Task configurations of a connector deleted before its commit record (compaction may have removed
            # both its configuration and its tombstone): Connect drops them.
            self._remove(connector)
            return
        count = data.get("tasks") if isinstance(data, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            log.error("Skipping the task commit record of connector %r: its task count is not an integer", connector)
            return
        count = _java_int(count)
        pending = self._pending.pop(connector, {})
        if all(task in pending for task in range(count)):
            self._task_configs.setdefault(connector, {}).update(pending)
            self._inconsistent.discard(connector)
        else:
            # Only compaction (or a leader that failed half-way) leaves a commit without its task configurations.
            log.warning("Connector %r has an incomplete set of task configurations (compaction?): it shows no tasks "
                        "until Connect commits a complete set", connector)
            self._inconsistent.add(connector)
        self._task_counts[connector] = count

    def _read_target_state(self, connector: str, data: object) -> None:
        if data is None:
            # Written with the connector's tombstone; a connector still configured is STARTED again.
            self._target_states.pop(connector, None)
            if connector in self._configs:
                self._target_states[connector] = TargetState.STARTED
            return
        if not isinstance(data, dict):
            log.error("Skipping the target state of connector %r: it is not a JSON object", connector)
            return
        # state.v2 (STOPPED) when a newer worker wrote it; state alone from older workers.
        name = data.get("state.v2")
        if not isinstance(name, str):
            name = data.get("state")
        if not isinstance(name, str) or name not in TargetState.__members__:
            log.error("Skipping the target state of connector %r: not STARTED, PAUSED or STOPPED", connector)
            return
        self._target_states[connector] = TargetState(name)


def json_value(value: bytes | None) -> object:
    """A record value as Connect's internal JsonConverter (without schemas) hands it over: None for a tombstone
    and for a value that holds no JSON value or JSON ``null``; ValueError for one that Jackson does not read."""
    if value is None:
        return None
    try:
        return read_value(value)
    except NoContent:
        return None


def _properties(data: object) -> Config | None:
    """The ``properties`` map of a configuration record; None when there is none. A value that is neither a string
    nor null is rendered once, as Jackson would write what Connect's converter makes of it."""
    properties = data.get("properties") if isinstance(data, dict) else None
    if not isinstance(properties, dict):
        return None
    return {name: value if value is None or isinstance(value, str) else connect_data_json(value)
            for name, value in properties.items()}


def _java_int(value: int) -> int:
    """A JSON integer read as Connect reads a task count: a long, narrowed to an int."""
    return (value - INT32_MIN) % (1 << 32) + INT32_MIN


def connector_type(config: Mapping[str, Any] | None, class_types: Mapping[str, str], written: str) -> str:
    """``source``, ``sink`` or ``unknown``: what Connect answers from the connector's plugin class, which status-store
    cannot load. In order: the class's type from ``class_types`` (the operator's ``sidecar.connector.types``) or
    Kafka's own connectors; the type its status writer gave (``written``, ``unknown`` when none did); the rule
    Connect's validation enforces (a sink connector's configuration names ``topics`` or ``topics.regex``, a
    source's does not); ``unknown`` without a configuration or a connector class."""
    connector_class = _text(config, "connector.class")
    if connector_class is not None:
        known = class_types.get(connector_class) or KAFKA_CONNECTOR_TYPES.get(connector_class)
        if known is not None:
            return known
    if written != "unknown" or connector_class is None:
        return written
    names_topics = any((_text(config, key) or "").strip() for key in ("topics", "topics.regex"))
    return "sink" if names_topics else "source"


def _text(config: Mapping[str, Any] | None, key: str) -> str | None:
    """A configuration value that is a string (not a value of another kind rendered as JSON text); None otherwise."""
    value = config.get(key) if config is not None else None
    return value if type(value) is str else None
