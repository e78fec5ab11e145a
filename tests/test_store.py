"""Store semantics against real brokers (each test runs on the mock cluster and on Tansu): writes, Connect's write
rules, and reading back through the reader; the read rules themselves are tested on the cache (test_cache.py)."""

from __future__ import annotations

import json
import logging

import pytest

from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus
from status_store.errors import StoreClosedError
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import raw_producer, read_raw, write_raw

WAIT = 15.0


def connector(name: str, state: State = State.RUNNING, worker: str = "w1:8083", generation: int = 1,
              trace: str | None = None) -> ConnectorStatus:
    return ConnectorStatus(name, state, worker, generation, trace)


def task(name: str, number: int, state: State = State.RUNNING, worker: str = "w1:8083",
         generation: int = 1) -> TaskStatus:
    return TaskStatus(TaskId(name, number), state, worker, generation)


async def test_put_is_visible_only_after_read_back(store: StatusStore) -> None:
    update = store.put(connector("conn"))
    assert store.cache.get_connector("conn") is None  # not read back yet
    assert (await update.result(WAIT)).ok
    await store.read_your_writes(WAIT)
    assert store.cache.get_connector("conn") == connector("conn")
    assert store.cache.connectors() == ["conn"]


async def test_records_are_byte_exact_and_partitioned_like_java(store: StatusStore) -> None:
    store.put(connector("conn", worker="localhost:8083", generation=0))
    store.put(TaskStatus(TaskId("my-conn", 12), State.FAILED, "10.0.0.7:8083", 7,
                         "java.lang.RuntimeException: boom\n\tat Foo.bar(Foo.java:1)\n"))
    store.put(task("conn", 0))
    store.put_topic(TopicStatus("foo-topic", "foo-source", 0, 1700000000000))
    await store.read_your_writes(WAIT)
    assert sorted(read_raw(store)) == sorted([
        (2, b"status-connector-conn",
         b'{"state":"RUNNING","trace":null,"worker_id":"localhost:8083","generation":0}'),
        (2, b"status-task-my-conn-12",
         b'{"state":"FAILED","trace":"java.lang.RuntimeException: boom\\n\\tat Foo.bar(Foo.java:1)\\n",'
         b'"worker_id":"10.0.0.7:8083","generation":7}'),
        (4, b"status-task-conn-0", b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":1}'),
        (1, b"status-topic-foo-topic:connector-foo-source",
         b'{"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1700000000000}}'),
    ])


async def test_records_written_by_connect_are_read(store: StatusStore) -> None:
    write_raw(
        store,
        (b"status-connector-conn", b'{"state":"PAUSED","trace":null,"worker_id":"h:8083","generation":3}'),
        (b"status-task-my-conn-12", b'{"state":"RUNNING","trace":null,"worker_id":"h:8083","generation":3}'),
        (b"status-topic-foo-topic:connector-my-conn",
         b'{"topic":{"name":"foo-topic","connector":"my-conn","task":0,"discoverTimestamp":1700000000000}}'),
    )
    await store.read_to_end(WAIT)
    assert store.cache.get_connector("conn") == connector("conn", State.PAUSED, "h:8083", 3)
    assert store.cache.get_all_tasks("my-conn") == [task("my-conn", 12, worker="h:8083", generation=3)]
    assert store.cache.get_all_topics("my-conn") == [TopicStatus("foo-topic", "my-conn", 0, 1700000000000)]


async def test_records_reach_the_read_rules_with_their_partition_and_offset(
        store: StatusStore, caplog: pytest.LogCaptureFixture) -> None:
    # The rules themselves are tested on the cache alone (test_cache.py); this is the reader's hand-over.
    good = b'{"state":"RUNNING","trace":null,"worker_id":"h:1","generation":1}'
    producer = raw_producer(store)
    for key, value in ((b"status-connector-c", good), (None, good), (b"status-connector-c", b"{not json")):
        producer.produce(store.config.topic, value, key, partition=1)
    assert producer.flush(WAIT) == 0
    with caplog.at_level(logging.WARNING):
        await store.read_to_end(WAIT)
    assert store.cache.get_connector("c") == connector("c", worker="h:1")
    assert (store.cache.stats.applied, store.cache.stats.invalid_keys, store.cache.stats.garbled_values) == (1, 1, 1)
    assert "Discarding record at partition 1 offset 1: no key" in caplog.text
    assert "Discarding record at partition 1 offset 2: garbled value for 'status-connector-c'" in caplog.text


async def test_task_tombstone_removes_one_task(store: StatusStore) -> None:
    store.put(connector("c"))
    store.put(task("c", 0))
    store.put(task("c", 1))
    await store.read_your_writes(WAIT)
    store.put(task("c", 1, State.DESTROYED))  # DESTROYED is written as a tombstone
    await store.read_your_writes(WAIT)
    assert store.cache.get_all_tasks("c") == [task("c", 0)]
    assert store.cache.get_connector("c") == connector("c")
    assert (store.partitions and [r for r in read_raw(store) if r[1] == b"status-task-c-1"][-1][2]) is None


async def test_delete_connector_writes_task_tombstones_then_the_connector(store: StatusStore) -> None:
    store.put(connector("c"))
    store.put(task("c", 0))
    store.put(task("c", 1))
    await store.read_your_writes(WAIT)
    updates = store.delete_connector("c")
    await store.read_your_writes(WAIT)
    assert [u.key for u in updates] == ["status-task-c-0", "status-task-c-1", "status-connector-c"]
    assert all(u.outcome is not None and u.outcome.ok for u in updates)
    assert store.cache.get_connector("c") is None
    assert store.cache.get_all_tasks("c") == []
    tombstones = [key for _, key, value in read_raw(store) if value is None]
    assert sorted(tombstones) == [b"status-connector-c", b"status-task-c-0", b"status-task-c-1"]


async def test_put_safe_follows_connects_rules(store: StatusStore) -> None:
    # No cached value: written.
    assert store.put_safe(connector("a", State.UNASSIGNED, "w1:8083", 5)) is not None
    store.put(connector("b", State.RUNNING, "w1:8083", 5))
    await store.read_your_writes(WAIT)
    # Another worker with an older generation: dropped, nothing sent.
    assert store.put_safe(connector("b", State.FAILED, "w2:8083", 4)) is None
    # The same worker, even with an older generation: written.
    same = store.put_safe(connector("b", State.FAILED, "w1:8083", 4))
    assert same is not None
    await store.read_your_writes(WAIT)
    assert store.cache.get_connector("b") == connector("b", State.FAILED, "w1:8083", 4)
    # Another worker with the same or a newer generation: written.
    assert store.put_safe(task("t", 0, State.RUNNING, "w1:8083", 2)) is not None
    await store.read_your_writes(WAIT)
    assert store.put_safe(task("t", 0, State.UNASSIGNED, "w2:8083", 3)) is not None
    await store.read_your_writes(WAIT)
    assert store.cache.get_task(TaskId("t", 0)) == task("t", 0, State.UNASSIGNED, "w2:8083", 3)
    assert store.cache.get_connector("a") == connector("a", State.UNASSIGNED, "w1:8083", 5)


async def test_topic_status_put_delete_and_reset(store: StatusStore) -> None:
    for name in ("t1", "t2", "t3"):
        store.put_topic(TopicStatus(name, "c", 0, 1700000000000))
    store.put_topic(TopicStatus("t1", "other", 1, 1))
    await store.read_your_writes(WAIT)
    assert [t.topic for t in store.cache.get_all_topics("c")] == ["t1", "t2", "t3"]
    assert (await store.delete_topic("c", "t2").result(WAIT)).ok
    await store.read_your_writes(WAIT)
    assert store.cache.get_topic("c", "t2") is None
    assert [t.topic for t in store.cache.get_all_topics("c")] == ["t1", "t3"]
    assert len(store.reset_topics("c")) == 2
    await store.read_your_writes(WAIT)
    assert store.cache.get_all_topics("c") == []
    assert store.cache.get_topic("other", "t1") == TopicStatus("t1", "other", 1, 1)


async def test_generation_and_sequence_follow_each_write(store: StatusStore) -> None:
    store.put(connector("c", generation=3))
    store.put(task("c", 0, generation=9))
    store.put(task("c", 0, generation=9))
    other = connector("d", worker="w2:8083", generation=4)
    store.put(other)
    store.put(connector("e", worker="w2:8083", generation=5), writer="agent-1")
    # One generation per writer (Connect keeps one per worker's store), moved only by that writer's writes.
    assert store.generation_of(None, connector("c")) == 9
    assert store.generation_of(None, other) == 4
    assert store.generation_of("agent-1", other) == 5
    await store.read_your_writes(WAIT)
    assert store._cache.task_entry(TaskId("c", 0)).sequence == 2


async def test_two_stores_converge(broker: Broker, store_factory: StoreFactory) -> None:
    topic = broker.new_topic()
    async with store_factory(broker.bootstrap_servers, topic) as one, \
            store_factory(broker.bootstrap_servers, topic) as two:
        for i in range(20):
            one.put(task("c", i, generation=i))
            two.put(connector(f"c{i}", worker="w2:8083"))
        one.put(connector("shared", State.PAUSED))
        await one.read_your_writes(WAIT)
        two.put(connector("shared", State.RUNNING, "w2:8083", 2))
        await two.read_your_writes(WAIT)
        await one.read_to_end(WAIT)
        await two.read_to_end(WAIT)
        for name in ["c", "shared", *[f"c{i}" for i in range(20)]]:
            assert one.cache.get_connector(name) == two.cache.get_connector(name)
            assert one.cache.get_all_tasks(name) == two.cache.get_all_tasks(name)
        assert one.cache.get_connector("shared") == connector("shared", State.RUNNING, "w2:8083", 2)
        assert len(one.cache.get_all_tasks("c")) == 20


async def test_a_restarted_store_reads_everything_back(broker: Broker, store_factory: StoreFactory) -> None:
    topic = broker.new_topic()
    async with store_factory(broker.bootstrap_servers, topic) as first:
        for i in range(300):
            first.put(task(f"conn-{i % 7}", i, generation=i))
        await first.read_your_writes(WAIT)
    async with store_factory(broker.bootstrap_servers, topic) as second:
        # start() reads to the end before it returns.
        assert sum(len(second.cache.get_all_tasks(f"conn-{i}")) for i in range(7)) == 300


async def test_writes_after_stop_are_refused(broker: Broker, store_factory: StoreFactory) -> None:
    async with store_factory(broker.bootstrap_servers, broker.new_topic()) as store:
        pass
    with pytest.raises(StoreClosedError):
        store.put(connector("c"))


def test_read_raw_helper_sees_json() -> None:
    # The raw helper above parses nothing; make sure the bytes we compare are valid JSON for Connect.
    assert json.loads(b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":0}')["trace"] is None
