"""When to restart what (pure: no event loop, no HTTP; the clock is passed in, the random source is the backoff's).

``RestartPlan`` is told the statuses of its workers' connectors and tasks as they are read (``failed``, ``running``,
``left``) and says which restarts are due (``due``), then is told how each request went (``sent``). One state per
connector or task (``Target``):

```
             failed (not excluded,          due, within the worker's     2xx: the next one is planned
             under the maximum)             pause                        (a RUNNING read cancels it)
   idle ──────────────────────────▶ waiting ─────────────────▶ sending ─────────────────────────▶ waiting
    ▲  ▲                              │  ▲                        │  409, no answer, 5xx: the worker backs
    │  └────── running ───────────────┘  └────────────────────────┘  off, the same restart waits for it
    │                                                             │  2xx of the last allowed restart
    └──────── running ──────── gave up ◀── failed ─── last ◀──────┘
```

- **Backoff** (KIP-1278's, ``retry/backoff.py``): restart number n (0 for the first) waits ``backoff.delay(n)`` after
  the failure was read, or after restart n-1 was accepted: a task that fails on every start is restarted at those
  spacings until ``max_restarts``, then left FAILED ("gave up"). A RUNNING read cancels what is planned, and a
  target that has run for ``stable_s`` has its count reset at its next failure.
- **Exclusions**: a failure whose class (``failures.classify``: ``transient``, ``user``, ``unknown``) is not one of
  ``classes`` (by default a ``user`` failure: a restart fails the same way), a connector whose name matches
  ``exclude_connectors`` (whole name), or a failure whose trace holds a match of ``exclude_trace``, is never
  restarted.
- **Storms**: the jitter spreads restarts of failures read together; the rate cap (``RateCap``) spaces every restart
  request at least ``1 / max_per_second`` apart, whatever is due (``reserve``: the sender waits for its turn; ``claim``:
  and, should that wait have ended late, until the spacing after the last one sent).
- **Act only on what is true**: a due restart is first checked with the worker (the sender asks it, and only what
  it confirms FAILED on itself is restarted); a check takes no turn of the rate cap, so failures the worker refutes
  (statuses written into the topic by anyone else) never delay those it confirms. ``not-failed``: the worker did
  not confirm. A worker answers from the status topic as it has read it, and it does not read its own write at
  once (Connect's store updates its view when the record comes back from Kafka), so a worker that has not read its
  own FAILED yet says RUNNING: the check is made again at the worker's backoff (1 s, 2 s, 4 s) while the sidecar
  still reads FAILED, and only ``REFUTALS`` refutals in a row drop the restart (no pause of the worker: it answered).
- **A worker's REST API down or refusing**: a request without a 2xx (409 during a rebalance, no answer, 5xx, 4xx) is
  no restart: its worker backs off (``worker_backoff``: 1 s doubling to 60 s, reset by a 2xx), and the restart waits
  for it; at most ``MAX_IN_FLIGHT`` requests go to one worker at once (a restart due meanwhile goes as soon as one
  ends, in the order they came due), at most ``UNKNOWN_IN_FLIGHT`` of them for failures of connectors the topic
  holds no other status of (forged ones, or a connector failing before it had tasks), so that those never hold up
  the rest. A 404 (the connector or task is gone) drops it.
  A 401 or 403 (the credentials) or a failed TLS handshake pauses the worker for ``trouble_pause_s`` at once: no
  backoff from a second will change them.
"""

from __future__ import annotations

import enum
import heapq
import math
import re
from dataclasses import dataclass, field

from ..connect.failures import Failure, FailureClass, classify
from ..retry.backoff import Backoff

