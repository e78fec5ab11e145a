"""Benchmark ``status-store analyze`` from Kafka, at scale, on ``local[*]`` and on a standalone cluster, against a
plain consumer into pyarrow and DuckDB SQL in the same run.

    .venv/bin/python -m bench.spark_kafka --sizes 1M,10M --cluster --incremental
    .venv/bin/python -m bench.spark_kafka --quick     # 1k events on Tansu, local[*] only, in a temporary directory

For each size N, harness/history_gen.py writes N history events and their status topic; both go into Apache Kafka
4.4.0's broker (KRaft, one node; Tansu with ``--broker tansu``), each record at its generated partition and offset
with its timestamp, retention off (the generated timestamps are a year old). Then each side runs in a process of its
own, one after the other, timed from launch to exit:

- ``duckdb``: harness/duckdb_history.py, one consumer per topic into Arrow, the outputs in DuckDB SQL, written as
  Parquet (the baseline);
- ``spark``: ``status-store analyze`` on ``local[*]`` (report on, the job's own shuffle sizing, the driver's heap
  ``--driver-memory``);
- ``spark-before``: the same command on the code of an earlier commit (``--before DIR``, a source tree of it);
- ``cluster``: the job submitted to a standalone cluster of two workers of one core each, as the test suite starts
  it (``--cluster``, harness/spark_cluster.py), the package shipped with ``--py-files``, one executor per worker.

Every run is sampled every 0.5 s from /proc: the peak memory (PSS) of the driver (its JVM and its Python) and of the
executors (their JVMs, inside the driver's on ``local[*]``, and the Python workers), and the load average. Spark runs
write Spark's event log, from which the stages' task times give what the job would take on more cores
(``scale_out``). Each Spark run's phases come from its console lines. At every size the Spark and DuckDB outputs must
have the same rows per output, or the benchmark stops (the full comparison, value by value, is
tests/analytics/test_duckdb_oracle.py).

``--incremental``: at ``--incremental-size`` (1M), the first ``--since`` run over the history, then 1 % more events
loaded and the next ``--since`` run, each timed; the target is the second within 0.3 of the first.

Then the failure paths: an unreachable broker (``--timeout`` 20 s, the default; 2 s quick) and a malformed
``--since`` checkpoint, each timed to its exit. Results go to ``--results`` as JSON lines and are printed as
Markdown tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench import BenchParser, load_average, quick_scratch
from bench.spark_history import TreeSampler, _pss, label, parse_size
from harness import ROOT, free_port, history_gen, spark_cluster

WORK = Path("/tmp/spark-kafka-bench")
OUTPUTS = ("latest", "state_durations", "episodes", "mttr", "flapping", "retry_outcomes", "restarts", "recovery")
PHASES = ("starting", "planning", "reading", "analysing", "writing", "done")
SAMPLE_S = 0.5
MIB = 1 << 20


# ------------------------------------------------------------------------------------------ the broker


@contextmanager
def broker(kind: str, work: Path) -> Iterator[str]:
    """Apache Kafka's broker (``kafka``) or Tansu on 127.0.0.1 for the run; its bootstrap servers."""
    if kind == "tansu":
        from harness.tansu import tansu_binary, tansu_running  # the tests' way to run Tansu: one place for it

        binary = tansu_binary()
        if binary is None:
            sys.exit("Tansu is needed (the test extra installs it)")
        with tansu_running(binary) as running:
            yield running.bootstrap_servers
        return
    from harness.java_process import kafka_line
    from harness.real_kafka import KafkaCluster

    shutil.rmtree(work / "kafka", ignore_errors=True)
    with KafkaCluster(kafka_line("kafka-4"), work / "kafka", full_jit=True) as cluster:
        yield cluster.bootstrap_servers


def generated(args: argparse.Namespace, n: int) -> Path:
    """The generated history of ``n`` events (written once)."""
    data: Path = args.work / "data" / label(n)
    if not (data / "COMPLETE").exists():
        history_gen.generate(data, n)
        (data / "COMPLETE").write_text(str(n))
    return data


