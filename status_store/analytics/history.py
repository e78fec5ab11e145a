"""The history topic's outputs as DataFrame and SQL expressions: time in each state, FAILED episodes and time to
recovery (MTTR), flapping, retry outcomes, and the sidecar's restarts (per connector and task, and time to recovery
with and without one), from the events the service writes as statuses change, writes end and restarts are sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..connect.model import State
from .latest import DAY_MS, JSON_OPTIONS, STATES, text_column, utc_date

OUTCOME_RESULTS = ["written", "failed", "superseded"]


#: How a restart request went (``status_store.act.plan.Result``, which the analytics may not import).
RESTART_RESULTS = ["restarted", "rebalancing", "unreachable", "refused", "not-found", "unauthorized", "tls-failed"]


MTTR_PERCENTILES = (0.5, 0.9, 0.99)


ENTITY = ["kind", "connector", "task"]


HISTORY_KINDS = ["connector", "task", "topic"]


#: The event columns a timeline passes on for the tails of an incremental run (``incremental.tails``).
EVENT_COLUMNS = ["partition", "offset", "worker_id", "failure"]


# The fields the analytics read or check (JSON's other fields are skipped unread: a third less parsing at 1M events).
_HISTORY_SCHEMA = ", ".join([
    "event string", "time string", "key string", "kind string", "connector string", "task long", "state string",
    "worker_id string", "trace string", "result string", "attempts long", "error string", "latency_ms long",
    "attempt long", "failed_at long",
])




def parse_history_records(records: DataFrame) -> DataFrame:
    """Each history record decoded (of a trace, its first line: ``failure``); ``garbled`` when it is not a valid
    status, outcome or restart event. A restart's ``anchor`` is when the sidecar read the FAILED it answers
    (``failed_at``, else its ``time``)."""
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
    # A restart is of a connector or a task, numbered from 1, with a known result.
    restart_ok = ((F.col("e.event") == "restart") & F.col("e.kind").isin("connector", "task")
                  & F.col("e.result").isin(RESTART_RESULTS) & (F.coalesce(F.col("e.attempt"), F.lit(1)) >= 1))
    valid = F.col("utf8") & time.isNotNull() & entity_ok & (status_ok | outcome_ok | restart_ok)
    return frame.select(
        "partition", "offset", "timestamp", (~F.coalesce(valid, F.lit(False))).alias("garbled"),
        F.col("e.event").alias("event"), time.alias("time"), "e.kind", "e.connector",
        F.when(F.col("e.kind") == "task", F.col("e.task")).alias("task"), "e.state", "e.result",
        "e.attempts", "e.error", "e.latency_ms", "e.worker_id", first_line(F.col("e.trace")).alias("failure"),
        "e.attempt", F.coalesce(F.col("e.failed_at"), time).alias("anchor"),
    )


def timeline(history: DataFrame, as_of_ms: int | None, flap_window_ms: int, passed: Sequence[str] = ()) -> DataFrame:
    """Status events of connectors and tasks up to ``as_of_ms`` in time order per connector or task, with what
    every history output needs of the events around each one, from one sort of the events.

    Columns: the connector or task (``kind``, ``connector``, ``task``), the event's ``state`` and ``time``,
    ``next_time`` (the next event's), ``move`` (a state transition), ``in_window`` (the transitions in
    ``(time - flap_window_ms, time]``), and ``episode`` on the event that ends a FAILED episode or leaves it open
    (null on the others): the FAILED that opened it (``opened``: time, position, worker, failure) and
    ``recovered_ms``; and the event's columns named in ``passed``.
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
    own = ["state", "time", "partition", "offset", "worker_id", "failure"]
    own += [c for c in passed if c not in own]
    marked = events.select(
        *entity, *own,
        F.lag("state").over(order).alias("previous_state"), F.lead("time").over(order).alias("next_time"),
        F.max(F.when(failed, position)).over(before).alias("last_failed"),
        F.max(F.when(ends, position)).over(before).alias("last_end"),
    )
    # A FAILED episode is open when the event comes: a FAILED since the last RUNNING or DESTROYED.
    open_before = F.col("last_failed").isNotNull() & (F.col("last_end").isNull()
                                                      | (F.col("last_failed") > F.col("last_end")))
    # An episode ends at the event that closes it, or is still open after the last event.
    closes = ends & open_before
    still_open = F.col("next_time").isNull() & (failed | (open_before & ~ends))
    marked = marked.select(
        *entity, *own, "next_time", (failed & ~open_before).alias("entry"), closes.alias("closes"),
        (closes | still_open).alias("ends_episode"),
        (F.col("previous_state").isNotNull() & (F.col("previous_state") != F.col("state"))).alias("move"))
    this = F.struct("time", "partition", "offset", "worker_id", "failure")
    opened = F.when(F.col("closes") | ~F.col("entry"), F.max(F.when(F.col("entry"), this)).over(before)).otherwise(this)
    recovered = F.when(F.col("closes") & (F.col("state") == State.RUNNING.value), F.col("time"))
    ended = F.when(F.col("closes"), F.col("time"))
    episode = F.when(F.col("ends_episode"), F.struct(opened.alias("opened"), recovered.alias("recovered_ms"),
                                                     ended.alias("ended_ms")))
    return marked.select(*entity, "state", "time", "next_time", "move", episode.alias("episode"),
                         F.count(F.when(F.col("move"), 1)).over(recent).alias("in_window"),
                         *[c for c in passed if c not in ("state", "time")])


