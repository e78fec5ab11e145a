"""Workers that hang while still in the group (pure: no event loop, no HTTP; the clock is passed in).

A worker whose herder thread is stuck (a connector's ``taskConfigs()`` that does not return, a ``stop()`` that hangs)
stays in the Connect group and heartbeats, and its tasks read RUNNING for ever. Connect's own ``GET /health``
(KIP-1017) says so: 500 ``unhealthy`` once its herder has not answered for 10 s, with what it is doing ("The worker is
currently generating task configs for connector c"). A paused or wedged process answers nothing at all.
``WorkerHealth`` keeps each worker's last probe of ``/health`` and says, from it, since when a worker is **stuck**:

- a probe unanswered for longer than ``bound_s`` (the worker answers nothing: ``no-answer``), or
- answers that are bad (500 ``unhealthy``, the probe's timeout, a refused connection) for longer than ``bound_s``,
  counted from the first bad probe's start;

and clears it at the first answer that is not bad: a 200, or one that is no evidence either way. ``starting`` (503
before the herder is ready), a worker without ``/health`` (404: Connect before 3.9) and one whose credentials or TLS
handshake fail are not evidence of a hang: never stuck, and the bad answers before them no longer count. A worker
that answers 200 but later than ``slow_s`` is ``slow``, shown, not stuck. Only workers in the group are probed
(``workers.Liveness``): one that left is *gone*, not stuck.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class Probe(enum.StrEnum):
    """What a probe of a worker's ``GET /health`` found."""

    HEALTHY = "healthy"
    SLOW = "slow"
    STARTING = "starting"
    UNHEALTHY = "unhealthy"
    NO_ANSWER = "no-answer"
    UNREACHABLE = "unreachable"
    # Neither evidence of a hang nor of health: a worker without /health, or one the sidecar cannot ask.
    UNSUPPORTED = "unsupported"
    UNAUTHORIZED = "unauthorized"
    TLS_FAILED = "tls-failed"


BAD = frozenset({Probe.UNHEALTHY, Probe.NO_ANSWER, Probe.UNREACHABLE})
# A worker that answers 200 later than this is slow (shown, not stuck).
SLOW_S = 5.0


@dataclass(slots=True)
class WorkerProbes:
    """One worker's probes: the last answer (``probe``, its ``message`` and ``latency_s``, ``at``), the probe in
    flight (``asked_at``), and since when the answers are bad (``bad_since``: the start of the first bad probe since
    the last answer that was not bad)."""

    probe: Probe | None = None
    message: str | None = None
    latency_s: float | None = None
    at: float | None = None
    asked_at: float | None = None
    bad_since: float | None = None


@dataclass(frozen=True, slots=True)
class Stuck:
    """A stuck worker: since when, and why (the last probe, or no answer yet)."""

    since: float
    probe: Probe
    message: str | None


@dataclass
class WorkerHealth:
    """The workers' probes and what they say (see the module's docstring)."""

    bound_s: float
    slow_s: float
    workers: dict[str, WorkerProbes] = field(default_factory=dict)
    # Probes answered and workers forgotten: with the stuck set, what a view of the fleet shows of them.
    changes: int = 0

    def asking(self, worker: str, now: float) -> None:
        """A probe of the worker goes now."""
        self._of(worker).asked_at = now

    def answered(self, worker: str, probe: Probe, latency_s: float, message: str | None, now: float) -> None:
        """The probe sent to the worker at ``now - latency_s`` found ``probe`` (its ``message`` when it said one)."""
        state = self._of(worker)
        asked_at = state.asked_at if state.asked_at is not None else now - latency_s
        if probe is Probe.HEALTHY and latency_s > self.slow_s:
            probe = Probe.SLOW
        if probe in BAD:
            if state.bad_since is None:
                state.bad_since = asked_at
        else:
            # A 200, a 503 while starting, or an answer that is no evidence either way (a 404, refused credentials,
            # a failed TLS handshake): the bad answers before it no longer count.
            state.bad_since = None
        if (probe, message) != (state.probe, state.message):
            self.changes += 1
        state.probe, state.message, state.latency_s, state.at, state.asked_at = probe, message, latency_s, now, None

    def in_flight(self, worker: str) -> bool:
        """Whether a probe of the worker waits for its answer."""
        state = self.workers.get(worker)
        return state is not None and state.asked_at is not None

    def stuck(self, worker: str, now: float) -> Stuck | None:
        """Since when and why the worker is stuck now (None: it is not)."""
        state = self.workers.get(worker)
        if state is None:
            return None
        start = state.bad_since
        if state.asked_at is not None and now - state.asked_at >= self.bound_s:
            start = state.asked_at if start is None else min(start, state.asked_at)
        if start is None or now - start < self.bound_s:
            return None
        if state.bad_since is not None and state.probe in BAD:
            return Stuck(start, state.probe, state.message)
        assert state.asked_at is not None
        return Stuck(start, Probe.NO_ANSWER, f"no answer for {now - state.asked_at:.0f} s")

    def stuck_workers(self, now: float) -> dict[str, Stuck]:
        """Every stuck worker now."""
        found = {worker: self.stuck(worker, now) for worker in self.workers}
        return {worker: stuck for worker, stuck in found.items() if stuck is not None}

    def keep(self, workers: Iterable[str]) -> None:
        """Forget every worker but these (those in the group)."""
        keep = set(workers)
        for worker in [w for w in self.workers if w not in keep]:
            del self.workers[worker]
            self.changes += 1

    def views(self) -> Mapping[str, WorkerProbes]:
        """Each worker's probes as they are now (copies, to read on another thread)."""
        return {worker: WorkerProbes(s.probe, s.message, s.latency_s, s.at, s.asked_at, s.bad_since)
                for worker, s in self.workers.items()}

    def _of(self, worker: str) -> WorkerProbes:
        state = self.workers.get(worker)
        if state is None:
            state = self.workers[worker] = WorkerProbes()
        return state
