"""The fault matrix: the pod (stock Connect workers with the agent, a sidecar each) against stock Connect workers
under the same faults, on the same Apache Kafka broker, with the same workload at the same moments.

    .venv/bin/python -m bench.fault_matrix [--quick] [--rows NAME,NAME] [--runs N] [--line 4|3 ...] [--keep DIR]

One Apache Kafka 4.4.0 broker (KRaft), with a listener of its own for the sidecars behind a ``KafkaProxy``
(harness/real_kafka.py), and for each Connect line (``--line 4``: 4.4.0, every row; ``--line 3``: 3.9.2, the key
rows; both by default) two sides of two workers each, with groups and topics of their own (harness/matrix_bed.py):

- **the pod**: each worker started with the agent (``-javaagent``), and a sidecar of its own (``status-store serve``
  on that worker's properties file): the Kubernetes pod layout. The agents reach their sidecars through an HTTP proxy
  that can refuse or answer wrongly (harness/http_proxy.py);
- **stock**: the workers on their own status store.

Each row (harness/matrix_faults.py) sets fresh connectors up on both sides, makes its fault, and sends the workload's
steps (harness/matrix_workload.py: pause, resume, pause-resume-pause, stop, restart, a task that fails, delete, a
connector added) to both sides at the same moments. Then the fault ends, and every key the workload touched is looked
up in the status topic's last record, each worker's REST API and each sidecar's, against the state the steps left it
in (harness/matrix_views.py), until all are right and the topic is quiet or a bound passes (harness/matrix_rows.py).

Per row and side: keys **lost** (no status where one is due, in any view), keys **stale** (another state than the
last asked for, in any view), seconds from the fault's end until every key was right, and the seconds until each
status change of the workload showed in every worker's REST API (p50 and max). Target: the pod 0 lost and 0 stale in
every row, and right within 2 s of stock once Kafka is reachable.

``--quick`` runs the ``none`` row on 4.4.0 at the quick time scale (a check that it all runs, no figures to quote).
Only the pod layout runs here; one sidecar for every worker (Strimzi's layout, ``harness.sidecar.AgentPod``) does not.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

from bench import BenchParser, load_average, write_json
from harness.java_process import kafka_line
from harness.matrix_bed import POD, STOCK, Bed
from harness.matrix_faults import BY_NAME, FAULTS, FULL, KEY_ROWS, QUICK, Profile
from harness.matrix_rows import Row, SideResult, run_row
from harness.real_kafka import KafkaCluster
from harness.worker_pods import SIDECARS

LINES = {"4": "kafka-4", "3": "kafka-3"}
# The pod is to be right within this many seconds of stock once Kafka is reachable.
TARGET_LEAD_S = 2.0


def shown(result: SideResult) -> str:
    """The timed steps' seconds until shown: p50 / max, and how many never showed."""
    times = sorted(t for t in result.shown_s.values() if t is not None)
    missing = sum(1 for t in result.shown_s.values() if t is None)
    if not times:
        return "never"
    text = f"{statistics.median(times):.2f} / {times[-1]:.2f}"
    return text + (f" ({missing} never)" if missing else "")


def meets_target(row: Row) -> bool:
    """The pod lost nothing, left nothing stale, and was right within ``TARGET_LEAD_S`` of stock."""
    pod, stock = row.sides[POD], row.sides[STOCK]
    return (pod.right and pod.right_after_s is not None and stock.right_after_s is not None
            and pod.right_after_s <= stock.right_after_s + TARGET_LEAD_S)


def right_after(result: SideResult) -> str:
    return "never" if result.right_after_s is None else f"{result.right_after_s:.1f}"


def by_name(row: Row) -> dict[str, object]:
    """One row by the table's column names (``--json``): counts and seconds as numbers, None for never."""
    found: dict[str, object] = {"fault": row.fault.name}
    for name, result in row.sides.items():
        times = sorted(t for t in result.shown_s.values() if t is not None)
        found |= {f"{name} lost": len(result.lost), f"{name} stale": len(result.stale),
                  f"{name} right after (s)": result.right_after_s,
                  f"{name} shown in REST p50 (s)": statistics.median(times) if times else None,
                  f"{name} shown in REST max (s)": times[-1] if times else None}
    return found | {"met the target": meets_target(row), "load": row.load}


