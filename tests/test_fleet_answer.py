"""The answers about the whole fleet, ``GET /fleet`` and ``GET /connectors?expand=status``: how they show long names,
and how they are built (off the event loop, once per change set, the same bytes for every client asking meanwhile,
a bound on builds at once), on a store served by the real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app
from status_store.connect import codec
from status_store.connect.model import State
from status_store.fleet.text import MAX_SHOWN_CHARS

from .conftest import Broker, StoreFactory
from .helpers import write_raw

WAIT = 20.0


def status(state: State, worker: str = "w1:8083", trace: str | None = None) -> bytes:
    value = codec.encode_status(state, worker, 1, trace)
    assert value is not None
    return value


async def test_long_names_and_worker_ids_are_cut_in_the_fleet_and_its_events_as_in_the_metrics(
        mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    """50 keys of 600 KB made a 36.5 MB GET /fleet; every view of the fleet cuts a name the same way."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    registry = CollectorRegistry()
    names = [f"{'n' * 600_000}{i}" for i in range(3)]
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry,
                             **{"sidecar.kafka.message.max.bytes": "2000000"}) as store:
        app = create_app(store, registry)
        subscription = app.state.events.subscribe()
        write_raw(store, *((f"status-connector-{name}".encode(), status(State.FAILED, "w" * 1000)) for name in names))
        await store.read_to_end(WAIT)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            fleet = await http.get("/fleet")
            exposition = (await http.get("/metrics")).text
        events = [json.loads(event.data()) for _ in names for event in app.state.events.take(subscription)]
    assert len(fleet.content) < 10_000
    shown = [(c["name"], c["worker_id"]) for c in fleet.json()["connectors"]]
    labels = sorted((s.labels["connector"], s.labels["worker_id"]) for family in text_string_to_metric_families(
        exposition) for s in family.samples if s.name == "status_connector_state")
    assert sorted(shown) == labels
    assert sorted((event["connector"], event["worker_id"]) for event in events) == labels
    assert all(len(name) == MAX_SHOWN_CHARS and len(worker) == MAX_SHOWN_CHARS for name, worker in shown)
    assert len({name for name, _ in shown}) == 3  # cut apart: their digests differ


async def test_fleet_status_answers_any_name_the_topic_holds(mock_cluster: FaultyCluster,
                                                             store_factory: StoreFactory) -> None:
    """Names no path addresses (``..``, with a ``/``) and names /fleet shows cut: the page's "whole trace" reads them
    here, by query parameters."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    long_name = "x" * 1000
    async with store_factory(mock_cluster.bootstrap_servers, topic) as store:
        write_raw(store, *((f"status-connector-{name}".encode(), status(State.FAILED, trace=f"trace of {name[:5]}"))
                           for name in ("..", "a/b", long_name)),
                  (b"status-task-a/b-3", status(State.FAILED, trace="the task's trace")))
        await store.read_to_end(WAIT)
        app = create_app(store)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            shown = {c["name"] for c in (await http.get("/fleet")).json()["connectors"]}
            answers = {name: await http.get("/fleet/status", params={"connector": name}) for name in shown}
            task = await http.get("/fleet/status", params={"connector": "a/b", "task": 3})
            missing = await http.get("/fleet/status", params={"connector": "a/b", "task": 4})
    assert {name: answer.json()["trace"] for name, answer in answers.items()} == {
        "..": "trace of ..", "a/b": "trace of a/b", **{name: "trace of xxxxx" for name in shown if len(name) > 3}}
    assert task.json() == {"id": 3, "state": "FAILED", "worker_id": "w1:8083", "version": None,
                           "trace": "the task's trace"}
    assert missing.status_code == 404
    assert missing.json() == {"error_code": 404, "message": "No status found for task a/b-4"}
