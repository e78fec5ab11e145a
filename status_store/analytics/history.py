"""The history topic's outputs as DataFrame and SQL expressions: time in each state, FAILED episodes and time to
recovery (MTTR), flapping, and retry outcomes, from the events the service writes as statuses change and writes end.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..connect.model import State
from .latest import DAY_MS, JSON_OPTIONS, STATES, text_column, utc_date

OUTCOME_RESULTS = ["written", "failed", "superseded"]


MTTR_PERCENTILES = (0.5, 0.9, 0.99)


HISTORY_KINDS = ["connector", "task", "topic"]


_HISTORY_SCHEMA = ", ".join([
    "event string", "time string", "sidecar string", "key string", "kind string", "connector string",
    "task long", "topic string", "state string", "worker_id string", "generation long", "trace string",
    "result string", "attempts long", "error string", "reason string", "latency_ms long",
])




def parse_history_records(records: DataFrame) -> DataFrame:
    """Each history record decoded; ``garbled`` when it is not a valid status or outcome event."""
    value, utf8 = text_column(records, "value")
    event = F.from_json(value, _HISTORY_SCHEMA, JSON_OPTIONS)
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


def timeline(history: DataFrame, as_of_ms: int | None, flap_window_ms: int) -> DataFrame:
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


def state_durations(timeline: DataFrame, as_of_ms: int | None) -> DataFrame:
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


def failed_episodes(timeline: DataFrame) -> DataFrame:
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
    return episodes.select(utc_date(F.col("o.time")).alias("date"), "kind", "connector", "task",
                           F.col("o.time").alias("failed_ms"), "recovered_ms",
                           (F.col("recovered_ms") - F.col("o.time")).alias("time_to_recovery_ms"),
                           F.col("o.worker_id").alias("worker_id"), first_line(F.col("o.trace")).alias("failure"))


def first_line(trace: Column) -> Column:
    """The first line of a trace (Java's exception and message), trimmed; null for none."""
    line = F.trim(F.regexp_extract(trace, r"^([^\r\n]*)", 1))
    return F.when(line != "", line)


def mttr(episodes: DataFrame, snapshot_date: Column, as_of_ms: int | None) -> DataFrame:
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
    return summary.withColumn("date", snapshot_date if as_of_ms is not None else utc_date(F.col("last_failed_ms")))


def flapping(timeline: DataFrame, transitions: int) -> DataFrame:
    """Connectors and tasks with more than ``transitions`` state changes inside the flapping window, per day."""
    flapping = timeline.filter(F.col("move") & (F.col("in_window") > transitions))
    return flapping.groupBy(utc_date(F.col("time")).alias("date"), "kind", "connector", "task").agg(
        F.max("in_window").alias("max_transitions_in_window"),
        F.count(F.lit(1)).alias("flapping_transitions"),
        F.min("time").alias("first_flapping_ms"),
        F.max("time").alias("last_flapping_ms"),
    )


def retry_outcomes(history: DataFrame, as_of_ms: int | None) -> DataFrame:
    """How writes ended in the retry queue, per UTC day, kind and result."""
    outcomes = history.filter(~F.col("garbled") & (F.col("event") == "outcome"))
    if as_of_ms is not None:
        outcomes = outcomes.filter(F.col("time") <= as_of_ms)
    latency = F.percentile_approx("latency_ms", [0.5, 0.95, 0.99])
    summary = (outcomes.groupBy(utc_date(F.col("time")).alias("date"), "kind", "result")
               .agg(F.count(F.lit(1)).alias("count"), F.avg("attempts").alias("mean_attempts"),
                    F.max("attempts").alias("max_attempts"), F.count("error").alias("with_error"),
                    latency.alias("latency")))
    return summary.select("date", "kind", "result", "count", "mean_attempts", "max_attempts", "with_error",
                          *[F.col("latency")[i].alias(f"latency_p{p}_ms") for i, p in enumerate((50, 95, 99))])
