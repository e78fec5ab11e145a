"""Benchmark the class-data-sharing archive of local Spark runs (status_store/analytics/class_data.py): a bare Spark
start and a small ``status-store analyze`` run, each with the archive and without it, in the same run.

    .venv/bin/python -m bench.spark_class_data --rounds 3
    .venv/bin/python -m bench.spark_class_data --quick     # one round of the job only, in a temporary directory

Each run is a process of its own, timed from launch to exit:

- ``bare``: a local session as ``status-store analyze`` starts one (``get_session``, the small-input JVM options),
  one trivial job (``spark.range(1).count()``), stopped;
- ``job``: ``status-store analyze --files`` over ``--events`` generated history events (harness/history_gen.py),
  report on.

``with``: the archive of this JDK and PySpark in a cache of the benchmark's own (``XDG_CACHE_HOME``), written by a
first run before the rounds (its time, which includes writing the archive, is reported as ``first``); ``without``:
the same, with the driver's Java options saying ``-Xshare:auto`` (the JDK's own base archive only; the package leaves
class data sharing alone when the options name it). The rounds alternate the two, so that a load that changes
during the run weighs on both. The figure is the median of each, and with / without.

``--quick`` proves the script runs end to end and writes its table, not the figures: it times the job only (one
round, each way): three Spark processes, not five. The first run, writing the archive, is a bare start either way;
the bare start without the archive differs from it only by the Java options the job's run without it also passes
(tests/analytics/test_class_data.py checks that command).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import BenchParser, load_average, quick_scratch
from harness import history_gen
from status_store.analytics.session import QUICK_START_JAVA_OPTIONS

BARE = """
from status_store.analytics.session import finish, get_session
conf = {{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"{extra}}}
spark = get_session(conf, quick_start=True, class_data=True)
spark.range(1).count()
finish()  # as analyze ends: a first run's JVM writes the archive (the others exit with the process)
"""
WITHOUT = f"{QUICK_START_JAVA_OPTIONS} -Xshare:auto"


def command(kind: str, archive: bool, data: Path, out: Path) -> list[str]:
    """The process of one run."""
    if kind == "bare":
        extra = "" if archive else f', "spark.driver.extraJavaOptions": "{WITHOUT}"'
        return [sys.executable, "-c", BARE.format(extra=extra)]
    files = sorted(str(p) for p in (data / "status").glob("*.parquet")) + sorted(
        str(p) for p in (data / "history").glob("*.parquet"))
    conf = [] if archive else ["--conf", f"spark.driver.extraJavaOptions={WITHOUT}"]
    return [sys.executable, "-m", "status_store.cli", "analyze", "--files", *files, "--status-topic",
            history_gen.STATUS_TOPIC, "--history-topic", history_gen.HISTORY_TOPIC, "--out", str(out), *conf]


def timed(argv: list[str], env: dict[str, str], timeout_s: float, log: Path) -> float:
    """Seconds from launch to exit; fails when the run fails."""
    start = time.monotonic()
    with log.open("ab") as sink:
        done = subprocess.run(argv, env=env, stdout=sink, stderr=sink, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} exited with {done.returncode}: see {log}")
    return time.monotonic() - start


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--rounds", full=3, quick=1, type=int, help="runs of each kind, with and without the archive")
    parser.add_size("--kinds", full="bare,job", quick="job", type=str,
                    help="the runs of the rounds, comma-separated, of bare and job")
    parser.add_size("--events", full=1000, quick=1000, type=int, help="history events of the small job")
    parser.add_argument("--work", type=Path, default=Path("/tmp/spark-class-data-bench"),
                        help="the cache, inputs, outputs and logs")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds, for each run")
    args = parser.parse()
    kinds = [kind for kind in ("bare", "job") if kind in args.kinds.split(",")]
    if not kinds or set(args.kinds.split(",")) - set(kinds):
        parser.error(f"--kinds: bare, job or both, not {args.kinds!r}")
    with quick_scratch(args.quick) as scratch:
        work = scratch or args.work
        work.mkdir(parents=True, exist_ok=True)
        data, log = work / "data", work / "runs.log"
        history_gen.generate(data, args.events)
        env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
        print(f"machine: {os.cpu_count()} cores, load {load_average()}")
        results: dict[tuple[str, bool], list[float]] = {}
        # The first run with the archive writes it; every run after it maps the same one.
        first = timed(command("bare", True, data, work / "out"), env, args.timeout, log)
        for kind in kinds:
            for _ in range(args.rounds):
                for archive in (False, True):
                    took = timed(command(kind, archive, data, work / "out"), env, args.timeout, log)
                    results.setdefault((kind, archive), []).append(took)
        print(json.dumps({"first": first, "runs": {f"{k}-{'with' if a else 'without'}": v
                                                   for (k, a), v in results.items()}, "load": load_average()}))
        print(f"the first run, writing the archive: {first:.1f} s")
        print("| run | without the archive (s) | with it (s) | with / without |")
        print("|---|---:|---:|---:|")
        for kind in kinds:
            without = statistics.median(results[(kind, False)])
            with_ = statistics.median(results[(kind, True)])
            label = "bare start" if kind == "bare" else f"status-store analyze, {args.events:,} events"
            print(f"| {label} | {without:.1f} | {with_:.1f} | {with_ / without:.2f} |")
        print(f"load at the end: {load_average()}")


if __name__ == "__main__":
    main()
