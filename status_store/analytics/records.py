"""Raw records for the analysis: from Kafka (offset ranges read in parallel in the executors) or from files.

Every reader returns the raw record schema (``RAW_SCHEMA``): topic, partition, offset, timestamp (ms),
key (text, undecodable bytes replaced as the store does), value (bytes; null is a tombstone).

Kafka. No Spark Kafka connector jar is needed. The driver plans every topic with one consumer, before
Spark starts: it assigns every partition at its beginning and takes, from the first Fetch answer, the
first offset and the high watermark (ListOffsets is not used: Tansu answers it wrongly). It splits each
partition's range into ranges of at most ``max_records_per_range`` offsets, and packs small ranges of
different partitions into one task up to that many records. Each task (``mapInArrow`` over
``spark.range``) reads its ranges in an executor with one plain confluent-kafka consumer (assign, read to
each range's end, stop at a deadline). A missing topic and unreachable brokers are ``ReadProblem`` s of
the plan; a range that could not be read in time goes to a Spark accumulator (``KafkaFrames.problems``, known once an
action has read it): the job fails on either. An empty topic or partition is not a problem. An
incremental run starts each partition at an earlier run's ``Plan.next_offsets``. Where a cluster has
Spark's own Kafka source, its output selected to these columns works as well.

Files. JSON Lines (``.jsonl``, ``.json``, ``.ndjson``, optionally compressed) or Parquet files or
directories holding the same columns; ``value`` may be text or binary in Parquet.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..kafka.client_log import ClientLog, is_embedded
from ..kafka.reading import Consumed, consumed
from .options import MAX_RECORDS_PER_RANGE, METADATA_TIMEOUT_S, RANGE_TIMEOUT_S

RAW_SCHEMA = "topic string, partition int, offset long, timestamp long, key string, value binary"
_BATCH_ROWS = 10_000
_JSON_SUFFIXES = {".jsonl", ".json", ".ndjson"}
# Errors a range read stops at; any other error is taken as transient until the range's deadline.


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
    """Offset ranges covering what one topic holds now (``plan_topics`` for one topic)."""
    return plan_topics(consumer_config, [topic], max_records_per_range, timeout_s,
                       {topic: start_offsets} if start_offsets is not None else None)[0]


def plan_topics(consumer_config: dict[str, Any], topics: Sequence[str],
                max_records_per_range: int = MAX_RECORDS_PER_RANGE, timeout_s: float = METADATA_TIMEOUT_S,
                start_offsets: Mapping[str, Mapping[int, int]] | None = None) -> list[Plan]:
    """Offset ranges covering what each topic holds now, at most ``max_records_per_range`` offsets each.

    One consumer plans every topic (no Spark is needed: a run plans before Spark starts, so that unreachable
    brokers or a missing topic fail it in seconds). ``timeout_s`` bounds the whole plan (the metadata, then
    the first Fetch answers). ``start_offsets`` (an earlier run's ``next_offsets`` per topic) starts each
    partition there instead of at its beginning; a partition it does not name is read from its beginning.
    Planning stops at the first topic whose metadata cannot be read.
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
    plans = {topic: Plan(topic) for topic in topics}
    deadline = time.monotonic() + timeout_s
    partitions: list[TopicPartition] = []
    try:
        for topic, plan in plans.items():
            try:
                metadata = consumer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.001)).topics.get(
                    topic)
            except KafkaException as e:
                consumer.poll(0)  # serves the client's queued log lines: the last one says why
                last = f" (last client error: {log.last_problem})" if log.last_problem else ""
                plan.problems.append(ReadProblem(topic, f"cannot read the topic's metadata within {timeout_s:g} s: "
                                                        f"{e.args[0].str() if e.args else e}{last}"))
                return list(plans.values())
            if metadata is None or metadata.error is not None or not metadata.partitions:
                reason = (metadata.error.str() if metadata is not None and metadata.error is not None
                          else "no partitions")
                plan.problems.append(ReadProblem(topic, f"topic not found ({reason})"))
                continue
            since = (start_offsets or {}).get(topic) or {}
            partitions += [TopicPartition(topic, p, since.get(p, OFFSET_BEGINNING))
                           for p in sorted(metadata.partitions)]
        bounds = _partition_bounds(consumer, plans, partitions, deadline, start_offsets or {})
    finally:
        consumer.close()
    for (topic, partition), (start, end) in sorted(bounds.items()):
        plans[topic].ranges.extend(OffsetRange(topic, partition, low, min(low + max_records_per_range, end))
                                   for low in range(start, end, max_records_per_range))
    return list(plans.values())


