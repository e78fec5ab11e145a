"""The benchmark's pandas baseline (harness/pandas_history.py) agrees with the Spark analytics, on generated history.

bench/spark_history.py runs this same comparison before it times anything; here it runs on a small
input so that a change on either side that makes them disagree fails in CI, not in a benchmark run.
The benchmark itself runs too, quick.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings

from harness import pandas_history
from harness.history_compare import COMPARED, compare
from status_store.analytics.analysis import Analysis
from status_store.connect.cache import StatusCache

from ..bench_runs import run_quick
from .conftest import GeneratedAnalyses, GeneratedHistories
from .test_latest_differential import Written, cache_view, connectors_named, read_order, topics

# The input of one of tests/analytics/test_duckdb_oracle.py's cases too: one Spark analysis for both, which they share
# only in one test process (the session's generated_analyses): this module runs in that module's group.
EVENTS, SEED = 6000, 11
pytestmark = pytest.mark.xdist_group("tests/analytics/test_duckdb_oracle.py")


@pytest.fixture(scope="module")
def generated(generated_histories: GeneratedHistories) -> Path:
    return generated_histories.data(EVENTS, SEED)


@pytest.fixture(scope="module")
def spark_results(generated_analyses: GeneratedAnalyses) -> Analysis:
    """Spark's analysis of the generated input with the default thresholds (the tests only read it)."""
    return generated_analyses.analysis(EVENTS, SEED)


def test_generated_input_has_what_the_analytics_look_for(generated: Path) -> None:
    ours = pandas_history.analyze(generated)
    assert len(ours.latest) > 0
    assert len(ours.episodes) > 0
    assert len(ours.flapping) > 0
    assert set(ours.retry_outcomes["result"]) == {"written", "failed", "superseded"}
    garbled = dict(zip(ours.garbled["input"], ours.garbled["garbled"], strict=True))
    assert garbled["history"] > 0


def test_pandas_and_spark_agree_on_every_result(spark_results: Analysis, generated: Path) -> None:
    agree, differ = compare(pandas_history.analyze(generated), spark_results)
    assert differ == [], "\n\n".join(differ)
    assert len(agree) == len(COMPARED) + 1


def test_compare_reports_a_disagreement(spark_results: Analysis, generated: Path) -> None:
    ours = pandas_history.analyze(generated)
    ours.mttr = ours.mttr.iloc[1:]
    _, differ = compare(ours, spark_results)
    assert [line.split(":")[0] for line in differ] == ["mttr"]


@settings(max_examples=40, deadline=None)
@given(history=topics())
def test_pandas_reads_the_status_topic_in_the_analytics_order(history: list[Written]) -> None:
    read = read_order(history)
    # Handed over in reverse: the baseline must find the read order itself.
    frame = pd.DataFrame([(record.partition, record.offset, timestamp, record.key.decode() if record.key else None,
                           record.value) for record, timestamp in reversed(read)],
                         columns=["partition", "offset", "timestamp", "key", "value"])
    ours = pandas_history.status_cache(frame)
    reference = StatusCache()
    reference.apply(record for record, _ in read)
    names = connectors_named(history)
    assert cache_view(ours, names) == cache_view(reference, names)
    assert ours.stats == reference.stats
    assert len(pandas_history.latest_status(ours, frame["key"])) == len(cache_view(reference, names))


def test_the_baseline_reads_status_values_and_keys_as_connect_does(tmp_path: Path) -> None:
    values = [
        (0, "status-task-c-0", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":4294967299}'),
        (1, "status-task-c-01", b'{"state":"FAILED","trace":null,"worker_id":"w","generation":1} trailing'),
        (2, "status-task-c-2", b'{"state":"FAILED","trace":null,"worker_id":"w","generation":1.0}'),
    ]
    pq.write_table(pa.table({"partition": [0] * 3, "offset": [o for o, _, _ in values], "timestamp": [1, 2, 3],
                             "key": [k for _, k, _ in values], "value": [v for _, _, v in values]}),
                   tmp_path / "status.parquet")
    status = pandas_history.read_status([tmp_path / "status.parquet"])
    cache = pandas_history.status_cache(status)
    latest = pandas_history.latest_status(cache, status["key"])
    # The generation narrowed to 32 bits as Java does; status-task-c-01 is task 1 (text after the JSON object is
    # ignored); a generation that is not a JSON integer is garbled.
    assert latest[["key", "state", "generation"]].values.tolist() == [
        ["status-task-c-0", "RUNNING", 3], ["status-task-c-1", "FAILED", 1]]
    assert cache.stats.garbled_values == 1


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
