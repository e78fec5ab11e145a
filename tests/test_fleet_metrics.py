"""The fleet's statuses on /metrics: what a Connect worker writes to the status topic (a plain producer
here) shows as series of a running store's API, counts by state, the cap on per-object series, the off
switch; and the cache's notes of state changes they are built from."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app
from status_store.connect import codec
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import State
from status_store.fleet.text import MAX_SHOWN_CHARS
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import raw_producer

WAIT = 15.0
# A sample's labels, sorted, as a hashable key; its value.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def status(state: State, worker: str = "w1:8083", generation: int = 1) -> bytes:
    value = codec.encode_status(state, worker, generation, None)
    assert value is not None
    return value


def sample(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


# ------------------------------------------------------------------------------- the cache's notes of changes


def fleet_of(cache: StatusCache) -> dict[tuple[str, int | None], tuple[State, float, int]]:
    return {(o.connector, o.task): (o.value.state, o.changed_at, o.changes) for o in cache.fleet()}


def test_a_state_change_is_noted_at_its_record_timestamp_and_counted() -> None:
    cache = StatusCache(clock=lambda: pytest.fail("every record has a timestamp"))
    key = b"status-task-c-0"
    cache.apply([StatusRecord(key, status(State.RUNNING), 0, 0, 100.0)])
    assert fleet_of(cache) == {("c", 0): (State.RUNNING, 100.0, 0)}  # the first status is no change
    # Another generation or worker in the same state changes neither.
    cache.apply([StatusRecord(key, status(State.RUNNING, "w2:8083", 2), 0, 1, 150.0)])
    assert fleet_of(cache) == {("c", 0): (State.RUNNING, 100.0, 0)}
    cache.apply([StatusRecord(key, status(State.FAILED, "w2:8083", 2), 0, 2, 200.0),
                 StatusRecord(key, status(State.RUNNING, "w2:8083", 2), 0, 3, 300.0)])
    assert fleet_of(cache) == {("c", 0): (State.RUNNING, 300.0, 2)}


def test_an_ignored_stale_unassigned_is_no_change_and_a_record_without_timestamp_takes_the_clock() -> None:
    cache = StatusCache(clock=lambda: 42.0)
    cache.apply([StatusRecord(b"status-task-c-0", status(State.RUNNING, generation=3)),
                 StatusRecord(b"status-task-c-0", status(State.UNASSIGNED, "w2:8083", 2), 0, 1, 99.0)])
    assert fleet_of(cache) == {("c", 0): (State.RUNNING, 42.0, 0)}


def test_a_deleted_connector_leaves_the_fleet_and_starts_afresh() -> None:
    cache = StatusCache()
    cache.apply([StatusRecord(b"status-connector-c", status(State.RUNNING), 0, 0, 1.0),
                 StatusRecord(b"status-connector-c", status(State.PAUSED), 0, 1, 2.0),
                 StatusRecord(b"status-task-c-0", status(State.RUNNING), 0, 2, 3.0),
                 StatusRecord(b"status-connector-c", None, 0, 3, 4.0)])
    assert fleet_of(cache) == {}
    cache.apply([StatusRecord(b"status-connector-c", status(State.RUNNING), 0, 4, 5.0)])
    assert fleet_of(cache) == {("c", None): (State.RUNNING, 5.0, 0)}


# ------------------------------------------------------------------------------- /metrics of a running store


class Fleet:
    """A running store and its API; records written as a Connect worker writes them, then /metrics read."""

    def __init__(self, store: StatusStore, http: httpx.AsyncClient) -> None:
        self.store = store
        self.http = http

    async def write(self, records: Mapping[bytes, bytes | None], timestamp_ms: int | None = None) -> None:
        """Write the records with a plain producer and wait (bounded) until the store has read them."""
        producer = raw_producer(self.store)
        for key, value in records.items():
            producer.produce(self.store.config.topic, value, key, timestamp=timestamp_ms or 0)
        assert producer.flush(WAIT) == 0
        await self.store.read_to_end(WAIT)

    async def scrape(self) -> Samples:
        response = await self.http.get("/metrics")
        assert response.status_code == 200
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(response.text) for s in family.samples}


FleetFactory = Callable[..., AbstractAsyncContextManager[Fleet]]


@pytest.fixture
def fleet(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> FleetFactory:
    """Start a store with these settings and its API: ``async with fleet(**settings) as f``."""

    @asynccontextmanager
    async def start(**settings: str) -> AsyncIterator[Fleet]:
        registry = CollectorRegistry()
        topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
        async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **settings) as store:
            app = create_app(store, registry)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
                yield Fleet(store, http)

    return start


async def test_a_workers_records_show_as_state_series_and_counts(fleet: FleetFactory) -> None:
    async with fleet() as f:
        await f.write({b"status-connector-c": status(State.RUNNING, "w1:8083"),
                       b"status-task-c-0": status(State.RUNNING, "w1:8083"),
                       b"status-task-c-1": status(State.FAILED, "w2:8083")}, timestamp_ms=1_700_000_000_000)
        seen = await f.scrape()
        assert seen[sample("status_connector_state", connector="c", state="RUNNING", worker_id="w1:8083")] == 1
        assert seen[sample("status_task_state", connector="c", task="0", state="RUNNING", worker_id="w1:8083")] == 1
        assert seen[sample("status_task_state", connector="c", task="1", state="FAILED", worker_id="w2:8083")] == 1
        assert seen[sample("status_task_state_changed_timestamp_seconds", connector="c", task="1")] == 1_700_000_000
        assert seen[sample("status_task_state_changes_total", connector="c", task="1")] == 0
        assert seen[sample("status_connector_tasks", connector="c", state="FAILED")] == 1
        assert seen[sample("status_connector_tasks", connector="c", state="RUNNING")] == 1
        assert seen[sample("status_tasks", state="FAILED")] == 1
        assert seen[sample("status_tasks", state="RUNNING")] == 1
        assert seen[sample("status_tasks", state="PAUSED")] == 0
        assert seen[sample("status_connectors", state="RUNNING")] == 1
        assert seen[sample("status_fleet_objects_omitted")] == 0

        # A status without worker id (Connect reads it): an empty worker_id, which Prometheus takes as none.
        await f.write({b"status-task-c-2": b'{"state":"UNASSIGNED","trace":null,"worker_id":null,"generation":1}'})
        seen = await f.scrape()
        assert seen[sample("status_task_state", connector="c", task="2", state="UNASSIGNED", worker_id="")] == 1
        await f.write({b"status-task-c-2": None})

        # A worker restarts the failed task on another worker: the series follow the record read.
        await f.write({b"status-task-c-1": status(State.RUNNING, "w3:8083", 2)}, timestamp_ms=1_700_000_060_000)
        seen = await f.scrape()
        assert sample("status_task_state", connector="c", task="1", state="FAILED", worker_id="w2:8083") not in seen
        assert seen[sample("status_task_state", connector="c", task="1", state="RUNNING", worker_id="w3:8083")] == 1
        assert seen[sample("status_task_state_changed_timestamp_seconds", connector="c", task="1")] == 1_700_000_060
        assert seen[sample("status_task_state_changes_total", connector="c", task="1")] == 1
        assert seen[sample("status_tasks", state="FAILED")] == 0
        assert seen[sample("status_tasks", state="RUNNING")] == 2

        # The connector deleted (Connect's tombstone): its series go.
        await f.write({b"status-connector-c": None})
        seen = await f.scrape()
        assert not {"status_connector_state", "status_task_state", "status_connector_tasks"} & names(seen)
        assert seen[sample("status_tasks", state="RUNNING")] == 0


async def test_the_cap_keeps_the_objects_not_running_first_and_warns(
        fleet: FleetFactory, caplog: pytest.LogCaptureFixture) -> None:
    async with fleet(**{"sidecar.metrics.fleet.max.objects": "2"}) as f:
        await f.write({b"status-connector-c": status(State.RUNNING),
                       b"status-task-c-0": status(State.RUNNING),
                       b"status-task-c-1": status(State.RUNNING),
                       b"status-task-c-2": status(State.FAILED)})
        with caplog.at_level(logging.WARNING, logger="status_store.fleet.series"):
            seen = await f.scrape()
            await f.scrape()
    states = [dict(labels) for name, labels in seen if name in ("status_connector_state", "status_task_state")]
    assert len(states) == 2
    assert {"connector": "c", "task": "2", "state": "FAILED", "worker_id": "w1:8083"} in states
    assert seen[sample("status_fleet_objects_omitted")] == 2
    assert seen[sample("status_tasks", state="RUNNING")] == 2  # the counts cover every object
    warnings = [r for r in caplog.records if "sidecar.metrics.fleet.max.objects=2" in r.getMessage()]
    assert len(warnings) == 1  # once when the cap is passed, not at every scrape


@pytest.mark.parametrize(("mode", "served"), [
    ("counts", {"status_connectors", "status_tasks"}),
    ("off", set()),
])
async def test_counts_only_or_off(fleet: FleetFactory, mode: str, served: set[str]) -> None:
    fleet_series = {"status_connectors", "status_tasks", "status_connector_state", "status_task_state",
                    "status_connector_state_changed_timestamp_seconds", "status_task_state_changed_timestamp_seconds",
                    "status_connector_state_changes_total", "status_task_state_changes_total",
                    "status_connector_tasks", "status_fleet_objects_omitted"}
    async with fleet(**{"sidecar.metrics.fleet": mode}) as f:
        await f.write({b"status-connector-c": status(State.RUNNING), b"status-task-c-0": status(State.FAILED)})
        seen = await f.scrape()
    assert names(seen) & fleet_series == served
    assert "status_update_success_total" in names(seen)  # the store's own metrics are still there
    if mode == "counts":
        assert seen[sample("status_tasks", state="FAILED")] == 1


async def test_a_lone_surrogate_in_a_worker_id_is_escaped_and_every_other_series_still_served(
        fleet: FleetFactory) -> None:
    # Connect can write one itself: a Java string cut inside a surrogate pair, written by Jackson as an escape.
    async with fleet() as f:
        await f.write({b"status-connector-bad": rb'{"state":"RUNNING","trace":null,"worker_id":"w\ud800",'
                                                 rb'"generation":1}',
                       b"status-task-bad-0": rb'{"state":"FAILED","trace":"Boom \udfff","worker_id":"\udfff:8083",'
                                              rb'"generation":1}',
                       b"status-connector-good": status(State.RUNNING)})
        seen = await f.scrape()
    # Escaped as the REST routes escape it (codec.json_string): \uD800, upper-case hex.
    assert seen[sample("status_connector_state", connector="bad", state="RUNNING", worker_id="w\\uD800")] == 1
    assert seen[sample("status_task_state", connector="bad", task="0", state="FAILED", worker_id="\\uDFFF:8083")] == 1
    assert seen[sample("status_connector_state", connector="good", state="RUNNING", worker_id="w1:8083")] == 1


async def test_long_names_are_cut_in_label_values_apart_from_each_other_and_counted(fleet: FleetFactory) -> None:
    # Names of any length come from the topic: two that differ only past the cut must still be two series.
    same_start = "c" * 20_000
    long_worker = "w" * 5_000 + ":8083"
    async with fleet() as f:
        await f.write({f"status-connector-{same_start}a".encode(): status(State.RUNNING),
                       f"status-connector-{same_start}b".encode(): status(State.FAILED, long_worker),
                       b"status-connector-short": status(State.RUNNING)})
        response = await f.http.get("/metrics")
        seen = await f.scrape()
    # No name is carried whole: none of the page's runs of "c" is longer than a label value is shown (the page's own
    # size says nothing: it grows with every metric the sidecar serves).
    assert "c" * (MAX_SHOWN_CHARS + 1) not in response.text
    assert "w" * (MAX_SHOWN_CHARS + 1) not in response.text
    states = [dict(labels) for name, labels in seen if name == "status_connector_state"]
    assert len(states) == 3
    assert all(len(value) <= MAX_SHOWN_CHARS for labels in states for value in labels.values())
    assert len({labels["connector"] for labels in states}) == 3
    assert {"connector": "short", "state": "RUNNING", "worker_id": "w1:8083"} in states
    cut = [labels for labels in states if labels["connector"] != "short"]
    assert all(labels["connector"].startswith("c" * 200) for labels in cut)
    # Two connector names and one worker id were cut.
    assert seen[sample("status_fleet_label_values_cut")] == 3
