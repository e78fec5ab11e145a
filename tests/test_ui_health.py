"""The status page's health words, restarts and view by worker, in a real browser (Debian's Chromium through
Playwright) against ``status-store serve`` on Apache Kafka's broker, statuses written as Connect writes them.

The sidecar reads a Connect group that has no member (``group.id`` of a cluster that is down): every worker the
statuses name is gone since the first read, as when every worker of a cluster died. The restarts come from
``GET /fleet`` (the real ones are in tests/test_autorestart_live.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from harness.real_kafka import KafkaCluster
from status_store.connect.model import State, TaskId, connector_key, task_key

from .test_ui import CONNECTOR_ROWS, WAIT_MS, Sidecar, browser, row, wait_for  # noqa: F401  (browser: the fixture)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def sidecar(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Sidecar]:
    running = Sidecar(kafka, tmp_path, settings={"group.id": "a-connect-cluster-that-is-down",
                                                 "sidecar.workers.check.interval.ms": "500"})
    yield running
    running.stop()
    assert not running.problems, running.problems


def test_the_page_sorts_and_filters_by_health_and_shows_workers_that_are_gone(sidecar: Sidecar,
                                                                             browser: Browser) -> None:  # noqa: F811
    statuses = {"degraded": (State.RUNNING, [State.RUNNING, State.FAILED]), "healthy": (State.RUNNING, [State.RUNNING]),
                "paused": (State.PAUSED, [State.PAUSED]), "broken": (State.FAILED, [State.RUNNING])}
    for name, (state, tasks) in statuses.items():
        sidecar.write(connector_key(name), state, worker="10.0.0.1:8083")
        for n, task in enumerate(tasks):
            sidecar.write(task_key(TaskId(name, n)), task, worker=f"10.0.0.{n + 1}:8083")
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    page.wait_for_selector(row(page, "healthy"), timeout=WAIT_MS)

    def names() -> list[str]:
        return page.eval_on_selector_all(CONNECTOR_ROWS, "rows => rows.map(r => r.dataset.connector)")

    def health(name: str) -> str:
        return page.inner_text(row(page, name) + " .health")

    # Every worker is gone (the group has no member): nothing runs, so every connector RUNNING is UNHEALTHY.
    wait_for(page, lambda: health("healthy") == "UNHEALTHY", "the workers gone")
    assert "(gone" in page.inner_text(row(page, "healthy") + " .worker")
    assert [health(n) for n in names()] == ["UNHEALTHY", "UNHEALTHY", "UNHEALTHY", "PAUSED"]
    page.select_option("#filter-health", "PAUSED")
    wait_for(page, lambda: names() == ["paused"], "PAUSED only")
    page.select_option("#filter-health", "")
    page.select_option("#sort", "name")
    wait_for(page, lambda: names() == ["broken", "degraded", "healthy", "paused"], "by name")
    page.select_option("#view", "workers")
    page.wait_for_selector("#workers tr.worker", timeout=WAIT_MS)
    workers = page.eval_on_selector_all("#workers tr.worker",
                                        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    by_id = {cells[0]: cells for cells in workers}
    assert set(by_id) == {"10.0.0.1:8083", "10.0.0.2:8083"}
    assert by_id["10.0.0.1:8083"][1].startswith("gone since ")
    assert by_id["10.0.0.1:8083"][2] == "1 FAILED, 1 PAUSED, 2 RUNNING"
    assert by_id["10.0.0.2:8083"][3] == "1 FAILED"
