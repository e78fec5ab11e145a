"""The latest status per key computed by Spark equals the cache of a real StatusStore reading the same topic."""

from __future__ import annotations

import json
import random
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import SparkSession

from status_store.analytics.analysis import Analysis, analyze, parse_status_records
from status_store.analytics.records import RAW_SCHEMA, read_kafka
from status_store.connect import codec
from status_store.connect.model import State, TaskId, TopicStatus

from ..conftest import Broker, StoreFactory

CONNECTORS = ["sink", "my-conn", "src-2"]
GARBLED = [
    b"not json", b"", b"[1]", b'"RUNNING"', b'{"state":"BOGUS","trace":null,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1.5}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":3.0}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":"3"}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w"}',
    b'{"state":"RUNNING","trace":5,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":7,"generation":1}', b'{"state":"RUNNING","generation":NaN}',
    b"\xff\xfe{}", b'{"topic":{"name":"t","connector":"c","task":"0","discoverTimestamp":1}}',
]
ODD_BUT_VALID = [
    # Trailing text after the object, unknown fields, a generation beyond 32 bits (narrowed as Java does).
    b'{"state":"FAILED","trace":"boom","worker_id":"w9","generation":4} trailing',
    b'{"extra":[1,2],"state":"PAUSED","trace":null,"worker_id":"w8","generation":2}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w7","generation":4294967299}',
    # No worker id (null or missing), leading zeros, a UTF-8 byte order mark: Connect reads them all.
    b'{"state":"RUNNING","trace":null,"worker_id":null,"generation":3}',
    b'{"state":"PAUSED","generation":005}',
    b'\xef\xbb\xbf{"state":"RUNNING","trace":null,"worker_id":"w6","generation":-007}',
]
ODD_BUT_VALID_TOPICS = [
    # Connect lists these: an empty name, a ':' in it, an empty connector, a negative task.
    b'{"topic":{"name":"","connector":"c","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t:x","connector":"","task":-1,"discoverTimestamp":01}}',
]
GARBLED_TOPICS = [
    b'{"topic":{"name":"t","connector":"c","task":"0","discoverTimestamp":1}}',
    b'{"topic":{"name":null,"connector":"c","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t","connector":"c","task":0,"discoverTimestamp":1.5}}',
    b'{"topic":{"name":"t","connector":"c","task":0}}', b'{"topic":"t"}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}',
]
INVALID_KEYS = [b"status-task-sink", b"other-key", b"status-connector-", b"status-topic-nocolon", b"status-task-sink-x"]


def _status(state: State, worker: str, generation: int, trace: str | None = None) -> bytes | None:
    return codec.encode_status(state, worker, generation, trace)


def generated_history(rng: random.Random, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """Records a busy cluster could leave: rebalances (stale UNASSIGNED), deletes, recreations, garbage."""
    records: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(count):
        connector = rng.choice(CONNECTORS)
        roll = rng.random()
        task_key = f"status-task-{connector}-{rng.randrange(4)}".encode()
        if roll < 0.45:
            state = rng.choice([State.RUNNING, State.RUNNING, State.UNASSIGNED, State.UNASSIGNED, State.FAILED,
                                State.PAUSED, State.RESTARTING])
            trace = "boom\n\tat X" if state is State.FAILED else None
            records.append((task_key, _status(state, f"w{rng.randrange(3)}:8083", rng.randrange(6), trace)))
        elif roll < 0.52:
            records.append((task_key, None))
        elif roll < 0.65:
            state = rng.choice([State.RUNNING, State.PAUSED, State.STOPPED, State.FAILED])
            records.append((f"status-connector-{connector}".encode(), _status(state, "w0:8083", rng.randrange(6))))
        elif roll < 0.69:
            records.append((f"status-connector-{connector}".encode(), None))
        elif roll < 0.78:
            topic = f"topic-{rng.randrange(3)}"
            key = f"status-topic-{topic}:connector-{connector}".encode()
            value = codec.encode_topic_status(TopicStatus(topic, connector, rng.randrange(3), rng.randrange(10**12)))
            roll = rng.random()
            records.append((key, value if roll < 0.65 else None if roll < 0.8 else
                            rng.choice(ODD_BUT_VALID_TOPICS) if roll < 0.9 else rng.choice(GARBLED_TOPICS)))
        elif roll < 0.88:
            records.append((rng.choice([task_key, f"status-connector-{connector}".encode()]), rng.choice(GARBLED)))
        elif roll < 0.94:
            records.append((task_key, rng.choice(ODD_BUT_VALID)))
        else:
            records.append((rng.choice([*INVALID_KEYS, None]), _status(State.RUNNING, "w", 1)))
    return records


def produce(bootstrap_servers: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Write the records in order, with strictly increasing timestamps."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random", "linger.ms": 5})
    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key, timestamp=1_763_780_000_000 + i * 1000)
    assert producer.flush(30) == 0


