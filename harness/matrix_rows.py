"""One row of the fault matrix: fresh connectors set up on both sides of the bed, the workload's steps sent to both at
the same moments while the fault runs, then every key the workload touched judged in every view on each side until
it is right and the topic is quiet, or the bound passes.

For each side: the keys lost and stale at the end, the seconds from the fault's end until every key was right (for
good: the start of the last stretch in which all were), and each timed step's seconds until every worker's REST API
showed it. The matrix's module ``bench/fault_matrix.py`` prints the rows; tests/test_fault_matrix.py asserts them.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from status_store.connect.model import TaskId, task_key

from .java_process import wait_until
from .matrix_bed import POD, Bed, Side, together
from .matrix_faults import Fault, Profile
from .matrix_keep import RowKeep
from .matrix_views import LatencyWatch, Verdict, judge, rest_found
from .matrix_workload import REST_BOUND_S, TASKS, Step, Workload, call

# The steps go this far into the fault, and no further than 80 % of it, at most this far apart; before a fault that
# takes Kafka from everyone, this far apart.
LEAD_S, MAX_SPACING_S, BEFORE_SPACING_S = 0.5, 1.0, 0.3
SETUP_BOUND_S = 120.0
LOOK_INTERVAL_S = 0.5


@dataclass
class SideResult:
    """What one side ended with."""

    lost: dict[str, list[str]]
    stale: dict[str, list[str]]
    unanswered: list[str]
    right_after_s: float | None
    shown_s: dict[str, float | None]
    errors: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        """Every key right in every view, each view answering, every step made."""
        return not (self.lost or self.stale or self.unanswered or self.errors)


@dataclass
class Row:
    """One fault, both sides."""

    fault: Fault
    line: str
    keys: int
    sides: dict[str, SideResult]
    notes: list[str]
    # The machine's load average over a minute as the row began (other work shares the cores).
    load: float


def set_up(side: Side, workload: Workload) -> None:
    """The workload's connectors in their state before the fault, shown by every worker of the side."""
    for method, path, body in workload.setup():
        call(side.connect, method, path, body)

    def shown() -> bool:
        return all(rest_found(worker.request, [name]) == before.by_key(name)
                   for worker in side.connect.running() for name, before in workload.before().items())

    wait_until(shown, SETUP_BOUND_S, f"{side.name}: the workload's connectors set up", interval=0.5)


def tear_down(side: Side, workload: Workload) -> list[str]:
    """Every connector of the row deleted (what fails is noted, never raised)."""
    failed = []
    for name in workload.names.values():
        try:
            call(side.connect, "DELETE", f"/connectors/{name}", None)
        except (AssertionError, OSError) as e:
            if "404" not in str(e):
                failed.append(f"{side.name}: deleting {name}: {e}")
    return failed


class Driver:
    """The steps sent to both sides at the same moments: each side's calls to a connector in order, on a thread per
    connector and side, so a slow answer holds up no other connector and no other side."""

    def __init__(self, bed: Bed, watches: dict[str, LatencyWatch]) -> None:
        self.bed, self.watches = bed, watches
        self._pools = {name: ThreadPoolExecutor(len(Workload.ROLES), thread_name_prefix=f"steps-{name}")
                       for name in bed.sides}
        self._lanes: dict[tuple[str, str], threading.Lock] = {}
        self.calls: list[tuple[str, Step, Future[None]]] = []

    def send(self, step: Step) -> None:
        for name, side in self.bed.sides.items():
            lane = self._lanes.setdefault((name, step.connector), threading.Lock())
            self.calls.append((name, step, self._pools[name].submit(self._call, lane, side, step)))

    def _call(self, lane: threading.Lock, side: Side, step: Step) -> None:
        with lane:
            at = time.monotonic()
            call(side.connect, step.method, step.path, step.body)
            if step.timed:
                self.watches[side.name].called(step, at)

    def finish(self) -> dict[str, list[str]]:
        """Wait for every call; each side's calls that failed."""
        errors: dict[str, list[str]] = {name: [] for name in self.bed.sides}
        for name, step, future in self.calls:
            try:
                future.result(REST_BOUND_S * len(self.calls))
            except AssertionError as e:
                errors[name].append(f"step {step.role}: {e}")
        for pool in self._pools.values():
            pool.shutdown()
        return errors


def at(moment: float, action: Callable[[], None]) -> None:
    """Run ``action`` at ``moment`` (monotonic), or now if it has passed."""
    time.sleep(max(0.0, moment - time.monotonic()))
    action()


def send_steps(driver: Driver, steps: list[Step], began: float, lead: float, spacing: float) -> None:
    """Step ``n`` sent at ``began + lead + n * spacing``."""
    for number, step in enumerate(steps):
        at(began + lead + number * spacing, functools.partial(driver.send, step))


def run_faults(bed: Bed, fault: Fault, scale: float, began: float) -> float:
    """The fault's actions at their offsets from ``began``; when the fault ended (monotonic)."""
    for offset, action in fault.actions:
        at(began + scale * offset, functools.partial(action, bed))
    return max(time.monotonic(), began + fault.span(scale))