def split(data: Path, first: int, target: Path) -> tuple[Path, Path]:
    """``data`` as two loads: its status topic and first ``first`` history events (in time order, so a prefix of
    every partition), then the rest; written once under ``target``."""
    head, tail = target / "head", target / "tail"
    if not (target / "COMPLETE").exists():
        history = pa.concat_tables([pq.read_table(p) for p in sorted((data / "history").glob("*.parquet"))])
        for directory, rows in ((head, history.slice(0, first)), (tail, history.slice(first))):
            (directory / "history").mkdir(parents=True, exist_ok=True)
            pq.write_table(rows, directory / "history" / "part-00000.parquet")
        (tail / "status").mkdir(parents=True, exist_ok=True)
        shutil.copytree(data / "status", head / "status", dirs_exist_ok=True)
        (target / "COMPLETE").write_text(str(first))
    return head, tail


# ------------------------------------------------------------------------------------------ sampling


def _role(pid: int) -> str | None:
    """What a process is to a Spark run, from its command line; None for what is not the run's (a daemon)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "deploy.worker.Worker" in command or "deploy.master.Master" in command:
        return None
    if "CoarseGrainedExecutorBackend" in command:
        return "executor_jvm"
    if "pyspark.daemon" in command or "pyspark/daemon" in command or "pyspark.worker" in command:
        return "python_workers"
    if command.split(" ", 1)[0].endswith("java"):
        return "driver_jvm"
    return "driver_python"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Sampled:
    """Peak memory (summed PSS, MB) of each role, the CPU seconds of the run's processes (as last seen), and the
    load average, over a run."""

    peak_mb: dict[str, float] = field(default_factory=dict)
    load_max: float = 0.0
    cpu_s: dict[int, float] = field(default_factory=dict)

    @property
    def driver_mb(self) -> float:
        return self.peak_mb.get("driver_jvm", 0.0) + self.peak_mb.get("driver_python", 0.0)

    @property
    def executors_mb(self) -> float:
        return self.peak_mb.get("executor_jvm", 0.0) + self.peak_mb.get("python_workers", 0.0)


class Sampler(TreeSampler):
    """Peak memory by role, CPU seconds and load average of the process trees under ``roots()``."""

    def __init__(self, roots: Callable[[], list[int]]) -> None:
        super().__init__(roots, SAMPLE_S)
        self.result = Sampled()

    def take(self, pids: list[int]) -> None:
        totals: dict[str, float] = {}
        for pid in pids:
            role = _role(pid)
            if role is not None:
                totals[role] = totals.get(role, 0.0) + _pss(pid, 0.0)
                self.result.cpu_s[pid] = max(self.result.cpu_s.get(pid, 0.0), _cpu_seconds(pid))
        for role, mb in totals.items():
            self.result.peak_mb[role] = max(self.result.peak_mb.get(role, 0.0), mb)
        self.result.load_max = max(self.result.load_max, os.getloadavg()[0])

    def result_when_stopped(self) -> Sampled:
        self.stop()
        return self.result


# ------------------------------------------------------------------------------------------ runs


@dataclass
class Result:
    """One side at one size."""

    events: int
    side: str
    wall_s: float
    load: list[float]  # 1-minute load average at the start, the most during the run, at the end
    phases: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    peak_mb: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0  # CPU seconds of the run's processes (sampled: the last half second may be missing)
    stages: dict[str, Any] = field(default_factory=dict)


def timed(command: list[str], env: dict[str, str], timeout_s: float,
          sample: Callable[[], list[int]] | None = None) -> tuple[float, subprocess.CompletedProcess[str], Sampled,
                                                                  float]:
    """Run a command to its exit, from a directory outside the repository (so that PYTHONPATH says which code runs),
    its process tree sampled; its wall time, what it printed, the samples and the load at its start."""
    load = os.getloadavg()[0]
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=WORK.parent, start_new_session=True)
    sampler = Sampler(sample or (lambda: [process.pid]))
    sampler.start()
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # nothing of it outlives the run (its own group)
        sampled = sampler.result_when_stopped()
    return time.perf_counter() - began, subprocess.CompletedProcess(command, process.returncode, stdout,
                                                                    stderr), sampled, load


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


def spark_conf(args: argparse.Namespace, events: Path) -> dict[str, str]:
    """What every Spark run is given: its event log, the UI off."""
    events.mkdir(parents=True, exist_ok=True)
    return {"spark.ui.enabled": "false", "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}",
            "spark.eventLog.compress": "false"}


def analyze_command(python: str, options: list[str], conf: dict[str, str]) -> list[str]:
    """``status-store analyze`` with ``options`` and the Spark settings ``conf``."""
    return [python, "-m", "status_store.cli", "analyze", *options,
            *[a for key, value in conf.items() for a in ("--conf", f"{key}={value}")]]


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


def stage_times(events: Path) -> dict[str, Any]:
    """From a Spark event log (the newest under ``events``; Spark 4 writes ``eventlog_v2_<app>/events_<n>_<app>``):
    the application's wall time, and per stage its wall time, task count and task times (ms), for ``scale_out``."""
    logs = sorted((p for p in events.rglob("events_*") if p.is_file()), key=lambda p: p.stat().st_mtime)
    if not logs:
        return {}
    stages: dict[int, dict[str, Any]] = {}
    start = end = None
    cores = 0
    with logs[-1].open() as f:
        for line in f:
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                start = event["Timestamp"]
            elif kind == "SparkListenerApplicationEnd":
                end = event["Timestamp"]
            elif kind == "SparkListenerExecutorAdded":
                cores += event["Executor Info"]["Total Cores"]
            elif kind == "SparkListenerTaskEnd":
                info = event["Task Info"]
                stage = stages.setdefault(event["Stage ID"], {"tasks": []})
                stage["tasks"].append(info["Finish Time"] - info["Launch Time"])
            elif kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                stage = stages.setdefault(info["Stage ID"], {"tasks": []})
                stage["from"], stage["to"] = info.get("Submission Time", 0), info.get("Completion Time", 0)
    return {"app_ms": (end or 0) - (start or 0), "cores": cores,
            "stages": [{"id": i, "from_ms": s.get("from", 0), "to_ms": s.get("to", 0), "tasks": len(s["tasks"]),
                        "task_ms": sum(s["tasks"]), "longest_ms": max(s["tasks"], default=0)}
                       for i, s in sorted(stages.items())]}


