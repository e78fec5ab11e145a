"""The health word of a connector (``act/health.py``): its definition, case by case (pure)."""

from __future__ import annotations

import pytest

from status_store.act.health import Health, health
from status_store.connect.codec import StatusValue
from status_store.connect.model import State

GONE = "gone:8083"


def status(state: str, worker: str = "w1:8083") -> StatusValue:
    return StatusValue(State(state), None, worker, 1)


def gone(worker: str | None) -> bool:
    return worker == GONE


@pytest.mark.parametrize(("connector", "tasks", "word"), [
    ("RUNNING", ["RUNNING", "RUNNING"], Health.HEALTHY),
    ("RUNNING", [], Health.HEALTHY),
    ("RUNNING", ["RUNNING", "FAILED"], Health.DEGRADED),
    ("RUNNING", ["RUNNING", "UNASSIGNED"], Health.DEGRADED),
    ("RUNNING", ["FAILED", "FAILED"], Health.UNHEALTHY),
    ("FAILED", ["RUNNING"], Health.UNHEALTHY),
    ("UNASSIGNED", ["RUNNING"], Health.DEGRADED),
    ("UNASSIGNED", [], Health.UNHEALTHY),
    ("RESTARTING", ["RESTARTING"], Health.UNHEALTHY),
    ("PAUSED", ["PAUSED"], Health.PAUSED),
    ("PAUSED", ["FAILED"], Health.PAUSED),
    ("STOPPED", [], Health.STOPPED),
])
def test_the_word_of_a_connector(connector: str, tasks: list[str], word: Health) -> None:
    assert health(status(connector), [status(t) for t in tasks], gone) is word


def test_tasks_on_a_gone_worker_count_as_not_running() -> None:
    assert health(status("RUNNING"), [status("RUNNING"), status("RUNNING", GONE)], gone) is Health.DEGRADED
    assert health(status("RUNNING"), [status("RUNNING", GONE)], gone) is Health.UNHEALTHY
    assert health(status("RUNNING", GONE), [status("RUNNING")], gone) is Health.DEGRADED
    assert health(status("RUNNING", GONE), [], gone) is Health.UNHEALTHY


def test_a_connector_without_a_status_has_no_word() -> None:
    assert health(None, [status("RUNNING")], gone) is None
