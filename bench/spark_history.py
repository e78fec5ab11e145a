"""Benchmark the Spark status analytics against pandas in one process, at growing sizes.

    .venv/bin/pip install -e '.[spark]'
    .venv/bin/python -m bench.spark_history --sizes 1M,3M,10M,30M --memory-cap 8GiB
    .venv/bin/python -m bench.spark_history --quick      # 20k events, every file in a temporary directory

For each size N, synthetic history events (harness/history_gen.py: connectors and tasks going through
Connect's states, FAILED episodes, flapping keys, deletes, retry outcomes, a few garbled records)
are written once as Parquet in the raw-record schema, with a matching status topic. Then, one
after the other and each in its own subprocess with a timeout:

- pandas: harness/pandas_history.py, the same analytics, vectorised, in one process run under
  ``RLIMIT_AS`` = the cap. A MemoryError, or death by a signal under that limit, is recorded as
  "did not fit the cap", not as a failure of the benchmark. ``RLIMIT_AS`` bounds address space,
  which pyarrow's allocator and glibc's per-thread arenas reserve well beyond what they touch, so
  the side ``pandas-rss`` runs the same code with only the RSS bound that Spark gets (below).
- Spark: ``status_store.analytics.analysis.analyze`` on ``local[2]`` reading the same files, its
  results written as Parquet. A JVM cannot run under ``RLIMIT_AS`` (it reserves far more address
  space than it uses), so the cap is kept by sizing: the driver's heap is 5/8 of the cap
  (``spark.driver.memory``), direct buffers at most 1/16, leaving room for the JVM's own memory
  (metaspace, code cache, threads, GC) and the Python driver. The sampler below also enforces it.

Both sides are timed from process start to results written (Spark's session start-up included,
and reported apart). A sampler reads /proc every 0.2 s for the whole process tree: the peak of the
tree's memory (summed PSS, see ``_pss``), the JVM's VmHWM, and the Python processes' (driver and
any workers) summed RSS. If the tree's memory ever passes the cap, the run is killed and recorded
as over the cap.

Before the series, both sides run on a small input (``--check-size``, 20k events) and their results
are compared (latest status per key, time in each state, FAILED episodes, MTTR, flapping keys,
retry outcomes, garbled counts): the benchmark stops if they disagree.

Results are appended as JSON lines to ``--results`` (so a long run can be written up while it
goes); ``--report`` renders them as the Markdown table (``--markdown``) and the chart
docs/img/spark-vs-pandas.png. Spark's growth is summarised by a least-squares fit
time = a + b*N and by time(N_max)/time(N_min) against N_max/N_min.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import BenchParser, quick_scratch, quick_spark_settings
from harness import ROOT
from harness.history_compare import compare

# Where a full run keeps its inputs, results and report (the chart goes to the docs).
FILES = Path("/tmp/spark-history-bench")
CHART = ROOT / "docs" / "img" / "spark-vs-pandas.png"
GIB = 1 << 30
MIB = 1 << 20
SAMPLE_S = 0.2
MEMORY_EXIT = 3


def parse_size(text: str) -> int:
    """'20k', '3M', '1000000' -> a count."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def parse_bytes(text: str) -> int:
    """'8GiB', '512MiB' -> bytes."""
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("G", GIB), ("M", MIB)):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n / 1000:g}k"


# ------------------------------------------------------------------------------------------ sampling

@dataclass
class Peak:
    """Peak memory of a process tree, from /proc."""

    tree_mb: float = 0.0
    jvm_mb: float = 0.0
    python_mb: float = 0.0


