"""History analytics on hand-built histories with known answers, and idempotent outputs."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from status_store.act.events import Restart
from status_store.act.plan import Due, Result, Target
from status_store.analytics.analysis import Analysis, analyze
from status_store.analytics.history import RESTART_RESULTS
from status_store.analytics.records import RAW_SCHEMA

DAY = datetime.date(2025, 11, 22)
D = 1_763_769_600_000  # 2025-11-22T00:00:00Z
AS_OF = D + 1_000_000
SCHEMA = "topic string, partition int, offset long, timestamp long, key string, value string"


def status(time: int, connector: str, state: str, task: int | None = 0, **extra: Any) -> dict[str, Any]:
    kind = "task" if task is not None else "connector"
    key = f"status-task-{connector}-{task}" if task is not None else f"status-connector-{connector}"
    return {"event": "status", "time": time, "sidecar": "host-a", "key": key, "kind": kind, "connector": connector,
            "task": task, "state": state, "worker_id": "w1:8083", "generation": 1, "trace": None, **extra}


def outcome(time: int, kind: str, result: str, attempts: int, latency_ms: int,
            error: str | None = None) -> dict[str, Any]:
    return {"event": "outcome", "time": time, "sidecar": "host-a", "key": "status-task-sink-0", "kind": kind,
            "connector": "sink", "task": 0 if kind == "task" else None, "state": "RUNNING", "result": result,
            "attempts": attempts, "error": error, "reason": result, "latency_ms": latency_ms}


def restart(time: int, connector: str, result: Result, attempt: int = 1, task: int | None = 0,
            failed_at: int | None = None) -> str:
    """The history event the sidecar's auto-restart writes (``Restart.history_event``), times in ms."""
    due = Due(Target(connector, task), "w1:8083", attempt, "java.lang.RuntimeException: boom",
              None if failed_at is None else failed_at / 1000)
    return Restart(due, result, time / 1000, 204 if result is Result.RESTARTED else None, None).history_event(
        "host-a").decode()


HISTORY: list[dict[str, Any] | str] = [
    status(D - 60_000, "sink", "RUNNING"),  # the day before, one minute to midnight
    status(D + 60_000, "sink", "FAILED"),  # episode 1
    status(D + 90_000, "sink", "FAILED"),  # still episode 1
    status(D + 120_000, "sink", "RESTARTING"),
    status(D + 150_000, "sink", "FAILED"),  # the restart did not help: still episode 1
    status(D + 300_000, "sink", "RUNNING"),  # episode 1 recovers
    status(D + 400_000, "sink", "FAILED", unknown_field=1),  # episode 2, not recovered
    status(D + 2_000_000, "sink", "RUNNING"),  # after as-of: left out
    status(D, "sink", "RUNNING", task=None),
    # Flapping: 7 transitions 10 s apart.
    *[status(D + i * 10_000, "flappy", "RUNNING" if i % 2 == 0 else "FAILED") for i in range(8)],
    outcome(D + 1, "task", "written", 1, 10),
    outcome(D + 2, "task", "written", 3, 30),
    outcome(D + 3, "task", "failed", 5, 1000, "REQUEST_TIMED_OUT"),
    outcome(D + 4, "connector", "superseded", 0, 5),
    # The sidecar's restarts: two in episode 1 (the first unanswered, sent again), one in episode 2, one of the
    # connector (no episode), one after as-of.
    restart(D + 61_000, "sink", Result.UNREACHABLE, failed_at=D + 60_500),
    restart(D + 70_000, "sink", Result.RESTARTED, failed_at=D + 60_500),
    restart(D + 401_000, "sink", Result.RESTARTED, attempt=2, failed_at=D + 400_000),
    restart(D + 5_000, "sink", Result.REBALANCING, task=None),
    restart(D + 2_100_000, "sink", Result.RESTARTED, failed_at=D + 2_050_000),
    # Garbled: not JSON, an unknown event, no time, an unknown state.
    "not json",
    json.dumps({**status(D, "x", "RUNNING"), "event": "bogus"}),
    json.dumps({k: v for k, v in status(D, "x", "RUNNING").items() if k != "time"}),
    json.dumps(status(D, "x", "NOPE")),
]