def store_view(store: Any) -> set[tuple[Any, ...]]:
    """Everything the store's cache holds, through its public read API."""
    view: set[tuple[Any, ...]] = set()
    for connector in CONNECTORS:
        status = store.cache.get_connector(connector)
        if status is not None:
            view.add(("connector", connector, None, status.state.value, status.worker_id, status.generation,
                      status.trace))
        for task in range(4):
            found = store.cache.get_task(TaskId(connector, task))
            if found is not None:
                view.add(("task", connector, task, found.state.value, found.worker_id, found.generation, found.trace))
        for topic in store.cache.get_all_topics(connector):
            view.add(("topic", connector, topic.topic, topic))
    return view


def spark_view(rows: list[Any]) -> set[tuple[Any, ...]]:
    view: set[tuple[Any, ...]] = set()
    for row in rows:
        if row.kind == "topic":
            # The store lists a topic status by its value (the key's topic may differ, as in Connect).
            status = codec.decode_topic_status(row.value.encode())
            view.add(("topic", row.connector, status.topic, status))
        else:
            view.add((row.kind, row.connector, row.task, row.state, row.worker_id, row.generation, row.trace))
    return view


async def test_latest_per_key_equals_the_store_cache(spark: SparkSession, broker: Broker,
                                                     store_factory: StoreFactory) -> None:
    topic = broker.new_topic(partitions=1)  # one partition: the store's order across keys is then exact
    records = generated_history(random.Random(20261122), 1500)
    async with store_factory(broker.bootstrap_servers, topic, **{"status.storage.partitions": "1"}) as store:
        produce(broker.bootstrap_servers, topic, records)
        await store.read_to_end(30)
        expected = store_view(store)
        stats = store.cache.stats
    read = read_kafka(spark, {"bootstrap.servers": broker.bootstrap_servers}, topic, max_records_per_range=400)
    assert len(read.ranges) == 4, read.ranges  # 1500 offsets in ranges of at most 400, read in parallel
    assert read.problems == []
    analysis = analyze(read.frame, spark.createDataFrame([], RAW_SCHEMA))
    latest = analysis.latest.collect()
    assert spark_view(latest) == expected
    assert len(latest) == len(expected)  # one row per key
    counters = analysis.counters()
    assert counters["status_records"] == len(records)
    assert (counters["invalid_keys"], counters["garbled_values"], counters["stale_unassigned"]) == (
        stats.invalid_keys, stats.garbled_values, stats.stale_unassigned)
    # The generated history exercised every rule.
    assert min(stats.invalid_keys, stats.garbled_values, stats.stale_unassigned) > 0
    assert any(value is None and key is not None and key.startswith(b"status-connector-") for key, value in records)
    assert read.persisted is not None
    read.persisted.unpersist()


def status(state: str, generation: int) -> str:
    return json.dumps({"state": state, "trace": None, "worker_id": "w", "generation": generation})


def analyze_rows(spark: SparkSession, rows: list[tuple[str, int, int, int, str, str | None]]) -> Analysis:
    """The analysis of a status topic of (topic, partition, offset, timestamp, key, value) rows."""
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long, timestamp long, key string, "
                                        "value string")
    return analyze(frame, spark.createDataFrame([], RAW_SCHEMA))


def test_a_connector_tombstone_in_another_partition_deletes_the_tasks_written_before_it(spark: SparkSession) -> None:
    rows = [
        ("s", 4, 0, 1000, "status-task-c-0", status("RUNNING", 1)),  # deleted: older than the tombstone
        ("s", 2, 0, 1500, "status-task-c-3", status("RUNNING", 1)),  # deleted: before it in its partition
        ("s", 2, 1, 2000, "status-connector-c", None),
        ("s", 4, 1, 3000, "status-task-c-1", status("RUNNING", 1)),
        # After the tombstone in its partition, though its producer's clock is behind: not deleted.
        ("s", 2, 2, 1800, "status-task-c-2", status("RUNNING", 1)),
    ]
    latest = {(row.task, row.state, row.generation) for row in analyze_rows(spark, rows).latest.collect()}
    assert latest == {(1, "RUNNING", 1), (2, "RUNNING", 1)}