def _children(pid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    return found


def _status(pid: int) -> tuple[str, float, float]:
    """(command name, VmRSS MB, VmHWM MB) of a process; zeros once it is gone."""
    name, rss, hwm = "", 0.0, 0.0
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Name:"):
                name = line.split()[1]
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return name, rss, hwm


def _pss(pid: int, rss: float) -> float:
    """A process's proportional set size in MB (its RSS if the kernel does not say).

    Summing RSS over a tree counts shared pages once per process: a child the JVM forks (to run a
    shell command) shows the JVM's whole RSS until it execs, which doubled the "tree" peak of Spark
    runs for an instant. PSS shares those pages out, so the sum is the memory the tree really holds.
    """
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return rss


class TreeSampler(threading.Thread):
    """Samples process trees every ``interval_s`` until stopped: ``take`` is given every process of the trees under
    ``roots()`` (their ids, walked from /proc at each sample)."""

    def __init__(self, roots: Callable[[], list[int]], interval_s: float = SAMPLE_S) -> None:
        super().__init__(daemon=True)
        self.roots, self.interval_s = roots, interval_s
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pids, queue, seen = [], list(self.roots()), set()
            while queue:
                pid = queue.pop()
                if pid not in seen:
                    seen.add(pid)
                    pids.append(pid)
                    queue += _children(pid)
            self.take(pids)
            self._done.wait(self.interval_s)

    def take(self, pids: list[int]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._done.set()
        self.join()


class Sampler(TreeSampler):
    """Samples a process tree's memory until it ends; kills the tree if its RSS passes ``cap_mb``."""

    def __init__(self, pid: int, cap_mb: float) -> None:
        super().__init__(lambda: [pid])
        self.pid, self.cap_mb = pid, cap_mb
        self.peak = Peak()
        self.over_cap = False

    def take(self, pids: list[int]) -> None:
        tree = python = 0.0
        for pid in pids:
            name, rss, hwm = _status(pid)
            tree += _pss(pid, rss)
            if name == "java":
                self.peak.jvm_mb = max(self.peak.jvm_mb, hwm)
            elif name.startswith("python"):
                python += rss
                self.peak.python_mb = max(self.peak.python_mb, hwm)
        self.peak.tree_mb = max(self.peak.tree_mb, tree)
        self.peak.python_mb = max(self.peak.python_mb, python)
        if tree > self.cap_mb and not self.over_cap:
            self.over_cap = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)


# ------------------------------------------------------------------------------------------ one run

@dataclass
class Run:
    """One side at one size."""

    side: str
    events: int
    outcome: str  # "ok", "over cap", "timeout", "failed"
    wall_s: float
    job_s: float | None
    startup_s: float | None
    peak_tree_mb: float
    peak_jvm_mb: float
    peak_python_mb: float
    detail: str = ""


def run_side(side: str, data_dir: Path, out_dir: Path, events: int, cap: int, timeout_s: float,
             spark_conf: list[str]) -> Run:
    """Run one side in a fresh process group, sampled, bounded by ``timeout_s`` and the cap."""
    cmd = [*worker_command(side, data_dir, cap, spark_conf), "--out", str(out_dir)]
    began = time.perf_counter()
    proc = subprocess.Popen(cmd, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    sampler = Sampler(proc.pid, cap / MIB)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - began
    sampler.stop()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # nothing of the tree outlives its run
    timings: dict[str, float] = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            timings = json.loads(line)
    peak = sampler.peak
    if timed_out:
        outcome, detail = "timeout", f"killed after {timeout_s:.0f} s"
    elif sampler.over_cap:
        outcome, detail = "over cap", f"process tree RSS passed {cap / GIB:g} GiB; killed"
    elif proc.returncode == 0:
        outcome, detail = "ok", ""
    elif side == "pandas" and (proc.returncode == MEMORY_EXIT or proc.returncode < 0):
        outcome = "over cap"
        detail = ("MemoryError under RLIMIT_AS" if proc.returncode == MEMORY_EXIT
                  else f"killed by signal {-proc.returncode} under RLIMIT_AS")
        detail += ": " + " | ".join(stderr.strip().splitlines()[-2:])
    else:
        outcome, detail = "failed", stderr[-3000:]
    return Run(side, events, outcome, wall, timings.get("job_s"), timings.get("startup_s"),
               peak.tree_mb, peak.jvm_mb, peak.python_mb, detail)


# ------------------------------------------------------------------------------------------ workers

def worker_command(side: str, data_dir: Path, cap: int, spark_conf: list[str]) -> list[str]:
    """The command that runs one side (or the cross-check) in a fresh Python."""
    return [sys.executable, "-m", "bench.spark_history", "--worker", side, "--data", str(data_dir),
            "--memory-cap", str(cap)] + [a for c in spark_conf for a in ("--conf", c)]


def worker_env() -> dict[str, str]:
    """A worker's environment: this package importable, Spark on loopback, its Python workers this Python."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)


def spark_session(cap: int, conf: list[str]) -> Any:
    """A local[2] session sized to fit the cap (module docstring), loopback only, UI off."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("spark-history-bench")
               .config("spark.driver.memory", f"{cap * 5 // 8 // MIB}m")
               .config("spark.driver.extraJavaOptions", f"-XX:MaxDirectMemorySize={cap // 16 // MIB}m")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "16"))
    for item in conf:
        name, _, value = item.partition("=")
        builder = builder.config(name, value)
    return builder.getOrCreate()


