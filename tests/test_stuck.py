"""Workers that hang in the group (``act/stuck.py``), on a clock of the test's own, the probes' answers as a real
Connect 4.4.0 worker gives them (tests/test_stuck_workers_live.py: a 500 with its message after 10 s while its herder
is blocked, no answer at all while SIGSTOPped, 200 otherwise); and what a reply of ``GET /health`` says
(``health_watch._probe``); and that the watch and the group's reads go on after an error of their own."""

from __future__ import annotations

import logging
import time

import pytest

from status_store.act.group import GroupWatch
from status_store.act.health_watch import HealthWatch, _probe
from status_store.act.stuck import Probe, Stuck, WorkerHealth
from status_store.act.worker_rest import Reply, Trouble, WorkerRest
from status_store.act.workers import Liveness, Member
from status_store.client import change_line
from tests.helpers import eventually
from tests.test_workers import metadata

W = "w1:8083"
BLOCKED = ("Worker was unable to handle this request and may be unable to handle other requests. The worker is "
           "currently generating task configs for connector blocker, which began at 2026-11-29T00:16:15.882Z.")


def health() -> WorkerHealth:
    return WorkerHealth(bound_s=5.0, slow_s=2.0)


def test_a_herder_that_answers_500_is_stuck_from_the_first_bad_probe_until_a_200() -> None:
    h = health()
    h.asking(W, 0.0)
    h.answered(W, Probe.HEALTHY, 0.01, "ready", 0.01)
    # Blocked at 1: Connect answers 500 after 10 s, to each probe.
    h.asking(W, 1.0)
    assert h.stuck(W, 5.9) is None
    stuck = h.stuck(W, 6.0)  # no answer for the bound: stuck already, before the 500
    assert stuck is not None
    assert (stuck.since, stuck.probe) == (1.0, Probe.NO_ANSWER)
    h.answered(W, Probe.UNHEALTHY, 10.0, BLOCKED, 11.0)
    stuck = h.stuck(W, 11.0)
    assert stuck is not None
    assert (stuck.since, stuck.probe, stuck.message) == (1.0, Probe.UNHEALTHY, BLOCKED)
    h.asking(W, 12.0)
    h.answered(W, Probe.UNHEALTHY, 10.0, BLOCKED, 22.0)
    assert h.stuck_workers(22.0)[W].since == 1.0
    h.asking(W, 23.0)
    h.answered(W, Probe.HEALTHY, 0.01, "ready", 23.01)
    assert h.stuck(W, 23.01) is None
    assert h.stuck_workers(100.0) == {}


def test_a_worker_that_answers_nothing_is_stuck_once_its_probe_waits_for_the_bound() -> None:
    h = health()
    h.asking(W, 10.0)
    assert h.in_flight(W)
    assert h.stuck(W, 14.9) is None
    stuck = h.stuck(W, 15.0)
    assert stuck is not None
    assert (stuck.since, stuck.probe, stuck.message) == (10.0, Probe.NO_ANSWER, "no answer for 5 s")
    # Its timeout: still stuck, since the same probe's start.
    h.answered(W, Probe.NO_ANSWER, 15.0, "ReadTimeout: timed out", 25.0)
    stuck = h.stuck(W, 25.0)
    assert stuck is not None
    assert (stuck.since, stuck.probe) == (10.0, Probe.NO_ANSWER)


def test_a_refused_connection_shorter_than_the_bound_is_not_a_hang() -> None:
    h = health()
    h.asking(W, 0.0)
    h.answered(W, Probe.UNREACHABLE, 0.001, "ConnectError: refused", 0.001)
    h.asking(W, 1.0)
    h.answered(W, Probe.UNREACHABLE, 0.001, "ConnectError: refused", 1.001)
    assert h.stuck(W, 4.9) is None
    h.asking(W, 2.0)
    h.answered(W, Probe.STARTING, 0.01, "starting", 2.01)  # a restarted worker: its REST API up before its herder
    assert h.stuck(W, 100.0) is None


@pytest.mark.parametrize("probe", [Probe.STARTING, Probe.UNSUPPORTED, Probe.UNAUTHORIZED, Probe.TLS_FAILED])
def test_what_is_no_evidence_of_a_hang_never_makes_a_worker_stuck(probe: Probe) -> None:
    h = health()
    for second in range(0, 60, 5):
        h.asking(W, float(second))
        h.answered(W, probe, 0.01, None, second + 0.01)
    assert h.stuck_workers(60.0) == {}


@pytest.mark.parametrize("probe", [Probe.UNSUPPORTED, Probe.UNAUTHORIZED, Probe.TLS_FAILED])
def test_an_answer_that_is_no_evidence_after_bad_ones_starts_the_count_again(probe: Probe) -> None:
    # Refused while a worker restarts, then a 404 (or credentials refused): not stuck, then, or once the bound
    # has passed since the refusals (this asked a WorkerHealth in a state it had no answer for, and raised).
    h = health()
    h.asking(W, 0.0)
    h.answered(W, Probe.UNREACHABLE, 0.001, "ConnectError: refused", 0.001)
    h.asking(W, 1.0)
    h.answered(W, probe, 0.01, "HTTP 404", 1.01)
    assert h.stuck(W, 6.0) is None
    assert h.stuck_workers(100.0) == {}
    h.asking(W, 101.0)
    h.answered(W, Probe.UNREACHABLE, 0.001, "ConnectError: refused", 101.001)
    assert h.stuck(W, 105.9) is None
    stuck = h.stuck(W, 106.0)
    assert stuck is not None
    assert (stuck.since, stuck.probe) == (101.0, Probe.UNREACHABLE)