def frame(spark: SparkSession, values: list[dict[str, Any] | str]) -> DataFrame:
    rows = [("history", 0, offset, 0, "k", value if isinstance(value, str) else json.dumps(value))
            for offset, value in enumerate(values)]
    return spark.createDataFrame(rows, SCHEMA)


@pytest.fixture(scope="module")
def analysis(spark: SparkSession) -> Analysis:
    return analyze(spark.createDataFrame([], RAW_SCHEMA), frame(spark, HISTORY), as_of_ms=AS_OF,
                   flap_transitions=5, flap_window_ms=60_000)


def test_time_in_each_state_per_day_until_as_of(analysis: Analysis) -> None:
    found = {(r.date, r.kind, r.connector, r.task, r.state): r.duration_ms
             for r in analysis.state_durations.filter("connector = 'sink'").collect()}
    assert found == {
        (DAY - datetime.timedelta(days=1), "task", "sink", 0, "RUNNING"): 60_000,
        (DAY, "task", "sink", 0, "RUNNING"): 60_000 + 100_000,
        (DAY, "task", "sink", 0, "FAILED"): 60_000 + 150_000 + 600_000,
        (DAY, "task", "sink", 0, "RESTARTING"): 30_000,
        (DAY, "connector", "sink", None, "RUNNING"): 1_000_000,
    }


def test_failed_episodes_and_mean_time_to_recovery(analysis: Analysis) -> None:
    episodes = sorted((r.failed_ms - D, r.time_to_recovery_ms)
                      for r in analysis.episodes.filter("connector = 'sink'").collect())
    assert episodes == [(60_000, 240_000), (400_000, None)]
    (row,) = analysis.mttr.filter("connector = 'sink'").collect()
    assert (row.failed_episodes, row.recovered, row.unrecovered, row.mttr_ms) == (2, 1, 1, 240_000.0)


def test_a_deletion_ends_an_episode_unrecovered_and_its_time_counts_in_no_state(spark: SparkSession) -> None:
    history = [status(D + 1_000, "gone", "FAILED"), status(D + 2_000, "gone", "DESTROYED"),
               status(D + 5_000, "gone", "RUNNING"), status(D + 6_000, "gone", "FAILED"),
               status(D + 9_000, "gone", "RUNNING")]
    result = analyze(spark.createDataFrame([], RAW_SCHEMA), frame(spark, history), as_of_ms=D + 10_000)
    episodes = sorted((r.failed_ms - D, r.time_to_recovery_ms) for r in result.episodes.collect())
    assert episodes == [(1_000, None), (6_000, 3_000)]
    durations = {r.state: r.duration_ms for r in result.state_durations.collect()}
    assert durations == {"FAILED": 1_000 + 3_000, "RUNNING": 1_000 + 1_000}


def test_flapping_is_more_than_n_transitions_inside_the_window(analysis: Analysis) -> None:
    rows = analysis.flapping.collect()
    assert [(r.connector, r.max_transitions_in_window, r.flapping_transitions, r.first_flapping_ms - D,
             r.last_flapping_ms - D) for r in rows] == [("flappy", 6, 2, 60_000, 70_000)]


def test_flapping_thresholds_are_parameters(spark: SparkSession) -> None:
    wider = analyze(spark.createDataFrame([], RAW_SCHEMA), frame(spark, HISTORY), as_of_ms=AS_OF,
                    flap_transitions=6, flap_window_ms=80_000)
    assert [(r.connector, r.max_transitions_in_window) for r in wider.flapping.collect()] == [("flappy", 7)]


def test_retry_outcomes_by_kind_and_result(analysis: Analysis) -> None:
    found = {(r.kind, r.result): (r["count"], r.mean_attempts, r.max_attempts, r.with_error, r.latency_p50_ms)
             for r in analysis.retry_outcomes.collect()}
    assert found == {("task", "written"): (2, 2.0, 3, 0, 10), ("task", "failed"): (1, 5.0, 5, 1, 1000),
                     ("connector", "superseded"): (1, 0.0, 0, 0, 5)}


def test_garbled_history_records_are_skipped_and_counted(analysis: Analysis) -> None:
    counters = analysis.counters()
    assert counters["history_records"] == len(HISTORY)
    assert counters["history_garbled"] == 4
    assert counters["history_outcome_events"] == 4
    assert counters["history_restart_events"] == 5


