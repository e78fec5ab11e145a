"""The restart plan (``act/plan.py``) on a clock of the test's own, each request's outcome scripted by the test: no
event loop, no HTTP, no Kafka. The same plan against real Connect workers is tests/test_autorestart_live.py."""

from __future__ import annotations

import itertools
import re

import pytest

from status_store.act.plan import (
    MAX_IN_FLIGHT,
    UNKNOWN_IN_FLIGHT,
    Due,
    Exclusions,
    Phase,
    RateCap,
    RestartPlan,
    Result,
    Skip,
    Target,
    first_line,
)
from status_store.retry.backoff import AdditiveJitter

# No jitter: restart n waits exactly 10 s * 2^n, at most 80 s; a worker backs off 1 s * 2^n, at most 8 s.
BACKOFF = AdditiveJitter(10_000, 80_000, 2.0, 0.0)
WORKER_BACKOFF = AdditiveJitter(1_000, 8_000, 2.0, 0.0)
W = "w1:8083"
T0 = Target("c", 0)
CONFIG_ERROR = "org.apache.kafka.common.config.ConfigException: bad value\n\tat x.y(Z.java:1)"


def plan(max_restarts: int = 3, stable_s: float = 60.0, rate: float = 1000.0,
         exclusions: Exclusions | None = None) -> RestartPlan:
    return RestartPlan(BACKOFF, WORKER_BACKOFF, max_restarts, stable_s, exclusions or Exclusions(), RateCap(rate))


def step(p: RestartPlan, now: float) -> list[Due]:
    """What is due at ``now`` (after asserting nothing was due before it)."""
    return p.due(now)


def test_a_failure_is_restarted_after_the_initial_backoff_and_not_before() -> None:
    p = plan()
    assert p.failed(T0, W, "boom\n\tat a.b", 100.0) == 110.0
    assert p.due(109.999) == []
    (due,) = p.due(110.0)
    assert (due.target, due.worker, due.attempt, due.reason, due.failed_at) == (T0, W, 1, "boom", 100.0)
    assert p.targets[T0].phase is Phase.SENDING


def test_a_task_that_recovers_is_restarted_exactly_once() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.RESTARTED, 10.5)
    assert p.targets[T0].phase is Phase.WAITING  # the next one, should it still fail
    p.running(T0, 11.0)
    assert p.next_time() is None
    assert p.due(1000.0) == []
    assert p.attempts(T0, 12.0) == 1
    assert p.targets[T0].last_restart == 10.5


def test_running_read_while_the_request_is_in_flight_is_not_lost() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.running(T0, 10.2)  # the task ran before the worker answered 204
    p.sent(due, Result.RESTARTED, 10.5)
    assert p.targets[T0].phase is Phase.IDLE
    assert p.due(1000.0) == []


def test_a_task_failing_on_every_start_is_restarted_at_the_backoff_until_the_maximum() -> None:
    p = plan(max_restarts=3)
    p.failed(T0, W, "boom", 0.0)
    sent_at = []
    now = 0.0
    for restart in range(3):
        now = p.next_time() or 0.0
        (due,) = p.due(now)
        sent_at.append(now)
        p.sent(due, Result.RESTARTED, now)
        p.not_running(T0)
        # Failed again: the next restart is planned already; after the last, it gives up.
        assert p.failed(T0, W, "boom", now + 0.1) is (Skip.MAX_RESTARTS if restart == 2 else None)
    assert sent_at == [10.0, 30.0, 70.0]  # 10 s, then 20 s, then 40 s after each restart
    assert p.targets[T0].phase is Phase.GAVE_UP
    assert p.next_time() is None
    assert p.due(10_000.0) == []


def test_the_last_restart_gives_up_only_when_it_fails_again() -> None:
    p = plan(max_restarts=1)
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.RESTARTED, 10.0)
    assert p.targets[T0].phase is Phase.LAST
    assert p.failed(T0, W, "boom", 11.0) is Skip.MAX_RESTARTS
    assert p.targets[T0].phase is Phase.GAVE_UP
    assert p.failed(T0, W, "boom", 12.0) is None  # said once


