"""The fault matrix's faults (one row each) and the two time scales it runs at.

A fault is a schedule of actions on the bed (``matrix_bed.Bed``) at offsets from its start, in seconds of the full
scale. It ends when its last action is done (the broker registered again, the sidecars answering), except a
*lasting* fault (a sidecar that answers wrongly for good), which lasts until the row's verdict: its end, for the time
until every key is right, is the end of its ``window``. The workload's steps go while the fault runs, spread over
its first 80 %; for a fault that takes Kafka away from everyone they go just before it instead (Connect's REST API
cannot pause or create anything without Kafka, and a call that fails may still take effect later: the oracle would
not know what was asked), after its ``prepare`` action (the sidecars stopped while Kafka is away: Kafka is cut off
from the sidecars first, so that the steps' writes are pending there when the sidecars stop, as in the case this row
stands for).

``FULL``: the agent's and the sidecar's own defaults, the faults as named. ``QUICK``: the agent's times and the
sidecar's write bound a quarter of their defaults, and every fault a quarter as long: the same races, four times
sooner (the suite's subset; ``--quick``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .http_proxy import AnswerFault, Refusal
from .kafka_proxy import Fault as KafkaFault
from .matrix_bed import Bed

Action = Callable[[Bed], None]


@dataclass(frozen=True)
class Fault:
    """One row's fault: ``actions`` at offsets (full-scale seconds) from its start."""

    name: str
    what: str
    actions: tuple[tuple[float, Action], ...] = ()
    steps_before: bool = False
    prepare: Action | None = None
    lasting: bool = False
    window: float = 0.0

    def span(self, scale: float) -> float:
        """The steps' window: the fault's duration, or a lasting fault's window, at ``scale``."""
        return scale * max([self.window, *(at for at, _ in self.actions)])


# Connect's leader writes a new connector's task configs again after a failed write with a backoff that doubles from
# 250 ms to 60 s (DistributedHerder): Kafka away as a connector is created leaves its tasks with no config, so with no
# status, on stock workers and the pod's alike, until that retry. Connect's own time, not scaled by a profile: every
# profile's verdict bound covers it, and a rebalance after it on a loaded machine.
CONNECT_RETRY_MAX_S = 60.0


@dataclass(frozen=True)
class Profile:
    """A time scale: the agent's options, the sidecar's settings, the faults' scale, and the verdict's bounds."""

    name: str
    scale: float
    agent_options: dict[str, str] = field(default_factory=dict)
    sidecar_settings: dict[str, str] = field(default_factory=dict)
    # After the fault's end: how long every key may take to be right (a row whose keys are right ends as soon as
    # the topic is quiet: the bound costs only a row that stays wrong), and how long the topic must then stay quiet.
    settle_s: float = 2 * CONNECT_RETRY_MAX_S
    quiet_s: float = 10.0
    # How long the pod's agents may take to be back on their sidecars before a row.
    ready_s: float = 120.0


FULL = Profile("full (the agent's and the sidecar's defaults)", 1.0)
QUICK = Profile(
    "quick (the agent's times and the sidecar's write bound at a quarter of their defaults, the faults a quarter as "
    "long)", 0.25,
    {"fallback.after.ms": "3750", "lease.ms": "2500", "read.timeout.ms": "1250", "connect.timeout.ms": "250",
     "poll.interval.ms": "250", "probe.interval.ms": "1250", "quiet.timeout.ms": "7500", "stop.timeout.ms": "1250",
     "flush.timeout.ms": "30000"},
    {"status.storage.retry.delivery.timeout.ms": "2500"},
    quiet_s=4.0, ready_s=30.0)


def stopped(seconds: float, kafka_away: bool) -> Fault:
    """The sidecars stopped (SIGSTOP) for ``seconds``, the broker away meanwhile or not; both back together. With the
    broker away, Kafka is cut off from the sidecars before the steps (their writes pending there), and the cut ends
    once the broker is stopped."""
    def stop(bed: Bed) -> None:
        bed.pause_sidecars()
        if kafka_away:
            bed.stop_broker()
            bed.cut_sidecars(KafkaFault.NONE)

    def back(bed: Bed) -> None:
        bed.resume_sidecars()
        if kafka_away:
            bed.start_broker()

    suffix = "-kafka-away" if kafka_away else ""
    meanwhile = ", the broker stopped meanwhile (the sidecars cut off from it for the steps)" if kafka_away else ""
    return Fault(f"sidecar-stopped-{seconds:g}s{suffix}", f"the sidecars stopped (SIGSTOP) {seconds:g} s{meanwhile}",
                 ((0, stop), (seconds, back)), steps_before=kafka_away,
                 prepare=cut_sidecars_first if kafka_away else None)


