"""The answers about the whole fleet, ``GET /fleet`` and ``GET /connectors?expand=status``: how they show long names,
and how they are built (off the event loop, once per change set, the same bytes for every client asking meanwhile,
a bound on builds at once), on a store served by the real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from harness.faulty_cluster import FaultyCluster
from status_store.act.actions import Actions
from status_store.api import create_app
from status_store.api.routes import connectors, ui
from status_store.connect import codec
from status_store.connect.model import State
from status_store.fleet import series
from status_store.fleet.text import MAX_SHOWN_CHARS
from status_store.metrics import StoreMetrics
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually_value, write_raw
from .test_events import ServedFactory, serve  # noqa: F401  (serve: the fixture)

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
        app = create_app(store, registry, actions=Actions(store.config, store, None))
        subscription = app.state.events.subscribe()
        write_raw(store, *((f"status-connector-{name}".encode(), status(State.FAILED, "w" * 1000)) for name in names))
        await store.read_to_end(WAIT)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            fleet = await http.get("/fleet")
            health = await http.get("/fleet/health")
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
    # GET /fleet/health carried the names whole (30 MB for 50 names of 600 KB): cut as /fleet cuts them.
    assert len(health.content) < 10_000
    assert sorted(health.json()) == sorted(name for name, _ in shown)


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


def fill(store: StatusStore, connectors: int, tasks: int = 2) -> None:
    """Connectors with tasks, every tenth FAILED with a trace, written as a Connect worker writes them."""
    records = []
    for c in range(connectors):
        failed = c % 10 == 0
        value = status(State.FAILED if failed else State.RUNNING, f"w{c % 7}:8083", "boom\n\tat x" if failed else None)
        records.append((f"status-connector-c{c}".encode(), value))
        records.extend((f"status-task-c{c}-{t}".encode(), value) for t in range(tasks))
    write_raw(store, *records)


@dataclass
class Held:
    """A function held at its first call until ``release`` is set: its calls, and whether it is waiting now."""

    release: threading.Event = field(default_factory=threading.Event)
    calls: int = 0
    waiting: bool = False


@contextmanager
def held(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> Iterator[Held]:
    """``module.name`` made to wait, at its first call, until released (10 s at most: then it goes on); released on
    leaving."""
    state = Held()
    original = getattr(module, name)

    def waiting(*args: Any, **kwargs: Any) -> Any:
        state.calls += 1
        if state.calls == 1:
            state.waiting = True
            state.release.wait(10)
            state.waiting = False
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, waiting)
    try:
        yield state
    finally:
        state.release.set()


# The clients' threads: each request on a thread of its own, answered whatever the event loop of the test is doing
# (not the loop's default executor, which the server uses too).
CLIENTS = ThreadPoolExecutor(16, "client")


def get(url: str, **headers: str) -> asyncio.Future[httpx.Response]:
    """A GET on a client thread."""
    return asyncio.get_running_loop().run_in_executor(CLIENTS, lambda: httpx.get(url, headers=headers, timeout=WAIT))


def waiting_for(condition: Callable[[], bool]) -> asyncio.Future[None]:
    """Until ``condition()`` holds, on a client thread (bounded: WAIT seconds at most)."""
    return asyncio.get_running_loop().run_in_executor(CLIENTS, wait_until, condition)


@pytest.mark.parametrize(("path", "module", "made_by", "answered"), [
    # ?expand=status was built on the event loop: at 100,000 connectors /health waited 8.2 s for it.
    ("/connectors?expand=status", connectors, "connector_state_info", lambda answer: len(answer.json()) == 50),
    # GET /metrics made the fleet's series on the event loop: at 1.1M statuses each scrape held /health 2 to 3 s.
    ("/metrics", series, "_counts", lambda answer: 'status_tasks{state="FAILED"} 10.0' in answer.text),
], ids=["expand=status", "metrics"])
async def test_health_is_answered_while_an_answer_about_the_whole_fleet_is_made(
        serve: ServedFactory, monkeypatch: pytest.MonkeyPatch, path: str, module: object,  # noqa: F811
        made_by: str, answered: Callable[[httpx.Response], bool]) -> None:
    async with serve() as served:
        registry = CollectorRegistry()
        StoreMetrics.watching(served.store, registry)
        served.app.state.registry = registry
        fill(served.store, 50)
        await served.store.read_to_end(WAIT)
        with held(monkeypatch, module, made_by) as making:
            asked = get(served.url + path)
            await waiting_for(lambda: making.waiting)
            # Whether the making still waits is read on the client's thread as the answer comes.
            health, answered_while_held = await asyncio.get_running_loop().run_in_executor(
                CLIENTS, lambda: (httpx.get(f"{served.url}/health", timeout=WAIT), making.waiting))
            making.release.set()
            answer = await asked
    assert health.status_code == 200
    assert answered_while_held
    assert answer.status_code == 200
    assert answered(answer)


async def test_clients_asking_at_once_share_one_build_and_the_same_bytes(
        serve: ServedFactory, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    async with serve() as served:
        fill(served.store, 30)
        await served.store.read_to_end(WAIT)
        with held(monkeypatch, ui, "fleet_text") as build:
            encodings = [{}] * 5 + [{"Accept-Encoding": "identity"}] * 5
            asking = [get(f"{served.url}/fleet", **encoding) for encoding in encodings]
            await waiting_for(lambda: build.waiting)
            # A build holds its view: an answer of another kind needs a build of its own, refused past the bound.
            served.app.state.shared_answers.max_builds = 1
            refused = await get(f"{served.url}/connectors?expand=status")
            build.release.set()
            answers = await asyncio.gather(*asking)
        again = await get(f"{served.url}/fleet")
        write_raw(served.store, (b"status-connector-new", status(State.PAUSED)))
        await served.store.read_to_end(WAIT)
        changed = await get(f"{served.url}/fleet")
        metrics = await get(f"{served.url}/metrics")
    assert build.calls == 2  # the ten clients and the one after them: one build; after the change: a second
    assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
    assert [a.headers.get("content-encoding") for a in answers] == ["gzip"] * 5 + [None] * 5
    assert len({a.content for a in answers}) == 1  # decoded: the same text
    assert again.content == answers[0].content
    fleet = answers[0].json()
    assert len(fleet["connectors"]) == 30
    assert [c["name"] for c in changed.json()["connectors"]][-1] == "new"
    assert 'status_fleet_answer_builds_total{answer="fleet"} 2.0' in metrics.text
    assert "status_fleet_answer_refused_total 1.0" in metrics.text


def wait_until(condition: Callable[[], bool]) -> None:
    """Bounded: WAIT seconds at most."""
    eventually_value(condition, bool, WAIT, 0.01, what="the condition")


async def test_clients_waiting_while_statuses_change_join_one_next_build(
        serve: ServedFactory, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Statuses changing every 200 ms while /fleet is built: a client waiting for the build in progress started the
    next one at its own older version, so later clients did not join it (11 builds for 20 clients, waits of 2.7 to
    25 s). The next build is at the version it reads: every client waiting joins it."""
    async with serve() as served:
        fill(served.store, 10)
        await served.store.read_to_end(WAIT)
        answers = served.app.state.shared_answers
        with held(monkeypatch, ui, "fleet_text") as build:
            asking = [get(f"{served.url}/fleet")]
            await waiting_for(lambda: build.waiting)
            for n in range(1, 10):
                # A change, read, then a client asking for the fleet as it is now.
                write_raw(served.store, (f"status-connector-changed-{n}".encode(), status(State.PAUSED)))
                await served.store.read_to_end(WAIT)
                asking.append(get(f"{served.url}/fleet"))
                await waiting_for(lambda n=n: answers.waiting == n + 1)
            build.release.set()
            fleets = [answer.json() for answer in await asyncio.gather(*asking)]
    assert build.calls == 2
    for n, fleet in enumerate(fleets):
        names = {connector["name"] for connector in fleet["connectors"]}
        assert {f"changed-{m}" for m in range(1, n + 1)} <= names  # nothing older than the client's request


async def test_an_answer_is_decompressed_off_the_event_loop_for_clients_without_gzip(
        serve: ServedFactory) -> None:  # noqa: F811
    """The shared answer was decompressed on the event loop for clients that do not ask for gzip (curl's default): at
    100,000 connectors, 60 such clients held /health for up to 12.6 s. The loop's own calls are watched (a profile
    function of its thread): it decompresses nothing, and the client gets the whole text."""
    async with serve() as served:
        fill(served.store, 200)
        await served.store.read_to_end(WAIT)
        gzipped = await get(f"{served.url}/connectors?expand=status")
        on_the_loop: list[str] = []

        def watch(frame: object, event: str, arg: object) -> None:
            if event == "c_call" and getattr(arg, "__qualname__", "") == "Decompress.decompress":
                on_the_loop.append(event)

        sys.setprofile(watch)
        try:
            plain = await get(f"{served.url}/connectors?expand=status", **{"Accept-Encoding": "identity"})
        finally:
            sys.setprofile(None)
    assert plain.headers.get("content-encoding") is None
    assert plain.content == gzipped.content  # httpx decoded the gzip one: the same text
    assert len(plain.json()) == 200
    assert on_the_loop == []
