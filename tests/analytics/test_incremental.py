"""Incremental runs (``--since``): each run reads only the records after the previous run's checkpoint, and
two runs give what one run over everything gives."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from harness.faulty_cluster import FaultyCluster
from status_store import cli

from .test_latest import generated_history, produce

START = 1_763_769_600_000  # 2025-11-22T00:00:00Z
STEP_MS = 10 * 60 * 1000
STATES = ["RUNNING", "RUNNING", "FAILED", "RESTARTING", "UNASSIGNED", "PAUSED", "DESTROYED"]
DATED = ["state_durations", "episodes", "flapping", "retry_outcomes"]
SNAPSHOTS = ["latest", "mttr"]  # dated by the time of the analysis: one snapshot per run's date


def history(rng: random.Random, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """Status and outcome events of a few connectors and tasks, 10 minutes apart (over about three days)."""
    records: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):
        connector, task = rng.choice(["a", "b"]), rng.choice([None, 0, 1])
        key = f"status-task-{connector}-{task}" if task is not None else f"status-connector-{connector}"
        event: dict[str, Any] = {"time": START + i * STEP_MS, "sidecar": "s", "key": key,
                                 "kind": "task" if task is not None else "connector", "connector": connector,
                                 "task": task, "state": rng.choice(STATES)}
        if rng.random() < 0.3:
            event.update(event="outcome", result=rng.choice(["written", "failed"]), attempts=rng.randrange(4),
                         error=None, latency_ms=rng.randrange(1000))
        else:
            event.update(event="status", worker_id="w:8083", generation=1, trace=None)
        records.append((key.encode(), json.dumps(event).encode()))
    return records


def rows(spark: SparkSession, path: Path, newest_date_only: bool = False) -> list[tuple[Any, ...]]:
    frame = spark.read.parquet(str(path))
    if newest_date_only:
        frame = frame.filter(frame.date == frame.agg({"date": "max"}).first()[0])
    return sorted((tuple(row) for row in frame.collect()), key=lambda row: [(v is not None, str(v)) for v in row])


def test_two_incremental_runs_equal_one_full_run(spark: SparkSession, mock_cluster: FaultyCluster, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for topic in ("connect-status", "history"):
        mock_cluster.create_topic(topic, 3, 1)
    status, events = generated_history(random.Random(5), 400), history(random.Random(6), 400)
    command = ["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--history-topic", "history",
               "--max-records-per-range", "50", "--flap-transitions", "3", "--flap-window-ms", str(6 * 3600 * 1000),
               "--no-report"]
    incremental = tmp_path / "incremental"
    nightly = [*command, "--since", str(incremental), "--out", str(incremental)]

    produce(mock_cluster.bootstrap_servers, "connect-status", status[:250])
    produce(mock_cluster.bootstrap_servers, "history", events[:180])
    assert cli.main(nightly) == 0
    err = capsys.readouterr().err
    assert f"warning: no checkpoint in {incremental} yet: reading everything" in err
    assert "reading" in err
    assert "430 records\n" in err

    produce(mock_cluster.bootstrap_servers, "connect-status", status[250:])
    produce(mock_cluster.bootstrap_servers, "history", events[180:])
    assert cli.main(nightly) == 0
    assert "up to 370 records after the checkpoint" in capsys.readouterr().err  # only the new ones

    full = tmp_path / "full"
    assert cli.main([*command, "--out", str(full)]) == 0
    for name in DATED:
        assert rows(spark, incremental / name) == rows(spark, full / name), name
    for name in SNAPSHOTS:
        assert rows(spark, incremental / name, newest_date_only=True) == rows(spark, full / name), name
    assert len({row[-1] for row in rows(spark, incremental / "latest")}) == 2  # the first run's snapshot stays
    summaries = [json.loads((out / "summary.json").read_text()) for out in (incremental, full)]
    assert summaries[0]["counters"] == summaries[1]["counters"]
    assert summaries[0]["as_of_ms"] == summaries[1]["as_of_ms"] == START + 399 * STEP_MS
    assert min(len(rows(spark, full / name)) for name in [*DATED, *SNAPSHOTS]) > 0  # every output compared rows
    checkpoint = json.loads((incremental / "_state" / "checkpoint.json").read_text())
    assert sum(checkpoint["offsets"]["history"].values()) == 400
    assert len(checkpoint["batches"]) == 2


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