def cut_sidecars_first(bed: Bed) -> None:
    bed.cut_sidecars(KafkaFault.BLACKHOLE)


def answering(fault: AnswerFault, what: str) -> Fault:
    """The sidecars' answers to the agents' writes wrong for good (``http_proxy.AnswerFault``)."""
    return Fault(f"answers-{fault.name.lower().replace('_', '-')}", what,
                 ((0, lambda bed: bed.misanswer(fault)),), lasting=True, window=20)


def cut(seconds: float, fault: KafkaFault) -> Fault:
    """Kafka cut off from the sidecars alone for ``seconds``; the workers reach it directly."""
    how = "black-holed" if fault is KafkaFault.BLACKHOLE else "refused"
    return Fault(f"kafka-cut-{seconds:g}s-{how}", f"Kafka cut off from the sidecars only, {seconds:g} s ({how})",
                 ((0, lambda bed: bed.cut_sidecars(fault)), (seconds, lambda bed: bed.cut_sidecars(KafkaFault.NONE))))


def worker_killed_in_outage(bed: Bed) -> None:
    bed.kill_workers(1)


def worker_stopped(bed: Bed) -> None:
    bed.stop_workers(1)


FAULTS = [
    Fault("none", "no fault (checks the oracle: both sides must end right)", window=10),
    cut(20, KafkaFault.BLACKHOLE),
    cut(90, KafkaFault.REFUSE),
    Fault("kafka-away-30s", "Kafka away for everyone 30 s (the broker stopped)",
          ((0, Bed.stop_broker), (30, Bed.start_broker)), steps_before=True),
    Fault("sidecar-killed", "the sidecars killed (SIGKILL), started again 5 s later",
          ((0, Bed.kill_sidecars), (5, Bed.start_sidecars))),
    Fault("sidecar-restarted-twice", "the sidecars killed and started again twice (at 0 s and 3 s, 10 s and 13 s)",
          ((0, Bed.kill_sidecars), (3, Bed.start_sidecars), (10, Bed.kill_sidecars), (13, Bed.start_sidecars))),
    *(stopped(seconds, kafka_away) for kafka_away in (False, True) for seconds in (5, 12, 30)),
    answering(AnswerFault.TRICKLE, "the sidecars' answers trickle (a byte every 3 s)"),
    answering(AnswerFault.RESET, "the sidecars' answers reset (a TCP RST after the sidecar took the request)"),
    answering(AnswerFault.WRONG_SHAPE, "a 200 of the wrong shape (accepted not a list)"),
    answering(AnswerFault.DEEP_JSON, "a 200 of JSON nested 100,000 deep"),
    answering(AnswerFault.WRITTEN_UNTRULY, "\"written\" for writes never forwarded"),
    answering(AnswerFault.PENDING_FOREVER, "\"pending\" for every write, and never an outcome"),
    Fault("answers-503", "503 for every request, for good",
          ((0, lambda bed: bed.refuse(Refusal.UNAVAILABLE)),), lasting=True, window=20),
    Fault("worker-killed-in-outage", "Kafka away for everyone 30 s, worker 1 of each side killed (SIGKILL) at 5 s",
          ((0, Bed.stop_broker), (5, worker_killed_in_outage), (30, Bed.start_broker)), steps_before=True),
    Fault("worker-stopped-sidecar-stopped", "worker 1's sidecar stopped (SIGSTOP) 20 s, worker 1 of each side "
          "stopped (SIGTERM) at 3 s", ((0, lambda bed: bed.pause_sidecars(1)), (3, worker_stopped),
                                       (20, lambda bed: bed.resume_sidecars(1)))),
]
BY_NAME = {fault.name: fault for fault in FAULTS}
# The rows that matter most: Connect 3.9's row set (the suite's subset is tests/test_fault_matrix.py's).
KEY_ROWS = ["sidecar-stopped-12s-kafka-away", "kafka-cut-20s-black-holed", "sidecar-killed", "answers-written-untruly",
            "answers-wrong-shape"]