def test_a_slow_answer_is_shown_slow_and_is_not_stuck() -> None:
    h = health()
    h.asking(W, 0.0)
    h.answered(W, Probe.HEALTHY, 3.0, "ready", 3.0)
    assert h.views()[W].probe is Probe.SLOW
    assert h.stuck(W, 100.0) is None


def test_workers_that_left_the_group_are_forgotten() -> None:
    h = health()
    h.asking(W, 0.0)
    h.asking("w2:8083", 0.0)
    changes = h.changes
    h.keep(["w2:8083"])
    assert list(h.workers) == ["w2:8083"]
    assert h.changes == changes + 1


@pytest.mark.parametrize(("reply", "probe", "message"), [
    (Reply(200, {"status": "healthy", "message": "Worker has completed startup"}), Probe.HEALTHY,
     "Worker has completed startup"),
    (Reply(503, {"status": "starting", "message": "Worker is still starting up."}), Probe.STARTING,
     "Worker is still starting up."),
    (Reply(500, {"status": "unhealthy", "message": BLOCKED}), Probe.UNHEALTHY, BLOCKED),
    (Reply(502, None), Probe.UNHEALTHY, "HTTP 502"),
    (Reply(404, {"error_code": 404, "message": "HTTP 404 Not Found"}), Probe.UNSUPPORTED, "HTTP 404"),
    (Reply(None, None, "ReadTimeout: timed out", timed_out=True), Probe.NO_ANSWER, "ReadTimeout: timed out"),
    (Reply(None, None, "ConnectError: [Errno 111] Connection refused"), Probe.UNREACHABLE,
     "ConnectError: [Errno 111] Connection refused"),
    (Reply(401, None, "HTTP 401", Trouble.UNAUTHORIZED), Probe.UNAUTHORIZED, "HTTP 401"),
    (Reply(None, None, "TLS handshake failed: x", Trouble.TLS), Probe.TLS_FAILED, "TLS handshake failed: x"),
])
def test_what_a_reply_of_get_health_says(reply: Reply, probe: Probe, message: str | None) -> None:
    assert _probe(reply) == (probe, message)


def test_watch_says_when_a_worker_is_stuck_and_when_it_answers_again() -> None:
    stuck = {"kind": "worker", "worker_id": W, "up": True, "stuck": True, "since": 0.0, "probe": "unhealthy",
             "message": "generating task configs for connector c", "timestamp": 0}
    assert change_line("worker", stuck) == ("1970-01-01T00:00:00Z  worker w1:8083  stuck in the Connect group: "
                                            "unhealthy: generating task configs for connector c")
    back = {**stuck, "stuck": False, "since": None, "probe": None, "message": None}
    assert change_line("worker", back) == "1970-01-01T00:00:00Z  worker w1:8083  answers again"


async def test_the_watch_goes_on_after_an_error_of_its_own(caplog: pytest.LogCaptureFixture) -> None:
    # Before, the first error ended the watch's task, silently: no worker was asked or flagged again.
    liveness = Liveness()
    liveness.read([Member("m-a", metadata("http://127.0.0.1:1/"))], time.time())  # nothing listens: refused
    rest = WorkerRest(2.0)
    rest.start()
    told: list[dict[str, Stuck]] = []
    watch = HealthWatch(liveness, rest, WorkerHealth(bound_s=0.0, slow_s=5.0), 0.01, 2.0,
                        lambda became, cleared, at: told.append(became))
    keep = watch.health.keep
    raised = 0

    def keep_raising_once(workers: object) -> None:
        nonlocal raised
        if raised == 0:
            raised += 1
            raise RuntimeError("a bug of ours")
        keep(workers)  # type: ignore[arg-type]

    watch.health.keep = keep_raising_once  # type: ignore[method-assign]
    caplog.set_level(logging.ERROR, "status_store.act.health_watch")
    watch.start()
    try:
        await eventually(lambda: bool(told), 5.0)
    finally:
        await watch.stop()
        await rest.stop()
    assert raised == 1
    assert [list(became) for became in told] == [["127.0.0.1:1"]]
    assert told[0]["127.0.0.1:1"].probe is Probe.UNREACHABLE
    assert "Asking the workers for GET /health hit an error" in caplog.text
    assert "RuntimeError: a bug of ours" in caplog.text


async def test_the_group_reads_go_on_after_an_error_of_their_own(caplog: pytest.LogCaptureFixture) -> None:
    # Before, the first error ended the reads' task, silently: the group's members stayed as last read, for good.
    reads = 0

    async def read_raising_once() -> None:
        nonlocal reads
        reads += 1
        if reads == 1:
            raise RuntimeError("a bug of ours")

    watch = GroupWatch("connect-cluster", "127.0.0.1:1", {}, 0.01, Liveness(), lambda left, came, at: None,
                       lambda: lambda: ())
    watch.read_once = read_raising_once  # type: ignore[method-assign]
    caplog.set_level(logging.ERROR, "status_store.act.group")
    watch.start()
    try:
        await eventually(lambda: reads >= 3, 5.0)
    finally:
        await watch.stop()
    assert "Reading the Connect group connect-cluster (group.id) hit an error" in caplog.text
    assert "RuntimeError: a bug of ours" in caplog.text