def _covered_s(intervals: list[tuple[int, int]]) -> float:
    """Seconds covered by at least one of the intervals (ms): stages run side by side."""
    covered, reach = 0, None
    for begin, finish in sorted(intervals):
        if reach is None or begin > reach:
            covered += finish - begin
            reach = finish
        elif finish > reach:
            covered += finish - reach
            reach = finish
    return covered / 1000


def scale_out(result: Result, cores: int) -> float | None:
    """What the run would take with ``cores`` cores in all (machines of two cores each), from its stages: the time
    outside stages (start, planning, the report, the driver's own work) as it was, and each stage the longer of its
    longest task and its task time spread over the cores (stages one after the other). An estimate: it leaves the
    network out and assumes tasks as long as on these two shared cores."""
    stages: list[dict[str, int]] = result.stages.get("stages") or []
    if not stages:
        return None
    outside = max(result.wall_s - _covered_s([(s["from_ms"], s["to_ms"]) for s in stages]), 0.0)
    return outside + sum(max(s["longest_ms"], s["task_ms"] / cores) for s in stages) / 1000


def run_size(args: argparse.Namespace, bootstrap: str, n: int, cluster: Any, package: Path | None) -> list[Result]:
    """Every side at one size; their results."""
    data = generated(args, n)
    began = time.perf_counter()
    topics = (f"status-{label(n).lower()}", f"history-{label(n).lower()}")
    history_gen.produce(bootstrap, data, topics, timeout_s=args.timeout)
    print(f"{label(n)}: produced in {time.perf_counter() - began:.1f} s (load {load_average()})", flush=True)
    python = sys.executable
    results: list[Result] = []

    def record(side: str, wall: float, done: subprocess.CompletedProcess[str], sampled: Sampled, load: float,
               out: Path, events: Path | None = None) -> None:
        if done.returncode != 0:
            sys.exit(f"{side} at {label(n)} failed:\n{done.stderr[-3000:]}")
        result = Result(n, side, round(wall, 2), [round(load, 1), round(sampled.load_max, 1),
                                                    round(os.getloadavg()[0], 1)],
                        phases(done.stderr), rows_per_output(out), {k: round(v) for k, v in sampled.peak_mb.items()},
                        round(sum(sampled.cpu_s.values()), 1), stage_times(events) if events is not None else {})
        print(json.dumps(asdict(result)), flush=True)
        results.append(result)

    out = args.work / f"duckdb-{label(n)}"  # always: the baseline
    shutil.rmtree(out, ignore_errors=True)
    wall, done, sampled, load = timed(
        [python, "-m", "bench.duckdb_history", "--bootstrap-servers", bootstrap, "--status-topic", topics[0],
         "--history-topic", topics[1], "--out", str(out)], environment(ROOT), args.timeout)
    record("duckdb", wall, done, sampled, load, out)
    sides = [("spark", ROOT), *([("spark-before", args.before)] if args.before else [])]
    for side, source in [(side, source) for side, source in sides if side in args.sides]:
        out, events = args.work / f"{side}-{label(n)}", args.work / "events" / f"{side}-{label(n)}"
        shutil.rmtree(out, ignore_errors=True)
        conf = {**spark_conf(args, events), "spark.master": args.master, "spark.driver.memory": args.driver_memory}
        wall, done, sampled, load = timed(analyze_command(python, job_options(bootstrap, topics, out), conf),
                                          environment(source), args.timeout)
        record(side, wall, done, sampled, load, out, events)
    if cluster is not None and package is not None and "cluster" in args.sides:
        out, events = args.work / f"cluster-{label(n)}", args.work / "events" / f"cluster-{label(n)}"
        shutil.rmtree(out, ignore_errors=True)
        log = args.work / f"cluster-{label(n)}.log"
        submitted: list[int] = []
        sampler = Sampler(lambda: [*submitted, *cluster.pids()])
        load = os.getloadavg()[0]
        sampler.start()
        began = time.perf_counter()
        code = cluster.submit(str(ROOT / "status_store" / "analytics" / "job.py"), job_options(bootstrap, topics, out),
                              py_files=package, python=Path(python), log=log, timeout_s=args.timeout,
                              started=submitted.append,
                              conf={**spark_conf(args, events), "spark.executor.memory": args.executor_memory,
                                    "spark.executor.cores": "1", "spark.cores.max": "2",
                                    "spark.driver.memory": "1g"})
        wall = time.perf_counter() - began
        done = subprocess.CompletedProcess([], code, "", log.read_text())
        record("cluster", wall, done, sampler.result_when_stopped(), load, out, events)
    baseline = results[0].rows
    for result in results[1:]:
        if result.rows != baseline:
            sys.exit(f"{result.side} and duckdb disagree at {label(n)}: {result.rows} against {baseline}")
    return results


