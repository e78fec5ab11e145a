"""The readers: exported files, and Kafka ranges that cannot be read in time (reported, not fatal)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from harness.faulty_cluster import FaultyCluster
from status_store.analytics.records import plan_ranges, read_files, read_kafka

RUNNING = '{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'


def test_files_json_lines_and_parquet_with_text_or_binary_values(spark: SparkSession, tmp_path: Path) -> None:
    lines = tmp_path / "status.jsonl"
    lines.write_text("\n".join([
        json.dumps({"topic": "s", "partition": 0, "offset": 0, "timestamp": 1, "key": "status-connector-a",
                    "value": RUNNING}),
        json.dumps({"topic": "s", "partition": 0, "offset": 1, "timestamp": 2, "key": "status-connector-b",
                    "value": None}),
        "not json",
    ]) + "\n")
    columns = {"topic": ["s"], "partition": [1], "offset": [5], "timestamp": [3], "key": ["status-task-a-0"]}
    pq.write_table(pa.table({**columns, "value": [RUNNING.encode()]}), tmp_path / "binary.parquet")
    pq.write_table(pa.table({**columns, "offset": [6], "value": [RUNNING]}), tmp_path / "text.parquet")
    records = read_files(spark, [str(lines), str(tmp_path / "binary.parquet"), str(tmp_path / "text.parquet"),
                                 str(tmp_path / "missing.jsonl"), str(lines)])  # the same export twice
    rows = sorted((r.offset if r.offset is not None else -1, r.key, r.value) for r in records.frame.collect())
    assert rows == [(-1, None, None), (0, "status-connector-a", RUNNING.encode()), (1, "status-connector-b", None),
                    (5, "status-task-a-0", RUNNING.encode()), (6, "status-task-a-0", RUNNING.encode())]
    assert [str(p) for p in records.problems] == [f"{tmp_path / 'missing.jsonl'}: no such file or directory"]


def test_a_range_not_read_in_time_is_reported_with_what_it_read(spark: SparkSession,
                                                               mock_cluster: FaultyCluster) -> None:
    mock_cluster.create_topic("events", 2, 1)
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers})
    for i in range(10):
        producer.produce("events", b"v", b"k%d" % i, partition=0)
    assert producer.flush(10) == 0
    config = {"bootstrap.servers": mock_cluster.bootstrap_servers}
    plan = plan_ranges(config, "events", max_records_per_range=4)
    assert [(r.partition, r.start, r.end) for r in plan.ranges] == [(0, 0, 4), (0, 4, 8), (0, 8, 10)]
    assert plan.problems == plan.warnings == []  # partition 1 is empty: nothing to read, nothing wrong
    assert plan.next_offsets == {0: 10, 1: 0}
    cut_short = read_kafka(spark, config, "events", max_records_per_range=4, range_timeout_s=0.0)
    assert cut_short.frame.count() == 0
    assert sorted(str(p) for p in cut_short.problems) == [
        f"events/0: stopped after 0 s at offset {start} of range [{start}, {end})"
        for start, end in ((0, 4), (4, 8), (8, 10))]
    assert cut_short.persisted is not None
    cut_short.persisted.unpersist()


def test_a_plan_from_a_checkpoint_starts_where_the_last_one_ended(mock_cluster: FaultyCluster) -> None:
    mock_cluster.create_topic("events", 2, 1)
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers})

    def write(partition: int, count: int) -> None:
        for _ in range(count):
            producer.produce("events", b"v", b"k", partition=partition)
        assert producer.flush(10) == 0

    config = {"bootstrap.servers": mock_cluster.bootstrap_servers}
    write(0, 6)
    first = plan_ranges(config, "events")
    assert first.next_offsets == {0: 6, 1: 0}
    write(0, 3)
    write(1, 2)
    second = plan_ranges(config, "events", start_offsets=first.next_offsets)
    assert [(r.partition, r.start, r.end) for r in second.ranges] == [(0, 6, 9), (1, 0, 2)]
    assert (second.next_offsets, second.problems, second.warnings) == ({0: 9, 1: 2}, [], [])
    nothing_new = plan_ranges(config, "events", start_offsets=second.next_offsets)
    assert (nothing_new.ranges, nothing_new.next_offsets) == ([], {0: 9, 1: 2})
    # A checkpoint past the partition's end: the topic was re-created (here: never held that many).
    ahead = plan_ranges(config, "events", start_offsets={0: 50, 1: 2})
    assert [str(p) for p in ahead.problems] == [
        "events/0: the checkpoint's offset 50 is not in the partition (it starts again at 0): was the topic "
        "re-created?"]
