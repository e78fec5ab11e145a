"""Retention of nightly ``--since`` runs: each run keeps what later runs need (the history of the last
``--retention-days`` days and what it needs from before; older status records compacted) and nothing more, and
the outputs of those days, and ``latest``, are still those of one run over everything."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from harness.faulty_cluster import FaultyCluster
from status_store import cli

from .test_incremental import DATED, START, STEP_MS, history, rows
from .test_latest import generated_history, produce


def kept_records(out: Path) -> dict[str, int]:
    """The records the checkpoint lists for the next run, per topic."""
    checkpoint = json.loads((out / "_state" / "checkpoint.json").read_text())
    counts: dict[str, int] = {}
    for batch in checkpoint["batches"]:
        table = ds.dataset(str(out / batch), format="parquet", partitioning="hive").to_table(
            columns=["topic"]).to_pylist()
        for row in table:
            counts[row["topic"]] = counts.get(row["topic"], 0) + 1
    return counts


def test_nightly_runs_keep_the_retention_window_and_its_outputs_equal_one_full_run(
        spark: SparkSession, mock_cluster: FaultyCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    for topic in ("connect-status", "history"):
        mock_cluster.create_topic(topic, 3, 1)
    # Six days of history (an event every 10 minutes); the status records all of the first day.
    status, events = generated_history(random.Random(8), 600), history(random.Random(9), 900)
    command = ["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--history-topic", "history",
               "--max-records-per-range", "200", "--flap-transitions", "3", "--flap-window-ms", str(6 * 3600 * 1000),
               "--no-report"]
    nightly = tmp_path / "nightly"
    checkpoints = []
    for status_part, history_part in ((slice(0, 300), slice(0, 450)), (slice(300, 450), slice(450, 675)),
                                      (slice(450, 600), slice(675, 900))):
        produce(mock_cluster.bootstrap_servers, "connect-status", status[status_part])
        produce(mock_cluster.bootstrap_servers, "history", events[history_part])
        assert cli.main([*command, "--since", str(nightly), "--out", str(nightly), "--retention-days", "1"]) == 0, (
            capsys.readouterr().err)
        checkpoints.append(json.loads((nightly / "_state" / "checkpoint.json").read_text()))
    full = tmp_path / "full"
    assert cli.main([*command, "--out", str(full)]) == 0

    # Kept: the records of the last run, and of the earlier ones what the retention window needs.
    kept = kept_records(nightly)
    # The last run's 225 history records, and of the 675 before only what the window needs (they end before it).
    assert 225 <= kept["history"] < 300
    # The last run's 150 status records, and of the 450 before (all older than the window) one per key.
    assert 150 <= kept["connect-status"] < 300
    assert len(checkpoints[-1]["batches"]) == 2
    assert sorted(p.name for p in (nightly / "_state" / "records").iterdir()) == sorted(
        Path(b).name for b in checkpoints[-1]["batches"])  # the batches no longer listed are gone
    # The second run cut at the UTC midnight a day before its as-of day: the third run is exact from there on.
    day = 86_400_000
    window_start = checkpoints[1]["from_ms"]
    assert window_start == ((START + 674 * STEP_MS) // day - 1) * day

    # The last run's dated outputs from the start of its window on equal one run over everything's.
    first_day = datetime.datetime.fromtimestamp(window_start / 1000, datetime.UTC).date()
    for name in DATED:
        recent = [row for row in rows(spark, nightly / name) if row[-1] >= first_day]
        assert recent == [row for row in rows(spark, full / name) if row[-1] >= first_day], name
        assert recent, name  # the comparison compared rows
    # The cache read from the kept records is the one read from everything.
    assert rows(spark, nightly / "latest", newest_date_only=True) == rows(spark, full / "latest")
    summaries = [json.loads((out / "summary.json").read_text()) for out in (nightly, full)]
    assert summaries[0]["as_of_ms"] == summaries[1]["as_of_ms"]
