"""Connect's ``GET /health`` (KIP-1017) of every worker in the group, asked every interval: which workers hang while in
the group (``stuck.WorkerHealth`` decides; this module asks and tells).

Each worker the last read of the group lists (``workers.Liveness``: its URL is in the group's metadata) is asked every
``interval_s``, one probe in flight per worker at most, each bounded by ``timeout_s`` (more than Connect's own 10 s
before it answers 500), through the workers' REST client (TLS and credentials as for auto-restart; a worker paused for
its credentials or TLS is not asked). A worker that becomes stuck is one WARNING line, one that answers again one INFO
line, and each is told (``Changed``: to ``GET /events``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from ..logs import RateLimit
from .stuck import Probe, Stuck, WorkerHealth
from .worker_rest import Reply, Trouble, WorkerRest
from .workers import Liveness

log = logging.getLogger(__name__)

# At most one line per this many seconds for an error of the watch itself.
ERROR_LOG_INTERVAL_S = 60.0

# Told of the workers that became stuck (with why) and those that are not any more, at a time (seconds since the
# epoch).
Changed = Callable[[dict[str, Stuck], list[str], float], None]


class HealthWatch:
    """Asks every worker in the group for ``GET /health`` (see the module's docstring)."""

    def __init__(self, liveness: Liveness, rest: WorkerRest, health: WorkerHealth, interval_s: float,
                 timeout_s: float, changed: Changed, clock: Callable[[], float] = time.time) -> None:
        self.health = health
        self.stuck: dict[str, Stuck] = {}
        # Changes of the stuck set: with ``health.changes``, what a view of the fleet made before it is out of date.
        self.changes = 0
        self._liveness = liveness
        self._rest = rest
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._changed = changed
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._probes: set[asyncio.Task[None]] = set()
        self._error_log = RateLimit(ERROR_LOG_INTERVAL_S)

    def start(self) -> None:
        """Ask now, then every interval."""
        self._task = asyncio.create_task(self._run(), name="status-store-worker-health")

    async def stop(self) -> None:
        """Stop asking; probes in flight are let go."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for probe in list(self._probes):
            probe.cancel()
        if self._probes:
            await asyncio.gather(*self._probes, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                self.check()
            except Exception:
                # A bug of ours must not end the watch for good (no worker would be flagged again): said, then the
                # next interval asks again.
                held = self._error_log.take()
                if held is not None:
                    log.exception("Asking the workers for GET /health hit an error; asking again in %.0f s%s",
                                  self._interval_s, f" ({held} more since the last one logged)" if held else "")
            await asyncio.sleep(self._interval_s)

    def check(self) -> None:
        """Probe the workers in the group not asked yet, and tell what became stuck or answers again."""
        present = dict(self._liveness.present)
        self.health.keep(present)
        for worker, url in present.items():
            if not self.health.in_flight(worker) and self._rest.paused_until(worker) is None:
                probe = asyncio.create_task(self._probe(worker, url))
                self._probes.add(probe)
                probe.add_done_callback(self._probes.discard)
        self._evaluate()

    async def _probe(self, worker: str, url: str) -> None:
        asked = self._clock()
        self.health.asking(worker, asked)
        try:
            reply = await self._rest.get(worker, url.rstrip("/") + "/health", self._timeout_s)
            probe, message = _probe(reply)
        except Exception as e:
            # Not the worker's answer (a URL the client refuses, a bug of ours): no evidence either way.
            self._error_log.log(log, logging.WARNING, "Worker %s: GET /health could not be asked: %s: %s", worker,
                                type(e).__name__, e)
            probe, message = Probe.UNSUPPORTED, f"not asked: {type(e).__name__}"
        now = self._clock()
        self.health.answered(worker, probe, max(0.0, now - asked), message, now)
        self._evaluate()

    def _evaluate(self) -> None:
        now = self._clock()
        stuck = {w: s for w, s in self.health.stuck_workers(now).items() if w in self._liveness.present}
        became = {w: s for w, s in stuck.items() if w not in self.stuck}
        cleared = [w for w in self.stuck if w not in stuck]
        if not became and not cleared and {w: s.probe for w, s in stuck.items()} == {
                w: s.probe for w, s in self.stuck.items()}:
            return
        self.stuck = stuck
        self.changes += 1
        for worker, why in became.items():
            said = (f"its GET /health answered 500: {why.message}" if why.probe is Probe.UNHEALTHY
                    else f"its GET /health gets no answer ({why.message})" if why.probe is Probe.NO_ANSWER
                    else f"its GET /health cannot be reached ({why.message})")
            log.warning("Worker %s is in the Connect group but stuck for %.0f s: %s. Its statuses are marked 'worker "
                        "stuck' until it answers 200", worker, now - why.since, said)
        for worker in cleared:
            log.info("Worker %s answers GET /health again: no longer stuck", worker)
        if became or cleared:
            self._changed(became, cleared, now)


def _probe(reply: Reply) -> tuple[Probe, str | None]:
    """What a reply to ``GET /health`` says, and the worker's message."""
    if reply.trouble is Trouble.UNAUTHORIZED:
        return Probe.UNAUTHORIZED, reply.error
    if reply.trouble is Trouble.TLS:
        return Probe.TLS_FAILED, reply.error
    if reply.status is None:
        return (Probe.NO_ANSWER if reply.timed_out else Probe.UNREACHABLE), reply.error
    body = reply.json if isinstance(reply.json, dict) else {}
    message = body.get("message") if isinstance(body.get("message"), str) else None
    if reply.status == 200:
        return Probe.HEALTHY, message
    if reply.status == 503:
        return Probe.STARTING, message
    if reply.status >= 500:
        return Probe.UNHEALTHY, message or f"HTTP {reply.status}"
    return Probe.UNSUPPORTED, f"HTTP {reply.status}"