# Checks the worker refutes in a row before a restart is dropped: over 7 s (the worker's backoff, 1 s doubling), well
# past the time a loaded worker takes to read its own status back.
REFUTALS = 4
# Requests to one worker in flight at most (one while it is backing off): a REST API that hangs holds a few, never the
# whole storm.
MAX_IN_FLIGHT = 8
# Of those, the most that restarts of failures of an unknown connector may hold (``failed``'s ``known``): a storm of
# FAILED statuses written of connectors the topic has no other status of (forged) never holds every place, and a
# failure of a known connector never waits behind their checks.
UNKNOWN_IN_FLIGHT = MAX_IN_FLIGHT // 2


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """What a restart restarts: a connector (``task`` None: KIP-745's restart of it and its FAILED tasks) or a task."""

    connector: str
    task: int | None = None

    def __str__(self) -> str:
        return self.connector if self.task is None else f"{self.connector}-{self.task}"


class Phase(enum.StrEnum):
    """Where a target stands."""

    IDLE = "idle"
    WAITING = "waiting"
    SENDING = "sending"
    # The last allowed restart was accepted: one more failure and it gives up.
    LAST = "last"
    GAVE_UP = "gave-up"
    EXCLUDED = "excluded"


class Result(enum.StrEnum):
    """How a restart request went."""

    RESTARTED = "restarted"
    REBALANCING = "rebalancing"
    UNREACHABLE = "unreachable"
    REFUSED = "refused"
    NOT_FOUND = "not-found"
    # Asked first, the worker did not say FAILED on itself: nothing was restarted.
    NOT_FAILED = "not-failed"
    # The worker refused the sidecar's credentials (401, 403), or the TLS handshake with it failed: its trouble, not
    # the network's (the worker is paused for ``trouble_pause_s``).
    UNAUTHORIZED = "unauthorized"
    TLS_FAILED = "tls-failed"


class Skip(enum.StrEnum):
    """Why a failure is not restarted."""

    FAILURE_CLASS = "failure_class"
    EXCLUDED_TRACE = "excluded_trace"
    EXCLUDED_CONNECTOR = "excluded_connector"
    MAX_RESTARTS = "max_restarts"


@dataclass(slots=True)
class TargetState:
    """One target's restarts: how many since the count was reset, the last one, what is planned."""

    worker: str
    phase: Phase = Phase.IDLE
    attempts: int = 0
    due: float | None = None
    reason: str | None = None
    last_restart: float | None = None
    last_result: Result | None = None
    failed_at: float | None = None
    # Why the last failure read failed, and why it is not restarted (None: it is, or nothing was read).
    failure: Failure | None = None
    skipped: Skip | None = None
    running_since: float | None = None
    # While a request is in flight: the last state read meanwhile ("RUNNING" or "FAILED").
    seen_meanwhile: str | None = None
    # Checks of this failure the worker refuted in a row (``REFUTALS`` drop it).
    refutals: int = 0
    # Whether the last failure read is of a connector the topic holds another status of (``failed``'s ``known``).
    known: bool = True


