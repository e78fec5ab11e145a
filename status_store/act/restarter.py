"""Auto-restart (``sidecar.restart.*``): the restart plan (``plan.RestartPlan``) fed by every status the cache reads,
its due restarts sent to each worker's REST API, and each outcome told (history topic, ``GET /events``, metrics).

Triggered from the cache's changes (``StatusCache.subscribe``): the sidecar sees every status as it is read, so a
failure is planned for the moment it is read (no polling). Only the statuses of this sidecar's workers
(``sidecar.restart.workers``) are acted on. When a restart is due the cache is asked again whether it is still wanted:
the status must still be FAILED on the same worker. A FAILED connector is restarted with KIP-745's
``includeTasks=true&onlyFailed=true``, which restarts its FAILED tasks too (on every worker): its tasks wait for it, and
are planned again once the connector is read RUNNING and they are still FAILED.

**The worker is asked first.** Anyone who can write the status topic can write a FAILED status naming a worker: before
a restart, the worker is asked (``GET /connectors/{c}/status``) and must say FAILED on itself, and Connect's
configuration must hold the connector and task (``GET /connectors/{c}``, read from the config topic, which the status
topic's writers cannot forge). Otherwise nothing is restarted (``not-failed``: asked again at the worker's backoff
first, ``plan.REFUTALS`` times, as a worker reads its own write back later than the sidecar may; ``not-found``).
What this cannot tell (measured on Connect 4.4.0,
tests/test_autorestart_live.py): Connect's REST API answers statuses from the status topic it reads, as the sidecar
does, so a forged FAILED of a connector and task that exist, naming the worker that runs them, is confirmed by that
worker too. The checks take no turn of the rate cap: refuted ones never hold up the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..config.act import RestartConfig, redacted
from ..connect.cache import StatusCache, StatusRecord
from ..connect.codec import StatusValue
from ..connect.failures import FailureClass
from ..connect.model import ConnectorKey, Key, State, TaskKey
from ..logs import RateLimit
from ..retry.backoff import AdditiveJitter, Random
from .events import Restart, Skipped
from .plan import Due, Exclusions, Phase, RateCap, RestartPlan, Result, Skip, Target
from .worker_rest import TROUBLE_PAUSE_S, Reply, Trouble, WorkerRest

log = logging.getLogger(__name__)

# A worker whose REST API does not answer (or refuses) is asked again after 1 s, doubling to 60 s.
WORKER_BACKOFF_INITIAL_MS = 1000
WORKER_BACKOFF_MAX_MS = 60000
FAILURE_LOG_INTERVAL_S = 30.0
# Told of each request and how it went (history, events), and of each failure not restarted and why (events).
Restarted = Callable[[Restart | Skipped], None]


class AutoRestart:
    """Restarts the FAILED connectors and tasks of this sidecar's workers (see the module's docstring)."""

    def __init__(self, config: RestartConfig, cache: StatusCache, restarted: Restarted, rng: Random, rest: WorkerRest,
                 clock: Callable[[], float] = time.time) -> None:
        """``rest``: the client of the workers' REST APIs (started and stopped by its owner)."""
        self.config = config
        self.workers: Mapping[str, str] = config.workers
        self.skipped: Counter[Skip] = Counter()
        self.requests: Counter[Result] = Counter()
        self.plan = RestartPlan(config.backoff(rng),
                                AdditiveJitter(WORKER_BACKOFF_INITIAL_MS, WORKER_BACKOFF_MAX_MS, 2.0,
                                               config.jitter_factor, rng),
                                config.max_restarts, config.stable_ms / 1000,
                                Exclusions(config.exclude_trace, config.exclude_connectors,
                                           frozenset(FailureClass(name) for name in config.classes)),
                                RateCap(config.max_per_second), TROUBLE_PAUSE_S)
        self._cache = cache
        self._restarted = restarted
        self._clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._rest = rest
        self._timeout_s = config.request_timeout_ms / 1000
        self._failure_log = RateLimit(FAILURE_LOG_INTERVAL_S)
        self._refuted_log = RateLimit(FAILURE_LOG_INTERVAL_S)
        # A storm of failures not restarted (a downstream's credentials revoked under a hundred tasks): one line per
        # reason per interval, with a count.
        self._skip_logs = {skip: RateLimit(FAILURE_LOG_INTERVAL_S) for skip in Skip}
        cache.subscribe(self._applied)

    # ----------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Send the restarts as they come due (those planned while the topic was read at start too)."""
        self._task = asyncio.create_task(self._run(), name="status-store-auto-restart")
        workers = ", ".join(f"{worker} ({redacted(url)})" for worker, url in self.workers.items())
        log.info("Auto-restart on for the connectors and tasks of %s", workers)

    async def stop(self) -> None:
        """Stop sending; requests in flight are let go."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for request in list(self._requests):
            request.cancel()
        if self._requests:
            await asyncio.gather(*self._requests, return_exceptions=True)

    # ----------------------------------------------------------------------------- what is read

    def _applied(self, record: StatusRecord, key: Key) -> None:
        if type(key) is TaskKey:
            target = Target(key.connector, key.task)
        elif type(key) is ConnectorKey:
            target = Target(key.connector)
        else:
            return
        value = self._cache.value_of(key) if record.value is not None else None
        assert value is None or isinstance(value, StatusValue)
        if value is None or value.worker_id not in self.workers:
            self.plan.left(target)
            return
        now = self._clock()
        if value.state is State.FAILED:
            self._failed(target, value, now)
        elif value.state is State.RUNNING:
            self.plan.running(target, now)
            if target.task is None:
                self._connector_running(target.connector, now)
        else:
            self.plan.not_running(target)

    def _failed(self, target: Target, value: StatusValue, now: float) -> None:
        assert value.worker_id is not None
        planned = self.plan.failed(target, value.worker_id, value.trace, now, self._known(target))
        if isinstance(planned, Skip):
            self._skip(target, value.worker_id, planned, now)
        elif planned is not None:
            log.info("%s %s FAILED on %s: restart planned in %.1f s", _what(target).capitalize(), target,
                     value.worker_id, max(0.0, planned - now))
            self._wake.set()

    def _skip(self, target: Target, worker: str, planned: Skip, now: float) -> None:
        """A failure not restarted: counted, logged (a line per reason per interval) and told, once per failure."""
        self.skipped[planned] += 1
        failure = self.plan.targets[target].failure
        assert failure is not None
        why = {
            Skip.FAILURE_CLASS: f"its failure is of class {failure.failure_class.value}"
                                + (f" ({failure.family.value})" if failure.family is not None else "")
                                + f", which sidecar.restart.classes does not restart: {failure.cause}. "
                                  f"{failure.action}",
            Skip.EXCLUDED_TRACE: "its trace matches sidecar.restart.exclude.trace.pattern",
            Skip.EXCLUDED_CONNECTOR: "its connector matches sidecar.restart.exclude.connector.pattern",
            Skip.MAX_RESTARTS: f"restarted {self.plan.attempts(target, now)} times already "
                               f"(sidecar.restart.max.restarts); it is left FAILED"}[planned]
        self._skip_logs[planned].log(log, logging.WARNING, "Not restarting %s %s on %s: %s", _what(target), target,
                                     worker, why)
        self._restarted(Skipped(target, worker, planned, failure, now))

    def _known(self, target: Target) -> bool:
        """Whether the topic holds another status of the failure's connector: a task's connector's own, or a
        connector's tasks'. A FAILED status written of a connector that does not exist (forged) has none, and its check
        takes a lane of its own to the worker (``plan.UNKNOWN_IN_FLIGHT``)."""
        if target.task is not None:
            return self._cache.value_of(ConnectorKey(target.connector)) is not None
        return bool(self._cache.task_numbers(target.connector))

    def _connector_running(self, connector: str, now: float) -> None:
        """The connector runs again: its tasks of these workers still FAILED (left to its restart) are planned."""
        for number in self._cache.task_numbers(connector):
            value = self._cache.value_of(TaskKey(connector, number))
            if isinstance(value, StatusValue) and value.state is State.FAILED and value.worker_id in self.workers:
                self._failed(Target(connector, number), value, now)

    # ----------------------------------------------------------------------------- sending

    async def _run(self) -> None:
        while True:
            for due in self.plan.due(self._clock()):
                if self._still_wanted(due):
                    request = asyncio.create_task(self._send(due))
                    self._requests.add(request)
                    request.add_done_callback(self._requests.discard)
                else:
                    self.plan.unsent(due)
            after = self.plan.next_time()
            self._wake.clear()
            timeout = None if after is None else max(0.0, after - self._clock())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _still_wanted(self, due: Due) -> bool:
        """Whether the status is still FAILED on the same worker (and, for a task, its connector not FAILED: the
        connector's restart restarts it)."""
        target = due.target
        key: Key = ConnectorKey(target.connector) if target.task is None else TaskKey(target.connector, target.task)
        value = self._cache.value_of(key)
        if not isinstance(value, StatusValue) or value.state is not State.FAILED or value.worker_id != due.worker:
            return False
        if target.task is not None:
            connector = self._cache.value_of(ConnectorKey(target.connector))
            return not (isinstance(connector, StatusValue) and connector.state is State.FAILED)
        # KIP-745's restart covers the connector's FAILED tasks: those of ours waiting are not restarted on their own.
        for number in self._cache.task_numbers(target.connector):
            self.plan.cancel(Target(target.connector, number))
        return True

    async def _send(self, due: Due) -> None:
        target = due.target
        base = self.workers[due.worker] + f"/connectors/{urllib.parse.quote(target.connector, safe='')}"
        checked = await self._check(due, base)
        if checked is None:
            # Confirmed: the request waits for its turn of the rate cap, and is still wanted then.
            now = self._clock()
            rate = self.plan.rate
            at = rate.reserve(now)
            if at > now:
                await asyncio.sleep(at - now)
            if (late := rate.claim(self._clock())) > 0:
                await asyncio.sleep(late)
            if not self._failed_on(due):
                self.plan.unsent(due)
                self._wake.set()
                return
            path = "/restart?includeTasks=true&onlyFailed=true" if target.task is None else (
                f"/tasks/{target.task}/restart")
            reply = await self._rest.post(due.worker, base + path, self._timeout_s)
            result = _result(reply)
        else:
            result, reply = checked
        now = self._clock()
        gave_up = self.plan.sent(due, result, now)
        self._wake.set()  # the next restart (or the same, after the worker's backoff) may be planned now
        state = self.plan.targets.get(target)
        if result is Result.NOT_FAILED and state is not None and state.phase is Phase.WAITING:
            return  # the worker is asked again (``plan.REFUTALS``): told and counted once it is final
        self.requests[result] += 1
        if result is Result.RESTARTED:
            log.info("Restarted %s %s on %s (restart %d, after: %s)", _what(target), target, due.worker, due.attempt,
                     due.reason)
        elif result in (Result.NOT_FAILED, Result.NOT_FOUND) and reply.status is not None:
            self._refuted_log.log(log, logging.INFO, "Not restarting %s %s on %s: %s", _what(target), target,
                                  due.worker, reply.error)
        elif reply.trouble is None:  # a worker's own trouble is said by the client, once
            self._failure_log.log(log, logging.WARNING, "Restart of %s %s on %s not done: %s; %s", _what(target),
                                  target, due.worker, reply.error or f"HTTP {reply.status}",
                                  "dropped" if result is Result.NOT_FOUND else "asking again after a backoff")
        refuted = result in (Result.NOT_FAILED, Result.NOT_FOUND) and checked is not None
        self._restarted(Restart(due, result, now, reply.status, reply.error if reply.status is None else None,
                                refuted))
        if gave_up is not None:
            # It failed again while its last restart was in flight: told after the restart, as a failure read then is.
            self._skip(target, due.worker, gave_up, now)

    async def _check(self, due: Due, base: str) -> tuple[Result, Reply] | None:
        """Asks the worker whether the restart is right (see the module's docstring): None when it is, else the
        result and the reply that says why not (its ``error`` saying it, for a worker that answered)."""
        target = due.target
        status = await self._rest.get(due.worker, base + "/status", self._timeout_s)
        if not status.ok:
            return _result(status), status
        said = _said(status.json, target)
        if said is None:
            return Result.UNREACHABLE, Reply(None, None, "the worker's answer is not a status of Connect's")
        if said != ("FAILED", due.worker):
            state, worker = said
            return Result.NOT_FAILED, Reply(status.status, None, f"the worker says {state or 'nothing'} on "
                                                                 f"{worker or 'no worker'}, not FAILED on itself")
        info = await self._rest.get(due.worker, base, self._timeout_s)
        if info.status == 404:
            return Result.NOT_FOUND, Reply(404, None, "Connect's configuration has no such connector")
        if not info.ok:
            return _result(info), info
        tasks = _configured_tasks(info.json)
        if tasks is None:
            return Result.UNREACHABLE, Reply(None, None, "the worker's answer is not a connector of Connect's")
        if target.task is not None and target.task not in tasks:
            return Result.NOT_FOUND, Reply(404, None, f"Connect's configuration of {target.connector} has no task "
                                                      f"{target.task}")
        return None

    def _failed_on(self, due: Due) -> bool:
        """Whether the cache still reads the status FAILED on the worker the restart is for."""
        target = due.target
        key: Key = ConnectorKey(target.connector) if target.task is None else TaskKey(target.connector, target.task)
        value = self._cache.value_of(key)
        return isinstance(value, StatusValue) and value.state is State.FAILED and value.worker_id == due.worker


def _said(answer: Any, target: Target) -> tuple[str | None, str | None] | None:
    """What a worker's ``GET /connectors/{c}/status`` says of the target: (state, worker id), (None, None) when it
    lists no such task; None when the answer is not Connect's shape."""
    if not isinstance(answer, dict):
        return None
    if target.task is None:
        entry = answer.get("connector")
    else:
        tasks = answer.get("tasks")
        if not isinstance(tasks, list):
            return None
        entry = next((t for t in tasks if isinstance(t, dict) and t.get("id") == target.task), {})
    if not isinstance(entry, dict):
        return None
    state, worker = entry.get("state"), entry.get("worker_id")
    return (state if isinstance(state, str) else None), (worker if isinstance(worker, str) else None)


def _configured_tasks(answer: Any) -> set[int] | None:
    """The task numbers of a worker's ``GET /connectors/{c}`` (ConnectorInfo); None when it is not that shape."""
    tasks = answer.get("tasks") if isinstance(answer, dict) else None
    if not isinstance(tasks, list):
        return None
    numbers = {t.get("task") for t in tasks if isinstance(t, dict)}
    return {n for n in numbers if isinstance(n, int)}


def _result(reply: Reply) -> Result:
    if reply.trouble is Trouble.TLS:
        return Result.TLS_FAILED
    if reply.trouble is Trouble.UNAUTHORIZED:
        return Result.UNAUTHORIZED
    status = reply.status
    if status is None or status >= 500:
        return Result.UNREACHABLE
    if 200 <= status < 300:
        return Result.RESTARTED
    if status == 404:
        return Result.NOT_FOUND
    if status == 409:
        return Result.REBALANCING
    return Result.REFUSED


def _what(target: Target) -> str:
    return "connector" if target.task is None else "task"