def _partition_bounds(consumer: Consumer, plans: Mapping[str, Plan], partitions: list[TopicPartition],
                      deadline: float, start_offsets: Mapping[str, Mapping[int, int]],
                      ) -> dict[tuple[str, int], tuple[int, int]]:
    """First offset to read and high watermark of each partition, as the first Fetch answer (before
    ``deadline``) gives them."""
    if not partitions:
        return {}
    consumer.assign(partitions)
    first: dict[tuple[str, int], int | None] = {}
    while len(first) < len(partitions) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.2):
            topic, partition = message.topic(), message.partition()
            if topic is None or topic not in plans or partition is None or (topic, partition) in first:
                continue
            plan, where = plans[topic], f"{topic}/{partition}"
            error, offset = message.error(), message.offset()
            if error is not None and (meaning := consumed(error)) is not Consumed.END:
                if meaning is Consumed.GIVE_UP:
                    first[topic, partition] = None
                    plan.problems.append(ReadProblem(where, f"not read: {error.str()}"))
                continue  # anything else is taken as transient until the deadline
            at_end = error is not None  # the partition holds nothing from here on
            first[topic, partition] = None if at_end else offset
            since = start_offsets.get(topic, {}).get(partition)
            if since is not None and offset is not None and offset < since:
                # The log restarted below the checkpoint: the topic was re-created (or truncated).
                first[topic, partition] = None
                plan.problems.append(ReadProblem(where, f"the checkpoint's offset {since} is not in the partition "
                                                 f"(it starts again at {offset}): was the topic re-created?"))
                continue
            if since is not None and offset is not None and offset > since:
                plan.warnings.append(ReadProblem(where, f"offsets {since} to {offset - 1} were deleted (retention) "
                                                 "before a run read them"))
            if at_end and offset is not None:
                plan.next_offsets[partition] = offset
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for assigned in partitions:
        topic, partition, plan = assigned.topic, assigned.partition, plans[assigned.topic]
        if (topic, partition) not in first:
            plan.problems.append(ReadProblem(f"{topic}/{partition}", "no answer within the timeout; not read"))
            continue
        start = first[topic, partition]
        if start is None:
            continue  # nothing new (or reported above)
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if high <= start:
            plan.problems.append(ReadProblem(f"{topic}/{partition}", f"no high watermark known past offset {start}"))
            continue
        bounds[topic, partition] = (start, high)
        plan.next_offsets[partition] = high
    return bounds


def pack_ranges(ranges: Sequence[OffsetRange], records_per_task: int) -> list[list[OffsetRange]]:
    """The ranges in groups that one Spark task reads each: ranges of different partitions together while they
    hold at most ``records_per_task`` offsets in all (a topic of many small partitions is then a few tasks,
    not one task, with its fixed cost, per partition)."""
    tasks: list[list[OffsetRange]] = []
    sizes: list[int] = []
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        size = r.end - r.start
        for i, task in enumerate(tasks):
            if sizes[i] + size <= records_per_task and all((t.topic, t.partition) != (r.topic, r.partition)
                                                          for t in task):
                task.append(r)
                sizes[i] += size
                break
        else:
            tasks.append([r])
            sizes.append(size)
    return tasks


