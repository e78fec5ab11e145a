"""One health word per connector, from its status and its tasks' (pure: no event loop, no Kafka, no HTTP).

A connector RUNNING with a FAILED task is the commonest confusion of Connect's REST answers: this says it in one
word. An instance (the connector's own, or a task) *runs* when its state is RUNNING on a worker that is not down: gone
(no longer in the Connect group: its tasks say RUNNING until the delayed rebalance, but nothing runs them) or stuck
(in the group, but its ``GET /health`` has answered 500, or nothing, for ``sidecar.workers.stuck.after.ms``).

- ``STOPPED``: the connector is STOPPED (KIP-875: it has no tasks);
- ``PAUSED``: the connector is PAUSED;
- ``HEALTHY``: the connector runs and every task runs (a connector without tasks too);
- ``UNHEALTHY``: the connector is FAILED; or it has tasks and none runs; or it has none and does not run itself;
- ``DEGRADED``: anything between: the connector runs and some task does not, or some task runs and the connector
  does not (UNASSIGNED, RESTARTING, or on a gone or stuck worker).

A connector without a status of its own (its tasks only, or only configured) has no word (None).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from ..connect.codec import StatusValue
from ..connect.model import State

# Whether a worker id names a worker that runs nothing: gone or stuck (False while nothing is known).
Gone = Callable[[str | None], bool]


class Health(enum.StrEnum):
    """A connector's health word, worst first in ``ORDER``."""

    UNHEALTHY = "UNHEALTHY"
    DEGRADED = "DEGRADED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    HEALTHY = "HEALTHY"


ORDER = tuple(Health)


def runs(status: StatusValue, gone: Gone) -> bool:
    """Whether the instance runs: RUNNING on a worker that is neither gone nor stuck."""
    return status.state is State.RUNNING and not gone(status.worker_id)


def health(connector: StatusValue | None, tasks: Iterable[StatusValue], gone: Gone) -> Health | None:
    """The connector's health word (see the module's docstring); None when it has no status of its own."""
    if connector is None:
        return None
    if connector.state is State.STOPPED:
        return Health.STOPPED
    if connector.state is State.PAUSED:
        return Health.PAUSED
    if connector.state is State.FAILED:
        return Health.UNHEALTHY
    running = total = 0
    for task in tasks:
        total += 1
        running += runs(task, gone)
    itself = runs(connector, gone)
    if itself and running == total:
        return Health.HEALTHY
    if running == 0 and (total > 0 or not itself):
        return Health.UNHEALTHY
    return Health.DEGRADED