def spark_worker(data_dir: Path, out_dir: Path, cap: int, conf: list[str]) -> dict[str, float]:
    from status_store.analytics.analysis import analyze

    began = time.perf_counter()
    spark = spark_session(cap, conf)
    started = time.perf_counter()
    result = analyze(spark.read.parquet(str(data_dir / "status")), spark.read.parquet(str(data_dir / "history")))
    result.write(str(out_dir))
    done = time.perf_counter()
    spark.stop()
    return {"startup_s": started - began, "job_s": done - started}


def pandas_worker(data_dir: Path, out_dir: Path, cap: int | None) -> dict[str, float]:
    if cap is not None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    from harness import pandas_history

    began = time.perf_counter()
    pandas_history.analyze(data_dir).write(out_dir)
    return {"job_s": time.perf_counter() - began}


def worker(args: argparse.Namespace) -> None:
    cap = int(args.memory_cap)
    if args.worker in ("pandas", "pandas-rss"):
        try:
            timings = pandas_worker(args.data, args.out, cap if args.worker == "pandas" else None)
        except MemoryError:
            sys.exit(MEMORY_EXIT)
    elif args.worker == "spark":
        timings = spark_worker(args.data, args.out, cap, args.conf)
    else:
        check(args.data, cap, args.conf)
        return
    print(json.dumps(timings))


# ------------------------------------------------------------------------------------------ cross-check


def check(data_dir: Path, cap: int, conf: list[str]) -> None:
    """Run both sides on the same small input; exit non-zero if they disagree on anything."""
    from harness import pandas_history
    from status_store.analytics.analysis import analyze

    spark = spark_session(cap, conf)
    theirs = analyze(spark.read.parquet(str(data_dir / "status")), spark.read.parquet(str(data_dir / "history")))
    agree, differ = compare(pandas_history.analyze(data_dir), theirs)
    spark.stop()
    print("\n".join(f"cross-check {line}" for line in agree), flush=True)
    if differ:
        print("\n\n".join(differ), file=sys.stderr)
        sys.exit(1)


# ------------------------------------------------------------------------------------------ report

def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares a, b of time = a + b*N."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    b = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx if sxx else 0.0
    return mean_y - b * mean_x, b


def _time(run: Run | None, rate: bool = True) -> list[str]:
    """Wall time (and events/s), or the outcome when the run did not finish."""
    if run is None:
        return ["not run", "-"] if rate else ["not run"]
    if run.outcome != "ok":
        return [f"**{run.outcome}**", "-"] if rate else [f"**{run.outcome}**"]
    wall = f"{run.wall_s:,.1f}" + (f" ({run.startup_s:.1f})" if run.startup_s is not None else "")
    return [wall, f"{run.events / run.wall_s:,.0f}"] if rate else [wall]


def _memory(mb: float, run: Run | None) -> str:
    if run is None or (run.outcome == "failed" and not mb):
        return "-"
    return f"{mb:,.0f}" if run.outcome == "ok" else f"({mb:,.0f} when stopped)"


