"""The benchmark's pandas baseline (bench/pandas_history.py) agrees with the Spark analytics, on generated history.

bench/spark_history.py runs this same comparison before it times anything; here it runs on a small
input so that a change on either side that makes them disagree fails in CI, not in a benchmark run.
The benchmark itself runs too, quick.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bench import history_gen, pandas_history, spark_history
from status_store.analytics.analysis import analyze

from ..bench_runs import run_quick


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("history")
    history_gen.generate(data, 6000, seed=11)
    return data


def test_generated_input_has_what_the_analytics_look_for(generated: Path) -> None:
    ours = pandas_history.analyze(generated)
    assert len(ours.latest) > 0
    assert len(ours.episodes) > 0
    assert len(ours.flapping) > 0
    assert set(ours.retry_outcomes["result"]) == {"written", "failed", "superseded"}
    garbled = dict(zip(ours.garbled["input"], ours.garbled["garbled"], strict=True))
    assert garbled["history"] > 0


def test_pandas_and_spark_agree_on_every_result(spark: SparkSession, generated: Path) -> None:
    theirs = analyze(spark.read.parquet(str(generated / "status")), spark.read.parquet(str(generated / "history")))
    agree, differ = spark_history.compare(pandas_history.analyze(generated), theirs)
    assert differ == [], "\n\n".join(differ)
    assert len(agree) == len(spark_history.COMPARED) + 1


def test_compare_reports_a_disagreement(spark: SparkSession, generated: Path) -> None:
    theirs = analyze(spark.read.parquet(str(generated / "status")), spark.read.parquet(str(generated / "history")))
    ours = pandas_history.analyze(generated)
    ours.mttr = ours.mttr.iloc[1:]
    _, differ = spark_history.compare(ours, theirs)
    assert [line.split(":")[0] for line in differ] == ["mttr"]


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_the_benchmark_quick_run(java: None, tmp_path: Path) -> None:
    # Without its cross-check (a Spark of its own for what the tests above compare on the shared session).
    output = run_quick("spark_history", tmp_path, "--check-size", "0", timeout=540)
    runs = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    outcomes = {run["side"]: run["outcome"] for run in runs}
    assert len(runs) == 3
    # RLIMIT_AS counts address space reserved, not used, which depends on the machine: pandas under it may not fit.
    assert outcomes["pandas"] in ("ok", "over cap")
    assert (outcomes["pandas-rss"], outcomes["spark"]) == ("ok", "ok")
    assert "| 20k |" in output
