"""What ``bench.connect_outage`` measured, and its report: the outages' table, the bursts' and the status changes', each
printed as Markdown and returned by column name (``--json``)."""

from __future__ import annotations

import datetime
import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.status_changes import Call, Took, report_changes, report_stages
from harness.kafka_proxy import Answer
from harness.topic_tail import PARTITIONS

CONNECT = "Connect worker"
POD = "the pod (agent + sidecar)"


@dataclass
class WorkerRun:
    """One worker through one run."""

    produce_requests: int
    records: int  # records of the run's keys read from its topic since the outage began
    durable_s: float | None  # every latest status durable, after recovery (None: some key stale)
    rest_durable_s: float | None  # the keys that are not stale
    stale: list[str]  # each key whose last record is not in its latest state, with that record's state
    kept: list[str]  # each key whose last record, older than the outage, is in its latest state
    shown_stale: list[str]  # what the worker's own REST API shows in another state than the steps left it in
    rest_p99_s: float  # the worker's REST API during the outage
    rest_max_s: float
    answered_in_outage: int  # steps answered before the outage ended
    last_answered_s: float


@dataclass
class Run:
    """One outage."""

    keys: int
    steps: int
    # How long the recovering AlterConfigs request took (its answer comes once the controller has the change).
    alter_s: float
    workers: dict[str, WorkerRun] = field(default_factory=dict)


@dataclass
class Burst:
    """One worker's burst: its connectors created, then deleted (a revocation: Connect flushes its status store
    before that rebalance goes on)."""

    seconds: float
    records: int
    delete_s: float
    # The deletions' rebalances, from the worker's own log (None: the log not read): the time its tasks took to stop
    # (the scripted task ends once its poll's sleep of 200 ms is over), and Connect's flushes of its status store.
    phases: RebalancePhases | None = None
    # The creation's parts (None: not measured).
    creation: CreationPhases | None = None
    # The deletion's parts (None: not measured).
    deletion: DeletionTimes | None = None


@dataclass(frozen=True)
class DeletionTimes:
    """When a deletion burst's parts ended, in seconds from the first delete request (the log's parts, summed over
    the revocations, are in ``Burst.phases``)."""

    requests_s: float  # every delete request answered (each once Connect wrote the connector's config tombstone)
    tombstones_s: float | None  # every connector's and task's status tombstone read from the status topic (None: not
    # every one read)
    # The Produce requests of the worker's status writes meanwhile (the pod's worker's and sidecar's), as the
    # proxies in front of the brokers saw them (None: not timed).
    produce: list[Answer] | None = None


@dataclass(frozen=True)
class CreationPhases:
    """Where a creation burst's time went, each in seconds from the first create request."""

    configs_s: float  # every create request answered (the connectors' configs written to the config topic)
    rebalances: int  # the worker's rebalances meanwhile ('Joined group at generation' in its log)
    tasks_started_s: float | None  # the last task of the burst started ('Source task finished initialization and
    # start' in its log: its RUNNING is put right after); None: not found in the log
    durable_s: float | None  # every connector's and task's RUNNING read from the status topic (the tail's first
    # RUNNING record of each key); None: some key's not read
    # CPU seconds used until every one RUNNING in the REST API: "worker" (its JVM), "sidecar" (the pod's), "machine"
    # (every process's, the brokers' and the other worker's included).
    cpu_s: dict[str, float] = field(default_factory=dict)


def creation_phases(lines: Iterable[str], began_epoch: float, connectors: Iterable[str]
                    ) -> tuple[int, float | None]:
    """From a Connect worker's log lines since a creation burst began (``began_epoch``, the machine's clock, which
    log4j's timestamps share): its rebalances, and when the last of ``connectors``' tasks started (s after)."""
    names = set(connectors)
    rebalances = 0
    started: float | None = None
    for line in lines:
        if "Joined group at generation" in line:
            rebalances += 1
        elif "Source task finished initialization and start" in line and (task := _TASK_ID.search(line)):
            found = _LOG_TIME.match(line)
            if task.group(1) in names and found is not None:
                at = datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - began_epoch
                started = at if started is None else max(started, at)
    return rebalances, started


