"""The fleet's statuses as Prometheus series, read from the store's cache at every scrape (nothing polls).

The cache holds every connector's and task's status as read from the status topic, so these series stay
right while every Connect worker, and Connect's REST API, is down. ``sidecar.metrics.fleet`` chooses how
much is served:

- ``objects``: per connector and per task, one ``..._state`` series with the current state as a label and
  the value 1 (one series per object, not one per object and state), the time of its last state change
  and a counter of its state changes; per connector its tasks by state; and the counts below;
- ``counts``: connectors and tasks by state (every state, 0 included, so an alert on FAILED has a series);
- ``off``: none of these.

Per-object series are capped (``sidecar.metrics.fleet.max.objects``): beyond the cap the objects not
RUNNING are kept first, as those are what an operator looks for.

At a million statuses these series take seconds to make: ``GET /metrics`` collects them off the event loop. While
``deferred_fleet`` is set (the route sets it around its collection on the loop), the collector takes only a view of
the cache (``StatusCache.view``, milliseconds) and yields a ``DeferredFamilies``, which the route makes into the
series on a thread; any other collection (a registry's ``get_sample_value``) makes them at once.

Label values are text from the topic, of any length and content: each is cut as every view of the fleet cuts a
name (``text.shown``: at most ``MAX_SHOWN_CHARS`` characters, a digest of the whole keeping two names that differ
past the cut apart), and a lone surrogate, which UTF-8 cannot encode, is written ``\\uD800`` as the REST routes
write it. So no name makes a scrape large, and no status makes it fail.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..config import FleetMetrics
from ..connect import codec
from ..connect.cache import FleetObject, FleetView
from ..connect.model import State
from .text import MAX_SHOWN_CHARS, shown

log = logging.getLogger(__name__)



# Set by whoever collects on the event loop and makes the series on a thread (GET /metrics).
deferred_fleet: ContextVar[bool] = ContextVar("deferred_fleet", default=False)


class DeferredFamilies(Metric):
    """Metric families to make later, off the event loop (``make``): a placeholder without samples of its own."""

    def __init__(self, make: Callable[[], list[Metric]]) -> None:
        super().__init__("status_fleet_deferred", "The fleet's series, made off the event loop.", "untyped")
        self.make = make


class FleetCollector(Collector):
    """Connectors' and tasks' states, read at each scrape from a view of the store's cache (``view``), as the chosen
    series."""

    def __init__(self, view: Callable[[], FleetView], mode: FleetMetrics, max_objects: int) -> None:
        self._view = view
        self._mode = mode
        self._max_objects = max_objects
        self._over_cap = False

    def collect(self) -> Iterator[Metric]:
        if self._mode is FleetMetrics.OFF:
            return
        view = self._view()
        if deferred_fleet.get():
            yield DeferredFamilies(lambda: list(self._families(view)))
            return
        yield from self._families(view)

    def _families(self, view: FleetView) -> Iterator[Metric]:
        objects = list(view.fleet())
        yield from _counts(objects)
        if self._mode is FleetMetrics.OBJECTS:
            kept = self._within_cap(objects)
            labels = LabelValues()
            yield from _per_object(kept, objects, labels)
            yield GaugeMetricFamily("status_fleet_objects_omitted",
                                    "Connectors and tasks left out of the per-object series by "
                                    "sidecar.metrics.fleet.max.objects (the counts still cover them).",
                                    value=len(objects) - len(kept))
            yield GaugeMetricFamily("status_fleet_label_values_cut",
                                    f"Connector names and worker ids cut to {MAX_SHOWN_CHARS} characters in the "
                                    "per-object series' labels at this scrape (each distinct value once).",
                                    value=labels.cut)

    def _within_cap(self, objects: list[FleetObject]) -> list[FleetObject]:
        """The objects that get series of their own: all, or up to the cap with those not RUNNING first."""
        over = len(objects) > self._max_objects
        if over and not self._over_cap:
            log.warning("%d connectors and tasks have statuses, more than sidecar.metrics.fleet.max.objects=%d: "
                        "only %d get series of their own (those not RUNNING first); the counts by state cover all",
                        len(objects), self._max_objects, self._max_objects)
        self._over_cap = over
        if not over:
            return objects
        troubled = [o for o in objects if o.value.state is not State.RUNNING]
        running = [o for o in objects if o.value.state is State.RUNNING]
        return (troubled + running)[: self._max_objects]


def _counts(objects: list[FleetObject]) -> Iterator[Metric]:
    """Connectors and tasks by state, every state present (0 when none)."""
    connectors: Counter[State] = Counter()
    tasks: Counter[State] = Counter()
    for fleet_object in objects:
        (connectors if fleet_object.task is None else tasks)[fleet_object.value.state] += 1
    for name, doc, counted in (("status_connectors", "Connectors by state, as read from the status topic.", connectors),
                               ("status_tasks", "Tasks by state, as read from the status topic.", tasks)):
        family = GaugeMetricFamily(name, doc, labels=["state"])
        for state in State:
            family.add_metric([state.value], counted[state])
        yield family


class LabelValues:
    """Label values of one scrape from text of the topic: bounded and encodable; the values cut are counted."""

    def __init__(self) -> None:
        self._cut: dict[str, str] = {}

    @property
    def cut(self) -> int:
        """Distinct values cut so far."""
        return len(self._cut)

    def __call__(self, text: str) -> str:
        """``text`` as a label value: as it is when short and ASCII (nearly always), else escaped and bounded."""
        if len(text) <= MAX_SHOWN_CHARS and text.isascii():
            return text
        escaped = codec.escape_surrogates(text)
        if len(escaped) <= MAX_SHOWN_CHARS:
            return escaped
        value = self._cut.get(text)
        if value is None:
            value = self._cut[text] = shown(escaped, text)
        return value


def _per_object(kept: list[FleetObject], objects: list[FleetObject], label: LabelValues) -> Iterator[Metric]:
    """Each kept object's state, last change and changes; each kept connector's tasks by state."""
    connector_state = GaugeMetricFamily("status_connector_state", "A connector's state (the label; value 1) and the "
                                        "worker that wrote it.", labels=["connector", "state", "worker_id"])
    task_state = GaugeMetricFamily("status_task_state", "A task's state (the label; value 1) and the worker that "
                                   "runs it.", labels=["connector", "task", "state", "worker_id"])
    connector_changed = GaugeMetricFamily("status_connector_state_changed_timestamp_seconds",
                                          "When the connector's state last changed (the Kafka timestamp of the "
                                          "record that changed it), in seconds since the epoch.",
                                          labels=["connector"])
    task_changed = GaugeMetricFamily("status_task_state_changed_timestamp_seconds",
                                     "When the task's state last changed (the Kafka timestamp of the record that "
                                     "changed it), in seconds since the epoch.", labels=["connector", "task"])
    connector_changes = CounterMetricFamily("status_connector_state_changes", "State changes of the connector "
                                            "read since this process started.", labels=["connector"])
    task_changes = CounterMetricFamily("status_task_state_changes", "State changes of the task read since this "
                                       "process started.", labels=["connector", "task"])
    kept_connectors: set[str] = set()
    for name, task, value, changed_at, changes in kept:
        kept_connectors.add(name)
        connector = label(name)
        # Connect reads a status without worker id; an empty label is Prometheus's "no such label".
        worker = label(value.worker_id or "")
        if task is None:
            connector_state.add_metric([connector, value.state.value, worker], 1)
            connector_changed.add_metric([connector], changed_at)
            connector_changes.add_metric([connector], changes)
        else:
            labels = [connector, str(task)]
            task_state.add_metric([*labels, value.state.value, worker], 1)
            task_changed.add_metric(labels, changed_at)
            task_changes.add_metric(labels, changes)
    yield from (connector_state, task_state, connector_changed, task_changed, connector_changes, task_changes)
    yield _tasks_per_connector(objects, kept_connectors, label)


def _tasks_per_connector(objects: list[FleetObject], connectors: set[str], label: LabelValues) -> Metric:
    """Each of these connectors' tasks by state (the states it has tasks in only)."""
    counted: Counter[tuple[str, State]] = Counter(
        (o.connector, o.value.state) for o in objects if o.task is not None and o.connector in connectors)
    family = GaugeMetricFamily("status_connector_tasks", "A connector's tasks by state (only the states it has "
                               "tasks in).", labels=["connector", "state"])
    for (connector, state), count in counted.items():
        family.add_metric([label(connector), state.value], count)
    return family
