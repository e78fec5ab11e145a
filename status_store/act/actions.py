"""``Actions``: what the sidecar does about what the topic shows, composed for one store: the group's membership read
and its workers' health (``group.id``), auto-restart (``sidecar.restart.enable``), the health words, the record (the
history topic); and what the HTTP API (``/fleet``, ``/fleet/health``, ``/connectors/{name}/history``), ``GET /events``
and ``/metrics`` (``series``) show of them."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from prometheus_client.registry import Collector

from ..config import StoreConfig
from ..connect.cache import FleetView
from ..connect.codec import StatusValue
from ..connect.model import ConnectorKey, TaskKey
from ..fleet.events import StatusEvents
from ..retry.backoff import Random
from ..retry.updates import UpdateKind
from ..store import StatusStore
from .events import Restart, RestartEvent, Skipped, WorkerEvent, WorkerStuckEvent
from .group import GroupWatch
from .health import Health, health
from .health_watch import HealthWatch
from .marks import FleetMarks
from .plan import Target
from .record import Record
from .record_reader import HistoryTail
from .restarter import AutoRestart
from .series import ActionsCollector
from .stuck import SLOW_S, Stuck, WorkerHealth
from .worker_rest import WorkerRest
from .workers import Liveness


class Actions:
    """The group's membership read and auto-restart, as the configuration asks, and what they show."""

    def __init__(self, config: StoreConfig, store: StatusStore, events: StatusEvents | None,
                 rng: Random = random.random, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._store = store
        self._cache = store.cache
        self._events = events
        self._clock = clock
        self.liveness = Liveness()
        group = config.workers.group_id
        self.group = (GroupWatch(group, store.bootstrap_servers, config.client_configs,
                                 config.workers.check_interval_ms / 1000, self.liveness, self._workers_changed,
                                 self._named_workers, clock)
                      if group is not None else None)
        # One client of the workers' REST APIs (TLS, credentials, a pause for a worker that refuses them).
        self.rest = WorkerRest(config.restart.request_timeout_ms / 1000, config.workers.rest_ca_location,
                               config.workers.rest_credentials_file)
        self.restarter = (AutoRestart(config.restart, self._cache, self._restarted, rng, self.rest, clock)
                          if config.restart.enabled else None)
        workers = config.workers
        self.health_watch = (HealthWatch(self.liveness, self.rest, WorkerHealth(workers.stuck_after_ms / 1000, SLOW_S),
                                         workers.check_interval_ms / 1000, workers.health_timeout_ms / 1000,
                                         self._stuck_changed, clock)
                             if self.group is not None else None)
        self._history = next((log for log in store.event_logs if log.kind is UpdateKind.HISTORY), None)
        # The record (GET /connectors/{name}/history): the history topic, read back from a week ago.
        self.record = Record() if config.history_topic is not None else None
        self.history_tail = (HistoryTail(config.history_topic, store.bootstrap_servers, config.client_configs,
                                         self.record, config.startup_timeout_s, clock)
                             if self.record is not None and config.history_topic is not None else None)

    async def start(self) -> None:
        """Read the group, the history topic, and send restarts as they come due."""
        self.rest.start()
        if self.history_tail is not None:
            await self.history_tail.start()
        if self.group is not None:
            self.group.start()
        if self.health_watch is not None:
            self.health_watch.start()
        if self.restarter is not None:
            self.restarter.start()

    async def stop(self) -> None:
        if self.restarter is not None:
            await self.restarter.stop()
        if self.health_watch is not None:
            await self.health_watch.stop()
        if self.group is not None:
            await self.group.stop()
        if self.history_tail is not None:
            await self.history_tail.stop()
        await self.rest.stop()

    # ----------------------------------------------------------------------------- what happened

    def _restarted(self, restart: Restart | Skipped) -> None:
        # A failure not restarted, or one the worker refuted when asked, sent no restart: the history topic holds the
        # restart attempts only.
        if self._history is not None and isinstance(restart, Restart) and not restart.refuted:
            self._history.append(restart.key, restart.history_event(self.config.name))
        if self._events is not None:
            self._events.publish(RestartEvent(restart, self._events.position))

    def _workers_changed(self, left: list[str], came: list[str], at: float) -> None:
        if self._events is not None:
            for worker in left:
                self._events.publish(WorkerEvent(worker, False, at, self._events.position))
            for worker in came:
                self._events.publish(WorkerEvent(worker, True, at, self._events.position))

    def _stuck_changed(self, became: dict[str, Stuck], cleared: list[str], at: float) -> None:
        if self._events is not None:
            for worker, why in became.items():
                self._events.publish(WorkerStuckEvent(worker, why, at, self._events.position))
            for worker in cleared:
                self._events.publish(WorkerStuckEvent(worker, None, at, self._events.position))

    def _named_workers(self) -> Callable[[], set[str]]:
        view = self._cache.view()
        return lambda: {item.value.worker_id for item in view.fleet() if item.value.worker_id is not None}

    def view(self) -> FleetView:
        """The fleet's statuses now, for a thread to read (``StatusCache.view``)."""
        return self._cache.view()

    def now(self) -> float:
        """The actions' clock: seconds since the epoch."""
        return self._clock()

    # ----------------------------------------------------------------------------- what they show

    def gone(self, worker: str | None) -> bool:
        """Whether the worker is gone from the group (False while the group is not read)."""
        return self.liveness.gone(worker)

    def down(self, worker: str | None) -> bool:
        """Whether the worker runs nothing: gone from the group, or stuck in it."""
        stuck = self.health_watch.stuck if self.health_watch is not None else {}
        return self.gone(worker) or (worker is not None and worker in stuck)

    def health_of(self, connector: str) -> Health | None:
        """The connector's health word (None: it has no status)."""
        own = self._cache.value_of(ConnectorKey(connector))
        tasks = [self._cache.value_of(TaskKey(connector, n)) for n in self._cache.task_numbers(connector)]
        return health(own if isinstance(own, StatusValue) else None,
                      [t for t in tasks if isinstance(t, StatusValue)], self.down)

    def restarts(self, target: Target) -> dict[str, Any] | None:
        """A connector's or task's restarts: how many are counted now, the last one (when, how it went), where it
        stands (idle, waiting, gave-up, excluded...) and when the next is due; None when none was ever planned."""
        if self.restarter is None:
            return None
        plan = self.restarter.plan
        state = plan.targets.get(target)
        if state is None:
            return None
        return {"count": plan.attempts(target, self._clock()), "last": state.last_restart,
                "result": state.last_result.value if state.last_result is not None else None,
                "state": state.phase.value, "next": state.due, "reason": state.reason,
                "skipped": state.skipped.value if state.skipped is not None else None}

    @property
    def version(self) -> int:
        """Counts the changes of what the views of the fleet show of the actions (the group's workers, their health,
        the restarts planned): with the cache's version, when an answer about the whole fleet is out of date."""
        return self.workers_version + (self.restarter.plan.changes if self.restarter is not None else 0)

    @property
    def workers_version(self) -> int:
        """Counts the changes of the group's workers and of their health: what the health words depend on beside the
        statuses."""
        watch = self.health_watch
        return self.liveness.changes + (watch.changes + watch.health.changes if watch is not None else 0)

    def marks(self, restarts: bool = True) -> FleetMarks:
        """What the views of the whole fleet add to the statuses, as it is now, for a thread to read (``FleetMarks``;
        taken on the event loop). ``restarts``: with each planned restart's figures (only ``GET /fleet`` shows them;
        the health words need the group's workers alone)."""
        liveness = self.liveness.copy() if self.group is not None and self.liveness.first_read is not None else None
        planned: dict[tuple[str, int | None], dict[str, Any]] = {}
        if restarts and self.restarter is not None:
            for target in list(self.restarter.plan.targets):
                found = self.restarts(target)
                if found is not None:
                    planned[target.connector, target.task] = found
        watch = self.health_watch
        if watch is None:
            return FleetMarks(liveness, planned)
        return FleetMarks(liveness, planned, dict(watch.stuck), watch.health.views())

    def collector(self) -> Collector:
        """The metrics of what the sidecar acts on (docs/metrics.md)."""
        return ActionsCollector(self)
