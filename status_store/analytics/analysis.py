"""The analytics, as DataFrame/SQL expressions (no Python UDF runs per record).

Two inputs, both in the raw record schema of ``records.RAW_SCHEMA`` (topic, partition, offset,
timestamp, key, value; ``value`` is text or bytes, null for a tombstone):

- the **status topic**: the latest status per key, with exactly the read rules of
  ``cache.StatusCache`` (keys as ``model.parse_key`` reads them, values as ``codec.decode_status``
  and ``codec.decode_topic_status`` decode them, tombstones, a connector tombstone deleting the
  connector's tasks, the stale-UNASSIGNED filter, garbled records skipped and counted);
- the **history topic**: time in each state, FAILED episodes and time to recovery, flapping, and
  retry outcomes, from the events the service writes as statuses change and writes end.

Order of records. The store reads each partition in offset order and the partitions interleaved as
records arrive, which record timestamps approximate. A record is taken to arrive at the newest timestamp
of its partition up to it (``arrival``: a timestamp older than an earlier record's of the same partition
cannot put it before that record), and records are read in (arrival, partition, offset) order: one
order in which a reader could have read them all, used for every rule below. It matters where records
of one connector or task are in several partitions: a connector tombstone deletes the connector's tasks
read before it (their records are usually in other partitions), and a task or topic key written in two
spellings (``status-task-c-01`` and ``status-task-c-1``; the topic key's separator is not checked) is one
task or topic status to Connect, keyed by what the key names, not by its text.

The stale-UNASSIGNED filter depends on the cached value at the time each record is read, which
is itself the result of the filter. It unrolls into window functions: non-UNASSIGNED records are
always cached, so the cached value when an UNASSIGNED arrives is either the last non-UNASSIGNED
record since the last deletion (the "head") or an UNASSIGNED accepted after it. The UNASSIGNED
records after a RUNNING head of generation G are dropped while none of them (up to this one) has
a generation above G; once one is accepted, the cached state is UNASSIGNED and the rest pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from pyspark.sql.window import WindowSpec

from ..model import CONNECTOR_PREFIX, TASK_PREFIX, TOPIC_PREFIX, TOPIC_SEPARATOR, State
from .options import FLAP_TRANSITIONS, FLAP_WINDOW_MS

DAY_MS = 86_400_000

STATES = [state.value for state in State]
OUTCOME_RESULTS = ["written", "failed", "superseded"]
MTTR_PERCENTILES = (0.5, 0.9, 0.99)
HISTORY_KINDS = ["connector", "task", "topic"]

_INT32 = 2**31
# The decimal digits of the Basic Multilingual Plane (what parse_key accepts in a task number, as Java's parseInt)
# mapped to ASCII ones.
_DECIMALS = "".join(chr(c) for c in range(0x80, 0x10000) if chr(c).isdecimal())
_DECIMAL_VALUES = "".join(str(int(c)) for c in _DECIMALS)

# Spark's JSON reader is Jackson: set as Connect's JsonDeserializer sets it (leading zeros allowed, nothing else).
_JSON_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false", "allowNumericLeadingZeros": "true",
                 "mode": "PERMISSIVE"}
# Values are read twice: as text (numbers keep their exact spelling: 3 vs 3.0) and as variants (JSON
# types: 3 vs "3"); a field is an integer when both agree.
_VALUE_SCHEMA = ("state string, trace variant, worker_id variant, generation string, "
                 "topic struct<name variant, connector variant, task string, discoverTimestamp string>")
_VALUE_TYPES_SCHEMA = "generation variant, topic struct<task variant, discoverTimestamp variant>"
_HISTORY_SCHEMA = ", ".join([
    "event string", "time string", "sidecar string", "key string", "kind string", "connector string",
    "task long", "topic string", "state string", "worker_id string", "generation long", "trace string",
    "result string", "attempts long", "error string", "reason string", "latency_ms long",
])
_STATUS_FIELDS = ["state", "worker_id", "generation", "trace"]
_CACHED_FIELDS = ["connector", "task", *_STATUS_FIELDS, "value", "partition", "offset", "timestamp", "tombstone"]
_LONG_MIN = -(2**63)


@dataclass
class Analysis:
    """The results of one run: lazy DataFrames (over persisted intermediates), the counters, and the writer."""

    as_of_ms: int | None
    latest: DataFrame
    state_durations: DataFrame
    episodes: DataFrame
    mttr: DataFrame
    flapping: DataFrame
    retry_outcomes: DataFrame
    flap_transitions: int
    flap_window_ms: int
    _counters: dict[str, int] = field(repr=False)
    _persisted: list[DataFrame] = field(repr=False)

    def counters(self) -> dict[str, int]:
        """Records read and records skipped (the cache's ``ReadStats`` names for the status topic)."""
        return dict(self._counters)

    def unpersist(self) -> None:
        """Free the intermediates this analysis keeps (its DataFrames stay usable, recomputed on demand)."""
        for frame in self._persisted:
            frame.unpersist()

    def outputs(self) -> dict[str, DataFrame]:
        """The outputs by name, each with a ``date`` column (UTC) to partition by."""
        return {"latest": self.latest, "mttr": self.mttr, "state_durations": self.state_durations,
                "episodes": self.episodes, "flapping": self.flapping, "retry_outcomes": self.retry_outcomes}

    def write_outputs(self, out_dir: str) -> None:
        """Write every output as Parquet partitioned by date under ``out_dir``.

        Dynamic partition overwrite (set on each writer, not on the session) replaces exactly the dates
        this run produced, so a re-run over the same input does not duplicate rows.
        """
        out = out_dir.rstrip("/")
        for name, frame in self.outputs().items():
            (frame.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
             .partitionBy("date").parquet(f"{out}/{name}"))

    def summary(self, notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The counters and settings of this analysis, with ``notes``."""
        return {
            "as_of_ms": self.as_of_ms,
            "flap_transitions": self.flap_transitions,
            "flap_window_ms": self.flap_window_ms,
            "counters": self.counters(),
            **(notes or {}),
        }

    def write(self, out_dir: str | Path, notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``write_outputs``, plus ``summary.json`` for a local directory; returns the summary."""
        out = str(out_dir).rstrip("/")
        self.write_outputs(out)
        summary = self.summary(notes)
        if "://" not in out:  # a local directory; on a cluster the summary is printed by the job
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return summary


def analyze(status_records: DataFrame, history_records: DataFrame, *, as_of_ms: int | None = None,
            flap_transitions: int = FLAP_TRANSITIONS, flap_window_ms: int = FLAP_WINDOW_MS,
            from_ms: int | None = None) -> Analysis:
    """Build every result from the two inputs (the counters at once; the outputs lazily, as ``Analysis.write``
    or another action runs them).

    ``as_of_ms`` is the time of the analysis: history events after it are left out and the last
    state of each connector and task lasts until it. By default it is the newest valid history
    event's time. A task or connector is flapping when more than ``flap_transitions`` state
    transitions fall inside any ``flap_window_ms`` window. ``from_ms`` (a UTC midnight) says the history
    holds only what the days from it on need (``retained``): the dated outputs, and the episodes MTTR is
    over, are those of its day and later.
    """
    if flap_transitions < 0 or flap_window_ms <= 0:
        raise ValueError(f"flapping needs transitions >= 0 and a window > 0 ms, got {flap_transitions} "
                         f"and {flap_window_ms}")
    # Parsed once, kept for the several outputs that read them (spilled to disk when memory is short).
    status = _with_arrival(parse_status_records(status_records)).persist(StorageLevel.MEMORY_AND_DISK)
    history = parse_history_records(history_records).persist(StorageLevel.MEMORY_AND_DISK)
    tasks = _task_cache(status).persist(StorageLevel.MEMORY_AND_DISK)
    # The first action reads both inputs (each topic's records once) and counts them, the newest event's time
    # with them.
    counters, newest = _count(status, tasks, history)
    as_of_ms = newest if as_of_ms is None else as_of_ms
    snapshot_date = _date(F.lit(as_of_ms).cast("long")) if as_of_ms is not None else _date(F.col("timestamp"))
    timeline = _timeline(history, as_of_ms, flap_window_ms).persist(StorageLevel.MEMORY_AND_DISK)

    def dated(frame: DataFrame) -> DataFrame:
        return frame if from_ms is None else frame.filter(F.col("date") >= _date(F.lit(from_ms).cast("long")))

    episodes = dated(_episodes(timeline)).persist(StorageLevel.MEMORY_AND_DISK)
    return Analysis(
        as_of_ms=as_of_ms,
        latest=_latest(status, tasks, snapshot_date, as_of_ms),
        state_durations=dated(_state_durations(timeline, as_of_ms)),
        episodes=episodes,
        mttr=_mttr(episodes, snapshot_date, as_of_ms),
        flapping=dated(_flapping(timeline, flap_transitions)),
        retry_outcomes=dated(_retry_outcomes(history, as_of_ms)),
        flap_transitions=flap_transitions,
        flap_window_ms=flap_window_ms,
        _counters=counters,
        _persisted=[status, history, tasks, timeline, episodes],
    )


def _count(status: DataFrame, tasks: DataFrame, history: DataFrame) -> tuple[dict[str, int], int | None]:
    """The counters, and the newest valid history event's time: one action reads both inputs (and persists
    them), a second counts the stale UNASSIGNED records in the task cache built from the persisted status
    records (in the first, a task reading the status records for it would run beside the one persisting them,
    and read the topic again)."""
    aggregates = status.agg(
        F.count(F.lit(1)).alias("status_records"),
        F.count_if(~F.col("valid_key")).alias("invalid_keys"),
        F.count_if(F.col("valid_key") & F.col("garbled")).alias("garbled_values"),
    ).crossJoin(history.agg(
        F.count(F.lit(1)).alias("history_records"),
        F.count_if(F.col("garbled")).alias("history_garbled"),
        F.count_if(~F.col("garbled") & (F.col("event") == "status")).alias("history_status_events"),
        F.count_if(~F.col("garbled") & (F.col("event") == "outcome")).alias("history_outcome_events"),
        F.max(F.when(~F.col("garbled"), F.col("time"))).alias("newest"),
    )).first()
    stale = tasks.agg(F.count_if(F.col("rejected"))).first()
    # A global aggregation always has one row.
    assert aggregates is not None
    assert stale is not None
    found = aggregates.asDict()
    newest = found.pop("newest")
    found["stale_unassigned"] = stale[0]
    return {name: int(value or 0) for name, value in found.items()}, newest


# ------------------------------------------------------------------------------------------ status topic


def _text(frame: DataFrame, column: str) -> tuple[Column, Column]:
    """A column as text and whether it is valid UTF-8 (bytes are decoded, text is taken as it is)."""
    if isinstance(frame.schema[column].dataType, BinaryType):
        return F.col(column).cast("string"), F.is_valid_utf8(column)
    return F.col(column), F.lit(True)


def parse_status_records(records: DataFrame) -> DataFrame:
    """Each status record with its parsed key (``model.parse_key``) and decoded value (``codec``)."""
    key, _ = _text(records, "key")
    value, utf8 = _text(records, "value")
    frame = records.select("partition", "offset", "timestamp", key.alias("key"), value.alias("value"),
                           utf8.alias("utf8"))
    kind = (F.when(F.col("key").startswith(CONNECTOR_PREFIX), "connector")
            .when(F.col("key").startswith(TASK_PREFIX), "task")
            .when(F.col("key").startswith(TOPIC_PREFIX), "topic"))
    frame = frame.withColumn("kind", kind)
    # Task keys: Java's split("-") drops trailing empty parts; the number follows the last '-'.
    task_key = F.regexp_replace("key", "-+$", "")
    task_match = F.regexp_extract(task_key, r"^status-task-(.*)-([^-]*)$", 0) != ""
    number = F.translate(F.regexp_extract(task_key, r"^status-task-(.*)-([^-]*)$", 2), _DECIMALS, _DECIMAL_VALUES)
    digits = F.regexp_replace(F.regexp_replace(number, r"^\+", ""), "^0+(?=.)", "")
    task_number = F.when(number.rlike(r"^\+?[0-9]+$") & (F.length(digits) <= 10), digits.try_cast("long"))
    # Topic keys: the topic ends at the first ':'; the separator's length is skipped unchecked, like Connect.
    colon = F.locate(":", F.col("key"), len(TOPIC_PREFIX) + 1)
    topic_name = F.expr(f"substring(key, {len(TOPIC_PREFIX) + 1}, locate(':', key, {len(TOPIC_PREFIX) + 1}) "
                        f"- {len(TOPIC_PREFIX) + 1})")
    topic_connector = F.expr(f"substring(key, locate(':', key, {len(TOPIC_PREFIX) + 1}) + {len(TOPIC_SEPARATOR)})")
    frame = frame.select(
        "*",
        F.when(kind == "connector", F.substring("key", len(CONNECTOR_PREFIX) + 1, _INT32 - 1))
        .when(kind == "task", F.regexp_extract(task_key, r"^status-task-(.*)-([^-]*)$", 1))
        .when(kind == "topic", topic_connector).alias("connector"),
        F.when((kind == "task") & task_match & (task_number < _INT32), task_number.try_cast("int")).alias("task"),
        F.when(kind == "topic", topic_name).alias("topic"),
    )
    valid_key = (F.col("key").isNotNull()
                 & (((kind == "connector") & (F.col("connector") != ""))
                    | ((kind == "task") & F.col("task").isNotNull())
                    | ((kind == "topic") & (colon > 0) & (F.col("topic") != "") & (F.col("connector") != ""))))
    frame = frame.withColumn("valid_key", F.coalesce(valid_key, F.lit(False)))
    frame = frame.withColumn("tombstone", F.col("value").isNull())
    # Jackson skips a UTF-8 byte order mark in bytes, not in text: the value is read without it.
    json_text = F.regexp_replace("value", "^\ufeff", "")
    frame = frame.select("*", F.from_json(json_text, _VALUE_SCHEMA, _JSON_OPTIONS).alias("s"),
                         F.from_json(json_text, _VALUE_TYPES_SCHEMA, _JSON_OPTIONS).alias("types"))
    generation = _java_int(F.col("s.generation"), F.schema_of_variant("types.generation"), 32)
    status_ok = (F.col("s.state").isin(STATES) & _string_or_null(F.col("s.worker_id"))
                 & _string_or_null(F.col("s.trace")) & generation.isNotNull())
    if_task = (kind != "task") | ((F.col("connector") != "") & (F.col("task") >= 0))
    topic_task = _java_int(F.col("s.topic.task"), F.schema_of_variant("types.topic.task"), 32)
    discovered = _java_int(F.col("s.topic.discoverTimestamp"), F.schema_of_variant("types.topic.discoverTimestamp"),
                           64)
    # Connect's TopicStatus takes any strings (empty, with a ':') and any task number.
    topic_ok = ((F.schema_of_variant("s.topic.name") == "STRING")
                & (F.schema_of_variant("s.topic.connector") == "STRING")
                & topic_task.isNotNull() & discovered.isNotNull())
    value_ok = F.col("utf8") & F.when(kind == "topic", topic_ok).otherwise(status_ok & if_task)
    garbled = ~F.col("tombstone") & ~F.coalesce(value_ok, F.lit(False))
    return frame.select(
        "partition", "offset", "timestamp", "key", "value", "kind", "connector", "task", "topic", "valid_key",
        "tombstone", garbled.alias("garbled"), F.col("s.state").alias("state"),
        F.variant_get("s.worker_id", "$", "string").alias("worker_id"), generation.alias("generation"),
        F.variant_get("s.trace", "$", "string").alias("trace"),
    )


def _string_or_null(field: Column) -> Column:
    """A field Connect casts to String: a string, null or missing."""
    return field.isNull() | F.schema_of_variant(field).isin("STRING", "VOID")


def _java_int(text: Column, json_type: Column, bits: int) -> Column:
    """A JSON integer (its text and variant type) narrowed like Java's ``longValue().intValue()``.

    Null when the value is not a JSON integer (a string, a fraction, an exponent, a boolean...).
    Integers of more than 37 digits are not supported (null).
    """
    integer = text.rlike(r"^-?[0-9]{1,37}$") & (json_type != "STRING")
    half, full = F.lit(str(2 ** (bits - 1))).cast("decimal(38,0)"), F.lit(str(2**bits)).cast("decimal(38,0)")
    narrowed = F.pmod(text.try_cast("decimal(38,0)") + half, full) - half
    return F.when(integer, narrowed.try_cast("int" if bits == 32 else "long"))


def _with_arrival(status: DataFrame) -> DataFrame:
    """Each record with its ``arrival``: the newest timestamp of its partition up to it (see the module docstring)."""
    partition_order = (Window.partitionBy("partition").orderBy("offset")
                       .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return status.withColumn("arrival", F.max(F.coalesce(F.col("timestamp"), F.lit(_LONG_MIN))).over(partition_order))


def _read_order(*identity: str) -> WindowSpec:
    """The records of one connector, task or topic status in read order."""
    return Window.partitionBy(*identity).orderBy("arrival", "partition", "offset")


def _canonical_key(kind: Column) -> Column:
    """The key Connect writes for a record's connector, task or topic (what the key names, in one spelling)."""
    return (F.when(kind == "connector", F.concat(F.lit(CONNECTOR_PREFIX), F.col("connector")))
            .when(kind == "task", F.concat(F.lit(TASK_PREFIX), F.col("connector"), F.lit("-"), F.col("task")))
            .otherwise(F.concat(F.lit(TOPIC_PREFIX), F.col("topic"), F.lit(TOPIC_SEPARATOR), F.col("connector"))))


def _task_cache(status: DataFrame) -> DataFrame:
    """Every task record and deletion in read order, with what it leaves in the store's cache.

    Deletions are task tombstones and, for every task of a deleted connector, the connector's tombstones,
    each in its place in the read order.
    """
    live = status.filter(F.col("valid_key") & ~F.col("garbled"))
    tasks = live.filter(F.col("kind") == "task").select(
        "connector", "task", "partition", "offset", "timestamp", "arrival", "value", "tombstone", *_STATUS_FIELDS)
    tombstones = live.filter((F.col("kind") == "connector") & F.col("tombstone")).select(
        "connector", "partition", "offset", "timestamp", "arrival")
    deletions = tasks.select("connector", "task").distinct().join(tombstones, "connector").select(
        "connector", "task", "partition", "offset", "timestamp", "arrival", F.lit(None).cast("string").alias("value"),
        F.lit(True).alias("tombstone"), *[F.lit(None).cast(t).alias(c) for c, t in
                                          zip(_STATUS_FIELDS, ["string", "string", "int", "string"], strict=True)])
    events = tasks.unionByName(deletions)
    order = _read_order("connector", "task")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    unassigned = ~F.col("tombstone") & (F.col("state") == State.UNASSIGNED.value)
    boundary = ~unassigned
    events = events.withColumn("group", F.sum(boundary.cast("long")).over(running))
    # The latest boundary (a deletion or a non-UNASSIGNED record) and the highest UNASSIGNED generation
    # since it, in one running window: generations packed under the group number.
    packed = F.when(unassigned, F.shiftleft(F.col("group"), 33) + F.col("generation") + _INT32)
    events = events.select(
        "*",
        F.last(F.when(boundary, F.col("tombstone")), ignorenulls=True).over(running).alias("head_deleted"),
        F.last(F.when(boundary, F.col("state")), ignorenulls=True).over(running).alias("head_state"),
        F.last(F.when(boundary, F.col("generation")), ignorenulls=True).over(running).alias("head_generation"),
        F.max(packed).over(running).alias("packed_max"),
    )
    highest_unassigned = F.when(F.shiftright(F.col("packed_max"), 33) == F.col("group"),
                                F.col("packed_max").bitwiseAND(2**33 - 1) - _INT32)
    rejected = (unassigned & ~F.coalesce(F.col("head_deleted"), F.lit(True))
                & (F.col("head_state") == State.RUNNING.value) & (highest_unassigned <= F.col("head_generation")))
    events = events.withColumn("rejected", F.coalesce(rejected, F.lit(False)))
    # What the cache holds after each event (a rejected UNASSIGNED leaves it as it was), and the task's last
    # event: further functions over the same window, so no further shuffle or sort.
    kept = F.when(~F.col("rejected"), F.struct(*_CACHED_FIELDS))
    return events.select("*", F.last(kept, ignorenulls=True).over(running).alias("cached"),
                         F.lead(F.lit(1)).over(order).isNull().alias("last"))


def _latest(status: DataFrame, tasks: DataFrame, snapshot_date: Column, as_of_ms: int | None) -> DataFrame:
    """The store's cache after reading everything: one row per connector, task and topic status with a value,
    under the key Connect writes for it."""
    fields = ["kind", "connector", "task", "topic", *_STATUS_FIELDS, "value", "partition", "offset", "timestamp"]
    # Connectors and topics: the last record of each, by a hash aggregation (no sort of every record).
    records = status.filter(F.col("valid_key") & ~F.col("garbled") & (F.col("kind") != "task"))
    position = F.struct("arrival", "partition", "offset")
    last = (records.groupBy("kind", "connector", "topic")
            .agg(F.max_by(F.struct(*fields, "tombstone"), position).alias("last")).select("last.*"))
    others = last.filter(~F.col("tombstone")).select(_canonical_key(F.col("kind")).alias("key"), *fields)
    # Tasks: what the cache holds after the task's last event (nothing after a deletion).
    last_tasks = tasks.filter(F.col("last") & ~F.col("cached.tombstone")).select(
        F.lit("task").alias("kind"), "cached.connector", "cached.task", F.lit(None).cast("string").alias("topic"),
        *[F.col(f"cached.{c}").alias(c) for c in _CACHED_FIELDS[2:-1]])
    latest = others.unionByName(last_tasks.select(_canonical_key(F.col("kind")).alias("key"), *fields))
    return latest.withColumn("date", snapshot_date if as_of_ms is not None else _date(F.col("timestamp")))


def _date(epoch_ms: Column) -> Column:
    """The UTC date of an epoch-milliseconds time (not the session's time zone)."""
    return F.date_from_unix_date(F.floor(epoch_ms / DAY_MS).cast("int"))


# ------------------------------------------------------------------------------------------ history topic


def parse_history_records(records: DataFrame) -> DataFrame:
    """Each history record decoded; ``garbled`` when it is not a valid status or outcome event."""
    value, utf8 = _text(records, "value")
    event = F.from_json(value, _HISTORY_SCHEMA, _JSON_OPTIONS)
    frame = records.select("partition", "offset", "timestamp", utf8.alias("utf8"), event.alias("e"))
    time = F.when(F.col("e.time").rlike(r"^-?[0-9]{1,18}$"), F.col("e.time").try_cast("long"))
    entity_ok = (F.col("e.kind").isin(HISTORY_KINDS) & F.col("e.key").isNotNull() & F.col("e.connector").isNotNull()
                 & ((F.col("e.kind") != "task") | F.col("e.task").isNotNull()))
    status_ok = (F.col("e.event") == "status") & (
        F.col("e.state").isin(STATES) | ((F.col("e.kind") == "topic") & F.col("e.state").isNull()))
    outcome_ok = ((F.col("e.event") == "outcome") & F.col("e.result").isin(OUTCOME_RESULTS)
                  & (F.coalesce(F.col("e.attempts"), F.lit(0)) >= 0))
    valid = F.col("utf8") & time.isNotNull() & entity_ok & (status_ok | outcome_ok)
    return frame.select(
        "partition", "offset", "timestamp", (~F.coalesce(valid, F.lit(False))).alias("garbled"),
        F.col("e.event").alias("event"), time.alias("time"), "e.key", "e.kind", "e.connector",
        F.when(F.col("e.kind") == "task", F.col("e.task")).alias("task"), "e.topic", "e.state", "e.result",
        "e.attempts", "e.error", "e.latency_ms", "e.worker_id", "e.trace",
    )


def _timeline(history: DataFrame, as_of_ms: int | None, flap_window_ms: int) -> DataFrame:
    """Status events of connectors and tasks up to ``as_of_ms`` in time order per connector or task, with what
    every history output needs of the events around each one, from one sort of the events.

    Columns beside the event's: ``previous_state`` and ``next_time``; ``open_before`` (a FAILED episode is
    open when the event comes: a FAILED since the last RUNNING or DESTROYED), ``entry`` (this FAILED opens
    an episode), ``opened`` (the open episode's entry: time, worker, trace), ``move`` (a state transition)
    and ``in_window`` (the transitions in ``(time - flap_window_ms, time]``).
    """
    events = history.filter(~F.col("garbled") & (F.col("event") == "status") & F.col("kind").isin("connector", "task"))
    if as_of_ms is not None:
        events = events.filter(F.col("time") <= as_of_ms)
    entity = ("kind", "connector", "task")
    order = Window.partitionBy(*entity).orderBy("time", "partition", "offset")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    # The flapping window orders by time alone: a prefix of the order above, so the same sort serves it.
    recent = Window.partitionBy(*entity).orderBy("time").rangeBetween(-(flap_window_ms - 1), 0)
    position = F.struct("time", "partition", "offset")
    ends = F.col("state").isin(State.RUNNING.value, State.DESTROYED.value)
    failed = F.col("state") == State.FAILED.value
    marked = events.select(
        *entity, "state", "time", "partition", "offset", "worker_id", "trace",
        F.lag("state").over(order).alias("previous_state"), F.lead("time").over(order).alias("next_time"),
        F.max(F.when(failed, position)).over(before).alias("last_failed"),
        F.max(F.when(ends, position)).over(before).alias("last_end"),
    )
    open_before = F.col("last_failed").isNotNull() & (F.col("last_end").isNull()
                                                      | (F.col("last_failed") > F.col("last_end")))
    marked = marked.select(
        *[c for c in marked.columns if c not in ("last_failed", "last_end")], open_before.alias("open_before"),
        (failed & ~open_before).alias("entry"),
        (F.col("previous_state").isNotNull() & (F.col("previous_state") != F.col("state"))).alias("move"))
    entry = F.struct("time", "partition", "offset", "worker_id", "trace")
    return marked.select(
        "*", F.max(F.when(F.col("entry"), entry)).over(before).alias("opened"),
        F.count(F.when(F.col("move"), 1)).over(recent).alias("in_window"))


def _state_durations(timeline: DataFrame, as_of_ms: int | None) -> DataFrame:
    """Milliseconds in each state per connector/task and UTC day (intervals are split at midnight; the time
    between a deletion and a re-creation counts in no state)."""
    end = F.col("next_time") if as_of_ms is None else F.coalesce(F.col("next_time"), F.lit(as_of_ms))
    intervals = timeline.select("kind", "connector", "task", "state", F.col("time").alias("start"), end.alias("end"))
    # After a deletion the connector or task does not exist: that time is in no state.
    intervals = intervals.filter((F.col("end") > F.col("start")) & (F.col("state") != State.DESTROYED.value))
    day = F.explode(F.sequence(F.floor(F.col("start") / DAY_MS), F.floor((F.col("end") - 1) / DAY_MS))).alias("day")
    split = intervals.select("*", day)
    overlap = (F.least(F.col("end"), (F.col("day") + 1) * DAY_MS) - F.greatest(F.col("start"), F.col("day") * DAY_MS))
    return (split.groupBy(F.date_from_unix_date(F.col("day").cast("int")).alias("date"), "kind", "connector",
                          "task", "state")
            .agg(F.sum(overlap).alias("duration_ms")))


def _episodes(timeline: DataFrame) -> DataFrame:
    """FAILED episodes: from an entry into FAILED to the next RUNNING (recovered) or DESTROYED (deleted while
    failed: not recovered). A FAILED again before either, after a restart that did not help, is the same
    episode, so time to recovery is counted once per outage. Each with the worker and the first line of the
    trace of the FAILED that opened it."""
    ends = F.col("state").isin(State.RUNNING.value, State.DESTROYED.value)
    # An episode ends at the event that closes it, or is still open after the last event.
    closes = ends & F.col("open_before")
    still_open = F.col("next_time").isNull() & ((F.col("state") == State.FAILED.value)
                                                | (F.col("open_before") & ~ends))
    episodes = timeline.filter(closes | still_open)
    opened = F.when(closes | ~F.col("entry"), F.col("opened")).otherwise(
        F.struct("time", "partition", "offset", "worker_id", "trace"))
    recovered = F.when(closes & (F.col("state") == State.RUNNING.value), F.col("time"))
    episodes = episodes.select("kind", "connector", "task", opened.alias("o"), recovered.alias("recovered_ms"))
    return episodes.select(_date(F.col("o.time")).alias("date"), "kind", "connector", "task",
                           F.col("o.time").alias("failed_ms"), "recovered_ms",
                           (F.col("recovered_ms") - F.col("o.time")).alias("time_to_recovery_ms"),
                           F.col("o.worker_id").alias("worker_id"), first_line(F.col("o.trace")).alias("failure"))


def first_line(trace: Column) -> Column:
    """The first line of a trace (Java's exception and message), trimmed; null for none."""
    line = F.trim(F.regexp_extract(trace, r"^([^\r\n]*)", 1))
    return F.when(line != "", line)


def _mttr(episodes: DataFrame, snapshot_date: Column, as_of_ms: int | None) -> DataFrame:
    """Per connector/task over the whole input: FAILED episodes, recovered or not, and the mean and percentiles
    (p50, p90, p99, exact) of the time to recovery."""
    summary = episodes.groupBy("kind", "connector", "task").agg(
        F.count(F.lit(1)).alias("failed_episodes"),
        F.count("recovered_ms").alias("recovered"),
        F.count_if(F.col("recovered_ms").isNull()).alias("unrecovered"),
        F.avg("time_to_recovery_ms").alias("mttr_ms"),
        F.max("failed_ms").alias("last_failed_ms"),
        F.percentile("time_to_recovery_ms", F.array(*[F.lit(q) for q in MTTR_PERCENTILES])).alias("ttr"),
    )
    summary = summary.select(
        *[c for c in summary.columns if c != "ttr"],
        *[F.col("ttr")[i].alias(f"ttr_p{round(q * 100)}_ms") for i, q in enumerate(MTTR_PERCENTILES)])
    return summary.withColumn("date", snapshot_date if as_of_ms is not None else _date(F.col("last_failed_ms")))


def _flapping(timeline: DataFrame, transitions: int) -> DataFrame:
    """Connectors and tasks with more than ``transitions`` state changes inside the flapping window, per day."""
    flapping = timeline.filter(F.col("move") & (F.col("in_window") > transitions))
    return flapping.groupBy(_date(F.col("time")).alias("date"), "kind", "connector", "task").agg(
        F.max("in_window").alias("max_transitions_in_window"),
        F.count(F.lit(1)).alias("flapping_transitions"),
        F.min("time").alias("first_flapping_ms"),
        F.max("time").alias("last_flapping_ms"),
    )


def retained(status_records: DataFrame, history_records: DataFrame, latest: DataFrame, from_ms: int,
             flap_window_ms: int) -> DataFrame:
    """The raw records of both inputs that an analysis whose dated outputs start at ``from_ms`` needs, and that
    keep ``latest`` what it is:

    - history: events from ``from_ms`` on, and from ``flap_window_ms`` before it (the flapping window); and per
      connector or task, every status event from its last RUNNING or deletion before that (its state then, and
      a FAILED episode open then, whole);
    - status: records from ``from_ms`` on; of the older ones, the last of each key and those the cache holds
      (``latest``), so that the cache read from them is the one read from everything.
    """
    events = parse_history_records(history_records)
    start = from_ms - flap_window_ms
    entity = Window.partitionBy("kind", "connector", "task")
    changes = ~F.col("garbled") & (F.col("event") == "status") & F.col("kind").isin("connector", "task")
    ends = F.col("state").isin(State.RUNNING.value, State.DESTROYED.value)
    anchor = F.max(F.when(changes & ends & (F.col("time") < start), F.col("time"))).over(entity)
    keep = (F.when(changes, F.col("time") >= F.coalesce(anchor, F.lit(_LONG_MIN)))
            .when(~F.col("garbled"), F.col("time") >= from_ms).otherwise(F.col("timestamp") >= from_ms))
    needed = events.select("partition", "offset", keep.alias("keep")).filter("keep").drop("keep")
    kept_history = history_records.join(needed, ["partition", "offset"], "left_semi")
    last = F.max("offset").over(Window.partitionBy("partition", "key"))
    cached = latest.select("partition", "offset", F.lit(True).alias("_cached"))
    kept_status = (status_records.withColumn("_last", last).join(cached, ["partition", "offset"], "left")
                   .filter((F.col("timestamp") >= from_ms) | (F.col("offset") == F.col("_last"))
                           | F.col("_cached").isNotNull())
                   .drop("_last", "_cached"))
    return kept_status.unionByName(kept_history)


def _retry_outcomes(history: DataFrame, as_of_ms: int | None) -> DataFrame:
    """How writes ended in the retry queue, per UTC day, kind and result."""
    outcomes = history.filter(~F.col("garbled") & (F.col("event") == "outcome"))
    if as_of_ms is not None:
        outcomes = outcomes.filter(F.col("time") <= as_of_ms)
    latency = F.percentile_approx("latency_ms", [0.5, 0.95, 0.99])
    summary = (outcomes.groupBy(_date(F.col("time")).alias("date"), "kind", "result")
               .agg(F.count(F.lit(1)).alias("count"), F.avg("attempts").alias("mean_attempts"),
                    F.max("attempts").alias("max_attempts"), F.count("error").alias("with_error"),
                    latency.alias("latency")))
    return summary.select("date", "kind", "result", "count", "mean_attempts", "max_attempts", "with_error",
                          *[F.col("latency")[i].alias(f"latency_p{p}_ms") for i, p in enumerate((50, 95, 99))])