@dataclass(frozen=True)
class RebalancePhases:
    """The revocations of a worker's deletions, from its log: how many, and their parts summed."""

    revocations: int
    stopping_s: float  # 'Stopping task' (the first of a revocation) to 'Finished stopping tasks ...'
    flushing_s: float  # 'Finished stopping tasks ...' to 'Finished flushing status backing store ...'
    # Of the stopping: until the last of the revocation's tasks closed its producer ('Closing the Kafka producer' of a
    # 'connector-producer-'), which a source task does once its poll returned (the scripted task's sleep of 200 ms):
    # the task's own time; the rest is Connect closing it and putting its status (the agent's hand-off, for the pod).
    polls_s: float = 0.0
    rebalances: int = 0  # the worker's rebalances ('Joined group at generation' in its log)
    # Each revocation's own figures (ms), in order: its flush, its tasks' polls, and the time from the flush of the
    # revocation before it to its first 'Stopping task' (None for the first): the rebalances between, the next
    # deletion's config read and its assignment.
    each: tuple[Revocation, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Revocation:
    """One revocation's parts, in ms (``RebalancePhases.each``)."""

    flush_ms: float
    polls_ms: float
    since_flush_ms: float | None


_LOG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_TASK_ID = re.compile(r"WorkerSourceTask\{id=(.+)-\d+\}")


def rebalance_phases(lines: Iterable[str]) -> RebalancePhases:
    """The revocations in a Connect worker's log lines (log4j's ``[%d] %p %m``): each from its first 'Stopping task'
    to 'Finished stopping tasks in preparation for rebalance' (the tasks stopping; of it, until the last task's
    producer closed: its poll's end), then to 'Finished flushing status backing store in preparation for rebalance'
    (``DistributedHerder``'s flush of its status store); and the rebalances."""
    stopping = flushing = polls = 0.0
    revocations = rebalances = 0
    began: datetime.datetime | None = None
    closed: datetime.datetime | None = None
    stopped: datetime.datetime | None = None
    flushed: datetime.datetime | None = None
    since_flush_ms: float | None = None
    polls_ms = 0.0
    each: list[Revocation] = []
    for line in lines:
        found = _LOG_TIME.match(line)
        if found is None:
            continue
        at = datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if "Joined group at generation" in line:
            rebalances += 1
        elif "Stopping task " in line and began is None:
            began, closed = at, None
            since_flush_ms = None if flushed is None else (at - flushed).total_seconds() * 1000
        elif "Closing the Kafka producer" in line and "connector-producer-" in line and began is not None:
            closed = at
        elif "Finished stopping tasks in preparation for rebalance" in line and began is not None:
            stopping += (at - began).total_seconds()
            polls_ms = ((closed or at) - began).total_seconds() * 1000
            polls += polls_ms / 1000
            began, stopped = None, at
        elif "Finished flushing status backing store in preparation for rebalance" in line and stopped is not None:
            flushing += (at - stopped).total_seconds()
            revocations += 1
            each.append(Revocation((at - stopped).total_seconds() * 1000, polls_ms, since_flush_ms))
            stopped, flushed = None, at
    return RebalancePhases(revocations, stopping, flushing, polls, rebalances, tuple(each))


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"


def report(runs: list[Run], bursts: list[dict[str, Burst]], changes: Took | None, brokers: int, connectors: int,
           tasks: int, outage_s: float, burst_connectors: int, sidecar_settings: dict[str, str],
           stages: list[tuple[Call, float | None]] | None = None,
           agent_options: dict[str, str] | None = None) -> dict[str, Any]:
    """Print the tables and the ratios; returns each table's rows by column name."""
    def given(values: dict[str, str]) -> str:
        return ", ".join(f"{key}={value}" for key, value in values.items()) or "its defaults"

    print(f"\nthe pod's sidecar with {given(sidecar_settings)}; its agent with {given(agent_options or {})}")
    found: dict[str, Any] = {"sidecar settings": sidecar_settings, "agent options": agent_options or {}}
    if runs:
        found["outages"] = report_outages(runs, brokers, connectors, tasks, outage_s)
    if bursts:
        found["bursts"] = report_bursts(bursts, burst_connectors, tasks)
    if changes:
        found["status changes"] = report_changes(changes, POD, CONNECT, tasks)
        if stages:
            report_stages(stages, POD, CONNECT)
    return found


def report_outages(runs: list[Run], brokers: int, connectors: int, tasks: int, outage_s: float
                   ) -> list[dict[str, Any]]:
    """The outages' table and ratios; returns the table's rows (a cell of two figures as two columns)."""
    first = runs[0]
    print(f"{brokers} brokers (broker {brokers} stopped), status topics of {PARTITIONS} partitions and replication "
          f"factor {brokers}; {outage_s:g} s of min.insync.replicas={brokers} on both status topics; {connectors} "
          f"connectors x {tasks} tasks ({first.keys} status keys) on each worker, {first.steps} steps during the "
          f"outage\n")
    print("| run | worker | Produce requests during the outage | per second | records written since the outage "
          "began | every latest status durable after recovery (s) | keys not stale: durable after (s) | "
          "keys left stale (the topic) | stale as its REST API shows them | REST p99 / max in the outage (s) | "
          "steps answered in the outage (the last at s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    rows = []
    for number, run in enumerate(runs, 1):
        for name, worker in run.workers.items():
            rows.append({
                "run": number, "worker": name, "Produce requests during the outage": worker.produce_requests,
                "per second": worker.produce_requests / outage_s,
                "records written since the outage began": worker.records,
                "every latest status durable after recovery (s)": worker.durable_s,
                "keys not stale: durable after (s)": worker.rest_durable_s,
                "keys left stale (the topic)": len(worker.stale), "keys": run.keys,
                "stale as its REST API shows them": len(worker.shown_stale),
                "REST p99 in the outage (s)": worker.rest_p99_s, "REST max in the outage (s)": worker.rest_max_s,
                "steps answered in the outage": worker.answered_in_outage, "steps": run.steps,
                "the last answered at (s)": worker.last_answered_s})
            print(f"| {number} | {name} | {worker.produce_requests:,} | {worker.produce_requests / outage_s:,.1f} | "
                  f"{worker.records:,} | {seconds(worker.durable_s)} | {seconds(worker.rest_durable_s)} | "
                  f"{len(worker.stale)} of {run.keys} | {len(worker.shown_stale)} | {worker.rest_p99_s:.3f} / "
                  f"{worker.rest_max_s:.3f} | {worker.answered_in_outage} of {run.steps} "
                  f"({worker.last_answered_s:.1f}) |")
    print("\nKeys left stale (the state of their last record, and of their latest status):")
    for number, run in enumerate(runs, 1):
        for name, worker in run.workers.items():
            if worker.shown_stale:
                print(f"- run {number}, as {name}'s own REST API shows them: {', '.join(worker.shown_stale)}")
            if worker.stale:
                print(f"- run {number}, {name}'s topic: {', '.join(worker.stale)}")
            if worker.kept:
                print(f"- run {number}, {name}'s topic, not stale: the last record older than the outage, in the "
                      f"latest state (no write of the outage reached the topic for it): {', '.join(worker.kept)}")
    ratios = [run.workers[CONNECT].produce_requests / max(1, run.workers[POD].produce_requests) for run in runs]
    durable = [run.workers[POD].durable_s for run in runs]
    print(f"\nProduce requests of the Connect worker per request of the pod: "
          f"{', '.join(f'{r:,.1f}x' for r in ratios)} (median {statistics.median(ratios):,.1f}x; target >= 50x)")
    print(f"the pod: every latest status durable after recovery: {', '.join(seconds(d) for d in durable)} s (target "
          f"<= 1 s each, median <= 0.5 s); stale as its REST API shows them: "
          f"{', '.join(str(len(run.workers[POD].shown_stale)) for run in runs)} (target 0)")
    print(f"REST p99 in the outage, the pod against the Connect worker: "
          f"{', '.join(f'{run.workers[POD].rest_p99_s:.3f} / {run.workers[CONNECT].rest_p99_s:.3f}' for run in runs)}"
          f" s (target: no slower)")
    print(f"the recovering AlterConfigs request took {', '.join(f'{run.alter_s:.2f}' for run in runs)} s (the "
          f"time from recovery counts from its sending)")
    return rows


def report_bursts(bursts: list[dict[str, Burst]], burst_connectors: int, tasks: int) -> list[dict[str, Any]]:
    """Each burst, and the medians of both workers'; returns the table's rows."""
    print(f"\nthe burst: {burst_connectors} connectors x {tasks} tasks created at once on each worker, then all "
          f"deleted; the workers take turns at going first\n")
    print("| burst | worker | until every one RUNNING in its REST API (s) | status records written | per second | "
          "deleted until every one 404 (s) | revocations | of which tasks stopping (s) | of which status store "
          "flushes (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for number, burst in enumerate(bursts, 1):
        for name, one in burst.items():
            phases = one.phases
            rows.append({"burst": number, "worker": name, "until every one RUNNING in its REST API (s)": one.seconds,
                         "status records written": one.records, "per second": one.records / one.seconds,
                         "deleted until every one 404 (s)": one.delete_s,
                         "revocations": None if phases is None else phases.revocations,
                         "of which tasks stopping (s)": None if phases is None else phases.stopping_s,
                         "of which status store flushes (s)": None if phases is None else phases.flushing_s})
            parts = ("| | |" if phases is None else
                     f"| {phases.revocations} | {phases.stopping_s:.2f} | {phases.flushing_s:.2f} |")
            print(f"| {number} | {name} | {one.seconds:.2f} | {one.records:,} | {one.records / one.seconds:,.1f} | "
                  f"{one.delete_s:.2f} {parts}")
    for name in bursts[0]:
        created = statistics.median(burst[name].seconds for burst in bursts)
        deleted = statistics.median(burst[name].delete_s for burst in bursts)
        known = [phases for burst in bursts if (phases := burst[name].phases) is not None]
        of_which = (f" (of which tasks stopping {statistics.median(p.stopping_s for p in known):.2f} s, status store "
                    f"flushes {statistics.median(p.flushing_s for p in known):.2f} s)" if known else "")
        print(f"{name}: median {created:.2f} s until RUNNING, {deleted:.2f} s until deleted{of_which}")
    ratio = [burst[POD].seconds / burst[CONNECT].seconds for burst in bursts]
    deleted_ratio = [burst[POD].delete_s / burst[CONNECT].delete_s for burst in bursts]
    print(f"the pod against the Connect worker: until RUNNING {', '.join(f'{r:.2f}x' for r in ratio)} "
          f"({median_with_interval(ratio)}), until deleted {', '.join(f'{r:.2f}x' for r in deleted_ratio)} "
          f"({median_with_interval(deleted_ratio)})")
    report_creations(bursts)
    report_deletions(bursts)
    return rows


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """The order statistics that bound the median of what ``values`` sample with at least ``confidence`` (the sign
    test's interval: no assumption about the bursts' spread), as (low, high, the coverage they give); None when there
    are too few values for it (fewer than 6 at 95 %). A target within the interval is neither met nor missed by the
    run: its bursts cannot tell."""
    n = len(values)
    ordered = sorted(values)
    # P(Binomial(n, 1/2) <= j), until it exceeds the tail either side may have.
    tail = (1 - confidence) / 2
    below, k = 0.0, 0
    while True:
        below_next = below + math.comb(n, k) / 2 ** n
        if below_next > tail:
            break
        below, k = below_next, k + 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k], 1 - 2 * below


def median_with_interval(ratios: list[float]) -> str:
    """"median 1.12x" with the interval of the median the ratios give (``median_interval``), when they give one."""
    text = f"median {statistics.median(ratios):.2f}x"
    interval = median_interval(ratios)
    if interval is not None:
        low, high, coverage = interval
        text += f"; {coverage:.0%} interval of the median {low:.2f}-{high:.2f}x"
    return text


def report_deletions(bursts: list[dict[str, Burst]]) -> None:
    """Where each deletion burst's time went on each worker, and the pod's gap in the same parts."""
    if any(one.deletion is None or one.phases is None for burst in bursts for one in burst.values()):
        return

    def row(one: Burst) -> str:
        times, phases = one.deletion, one.phases
        assert times is not None
        assert phases is not None
        return (f"{times.requests_s:.2f} | {phases.rebalances} | {phases.revocations} | {phases.polls_s:.2f} | "
                f"{phases.stopping_s - phases.polls_s:.2f} | {phases.flushing_s:.2f} | "
                f"{optional(times.tombstones_s)} | {one.delete_s:.2f}")

    print_bursts(bursts, "the deletions, in parts: the delete requests answered, every status tombstone read from its "
                 "topic, every one 404 in its REST API (s from the first delete request); summed over the revocations "
                 "(its log): the tasks stopping until their polls ended (the last task's producer closed), the rest of "
                 "their stop, the status store's flushes",
                 ["requests answered", "rebalances", "revocations", "polls ending", "rest of the stops", "flushes",
                  "every tombstone in the topic", "every one 404"], row)
    parts: dict[str, list[float]] = {what: [] for what in deletion_parts(bursts[0][POD])}
    for burst in bursts:
        pod, stock = deletion_parts(burst[POD]), deletion_parts(burst[CONNECT])
        for what, mine in pod.items():
            if mine is not None and (theirs := stock[what]) is not None:
                parts[what].append(mine - theirs)
    print_gaps("the pod's deletion gap", parts)
    # The tasks' polls are the scripted task's sleep, which a stop waits out on both workers; where in its 200 ms a
    # deletion finds each task is chance, and moves a burst by up to a second either way.
    less = [less_polls(burst[POD]) / less_polls(burst[CONNECT]) for burst in bursts]
    print(f"until deleted, less the tasks' polls, the pod against the Connect worker: "
          f"{', '.join(f'{r:.2f}x' for r in less)} ({median_with_interval(less)})")
    print_revocations(bursts)
    print_produce_answers(bursts)


def print_produce_answers(bursts: list[dict[str, Burst]]) -> None:
    """Each worker's Produce requests of its status writes during the deletions, every burst's together: the
    broker's answer, and the requests sent while another of their connection was unanswered (a broker reads a
    connection's next request once it has answered the one before: librdkafka, the sidecar's client, puts one partition
    in each request, where Java's client sends a broker every partition's records in one)."""
    for name in bursts[0]:
        answers = [answer for burst in bursts if (times := burst[name].deletion) is not None
                   and times.produce is not None for answer in times.produce]
        if not answers:
            continue
        behind = [answer.seconds * 1000 for answer in answers if answer.behind]
        alone = [answer.seconds * 1000 for answer in answers if not answer.behind]
        print(f"{name}, Produce requests of its status writes during the deletions (as the brokers' proxies saw them): "
              f"{len(answers)}; answered {median_ms(alone)} at the median when sent alone on their connection, "
              f"{len(behind)} sent while another of their connection was unanswered, answered {median_ms(behind)}")


def median_ms(values: list[float]) -> str:
    """"6.1 ms", or "-" for none."""
    return f"{statistics.median(values):.1f} ms" if values else "-"


# A revocation whose tasks' polls took this long (ms) waited out nearly a whole poll of the scripted task (a sleep of
# 200 ms): it began just after their polls had begun.
WHOLE_POLL_MS = (150.0, 250.0)


def print_revocations(bursts: list[dict[str, Burst]]) -> None:
    """Each worker's revocations over every burst, by their medians: the flush, the time from the flush of the
    revocation before (the rebalances between, the next deletion's config read, its assignment), the tasks' polls; and
    how many waited out nearly a whole poll. The connectors of a burst were created at once, so their tasks' polls run
    nearly in phase, and each revocation begins some ms after the one before it ended, at a poll's end: a few ms more a
    revocation can move the next one past its tasks' poll boundary, to wait out nearly a whole poll."""
    low, high = WHOLE_POLL_MS
    for name in bursts[0]:
        each = [revocation for burst in bursts if (phases := burst[name].phases) is not None
                for revocation in phases.each]
        since = [r.since_flush_ms for r in each if r.since_flush_ms is not None]
        if not each or not since:
            continue
        whole = sum(1 for r in each if low <= r.polls_ms < high)
        flush = statistics.median(r.flush_ms for r in each)
        polls = statistics.median(r.polls_ms for r in each)
        print(f"{name}, per revocation (median of {len(each)}): flush {flush:.0f} ms, from the flush of the revocation "
              f"before {statistics.median(since):.0f} ms, the tasks' polls {polls:.0f} ms; polls of "
              f"{low:.0f}-{high:.0f} ms (nearly a whole poll): {whole} of {len(each)}")


def print_bursts(bursts: list[dict[str, Burst]], intro: str, columns: list[str], row: Callable[[Burst], str],
                 last_left: bool = False) -> None:
    """A table of each burst on each worker after ``intro``: its number, the worker, then ``columns`` (``row``'s cells,
    right-aligned figures; the last left-aligned if ``last_left``)."""
    print(f"\n{intro}\n")
    print("| burst | worker | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * (len(columns) - 1) + ("---|" if last_left else "---:|"))
    for number, burst in enumerate(bursts, 1):
        for name, one in burst.items():
            print(f"| {number} | {name} | {row(one)} |")


def print_gaps(title: str, parts: dict[str, list[float]]) -> None:
    """Each part's gaps, burst by burst (seconds), in ms with their median; a part with none is left out."""
    for what, gaps in parts.items():
        if gaps:
            print(f"{title}, {what}: {', '.join(f'{gap * 1000:+.0f}' for gap in gaps)} ms (median "
                  f"{statistics.median(gaps) * 1000:+.0f} ms)")


def less_polls(one: Burst) -> float:
    """A deletion burst's seconds less its tasks' polls."""
    assert one.phases is not None
    return one.delete_s - one.phases.polls_s


def deletion_parts(one: Burst) -> dict[str, float | None]:
    """A deletion burst's parts in seconds (see report_deletions)."""
    times, phases = one.deletion, one.phases
    assert times is not None
    assert phases is not None
    return {"requests answered": times.requests_s, "polls ending": phases.polls_s,
            "rest of the stops": phases.stopping_s - phases.polls_s, "flushes": phases.flushing_s,
            "every tombstone in the topic": times.tombstones_s, "every one 404": one.delete_s}


def report_creations(bursts: list[dict[str, Burst]]) -> None:
    """Where each creation burst's time went on each worker, and the pod's gap split in the same parts."""
    if any(one.creation is None for burst in bursts for one in burst.values()):
        return

    def row(one: Burst) -> str:
        part = one.creation
        assert part is not None
        cpu = " / ".join(f"{part.cpu_s[what]:.2f}" if what in part.cpu_s else "-"
                         for what in ("worker", "sidecar", "machine"))
        return (f"{part.configs_s:.2f} | {part.rebalances} | {optional(part.tasks_started_s)} | "
                f"{optional(part.durable_s)} | {one.seconds:.2f} | {cpu}")

    print_bursts(bursts, "the creations, in parts (seconds from the first create request): the create requests "
                 "answered; the worker's rebalances; its last task started (its log); every RUNNING read from its "
                 "status topic; every one RUNNING in its REST API",
                 ["requests answered", "rebalances", "last task started", "every RUNNING in the topic",
                  "in its REST API", "CPU s: its JVM / the sidecar / the machine"], row, last_left=True)
    # The pod's gap, burst by burst, in three parts: Connect's own start of the tasks (its herder, its rebalances);
    # the statuses' way to the topic after the last task started (the worker's put, for the pod the agent and the
    # sidecar); and from the topic to the REST API (the worker reading its topic, the bench's poll).
    parts: dict[str, list[float]] = {"tasks started": [], "then in the topic": [], "then in the REST API": []}
    for burst in bursts:
        pod, stock = creation_parts(burst[POD]), creation_parts(burst[CONNECT])
        if pod is not None and stock is not None:
            for gaps, mine, theirs in zip(parts.values(), pod, stock, strict=True):
                gaps.append(mine - theirs)
    for what in ("worker", "machine"):
        used = {name: statistics.median(one.creation.cpu_s.get(what, float("nan")) for burst in bursts
                                        if (one := burst[name]).creation is not None) for name in bursts[0]}
        print(f"CPU seconds of a creation burst, {what} (median): "
              f"{', '.join(f'{name} {seconds:.2f}' for name, seconds in used.items())}")
    sidecar = [one.creation.cpu_s["sidecar"] for burst in bursts
               if (one := burst[POD]).creation is not None and "sidecar" in one.creation.cpu_s]
    if sidecar:
        print(f"CPU seconds of a creation burst, the pod's sidecar (median): {statistics.median(sidecar):.2f}")
    print_gaps("the pod's gap", parts)


def creation_parts(one: Burst) -> tuple[float, float, float] | None:
    """A creation burst's three parts in seconds: until its last task started, then until every RUNNING was in the
    topic, then until the REST API showed every one; None when one is not known."""
    part = one.creation
    if part is None or part.tasks_started_s is None or part.durable_s is None:
        return None
    return part.tasks_started_s, part.durable_s - part.tasks_started_s, one.seconds - part.durable_s


def optional(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