@dataclass(slots=True)
class WorkerState:
    """One worker's REST API as the requests found it."""

    failures: int = 0
    paused_until: float = 0.0
    in_flight: int = 0
    # Of those, the requests of failures of unknown connectors.
    unknown_in_flight: int = 0
    # Restarts due while the worker's requests in flight were at their bound, (due, target) in a heap per lane (known
    # connectors, unknown ones): as each of those requests ends, the first come due of each lane is due again.
    parked: list[tuple[float, Target]] = field(default_factory=list)
    parked_unknown: list[tuple[float, Target]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Due:
    """A restart to send now: its target, worker, the restart's number (1 for the first) and why (the trace's first
    line)."""

    target: Target
    worker: str
    attempt: int
    reason: str | None
    failed_at: float | None
    # A failure of a connector the topic holds no other status of (``RestartPlan.failed``'s ``known``).
    unknown: bool = False


class RateCap:
    """At most ``per_second`` requests a second: each at least ``1 / per_second`` after the one before."""

    def __init__(self, per_second: float) -> None:
        self._spacing = 1.0 / per_second
        self.next_free = 0.0
        self._last_sent = -math.inf

    def reserve(self, now: float) -> float:
        """When a request asked for now may go (now, or its turn after those reserved before it); it is counted."""
        at = max(now, self.next_free)
        self.next_free = at + self._spacing
        return at

    def claim(self, now: float) -> float:
        """A request whose turn came goes at least the spacing after the last one claimed: how much longer it waits (0:
        it goes now), counted as sent then, and the turns to come after it. A sender's wait for its turn that ended late
        (a busy event loop) would otherwise send it right behind the one before, and the next ones on their turns: 22 in
        one second at a cap of 20."""
        at = max(now, self._last_sent + self._spacing)
        self._last_sent = at
        self.next_free = max(self.next_free, at + self._spacing)
        return at - now


@dataclass(frozen=True, slots=True)
class Exclusions:
    """What is never restarted: failures by class (``classes``: those restarted; None: every class), connectors by
    name, failures by trace."""

    trace: re.Pattern[str] | None = None
    connectors: re.Pattern[str] | None = None
    classes: frozenset[FailureClass] | None = None

    def reason(self, target: Target, trace: str | None, failure: Failure) -> Skip | None:
        """Why this failure is excluded, or None."""
        if self.connectors is not None and self.connectors.fullmatch(target.connector):
            return Skip.EXCLUDED_CONNECTOR
        if self.classes is not None and failure.failure_class not in self.classes:
            return Skip.FAILURE_CLASS
        if self.trace is not None and trace is not None and self.trace.search(trace):
            return Skip.EXCLUDED_TRACE
        return None


@dataclass
class RestartPlan:
    """The restarts of one sidecar's workers' connectors and tasks (see the module's docstring)."""

    backoff: Backoff
    worker_backoff: Backoff
    max_restarts: int
    stable_s: float
    exclusions: Exclusions
    rate: RateCap
    # A worker that refuses the credentials or fails the TLS handshake is not asked again for this long.
    trouble_pause_s: float = 60.0
    targets: dict[Target, TargetState] = field(default_factory=dict)
    workers: dict[str, WorkerState] = field(default_factory=dict)
    _heap: list[tuple[float, Target]] = field(default_factory=list)
    # Calls that may have changed what the plan shows (a target's phase, figures, due time): a view of the fleet
    # made before one is out of date.
    changes: int = 0

    # ----------------------------------------------------------------------------- what is read

    def failed(self, target: Target, worker: str, trace: str | None, now: float,
               known: bool = True) -> float | Skip | None:
        """A FAILED status of one of this sidecar's workers was read; ``known``: the topic holds another status of its
        connector (a forged one of a connector that does not exist has none), which gives it a lane of its own to the
        worker. Returns when the restart is due (a new plan), why none is planned (a skip, told once per failure), or
        None (nothing changes: one is planned or in flight)."""
        self.changes += 1
        state = self.targets.get(target)
        if state is None or state.worker != worker:
            state = self.targets[target] = TargetState(worker)
        state.known = known
        state.reason = first_line(trace)
        state.failure = classify(trace)
        if state.phase is Phase.SENDING:
            state.seen_meanwhile = "FAILED"
            return None
        if state.phase in (Phase.WAITING, Phase.GAVE_UP):
            return None
        if state.phase is Phase.EXCLUDED and self.exclusions.reason(target, trace, state.failure) is not None:
            return None  # told when it was first read; a failure of another class since is planned below
        if state.running_since is not None and now - state.running_since >= self.stable_s:
            state.attempts = 0
        state.running_since = None
        state.failed_at = now
        excluded = self.exclusions.reason(target, trace, state.failure)
        if excluded is not None:
            state.phase, state.skipped = Phase.EXCLUDED, excluded
            return excluded
        if state.phase is Phase.LAST or state.attempts >= self.max_restarts:
            state.phase, state.skipped = Phase.GAVE_UP, Skip.MAX_RESTARTS
            return Skip.MAX_RESTARTS
        state.skipped, state.refutals = None, 0
        return self._plan(target, state, now + self.backoff.delay(state.attempts))

    def running(self, target: Target, now: float) -> None:
        """The target was read RUNNING: nothing planned for it any more."""
        state = self.targets.get(target)
        if state is None:
            return
        self.changes += 1
        if state.running_since is None:
            state.running_since = now
        if state.phase is Phase.SENDING:
            state.seen_meanwhile = "RUNNING"
        elif state.phase is not Phase.IDLE:
            state.phase, state.due, state.skipped = Phase.IDLE, None, None

    def not_running(self, target: Target) -> None:
        """The target was read in another state (UNASSIGNED, RESTARTING, PAUSED...): not running, nothing changes
        of what is planned (whether a restart is still wanted is asked when it is due)."""
        state = self.targets.get(target)
        if state is not None:
            self.changes += 1
            state.running_since = None

    def left(self, target: Target) -> None:
        """The target is gone (deleted) or runs on a worker of another sidecar: forgotten (a request in flight still
        gets its answer, ``sent``)."""
        if self.targets.pop(target, None) is not None:
            self.changes += 1

    def cancel(self, target: Target) -> None:
        """A planned restart is no longer wanted (its connector's restart covers it): nothing planned."""
        state = self.targets.get(target)
        if state is not None and state.phase is Phase.WAITING:
            self.changes += 1
            state.phase, state.due = Phase.IDLE, None

    def unsent(self, due: Due) -> None:
        """A restart ``due`` handed out is not sent after all (the status is no longer FAILED, or its connector's
        restart covers it): nothing planned."""
        self.changes += 1
        self._released(self._worker(due.worker), due)
        state = self.targets.get(due.target)
        if state is not None and state.phase is Phase.SENDING:
            state.phase = Phase.IDLE

    # ----------------------------------------------------------------------------- sending

    def due(self, now: float) -> list[Due]:
        """The restarts to check and send now, in the order they came due, each moved to ``sending``: within each
        worker's pause and its bound on requests in flight (what waits for a paused worker is planned for the end
        of its pause). The rate cap applies to the restart requests once checked (``rate.reserve``)."""
        sending: list[Due] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, target = heap[0]
            state = self.targets.get(target)
            if state is None or state.phase is not Phase.WAITING or state.due != when:
                heapq.heappop(heap)  # planned anew, or no longer
                continue
            worker = self._worker(state.worker)
            if worker.paused_until > now:
                heapq.heappop(heap)
                self._plan(target, state, worker.paused_until)
                continue
            if worker.in_flight >= (1 if worker.failures else MAX_IN_FLIGHT):
                # Its turn comes when a request to the worker ends (``_released``), not a timer's: planned a second
                # later, a genuine failure waited behind every check of a storm of forged ones, each of them planned
                # again a second later too.
                heapq.heappush(worker.parked if state.known else worker.parked_unknown, heapq.heappop(heap))
                continue
            if not state.known and worker.unknown_in_flight >= UNKNOWN_IN_FLIGHT:
                heapq.heappush(worker.parked_unknown, heapq.heappop(heap))
                continue
            heapq.heappop(heap)
            self.changes += 1
            worker.in_flight += 1
            worker.unknown_in_flight += not state.known
            state.phase, state.due, state.seen_meanwhile = Phase.SENDING, None, None
            sending.append(Due(target, state.worker, state.attempts + 1, state.reason, state.failed_at,
                               not state.known))
        return sending

    def next_time(self) -> float | None:
        """When ``due`` may have something next (None: nothing is planned)."""
        while self._heap:
            when, target = self._heap[0]
            state = self.targets.get(target)
            if state is not None and state.phase is Phase.WAITING and state.due == when:
                return when
            heapq.heappop(self._heap)
        return None

    def sent(self, due: Due, result: Result, now: float) -> Skip | None:
        """How a request of ``due`` went. Returns ``Skip.MAX_RESTARTS`` when this outcome gives the target up (its last
        allowed restart accepted, and a failure read while it was in flight), to be told once, as ``failed`` tells
        it; else None."""
        self.changes += 1
        worker = self._worker(due.worker)
        self._released(worker, due)
        state = self.targets.get(due.target)
        if result in (Result.RESTARTED, Result.NOT_FAILED):
            worker.failures, worker.paused_until = 0, 0.0
        elif result in (Result.UNAUTHORIZED, Result.TLS_FAILED):
            worker.failures += 1
            worker.paused_until = max(worker.paused_until, now + self.trouble_pause_s)
        elif result is not Result.NOT_FOUND:
            worker.failures += 1
            worker.paused_until = max(worker.paused_until, now + self.worker_backoff.delay(worker.failures - 1))
        if state is None or state.phase is not Phase.SENDING:
            return None  # forgotten or dropped meanwhile
        state.last_result = result
        seen, state.seen_meanwhile = state.seen_meanwhile, None
        if result is Result.NOT_FAILED and seen != "RUNNING" and state.refutals + 1 < REFUTALS:
            # Perhaps a worker that has not read its own FAILED yet: asked again, at its backoff.
            state.refutals += 1
            self._plan(due.target, state, now + self.worker_backoff.delay(state.refutals - 1))
        elif result in (Result.NOT_FOUND, Result.NOT_FAILED):
            state.phase, state.refutals = Phase.IDLE, 0
        elif result is not Result.RESTARTED:
            # No restart: the same one again once the worker's pause is over (unless it ran meanwhile).
            if seen == "RUNNING":
                state.phase = Phase.IDLE
            else:
                self._plan(due.target, state, worker.paused_until)
        else:
            state.attempts += 1
            state.last_restart, state.refutals = now, 0
            if seen == "RUNNING":
                state.phase = Phase.IDLE
            elif state.attempts >= self.max_restarts:
                if seen != "FAILED":
                    state.phase, state.skipped = Phase.LAST, None
                    return None
                # Failed again before the worker answered (a task failing on start, on a loaded worker): it gives up
                # now, as the next failure read would have made it.
                state.phase, state.skipped = Phase.GAVE_UP, Skip.MAX_RESTARTS
                return Skip.MAX_RESTARTS
            else:
                # The next restart, should it still fail then (a RUNNING read cancels it).
                self._plan(due.target, state, now + self.backoff.delay(state.attempts))
        return None

    # ----------------------------------------------------------------------------- views

    def attempts(self, target: Target, now: float) -> int:
        """The target's restarts counted now (0 once it has run for the stable period)."""
        state = self.targets.get(target)
        if state is None:
            return 0
        if state.running_since is not None and now - state.running_since >= self.stable_s:
            return 0
        return state.attempts

    @property
    def waiting(self) -> int:
        """Restarts planned and not yet sent."""
        return sum(1 for state in self.targets.values() if state.phase is Phase.WAITING)

    def _plan(self, target: Target, state: TargetState, when: float) -> float:
        self.changes += 1
        state.phase, state.due = Phase.WAITING, when
        heapq.heappush(self._heap, (when, target))
        return when

    def _released(self, worker: WorkerState, due: Due) -> None:
        """A request to ``worker`` ended: the restart parked first of each lane for a free place is due again, at its
        own time (the one that finds no place is parked again)."""
        worker.in_flight = max(0, worker.in_flight - 1)
        if due.unknown:
            worker.unknown_in_flight = max(0, worker.unknown_in_flight - 1)
        for parked in (worker.parked, worker.parked_unknown):
            while parked:
                when, target = heapq.heappop(parked)
                state = self.targets.get(target)
                if state is not None and state.phase is Phase.WAITING and state.due == when:
                    heapq.heappush(self._heap, (when, target))
                    break

    def _worker(self, worker: str) -> WorkerState:
        found = self.workers.get(worker)
        if found is None:
            found = self.workers[worker] = WorkerState()
        return found


def first_line(trace: str | None, limit: int = 200) -> str | None:
    """A trace's first line, at most ``limit`` characters: why a restart was sent."""
    if trace is None:
        return None
    line = trace.split("\n", 1)[0].rstrip("\r")
    return line if len(line) <= limit else line[:limit] + "…"