def state_durations(timeline: DataFrame, as_of_ms: int | None, weight: Column | None = None) -> DataFrame:
    """Milliseconds in each state per connector/task and UTC day (intervals are split at midnight; the time
    between a deletion and a re-creation counts in no state). Each event's interval counts ``weight`` times (once by
    default; an incremental run takes an interval back with -1)."""
    end = F.col("next_time") if as_of_ms is None else F.coalesce(F.col("next_time"), F.lit(as_of_ms))
    intervals = timeline.select("kind", "connector", "task", "state", F.col("time").alias("start"), end.alias("end"),
                                (F.lit(1) if weight is None else weight).alias("weight"))
    # After a deletion the connector or task does not exist: that time is in no state.
    intervals = intervals.filter((F.col("end") > F.col("start")) & (F.col("state") != State.DESTROYED.value))
    day = F.explode(F.sequence(F.floor(F.col("start") / DAY_MS), F.floor((F.col("end") - 1) / DAY_MS))).alias("day")
    split = intervals.select("*", day)
    overlap = (F.least(F.col("end"), (F.col("day") + 1) * DAY_MS) - F.greatest(F.col("start"), F.col("day") * DAY_MS))
    return (split.groupBy(F.date_from_unix_date(F.col("day").cast("int")).alias("date"), "kind", "connector",
                          "task", "state")
            .agg(F.sum(overlap * F.col("weight")).alias("duration_ms")))


def failed_episodes(timeline: DataFrame, history: DataFrame, as_of_ms: int | None,
                    carried: DataFrame | None = None) -> DataFrame:
    """FAILED episodes: from an entry into FAILED to the next RUNNING (recovered) or DESTROYED (deleted while
    failed: not recovered). A FAILED again before either, after a restart that did not help, is the same
    episode, so time to recovery is counted once per outage. Each with the worker and the first line of the
    trace of the FAILED that opened it, and ``restarts``: the sidecar's restarts of its connector or task in it
    (``episode_restarts``, those of ``history`` up to ``as_of_ms``), plus those ``carried`` counts for it (entity,
    ``failed_ms``, ``restarts``)."""
    opened, recovered = F.col("episode.opened"), F.col("episode.recovered_ms")
    episodes = timeline.filter(F.col("episode").isNotNull()).select(
        utc_date(opened["time"]).alias("date"), "kind", "connector", "task", opened["time"].alias("failed_ms"),
        recovered.alias("recovered_ms"), (recovered - opened["time"]).alias("time_to_recovery_ms"),
        opened["worker_id"].alias("worker_id"), opened["failure"].alias("failure"),
        F.col("episode.ended_ms").alias("ended_ms"))
    counts = episode_restarts(episodes, restart_events(history, as_of_ms))
    if carried is not None:
        counts = counts.unionByName(carried).groupBy(*ENTITY, "failed_ms").agg(F.sum("restarts").alias("restarts"))
    return join_on(episodes, counts, [*ENTITY, "failed_ms"], "left").select(
        "date", *ENTITY, "failed_ms", "recovered_ms", "time_to_recovery_ms", "worker_id", "failure",
        F.coalesce(F.col("restarts"), F.lit(0)).alias("restarts"))


def restart_events(history: DataFrame, as_of_ms: int | None) -> DataFrame:
    """The valid restart events up to ``as_of_ms``."""
    restarts = history.filter(~F.col("garbled") & (F.col("event") == "restart"))
    return restarts if as_of_ms is None else restarts.filter(F.col("time") <= as_of_ms)


def episode_restarts(episodes: DataFrame, restarts: DataFrame) -> DataFrame:
    """Per episode (entity, ``failed_ms``), the ``restarts`` of its connector or task sent while it was open: whose
    ``anchor`` (when the sidecar read the FAILED) is at or after the FAILED that opened it and, for an episode that
    ended, at or before the RUNNING or deletion that ended it. Episodes without one have no row."""
    inside = (F.col("anchor") >= F.col("failed_ms")) & (F.col("ended_ms").isNull()
                                                         | (F.col("anchor") <= F.col("ended_ms")))
    return (join_on(episodes.select(*ENTITY, "failed_ms", "ended_ms"), restarts.select(*ENTITY, "anchor"), ENTITY,
                    "inner").filter(inside)
            .groupBy(*ENTITY, "failed_ms").agg(F.count(F.lit(1)).alias("restarts")))


