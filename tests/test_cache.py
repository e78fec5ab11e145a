"""Connect's read rules, on the pure StatusCache: records in, statuses out, no broker."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from status_store.connect import codec
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus

ROOT = Path(__file__).resolve().parents[1]


def status(state: State = State.RUNNING, worker: str = "w1:8083", generation: int = 1,
           trace: str | None = None) -> bytes:
    value = codec.encode_status(state, worker, generation, trace)
    assert value is not None
    return value


def topic_value(topic: str, connector: str, task: int = 0, discovered: int = 1700000000000) -> bytes:
    return codec.encode_topic_status(TopicStatus(topic, connector, task, discovered))


def read(*records: tuple[bytes | None, bytes | None], cache: StatusCache | None = None) -> StatusCache:
    """A cache after reading these (key, value) records, one partition, offsets from 0 (or after ``cache``'s)."""
    cache = cache if cache is not None else StatusCache()
    start = cache.stats.applied + cache.stats.invalid_keys + cache.stats.garbled_values
    cache.apply(StatusRecord(key, value, 0, start + i) for i, (key, value) in enumerate(records))
    return cache


def test_the_cache_needs_no_kafka_client() -> None:
    # The package's own __init__ is skipped: what is checked is the cache's import graph.
    script = textwrap.dedent(f"""
        import sys, types
        sys.modules["confluent_kafka"] = None  # any import of it fails
        package = types.ModuleType("status_store")
        package.__path__ = [{str(ROOT / "status_store")!r}]
        sys.modules["status_store"] = package
        from status_store.connect.cache import StatusCache, StatusRecord
        cache = StatusCache()
        cache.apply([StatusRecord(b"status-connector-c", {status()!r})])
        assert cache.connectors() == ["c"], cache.connectors()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_connector_task_and_topic_records_are_read() -> None:
    cache = read(
        (b"status-connector-conn", b'{"state":"PAUSED","trace":null,"worker_id":"h:8083","generation":3}'),
        (b"status-task-my-conn-12", b'{"state":"FAILED","trace":"boom","worker_id":"h:8083","generation":3}'),
        (b"status-topic-foo-topic:connector-my-conn",
         b'{"topic":{"name":"foo-topic","connector":"my-conn","task":0,"discoverTimestamp":1700000000000}}'),
    )
    assert cache.get_connector("conn") == ConnectorStatus("conn", State.PAUSED, "h:8083", 3)
    assert cache.get_all_tasks("my-conn") == [TaskStatus(TaskId("my-conn", 12), State.FAILED, "h:8083", 3, "boom")]
    assert cache.get_task(TaskId("my-conn", 12)) == cache.get_all_tasks("my-conn")[0]
    assert cache.get_all_topics("my-conn") == [TopicStatus("foo-topic", "my-conn", 0, 1700000000000)]
    assert cache.get_topic("my-conn", "foo-topic") == TopicStatus("foo-topic", "my-conn", 0, 1700000000000)
    assert cache.connectors() == ["conn"]  # connectors with a status of their own
    assert cache.stats.applied == 3


def test_the_last_record_of_a_key_wins_and_queries_are_sorted() -> None:
    cache = read(
        (b"status-connector-b", status(State.RUNNING)),
        (b"status-connector-a", status(State.RUNNING)),
        (b"status-connector-b", status(State.FAILED, trace="boom")),
        (b"status-task-a-10", status()),
        (b"status-task-a-2", status()),
        (b"status-topic-z:connector-a", topic_value("z", "a")),
        (b"status-topic-y:connector-a", topic_value("y", "a")),
    )
    assert cache.connectors() == ["a", "b"]
    assert cache.get_connector("b") == ConnectorStatus("b", State.FAILED, "w1:8083", 1, "boom")
    assert [t.id.task for t in cache.get_all_tasks("a")] == [2, 10]
    assert [t.topic for t in cache.get_all_topics("a")] == ["y", "z"]
    assert cache.topic_names("a") == ["y", "z"]
    assert cache.get_connector("missing") is None
    assert cache.get_task(TaskId("missing", 0)) is None
    assert cache.get_all_tasks("missing") == []
    assert cache.get_all_topics("missing") == []


def test_a_connector_tombstone_removes_the_connector_and_its_tasks() -> None:
    cache = read(
        (b"status-connector-c", status()),
        (b"status-task-c-0", status()),
        (b"status-task-c-1", status()),
        (b"status-task-other-0", status()),
        (b"status-topic-t:connector-c", topic_value("t", "c")),
    )
    connector, task = cache.connector_entry("c"), cache.task_entry(TaskId("c", 0))
    read((b"status-connector-c", None), cache=cache)
    assert cache.get_connector("c") is None
    assert cache.get_all_tasks("c") == []
    assert cache.task_numbers("c") == []
    assert cache.connectors() == []
    assert cache.get_task(TaskId("other", 0)) == TaskStatus(TaskId("other", 0), State.RUNNING, "w1:8083", 1)
    # Connect keeps topic statuses: they go by their own tombstones (or a reset).
    assert [t.topic for t in cache.get_all_topics("c")] == ["t"]
    # A write under way sees that its key was deleted.
    assert connector.deleted
    assert task.deleted
    assert not cache.connector_entry("c").deleted  # a new entry after the deletion


def test_a_task_tombstone_removes_one_task() -> None:
    cache = read((b"status-connector-c", status()), (b"status-task-c-0", status()), (b"status-task-c-1", status()))
    entry = cache.task_entry(TaskId("c", 1))
    read((b"status-task-c-1", None), (b"status-task-c-7", None), (b"status-task-nothing-0", None), cache=cache)
    assert [t.id.task for t in cache.get_all_tasks("c")] == [0]
    assert cache.get_connector("c") == ConnectorStatus("c", State.RUNNING, "w1:8083", 1)
    assert entry.deleted
    assert cache.stats.applied == 6  # a tombstone of nothing cached is applied too


def test_a_topic_tombstone_removes_one_topic_status() -> None:
    cache = read(
        (b"status-topic-t1:connector-c", topic_value("t1", "c")),
        (b"status-topic-t2:connector-c", topic_value("t2", "c")),
        (b"status-topic-t1:connector-other", topic_value("t1", "other", 1, 1)),
        (b"status-topic-t1:connector-c", None),
    )
    assert cache.get_topic("c", "t1") is None
    assert cache.get_all_topics("c") == [TopicStatus("t2", "c", 0, 1700000000000)]
    assert cache.get_topic("other", "t1") == TopicStatus("t1", "other", 1, 1)
    read((b"status-topic-t2:connector-c", None), cache=cache)
    assert cache.get_all_topics("c") == []


def test_a_topic_status_is_kept_under_its_key_whatever_its_value_names() -> None:
    # Connect files the value under the key's topic and connector; the value's own fields are what it reads.
    cache = read((b"status-topic-t:connector-c", topic_value("other", "elsewhere", 2, 5)))
    assert cache.get_topic("c", "t") == TopicStatus("other", "elsewhere", 2, 5)
    assert cache.topic_names("c") == ["t"]


@pytest.mark.parametrize("key", [
    None, b"bogus-key", b"status-task-c", b"status-task-c-x", b"status-task-c-99999999999", b"status-connector-",
    b"status-topic-:connector-c", b"status-topic-nocolon", b"status-topic-t:connector-", b"status-topic-t:",
])
def test_a_key_connect_cannot_parse_is_discarded(key: bytes | None, caplog: pytest.LogCaptureFixture) -> None:
    cache = StatusCache()
    with caplog.at_level(logging.WARNING, logger="status_store.connect.cache"):
        cache.apply([StatusRecord(key, status(), 3, 41)])
    assert (cache.stats.invalid_keys, cache.stats.garbled_values, cache.stats.applied) == (1, 0, 0)
    assert cache.connectors() == []
    assert "Discarding record at partition 3 offset 41" in caplog.text


@pytest.mark.parametrize("value", [
    b"",  # empty bytes: garbage, not a tombstone
    b"{not json", b"[1]", b'"RUNNING"', b"\xff\xfe{}", b'{"state":"RUNNING","generation":NaN}',
    b'{"state":"EXPLODED","trace":null,"worker_id":"h:1","generation":2}',
    b'{"state":"FAILED","trace":null,"worker_id":"h:1","generation":"2"}',
    b'{"state":"FAILED","trace":null,"worker_id":"h:1","generation":2.5}',
    b'{"state":"RUNNING","trace":null,"worker_id":"h:1"}',
    b'{"state":"RUNNING","trace":5,"worker_id":"h:1","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":7,"generation":1}',
    b'{"topic":{"name":"t","connector":"c","task":0,"discoverTimestamp":1}}',
])
def test_a_garbled_status_is_skipped_and_the_cached_one_stays(value: bytes, caplog: pytest.LogCaptureFixture) -> None:
    cache = read((b"status-connector-c", status(worker="h:1")), (b"status-task-c-0", status(worker="h:1")))
    with caplog.at_level(logging.WARNING, logger="status_store.connect.cache"):
        read((b"status-connector-c", value), (b"status-task-c-0", value), (b"status-task-new-0", value), cache=cache)
    assert cache.get_connector("c") == ConnectorStatus("c", State.RUNNING, "h:1", 1)
    assert cache.get_task(TaskId("c", 0)) == TaskStatus(TaskId("c", 0), State.RUNNING, "h:1", 1)
    assert cache.task_numbers("new") == []  # nothing was added for a key whose only record is garbage
    assert (cache.stats.garbled_values, cache.stats.applied) == (3, 2)
    assert "garbled value for 'status-connector-c'" in caplog.text


@pytest.mark.parametrize("value", [
    b'{"topic":{"name":"t","connector":"c","task":"0","discoverTimestamp":1}}',
    b'{"topic":{"name":"t","connector":"c","task":0,"discoverTimestamp":1.5}}',
    b'{"topic":{"name":"t","connector":"c","task":0}}', b'{"topic":"t"}', b"",
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}',
])
def test_a_garbled_topic_status_is_skipped_and_the_cached_one_stays(value: bytes) -> None:
    cache = read((b"status-topic-t:connector-c", topic_value("t", "c")),
                 (b"status-topic-t:connector-c", value))
    assert cache.get_all_topics("c") == [TopicStatus("t", "c", 0, 1700000000000)]
    assert cache.stats.garbled_values == 1


@pytest.mark.parametrize("key", [b"status-task--0", b"status-task-c--1", b"status-task-c-+0"])
def test_task_keys_are_split_as_java_splits_them(key: bytes) -> None:
    # Java reads these keys (the connector is what lies between the prefix and the last '-'), but no
    # connector can have written a task with an empty name or a negative number.
    cache = read((key, status()))
    parsed = {b"status-task--0": None, b"status-task-c--1": ("c-", 1), b"status-task-c-+0": ("c", 0)}[key]
    if parsed is None:
        assert cache.stats.garbled_values == 1
    else:
        assert cache.get_all_tasks(parsed[0]) == [TaskStatus(TaskId(*parsed), State.RUNNING, "w1:8083", 1)]


def test_odd_but_valid_values_are_read_as_connect_reads_them() -> None:
    cache = read(
        (b"status-task-c-0", b'{"state":"FAILED","trace":"boom","worker_id":"w9","generation":4} trailing'),
        (b"status-task-c-1", b'{"extra":[1,2],"state":"PAUSED","trace":null,"worker_id":"w8","generation":2}'),
        (b"status-task-c-2", b'{"state":"RUNNING","trace":null,"worker_id":"w7","generation":4294967299}'),
    )
    assert cache.get_all_tasks("c") == [
        TaskStatus(TaskId("c", 0), State.FAILED, "w9", 4, "boom"),
        TaskStatus(TaskId("c", 1), State.PAUSED, "w8", 2),
        TaskStatus(TaskId("c", 2), State.RUNNING, "w7", 3),  # narrowed to 32 bits, as Java's intValue()
    ]


def test_a_stale_unassigned_does_not_hide_a_running_task() -> None:
    cache = read(
        (b"status-task-c-0", status(State.RUNNING, generation=5)),
        (b"status-task-c-0", status(State.UNASSIGNED, generation=5)),  # same generation: stale
        (b"status-task-c-0", status(State.UNASSIGNED, generation=4)),  # older: stale
        (b"status-task-c-1", status(State.RUNNING, generation=5)),
        (b"status-task-c-1", status(State.UNASSIGNED, generation=6)),  # newer generation: applied
        (b"status-task-c-1", status(State.UNASSIGNED, generation=2)),  # over UNASSIGNED: applied
    )
    assert cache.get_task(TaskId("c", 0)) == TaskStatus(TaskId("c", 0), State.RUNNING, "w1:8083", 5)
    assert cache.get_task(TaskId("c", 1)) == TaskStatus(TaskId("c", 1), State.UNASSIGNED, "w1:8083", 2)
    assert (cache.stats.stale_unassigned, cache.stats.applied) == (2, 6)


def test_an_unassigned_over_anything_but_running_is_applied() -> None:
    cache = read(
        (b"status-task-c-0", status(State.FAILED, generation=5)),
        (b"status-task-c-0", status(State.UNASSIGNED, generation=1)),
        (b"status-task-c-1", status(State.RUNNING, generation=5)),
        (b"status-task-c-1", None),  # deleted: nothing cached
        (b"status-task-c-1", status(State.UNASSIGNED, generation=1)),
        (b"status-task-e-0", status(State.RUNNING, generation=5)),
        (b"status-connector-e", None),  # deletes the connector's tasks too
        (b"status-task-e-0", status(State.UNASSIGNED, generation=1)),
        # Connectors have no such filter.
        (b"status-connector-d", status(State.RUNNING, generation=5)),
        (b"status-connector-d", status(State.UNASSIGNED, generation=1)),
    )
    assert [(t.id, t.state, t.generation) for t in [*cache.get_all_tasks("c"), *cache.get_all_tasks("e")]] == [
        (TaskId("c", 0), State.UNASSIGNED, 1), (TaskId("c", 1), State.UNASSIGNED, 1),
        (TaskId("e", 0), State.UNASSIGNED, 1)]
    assert cache.get_connector("d") == ConnectorStatus("d", State.UNASSIGNED, "w1:8083", 1)
    assert cache.stats.stale_unassigned == 0


def test_entries_for_writes_hold_no_status_until_one_is_read() -> None:
    cache = StatusCache()
    entry = cache.connector_entry("c")
    assert cache.connector_entry("c") is entry
    cache.task_entry(TaskId("c", 3))
    assert cache.get_connector("c") is None
    assert cache.connectors() == []
    assert cache.get_all_tasks("c") == []
    assert cache.task_numbers("c") == [3]  # a connector's deletion covers it
    read((b"status-connector-c", status()), cache=cache)
    assert entry.value is not None
    assert cache.connectors() == ["c"]


@pytest.mark.parametrize(("cached", "written", "safe"), [
    (None, ConnectorStatus("c", State.FAILED, "w2", 1), True),
    (status(worker="w1", generation=5), ConnectorStatus("c", State.FAILED, "w1", 4), True),  # the same worker
    (status(worker="w1", generation=5), ConnectorStatus("c", State.FAILED, "w2", 5), True),  # not older
    (status(worker="w1", generation=5), ConnectorStatus("c", State.FAILED, "w2", 6), True),
    (status(worker="w1", generation=5), ConnectorStatus("c", State.FAILED, "w2", 4), False),
    # No worker id cached: Connect's equals() on it throws, and nothing is written.
    (b'{"state":"RUNNING","generation":1}', ConnectorStatus("c", State.FAILED, "w2", 6), False),
])
def test_a_safe_write_follows_connects_rule(cached: bytes | None, written: ConnectorStatus, safe: bool) -> None:
    cache = read((b"status-connector-c", cached)) if cached is not None else StatusCache()
    assert cache.connector_entry("c").can_write_safely(written) is safe


def test_offsets_of_keys_and_connector_tombstones() -> None:
    cache = StatusCache()
    cache.apply([
        StatusRecord(b"status-connector-c", status(), 2, 10),
        StatusRecord(b"status-task-c-0", status(), 4, 3),
        StatusRecord(b"status-connector-c", None, 2, 12),
        StatusRecord(b"status-connector-c", b"garbage", 2, 13),  # a garbled record is still the key's last one
    ])
    assert (cache.last_offset("status-connector-c"), cache.last_offset("status-task-c-0")) == (13, 3)
    assert cache.last_offset("status-task-c-1") == -1
    assert (cache.deleted_at("c"), cache.deleted_at("d")) == (12, -1)
    cache.note_written("status-task-c-0", 9)
    cache.note_written("status-task-c-0", 5)  # an acknowledgement never moves a key's offset back
    assert cache.last_offset("status-task-c-0") == 9
    # A log that started over: its records do not move the offsets back either.
    cache.apply([StatusRecord(b"status-connector-c", None, 2, 0)])
    assert (cache.last_offset("status-connector-c"), cache.deleted_at("c")) == (13, 12)


def test_holds_compares_decoded_values() -> None:
    cache = read(
        (b"status-connector-c", status()),
        (b"status-task-c-0", status(State.FAILED, trace="boom")),
        (b"status-topic-t:connector-c", topic_value("t", "c")),
    )
    assert cache.holds("status-connector-c", b'{"extra":1,"state":"RUNNING","worker_id":"w1:8083","generation":1}')
    assert cache.holds("status-task-c-0", status(State.FAILED, trace="boom"))
    assert not cache.holds("status-task-c-0", status(State.FAILED))
    assert cache.holds("status-topic-t:connector-c", topic_value("t", "c"))
    assert cache.holds("status-task-c-1", None)  # nothing cached: a tombstone is held
    assert not cache.holds("status-connector-c", None)
    assert not cache.holds("status-connector-c", b"garbage")
    assert not cache.holds("bogus", None)


def test_connector_types_are_writers_hints() -> None:
    cache = StatusCache()
    assert cache.connector_type("c") == "unknown"
    cache.set_connector_type("c", "sink")
    assert cache.connector_type("c") == "sink"
    read((b"status-connector-c", None), cache=cache)
    assert cache.connector_type("c") == "sink"  # kept until a writer deletes the connector through us
    cache.forget_connector_type("c")
    assert cache.connector_type("c") == "unknown"
