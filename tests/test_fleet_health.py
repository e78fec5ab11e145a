"""The health words where they are shown: ``GET /fleet``, ``GET /fleet/health``, ``/metrics`` and ``status-store
status``, against the real HTTP server and a store on the mock cluster (statuses written as Connect writes them);
and ``status-store watch``'s lines for the sidecar's own events."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry, generate_latest

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from status_store.act.actions import Actions
from status_store.act.events import Restart, RestartEvent, WorkerEvent
from status_store.act.plan import Due, Result, Target
from status_store.act.workers import Member
from status_store.api import create_app
from status_store.api.http_server import http_config
from status_store.client import change_line, show_status
from status_store.fleet.text import MAX_SHOWN_CHARS, shown

from .conftest import Broker, StoreFactory
from .helpers import eventually, write_raw
from .test_events import status
from .test_workers import metadata

WAIT = 20.0
FLEET = {
    "degraded": ("RUNNING", ["RUNNING", "FAILED"]),
    "healthy": ("RUNNING", ["RUNNING", "RUNNING"]),
    "paused": ("PAUSED", ["PAUSED"]),
    "stopped": ("STOPPED", []),
    "unhealthy": ("FAILED", ["RUNNING"]),
}


@asynccontextmanager
async def served(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> AsyncIterator[tuple[str, Any]]:
    """A store with these statuses, its actions (nothing configured: the health words only) and the HTTP API."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    registry = CollectorRegistry()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry) as store:
        actions = Actions(store.config, store, None)
        registry.register(actions.collector())
        records = []
        for name, (state, tasks) in FLEET.items():
            records.append((f"status-connector-{name}".encode(), status(state)))
            records += [(f"status-task-{name}-{n}".encode(), status(task)) for n, task in enumerate(tasks)]
        records.append((b"status-task-orphan-0", status("RUNNING")))
        write_raw(store, *records)
        await store.read_to_end(WAIT)
        app = create_app(store, registry, actions=actions)
        port = free_port()
        server = uvicorn.Server(http_config(app, "127.0.0.1", port))
        task = asyncio.create_task(server.serve())
        await eventually(lambda: server.started)
        try:
            yield f"http://127.0.0.1:{port}", app
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, WAIT)


async def test_every_view_says_each_connectors_health_word(mock_cluster: FaultyCluster,
                                                           store_factory: StoreFactory) -> None:
    async with served(mock_cluster, store_factory) as (url, _), httpx.AsyncClient(base_url=url) as http:
        fleet = (await http.get("/fleet")).json()
        assert {c["name"]: c["health"] for c in fleet["connectors"]} == {
            "degraded": "DEGRADED", "healthy": "HEALTHY", "paused": "PAUSED", "stopped": "STOPPED",
            "unhealthy": "UNHEALTHY", "orphan": None}
        assert fleet["workers"] is None  # no group.id: the group is not read
        task = fleet["connectors"][0]["tasks"][0]
        assert task["worker_gone_since"] is None
        assert task["restarts"] is None
        words = (await http.get("/fleet/health")).json()
        assert words["degraded"] == "DEGRADED"
        assert words["orphan"] is None
        assert (await http.get("/fleet/health", params={"connector": "paused"})).json() == {"paused": "PAUSED"}
        missing = await http.get("/fleet/health", params={"connector": "nope"})
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 404, "message": "No status found for connector nope"}
        metrics = (await http.get("/metrics")).text
        for word in ("HEALTHY", "DEGRADED", "UNHEALTHY", "PAUSED", "STOPPED"):
            assert f'status_connector_health{{health="{word}"}} 1.0' in metrics
        assert "status_worker_up" not in metrics  # no group.id
        assert "status_restarts_total" not in metrics  # auto-restart off
        table = io.StringIO()
        assert await asyncio.to_thread(show_status, url, None, table) == 0
        one = io.StringIO()
        assert await asyncio.to_thread(show_status, url, "degraded", one) == 0
    lines = table.getvalue().splitlines()
    assert lines[0].split() == ["CONNECTOR", "/", "TASK", "STATE", "HEALTH", "WORKER", "TRACE"]
    assert lines[1].split()[:4] == ["degraded", "(unknown)", "RUNNING", "DEGRADED"]
    assert lines[2].split()[:4] == ["task", "0", "RUNNING", "w1:8083"]  # tasks have no word
    assert one.getvalue().splitlines()[1].split()[:4] == ["degraded", "(unknown)", "RUNNING", "DEGRADED"]


@pytest.mark.parametrize(("name", "data", "line"), [
    ("restart", {"kind": "task", "connector": "c", "task": 3, "attempt": 2, "result": "restarted",
                 "worker_id": "w:8083", "timestamp": 0},
     "task c/3  restart 2 by the sidecar: restarted  worker w:8083"),
    ("worker", {"kind": "worker", "worker_id": "w:8083", "up": False, "timestamp": 0},
     "worker w:8083  gone from the Connect group"),
    ("worker", {"kind": "worker", "worker_id": "w:8083", "up": True, "timestamp": 0},
     "worker w:8083  back in the Connect group"),
])
def test_watch_prints_the_sidecars_own_events(name: str, data: dict[str, Any], line: str) -> None:
    assert change_line(name, data) == "1970-01-01T00:00:00Z  " + line


def test_the_sidecars_own_events_show_names_and_worker_ids_as_every_view_of_the_fleet_does() -> None:
    # A name and a worker id of 100,000 characters: GET /events carries them cut, as it does a status's.
    name, worker = "c" * 100_000, "w" * 100_000
    restart = Restart(Due(Target(name, 2), worker, 1, "boom", 1.0), Result.RESTARTED, 2.0, 204, None)
    restarted = json.loads(RestartEvent(restart, {0: 1}).data())
    gone = json.loads(WorkerEvent(worker, False, 3.0, {0: 1}).data())
    assert (restarted["connector"], restarted["worker_id"], gone["worker_id"]) == (
        shown(name), shown(worker), shown(worker))
    assert len(restarted["connector"]) == len(gone["worker_id"]) == MAX_SHOWN_CHARS
    # The history topic keeps them whole (its readers join them with the status events, which are whole too).
    assert json.loads(restart.history_event("sidecar"))["connector"] == name


async def test_forged_worker_ids_get_no_series_of_their_own(mock_cluster: FaultyCluster,
                                                              store_factory: StoreFactory) -> None:
    """Statuses naming 500 worker ids no group read ever listed: one count, not 500 status_worker_up series."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    registry = CollectorRegistry()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry,
                             **{"group.id": "connect-cluster"}) as store:
        actions = Actions(store.config, store, None)  # its group is read here, not by its watch (never started)
        registry.register(actions.collector())
        write_raw(store, *[(f"status-task-c-{n}".encode(), status("FAILED", f"forged-{n}:8083"))
                           for n in range(500)], (b"status-task-c-500", status("RUNNING", "a:8083")))
        await store.read_to_end(WAIT)
        actions.liveness.read([Member("m-a", metadata("http://a:8083/"))], 1.0)
        registry_text = generate_latest(registry).decode()
    up = [line for line in registry_text.splitlines() if line.startswith("status_worker_up{")]
    assert up == ['status_worker_up{worker="a:8083"} 1.0']
    assert "status_workers_never_in_group 500.0" in registry_text
    assert 'status_gone_worker_statuses{kind="task",state="FAILED"} 500.0' in registry_text
