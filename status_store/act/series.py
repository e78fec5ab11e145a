"""The metrics of what the sidecar acts on (docs/metrics.md), read at each scrape: health words, failure classes,
workers up, gone or stuck, restarts, and each connector's availability from the record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..config import FleetMetrics
from ..connect.cache import FleetView
from ..connect.failures import FailureClass, classify
from ..connect.model import State
from ..fleet.series import DeferredFamilies, LabelValues, deferred_fleet
from .health import Health
from .marks import FleetMarks
from .plan import Phase, Result, Skip
from .record import Record, merged
from .restarter import AutoRestart

if TYPE_CHECKING:  # the actions make their collector
    from .actions import Actions


class ActionsCollector(Collector):
    """Health words, workers up or gone, restarts: read at each scrape. No connector label: the health words and the
    statuses on gone workers are counts, the restarts counted by outcome; workers are few."""

    def __init__(self, actions: Actions) -> None:
        self._actions = actions

    def collect(self) -> Iterator[Metric]:
        actions = self._actions
        # Taken on the event loop; the series of every status made from them on a thread when the route defers
        # them (``deferred_fleet``), at once otherwise.
        view, marks = actions.view(), actions.marks(restarts=False)
        read_failures = actions.group.read_failures if actions.group is not None else None
        config = actions.config
        per_object = config.fleet_metrics is FleetMetrics.OBJECTS
        limit = config.fleet_metrics_max_objects if per_object else 0

        def families() -> Iterator[Metric]:
            yield from self._fleet(view, marks, read_failures)
            if config.fleet_metrics is not FleetMetrics.OFF:
                yield from _failures(view, limit)

        if deferred_fleet.get():
            yield DeferredFamilies(lambda: list(families()))
        else:
            yield from families()
        if actions.restarter is not None:
            yield from self._restarts(actions.restarter)
        if actions.record is not None and config.fleet_metrics is FleetMetrics.OBJECTS:
            yield from _availability(actions.record, round(actions.now() * 1000), limit)

    @staticmethod
    def _fleet(view: FleetView, marks: FleetMarks, read_failures: int | None) -> Iterator[Metric]:
        """The health words' series and, when the group is read (``read_failures`` not None), the workers'."""
        words = Counter(word for _, word in marks.healths(view))
        by_health = GaugeMetricFamily("status_connector_health", "Connectors by health word (docs/operations.md: "
                                      "HEALTHY, DEGRADED, UNHEALTHY, PAUSED, STOPPED; tasks on gone workers count as "
                                      "not running).", labels=["health"])
        for word in Health:
            by_health.add_metric([word.value], words[word])
        yield by_health
        if read_failures is None:
            return
        yield CounterMetricFamily("status_worker_group_read_failures", "Reads of the Connect group (group.id) that "
                                  "failed; the workers stay as the last read said.", value=read_failures)
        if marks.liveness is None:
            return
        up = GaugeMetricFamily("status_worker_up", "1 while the worker is a member of the Connect group (group.id), 0 "
                               "once it left (statuses still name it); every worker the group has had.",
                               labels=["worker"])
        named: set[str] = set()
        held: Counter[tuple[str, State]] = Counter()
        for item in view.fleet():
            worker_id = item.value.worker_id
            if worker_id is not None:
                named.add(worker_id)
                if marks.gone(worker_id):
                    held["connector" if item.task is None else "task", item.value.state] += 1
        # One series per worker the group has had (in it now, or left and still named): worker ids the statuses name
        # and no read ever listed are counted, not given series (anyone who writes the topic can name thousands).
        label = LabelValues()
        for worker in marks.liveness.workers():
            up.add_metric([label(worker.worker_id)], int(worker.up))
        yield up
        yield GaugeMetricFamily("status_workers_never_in_group", "Worker ids that statuses name and no read of the "
                                "Connect group has listed (a worker gone before the sidecar's first read, or an id "
                                "no worker has); their statuses count as on gone workers.",
                                value=marks.liveness.never_members(named))
        gone = GaugeMetricFamily("status_gone_worker_statuses", "Connector and task statuses that name a worker no "
                                 "longer in the Connect group, by kind and state (RUNNING ones run nowhere).",
                                 labels=["kind", "state"])
        for kind in ("connector", "task"):
            for state in (State.RUNNING, State.FAILED, State.PAUSED, State.UNASSIGNED):
                gone.add_metric([kind, state.value], held[kind, state])
        yield gone
        stuck = GaugeMetricFamily("status_worker_stuck", "1 while the worker, in the Connect group, is stuck: its GET "
                                  "/health has answered 500, or nothing, for sidecar.workers.stuck.after.ms; 0 "
                                  "otherwise; every worker in the group.", labels=["worker"])
        for present in marks.liveness.present:
            stuck.add_metric([label(present)], int(present in marks.stuck))
        yield stuck
        on_stuck: Counter[tuple[str, State]] = Counter(
            ("connector" if item.task is None else "task", item.value.state) for item in view.fleet()
            if item.value.worker_id is not None and item.value.worker_id in marks.stuck)
        stuck_statuses = GaugeMetricFamily("status_stuck_worker_statuses", "Connector and task statuses that name a "
                                           "worker stuck in the Connect group, by kind and state (RUNNING ones do "
                                           "not run).", labels=["kind", "state"])
        for kind in ("connector", "task"):
            for state in (State.RUNNING, State.FAILED, State.PAUSED, State.UNASSIGNED):
                stuck_statuses.add_metric([kind, state.value], on_stuck[kind, state])
        yield stuck_statuses

    @staticmethod
    def _restarts(restarter: AutoRestart) -> Iterator[Metric]:
        sent = CounterMetricFamily("status_restarts", "Restart requests sent to the workers' REST APIs, by outcome "
                                   "(restarted: accepted; rebalancing: 409; unreachable: no answer or 5xx; refused: "
                                   "another 4xx; not-found: 404, or Connect's configuration has no such connector "
                                   "or task; not-failed: the worker, asked first, did not say FAILED on itself, "
                                   "nothing was restarted; unauthorized: 401 or 403, the credentials are missing "
                                   "or wrong; tls-failed: the TLS handshake failed).", labels=["outcome"])
        for result in Result:
            sent.add_metric([result.value], restarter.requests[result])
        yield sent
        skipped = CounterMetricFamily("status_restarts_skipped", "FAILED statuses not restarted, by reason "
                                      "(failure_class: a class sidecar.restart.classes does not restart, a user "
                                      "failure by default; excluded_trace, excluded_connector, max_restarts).",
                                      labels=["reason"])
        for reason in Skip:
            skipped.add_metric([reason.value], restarter.skipped[reason])
        yield skipped
        phases = Counter(state.phase for state in restarter.plan.targets.values())
        yield GaugeMetricFamily("status_restarts_waiting", "Restarts planned, waiting for their backoff.",
                                value=phases[Phase.WAITING])
        yield GaugeMetricFamily("status_restarts_given_up", "Connectors and tasks left FAILED after "
                                "sidecar.restart.max.restarts restarts.", value=phases[Phase.GAVE_UP])


def _failures(view: FleetView, limit: int) -> Iterator[Metric]:
    """The FAILED connectors and tasks by kind and failure class, and (``limit`` of them at most) each with its class,
    family and cause as labels: the alerts say why."""
    failed = [item for item in view.fleet() if item.value.state is State.FAILED]
    by_class: Counter[tuple[str, FailureClass]] = Counter()
    connector_failure = GaugeMetricFamily("status_connector_failure", "A FAILED connector's failure (value 1): its "
                                          "class (transient, user, unknown), family and cause, from its trace "
                                          "(docs/operations.md, 'Failure classes').",
                                          labels=["connector", "class", "family", "cause"])
    task_failure = GaugeMetricFamily("status_task_failure", "A FAILED task's failure (value 1): its class "
                                     "(transient, user, unknown), family and cause, from its trace.",
                                     labels=["connector", "task", "class", "family", "cause"])
    label = LabelValues()
    for index, item in enumerate(failed):
        failure = classify(item.value.trace)
        by_class["connector" if item.task is None else "task", failure.failure_class] += 1
        if index >= limit:
            continue
        described = [failure.failure_class.value, failure.family.value if failure.family is not None else "",
                     label(failure.cause or "")]
        if item.task is None:
            connector_failure.add_metric([label(item.connector), *described], 1)
        else:
            task_failure.add_metric([label(item.connector), str(item.task), *described], 1)
    counts = GaugeMetricFamily("status_failed", "FAILED connectors and tasks by kind and failure class.",
                               labels=["kind", "class"])
    for kind in ("connector", "task"):
        for failure_class in FailureClass:
            counts.add_metric([kind, failure_class.value], by_class[kind, failure_class])
    yield counts
    if limit:
        yield connector_failure
        yield task_failure


def _availability(record: Record, as_of: int, limit: int) -> Iterator[Metric]:
    """Each connector's availability over each window (its own status's, and its tasks' together), from the record:
    ``limit`` connectors at most. Made on the event loop (the record changes there)."""
    own = GaugeMetricFamily("status_connector_availability", "The share of the time the connector's own status was "
                            "RUNNING over the window (1h, 1d, 7d), from the history topic (docs/operations.md, "
                            "'The record').", labels=["connector", "window"])
    tasks = GaugeMetricFamily("status_connector_tasks_availability", "The share of its tasks' time RUNNING over the "
                              "window, its tasks together.", labels=["connector", "window"])
    label = LabelValues()
    for name in record.connectors()[:limit]:
        for window, figures in record.windows(name, as_of).items():
            for entity, found in figures.items():
                if entity[0] == "connector" and found.availability is not None:
                    own.add_metric([label(name), window], found.availability)
            together = merged(item for item in figures.items() if item[0][0] == "task")
            if together is not None and together.availability is not None:
                tasks.add_metric([label(name), window], together.availability)
    yield own
    yield tasks