def test_a_failure_read_while_the_last_restart_is_in_flight_gives_up_and_says_so_once() -> None:
    """A task failing on start, on a loaded worker: its FAILED is read before the worker answers the last restart.
    The plan gave up silently (no skip to count: status_restarts_skipped_total{reason="max_restarts"} stayed 0)."""
    p = plan(max_restarts=1)
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    assert p.failed(T0, W, "boom", 10.2) is None  # in flight: noted, not planned
    assert p.sent(due, Result.RESTARTED, 10.5) is Skip.MAX_RESTARTS
    assert (p.targets[T0].phase, p.targets[T0].skipped) == (Phase.GAVE_UP, Skip.MAX_RESTARTS)
    assert p.failed(T0, W, "boom", 11.0) is None  # said once
    assert p.due(10_000.0) == []


def test_the_count_is_reset_once_the_task_has_run_for_the_stable_period() -> None:
    p = plan(max_restarts=2, stable_s=60.0)
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.RESTARTED, 10.0)
    p.running(T0, 11.0)
    # Ran 30 s only: the count stands, and the next restart waits 20 s.
    assert p.failed(T0, W, "boom", 41.0) == 61.0
    (due,) = p.due(61.0)
    p.sent(due, Result.RESTARTED, 61.0)
    p.running(T0, 62.0)
    assert p.attempts(T0, 100.0) == 2
    assert p.attempts(T0, 122.0) == 0  # ran 60 s
    assert p.failed(T0, W, "boom", 200.0) == 210.0  # the backoff starts anew, under the maximum again


def test_a_configuration_error_is_never_restarted() -> None:
    p = plan(exclusions=Exclusions(trace=re.compile(r"org\.apache\.kafka\.common\.config\.ConfigException")))
    assert p.failed(T0, W, "org.apache.kafka.connect.errors.ConnectException: x\nCaused by: " + CONFIG_ERROR,
                    0.0) is Skip.EXCLUDED_TRACE
    assert p.targets[T0].phase is Phase.EXCLUDED
    assert p.next_time() is None
    assert p.failed(T0, W, CONFIG_ERROR, 1.0) is None  # told once
    p.running(T0, 2.0)
    assert p.failed(T0, W, "another error", 3.0) == 13.0  # a failure of another kind is


def test_excluded_connectors_match_by_whole_name() -> None:
    exclusions = Exclusions(connectors=re.compile(r"legacy-.*"))
    p = plan(exclusions=exclusions)
    assert p.failed(Target("legacy-db", 1), W, "boom", 0.0) is Skip.EXCLUDED_CONNECTOR
    assert p.failed(Target("my-legacy-db", 1), W, "boom", 0.0) == 10.0
    assert p.failed(Target("legacy-db"), W, "boom", 0.0) is Skip.EXCLUDED_CONNECTOR


def test_the_rate_cap_spaces_a_storm_and_the_jitter_spreads_it() -> None:
    draws = itertools.cycle([i / 100 for i in range(100)])
    backoff = AdditiveJitter(10_000, 80_000, 2.0, 0.5, lambda: next(draws))
    p = RestartPlan(backoff, WORKER_BACKOFF, 3, 60.0, Exclusions(), RateCap(20.0))
    targets = [Target("c", n) for n in range(100)]
    for target in targets:
        p.failed(target, W, "downstream gone", 0.0)
    sent: list[float] = []
    while (now := p.next_time()) is not None:
        for due in p.due(now):
            at = p.rate.reserve(now)  # the sender waits for its turn
            sent.append(at)
            p.sent(due, Result.RESTARTED, at)
            p.running(due.target, at)
    assert len(sent) == 100
    # Spread over the jitter window (10 s to 15 s), never two within 1/20 s.
    assert sent[0] >= 10.0
    assert sent[-1] <= 15.0 + 0.05
    assert all(b - a >= 0.05 - 1e-9 for a, b in itertools.pairwise(sent))
    assert max(sum(1 for t in sent if start <= t < start + 1) for start in sent) <= 20


def test_rate_cap_alone() -> None:
    cap = RateCap(4.0)
    assert cap.reserve(0.0) == 0.0
    assert cap.reserve(0.2) == 0.25  # its turn
    assert cap.reserve(0.25) == 0.5
    assert cap.reserve(10.0) == 10.0  # idle time is not saved up
    assert cap.reserve(10.1) == 10.25