def test_records_of_a_partition_are_read_in_offset_order_whatever_their_timestamps(spark: SparkSession) -> None:
    # A producer's clock may be behind: task c-0's second record (offset 2) has an older timestamp than the
    # record before it in its partition, which arrived after the tombstone. A reader reads the partition in
    # offset order, so that record too comes after the tombstone: it is not deleted, and the UNASSIGNED
    # after it meets it (RUNNING of a newer generation) and is ignored.
    rows = [
        ("s", 4, 0, 1000, "status-task-c-0", status("RUNNING", 1)),
        ("s", 2, 0, 2000, "status-connector-c", None),
        ("s", 4, 1, 3000, "status-task-c-1", status("RUNNING", 1)),
        ("s", 4, 2, 1500, "status-task-c-0", status("RUNNING", 5)),
        ("s", 4, 3, 2500, "status-task-c-0", status("UNASSIGNED", 1)),
    ]
    analysis = analyze_rows(spark, rows)
    latest = {(row.task, row.state, row.generation) for row in analysis.latest.collect()}
    assert latest == {(1, "RUNNING", 1), (0, "RUNNING", 5)}
    assert analysis.counters()["stale_unassigned"] == 1


def test_a_task_or_topic_key_in_two_spellings_is_one_status(spark: SparkSession) -> None:
    # Connect keys its cache by what a key names: status-task-c-01 is task 1 of c, and the topic key's
    # separator is skipped unread. The last record of the task or topic wins, under either spelling. A digit above
    # U+FFFF is no digit to Java's parseInt: that key is discarded.
    def topic(task: int) -> str:
        return json.dumps({"topic": {"name": "t", "connector": "c", "task": task, "discoverTimestamp": 1}})

    rows = [
        ("s", 0, 0, 1000, "status-task-c-1", status("RUNNING", 1)),
        ("s", 1, 0, 2000, "status-task-c-01", status("FAILED", 2)),
        ("s", 0, 1, 3000, "status-topic-t:connector-c", topic(0)),
        ("s", 1, 1, 4000, "status-topic-t:XXXXXXXXXXc", topic(7)),
        ("s", 0, 2, 5000, "status-task-c-2", status("RUNNING", 1)),
        ("s", 1, 2, 6000, "status-task-c-+2", None),
        ("s", 0, 3, 7000, "status-task-c-\U0001d7d1", status("RUNNING", 1)),
    ]
    latest = analyze_rows(spark, rows).latest.collect()
    assert sorted((row.key, row.state, row.offset) for row in latest) == [
        ("status-task-c-1", "FAILED", 0), ("status-topic-t:connector-c", None, 1)]
    assert [json.loads(row.value)["topic"]["task"] for row in latest if row.kind == "topic"] == [7]


STATUS = '{"state":"RUNNING","trace":"boom","worker_id":"w","generation":1}'
# Spellings no known writer produces, which the analytics read unlike the store (as the module says):
# (value, what the store reads, what the analytics read: None when they count it garbled).
READ_DIFFERENTLY = [
    (STATUS.encode("utf-16-le"), ("RUNNING", "boom", 1), None),
    (STATUS.replace("boom", "\\ud800").encode(), ("RUNNING", "\ud800", 1), ("RUNNING", None, 1)),
    (STATUS.encode().replace(b"boom", b"\xed\xa0\x80"), ("RUNNING", "\ud800", 1), None),  # an encoded surrogate
    (STATUS.replace('"generation":1', '"generation":' + "1" * 40).encode(), ("RUNNING", "boom", -954437177), None),
    (STATUS.replace("{", '{"x":1e2147483648,').encode(), None, ("RUNNING", "boom", 1)),
]


def test_the_values_the_analytics_read_unlike_the_store_are_the_documented_ones(spark: SparkSession) -> None:
    rows = [("s", 0, i, 1000 + i, f"status-connector-c{i}", bytearray(value))
            for i, (value, _, _) in enumerate(READ_DIFFERENTLY)]
    parsed = sorted(parse_status_records(spark.createDataFrame(rows, RAW_SCHEMA)).collect(), key=lambda r: r.offset)
    for (value, store, analytics), row in zip(READ_DIFFERENTLY, parsed, strict=True):
        try:
            decoded = codec.decode_status(value)
            assert (decoded.state.value, decoded.trace, decoded.generation) == store
        except codec.GarbledValue:
            assert store is None
        assert (None if row.garbled else (row.state, row.trace, row.generation)) == analytics