def table(rows: list[Row]) -> str:
    """The rows side by side, a line each, then what each side got wrong."""
    out = ["| fault | pod lost | pod stale | pod right after (s) | pod shown in REST p50 / max (s) | stock lost | "
           "stock stale | stock right after (s) | stock shown in REST p50 / max (s) | load |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        pod, stock = row.sides[POD], row.sides[STOCK]
        out.append(f"| {row.fault.name} | {len(pod.lost)} | {len(pod.stale)} | {right_after(pod)} | {shown(pod)} | "
                   f"{len(stock.lost)} | {len(stock.stale)} | {right_after(stock)} | {shown(stock)} | "
                   f"{row.load:.1f} |")
    met = [row.fault.name for row in rows if meets_target(row)]
    out += ["", f"the pod met the target (0 lost, 0 stale, right within {TARGET_LEAD_S:g} s of stock) in {len(met)} of "
            f"{len(rows)} rows" + (f": {', '.join(met)}" if met else ""), ""]
    out += [f"- {fault.name}: {fault.what}" for fault in dict.fromkeys(row.fault for row in rows)]
    out.append("")
    for row in rows:
        details = [f"- {row.fault.name}: {note}" for note in row.notes]
        for name, result in row.sides.items():
            for what, keys in (("lost", result.lost), ("stale", result.stale)):
                if keys:
                    listed = "; ".join(f"{key.removeprefix('status-')} ({', '.join(views)})"
                                       for key, views in sorted(keys.items()))
                    details.append(f"- {row.fault.name}, {name} {what}: {listed}")
            details += [f"- {row.fault.name}, {name}: {problem}"
                        for problem in [*result.errors, *(f"{view} did not answer" for view in result.unanswered)]]
        out += details
    return "\n".join(out)


def run_line(workdir: Path, kafka: KafkaCluster, line: str, rows: list[str], runs: int, profile: Profile,
             full_jit: bool, keep: bool = False) -> list[Row]:
    """Every row of one Connect line, ``runs`` times, on a bed of its own; with ``keep``, each row's looks in
    ``<workdir>/<line>/rows``."""
    done = []
    with Bed(kafka_line(line), workdir / line, kafka, profile.agent_options, profile.sidecar_settings,
             full_jit) as bed:
        for run in range(runs):
            for index, name in enumerate(rows):
                print(f"[{line}] run {run + 1}, {name} (load {load_average()})", file=sys.stderr, flush=True)
                done.append(run_row(bed, BY_NAME[name], profile, f"{line[-1]}r{run}n{index}",
                                    workdir / line / "rows" if keep else None))
    return done


def main() -> None:
    """Start the broker, run each line's rows, print the tables."""
    parser = BenchParser(__doc__)
    parser.add_argument("--rows", action="append", default=[], metavar="NAME[,NAME]",
                        help=f"rows to run (default: every row on 4.x, the key rows on 3.x): "
                             f"{', '.join(fault.name for fault in FAULTS)}")
    parser.add_size("--runs", type=int, full=1, quick=1, help="times every row runs")
    parser.add_argument("--line", action="append", choices=sorted(LINES), default=[],
                        help="Connect line (again for both; default both, quick 4)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="run in DIR (a new or empty folder) and keep it: the broker's, every worker's and "
                             "sidecar's logs, and each row's looks and status records (<line>/rows/*.json)")
    args = parser.parse()
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty")
    chosen = [name for names in args.rows for name in names.split(",")]
    if unknown := [name for name in chosen if name not in BY_NAME]:
        parser.error(f"unknown rows: {', '.join(unknown)}")
    lines = args.line or (["4"] if args.quick else ["4", "3"])
    profile = QUICK if args.quick else FULL
    print(f"load average at the start: {load_average()}")
    results: dict[str, list[Row]] = {}
    with contextlib.ExitStack() as scratch:
        if args.keep is None:
            workdir = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="bench-fault-matrix-")))
        else:
            workdir = args.keep.resolve()
            workdir.mkdir(parents=True, exist_ok=True)
        with KafkaCluster(kafka_line("kafka-4"), workdir / "kafka", client_listeners=[SIDECARS],
                          full_jit=not args.quick) as kafka:
            for line in lines:
                default = ["none"] if args.quick else [f.name for f in FAULTS] if line == "4" else KEY_ROWS
                results[line] = run_line(workdir, kafka, LINES[line], chosen or default, args.runs, profile,
                                         not args.quick, args.keep is not None)
    print(f"\n.venv/bin/python -m bench.fault_matrix {' '.join(sys.argv[1:])}".rstrip())
    print(f"the time scale: {profile.name}; two workers a side; one Apache Kafka 4.4.0 broker; the load is the "
          f"1-minute load average as each row began")
    for line, rows in results.items():
        print(f"\nConnect {rows[0].line if rows else LINES[line]}, {rows[0].keys if rows else 0} status keys a row\n")
        print(table(rows))
    print(f"\nload average at the end: {load_average()}")
    write_json(args.json, {f"Connect {rows[0].line if rows else LINES[line]}": [by_name(row) for row in rows]
                           for line, rows in results.items()})


if __name__ == "__main__":
    main()
