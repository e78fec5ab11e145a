"""The record, live: the sidecar's history topic read back into it (act/record_reader.py) as statuses are written, and
``GET /connectors/{name}/history`` (its windows, its events a page at a time), ``/metrics`` (availability) and
``status-store history`` on it, against the real HTTP server and a store on each broker kind. That its figures are
analyze's: tests/analytics/test_record.py."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from prometheus_client import CollectorRegistry

from harness import free_port
from status_store.act.actions import Actions
from status_store.api import create_app
from status_store.api.http_server import http_config
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus
from status_store.record_client import show_history
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually

WAIT = 20.0
PASSWORD_TRACE = ("org.apache.kafka.connect.errors.ConnectException: login\n\tat a.b(C.java:1)\n"
                  "Caused by: java.sql.SQLException: FATAL: password authentication failed for user \"u\"\n")


@asynccontextmanager
async def served(broker: Broker, store_factory: StoreFactory, history: bool = True
                 ) -> AsyncIterator[tuple[str, StatusStore, Actions]]:
    topic = broker.new_topic()
    settings = {"status.storage.history.topic": broker.new_topic(3)} if history else {}
    registry = CollectorRegistry()
    async with store_factory(broker.bootstrap_servers, topic, registry=registry, **settings) as store:
        actions = Actions(store.config, store, None)
        registry.register(actions.collector())
        await actions.start()
        app = create_app(store, registry, actions=actions)
        port = free_port()
        server = uvicorn.Server(http_config(app, "127.0.0.1", port))
        task = asyncio.create_task(server.serve())
        await eventually(lambda: server.started)
        try:
            yield f"http://127.0.0.1:{port}", store, actions
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, WAIT)
            await actions.stop()


async def test_the_record_of_a_connector_is_read_back_from_the_history_topic_and_served(
        broker: Broker, store_factory: StoreFactory) -> None:
    async with served(broker, store_factory) as (url, store, actions), httpx.AsyncClient(timeout=WAIT) as http:
        record = actions.record
        assert record is not None
        await store.put(ConnectorStatus("sink", State.RUNNING, "w:8083", 1)).result(WAIT)
        for state, trace in ((State.RUNNING, None), (State.FAILED, PASSWORD_TRACE), (State.RUNNING, None)):
            await store.put(TaskStatus(TaskId("sink", 0), state, "w:8083", 1, trace)).result(WAIT)
            await asyncio.sleep(0.05)  # each state lasts
        await store.put(TaskStatus(TaskId("sink", 1), State.FAILED, "w:8083", 1, "boom")).result(WAIT)
        await eventually(lambda: sum(len(t.events) for t in record.timelines.values()) == 5)
        answer = await http.get(url + "/connectors/sink/history")
        assert answer.status_code == 200
        body: dict[str, Any] = answer.json()
        assert body["name"] == "sink"
        assert set(body["windows"]) == {"1h", "1d", "7d"}
        hour = body["windows"]["1h"]
        assert hour["connector"]["availability"] == 1.0
        task0, task1 = hour["tasks"]["0"], hour["tasks"]["1"]
        assert (task0["failures"], task0["recovered"], task0["unrecovered"]) == (1, 1, 0)
        assert task0["recovery_without_restart"]["episodes"] == 1
        assert 0 < task0["availability"] < 1
        assert task0["durations_ms"]["FAILED"] >= 50
        assert (task1["failures"], task1["unrecovered"], task1["availability"]) == (1, 1, 0.0)
        assert hour["all_tasks"]["failures"] == 2
        # The events, newest first, a page at a time.
        states = [(e["kind"], e["task"], e["state"]) for e in body["events"]]
        assert states[0] == ("task", 1, "FAILED")
        assert sorted(states) == sorted([("connector", None, "RUNNING"), ("task", 0, "RUNNING"), ("task", 0, "FAILED"),
                                         ("task", 0, "RUNNING"), ("task", 1, "FAILED")])
        first = (await http.get(url + "/connectors/sink/history?limit=2")).json()
        assert len(first["events"]) == 2
        second = (await http.get(url + f"/connectors/sink/history?limit=2&before={first['next_before']}")).json()
        assert [e["time"] for e in second["events"]] == [e["time"] for e in body["events"][2:4]]
        missing = await http.get(url + "/connectors/other/history")
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 404, "message": "No history found for connector other"}
        # /metrics: the connector's availability over each window, and its tasks'.
        metrics = (await http.get(url + "/metrics")).text
        assert 'status_connector_availability{connector="sink",window="1h"} 1.0' in metrics
        assert any(line.startswith('status_connector_tasks_availability{connector="sink",window="7d"}')
                   for line in metrics.splitlines())
        # status-store history: the same, for a person.
        printed = io.StringIO()
        assert await asyncio.to_thread(show_history, url, "sink", printed) == 0
        text = printed.getvalue()
        assert "1h      connector       100.00 %" in text
        assert "task 1" in text
        assert "Latest events" in text


async def test_without_a_history_topic_there_is_no_record(broker: Broker, store_factory: StoreFactory) -> None:
    async with served(broker, store_factory, history=False) as (url, _, actions), \
            httpx.AsyncClient(timeout=WAIT) as http:
        assert actions.record is None
        answer = await http.get(url + "/connectors/sink/history")
    assert answer.status_code == 404
    assert "status.storage.history.topic is not set" in answer.json()["message"]