def run_row(bed: Bed, fault: Fault, profile: Profile, prefix: str, keep: Path | None = None) -> Row:
    """One row: the fault with the workload on both sides, then the verdict. With ``keep``, what the verdict saw goes
    into a file of its own in that folder (``matrix_keep.RowKeep``)."""
    kept = RowKeep(fault.name, prefix, time.monotonic())
    notes = bed.ready(profile.ready_s)
    undone_before = bed.sides[POD].late_writes_undone()
    stalls_before = {name: len(side.tail.stalls) if side.tail is not None else 0 for name, side in bed.sides.items()}
    load = os.getloadavg()[0]
    workload = Workload(prefix)
    together(functools.partial(set_up, side, workload) for side in bed.sides.values())
    watches = {name: LatencyWatch(side.running_apis) for name, side in bed.sides.items()}
    driver = Driver(bed, watches)
    steps = workload.steps()
    try:
        if fault.steps_before:
            if fault.prepare is not None:
                fault.prepare(bed)
            send_steps(driver, steps, time.monotonic(), 0.0, BEFORE_SPACING_S)
            step_errors = driver.finish()
            fault_end = run_faults(bed, fault, profile.scale, time.monotonic())
        else:
            spacing = min(MAX_SPACING_S, max(0.0, 0.8 * fault.span(profile.scale) - LEAD_S) / (len(steps) - 1))
            began = time.monotonic()
            sender = threading.Thread(target=send_steps, args=(driver, steps, began, LEAD_S, spacing), name="steps")
            sender.start()
            fault_end = run_faults(bed, fault, profile.scale, began)
            sender.join()
            step_errors = driver.finish()
        kept.fault_end = fault_end
        verdicts, right_since = settle(bed, workload, profile, fault_end, kept.look)
    finally:
        shown = {name: watch.stop() for name, watch in watches.items()}
        if keep is not None:
            for name, side in bed.sides.items():
                kept.topic(name, side.tail, workload.expected())
            for index, sidecar in enumerate(bed.sides[POD].sidecars):
                kept.sidecar_output(keep, index, sidecar.service)
            kept.write(keep)
        bed.heal()
    for index, (before, after) in enumerate(zip(undone_before, bed.sides[POD].late_writes_undone(), strict=True)):
        # A sidecar restarted by the fault counts from 0 again.
        if (undone := after - before if after >= before else after) > 0:
            notes.append(f"pod sidecar {index}: undid {undone:g} late write(s) (a write it gave up that landed over "
                         "a newer record of its key)")
    for name, side in bed.sides.items():
        # The harness's own consumer of the side's topic, not the side: said, so that a topic view's verdict is read
        # with it (``topic_tail.TopicTail``).
        stalls = side.tail.stalls if side.tail is not None else []
        notes += [f"{name} topic tail: {stall}" for stall in stalls[stalls_before[name]:]]
    for name, verdict in verdicts.items():
        notes += connect_logged(bed.sides[name], workload, [*verdict.lost, *verdict.stale])
    for side in bed.sides.values():
        notes += tear_down(side, workload)
    results = {name: SideResult(verdict.lost, verdict.stale, verdict.unanswered,
                                None if (since := right_since[name]) is None else max(0.0, since - fault_end),
                                shown[name], step_errors[name])
               for name, verdict in verdicts.items()}
    return Row(fault, bed.line.version, len(workload.expected()), results, notes, load)


def connect_logged(side: Side, workload: Workload, wrong: list[str]) -> list[str]:
    """For each connector with a task key wrong at the end: what each of the side's workers logged of it, which
    tells a status Connect dropped (the task started) from one it never got as far as writing (the task never
    started; Connect still retrying its connector's task configs, ``matrix_faults.CONNECT_RETRY_MAX_S``)."""
    said = []
    for index, worker in enumerate(side.connect.workers):
        try:
            log = worker.process.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            said.append(f"{side.name} worker {index}: its log unread ({e})")
            continue
        for name in workload.names.values():
            tasks = [str(task) for number in range(TASKS) if task_key(task := TaskId(name, number)) in wrong]
            if tasks:
                started = [task for task in tasks if f"Creating task {task} (" in log]
                retries = log.count(f"Failed to reconfigure connector's tasks ({name})")
                said.append(f"{side.name} worker {index}: of {', '.join(tasks)} (wrong) started "
                            f"{', '.join(started) or 'none'}; \"Failed to reconfigure connector's tasks ({name})\" "
                            f"logged {retries} times")
    return said


def settle(bed: Bed, workload: Workload, profile: Profile, fault_end: float,
           looked_at: Callable[[float, dict[str, Verdict]], None] = lambda at, verdicts: None
           ) -> tuple[dict[str, Verdict], dict[str, float | None]]:
    """Look at every view of both sides until every key is right on both and no record of them has arrived for
    ``quiet_s``, or ``settle_s`` after the fault's end: the last verdicts, and since when each side was right. Each
    look's verdicts go to ``looked_at`` with the look's start."""
    expected = workload.expected()
    connectors = list(workload.names.values())
    right_since: dict[str, float | None] = {name: None for name in bed.sides}
    while True:
        now = time.monotonic()
        # Both sides looked at together: a look is as long as one side's slowest view (each "right since" is the
        # look's start, so a shorter look judges the time until right more finely).
        with ThreadPoolExecutor(len(bed.sides)) as pool:
            looked = {name: pool.submit(side.views, expected, connectors) for name, side in bed.sides.items()}
            verdicts = {name: judge(expected, future.result()) for name, future in looked.items()}
        looked_at(now, verdicts)
        for name, verdict in verdicts.items():
            right_since[name] = (right_since[name] or now) if verdict.right else None
        quiet = all(side.tail is not None and now - side.tail.latest_arrival(expected) >= profile.quiet_s
                    for side in bed.sides.values())
        if (all(verdict.right for verdict in verdicts.values()) and quiet) or now > fault_end + profile.settle_s:
            return verdicts, right_since
        time.sleep(LOOK_INTERVAL_S)