def test_the_restart_results_are_the_sidecars() -> None:
    # not-failed is the worker refuting a restart when asked: no restart was sent, and none is written to the
    # history topic (act/restarter.py), so the history never holds it.
    assert [result.value for result in Result if result is not Result.NOT_FAILED] == RESTART_RESULTS


def test_restarts_per_connector_and_task_and_result(analysis: Analysis) -> None:
    found = {(r.date, r.kind, r.task, r.result): (r.restarts, r.max_attempt, r.first_ms - D, r.last_ms - D)
             for r in analysis.restarts.collect()}
    assert found == {(DAY, "task", 0, "unreachable"): (1, 1, 61_000, 61_000),
                     (DAY, "task", 0, "restarted"): (2, 2, 70_000, 401_000),
                     (DAY, "connector", None, "rebalancing"): (1, 1, 5_000, 5_000)}


def test_time_to_recovery_with_and_without_a_restart(spark: SparkSession, analysis: Analysis) -> None:
    episodes = sorted((r.failed_ms - D, r.restarts) for r in analysis.episodes.filter("connector = 'sink'").collect())
    assert episodes == [(60_000, 2), (400_000, 1)]
    # A restart anchors where the sidecar read the FAILED (failed_at), so one answered after the RUNNING still counts
    # in its episode; one anchored after the RUNNING, or of another task, does not.
    history = [status(D + 1_000, "a", "FAILED"), status(D + 4_000, "a", "RUNNING"),
               restart(D + 5_000, "a", Result.RESTARTED, failed_at=D + 3_000),
               status(D + 10_000, "a", "FAILED"), status(D + 30_000, "a", "RUNNING"),
               restart(D + 31_000, "a", Result.RESTARTED, failed_at=D + 30_001),
               restart(D + 12_000, "a", Result.RESTARTED, task=1, failed_at=D + 11_000),
               status(D + 40_000, "b", "FAILED"), status(D + 41_000, "b", "RUNNING"),
               restart(D + 40_500, "b", Result.NOT_FOUND, failed_at=D + 40_000)]
    result = analyze(spark.createDataFrame([], RAW_SCHEMA), frame(spark, history), as_of_ms=D + 50_000)
    assert sorted((r.connector, r.failed_ms - D, r.restarts) for r in result.episodes.collect()) == [
        ("a", 1_000, 1), ("a", 10_000, 0), ("b", 40_000, 1)]
    recovery = {(r.kind, r.restarted): (r.failed_episodes, r.recovered, r.mttr_ms, r.ttr_p50_ms, r.ttr_p99_ms)
                for r in result.recovery.collect()}
    assert recovery == {("task", True): (2, 2, 2_000.0, 2_000.0, 2_980.0), ("task", False): (1, 1, 20_000.0,
                                                                                             20_000.0, 20_000.0)}


def test_as_of_defaults_to_the_newest_event(spark: SparkSession) -> None:
    default = analyze(spark.createDataFrame([], RAW_SCHEMA), frame(spark, HISTORY[:6]))
    assert default.as_of_ms == D + 300_000
    open_running = default.state_durations.filter("state = 'RUNNING' and date = date'2025-11-22'").collect()
    assert [r.duration_ms for r in open_running] == [60_000]  # the last RUNNING starts at as-of: 0 ms


def test_a_rerun_replaces_its_dates_instead_of_duplicating(analysis: Analysis, spark: SparkSession,
                                                          tmp_path: Path) -> None:
    def written() -> dict[str, int]:
        return {name: spark.read.schema(output.schema).parquet(str(tmp_path / name)).count()
                for name, output in analysis.outputs().items()}

    analysis.write(tmp_path)
    first = written()
    # Another day's partition, from an earlier run over other input, must stay.
    (tmp_path / "state_durations" / "date=2025-01-01").mkdir()
    summary = analysis.write(tmp_path)
    assert written() == first
    assert first["state_durations"] == 7  # sink: 5, flappy: 2
    assert sorted(p.name for p in (tmp_path / "state_durations").glob("date=*")) == [
        "date=2025-01-01", "date=2025-11-21", "date=2025-11-22"]
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(summary))
