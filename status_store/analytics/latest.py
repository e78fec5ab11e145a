"""The status topic's latest statuses, with exactly the read rules of ``connect.cache.StatusCache``, as DataFrame
and SQL expressions.

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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from pyspark.sql.window import WindowSpec

from ..connect.model import CONNECTOR_PREFIX, TASK_PREFIX, TOPIC_PREFIX, TOPIC_SEPARATOR, State

STATES = [state.value for state in State]
DAY_MS = 86_400_000
LONG_MIN = -(2**63)

_INT32 = 2**31


# The decimal digits of the Basic Multilingual Plane (what parse_key accepts in a task number, as Java's parseInt)
# mapped to ASCII ones.
_DECIMALS = "".join(chr(c) for c in range(0x80, 0x10000) if chr(c).isdecimal())


_DECIMAL_VALUES = "".join(str(int(c)) for c in _DECIMALS)


# Spark's JSON reader is Jackson: set as Connect's JsonDeserializer sets it (leading zeros allowed, nothing else).
JSON_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false", "allowNumericLeadingZeros": "true",
                 "mode": "PERMISSIVE"}


# Values are read twice: as text (numbers keep their exact spelling: 3 vs 3.0) and as variants (JSON
# types: 3 vs "3"); a field is an integer when both agree.
_VALUE_SCHEMA = ("state string, trace variant, worker_id variant, generation string, "
                 "topic struct<name variant, connector variant, task string, discoverTimestamp string>")


_VALUE_TYPES_SCHEMA = "generation variant, topic struct<task variant, discoverTimestamp variant>"


_STATUS_FIELDS = ["state", "worker_id", "generation", "trace"]


_CACHED_FIELDS = ["connector", "task", *_STATUS_FIELDS, "value", "partition", "offset", "timestamp", "tombstone"]


def text_column(frame: DataFrame, column: str) -> tuple[Column, Column]:
    """A column as text and whether it is valid UTF-8 (bytes are decoded, text is taken as it is)."""
    if isinstance(frame.schema[column].dataType, BinaryType):
        return F.col(column).cast("string"), F.is_valid_utf8(column)
    return F.col(column), F.lit(True)


def parse_status_records(records: DataFrame) -> DataFrame:
    """Each status record with its parsed key (``model.parse_key``) and decoded value (``codec``)."""
    key, _ = text_column(records, "key")
    value, utf8 = text_column(records, "value")
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
    frame = frame.select("*", F.from_json(json_text, _VALUE_SCHEMA, JSON_OPTIONS).alias("s"),
                         F.from_json(json_text, _VALUE_TYPES_SCHEMA, JSON_OPTIONS).alias("types"))
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


def with_arrival(status: DataFrame) -> DataFrame:
    """Each record with its ``arrival``: the newest timestamp of its partition up to it (see the module docstring)."""
    partition_order = (Window.partitionBy("partition").orderBy("offset")
                       .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return status.withColumn("arrival", F.max(F.coalesce(F.col("timestamp"), F.lit(LONG_MIN))).over(partition_order))


def _read_order(*identity: str) -> WindowSpec:
    """The records of one connector, task or topic status in read order."""
    return Window.partitionBy(*identity).orderBy("arrival", "partition", "offset")


def _canonical_key(kind: Column) -> Column:
    """The key Connect writes for a record's connector, task or topic (what the key names, in one spelling)."""
    return (F.when(kind == "connector", F.concat(F.lit(CONNECTOR_PREFIX), F.col("connector")))
            .when(kind == "task", F.concat(F.lit(TASK_PREFIX), F.col("connector"), F.lit("-"), F.col("task")))
            .otherwise(F.concat(F.lit(TOPIC_PREFIX), F.col("topic"), F.lit(TOPIC_SEPARATOR), F.col("connector"))))


def task_cache(status: DataFrame) -> DataFrame:
    """Every task record and deletion in read order: whether the stale-UNASSIGNED filter ``rejected`` it, and, on
    each task's last one, what the store's cache holds after it (``final``: the cached fields, or null on the other
    rows), nothing else (the frame is kept for the counters and ``latest_statuses``).

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
    last = F.lead(F.lit(1)).over(order).isNull()
    return events.select("rejected", F.when(last, F.last(kept, ignorenulls=True).over(running)).alias("final"))


def latest_statuses(status: DataFrame, tasks: DataFrame, snapshot_date: Column, as_of_ms: int | None) -> DataFrame:
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
    last_tasks = tasks.filter(F.col("final").isNotNull() & ~F.col("final.tombstone")).select(
        F.lit("task").alias("kind"), "final.connector", "final.task", F.lit(None).cast("string").alias("topic"),
        *[F.col(f"final.{c}").alias(c) for c in _CACHED_FIELDS[2:-1]])
    latest = others.unionByName(last_tasks.select(_canonical_key(F.col("kind")).alias("key"), *fields))
    return latest.withColumn("date", snapshot_date if as_of_ms is not None else utc_date(F.col("timestamp")))


def utc_date(epoch_ms: Column) -> Column:
    """The UTC date of an epoch-milliseconds time (not the session's time zone)."""
    return F.date_from_unix_date(F.floor(epoch_ms / DAY_MS).cast("int"))