class ReadProblems(AccumulatorParam[list[tuple[str, int, str]]]):
    """What the range readers could not read, gathered from the executors by a Spark accumulator (so that
    read errors need neither error rows in the data nor a pass of their own)."""

    def zero(self, value: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
        return []

    def addInPlace(self, value1: list[tuple[str, int, str]],
                   value2: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
        return value1 + value2


@dataclass
class KafkaFrames:
    """Lazy frames of planned ranges and the read problems their tasks report (known once an action read
    them)."""

    spark: SparkSession
    config: dict[str, Any]
    timeout_s: float
    records_per_task: int
    _problems: Accumulator[list[tuple[str, int, str]]] | None = None

    def frame(self, ranges: Sequence[OffsetRange]) -> DataFrame:
        """The records of ``ranges`` (read when an action needs them), ranges packed into tasks.

        One task per group of ranges, over ``spark.range``: nothing runs in Python to plan the read (a Python
        data source would start a Python worker for its schema and another for its partitions, each time).
        """
        if not ranges:
            return self.spark.createDataFrame([], RAW_SCHEMA)
        if self._problems is None:
            self._problems = self.spark.sparkContext.accumulator([], ReadProblems())
        tasks = [tuple(task) for task in pack_ranges(ranges, self.records_per_task)]
        config, timeout_s, problems = self.config, self.timeout_s, self._problems

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for task in batch.column(0).to_pylist():
                    errors: list[tuple[str, int, str]] = []
                    yield from read_range_group(config, tasks[task], timeout_s, errors)
                    if errors:
                        problems.add(errors)

        return self.spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(read, RAW_SCHEMA)

    def problems(self) -> list[ReadProblem]:
        """What the tasks that ran so far could not read (each once, however often Spark ran a task)."""
        found = set(self._problems.value) if self._problems is not None else set()
        return [ReadProblem(f"{topic}/{partition}", message) for topic, partition, message in sorted(found)]


def read_kafka(spark: SparkSession, consumer_config: dict[str, Any], topic: str,
               max_records_per_range: int = MAX_RECORDS_PER_RANGE, range_timeout_s: float = RANGE_TIMEOUT_S,
               plan_timeout_s: float = METADATA_TIMEOUT_S) -> Records:
    """The topic's records as a DataFrame read by Spark tasks (``plan_ranges``, then ``read_ranges``); what could
    not be read is in ``problems``."""
    plan = plan_ranges(consumer_config, topic, max_records_per_range, plan_timeout_s)
    records = read_ranges(spark, consumer_config, plan.ranges, range_timeout_s, max_records_per_range)
    records.problems[:0] = plan.problems
    return records


def read_ranges(spark: SparkSession, consumer_config: dict[str, Any], ranges: list[OffsetRange],
                range_timeout_s: float = RANGE_TIMEOUT_S, records_per_task: int = MAX_RECORDS_PER_RANGE) -> Records:
    """The records of planned ranges, read at once: persisted (and counted), so that ``problems`` holds the
    ranges cut short. (The job reads lazily instead, with ``KafkaFrames``.)"""
    kafka = KafkaFrames(spark, consumer_config, range_timeout_s, records_per_task)
    frame = kafka.frame(ranges).persist()
    frame.count()
    return Records(frame, kafka.problems(), ranges, frame)


def _consumer_config(config: dict[str, Any]) -> dict[str, Any]:
    return {"group.id": "status-store-analyze", "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", **config}


def read_range_group(config: dict[str, Any], ranges: Sequence[OffsetRange], timeout_s: float,
                     errors: list[tuple[str, int, str]]) -> Iterator[pa.RecordBatch]:
    """Read offsets ``[start, end)`` of each range (of different partitions, with one consumer) in Arrow batches;
    a range not read completely before the deadline, or stopped by an error, is added to ``errors`` as
    (topic, partition, why)."""
    consumer = Consumer(_consumer_config(config))
    rows: dict[str, list[Any]] = {name: [] for name in _ARROW_SCHEMA.names}
    position = {(r.topic, r.partition): r.start for r in ranges}
    pending = {(r.topic, r.partition): r for r in ranges if r.start < r.end}
    last_error = ""
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in pending.values()])
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                topic, partition = message.topic(), message.partition()
                if topic is None or partition is None or (topic, partition) not in pending:
                    continue
                where = (topic, partition)
                r = pending[where]
                failure, offset = message.error(), message.offset()
                if failure is not None:
                    meaning = consumed(failure)
                    if meaning is Consumed.END:
                        # At the end of the partition: done when that is past the planned range.
                        if offset is not None and offset >= r.end:
                            del pending[where]
                    elif meaning is Consumed.GIVE_UP:
                        errors.append((r.topic, r.partition, f"{failure.str()} at offset {position[where]} of range "
                                                             f"[{r.start}, {r.end})"))
                        del pending[where]
                    else:
                        last_error = failure.str()  # transient (a broker away): retried until the deadline
                    continue
                if offset is None:
                    continue
                if offset >= r.end:
                    del pending[where]
                    continue
                position[where] = offset + 1
                rows["topic"].append(r.topic)
                rows["partition"].append(r.partition)
                rows["offset"].append(offset)
                rows["timestamp"].append(message.timestamp()[1])
                key = message.key()
                rows["key"].append(key.decode("utf-8", "replace") if key is not None else None)
                rows["value"].append(message.value())
                if offset + 1 >= r.end:
                    del pending[where]
            if len(rows["offset"]) >= _BATCH_ROWS:
                yield pa.RecordBatch.from_pydict(rows, schema=_ARROW_SCHEMA)
                rows = {name: [] for name in rows}
    finally:
        consumer.close()
    if rows["offset"]:
        yield pa.RecordBatch.from_pydict(rows, schema=_ARROW_SCHEMA)
    for (topic, partition), r in sorted(pending.items()):
        errors.append((topic, partition, f"stopped after {timeout_s:g} s at offset {position[topic, partition]} of "
                                         f"range [{r.start}, {r.end})"
                                         + (f" (last error: {last_error})" if last_error else "")))


_ARROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                           ("timestamp", pa.int64()), ("key", pa.string()), ("value", pa.binary())])


# ------------------------------------------------------------------------------------------ files


def read_files(spark: SparkSession, paths: Sequence[str]) -> Records:
    """Records exported as JSON Lines or Parquet (files or directories), each record once (by topic, partition
    and offset); missing paths are problems."""
    problems = missing_files(paths)
    json_paths: list[str] = []
    parquet_paths: list[str] = []
    for path in paths:
        if path in {problem.source for problem in problems}:
            continue
        suffixes = {s.lower() for s in Path(path).suffixes}
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


def missing_files(paths: Sequence[str]) -> list[ReadProblem]:
    """The local paths (no URL scheme) that do not exist (checked before Spark starts)."""
    return [ReadProblem(path, "no such file or directory") for path in paths
            if "://" not in path and not Path(path).exists()]


def _normalize(frame: DataFrame) -> DataFrame:
    """The raw record schema: value as bytes (text is UTF-8 encoded), key as text."""
    return frame.select(F.col("topic").cast("string"), F.col("partition").cast("int"), F.col("offset").cast("long"),
                        F.col("timestamp").cast("long"), F.col("key").cast("string"), F.col("value").cast("binary"))
