"""Benchmark ``status-store analyze`` from Kafka, report on, against a plain consumer into pyarrow and DuckDB SQL.

    .venv/bin/python -m bench.spark_kafka --sizes 1k,200k,1M --cluster --before /tmp/analyze-before
    .venv/bin/python -m bench.spark_kafka --quick     # 1k events, local[2] only, files in a temporary directory

For each size N, harness/history_gen.py writes N history events and their status topic; both go into a Tansu
broker (a real broker in a process of its own, 12 partitions per topic, each record in its generated partition
with its timestamp). Then each side runs in a process of its own, timed from launch to exit:

- ``duckdb``: harness/duckdb_history.py, one consumer per topic into Arrow, the outputs in DuckDB SQL, written as
  Parquet (the baseline);
- ``spark``: ``status-store analyze`` on ``local[2]`` (report on, the job's own shuffle sizing);
- ``spark-before``: the same command on the code of an earlier commit (``--before DIR``, a source tree of it,
  e.g. ``git archive 97f2f60 | tar -x -C DIR``), in the same run;
- ``cluster``: the job submitted to a standalone cluster of two workers of one core (``--cluster``,
  harness/spark_cluster.py), the package shipped with ``--py-files``.

Each Spark run's phases (Spark's start, planning, reading, analysing, writing) come from its console lines. At
every size the Spark and DuckDB outputs must have the same rows per output, or the benchmark stops (the full
comparison, value by value, is tests/analytics/test_duckdb_oracle.py). Then the failure paths, after and before:
an unreachable broker (``--timeout`` 20 s, the default; 2 s quick) and a malformed ``--since`` checkpoint, each
timed to its exit. Results go to ``--results`` as JSON lines and are printed as Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from bench import BenchParser, quick_scratch
from bench.spark_history import label, parse_size
from harness import ROOT, free_port, history_gen, spark_cluster

WORK = Path("/tmp/spark-kafka-bench")
OUTPUTS = ("latest", "state_durations", "episodes", "mttr", "flapping", "retry_outcomes")
PHASES = ("starting", "planning", "reading", "analysing", "writing", "done")
SPARK = {"spark.master": "local[2]", "spark.ui.enabled": "false"}


@contextmanager
def tansu() -> Iterator[str]:
    """A Tansu broker on 127.0.0.1 for the run; its bootstrap servers."""
    from harness.tansu import tansu_binary, tansu_running  # the tests' way to run Tansu: one place for it

    binary = tansu_binary()
    if binary is None:
        sys.exit("Tansu is needed (the test extra installs it)")
    with tansu_running(binary) as broker:
        yield broker.bootstrap_servers


def load(bootstrap: str, data: Path, suffix: str) -> tuple[str, str]:
    """The generated topics produced into the broker, each record at its generated partition and offset with its
    timestamp (harness/history_gen.py's ``produce``); their names."""
    names = (f"status-{suffix}", f"history-{suffix}")
    history_gen.produce(bootstrap, data, names)
    return names


def timed(command: list[str], env: dict[str, str], timeout_s: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a command to its exit, from a directory outside the repository (so that PYTHONPATH says which code
    runs); its wall time and what it printed."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False,
                          cwd=WORK.parent)
    return time.perf_counter() - began, done


def phases(stderr: str) -> dict[str, float]:
    """Seconds from the job's start to each phase's first console line."""
    found: dict[str, float] = {}
    for seconds, word in re.findall(r"\[\s*([0-9.]+) s\] (\w+)", stderr):
        found.setdefault(word, float(seconds))
    return found


def job_options(bootstrap: str, topics: tuple[str, str], out: Path) -> list[str]:
    """The job's options for one size (report on)."""
    return ["--bootstrap-servers", bootstrap, "--status-topic", topics[0], "--history-topic", topics[1],
            "--out", str(out)]


def analyze_command(python: str, options: list[str]) -> list[str]:
    """``status-store analyze`` on local[2] with ``options``."""
    return [python, "-m", "status_store.cli", "analyze", *options,
            *[a for key, value in SPARK.items() for a in ("--conf", f"{key}={value}")]]


def environment(source: Path | None = None) -> dict[str, str]:
    """The runs' environment: loopback for Spark, and the code of ``source`` first on the path when given."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    return env


def rows_per_output(directory: Path) -> dict[str, int]:
    """Rows of each output under ``directory`` (a Spark output directory or the baseline's Parquet files)."""
    counts = {}
    for name in OUTPUTS:
        single, partitioned = directory / f"{name}.parquet", directory / name
        path = single if single.exists() else partitioned
        counts[name] = ds.dataset(str(path), partitioning="hive").count_rows() if path.exists() else 0
    return counts


def run_size(args: argparse.Namespace, bootstrap: str, n: int, cluster: Any,
             package: Path | None) -> list[dict[str, Any]]:
    """Every side at one size; their results."""
    data = args.work / "data" / label(n)
    if not (data / "COMPLETE").exists():
        history_gen.generate(data, n)
        (data / "COMPLETE").write_text(str(n))
    began = time.perf_counter()
    topics = load(bootstrap, data, label(n).lower())
    print(f"{label(n)}: produced in {time.perf_counter() - began:.1f} s", flush=True)
    python = sys.executable
    results = []

    def record(side: str, wall: float, done: subprocess.CompletedProcess[str], out: Path) -> None:
        if done.returncode != 0:
            sys.exit(f"{side} at {label(n)} failed:\n{done.stderr[-3000:]}")
        result = {"events": n, "side": side, "wall_s": round(wall, 2), "phases": phases(done.stderr),
                  "rows": rows_per_output(out)}
        print(json.dumps(result), flush=True)
        results.append(result)

    out = args.work / f"duckdb-{label(n)}"  # always: the baseline
    wall, done = timed([python, "-m", "bench.duckdb_history", "--bootstrap-servers", bootstrap, "--status-topic",
                        topics[0], "--history-topic", topics[1], "--out", str(out)], environment(ROOT), args.timeout)
    record("duckdb", wall, done, out)
    sides = [("spark", ROOT), *([("spark-before", args.before)] if args.before else [])]
    for side, source in [(side, source) for side, source in sides if side in args.sides]:
        out = args.work / f"{side}-{label(n)}"
        wall, done = timed(analyze_command(python, job_options(bootstrap, topics, out)), environment(source),
                           args.timeout)
        record(side, wall, done, out)
    if cluster is not None and package is not None and "cluster" in args.sides:
        out = args.work / f"cluster-{label(n)}"
        log = args.work / f"cluster-{label(n)}.log"
        began = time.perf_counter()
        code = cluster.submit(str(ROOT / "status_store" / "analytics" / "job.py"), job_options(bootstrap, topics, out),
                              py_files=package, python=Path(python), log=log,
            timeout_s=args.timeout, conf={"spark.executor.memory": "2g", "spark.executor.cores": "1",
                                          "spark.cores.max": "2", "spark.driver.memory": "1g"})
        record("cluster", time.perf_counter() - began, subprocess.CompletedProcess([], code, "", log.read_text()),
               out)
    baseline = results[0]["rows"]
    for result in results[1:]:
        if result["rows"] != baseline:
            sys.exit(f"{result['side']} and duckdb disagree at {label(n)}: {result['rows']} against {baseline}")
    return results


def failures(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The failure paths timed to their exit: an unreachable broker, a malformed checkpoint; after and before."""
    results = []
    for side, source in [("spark", ROOT), *([("spark-before", args.before)] if args.before else [])]:
        out = args.work / f"fail-{side}"
        (out / "_state").mkdir(parents=True, exist_ok=True)
        (out / "_state" / "checkpoint.json").write_text(
            '{"status_topic": "connect-status", "history_topic": null, "offsets": [], "batches": []}')
        cases = {"unreachable broker": ["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--timeout",
                                        str(args.fail_timeout), "--out", str(out / "u")],
                 "malformed checkpoint": ["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--since", str(out),
                                          "--out", str(out)]}
        for case, options in cases.items():
            wall, done = timed(analyze_command(sys.executable, options), environment(source), args.timeout)
            line = next((line for line in done.stderr.splitlines() if "s] " not in line), "")
            result = {"side": side, "case": case, "wall_s": round(wall, 2), "exit": done.returncode, "line": line}
            print(json.dumps(result), flush=True)
            results.append(result)
    return results


def table(results: list[dict[str, Any]]) -> str:
    """The runs as Markdown: wall time, its ratio to the baseline's, and the Spark runs' phases."""
    lines = ["| events | side | wall s | / duckdb | start | plan | read | analyse | write |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    baseline = {r["events"]: r["wall_s"] for r in results if r["side"] == "duckdb"}
    for r in results:
        p = r["phases"]
        marks = [p.get(name) for name in PHASES]
        ends = [next((m for m in marks[i + 1:] if m is not None), r["wall_s"]) for i in range(len(marks) - 1)]
        spans = ["" if start is None else f"{end - start:.1f}" for start, end in zip(marks, ends, strict=False)]
        lines.append(f"| {label(r['events'])} | {r['side']} | {r['wall_s']:.1f} | "
                     f"{r['wall_s'] / baseline[r['events']]:.1f} | " + " | ".join(spans) + " |")
    return "\n".join(lines)


def main() -> None:
    """Start the broker (and the cluster), run every side at each size, then the failure paths; print the tables."""
    parser = BenchParser(__doc__)
    parser.add_size("--sizes", full="1k,200k,1M", quick="1k", help="history events of each run")
    parser.add_argument("--cluster", action="store_true", help="also submit the job to a two-worker cluster")
    parser.add_argument("--sides", default="spark,spark-before,cluster",
                        help="the Spark runs to make beside the baseline (default: %(default)s, as --before and "
                             "--cluster allow)")
    parser.add_argument("--before", type=Path, help="a source tree of earlier code to run as 'spark-before'")
    parser.add_argument("--work", type=Path, help=f"inputs, outputs and logs (default {WORK})")
    parser.add_argument("--results", type=Path, help="the runs, as JSON lines (default WORK/results.jsonl)")
    parser.add_size("--timeout", type=float, full=1800, quick=500, help="seconds, for each run")
    parser.add_size("--fail-timeout", type=float, full=20, quick=2, help="the unreachable broker run's --timeout")
    args = parser.parse()
    with quick_scratch(args.quick) as scratch:
        args.work = args.work or (WORK if scratch is None else scratch)
        results_file = args.results or args.work / "results.jsonl"
        args.work.mkdir(parents=True, exist_ok=True)
        results: list[dict[str, Any]] = []
        with tansu() as bootstrap, standalone_cluster(args) as (cluster, package):
            for n in (parse_size(s) for s in args.sizes.split(",")):
                results += run_size(args, bootstrap, n, cluster, package)
        failed = failures(args)
        with results_file.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in [*results, *failed])
        print(table(results))
        print("| failure | side | exit | s | the line |\n|---|---|---:|---:|---|")
        for r in failed:
            print(f"| {r['case']} | {r['side']} | {r['exit']} | {r['wall_s']:.1f} | {r['line'][:160]} |")


@contextmanager
def standalone_cluster(args: argparse.Namespace) -> Iterator[tuple[Any, Path | None]]:
    """Two workers of one core (and the package zip) when ``--cluster`` asks; stopped at the end."""
    if not args.cluster:
        yield None, None
        return
    cluster = spark_cluster.StandaloneCluster(args.work / "cluster", workers=2, cores=1, memory="3g")
    cluster.start()
    try:
        yield cluster, spark_cluster.package_zip(ROOT, args.work / "status_store.zip")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
