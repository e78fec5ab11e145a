"""Raw records for the analysis: from Kafka (offset ranges read in parallel in the executors) or from files.

Every reader returns the raw record schema (``RAW_SCHEMA``): topic, partition, offset, timestamp (ms),
key (text, undecodable bytes replaced as the store does), value (bytes; null is a tombstone).

Kafka. No Spark Kafka connector jar is needed. The driver plans: it assigns every partition of the
topic at its beginning and takes, from the first Fetch answer, the first offset and the high
watermark (ListOffsets is not used: Tansu answers it wrongly). It splits each partition's range
into ranges of at most ``max_records_per_range`` offsets. A Spark Python data source reads each
range in an executor with a plain confluent-kafka consumer (assign, read to the range's end, stop at
a deadline). A missing topic, unreachable brokers and a range that could not be read in time are
reported as ``ReadProblem`` s, on which the job fails (a range cut short also yields what it read); an
empty topic or partition is not a problem. An incremental run starts each partition at an earlier run's
``Plan.next_offsets``. Where a cluster has Spark's own Kafka source, its output selected to
these columns works as well.

Files. JSON Lines (``.jsonl``, ``.json``, ``.ndjson``, optionally compressed) or Parquet files or
directories holding the same columns; ``value`` may be text or binary in Parquet.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..client_log import ClientLog, is_embedded
from .options import MAX_RECORDS_PER_RANGE, METADATA_TIMEOUT_S, RANGE_TIMEOUT_S

RAW_SCHEMA = "topic string, partition int, offset long, timestamp long, key string, value binary"
_READ_SCHEMA = RAW_SCHEMA + ", read_error string"
SOURCE_NAME = "status_store_kafka_ranges"
_BATCH_ROWS = 10_000
_JSON_SUFFIXES = {".jsonl", ".json", ".ndjson"}
# Errors a range read stops at; any other error is taken as transient until the range's deadline.
_GIVE_UP = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
            KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTHENTICATION}


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class ReadProblem:
    """Input that could not be read completely (the job fails on it) or a warning about the input."""

    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass
class Records:
    """Raw records, what could not be read, and the ranges planned (Kafka)."""

    frame: DataFrame
    problems: list[ReadProblem]
    ranges: list[OffsetRange]
    #: What the reader persisted (unpersist it when done).
    persisted: DataFrame | None = None


@dataclass
class Plan:
    """The offset ranges to read from one topic, and where the next incremental run starts."""

    topic: str
    ranges: list[OffsetRange] = field(default_factory=list)
    #: What stops the topic from being read completely.
    problems: list[ReadProblem] = field(default_factory=list)
    #: Worth saying, not fatal: records deleted (by retention) before a run read them.
    warnings: list[ReadProblem] = field(default_factory=list)
    #: Per partition, the offset after the last one planned: where the next run starts.
    next_offsets: dict[int, int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Offsets planned: the records to read, at most (a compacted topic has gaps)."""
        return sum(r.end - r.start for r in self.ranges)


# ------------------------------------------------------------------------------------------ Kafka


def plan_ranges(consumer_config: dict[str, Any], topic: str, max_records_per_range: int = MAX_RECORDS_PER_RANGE,
                timeout_s: float = METADATA_TIMEOUT_S, start_offsets: Mapping[int, int] | None = None) -> Plan:
    """Offset ranges covering what the topic holds now, at most ``max_records_per_range`` offsets each.

    ``timeout_s`` bounds the whole plan (the metadata, then the first Fetch answers). ``start_offsets``
    (an earlier run's ``next_offsets``) starts each partition there instead of at its beginning; a
    partition it does not name is read from its beginning.
    """
    if max_records_per_range <= 0:
        raise ValueError(f"max_records_per_range must be > 0, got {max_records_per_range}")
    log = ClientLog(is_embedded(consumer_config.get("bootstrap.servers")))
    try:
        # Only the first record of each partition is needed here: small fetches.
        consumer = Consumer({"max.partition.fetch.bytes": 65536, "queued.max.messages.kbytes": 1024,
                             **_consumer_config(consumer_config), "logger": log, "log.thread.name": False})
    except KafkaException as e:
        raise ValueError(f"bad Kafka consumer settings {sorted(consumer_config)}: {e}") from None
    plan = Plan(topic)
    deadline = time.monotonic() + timeout_s
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        except KafkaException as e:
            consumer.poll(0)  # serves the client's queued log lines: the last one says why
            last = f" (last client error: {log.last_problem})" if log.last_problem else ""
            plan.problems.append(ReadProblem(topic, f"cannot read the topic's metadata within {timeout_s:g} s: "
                                                    f"{e.args[0].str() if e.args else e}{last}"))
            return plan
        if metadata is None or metadata.error is not None or not metadata.partitions:
            reason = metadata.error.str() if metadata is not None and metadata.error is not None else "no partitions"
            plan.problems.append(ReadProblem(topic, f"topic not found ({reason})"))
            return plan
        bounds = _partition_bounds(consumer, plan, sorted(metadata.partitions), deadline, start_offsets or {})
    finally:
        consumer.close()
    for partition, (start, end) in sorted(bounds.items()):
        plan.ranges.extend(OffsetRange(topic, partition, low, min(low + max_records_per_range, end))
                           for low in range(start, end, max_records_per_range))
    return plan


