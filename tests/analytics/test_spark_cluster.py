"""The job on a real Spark standalone cluster: a master and two workers as separate processes on 127.0.0.1,
the job submitted with spark-submit and the package shipped with --py-files, its outputs equal to a local
run's. Select it alone with ``pytest -m spark_cluster``."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from harness import ROOT, spark_cluster
from harness.faulty_cluster import FaultyCluster
from status_store import cli

from ..bench_runs import run_quick
from .test_analysis import HISTORY
from .test_latest import generated_history, produce

OUTPUTS = ["latest", "state_durations", "episodes", "mttr", "flapping", "retry_outcomes"]
pytestmark = [pytest.mark.spark_cluster, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[spark_cluster.StandaloneCluster]:
    """A master and two workers (1 core, 1 GiB each), stopped at the end."""
    if subprocess.run(["java", "-version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("Spark needs Java 17+")
    running = spark_cluster.StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g")
    running.start(timeout_s=120)
    try:
        yield running
    finally:
        running.stop()


def rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    """An output's rows, sorted (None first), for comparison."""
    found = [tuple(row) for row in spark.read.parquet(str(path)).collect()]
    return sorted(found, key=lambda row: [(value is not None, str(value)) for value in row])


def test_the_job_on_a_standalone_cluster_equals_a_local_run(
        spark: SparkSession, cluster: spark_cluster.StandaloneCluster, mock_cluster: FaultyCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster.listening_beyond_loopback() == []
    mock_cluster.create_topic("connect-status", 3, 1)
    mock_cluster.create_topic("connect-status-history", 3, 1)
    produce(mock_cluster.bootstrap_servers, "connect-status", generated_history(random.Random(7), 300))
    produce(mock_cluster.bootstrap_servers, "connect-status-history",
            [(b"status-task-sink-0", (value if isinstance(value, str) else json.dumps(value)).encode())
             for value in HISTORY])
    arguments = ["--bootstrap-servers", mock_cluster.bootstrap_servers, "--history-topic", "connect-status-history",
                 "--max-records-per-range", "40"]

    local = tmp_path / "local"
    assert cli.main(["analyze", *arguments, "--out", str(local)]) == 0, capsys.readouterr().err

    # Neither the driver nor the executors can import the package but from the zip (in the cluster's environment,
    # which drops the caller's PYTHONPATH).
    python = spark_cluster.python_without_the_package(tmp_path / "bare-python")
    assert subprocess.run([python, "-c", "import status_store"], capture_output=True, cwd=tmp_path, env=cluster.env(),
                          check=False).returncode != 0
    assert subprocess.run([python, "-c", "import pyspark, confluent_kafka, pyarrow"], env=cluster.env(),
                          check=False).returncode == 0
    package = spark_cluster.package_zip(ROOT, tmp_path / "status_store.zip")
    remote = tmp_path / "cluster"
    log = tmp_path / "spark-submit.log"
    code = cluster.submit(str(ROOT / "status_store" / "analytics" / "job.py"), [*arguments, "--out", str(remote)],
                          py_files=package, python=python, log=log, timeout_s=420, conf={
                              "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                              "spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "4",
                              "spark.executor.extraJavaOptions": spark_cluster.FAST_JVM,
                              "spark.driver.extraJavaOptions": spark_cluster.FAST_JVM})
    assert code == 0, log.read_text()[-5000:]

    summary = json.loads((remote / "summary.json").read_text())
    assert summary["spark_master"] == cluster.master_url  # not a local Spark inside the driver
    assert summary["counters"] == json.loads((local / "summary.json").read_text())["counters"]
    assert summary["kafka_ranges"] == json.loads((local / "summary.json").read_text())["kafka_ranges"]
    for name in OUTPUTS:
        assert rows(spark, remote / name) == rows(spark, local / name), name
    assert rows(spark, remote / "latest")  # the comparison compared something
    assert (remote / "report" / "report.md").read_text() == (local / "report" / "report.md").read_text()
    # An executor ran on each worker, and read Kafka there.
    for worker in ("worker-0", "worker-1"):
        (executor,) = (cluster.workdir / worker).glob("app-*/*/stderr")
        assert "Running task" in executor.read_text(errors="replace"), executor


@pytest.mark.bench
def test_the_cluster_benchmark_quick_run_on_the_same_cluster(cluster: spark_cluster.StandaloneCluster,
                                                              tmp_path: Path) -> None:
    output = run_quick("spark_cluster_history", tmp_path, "--master", cluster.master_url, timeout=540)
    (result,) = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert result["counters"]["history_records"] == 20_000  # local and cluster runs agreed on them
    assert "| 20k |" in output
