"""Outputs are written atomically: a run that fails leaves the earlier outputs as they were, and a commit cut
short is finished by the next run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from status_store import cli
from status_store.analytics import job
from status_store.analytics.outputs import OutputDir

RUNNING = '{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'


def export(path: Path, state: str) -> Path:
    """An export of one status record and one history event."""
    event = {"event": "status", "time": 1_763_780_000_000, "key": "status-connector-c", "kind": "connector",
             "connector": "c", "state": state}
    path.write_text("\n".join(json.dumps(row) for row in [
        {"topic": "connect-status", "partition": 0, "offset": 0, "timestamp": 1, "key": "status-connector-c",
         "value": RUNNING.replace("RUNNING", state)},
        {"topic": "history", "partition": 0, "offset": 0, "timestamp": 1, "key": "status-connector-c",
         "value": json.dumps(event)},
    ]) + "\n")
    return path


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` but the logs, with its content."""
    return {str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob("*"))
            if path.is_file() and "_logs" not in path.parts}


def test_a_run_that_fails_while_writing_leaves_the_earlier_outputs_as_they_were(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    command = ["analyze", "--history-topic", "history", "--out", str(out), "--files"]
    assert cli.main([*command, str(export(tmp_path / "a.jsonl", "RUNNING"))]) == 0
    before = snapshot(out)
    assert "summary.json" in before
    assert any(name.startswith("latest/date=") for name in before)

    def full_disk(*_: object, **__: object) -> Path:
        raise OSError("No space left on device")

    # The outputs of the second run are staged by then; the report fails.
    monkeypatch.setattr(job, "write_report", full_disk)
    assert cli.main([*command, str(export(tmp_path / "b.jsonl", "PAUSED"))]) == 1
    assert "failed: OSError: No space left on device" in capsys.readouterr().err
    assert snapshot(out) == before
    assert not list(out.glob("_run-*"))


def test_a_commit_cut_short_is_finished_by_the_next_run(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "latest" / "date=2025-11-21").mkdir(parents=True)
    (out / "latest" / "date=2025-11-21" / "part").write_text("kept")
    (out / "latest" / "date=2025-11-22").mkdir(parents=True)
    (out / "latest" / "date=2025-11-22" / "part").write_text("old")
    (out / "summary.json").write_text("old")
    first = OutputDir(spark, str(out))
    first.write_text(first.staged("latest/date=2025-11-22/part"), "new")
    first.write_text(first.staged("summary.json"), "new")
    items = ["latest/date=2025-11-22", "summary.json"]
    first.write_text(first.staged("_COMMIT"), json.dumps(items))  # the process ended here, before any move
    failed = OutputDir(spark, str(out))
    failed.write_text(failed.staged("summary.json"), "from a run that failed before its commit")

    done = OutputDir(spark, str(out)).recover()

    assert sorted(done) == sorted([f"finished the commit of {first.staging}, cut short by an earlier run's end",
                                   f"removed {failed.staging}, left by a run that failed"])
    assert (out / "latest" / "date=2025-11-22" / "part").read_text() == "new"
    assert (out / "latest" / "date=2025-11-21" / "part").read_text() == "kept"
    assert (out / "summary.json").read_text() == "new"
    assert not list(out.glob("_run-*"))


def test_a_commit_that_fails_midway_is_left_for_the_next_run_to_finish(spark: SparkSession, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    (out / "latest").mkdir(parents=True)
    (out / "latest" / "part").write_text("old")
    run = OutputDir(spark, str(out))
    run.write_text(run.staged("latest/part"), "new")
    run.write_text(run.staged("summary.json"), "new")
    rename = OutputDir._rename
    renames: list[object] = []

    def failing_third(self: OutputDir, source: object, target: object) -> None:
        renames.append(source)
        if len(renames) == 3:  # the old output aside, the new one in, then the summary: fails
            raise OSError("Input/output error")
        rename(self, source, target)

    monkeypatch.setattr(OutputDir, "_rename", failing_third)
    with pytest.raises(OSError, match="Input/output error"):
        run.commit(["latest/part", "summary.json"])
    run.discard()  # what a failed run does: here it must keep the half-done commit
    monkeypatch.undo()
    assert (out / "latest" / "part").read_text() == "new"
    assert not (out / "summary.json").exists()

    OutputDir(spark, str(out)).recover()
    assert (out / "summary.json").read_text() == "new"
    assert not list(out.glob("_run-*"))