def _partition_bounds(consumer: Consumer, plan: Plan, partitions: list[int], deadline: float,
                      start_offsets: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """First offset to read and high watermark of each partition, as the first Fetch answer (before
    ``deadline``) gives them."""
    topic = plan.topic
    consumer.assign([TopicPartition(topic, p, start_offsets.get(p, OFFSET_BEGINNING)) for p in partitions])
    first: dict[int, int | None] = {}
    while len(first) < len(partitions) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.2):
            partition = message.partition()
            if partition in first or partition is None:
                continue
            error, offset = message.error(), message.offset()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                if error.fatal() or error.code() in _GIVE_UP:
                    first[partition] = None
                    plan.problems.append(ReadProblem(f"{topic}/{partition}", f"not read: {error.str()}"))
                continue  # anything else is taken as transient until the deadline
            at_end = error is not None  # the partition holds nothing from here on
            first[partition] = None if at_end else offset
            since = start_offsets.get(partition)
            if since is not None and offset is not None and offset < since:
                # The log restarted below the checkpoint: the topic was re-created (or truncated).
                first[partition] = None
                plan.problems.append(ReadProblem(f"{topic}/{partition}", f"the checkpoint's offset {since} is not in "
                                                 f"the partition (it starts again at {offset}): was the topic "
                                                 "re-created?"))
                continue
            if since is not None and offset is not None and offset > since:
                plan.warnings.append(ReadProblem(f"{topic}/{partition}", f"offsets {since} to {offset - 1} were "
                                                 "deleted (retention) before a run read them"))
            if at_end and offset is not None:
                plan.next_offsets[partition] = offset
    bounds: dict[int, tuple[int, int]] = {}
    for partition in partitions:
        if partition not in first:
            plan.problems.append(ReadProblem(f"{topic}/{partition}", "no answer within the timeout; not read"))
            continue
        start = first[partition]
        if start is None:
            continue  # nothing new (or reported above)
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if high <= start:
            plan.problems.append(ReadProblem(f"{topic}/{partition}", f"no high watermark known past offset {start}"))
            continue
        bounds[partition] = (start, high)
        plan.next_offsets[partition] = high
    return bounds


def read_kafka(spark: SparkSession, consumer_config: dict[str, Any], topic: str,
               max_records_per_range: int = MAX_RECORDS_PER_RANGE, range_timeout_s: float = RANGE_TIMEOUT_S,
               plan_timeout_s: float = METADATA_TIMEOUT_S) -> Records:
    """The topic's records as a DataFrame read by one Spark task per offset range (``plan_ranges``, then
    ``read_ranges``); what could not be read is in ``problems``."""
    plan = plan_ranges(consumer_config, topic, max_records_per_range, plan_timeout_s)
    records = read_ranges(spark, consumer_config, plan.ranges, range_timeout_s)
    records.problems[:0] = plan.problems
    return records


def read_ranges(spark: SparkSession, consumer_config: dict[str, Any], ranges: list[OffsetRange],
                range_timeout_s: float = RANGE_TIMEOUT_S) -> Records:
    """The records of planned ranges, one Spark task per range.

    The frame is persisted so the analysis reads Kafka once; ranges cut short are in ``problems``.
    """
    if not ranges:
        return Records(spark.createDataFrame([], RAW_SCHEMA), [], ranges)
    spark.dataSource.register(KafkaRangeSource)
    plan = {"config": consumer_config, "timeout_s": range_timeout_s,
            "ranges": [[r.topic, r.partition, r.start, r.end] for r in ranges]}
    raw = spark.read.format(SOURCE_NAME).option("plan", json.dumps(plan)).load().persist()
    problems = [ReadProblem(f"{row.topic}/{row.partition}", row.read_error)
                for row in raw.filter(F.col("read_error").isNotNull()).collect()]
    return Records(raw.filter(F.col("read_error").isNull()).drop("read_error"), problems, ranges, raw)


def _consumer_config(config: dict[str, Any]) -> dict[str, Any]:
    return {"group.id": "status-store-analyze", "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", **config}


