"""The readers: exported files, and Kafka ranges that cannot be read in time (reported, not fatal)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from status_store.analytics.records import plan_ranges, read_files, read_kafka
from status_store.testing import FaultyCluster

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
    assert [str(p) for p in records.problems] == [f"{tmp_path / 'missing.jsonl'}: no such file or directory; skipped"]


def test_a_range_not_read_in_time_is_reported_and_the_job_goes_on(spark: SparkSession,
                                                                  mock_cluster: FaultyCluster) -> None:
    mock_cluster.create_topic("events", 2, 1)
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers})
    for i in range(10):
        producer.produce("events", b"v", b"k%d" % i, partition=0)
    assert producer.flush(10) == 0
    config = {"bootstrap.servers": mock_cluster.bootstrap_servers}
    ranges, problems = plan_ranges(config, "events", max_records_per_range=4)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 4), (0, 4, 8), (0, 8, 10)]
    assert problems == []  # partition 1 is empty: nothing to read, nothing wrong
    cut_short = read_kafka(spark, config, "events", max_records_per_range=4, range_timeout_s=0.0)
    assert cut_short.frame.count() == 0
    assert sorted(str(p) for p in cut_short.problems) == [
        f"events/0: stopped after 0 s at offset {start} of range [{start}, {end})"
        for start, end in ((0, 4), (4, 8), (8, 10))]
    assert cut_short.persisted is not None
    cut_short.persisted.unpersist()
