"""The outside oracle: a consumer into pyarrow and DuckDB SQL (harness/duckdb_history.py), written from the
definitions independently of the Spark code, agrees with the Spark analytics on every history output of generated
histories (the status topic's ``latest`` has the store's own cache as its oracle, in both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import duckdb_history
from harness.history_compare import compare

from ..bench_runs import run_quick
from .conftest import GeneratedAnalyses, GeneratedHistories


@pytest.mark.parametrize(("events", "seed", "transitions", "window_ms"), [(6000, 11, 5, 600_000),
                                                                           (3000, 12, 2, 3_600_000)])
def test_duckdb_and_spark_agree_on_every_output(generated_histories: GeneratedHistories,
                                                generated_analyses: GeneratedAnalyses, events: int, seed: int,
                                                transitions: int, window_ms: int) -> None:
    # The first case's input and thresholds are tests/analytics/test_bench_history.py's: one Spark analysis for both.
    data = generated_histories.data(events, seed)
    theirs = generated_analyses.analysis(events, seed, transitions, window_ms)
    ours = duckdb_history.analyze(duckdb_history.read_files(data / "status"),
                                  duckdb_history.read_files(data / "history"), flap_transitions=transitions,
                                  flap_window_ms=window_ms)
    agree, differ = compare(ours, theirs, duckdb_history.ORACLE)
    assert differ == [], "\n\n".join(differ)
    assert len(agree) == len(duckdb_history.ORACLE) + 1  # every output and the garbled counts
    # The generated history exercised every output.
    assert min(len(getattr(ours, name)) for name in duckdb_history.ORACLE) > 0
    assert ours.episodes["recovered_ms"].isna().any()
    assert ours.episodes["failure"].notna().any()


@pytest.mark.bench
def test_the_duckdb_baseline_quick_run(tmp_path: Path) -> None:
    output = run_quick("duckdb_history", tmp_path, timeout=200)
    assert "duckdb:" in output
    assert "episodes" in output


@pytest.mark.bench
@pytest.mark.timeout(660)
def test_the_kafka_benchmark_quick_run(java: None, tmp_path: Path) -> None:
    output = run_quick("spark_kafka", tmp_path, timeout=620)
    # The runs as their JSON lines (the scale-out table's rows begin with the size too).
    runs = [json.loads(line) for line in output.splitlines() if line.startswith('{"events": ')]
    assert [(run["events"], run["side"]) for run in runs] == [(1000, "duckdb"), (1000, "spark")]  # their rows agreed
    failures = [line for line in output.splitlines() if line.startswith(("| unreachable", "| malformed"))]
    assert [(line.split("|")[1].strip(), line.split("|")[3].strip()) for line in failures] == [
        ("unreachable broker", "1"), ("malformed checkpoint", "2")]