@dataclass(frozen=True)
class _RangePartition(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


class KafkaRangeSource(DataSource):
    """A Spark data source reading planned offset ranges (option ``plan``, JSON) with confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return _READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _KafkaRangeReader(json.loads(self.options["plan"]))


class _KafkaRangeReader(DataSourceReader):
    def __init__(self, plan: dict[str, Any]) -> None:
        self.config: dict[str, Any] = plan["config"]
        self.timeout_s: float = plan["timeout_s"]
        self.ranges = [_RangePartition(*r) for r in plan["ranges"]]

    def partitions(self) -> Sequence[InputPartition]:
        return self.ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _RangePartition)
        yield from read_range(self.config, partition, self.timeout_s)


def read_range(config: dict[str, Any], r: _RangePartition | OffsetRange, timeout_s: float) -> Iterator[pa.RecordBatch]:
    """Read offsets ``[start, end)`` of one partition in Arrow batches; a last row carries a read error, if any."""
    consumer = Consumer(_consumer_config(config))
    rows: dict[str, list[Any]] = {name: [] for name in ("offset", "timestamp", "key", "value")}
    position, error, last_error = r.start, None, ""
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        while position < r.end:
            if time.monotonic() > deadline:
                error = (f"stopped after {timeout_s:g} s at offset {position} of range [{r.start}, {r.end})"
                         + (f" (last error: {last_error})" if last_error else ""))
                break
            for message in consumer.consume(1000, 0.5):
                failure, offset = message.error(), message.offset()
                if failure is not None:
                    if failure.code() == KafkaError._PARTITION_EOF:
                        # At the end of the partition: done when that is past the planned range.
                        if offset is not None and offset >= r.end:
                            position = r.end
                    elif failure.fatal() or failure.code() in _GIVE_UP:
                        error = f"{failure.str()} at offset {position} of range [{r.start}, {r.end})"
                        position = r.end
                        break
                    else:
                        last_error = failure.str()  # transient (a broker away): retried until the deadline
                    continue
                if offset is None:
                    continue
                if offset >= r.end:
                    position = r.end
                    break
                position = offset + 1
                rows["offset"].append(offset)
                rows["timestamp"].append(message.timestamp()[1])
                key = message.key()
                rows["key"].append(key.decode("utf-8", "replace") if key is not None else None)
                rows["value"].append(message.value())
            if len(rows["offset"]) >= _BATCH_ROWS:
                yield _batch(r, rows)
                rows = {name: [] for name in rows}
    finally:
        consumer.close()
    if rows["offset"]:
        yield _batch(r, rows)
    if error is not None:
        yield pa.RecordBatch.from_pydict(
            {"topic": [r.topic], "partition": [r.partition], "offset": [None], "timestamp": [None], "key": [None],
             "value": [None], "read_error": [error]}, schema=_ARROW_SCHEMA)


_ARROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                           ("timestamp", pa.int64()), ("key", pa.string()), ("value", pa.binary()),
                           ("read_error", pa.string())])


def _batch(r: _RangePartition | OffsetRange, rows: dict[str, list[Any]]) -> pa.RecordBatch:
    count = len(rows["offset"])
    return pa.RecordBatch.from_pydict(
        {"topic": [r.topic] * count, "partition": [r.partition] * count, **rows, "read_error": [None] * count},
        schema=_ARROW_SCHEMA)


# ------------------------------------------------------------------------------------------ files


def read_files(spark: SparkSession, paths: Sequence[str]) -> Records:
    """Records exported as JSON Lines or Parquet (files or directories), each record once (by topic, partition
    and offset); missing paths are problems."""
    problems: list[ReadProblem] = []
    json_paths: list[str] = []
    parquet_paths: list[str] = []
    for path in paths:
        local = Path(path)
        if "://" not in path and not local.exists():
            problems.append(ReadProblem(path, "no such file or directory"))
            continue
        suffixes = {s.lower() for s in local.suffixes}
        (json_paths if suffixes & _JSON_SUFFIXES else parquet_paths).append(path)
    frames = []
    if json_paths:
        frames.append(spark.read.schema(RAW_SCHEMA.replace("value binary", "value string"))
                      .option("mode", "PERMISSIVE").json(json_paths))
    frames.extend(spark.read.parquet(path) for path in parquet_paths)
    if not frames:
        return Records(spark.createDataFrame([], RAW_SCHEMA), problems, [])
    normalized = [_normalize(frame) for frame in frames]
    combined = normalized[0]
    for frame in normalized[1:]:
        combined = combined.unionByName(frame)
    # Exports overlap (a topic exported twice, a re-run): a record is counted once.
    return Records(combined.dropDuplicates(["topic", "partition", "offset"]), problems, [])


def _normalize(frame: DataFrame) -> DataFrame:
    """The raw record schema: value as bytes (text is UTF-8 encoded), key as text."""
    return frame.select(F.col("topic").cast("string"), F.col("partition").cast("int"), F.col("offset").cast("long"),
                        F.col("timestamp").cast("long"), F.col("key").cast("string"), F.col("value").cast("binary"))
