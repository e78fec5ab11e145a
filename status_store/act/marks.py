"""What the sidecar's actions add to the views of the whole fleet, read off the event loop.

``GET /fleet``, ``GET /fleet/health`` and the health series of ``/metrics`` are made on a thread from a view of the
cache (``StatusCache.view``), as the answers about the whole fleet are (``api/shared_answers.py``): at a million
statuses they take seconds. What they add comes from state the event loop changes (the group's members as last
read, each planned restart): ``Actions.marks`` copies it there, in one go, into a ``FleetMarks`` that the thread
reads alone. The copy is small: a few entries per worker of the group and per connector or task with a restart
planned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..connect.cache import FleetObject, FleetView
from ..connect.codec import StatusValue
from ..connect.failures import failure_json
from ..connect.model import State
from ..fleet.text import shown
from .health import Health, health
from .stuck import Stuck, WorkerProbes
from .workers import Liveness

# A restart's figures by (connector, task): None for the connector's own.
Restarts = Mapping[tuple[str, int | None], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class FleetMarks:
    """The group's members as last read (``liveness``, a copy; None: the group is not read, no worker is gone), the
    workers stuck in it and every worker's last probe of ``GET /health`` (``stuck``, ``probes``), and the restarts
    planned (``restarts``), as they were when taken; read on any thread."""

    liveness: Liveness | None = None
    restarts: Restarts = field(default_factory=dict)
    stuck: Mapping[str, Stuck] = field(default_factory=dict)
    probes: Mapping[str, WorkerProbes] = field(default_factory=dict)

    def gone(self, worker: str | None) -> bool:
        """Whether the worker is gone from the group."""
        return self.liveness is not None and self.liveness.gone(worker)

    def down(self, worker: str | None) -> bool:
        """Whether the worker runs nothing: gone from the group, or stuck in it."""
        return self.gone(worker) or (worker is not None and worker in self.stuck)

    def health(self, connector: StatusValue | None, tasks: Iterable[StatusValue]) -> Health | None:
        """A connector's health word from its own status and its tasks' (None: it has no status of its own)."""
        return health(connector, tasks, self.down)

    def healths(self, view: FleetView) -> Iterator[tuple[str, Health | None]]:
        """Every connector with a status (its own or a task's) and its health word, by name."""
        for name in view.names():
            own, tasks = view.connector_value(name), view.task_values(name)
            if own is not None or tasks:
                yield name, self.health(own, [value for _, value in tasks])

    def fields(self, item: FleetObject) -> str:
        """A status's ``worker_gone_since``, ``worker_stuck_since``, ``restarts`` and ``failure`` fields in
        ``GET /fleet``, as JSON text."""
        worker = item.value.worker_id
        since = self.liveness.gone_since(worker) if self.liveness is not None else None
        stuck = self.stuck.get(worker) if worker is not None else None
        restarts = self.restarts.get((item.connector, item.task))
        failure = failure_json(item.value.trace) if item.value.state is State.FAILED else "null"
        if since is None and stuck is None and restarts is None and failure == "null":
            return NO_FIELDS
        return (f'"worker_gone_since":{"null" if since is None else repr(since)},'
                f'"worker_stuck_since":{"null" if stuck is None else repr(stuck.since)},'
                f'"restarts":{"null" if restarts is None else json.dumps(restarts, allow_nan=False)},'
                f'"failure":{failure}')

    def workers(self, named: Iterable[str]) -> list[dict[str, Any]] | None:
        """The workers of the group and those the statuses name (``named``), as ``GET /fleet`` lists them (names as
        every view of the fleet shows them); None while the group is not read."""
        if self.liveness is None:
            return None
        return [{"id": shown(w.worker_id), "url": None if w.url is None else shown(w.url), "up": w.up,
                 "gone_since": w.gone_since, **self._health(w.worker_id)} for w in self.liveness.workers(named)]

    def _health(self, worker: str) -> dict[str, Any]:
        """A worker's last probe of ``GET /health`` and since when it is stuck, as ``GET /fleet`` lists them."""
        probe, stuck = self.probes.get(worker), self.stuck.get(worker)
        return {"health": probe.probe.value if probe is not None and probe.probe is not None else None,
                "health_message": probe.message if probe is not None else None,
                "health_latency_s": probe.latency_s if probe is not None else None,
                "stuck_since": stuck.since if stuck is not None else None}


# What GET /fleet says of a status without anything to add.
NO_FIELDS = '"worker_gone_since":null,"worker_stuck_since":null,"restarts":null,"failure":null'
NO_MARKS = FleetMarks()
