"""Incremental ``--since`` runs that analyse only what is new: each connector's or task's history continues from its
*tail*, and the outputs of the days the new events touch are the earlier outputs of those days with what the new
events change (exactly what one run over everything gives).

Besides the raw records (``_state/records/``), a ``--since`` run keeps

- the **tails** (``_state/tails/<run>/``): per connector or task, the status events a timeline continues from: the
  last one, those from the last one at least a flapping window before it on (the window's transitions, and the
  state before its first), and the FAILED that opened an episode still open after the last; and
- the **outcome events** (``_state/outcomes/<run>/``, narrow, by date): the retry outcomes of a day have approximate
  percentiles, which do not add up, so a day with new outcomes is computed again from all of its outcomes.

A run continues from them (``continue_analysis``) when its checkpoint has them, it is as of its newest event (no
``--as-of``), the flapping settings and the retention start are those of the run before, and no new status event
of a connector or task comes before that one's tail, and no new restart was sent before it but in the episode the tail
left open (a late event); otherwise it analyses every kept record, as
before. Continuing, the new events' timeline is the tails' and theirs, from one sort of those few rows; then

- time in each state: the earlier rows of the days touched, plus the new events' intervals and the tail's new one,
  minus the tail's interval until the earlier as-of (which the earlier run counted): integers, so exact;
- FAILED episodes: the earlier ones, but the one a tail left open when its connector or task has new events (the new
  timeline ends it, or leaves it open again, with the restarts counted in it so far), plus the new ones; MTTR, and
  time to recovery with and without a restart, over them all;
- flapping: the earlier rows of the days touched merged with the new transitions' (the most in a window, counts,
  first and last: a transition's window looks back only, so the earlier ones do not change);
- retry outcomes: each day with new outcomes from all of its outcome events;
- restarts: the earlier rows of the days touched merged with the new restarts' (counts, first and last);
- the latest statuses and the counters of the status topic from every kept status record (few; a compacted topic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..connect.model import State
from .analysis import Analysis, Intermediates, assemble, input_counters
from .history import (
    EVENT_COLUMNS,
    failed_episodes,
    flapping,
    join_on,
    restarts,
    retry_outcomes,
    state_durations,
    timeline,
)
from .latest import LONG_MIN, parse_status_records, task_cache, utc_date, with_arrival

ENTITY = ["kind", "connector", "task"]
#: A tail's columns: the event's, whether it is the last of its connector or task (``tail``), and the time of the
#: FAILED that opened the episode still open after it (``open_ms``, on every row of the connector or task).
TAIL_SCHEMA = ("kind string, connector string, task long, state string, time long, partition int, offset long, "
               "worker_id string, failure string, tail boolean, open_ms long")
OUTCOME_SCHEMA = "time long, kind string, result string, attempts long, error string, latency_ms long, date date"
#: The history counters an incremental run adds to (the status topic's are counted again from its kept records).
HISTORY_COUNTERS = ("history_records", "history_garbled", "history_status_events", "history_outcome_events",
                    "history_restart_events")


def tails(line: DataFrame, flap_window_ms: int) -> DataFrame:
    """The tails of a timeline made with ``passed=EVENT_COLUMNS`` (``TAIL_SCHEMA``)."""
    whole = Window.partitionBy(*ENTITY)
    last_time = F.max("time").over(whole)
    before_window = F.max(F.when(F.col("time") <= last_time - flap_window_ms, F.col("time"))).over(whole)
    last = F.col("next_time").isNull()
    still_open = last & F.col("episode").isNotNull() & ~F.col("state").isin(State.RUNNING.value,
                                                                              State.DESTROYED.value)
    open_ms = F.max(F.when(still_open, F.col("episode.opened.time"))).over(whole)
    marked = line.drop("carried", "tail").select(
        "*", (F.col("time") >= F.coalesce(before_window, F.lit(LONG_MIN))).alias("carry"), last.alias("tail"),
        open_ms.alias("open_ms"), still_open.alias("still_open"))
    events = marked.filter("carry").select(*ENTITY, "state", "time", *EVENT_COLUMNS, "tail", "open_ms")
    # The FAILED that opened an episode still open, when it is not among them (from the last event's episode).
    opened = F.col("episode.opened")
    entries = marked.filter(F.col("still_open") & ((opened["partition"] != F.col("partition"))
                                                    | (opened["offset"] != F.col("offset")))).select(
        *ENTITY, F.lit(State.FAILED.value).alias("state"),
        *[opened[name].alias(name) for name in ("time", *EVENT_COLUMNS)], F.lit(False).alias("tail"), "open_ms")
    # The entry may be in the window already: each event once.
    return events.unionByName(entries).dropDuplicates([*ENTITY, "partition", "offset"])


def outcome_events(history: DataFrame, as_of_ms: int | None) -> DataFrame:
    """The valid outcome events up to ``as_of_ms``, with what the retry outcomes read (``OUTCOME_SCHEMA``)."""
    outcomes = history.filter(~F.col("garbled") & (F.col("event") == "outcome"))
    if as_of_ms is not None:
        outcomes = outcomes.filter(F.col("time") <= as_of_ms)
    return outcomes.select("time", "kind", "result", "attempts", "error", "latency_ms",
                           utc_date(F.col("time")).alias("date"))


@dataclass(frozen=True)
class Carried:
    """What the run before left for this one to continue from."""

    as_of_ms: int
    #: The history counters so far.
    counters: dict[str, int]
    tails: DataFrame
    outcomes: DataFrame
    #: The outputs as the run before committed them (``--out``).
    out: str


def continuation(tails_frame: DataFrame, history: DataFrame) -> tuple[int | None, int]:
    """Of new history events (parsed: ``parse_history_records``): the newest valid one's time, and how many are late
    (a run cannot continue from the tails then): status events of connectors and tasks that come before their one's
    tail, and restarts anchored at or before it, unless in the episode the tail left open (the earlier outputs
    counted the restarts of the episodes that ended). One Spark job."""
    last = tails_frame.filter("tail").select(*ENTITY, F.struct("time", "partition", "offset").alias("last"),
                                             "open_ms")
    status = ~F.col("garbled") & (F.col("event") == "status") & F.col("kind").isin("connector", "task")
    restart = ~F.col("garbled") & (F.col("event") == "restart")
    in_open_episode = F.coalesce(F.col("anchor") >= F.col("open_ms"), F.lit(False))
    late_restart = restart & (F.col("anchor") <= F.col("last.time")) & ~in_open_episode
    found = join_on(history, last, ENTITY, "left").agg(
        F.max(F.when(~F.col("garbled"), F.col("time"))),
        F.count_if(status & (F.struct("time", "partition", "offset") <= F.col("last")))
        + F.count_if(F.coalesce(late_restart, F.lit(False)))).first()
    assert found is not None  # a global aggregation has one row
    return found[0], int(found[1])


def continue_analysis(spark: SparkSession, status_records: DataFrame, history: DataFrame, carried: Carried,
                      *, flap_transitions: int, flap_window_ms: int, from_ms: int | None) -> Analysis:
    """The analysis of everything so far from the tails, the kept status records and the new history events
    (``history``: parsed, without the record timestamps; kept until ``Analysis.unpersist``): the outputs hold the
    days the new records touch (and the snapshots), each whole."""
    status = with_arrival(parse_status_records(status_records)).drop("key").persist(StorageLevel.MEMORY_AND_DISK)
    tasks = task_cache(status).persist(StorageLevel.MEMORY_AND_DISK)
    counters, newest = input_counters(status, tasks, history)
    for name in HISTORY_COUNTERS:
        counters[name] += carried.counters.get(name, 0)
    as_of_ms = max(carried.as_of_ms, newest if newest is not None else carried.as_of_ms)
    snapshot_date = utc_date(F.lit(as_of_ms).cast("long"))
    earlier = carried.tails.select(*ENTITY, "state", "time", *EVENT_COLUMNS, F.lit(False).alias("garbled"),
                                   F.lit("status").alias("event"), F.lit(True).alias("carried"), "tail")
    new = history.select(*ENTITY, "state", "time", *EVENT_COLUMNS, "garbled", "event",
                         F.lit(False).alias("carried"), F.lit(False).alias("tail"))
    line = timeline(earlier.unionByName(new), as_of_ms, flap_window_ms,
                    passed=[*EVENT_COLUMNS, "carried", "tail"]).persist(StorageLevel.MEMORY_AND_DISK)
    fresh = line.filter(~F.col("carried"))

    def dated(frame: DataFrame) -> DataFrame:
        return frame if from_ms is None else frame.filter(F.col("date") >= utc_date(F.lit(from_ms).cast("long")))

    # FAILED episodes: the earlier ones but the one a tail left open where new events continue it, and the new ones.
    touched = fresh.select(*ENTITY).distinct()
    reopened = carried.tails.filter("tail AND open_ms IS NOT NULL").select(*ENTITY, F.col("open_ms").alias("failed_ms"))
    reopened = join_on(reopened, touched, ENTITY, "left_semi")
    before = _earlier(spark, carried.out, "episodes", failed_episodes(fresh, history, as_of_ms))
    if from_ms is not None:
        before = before.filter(F.col("date") >= utc_date(F.lit(from_ms).cast("long")))
    # The restarts counted so far in an episode a tail left open.
    counted = join_on(before, reopened, [*ENTITY, "failed_ms"], "left_semi").select(
        *ENTITY, "failed_ms", F.coalesce(F.col("restarts"), F.lit(0)).alias("restarts"))
    new_episodes = dated(failed_episodes(fresh, history, as_of_ms, counted))
    kept = join_on(before, reopened, [*ENTITY, "failed_ms"], "left_anti")
    episodes = kept.unionByName(new_episodes).persist(StorageLevel.MEMORY_AND_DISK)
    changed = _dates(new_episodes).unionByName(reopened.select(utc_date(F.col("failed_ms")).alias("date")))

    # Time in each state: the earlier days' rows, plus the new intervals and the tail's, minus the tail's until the
    # earlier as-of.
    gained = line.filter(~F.col("carried") | F.col("tail")).select(*ENTITY, "state", "time", "next_time",
                                                                   F.lit(1).alias("weight"))
    given_back = line.filter("tail").select(*ENTITY, "state", "time", F.lit(carried.as_of_ms).alias("next_time"),
                                            F.lit(-1).alias("weight"))
    delta = state_durations(gained.unionByName(given_back), as_of_ms, F.col("weight")).filter("duration_ms != 0")
    durations = _merged(spark, carried.out, "state_durations", delta, [*ENTITY, "state"],
                        [F.sum("duration_ms").alias("duration_ms")]).filter("duration_ms > 0")

    added = flapping(fresh, flap_transitions)
    flaps = _merged(spark, carried.out, "flapping", added, ENTITY, [
        F.max("max_transitions_in_window").alias("max_transitions_in_window"),
        F.sum("flapping_transitions").alias("flapping_transitions"),
        F.min("first_flapping_ms").alias("first_flapping_ms"), F.max("last_flapping_ms").alias("last_flapping_ms")])

    # Retry outcomes: each day with new outcomes, from all of that day's.
    new_outcomes = outcome_events(history, as_of_ms)
    days = _dates(new_outcomes)
    outcomes = carried.outcomes.join(days, "date", "left_semi").unionByName(new_outcomes)
    as_history = outcomes.select(F.lit(False).alias("garbled"), F.lit("outcome").alias("event"), "*")

    added_restarts = restarts(history, as_of_ms)
    restart_rows = _merged(spark, carried.out, "restarts", added_restarts, [*ENTITY, "result"], [
        F.sum("restarts").alias("restarts"), F.max("max_attempt").alias("max_attempt"),
        F.min("first_ms").alias("first_ms"), F.max("last_ms").alias("last_ms")])

    return assemble(Intermediates(status, tasks, history, line, counters, as_of_ms, snapshot_date), episodes,
                    episodes.join(changed.distinct(), "date", "left_semi"), dated(durations), dated(flaps),
                    dated(retry_outcomes(as_history, as_of_ms)), dated(restart_rows), flap_transitions, flap_window_ms)


def _dates(frame: DataFrame) -> DataFrame:
    return frame.select("date").distinct()


def _earlier(spark: SparkSession, out: str, name: str, like: DataFrame) -> DataFrame:
    """An output as the runs before committed it (``like``: a frame of its columns)."""
    return spark.read.schema(like.schema).parquet(f"{out}/{name}")


def _merged(spark: SparkSession, out: str, name: str, added: DataFrame, keys: Sequence[str],
            aggregates: Sequence[Column]) -> DataFrame:
    """The days of ``added``, whole: the earlier rows of those days with ``added``'s, aggregated per day and
    ``keys``."""
    earlier = _earlier(spark, out, name, added).join(_dates(added), "date", "left_semi")
    return earlier.unionByName(added).groupBy("date", *keys).agg(*aggregates).select(*added.columns)
