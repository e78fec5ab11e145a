"""Records of Connect's config topic exactly as a Connect worker writes them, and a writer for them.

The formats follow ``KafkaConfigBackingStore``: keys are ad hoc strings; values are the JSON of Connect's
internal JsonConverter without schemas (compact, fields in schema order, map entries in the map's order):

- ``connector-<c>`` -> ``{"properties":{...}}`` (CONNECTOR_CONFIGURATION_V0), written with the connector's
  target state when it is created with one;
- ``task-<c>-<n>`` -> ``{"properties":{...}}`` (TASK_CONFIGURATION_V0), every task's, then
  ``commit-<c>`` -> ``{"tasks":N}`` (CONNECTOR_TASKS_COMMIT_V0);
- ``target-state-<c>`` -> ``{"state":...,"state.v2":...}`` (TARGET_STATE_V1: STOPPED is written as PAUSED in
  ``state`` for older workers), or ``{"state":...}`` from workers before KIP-875 (TARGET_STATE_V0);
- a deleted connector: tombstones for ``connector-<c>`` and ``target-state-<c>``;
- ``tasks-fencing-<c>`` -> ``{"task-count":N}``, ``session-key`` -> ``{"key":...,"algorithm":...,
  "creation-timestamp":...}``, ``restart-connector-<c>`` -> ``{"include-tasks":...,"only-failed":...}``,
  ``logger-cluster-<ns>`` -> ``{"level":...}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import Broker

WAIT = 15.0
Record = tuple[str, bytes | None]


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def connector_config(connector: str, properties: Mapping[str, str | None]) -> Record:
    """A connector's configuration record."""
    return f"connector-{connector}", _json({"properties": dict(properties)})


def task_config(connector: str, task: int, properties: Mapping[str, str | None]) -> Record:
    """A task's configuration record (pending until its commit record)."""
    return f"task-{connector}-{task}", _json({"properties": dict(properties)})


def commit(connector: str, tasks: int) -> Record:
    """The record that commits a connector's task configurations and sets its task count."""
    return f"commit-{connector}", _json({"tasks": tasks})


def target_state(connector: str, state: str) -> Record:
    """A target state record as workers since KIP-875 write it (STOPPED reads as PAUSED to older workers)."""
    return f"target-state-{connector}", _json({"state": "PAUSED" if state == "STOPPED" else state, "state.v2": state})


def target_state_v0(connector: str, state: str) -> Record:
    """A target state record as workers before KIP-875 wrote it."""
    return f"target-state-{connector}", _json({"state": state})


def tasks_fencing(connector: str, count: int) -> Record:
    """A task count record of exactly-once source support (nothing the REST API serves)."""
    return f"tasks-fencing-{connector}", _json({"task-count": count})


def session_key() -> Record:
    """The session key record of sessioned internal REST requests (nothing the REST API serves)."""
    return "session-key", _json({"key": "c2VjcmV0LWtleQ==", "algorithm": "HmacSHA256",
                                 "creation-timestamp": 1700000000000})


def restart_request(connector: str) -> Record:
    """A restart request record (nothing the REST API serves)."""
    return f"restart-connector-{connector}", _json({"include-tasks": True, "only-failed": False})


def logger_level(namespace: str, level: str) -> Record:
    """A cluster-wide logger level record (nothing the REST API serves)."""
    return f"logger-cluster-{namespace}", _json({"level": level})


def created(connector: str, properties: Mapping[str, str | None],
            tasks: list[Mapping[str, str | None]]) -> list[Record]:
    """What a worker writes when a connector is created and its tasks configured: the target state and the
    connector's configuration, then every task's configuration, then the commit record."""
    return [target_state(connector, "STARTED"), connector_config(connector, properties),
            *(task_config(connector, n, config) for n, config in enumerate(tasks)), commit(connector, len(tasks))]


def deleted(connector: str) -> list[Record]:
    """What a worker writes when a connector is deleted."""
    return [(f"connector-{connector}", None), (f"target-state-{connector}", None)]


def create_config_topic(broker: Broker, topic: str) -> None:
    """Create a config topic as Connect does: one partition (the mock cluster has no CreateTopics)."""
    if broker.mock is not None:
        broker.mock.create_topic(topic, 1, 1)
        return
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(WAIT)


def write_records(bootstrap_servers: str, topic: str, records: list[Record]) -> None:
    """Write records in order, as a Connect worker's producer does."""
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for key, value in records:
        producer.produce(topic, value, key.encode())
    assert producer.flush(WAIT) == 0
