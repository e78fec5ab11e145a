"""Benchmark the analytics job on a Spark standalone cluster (two workers) against ``local[2]``.

    .venv/bin/pip install -e '.[spark]'
    .venv/bin/python -m bench.spark_cluster_history --sizes 1M,10M
    .venv/bin/python -m bench.spark_cluster_history --quick     # 20k events, every file in a temporary directory

For each size N, the synthetic history of harness/history_gen.py (generated once, shared with
bench/spark_history.py) is analysed by the job itself, ``status-store analyze --files ...`` (Parquet
exports of the status and history topics, outputs and summary written, no report), twice:

- ``local[2]``: one process, the driver's heap ``--driver-memory``;
- ``cluster``: spark-submit to a standalone master with two workers of one core each on 127.0.0.1
  (harness/spark_cluster.py), one executor per worker with ``--executor-memory`` each, the driver in client
  mode with 1 GiB, the package shipped with ``--py-files`` (as a user would run it).

Both are timed from launch to exit (Spark's start-up included; the cluster's own start is not, and is
reported apart). Both runs' counters must agree, or the benchmark stops. Results go to ``--results`` as
JSON lines and are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import BenchParser, quick_scratch, quick_spark_settings
from bench.spark_history import FILES, ensure_data, label, parse_size
from harness import ROOT, spark_cluster

HISTORY_TOPIC = "connect-status-history"
# Where a full run keeps its work and results (its inputs are spark_history's, generated once for both).
WORK = Path("/tmp/spark-cluster-bench")
RESULTS = Path("/tmp/spark-cluster-bench-results.jsonl")


def job_arguments(data: Path, out: Path) -> list[str]:
    """The job's options for one input: the exported topics as Parquet, no report."""
    return ["--files", str(data / "status"), str(data / "history"), "--history-topic", HISTORY_TOPIC,
            "--out", str(out), "--no-report", "--log-file", str(out.parent / f"{out.name}.log")]


def run_local(data: Path, out: Path, driver_memory: str, timeout_s: float, extra: dict[str, str]) -> float:
    """``status-store analyze`` on local[2] (with the ``extra`` Spark settings); its wall time."""
    conf = {"spark.master": "local[2]", "spark.driver.memory": driver_memory, "spark.sql.shuffle.partitions": "16",
            "spark.ui.enabled": "false", **extra}
    command = [str(Path(sys.executable).parent / "status-store"), "analyze", *job_arguments(data, out),
               *[a for key, value in conf.items() for a in ("--conf", f"{key}={value}")]]
    began = time.perf_counter()
    subprocess.run(command, check=True, timeout=timeout_s, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    return time.perf_counter() - began


def run_cluster(cluster: spark_cluster.StandaloneCluster, data: Path, out: Path, executor_memory: str,
                package: Path, timeout_s: float, extra: dict[str, str]) -> float:
    """The job submitted to the cluster (with the ``extra`` Spark settings); its wall time."""
    began = time.perf_counter()
    code = cluster.submit(str(ROOT / "status_store" / "analytics" / "job.py"), job_arguments(data, out),
                          py_files=package, python=Path(sys.executable), log=out.parent / f"{out.name}-submit.log",
                          timeout_s=timeout_s, conf={
                              "spark.executor.memory": executor_memory, "spark.executor.cores": "1",
                              "spark.cores.max": "2", "spark.driver.memory": "1g",
                              "spark.sql.shuffle.partitions": "16", **extra})
    if code != 0:
        raise RuntimeError(f"spark-submit exited with {code}; see {out.parent / f'{out.name}-submit.log'}")
    return time.perf_counter() - began


def main() -> None:
    """Start the cluster, run both sides at each size and print the table."""
    parser = BenchParser(__doc__)
    parser.add_size("--sizes", full="1M,10M", quick="20k", help="history events of each run")
    parser.add_argument("--data-root", type=Path, help=f"generated inputs (default {FILES / 'data'})")
    parser.add_argument("--work", type=Path, help=f"the cluster's and the runs' files (default {WORK})")
    parser.add_argument("--results", type=Path, help=f"the runs, as JSON lines (default {RESULTS})")
    parser.add_size("--driver-memory", full="5g", quick="1g", help="local[2]'s heap")
    parser.add_size("--executor-memory", full="2g", quick="512m", help="each executor's heap")
    parser.add_size("--worker-memory", full="3g", quick="1g", help="what each worker offers")
    parser.add_size("--timeout", type=float, full=1800, quick=300, help="seconds, for each run")
    parser.add_argument("--master", help="submit to this running standalone master (spark://HOST:PORT) instead of "
                                         "starting a cluster; its workers must offer --executor-memory each")
    args = parser.parse()
    with quick_scratch(args.quick) as scratch:
        args.data_root = args.data_root or (FILES if scratch is None else scratch) / "data"
        args.work = args.work or (WORK if scratch is None else scratch / "work")
        args.results = args.results or (RESULTS if scratch is None else scratch / "results.jsonl")
        compare_local_and_cluster(args)


@contextmanager
def standalone_cluster(args: argparse.Namespace) -> Iterator[spark_cluster.StandaloneCluster]:
    """The cluster to submit to: the running one ``--master`` names, or two workers started here and stopped at
    the end."""
    if args.master:
        yield spark_cluster.StandaloneCluster.running(args.master, args.work / "cluster")
        return
    cluster = spark_cluster.StandaloneCluster(args.work / "cluster", workers=2, cores=1, memory=args.worker_memory)
    began = time.perf_counter()
    cluster.start()
    print(f"cluster started in {time.perf_counter() - began:.1f} s", flush=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def compare_local_and_cluster(args: argparse.Namespace) -> None:
    """Both sides at each size on one cluster, then the table."""
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    package = spark_cluster.package_zip(ROOT, args.work / "status_store.zip")
    extra = quick_spark_settings() if args.quick else {}
    rows = []
    with standalone_cluster(args) as cluster:
        for n in (parse_size(s) for s in args.sizes.split(",")):
            data = ensure_data(args.data_root, n)
            local_out, cluster_out = args.work / f"local-{label(n)}", args.work / f"cluster-{label(n)}"
            local_s = run_local(data, local_out, args.driver_memory, args.timeout, extra)
            cluster_s = run_cluster(cluster, data, cluster_out, args.executor_memory, package, args.timeout, extra)
            counters = [json.loads((out / "summary.json").read_text())["counters"] for out in (local_out, cluster_out)]
            if counters[0] != counters[1]:
                sys.exit(f"local and cluster runs disagree at {label(n)}: {counters}")
            result = {"events": n, "local_s": local_s, "cluster_s": cluster_s, "counters": counters[0]}
            print(json.dumps(result), flush=True)
            with args.results.open("a") as f:
                f.write(json.dumps(result) + "\n")
            rows.append(result)
    print("| events | local[2]: s | events/s | cluster, 2 workers: s | events/s | cluster/local |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {label(r['events'])} | {r['local_s']:,.1f} | {r['events'] / r['local_s']:,.0f} | "
              f"{r['cluster_s']:,.1f} | {r['events'] / r['cluster_s']:,.0f} | {r['cluster_s'] / r['local_s']:.2f} |")


if __name__ == "__main__":
    main()