def report(runs: list[Run], cap: int, command: str, markdown: Path, chart: Path) -> None:
    """The Markdown section and the chart, from the recorded runs (the last run of each side and size)."""
    latest: dict[tuple[str, int], Run] = {(r.side, r.events): r for r in runs}
    sizes = sorted({r.events for r in runs})
    lines = [
        "| events | pandas, RLIMIT_AS: s | events/s | peak RSS MB | pandas, RSS cap: s | peak RSS MB "
        "| Spark: s (start-up) | events/s | peak JVM MB | peak Python MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        p, r, s = (latest.get((side, n)) for side in ("pandas", "pandas-rss", "spark"))
        cells = [label(n), *_time(p), _memory(p.peak_tree_mb if p else 0, p), *_time(r, rate=False),
                 _memory(r.peak_tree_mb if r else 0, r), *_time(s), _memory(s.peak_jvm_mb if s else 0, s),
                 _memory(s.peak_python_mb if s else 0, s)]
        lines.append("| " + " | ".join(cells) + " |")
    spark_ok = [(r.events, r.wall_s) for r in (latest.get(("spark", n)) for n in sizes) if r and r.outcome == "ok"]
    summary = []
    if len(spark_ok) >= 2:
        a, b = fit(spark_ok)
        (n0, t0), (n1, t1) = spark_ok[0], spark_ok[-1]
        worst = max(abs(t - (a + b * n)) / t for n, t in spark_ok)
        summary.append(f"Spark's growth: time = {a:.1f} s + {b * 1e6:.2f} s per million events (least squares, "
                       f"largest deviation {worst:.0%}); time({label(n1)})/time({label(n0)}) = {t1 / t0:.2f} "
                       f"for {n1 / n0:.0f} times the events.")
    for n in sizes:
        s = latest.get(("spark", n))
        for side in ("pandas", "pandas-rss"):
            p = latest.get((side, n))
            if p and s and p.outcome == "ok" and s.outcome == "ok":
                summary.append(f"{label(n)}: Spark/{side} wall time = {s.wall_s / p.wall_s:.2f}.")
    text = "\n".join([
        f"Command: `{command}`", "",
        f"Machine: {os.cpu_count()} cores, {_total_memory_gib():.0f} GiB, {platform.platform()}, "
        f"Python {platform.python_version()}. Memory cap: {cap / GIB:g} GiB for each side "
        f"(pandas: RLIMIT_AS, or only the RSS bound; Spark: driver heap {cap * 5 // 8 // MIB:,} MiB, direct memory "
        f"{cap // 16 // MIB:,} MiB; both: killed if the process tree's memory passes the cap).", "",
        *lines, "", *(f"- {s}" for s in summary), "",
    ])
    markdown.write_text(text)
    _chart(latest, sizes, cap, chart)
    print(text)


def _total_memory_gib() -> float:
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1]) / (1 << 20)


def _chart(latest: dict[tuple[str, int], Run], sizes: list[int], cap: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(14, 4.2))
    for side, colour in (("pandas", "tab:blue"), ("pandas-rss", "tab:green"), ("spark", "tab:orange")):
        ok = [latest[(side, n)] for n in sizes if (side, n) in latest and latest[(side, n)].outcome == "ok"]
        over = [latest[(side, n)] for n in sizes if (side, n) in latest and latest[(side, n)].outcome != "ok"]
        xs = [r.events / 1e6 for r in ok]
        if not ok and not over:
            continue
        name = {"pandas": "pandas, RLIMIT_AS", "pandas-rss": "pandas, RSS cap", "spark": "Spark local[2]"}[side]
        ax_time.plot(xs, [r.wall_s for r in ok], "o-", color=colour, label=name)
        if side == "spark":
            # Each process's own peak: JVM (VmHWM) + Python, robust to forked children's shared pages.
            ax_mem.plot(xs, [(r.peak_jvm_mb + r.peak_python_mb) / 1024 for r in ok], "o-", color=colour,
                        label=f"{name}: JVM + Python")
            ax_mem.plot(xs, [r.peak_jvm_mb / 1024 for r in ok], "s--", color=colour, alpha=0.6, label="Spark: JVM")
        else:
            ax_mem.plot(xs, [r.peak_tree_mb / 1024 for r in ok], "o-", color=colour, label=name)
        for r in over:
            ax_mem.plot([r.events / 1e6], [cap / GIB], "x", color=colour, markersize=12,
                        label=f"{name}: {r.outcome} at {label(r.events)}")
    ax_mem.axhline(cap / GIB, color="grey", linestyle=":", label=f"cap {cap / GIB:g} GiB")
    ax_time.set(xlabel="history events (millions)", ylabel="wall time (s)", title="Time")
    ax_mem.set(xlabel="history events (millions)", ylabel="peak RSS (GiB)", title="Peak memory")
    for ax in (ax_time, ax_mem):
        ax.grid(alpha=0.3)
    ax_time.legend(fontsize=8, loc="upper left")
    ax_mem.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