def join_on(left: DataFrame, right: DataFrame, columns: Sequence[str], how: str) -> DataFrame:
    """``left`` joined with ``right`` on ``columns``, nulls equal (a connector's ``task`` is null); of ``right``,
    its other columns. (Its key columns are renamed first: both sides may come from the same frame.)"""
    renamed = right.select(*[F.col(c).alias(f"_right_{c}") if c in columns else F.col(c) for c in right.columns])
    condition = reduce(lambda a, b: a & b, [F.col(c).eqNullSafe(F.col(f"_right_{c}")) for c in columns])
    joined = left.join(renamed, condition, how)
    return joined.drop(*[f"_right_{c}" for c in columns]) if how in ("inner", "left", "outer") else joined


def restarts(history: DataFrame, as_of_ms: int | None) -> DataFrame:
    """The sidecar's restart requests per UTC day, connector or task, and result: how many, the highest
    ``attempt``, the first and the last."""
    return (restart_events(history, as_of_ms)
            .groupBy(utc_date(F.col("time")).alias("date"), *ENTITY, "result")
            .agg(F.count(F.lit(1)).alias("restarts"), F.max("attempt").alias("max_attempt"),
                 F.min("time").alias("first_ms"), F.max("time").alias("last_ms")))


def first_line(trace: Column) -> Column:
    """The first line of a trace (Java's exception and message), trimmed; null for none."""
    line = F.trim(F.regexp_extract(trace, r"^([^\r\n]*)", 1))
    return F.when(line != "", line)


def mttr(episodes: DataFrame, snapshot_date: Column, as_of_ms: int | None,
         groups: Sequence[str] = ("kind", "connector", "task")) -> DataFrame:
    """Per connector/task (or per ``groups``) over the whole input: FAILED episodes, recovered or not, and the mean
    and percentiles (p50, p90, p99, exact) of the time to recovery.

    The percentiles are Spark's ``percentile`` (linear interpolation between the two closest ranks), computed from
    each connector's or task's episodes ranked by their time to recovery: one sort within the shuffle that groups
    them, then an aggregation that keeps the two values around each percentile's position (``percentile`` itself
    buffers every value of every group in an object aggregation, which falls back to sorting when groups are many).
    """
    ttr = F.col("time_to_recovery_ms")
    entity = list(groups)
    by_time = Window.partitionBy(*entity).orderBy(ttr.asc_nulls_last())
    ranked = episodes.select(
        *entity, "failed_ms", "recovered_ms", ttr, F.row_number().over(by_time).alias("rank"),
        F.count(ttr).over(by_time.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("n"))
    positions = [(F.col("n") - 1) * F.lit(q) for q in MTTR_PERCENTILES]
    around = [F.max(F.when(F.col("rank") == bound(position) + 1, ttr)).alias(f"{side}_{i}")
              for i, position in enumerate(positions) for side, bound in (("lower", F.floor), ("higher", F.ceil))]
    summary = ranked.groupBy(*entity).agg(
        F.count(F.lit(1)).alias("failed_episodes"),
        F.count("recovered_ms").alias("recovered"),
        F.count_if(F.col("recovered_ms").isNull()).alias("unrecovered"),
        F.avg(ttr).alias("mttr_ms"),
        F.max("failed_ms").alias("last_failed_ms"),
        *around,
    )
    percentiles = [_interpolated(F.col("recovered"), F.col(f"lower_{i}"), F.col(f"higher_{i}"), q)
                   .alias(f"ttr_p{round(q * 100)}_ms") for i, q in enumerate(MTTR_PERCENTILES)]
    summary = summary.select(*entity, "failed_episodes", "recovered", "unrecovered", "mttr_ms", "last_failed_ms",
                             *percentiles)
    return summary.withColumn("date", snapshot_date if as_of_ms is not None else utc_date(F.col("last_failed_ms")))


def recovery(episodes: DataFrame, snapshot_date: Column, as_of_ms: int | None) -> DataFrame:
    """Time to recovery of connectors' and of tasks' FAILED episodes with a restart of the sidecar in them
    (``restarted``) and without: ``mttr``'s columns per kind and ``restarted``."""
    return mttr(episodes.withColumn("restarted", F.col("restarts") > 0), snapshot_date, as_of_ms,
                ("kind", "restarted"))


def _interpolated(count: Column, lower_value: Column, higher_value: Column, q: float) -> Column:
    """The ``q`` percentile of ``count`` values from the values at the ranks around its position: Spark's
    ``percentile``, term for term (so the same doubles)."""
    position = (count - 1) * F.lit(q)
    lower, higher = F.floor(position), F.ceil(position)
    return (F.when((lower == higher) | (lower_value == higher_value), lower_value.cast("double"))
            .otherwise((higher - position) * lower_value + (position - lower) * higher_value))


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