def test_a_turn_whose_wait_ended_late_still_goes_the_spacing_after_the_last_request_sent() -> None:
    # A live storm of 100 restarts at a cap of 20 a second saw 22 in one second: a sender's sleep until its turn ended
    # late on a busy loop, and the next ones went on their turns right behind it.
    cap = RateCap(4.0)
    turns = [cap.reserve(0.0) for _ in range(3)]
    assert turns == [0.0, 0.25, 0.5]
    assert cap.claim(0.4) == 0.0  # the first, 0.4 s late, goes now
    assert cap.claim(0.45) == pytest.approx(0.2)  # the second's turn came at 0.25: it goes at 0.65
    assert cap.claim(0.5) == pytest.approx(0.4)  # the third's turn, 0.5: at 0.9
    assert cap.reserve(0.6) == pytest.approx(1.15)  # the turns to come count from the last one claimed
    assert cap.claim(1.15) == 0.0
    assert cap.claim(5.0) == 0.0  # idle time is not saved up, nor owed


def test_a_restart_the_worker_does_not_confirm_is_dropped_without_pausing_the_worker() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    checked = []
    while (at := p.next_time()) is not None:
        (due,) = p.due(at)
        checked.append(at)
        p.sent(due, Result.NOT_FAILED, at + 0.1)
    # Asked again at the worker's backoff (a worker that has not read its own FAILED yet), REFUTALS times in all.
    assert checked == pytest.approx([10.0, 11.1, 13.2, 17.3])
    assert len(checked) == 4
    assert p.targets[T0].phase is Phase.IDLE
    assert p.targets[T0].attempts == 0  # nothing was restarted
    assert p.workers[W].paused_until == 0.0
    assert p.next_time() is None
    # Others of the same worker go at once: a refuted failure never delays one that is confirmed.
    p.failed(Target("c", 1), W, "boom", 20.0)
    assert [d.target for d in p.due(30.0)] == [Target("c", 1)]


def test_a_worker_that_has_not_read_its_own_failure_yet_confirms_it_when_asked_again() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.NOT_FAILED, 10.1)  # the worker still says RUNNING: its read of the topic lags the sidecar's
    assert p.targets[T0].phase is Phase.WAITING
    (due,) = p.due(11.1)
    assert due.attempt == 1
    p.sent(due, Result.RESTARTED, 11.2)
    assert p.attempts(T0, 11.2) == 1
    # A refutal read together with RUNNING is believed at once: the failure is over.
    p.failed(T0, W, "boom", 20.0)
    (due,) = p.due(40.0)
    p.running(T0, 40.05)
    p.sent(due, Result.NOT_FAILED, 40.1)
    assert p.targets[T0].phase is Phase.IDLE
    assert p.next_time() is None


def test_a_worker_that_does_not_answer_backs_off_and_the_restart_waits_for_it() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    attempts: list[float] = []
    now = 0.0
    for _ in range(5):
        now = p.next_time() or 0.0
        (due,) = p.due(now)
        assert due.attempt == 1  # no restart happened: still the first
        attempts.append(now)
        p.sent(due, Result.UNREACHABLE, now)
    assert attempts == [10.0, 11.0, 13.0, 17.0, 25.0]  # the worker's backoff: 1, 2, 4, 8 s
    (due,) = p.due(p.next_time() or 0.0)
    p.sent(due, Result.RESTARTED, 33.0)
    assert p.workers[W].failures == 0
    assert p.attempts(T0, 34.0) == 1


def test_a_rebalance_409_is_retried_later_without_counting() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.REBALANCING, 10.0)
    assert p.targets[T0].phase is Phase.WAITING
    assert p.next_time() == 11.0
    assert p.attempts(T0, 10.0) == 0


def test_a_paused_worker_holds_its_restarts_and_sends_one_at_a_time() -> None:
    p = plan()
    for n in range(MAX_IN_FLIGHT + 5):
        p.failed(Target("c", n), W, "boom", 0.0)
    first = [due for n in range(MAX_IN_FLIGHT + 5) for due in p.due(10.0 + n / 1000)]
    assert len(first) == MAX_IN_FLIGHT  # the bound on requests in flight to one worker
    for due in first:
        p.sent(due, Result.UNREACHABLE, 10.1)
    # Eight failures in a row: the worker backs off 8 s (its cap), then takes one request at a time.
    assert [due for n in range(80) for due in p.due(10.1 + n / 10)] == []
    assert p.next_time() == pytest.approx(18.1)
    assert len([due for n in range(5) for due in p.due(18.1 + n / 1000)]) == 1