def incremental(args: argparse.Namespace, bootstrap: str) -> list[Result]:
    """The first ``--since`` run over ``--incremental-size`` events, then 1 % more events and the next one."""
    n = parse_size(args.incremental_size)
    more = max(n // 100, 1)
    data = generated(args, n + more)
    head, tail = split(data, n, args.work / "data" / f"{label(n)}-then-1pct")
    topics = (f"status-since-{label(n).lower()}", f"history-since-{label(n).lower()}")
    out = args.work / f"since-{label(n)}"
    shutil.rmtree(out, ignore_errors=True)
    results = []
    for part, (source, side) in enumerate(((head, "since: first run"), (tail, f"since: +{more:,} events"))):
        history_gen.produce(bootstrap, source, topics, timeout_s=args.timeout)
        events = args.work / "events" / f"since-{part}"
        conf = {**spark_conf(args, events), "spark.master": args.master, "spark.driver.memory": args.driver_memory}
        wall, done, sampled, load = timed(analyze_command(sys.executable, [
            *job_options(bootstrap, topics, out), "--since", str(out)], conf), environment(ROOT), args.timeout)
        if done.returncode != 0:
            sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
        result = Result(n + more * part, side, round(wall, 2),
                        [round(load, 1), round(sampled.load_max, 1), round(os.getloadavg()[0], 1)],
                        phases(done.stderr), rows_per_output(out), {k: round(v) for k, v in sampled.peak_mb.items()},
                        round(sum(sampled.cpu_s.values()), 1), stage_times(events))
        print(json.dumps(asdict(result)), flush=True)
        results.append(result)
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
            wall, done, _, _ = timed(analyze_command(sys.executable, options, {}), environment(source), args.timeout)
            line = next((line for line in done.stderr.splitlines() if "s] " not in line), "")
            result = {"side": side, "case": case, "wall_s": round(wall, 2), "exit": done.returncode, "line": line}
            print(json.dumps(result), flush=True)
            results.append(result)
    return results


# ------------------------------------------------------------------------------------------ tables


def table(results: list[Result]) -> str:
    """The runs as Markdown: wall time, its ratio to the baseline's, the Spark runs' phases, peak memory, load."""
    lines = ["| events | side | wall s | / duckdb | CPU s | start | plan | read | analyse | write | driver MB "
             "| executors MB | load (start, max, end) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    baseline = {r.events: r.wall_s for r in results if r.side == "duckdb"}
    for r in results:
        marks = [r.phases.get(name) for name in PHASES]
        ends = [next((m for m in marks[i + 1:] if m is not None), r.wall_s) for i in range(len(marks) - 1)]
        spans = ["" if start is None else f"{end - start:.1f}" for start, end in zip(marks, ends, strict=False)]
        sampled = Sampled(r.peak_mb)
        ratio = f"{r.wall_s / baseline[r.events]:.1f}" if r.events in baseline else ""
        lines.append(f"| {label(r.events)} | {r.side} | {r.wall_s:.1f} | {ratio} | {r.cpu_s:.0f} | " + " | ".join(spans)
                     + f" | {sampled.driver_mb:,.0f} | {sampled.executors_mb:,.0f} | "
                     + ", ".join(f"{x:g}" for x in r.load) + " |")
    return "\n".join(lines)


def growth(results: list[Result]) -> str:
    """Each side's time at the largest size over its time at the smallest."""
    sizes = sorted({r.events for r in results if r.side in ("duckdb", "spark", "cluster")})
    if len(sizes) < 2:
        return ""
    lines = [f"| side | {label(sizes[0])} s | {label(sizes[-1])} s | ratio ({sizes[-1] // sizes[0]}x the events) |",
             "|---|---:|---:|---:|"]
    for side in ("duckdb", "spark", "cluster"):
        found = {r.events: r.wall_s for r in results if r.side == side}
        if sizes[0] in found and sizes[-1] in found:
            lines.append(f"| {side} | {found[sizes[0]]:.1f} | {found[sizes[-1]]:.1f} | "
                         f"{found[sizes[-1]] / found[sizes[0]]:.2f} |")
    return "\n".join(lines)


def scale_table(results: list[Result]) -> str:
    """What each Spark run would take on N machines of two cores, from its stages (``scale_out``)."""
    machines = (1, 2, 4, 8, 16)
    lines = ["| events | side | measured s | " + " | ".join(f"{m} x 2 cores" for m in machines) + " |",
             "|---:|---|---:|" + "---:|" * len(machines)]
    for r in results:
        if r.stages.get("stages"):
            estimates = [scale_out(r, 2 * m) for m in machines]
            lines.append(f"| {label(r.events)} | {r.side} | {r.wall_s:.1f} | "
                         + " | ".join(f"{e:.1f}" if e is not None else "" for e in estimates) + " |")
    return "\n".join(lines)


def main() -> None:
    """Start the broker (and the cluster), run every side at each size, the incremental runs, then the failure
    paths; print the tables."""
    parser = BenchParser(__doc__)
    parser.add_size("--sizes", full="1M,10M", quick="1k", help="history events of each run")
    parser.add_size("--broker", full="kafka", quick="tansu", help="Apache Kafka's broker (kafka) or tansu")
    parser.add_argument("--cluster", action="store_true", help="also submit the job to a two-worker cluster")
    parser.add_argument("--incremental", action="store_true", help="also time a --since run after 1 %% more events")
    parser.add_size("--incremental-size", full="1M", quick="1k", help="the history of the incremental runs")
    parser.add_argument("--sides", default="spark,spark-before,cluster",
                        help="the Spark runs to make beside the baseline (default: %(default)s, as --before and "
                             "--cluster allow)")
    parser.add_argument("--master", default="local[*]", help="the local Spark's master (default: %(default)s)")
    parser.add_size("--driver-memory", full="5g", quick="1g", help="the local driver's heap (its executors' too)")
    parser.add_size("--executor-memory", full="2g", quick="512m", help="each cluster executor's heap")
    parser.add_size("--worker-memory", full="3g", quick="1g", help="what each cluster worker offers")
    parser.add_argument("--before", type=Path, help="a source tree of earlier code to run as 'spark-before'")
    parser.add_argument("--work", type=Path, help=f"inputs, outputs and logs (default {WORK})")
    parser.add_argument("--results", type=Path, help="the runs, as JSON lines (default WORK/results.jsonl)")
    parser.add_size("--timeout", type=float, full=3600, quick=500, help="seconds, for each run")
    parser.add_size("--fail-timeout", type=float, full=20, quick=2, help="the unreachable broker run's --timeout")
    args = parser.parse()
    with quick_scratch(args.quick) as scratch:
        args.work = args.work or (WORK if scratch is None else scratch)
        results_file = args.results or args.work / "results.jsonl"
        args.work.mkdir(parents=True, exist_ok=True)
        print(f"machine: {os.cpu_count()} cores, load {load_average()}; disk free under {args.work}: "
              f"{shutil.disk_usage(args.work).free / (1 << 30):.1f} GiB", flush=True)
        results: list[Result] = []
        with broker(args.broker, args.work) as bootstrap:
            with standalone_cluster(args) as (cluster, package):
                for n in (parse_size(s) for s in args.sizes.split(",")):
                    results += run_size(args, bootstrap, n, cluster, package)
            since = incremental(args, bootstrap) if args.incremental else []
        failed = failures(args)
        with results_file.open("a") as f:
            f.writelines(json.dumps(asdict(r)) + "\n" for r in [*results, *since])
            f.writelines(json.dumps(r) + "\n" for r in failed)
        print(table(results))
        print(growth(results))
        print(scale_table(results))
        if since:
            print(table(since))
            print(f"incremental: the run after 1 % more events took {since[1].wall_s / since[0].wall_s:.2f} of the "
                  "first")
        print("| failure | side | exit | s | the line |\n|---|---|---:|---:|---|")
        for r in failed:
            print(f"| {r['case']} | {r['side']} | {r['exit']} | {r['wall_s']:.1f} | {r['line'][:160]} |")


@contextmanager
def standalone_cluster(args: argparse.Namespace) -> Iterator[tuple[Any, Path | None]]:
    """Two workers of one core (and the package zip) when ``--cluster`` asks; stopped at the end."""
    if not args.cluster:
        yield None, None
        return
    cluster = spark_cluster.StandaloneCluster(args.work / "cluster", workers=2, cores=1, memory=args.worker_memory)
    cluster.start()
    try:
        yield cluster, spark_cluster.package_zip(ROOT, args.work / "status_store.zip")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
