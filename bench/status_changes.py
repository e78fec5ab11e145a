"""Status changes timed as an operator sees them (``bench.connect_outage``'s last phase): a connector on each Connect
worker paused, resumed and restarted through the worker's REST API, and the seconds until the worker's own REST API
shows each change (the status written, read back by the worker, served). One worker at a time, taking turns at going
first, so that each change is timed alone."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.java_process import SOURCE_CONNECTOR
from harness.real_connect import ConnectCluster, ConnectError, all_in, states

# Each change timed: its REST call, and the state it leaves the connector and every task in.
CHANGES = {"pause": ("PUT", "/connectors/{}/pause", "PAUSED"), "resume": ("PUT", "/connectors/{}/resume", "RUNNING"),
           "restart": ("POST", "/connectors/{}/restart?includeTasks=true", "RUNNING")}
CONNECTOR = "status-changes"
# How often a change's result is asked for, and the bound on one change.
POLL_S = 0.005
CHANGE_BOUND_S = 60.0
# A REST call, asked again while Connect answers 409 (a rebalance): ``rest(connect, method, path, body, began)``.
Rest = Callable[[ConnectCluster, str, str, object, float], float]
# Seconds each change took, by worker and change.
Took = dict[str, dict[str, list[float]]]


@dataclass(frozen=True)
class Call:
    """One change's call, for its way in stages: when it was made (monotonic, and the machine's clock), seconds until
    it was answered and until the worker's REST API showed the change."""

    worker: str
    change: str
    began: float
    began_epoch: float
    answered_s: float
    shown_s: float


def status_changes(workers: Mapping[str, ConnectCluster], rest: Rest, rounds: int, tasks: int,
                   calls: list[Call] | None = None) -> Took:
    """A connector of ``tasks`` tasks on each worker paused, resumed and restarted ``rounds`` times: the seconds each
    change took until the worker's own REST API showed it; each call also into ``calls``, when given."""
    for connect in workers.values():
        connect.call("PUT", f"/connectors/{CONNECTOR}/config",
                     {"connector.class": SOURCE_CONNECTOR, "tasks.max": str(tasks)})
        connect.wait_for_status(CONNECTOR, all_in("RUNNING", tasks), "running", CHANGE_BOUND_S)
    took: Took = {worker: {change: [] for change in CHANGES} for worker in workers}
    order = list(workers.items())
    try:
        for repetition in range(rounds):
            for worker, connect in order[repetition % 2:] + order[:repetition % 2]:
                for change in CHANGES:
                    began, began_epoch = time.monotonic(), time.time()
                    seconds, answered = timed(connect, rest, change, tasks, began)
                    took[worker][change].append(seconds)
                    if calls is not None:
                        calls.append(Call(worker, change, began, began_epoch, answered, seconds))
    finally:
        for connect in workers.values():
            connect.call("DELETE", f"/connectors/{CONNECTOR}")
    return took


def timed(connect: ConnectCluster, rest: Rest, change: str, tasks: int, began: float) -> tuple[float, float]:
    """One change through a worker's REST API, called now (``began``, monotonic): seconds until its REST API shows the
    connector and every task in the new state (a restart: once it has shown the connector RESTARTING), and until the
    call was answered."""
    method, path, target = CHANGES[change]
    answered = rest(connect, method, path.format(CONNECTOR), None, began)
    restarted = change != "restart"
    reached = all_in(target, tasks)
    last = b""
    while time.monotonic() < began + CHANGE_BOUND_S:
        answer = connect.request("GET", f"/connectors/{CONNECTOR}/status")
        if answer.status == 200:
            status = answer.json()
            restarted = restarted or states(status)[0] == "RESTARTING"
            if restarted and reached(status):
                return time.monotonic() - began, answered
        last = answer.body
        time.sleep(POLL_S)
    raise ConnectError(f"{change} of {CONNECTOR}: not shown within {CHANGE_BOUND_S:g} s; last {last!r}")


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of sorted ``values`` (nearest rank)."""
    return values[min(len(values) - 1, int(len(values) * q))]


def report_changes(took: Took, ours: str, theirs: str, tasks: int) -> list[dict[str, Any]]:
    """Each change's p50 and p99 on both workers, and ``ours`` against ``theirs``; returns the table's rows (a cell
    of two figures as two columns)."""
    print(f"\nstatus changes: a connector of {tasks} tasks on each worker, each change until the worker's own REST API "
          f"shows it (ms)\n")
    print(f"| change | times | {theirs}: p50 / p99 | {ours}: p50 / p99 | ratio at p50 | ratio at p99 |")
    print("|---|---:|---:|---:|---:|---:|")
    every = {worker: [s for seconds in by_change.values() for s in seconds] for worker, by_change in took.items()}
    lines = [(change, {worker: took[worker][change] for worker in took}) for change in CHANGES]
    rows = []
    for change, seconds in [*lines, ("every change", every)]:
        a, b = sorted(seconds[theirs]), sorted(seconds[ours])
        rows.append({"change": change, "times": len(b), f"{theirs}: p50 (ms)": 1000 * quantile(a, 0.5),
                     f"{theirs}: p99 (ms)": 1000 * quantile(a, 0.99), f"{ours}: p50 (ms)": 1000 * quantile(b, 0.5),
                     f"{ours}: p99 (ms)": 1000 * quantile(b, 0.99),
                     "ratio at p50": quantile(b, 0.5) / quantile(a, 0.5),
                     "ratio at p99": quantile(b, 0.99) / quantile(a, 0.99)})
        print(f"| {change} | {len(b)} | {1000 * quantile(a, 0.5):.0f} / {1000 * quantile(a, 0.99):.0f} | "
              f"{1000 * quantile(b, 0.5):.0f} / {1000 * quantile(b, 0.99):.0f} | "
              f"{quantile(b, 0.5) / quantile(a, 0.5):.2f}x | {quantile(b, 0.99) / quantile(a, 0.99):.2f}x |")
    return rows


def report_stages(calls: list[tuple[Call, float | None]], ours: str, theirs: str) -> None:
    """Each change's way on both workers, with when its last status reached the worker's producer (its record's
    timestamp: for the pod, the sidecar's producer; None: not found): the median of each stage, and the three slowest
    changes in their stages (ms from the call)."""
    print("\nstatus changes in stages (ms from the call): the call answered; the change's last status handed to a "
          "producer (its record's timestamp: the worker's own producer, for the pod the sidecar's); shown in the "
          "worker's REST API\n")
    print("| change | worker | answered p50 | handed to a producer p50 | then shown p50 | the three slowest: answered "
          "/ handed to a producer / shown |")
    print("|---|---|---:|---:|---:|---|")
    for change in CHANGES:
        for worker in (theirs, ours):
            ways = [(call.answered_s, written, call.shown_s) for call, written in calls
                    if call.worker == worker and call.change == change]
            if not ways:
                continue
            known = [(answered, written, shown) for answered, written, shown in ways if written is not None]
            slowest = sorted(ways, key=lambda way: way[2])[-3:]
            to_producer = ms(statistics.median(w for _, w, _ in known)) if known else "-"
            to_rest = ms(statistics.median(s - w for _, w, s in known)) if known else "-"
            print(f"| {change} | {worker} | {ms(statistics.median(way[0] for way in ways))} | {to_producer} | "
                  f"{to_rest} | {', '.join(f'{ms(a)} / {ms(w)} / {ms(s)}' for a, w, s in slowest)} |")


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.0f}"