# ------------------------------------------------------------------------------------------ main

def ensure_data(root: Path, n: int) -> Path:
    """The generated input for ``n`` events, generated once (a marker file says it is complete)."""
    from harness import history_gen

    data = root / label(n)
    if not (data / "COMPLETE").exists():
        began = time.perf_counter()
        history_gen.generate(data, n)
        (data / "COMPLETE").write_text(str(n))
        print(f"generated {label(n)} events in {time.perf_counter() - began:.1f} s", flush=True)
    return data


def main() -> None:
    """Generate the inputs, cross-check both sides, run the series and render the report."""
    parser = BenchParser(__doc__)
    parser.add_size("--sizes", full="1M,3M,10M,30M", quick="20k", help="history events of each run")
    parser.add_size("--memory-cap", full="8GiB", quick="4GiB", help="the memory cap of each side")
    parser.add_size("--check-size", full="20k", quick="5k", help="the cross-check's input; 0 to skip it")
    parser.add_argument("--sides", default="pandas,pandas-rss,spark")
    parser.add_size("--timeout", type=float, full=1800, quick=300, help="seconds, for each side at each size")
    parser.add_argument("--data-root", type=Path, help=f"generated inputs (default {FILES / 'data'})")
    parser.add_argument("--results", type=Path, help=f"the runs, as JSON lines (default {FILES / 'results.jsonl'})")
    parser.add_argument("--markdown", type=Path, help=f"the report (default {FILES / 'report.md'})")
    parser.add_argument("--chart", type=Path, help=f"the chart (default {CHART.relative_to(ROOT)})")
    parser.add_argument("--report", action="store_true", help="only render the recorded results")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark setting, name=value")
    parser.add_argument("--worker", choices=["pandas", "pandas-rss", "spark", "check"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse()
    if args.worker:
        worker(args)
        return
    with quick_scratch(args.quick) as scratch:
        files = scratch or FILES
        args.data_root = args.data_root or files / "data"
        args.results = args.results or files / "results.jsonl"
        args.markdown = args.markdown or files / "report.md"
        args.chart = args.chart or (CHART if scratch is None else scratch / CHART.name)
        series(args)


def series(args: argparse.Namespace) -> None:
    """The cross-check, then each side at each size, then the report of every recorded run."""
    cap = parse_bytes(args.memory_cap)
    if args.quick:
        quick = quick_spark_settings(f"-XX:MaxDirectMemorySize={cap // 16 // MIB}m")
        args.conf = [*(f"{key}={value}" for key, value in quick.items()), *args.conf]
    command = "python -m bench.spark_history " + " ".join(sys.argv[1:])
    if not args.report:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        if parse_size(args.check_size):
            data = ensure_data(args.data_root, parse_size(args.check_size))
            done = subprocess.run(worker_command("check", data, cap, args.conf), timeout=600, check=False,
                                  env=worker_env())
            if done.returncode != 0:
                sys.exit("cross-check failed: pandas and Spark disagree (above); no benchmark run")
        for n in (parse_size(s) for s in args.sizes.split(",")):
            data = ensure_data(args.data_root, n)
            for side in args.sides.split(","):
                out = args.data_root.parent / "out" / f"{side}-{label(n)}"
                run = run_side(side, data, out, n, cap, args.timeout, args.conf)
                print(json.dumps(asdict(run)), flush=True)
                with args.results.open("a") as f:
                    f.write(json.dumps({**asdict(run), "cap": cap, "command": command}) + "\n")
    runs = [Run(**{k: v for k, v in json.loads(line).items() if k not in ("cap", "command")})
            for line in args.results.read_text().splitlines() if line.strip()]
    runs = [r for r in runs if r.events in {parse_size(s) for s in args.sizes.split(",")}]
    report(runs, cap, command, args.markdown, args.chart)


if __name__ == "__main__":
    main()
