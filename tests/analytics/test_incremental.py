"""Incremental runs (``--since``): each run reads only the records after the previous run's checkpoint, continues
from where the last run left each connector and task when it can (else analyses everything kept), and the runs give
what one run over everything gives."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from harness.faulty_cluster import FaultyCluster
from status_store import cli
from status_store.act.events import Restart
from status_store.act.plan import Due, Result, Target

from .test_latest import generated_history, produce

START = 1_763_769_600_000  # 2025-11-22T00:00:00Z
STEP_MS = 10 * 60 * 1000
STATES = ["RUNNING", "RUNNING", "FAILED", "RESTARTING", "UNASSIGNED", "PAUSED", "DESTROYED"]
DATED = ["state_durations", "episodes", "flapping", "retry_outcomes", "restarts"]
SNAPSHOTS = ["latest", "mttr", "recovery"]  # dated by the time of the analysis: one snapshot per run's date


def history(rng: random.Random, count: int, first: int = START) -> list[tuple[bytes | None, bytes | None]]:
    """Status, outcome and restart events of a few connectors and tasks, 10 minutes apart from ``first``."""
    records: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):
        connector, task = rng.choice(["a", "b"]), rng.choice([None, 0, 1])
        key = f"status-task-{connector}-{task}" if task is not None else f"status-connector-{connector}"
        event: dict[str, Any] = {"time": first + i * STEP_MS, "sidecar": "s", "key": key,
                                 "kind": "task" if task is not None else "connector", "connector": connector,
                                 "task": task, "state": rng.choice(STATES)}
        draw = rng.random()
        if draw < 0.3:
            event.update(event="outcome", result=rng.choice(["written", "failed"]), attempts=rng.randrange(4),
                         error=None, latency_ms=rng.randrange(1000))
        elif draw < 0.45:
            event = {**event, "worker_id": "w:8083", "state": None}
            event.update(event="restart", result=rng.choice(["restarted", "unreachable"]), attempt=rng.randrange(1, 4),
                         failed_at=event["time"] - rng.randrange(STEP_MS))
        else:
            event.update(event="status", worker_id="w:8083", generation=1, trace=None)
        records.append((key.encode(), json.dumps(event).encode()))
    return records


def rows(spark: SparkSession, path: Path, newest_date_only: bool = False) -> list[tuple[Any, ...]]:
    frame = spark.read.parquet(str(path))
    if newest_date_only:
        frame = frame.filter(frame.date == frame.agg({"date": "max"}).first()[0])
    return sorted((tuple(row) for row in frame.collect()), key=lambda row: [(v is not None, str(v)) for v in row])


def task_event(time: int, connector: str, state: str) -> tuple[bytes | None, bytes | None]:
    key = f"status-task-{connector}-0"
    return key.encode(), json.dumps({"event": "status", "time": time, "sidecar": "s", "key": key, "kind": "task",
                                     "connector": connector, "task": 0, "state": state, "worker_id": "w:8083",
                                     "generation": 1, "trace": "boom" if state == "FAILED" else None}).encode()


def restart_event(time: int, connector: str, failed_at: int) -> tuple[bytes | None, bytes | None]:
    """The sidecar's restart of a connector's task 0 (``Restart.history_event``), times in ms."""
    due = Due(Target(connector, 0), "w:8083", 1, "boom", failed_at / 1000)
    restart = Restart(due, Result.RESTARTED, time / 1000, 204, None)
    return restart.key.encode(), restart.history_event("s")


def test_incremental_runs_equal_one_full_run(spark: SparkSession, mock_cluster: FaultyCluster, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for topic in ("connect-status", "history"):
        mock_cluster.create_topic(topic, 3, 1)
    day = 86_400_000
    # About three days up to 18:30 on the last: as of that day from the first run on (the retention start stays).
    status, events = generated_history(random.Random(5), 400), history(random.Random(6), 400, START - 2 * day)
    # A task FAILED on the first day, still FAILED after a restart, recovered on the last (its episode's day is
    # the first's); and a late event: older than the last one of its task.
    events.insert(10, task_event(START - 2 * day + 3_600_000, "c", "FAILED"))
    events.insert(20, task_event(START - 2 * day + 7_200_000, "c", "RESTARTING"))
    events.insert(320, task_event(START - 2 * day + 60_000, "a", "PAUSED"))
    events.insert(380, task_event(START + 12 * 3_600_000, "c", "RUNNING"))
    # The sidecar restarted it in the first run's records and in the third's, whose run continues the episode the
    # first left open.
    events[100] = restart_event(START - 2 * day + 3_602_000, "c", START - 2 * day + 3_600_500)
    events[370] = restart_event(START + 11 * 3_600_000, "c", START - 2 * day + 3_601_000)
    command = ["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--history-topic", "history",
               "--max-records-per-range", "50", "--flap-transitions", "3", "--flap-window-ms", str(6 * 3600 * 1000)]
    incremental = tmp_path / "incremental"
    since = [*command, "--since", str(incremental), "--out", str(incremental)]
    summaries = []
    parts = [(slice(0, 250), slice(0, 302)), (slice(250, 320), slice(302, 342)), (slice(320, 400), slice(342, 404))]
    for i, (status_part, history_part) in enumerate(parts):
        produce(mock_cluster.bootstrap_servers, "connect-status", status[status_part])
        produce(mock_cluster.bootstrap_servers, "history", events[history_part])
        assert cli.main([*since, *(["--no-report"] if i < 2 else [])]) == 0
        err = capsys.readouterr().err
        summaries.append(json.loads((incremental / "summary.json").read_text()))
        if i == 0:
            assert f"warning: no checkpoint in {incremental} yet: reading everything" in err
            assert "552 records\n" in err
        else:
            assert f"up to {70 + 40 if i == 1 else 80 + 62} records after the checkpoint" in err  # only the new
    # The second run met a late event: it analysed everything kept; the third continued from the tails.
    assert [summary["continued"] for summary in summaries] == [False, False, True]

    full = tmp_path / "full"
    assert cli.main([*command, "--out", str(full)]) == 0
    # Each output of the full run read once (a read is a Spark job), then compared and checked.
    full_rows = {name: rows(spark, full / name) for name in [*DATED, *SNAPSHOTS]}
    for name in DATED:
        assert rows(spark, incremental / name) == full_rows[name], name
    for name in SNAPSHOTS:
        assert rows(spark, incremental / name, newest_date_only=True) == full_rows[name], name
    assert min(len(found) for found in full_rows.values()) > 0  # every output compared rows
    recovered = [row for row in full_rows["episodes"] if row[1] == "c"]
    assert [(row[3] - START, row[4] - START, row[8]) for row in recovered] == [
        (-2 * day + 3_600_000, 12 * 3_600_000, 2)]
    final = json.loads((full / "summary.json").read_text())
    assert summaries[-1]["counters"] == final["counters"]
    assert summaries[-1]["as_of_ms"] == final["as_of_ms"]
    # The continuing run's report holds every day's outputs (those it staged and those committed before).
    episodes = len(full_rows["episodes"])
    for out in (incremental, full):
        assert f"{episodes} episodes, " in (out / "report" / "report.md").read_text()
    checkpoint = json.loads((incremental / "_state" / "checkpoint.json").read_text())
    assert sum(checkpoint["offsets"]["history"].values()) == 404
    assert len(checkpoint["batches"]) == 3
    assert [len(list((incremental / "_state" / kind).iterdir())) for kind in ("tails", "outcomes")] == [1, 2]


def test_a_checkpoint_of_other_topics_is_refused(spark: SparkSession, mock_cluster: FaultyCluster, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    mock_cluster.create_topic("connect-status", 1, 1)
    out = tmp_path / "out"
    command = ["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--no-report", "--since", str(out),
               "--out", str(out)]
    assert cli.main(command) == 0
    assert cli.main([*command, "--history-topic", "history"]) == 2
    assert "its checkpoint is of the topics connect-status, None; this run reads connect-status, history" in (
        capsys.readouterr().err)
