"""Connect's config topic, read as Connect's KafkaConfigBackingStore reads it: the records in memory, then the
reader on both brokers, fed records exactly as Connect workers write them."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from status_store.api.responses import connect_json
from status_store.config import build_config, load_config
from status_store.connect.configs import ConnectorConfigs, TargetState, connector_type
from status_store.embedded.broker import start_embedded_broker
from status_store.errors import ConfigError
from status_store.fleet.config_topic import ConfigTopic

from .conftest import Broker
from .connect_records import (
    Record,
    commit,
    connector_config,
    create_config_topic,
    created,
    deleted,
    logger_level,
    restart_request,
    session_key,
    target_state,
    target_state_v0,
    task_config,
    tasks_fencing,
    write_records,
)
from .helpers import eventually

WAIT = 15.0
KAFKA = {"bootstrap.servers": "127.0.0.1:9092", "status.storage.topic": "connect-status"}
SINK = {"connector.class": "io.example.JdbcSinkConnector", "name": "orders-sink", "topics": "orders",
        "connection.password": "${file:/etc/secrets.properties:db.password}", "tasks.max": "2"}
SOURCE = {"connector.class": "io.example.FileSource", "name": "logs", "file": "/var/log/app.log"}


def apply(configs: ConnectorConfigs, *records: Record) -> ConnectorConfigs:
    for key, value in records:
        configs.apply(key, value)
    return configs


def read(*records: Record) -> ConnectorConfigs:
    return apply(ConnectorConfigs(), *records)


def test_a_connector_configuration_is_served_as_stored_with_placeholders_unresolved() -> None:
    configs = read(connector_config("orders-sink", SINK))
    assert configs.connectors() == ["orders-sink"]
    assert configs.connector_config("orders-sink") == SINK
    assert configs.connector_config("orders-sink")["connection.password"] == (  # type: ignore[index]
        "${file:/etc/secrets.properties:db.password}")
    # A configuration without target state record is STARTED, as Connect sets it.
    assert configs.target_state("orders-sink") is TargetState.STARTED
    assert list(configs.tasks("orders-sink")) == []


def test_task_configurations_wait_for_their_commit_record() -> None:
    configs = read(connector_config("c", SOURCE), task_config("c", 0, {"task": "a"}),
                   task_config("c", 1, {"task": "b"}))
    assert (list(configs.tasks("c")), configs.task_config("c", 0)) == ([], None)
    apply(configs, commit("c", 2))
    assert list(configs.tasks("c")) == [0, 1]
    assert [configs.task_config("c", n) for n in (0, 1)] == [{"task": "a"}, {"task": "b"}]
    # A reconfiguration: the committed configurations stay until the new set is committed.
    apply(configs, task_config("c", 0, {"task": "A"}))
    assert (configs.task_config("c", 0), configs.task_count("c")) == ({"task": "a"}, 2)
    apply(configs, commit("c", 1))
    assert (list(configs.tasks("c")), configs.task_config("c", 0)) == ([0], {"task": "A"})


def test_a_commit_without_every_task_configuration_leaves_the_connector_without_tasks() -> None:
    # What compaction can leave: task 0's configuration is gone, task 1's and the commit are there.
    configs = read(connector_config("c", SOURCE), task_config("c", 1, {"task": "b"}), commit("c", 2))
    assert (list(configs.tasks("c")), configs.task_count("c")) == ([], 2)
    # Pending configurations are dropped at every commit: the next commit needs a complete set of its own.
    apply(configs, task_config("c", 0, {"task": "a"}), commit("c", 2))
    assert list(configs.tasks("c")) == []
    apply(configs, task_config("c", 0, {"task": "a"}), task_config("c", 1, {"task": "b"}), commit("c", 2))
    assert list(configs.tasks("c")) == [0, 1]


def test_a_deleted_connector_leaves_nothing_behind() -> None:
    configs = read(*created("c", SOURCE, [{"task": "a"}]), target_state("c", "PAUSED"), *deleted("c"))
    assert (configs.connectors(), configs.contains("c"), configs.connector_config("c")) == ([], False, None)
    assert (list(configs.tasks("c")), configs.task_count("c"), configs.target_state("c")) == ([], 0, None)
    # Created again: the old task configurations do not come back.
    apply(configs, connector_config("c", SOURCE))
    assert (configs.task_config("c", 0), configs.target_state("c")) == (None, TargetState.STARTED)


def test_task_configurations_of_a_connector_deleted_before_their_commit_are_dropped() -> None:
    configs = read(task_config("gone", 0, {"task": "a"}), commit("gone", 1), connector_config("gone", SOURCE))
    assert (configs.contains("gone"), list(configs.tasks("gone")), configs.task_config("gone", 0)) == (True, [], None)


def test_target_states_of_both_record_versions() -> None:
    configs = read(connector_config("c", SOURCE), target_state_v0("c", "PAUSED"))
    assert configs.target_state("c") is TargetState.PAUSED
    apply(configs, target_state("c", "STOPPED"))  # {"state":"PAUSED","state.v2":"STOPPED"}
    assert configs.target_state("c") is TargetState.STOPPED
    apply(configs, ("target-state-c", b'{"state":"STARTED","state.v2":null}'))
    assert configs.target_state("c") is TargetState.STARTED
    apply(configs, ("target-state-c", b'{"state":"PAUSED","state.v2":7}'))  # not a string: state is read
    assert configs.target_state("c") is TargetState.PAUSED
    for bad in (b'{"state":"STARTED","state.v2":"RUNNING"}', b'{"state":"started"}', b'{"tasks":1}', b'"PAUSED"'):
        apply(configs, ("target-state-c", bad))
        assert configs.target_state("c") is TargetState.PAUSED, bad
    # The tombstone written with a connector's deletion; a connector still configured is STARTED again.
    apply(configs, ("target-state-c", None))
    assert configs.target_state("c") is TargetState.STARTED


def test_records_that_serve_nothing_change_nothing() -> None:
    configs = read(*created("c", SOURCE, [{"task": "a"}]))
    apply(configs, tasks_fencing("c", 1), session_key(), restart_request("c"), logger_level("org.apache", "DEBUG"))
    assert (configs.connectors(), list(configs.tasks("c")), configs.target_state("c")) == (
        ["c"], [0], TargetState.STARTED)


def test_a_task_key_is_parsed_as_connect_parses_it() -> None:
    configs = read(connector_config("my-conn", SOURCE), task_config("my-conn", 12, {"t": "12"}),
                   *(task_config("my-conn", n, {"t": str(n)}) for n in range(12)), commit("my-conn", 13))
    assert (list(configs.tasks("my-conn")), configs.task_config("my-conn", 12)) == (list(range(13)), {"t": "12"})


def test_a_task_number_is_read_one_utf16_unit_at_a_time_as_javas_parse_int_reads_it() -> None:
    # A BMP digit of another script is a digit (task-c-\u0661 is task 1); a digit above U+FFFF is two surrogate
    # units, neither a digit, so the record is ignored ("couldn't be parsed as a task config key"). Connect 4.4 does
    # the same: tests/test_connect_records_live.py::
    # test_a_config_task_number_is_read_one_utf16_unit_at_a_time_as_javas_parse_int_reads_it (the second commit's
    # inconsistency: ::test_a_commit_that_finds_task_configurations_missing_leaves_the_connector_without_tasks).
    configs = read(connector_config("c", SOURCE), task_config("c", 0, {"t": "0"}),
                   ("task-c-\u0661", b'{"properties":{"t":"arabic 1"}}'),
                   ("task-c-\U0001d7cf", b'{"properties":{"t":"mathematical 1"}}'),
                   ("task-c-\U0001d7d0", b'{"properties":{"t":"mathematical 2"}}'), commit("c", 2))
    assert (list(configs.tasks("c")), configs.task_config("c", 1)) == ([0, 1], {"t": "arabic 1"})
    apply(configs, task_config("c", 0, {"t": "0"}), ("task-c-\U0001d7cf", b'{"properties":{"t":"x"}}'),
          commit("c", 2))
    assert (list(configs.tasks("c")), configs.task_config("c", 1)) == ([], {"t": "arabic 1"})


def test_garbled_records_are_skipped_and_their_values_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    configs = read(*created("c", SINK, [{"task": "a", "db.password": "hunter2"}]))
    secret = b'{"properties":{"db.password":"hunter2"'
    with caplog.at_level(logging.DEBUG, logger="status_store.connect.configs"):
        apply(configs, ("connector-c", secret + b"!!"), ("connector-c", b'{"config":{"db.password":"hunter2"}}'),
              ("connector-c", b'["hunter2"]'), ("task-c-0", secret + b"}"), ("task-c-x", secret + b"}}"),
              ("task-c-0", None), ("commit-c", b'{"tasks":"hunter2"}'), ("commit-c", b'{"tasks":1.0}'),
              ("connector-c", b"\xffhunter2"), ("unknown-c", secret + b"}}"), ("connector-c", b"NaN"))
    assert configs.connector_config("c") == SINK
    assert (list(configs.tasks("c")), configs.task_config("c", 0)) == ([0], {"task": "a", "db.password": "hunter2"})
    assert len(caplog.records) == 11
    assert "hunter2" not in caplog.text


def test_an_empty_value_or_json_null_is_a_tombstone_as_connects_converter_reads_it() -> None:
    for empty in (b"", b"  \n", b"null"):
        configs = read(*created("c", SOURCE, [{"task": "a"}]), ("connector-c", empty))
        assert configs.connectors() == [], empty


def test_records_in_every_spelling_jacksons_reader_takes_are_applied_as_connect_applies_them() -> None:
    # A UTF-8 byte order mark, UTF-16 with or without one, and leading zeros are read by Connect's JsonConverter
    # (Jackson, ALLOW_LEADING_ZEROS_FOR_NUMBERS), so these records take effect. Connect 4.4 does the same:
    # tests/test_connect_records_live.py::
    # test_config_records_in_every_spelling_jacksons_reader_takes_are_applied_as_connect_applies_them (the last
    # commit: ::test_a_commit_that_finds_task_configurations_missing_leaves_the_connector_without_tasks).
    bom = b"\xef\xbb\xbf"
    configs = read(("connector-c", bom + b'{"properties":{"name":"c"}}'),
                   ("task-c-0", '{"properties":{"t":"0"}}'.encode("utf-16-le")),
                   ("task-c-1", '{"properties":{"t":"1"}}'.encode("utf-16")),
                   ("commit-c", b'{"tasks":02}'),
                   ("target-state-c", '\ufeff{"state":"PAUSED"}'.encode("utf-16-be")))
    assert configs.connector_config("c") == {"name": "c"}
    assert (list(configs.tasks("c")), configs.task_config("c", 1)) == ([0, 1], {"t": "1"})
    assert configs.target_state("c") is TargetState.PAUSED
    apply(configs, ("commit-c", bom + b'{"tasks":001}'))
    assert list(configs.tasks("c")) == []  # pending configurations are dropped at every commit: none to commit


def test_configuration_values_that_are_not_strings_are_held_as_connects_converter_holds_them() -> None:
    # Connect's JsonConverter (schemas disabled) hands over an integer as a long (narrowed to 64 bits) and a fraction
    # as a double (beyond its range: infinity). Connect's REST answers 500 for a configuration holding one (a
    # ClassCastException); status-store serves it, a double as Jackson writes one (infinities as strings).
    value = (b'{"properties":{"name":"c","big":1e400,"minus":-1e400,"tiny":1e-400,"wide":18446744073709551617,'
             b'"count":7,"flag":true,"ratio":1.5,"none":null,"nested":{"list":[1,"two",[3e999]]}}}')
    configs = read(("connector-c", value))
    assert connect_json(configs.connector_config("c")) == (
        '{"name":"c","big":"Infinity","minus":"-Infinity","tiny":0.0,"wide":1,"count":7,"flag":true,"ratio":1.5,'
        '"none":null,"nested":{"list":[1,"two",["Infinity"]]}}')
    # Values nested as deep as Jackson reads (1000 levels, the record's object the first) are served too.
    deep = b'{"properties":{"name":"d","deep":' + b"[" * 998 + b"]" * 998 + b"}}"
    apply(configs, ("connector-d", deep))
    assert connect_json(configs.connector_config("d")) == '{"name":"d","deep":' + "[" * 998 + "]" * 998 + "}"
    # Only a string is a class name or a topic list to the type rule.
    assert connector_type(read(("connector-n", b'{"properties":{"connector.class":7,"topics":7}}'))
                          .connector_config("n"), {}, "unknown") == "unknown"


def test_a_task_count_is_narrowed_as_java_narrows_a_long_to_an_int() -> None:
    configs = read(connector_config("c", SOURCE), ("commit-c", b'{"tasks":4294967297}'))
    assert configs.task_count("c") == 1


@pytest.mark.parametrize(("config", "class_types", "written", "expected"), [
    (None, {}, "unknown", "unknown"),
    (None, {}, "sink", "sink"),
    ({"name": "c"}, {}, "unknown", "unknown"),
    (SINK, {}, "unknown", "sink"),
    ({**SOURCE, "topics.regex": "orders-.*"}, {}, "unknown", "sink"),
    ({**SOURCE, "topics": "  "}, {}, "unknown", "source"),
    (SOURCE, {}, "unknown", "source"),
    (SOURCE, {}, "sink", "sink"),
    (SINK, {"io.example.JdbcSinkConnector": "source"}, "sink", "source"),
    ({"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "topics": ".*"}, {}, "unknown",
     "source"),
])
def test_connector_type(config: dict[str, str] | None, class_types: dict[str, str], written: str,
                        expected: str) -> None:
    assert connector_type(config, class_types, written) == expected


# ----------------------------------------------------------------------------- settings


def test_the_config_topic_is_off_unless_set_and_a_worker_file_sets_it(tmp_path: Path) -> None:
    assert build_config(KAFKA).config_topic is None
    worker = tmp_path / "connect-distributed.properties"
    worker.write_text("bootstrap.servers=kafka:9092\ngroup.id=connect\nconfig.storage.topic=connect-configs\n"
                      "offset.storage.topic=connect-offsets\nstatus.storage.topic=connect-status\n")
    assert load_config(worker, {}).config_topic == "connect-configs"


@pytest.mark.parametrize(("settings", "key", "reason"), [
    ({"config.storage.topic": "connect-status"}, "config.storage.topic", "must differ from status.storage.topic"),
    ({"config.storage.topic": "bad topic"}, "config.storage.topic", "not a legal Kafka topic name"),
    ({"config.storage.topic": "c", "status.storage.history.topic": "c"}, "status.storage.history.topic",
     "must differ from config.storage.topic"),
    ({"sidecar.connector.types": "io.example.Source"}, "sidecar.connector.types", "<connector class>:<source or sink>"),
    ({"sidecar.connector.types": "io.example.Source:both"}, "sidecar.connector.types", "io.example.Source:both"),
])
def test_bad_config_topic_settings_name_their_key(settings: dict[str, str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(reason)) as refused:
        build_config({**KAFKA, **settings})
    assert refused.value.key == key


def test_connector_types_by_class() -> None:
    config = build_config({**KAFKA, "sidecar.connector.types": " io.example.A:source , io.example.B:SINK,"})
    assert config.connector_types == {"io.example.A": "source", "io.example.B": "sink"}


def test_the_embedded_broker_creates_the_config_topic_with_one_partition() -> None:
    cluster = start_embedded_broker(build_config({"config.storage.topic": "connect-configs"}))
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = admin.list_topics(timeout=WAIT).topics
        assert len(topics["connect-configs"].partitions) == 1
        assert len(topics["connect-status"].partitions) == 5
    finally:
        cluster.close()


# ----------------------------------------------------------------------------- the reader, on both brokers


async def test_the_reader_reads_connects_records_to_the_end_then_tails(broker: Broker) -> None:
    topic = f"connect-configs-{uuid.uuid4().hex[:8]}"
    create_config_topic(broker, topic)
    write_records(broker.bootstrap_servers, topic, [
        *created("orders-sink", SINK, [{"task.id": "0"}, {"task.id": "1"}]),
        *created("logs", SOURCE, [{"file": "/var/log/app.log"}]),
        target_state("logs", "STOPPED"),
        *created("gone", SOURCE, []), *deleted("gone"),
        session_key(), tasks_fencing("orders-sink", 2),
        # A reconfiguration under way: new task configurations pending, not yet committed.
        task_config("orders-sink", 0, {"task.id": "new-0"}),
    ])
    reader = ConfigTopic(topic, broker.bootstrap_servers, {})
    await reader.start(WAIT)
    try:
        configs = reader.configs
        assert configs.connectors() == ["logs", "orders-sink"]
        assert configs.connector_config("orders-sink") == SINK
        assert [configs.task_config("orders-sink", n) for n in configs.tasks("orders-sink")] == [
            {"task.id": "0"}, {"task.id": "1"}]
        assert (configs.target_state("logs"), configs.target_state("gone")) == (TargetState.STOPPED, None)
        write_records(broker.bootstrap_servers, topic, [task_config("orders-sink", 1, {"task.id": "new-1"}),
                                                        task_config("orders-sink", 2, {"task.id": "new-2"}),
                                                        commit("orders-sink", 3), *deleted("logs")])
        await reader.read_to_end(WAIT)
        assert configs.connectors() == ["orders-sink"]
        assert [configs.task_config("orders-sink", n) for n in configs.tasks("orders-sink")] == [
            {"task.id": "new-0"}, {"task.id": "new-1"}, {"task.id": "new-2"}]
    finally:
        await reader.stop()


async def test_a_missing_config_topic_is_waited_for_until_a_worker_creates_it(broker: Broker) -> None:
    # A sidecar started before its worker: the worker creates the topic when it first starts, the sidecar never does.
    topic = f"created-later-{uuid.uuid4().hex[:8]}"
    reader = ConfigTopic(topic, broker.bootstrap_servers, {})
    said: list[str] = []
    starting = asyncio.ensure_future(reader.start(WAIT, said.append))
    try:
        await eventually(lambda: len(said) >= 2, WAIT)
        assert not starting.done()
        assert said[0] == (f"Connect's config topic {topic!r} (it does not exist; a Connect worker creates it when it "
                           "first starts)")
        create_config_topic(broker, topic)
        write_records(broker.bootstrap_servers, topic, created("late", SOURCE, []))
        await asyncio.wait_for(starting, WAIT)
        assert reader.configs.connectors() == ["late"]
    finally:
        starting.cancel()
        await reader.stop()