def test_a_restart_due_while_the_workers_requests_are_at_their_bound_goes_as_soon_as_one_ends() -> None:
    """A storm of forged failures fills the worker's places with checks; a genuine failure due meanwhile was planned a
    second later, and again, behind each new check (5.67 s after its failure against 4.5 s, in
    test_autorestart_live.py at load). It goes when a place frees, the first come due first."""
    p = plan()
    forged = [Target(f"forged-{n}", 0) for n in range(MAX_IN_FLIGHT + 1)]
    for target in forged:
        p.failed(target, W, "forged", 0.0)
    p.failed(T0, W, "genuine", 0.5)
    checks = p.due(10.0)
    assert [due.target for due in checks] == forged[:MAX_IN_FLIGHT]
    assert p.due(10.5) == []  # the genuine one is due, every place is taken
    p.sent(checks[0], Result.NOT_FOUND, 10.6)
    assert [due.target for due in p.due(10.6)] == [forged[-1]]  # due first, its turn first
    p.sent(checks[1], Result.NOT_FOUND, 10.7)
    assert [due.target for due in p.due(10.7)] == [T0]
    p.running(forged[2], 10.8)  # read RUNNING while checked: not planned
    p.sent(checks[2], Result.NOT_FOUND, 10.9)
    assert p.due(10.9) == []


def test_a_storm_of_failures_of_unknown_connectors_never_holds_up_a_known_ones_restart() -> None:
    """FAILED statuses of connectors the topic has no other status of (forged: written by anyone who can write the
    topic) hold at most UNKNOWN_IN_FLIGHT of the worker's places while they are checked: a failure of a known connector,
    due behind a hundred of them, goes at once."""
    p = plan()
    forged = [Target(f"forged-{n:03d}", 0) for n in range(100)]
    for target in forged:
        p.failed(target, W, "forged", 0.0, known=False)
    p.failed(T0, W, "genuine", 0.5)
    checks = p.due(10.0)
    assert [due.target for due in checks] == forged[:UNKNOWN_IN_FLIGHT]
    (genuine,) = p.due(10.5)
    assert genuine.target == T0
    p.sent(checks[0], Result.NOT_FOUND, 10.6)
    assert [due.target for due in p.due(10.6)] == [forged[UNKNOWN_IN_FLIGHT]]  # the next, in the order they came due


def test_not_found_drops_the_restart() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, Result.NOT_FOUND, 10.0)
    assert p.targets[T0].phase is Phase.IDLE
    assert p.next_time() is None


def test_forgotten_and_unsent_restarts() -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    p.left(T0)
    assert p.due(100.0) == []
    assert T0 not in p.targets
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.unsent(due)
    assert p.workers[W].in_flight == 0
    assert p.targets[T0].phase is Phase.IDLE
    p.failed(T0, W, "boom", 20.0)
    p.cancel(T0)
    assert p.next_time() is None


@pytest.mark.parametrize(("trace", "line"), [(None, None), ("a\r\nb", "a"), ("x" * 300, "x" * 200 + "…")])
def test_first_line(trace: str | None, line: str | None) -> None:
    assert first_line(trace) == line


@pytest.mark.parametrize("result", [Result.UNAUTHORIZED, Result.TLS_FAILED])
def test_refused_credentials_or_a_failed_handshake_pause_the_worker_at_once(result: Result) -> None:
    p = plan()
    p.failed(T0, W, "boom", 0.0)
    (due,) = p.due(10.0)
    p.sent(due, result, 10.0)
    # Not the backoff from a second: a pause as long as the trouble's, for every restart of that worker.
    assert p.workers[W].paused_until == 10.0 + p.trouble_pause_s
    assert p.targets[T0].phase is Phase.WAITING
    assert p.targets[T0].due == 10.0 + p.trouble_pause_s
    assert p.targets[T0].attempts == 0
