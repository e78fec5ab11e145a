"""The generated history's way into a broker (harness/history_gen.py's ``produce``): every record at its generated
partition and offset, with its timestamp, so that every load of the same files is the same topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness import history_gen
from harness.real_kafka import KafkaCluster
from status_store.kafka.reading import read_to_end

from .conftest import GeneratedHistories

Records = dict[tuple[int, int], tuple[Any, ...]]


def generated(directory: Path) -> Records:
    """The files' records by (partition, offset): key, timestamp, value."""
    table = pa.concat_tables([pq.read_table(path) for path in sorted(directory.glob("*.parquet"))])
    return {(p, o): (k, t, None if v is None else v.encode()) for p, o, k, t, v in zip(
        *(table.column(c).to_pylist() for c in ("partition", "offset", "key", "timestamp", "value")), strict=True)}


def loaded(bootstrap_servers: str, topic: str) -> Records:
    """The topic's records by (partition, offset): key, timestamp, value."""
    return {(m.partition(), m.offset()): (m.key().decode() if m.key() is not None else None, m.timestamp()[1],
                                          m.value())
            for batch in read_to_end({"bootstrap.servers": bootstrap_servers}, topic, 60.0) for m in batch}


def test_every_load_into_apache_kafka_puts_each_record_at_its_generated_offset(
        kafka: KafkaCluster, generated_histories: GeneratedHistories) -> None:
    data = generated_histories.data(6000, 11)
    expected = [generated(data / "status"), generated(data / "history")]
    for load in range(2):
        topics = (f"gen-status-{load}", f"gen-history-{load}")
        # Small batches, many in flight per partition (as a busy producer sends them): a new topic refuses the first
        # ones until its partitions' leadership settles, and their retries must not land after later batches.
        history_gen.produce(kafka.bootstrap_servers, data, topics, {"batch.num.messages": 100, "linger.ms": 1})
        assert [loaded(kafka.bootstrap_servers, topic) for topic in topics] == expected, f"load {load}"
