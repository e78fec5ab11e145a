"""The analytics, as DataFrame/SQL expressions (no Python UDF runs per record).

Two inputs, both in the raw record schema of ``records.RAW_SCHEMA`` (topic, partition, offset,
timestamp, key, value; ``value`` is text or bytes, null for a tombstone):

- the **status topic**: the latest status per key, with exactly the read rules of
  ``cache.StatusCache`` (keys as ``model.parse_key`` reads them, values as ``codec.decode_status``
  and ``codec.decode_topic_status`` decode them, tombstones, a connector tombstone deleting the
  connector's tasks, the stale-UNASSIGNED filter, garbled records skipped and counted);
- the **history topic**: time in each state, FAILED episodes and time to recovery, flapping, retry
  outcomes, and the sidecar's restarts (per connector and task, and time to recovery with and without
  one), from the events the service writes as statuses change, writes end and restarts are sent.

``latest`` (the status topic, Connect's read rules) and ``history`` (the history topic's outputs) hold the
expressions; this module runs them and holds the results.
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

from ..connect.model import State
from .history import (
    EVENT_COLUMNS,
    failed_episodes,
    flapping,
    mttr,
    parse_history_records,
    recovery,
    restarts,
    retry_outcomes,
    state_durations,
    timeline,
)
from .latest import LONG_MIN, latest_statuses, parse_status_records, task_cache, utc_date, with_arrival
from .options import FLAP_TRANSITIONS, FLAP_WINDOW_MS


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
    restarts: DataFrame
    recovery: DataFrame
    flap_transitions: int
    flap_window_ms: int
    _counters: dict[str, int] = field(repr=False)
    _persisted: list[DataFrame] = field(repr=False)
    #: The timeline (with the events' ``EVENT_COLUMNS`` when kept for an incremental run) and the parsed history.
    timeline: DataFrame | None = field(default=None, repr=False)
    history: DataFrame | None = field(default=None, repr=False)

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
                "episodes": self.episodes, "flapping": self.flapping, "retry_outcomes": self.retry_outcomes,
                "restarts": self.restarts, "recovery": self.recovery}

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
            from_ms: int | None = None, keep_events: bool = False) -> Analysis:
    """Build every result from the two inputs (the counters at once; the outputs lazily, as ``Analysis.write``
    or another action runs them).

    ``as_of_ms`` is the time of the analysis: history events after it are left out and the last
    state of each connector and task lasts until it. By default it is the newest valid history
    event's time. A task or connector is flapping when more than ``flap_transitions`` state
    transitions fall inside any ``flap_window_ms`` window. ``from_ms`` (a UTC midnight) says the history
    holds only what the days from it on need (``retained``): the dated outputs, and the episodes MTTR is
    over, are those of its day and later. ``keep_events``: the timeline keeps the events' ``EVENT_COLUMNS`` (an
    incremental run's tails are made from it).
    """
    if flap_transitions < 0 or flap_window_ms <= 0:
        raise ValueError(f"flapping needs transitions >= 0 and a window > 0 ms, got {flap_transitions} "
                         f"and {flap_window_ms}")
    # Parsed once, kept for the several outputs that read them (spilled to disk when memory is short): only the
    # columns later stages read (no key text, record timestamp or whole trace of history events).
    status = with_arrival(parse_status_records(status_records)).drop("key").persist(StorageLevel.MEMORY_AND_DISK)
    history = parse_history_records(history_records).drop("timestamp").persist(StorageLevel.MEMORY_AND_DISK)
    tasks = task_cache(status).persist(StorageLevel.MEMORY_AND_DISK)
    # The first action reads both inputs (each topic's records once) and counts them, the newest event's time
    # with them.
    counters, newest = input_counters(status, tasks, history)
    as_of_ms = newest if as_of_ms is None else as_of_ms
    snapshot_date = utc_date(F.lit(as_of_ms).cast("long")) if as_of_ms is not None else utc_date(F.col("timestamp"))
    line = timeline(history, as_of_ms, flap_window_ms, EVENT_COLUMNS if keep_events else ()).persist(
        StorageLevel.MEMORY_AND_DISK)

    def dated(frame: DataFrame) -> DataFrame:
        return frame if from_ms is None else frame.filter(F.col("date") >= utc_date(F.lit(from_ms).cast("long")))

    episodes = dated(failed_episodes(line, history, as_of_ms)).persist(StorageLevel.MEMORY_AND_DISK)
    return assemble(Intermediates(status, tasks, history, line, counters, as_of_ms, snapshot_date), episodes, episodes,
                    dated(state_durations(line, as_of_ms)), dated(flapping(line, flap_transitions)),
                    dated(retry_outcomes(history, as_of_ms)), dated(restarts(history, as_of_ms)),
                    flap_transitions, flap_window_ms)


@dataclass(frozen=True)
class Intermediates:
    """What a run's outputs are made from: the parsed status records and their task cache, the parsed history and its
    timeline (each persisted), the counters, and the time of the analysis."""

    status: DataFrame
    tasks: DataFrame
    history: DataFrame
    line: DataFrame
    counters: dict[str, int]
    as_of_ms: int | None
    snapshot_date: Column


def assemble(parts: Intermediates, episodes: DataFrame, written_episodes: DataFrame, state_durations: DataFrame,
             flapping: DataFrame, retry_outcomes: DataFrame, restarts: DataFrame, flap_transitions: int,
             flap_window_ms: int) -> Analysis:
    """The analysis of a full or an incremental run: the dated outputs as given, and the snapshots (the latest
    statuses; MTTR and time to recovery with and without a restart over every one of ``episodes``, of which the run
    writes ``written_episodes``)."""
    as_of_ms, snapshot_date = parts.as_of_ms, parts.snapshot_date
    return Analysis(
        as_of_ms=as_of_ms,
        latest=latest_statuses(parts.status, parts.tasks, snapshot_date, as_of_ms),
        state_durations=state_durations,
        episodes=written_episodes,
        mttr=mttr(episodes, snapshot_date, as_of_ms),
        flapping=flapping,
        retry_outcomes=retry_outcomes,
        restarts=restarts,
        recovery=recovery(episodes, snapshot_date, as_of_ms),
        flap_transitions=flap_transitions,
        flap_window_ms=flap_window_ms,
        _counters=parts.counters,
        _persisted=[parts.status, parts.history, parts.tasks, parts.line, episodes],
        timeline=parts.line,
        history=parts.history,
    )


def input_counters(status: DataFrame, tasks: DataFrame, history: DataFrame) -> tuple[dict[str, int], int | None]:
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
        F.count_if(~F.col("garbled") & (F.col("event") == "restart")).alias("history_restart_events"),
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


# ------------------------------------------------------------------------------------------ history topic


def retained(status_records: DataFrame, history_records: DataFrame, latest: DataFrame, from_ms: int,
             flap_window_ms: int) -> DataFrame:
    """The raw records of both inputs that an analysis whose dated outputs start at ``from_ms`` needs, and that
    keep ``latest`` what it is:

    - history: events from ``from_ms`` on, and from ``flap_window_ms`` before it (the flapping window); and per
      connector or task, every status event from its last RUNNING or deletion before that (its state then, and
      a FAILED episode open then, whole, with the restarts anchored in it);
    - status: records from ``from_ms`` on; of the older ones, the last of each key and those the cache holds
      (``latest``), so that the cache read from them is the one read from everything.
    """
    events = parse_history_records(history_records)
    start = from_ms - flap_window_ms
    entity = Window.partitionBy("kind", "connector", "task")
    changes = ~F.col("garbled") & (F.col("event") == "status") & F.col("kind").isin("connector", "task")
    ends = F.col("state").isin(State.RUNNING.value, State.DESTROYED.value)
    last_end = F.max(F.when(changes & ends & (F.col("time") < start), F.col("time"))).over(entity)
    # A restart counts in the episode open at its anchor: kept with that episode's events, and from from_ms on.
    restart = ~F.col("garbled") & (F.col("event") == "restart")
    since = F.coalesce(last_end, F.lit(LONG_MIN))
    keep = (F.when(changes, F.col("time") >= since)
            .when(restart, (F.col("time") >= from_ms) | (F.col("anchor") >= since))
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


