"""Benchmark the analytics job on a Spark standalone cluster (two workers) against ``local[2]``.

    .venv/bin/pip install -e '.[spark]'
    .venv/bin/python bench/spark_cluster_history.py --sizes 1M,10M

For each size N, the synthetic history of bench/history_gen.py (generated once, shared with
bench/spark_history.py) is analysed by the job itself, ``status-store analyze --files ...`` (Parquet
exports of the status and history topics, outputs and summary written, no report), twice:

- ``local[2]``: one process, the driver's heap ``--driver-memory``;
- ``cluster``: spark-submit to a standalone master with two workers of one core each on 127.0.0.1
  (bench/spark_cluster.py), one executor per worker with ``--executor-memory`` each, the driver in client
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import spark_cluster  # noqa: E402
from spark_history import ensure_data, label, parse_size  # noqa: E402

HISTORY_TOPIC = "connect-status-history"


def job_arguments(data: Path, out: Path) -> list[str]:
    """The job's options for one input: the exported topics as Parquet, no report."""
    return ["--files", str(data / "status"), str(data / "history"), "--history-topic", HISTORY_TOPIC,
            "--out", str(out), "--no-report", "--log-file", str(out.parent / f"{out.name}.log")]


def run_local(data: Path, out: Path, driver_memory: str, timeout_s: float) -> float:
    """``status-store analyze`` on local[2]; its wall time."""
    command = [str(Path(sys.executable).parent / "status-store"), "analyze", *job_arguments(data, out),
               "--conf", "spark.master=local[2]", "--conf", f"spark.driver.memory={driver_memory}",
               "--conf", "spark.sql.shuffle.partitions=16", "--conf", "spark.ui.enabled=false"]
    began = time.perf_counter()
    subprocess.run(command, check=True, timeout=timeout_s, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    return time.perf_counter() - began


def run_cluster(cluster: spark_cluster.StandaloneCluster, data: Path, out: Path, executor_memory: str,
                package: Path, timeout_s: float) -> float:
    """The job submitted to the cluster; its wall time."""
    began = time.perf_counter()
    code = cluster.submit(str(ROOT / "status_store" / "analytics" / "job.py"), job_arguments(data, out),
                          py_files=package, python=Path(sys.executable), log=out.parent / f"{out.name}-submit.log",
                          timeout_s=timeout_s, conf={
                              "spark.executor.memory": executor_memory, "spark.executor.cores": "1",
                              "spark.cores.max": "2", "spark.driver.memory": "1g",
                              "spark.sql.shuffle.partitions": "16"})
    if code != 0:
        raise RuntimeError(f"spark-submit exited with {code}; see {out.parent / f'{out.name}-submit.log'}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1M,10M")
    parser.add_argument("--data-root", type=Path, default=Path("/tmp/spark-history-bench/data"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/spark-cluster-bench"))
    parser.add_argument("--results", type=Path, default=Path("/tmp/spark-cluster-bench-results.jsonl"))
    parser.add_argument("--driver-memory", default="5g", help="local[2]'s heap (default: %(default)s)")
    parser.add_argument("--executor-memory", default="2g", help="each executor's heap (default: %(default)s)")
    parser.add_argument("--worker-memory", default="3g", help="what each worker offers (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds, for each run")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    package = spark_cluster.package_zip(ROOT, args.work / "status_store.zip")
    cluster = spark_cluster.StandaloneCluster(args.work / "cluster", workers=2, cores=1, memory=args.worker_memory)
    began = time.perf_counter()
    cluster.start()
    print(f"cluster started in {time.perf_counter() - began:.1f} s", flush=True)
    rows = []
    try:
        for n in (parse_size(s) for s in args.sizes.split(",")):
            data = ensure_data(args.data_root, n)
            local_out, cluster_out = args.work / f"local-{label(n)}", args.work / f"cluster-{label(n)}"
            local_s = run_local(data, local_out, args.driver_memory, args.timeout)
            cluster_s = run_cluster(cluster, data, cluster_out, args.executor_memory, package, args.timeout)
            counters = [json.loads((out / "summary.json").read_text())["counters"] for out in (local_out, cluster_out)]
            if counters[0] != counters[1]:
                sys.exit(f"local and cluster runs disagree at {label(n)}: {counters}")
            result = {"events": n, "local_s": local_s, "cluster_s": cluster_s, "counters": counters[0]}
            print(json.dumps(result), flush=True)
            with args.results.open("a") as f:
                f.write(json.dumps(result) + "\n")
            rows.append(result)
    finally:
        cluster.stop()
    print("| events | local[2]: s | events/s | cluster, 2 workers: s | events/s | cluster/local |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {label(r['events'])} | {r['local_s']:,.1f} | {r['events'] / r['local_s']:,.0f} | "
              f"{r['cluster_s']:,.1f} | {r['events'] / r['cluster_s']:,.0f} | {r['cluster_s'] / r['local_s']:.2f} |")


if __name__ == "__main__":
    main()
