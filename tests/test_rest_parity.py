"""Connect's REST read side, answered as Connect's ConnectorsResource and RootResource answer it: expansions,
stored states, names, GET /, deleting a connector, and what Connect serves from its config topic."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from urllib.parse import quote

import httpx
import pytest

from harness.faulty_cluster import FaultyCluster
from status_store import __version__
from status_store.api import create_app
from status_store.fleet.config_topic import ConfigTopic
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .connect_records import Record, commit, create_config_topic, created, task_config, write_records
from .helpers import read_raw, write_raw

WAIT = 15.0
RUNNING = {"state": "RUNNING", "worker_id": "h:8083", "generation": 1}
SINK = {"connector.class": "io.example.JdbcSinkConnector", "name": "orders-sink", "topics": "orders",
        "connection.password": "${file:/etc/secrets.properties:db.password}"}
SOURCE = {"connector.class": "io.example.FileSource", "name": "logs", "file": "/var/log/app.log"}


class Sidecar:
    """The app over a started store (and config topic), an HTTP client on it, and writers of both topics."""

    def __init__(self, http: httpx.AsyncClient, store: StatusStore, config_topic: ConfigTopic | None) -> None:
        self.http, self.store, self.config_topic = http, store, config_topic

    async def put_status(self, url: str, body: dict[str, object]) -> None:
        response = await self.http.put(url, json=body, params={"wait": "true"})
        assert response.status_code == 200, response.text

    def write_status_records(self, *records: tuple[bytes, bytes | None]) -> None:
        write_raw(self.store, *records)

    async def write_config_records(self, *records: Record) -> None:
        assert self.config_topic is not None
        write_records(self.store.bootstrap_servers, self.config_topic.topic, list(records))
        await self.config_topic.read_to_end(WAIT)

    async def status_bytes(self) -> list[bytes | None]:
        await self.store.flush(WAIT)
        return [key for _, key, _ in read_raw(self.store)]


SidecarFactory = Callable[..., AbstractAsyncContextManager[Sidecar]]


@pytest.fixture
def sidecar_factory(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> SidecarFactory:
    @asynccontextmanager
    async def make(with_config_topic: bool = True, token: str | None = None, **settings: str) -> AsyncIterator[Sidecar]:
        broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
        config_topic = None
        if with_config_topic:
            topic = f"connect-configs-{uuid.uuid4().hex[:8]}"
            create_config_topic(broker, topic)
            settings["config.storage.topic"] = topic
        async with store_factory(mock_cluster.bootstrap_servers, broker.new_topic(), **settings) as store:
            if with_config_topic:
                config_topic = ConfigTopic(settings["config.storage.topic"], store.bootstrap_servers, {})
                await config_topic.start(WAIT)
            try:
                app = create_app(store, token=token, config_topic=config_topic)
                async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
                    yield Sidecar(http, store, config_topic)
            finally:
                if config_topic is not None:
                    await config_topic.stop()

    return make


@pytest.fixture
async def sidecar(sidecar_factory: SidecarFactory) -> AsyncIterator[Sidecar]:
    async with sidecar_factory() as started:
        yield started


@pytest.fixture
async def without_config_topic(sidecar_factory: SidecarFactory) -> AsyncIterator[Sidecar]:
    async with sidecar_factory(with_config_topic=False) as started:
        yield started


# ----------------------------------------------------------------------------- ?expand=


@pytest.mark.parametrize("query", ["expand=", "expand", "expand=bogus", "expand=STATUS", "expand=&x=1"])
async def test_any_expand_parameter_answers_a_map_as_connect_does(without_config_topic: Sidecar, query: str) -> None:
    await without_config_topic.put_status("/connectors/c/status", RUNNING)
    response = await without_config_topic.http.get(f"/connectors?{query}")
    assert (response.status_code, response.content) == (200, b'{"c":{}}')


async def test_expand_info_without_a_configuration_is_null_as_connects_herder_answers(
        without_config_topic: Sidecar) -> None:
    await without_config_topic.put_status("/connectors/c/status", RUNNING)
    response = await without_config_topic.http.get("/connectors?expand=info")
    assert response.content == b'{"c":{"info":null}}'


async def test_expand_status_leaves_out_a_connector_without_status_whatever_else_is_asked(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("configured", SOURCE, []), *created("running", SOURCE, []))
    await sidecar.put_status("/connectors/running/status", RUNNING)
    for query in ("expand=status", "expand=info&expand=status", "expand=status&expand=info"):
        expanded = (await sidecar.http.get(f"/connectors?{query}")).json()
        assert list(expanded) == ["running"], query
    assert list((await sidecar.http.get("/connectors?expand=info")).json()) == ["configured", "running"]


# ----------------------------------------------------------------------------- stored states and names


async def test_statuses_stored_as_destroyed_are_shown_as_connect_shows_them(without_config_topic: Sidecar) -> None:
    destroyed = b'{"state":"DESTROYED","trace":null,"worker_id":"h:8083","generation":3}'
    without_config_topic.write_status_records((b"status-connector-c", destroyed), (b"status-task-c-0", destroyed))
    await without_config_topic.store.read_to_end(WAIT)
    status = await without_config_topic.http.get("/connectors/c/status")
    assert (status.status_code, status.content) == (200, (
        b'{"name":"c","connector":{"state":"DESTROYED","worker_id":"h:8083","version":null},'
        b'"tasks":[{"id":0,"state":"DESTROYED","worker_id":"h:8083","version":null}],"type":"unknown"}'))
    task = await without_config_topic.http.get("/connectors/c/tasks/0/status")
    assert (task.status_code, task.content) == (
        200, b'{"id":0,"state":"DESTROYED","worker_id":"h:8083","version":null}')
    assert list((await without_config_topic.http.get("/connectors?expand=status")).json()) == ["c"]


@pytest.mark.parametrize("name", ["   ", "\t", "x" * 1025, "é" * 3000])
async def test_names_connect_serves_are_served_on_every_read_route(without_config_topic: Sidecar, name: str) -> None:
    value = b'{"state":"RUNNING","trace":null,"worker_id":"h:8083","generation":1}'
    topic = json.dumps({"topic": {"name": "t", "connector": name, "task": 0, "discoverTimestamp": 1}}).encode()
    without_config_topic.write_status_records((f"status-connector-{name}".encode(), value),
                                              (f"status-task-{name}-0".encode(), value),
                                              (f"status-topic-t:connector-{name}".encode(), topic))
    await without_config_topic.store.read_to_end(WAIT)
    http, path = without_config_topic.http, f"/connectors/{quote(name, safe='')}"
    assert (await http.get("/connectors")).json() == [name]
    status = await http.get(f"{path}/status")
    assert (status.status_code, status.json()["name"]) == (200, name)
    assert (await http.get(f"{path}/tasks/0/status")).json()["state"] == "RUNNING"
    assert (await http.get(f"{path}/topics")).json() == {name: {"topics": ["t"]}}
    # Writes still refuse what a connector could not have been created with, or we could not write safely.
    refused = await http.put(f"{path}/status", json=RUNNING)
    assert (refused.status_code, refused.json()["error_code"]) == (400, 400)


# ----------------------------------------------------------------------------- GET /


async def test_root_has_connects_fields_first(sidecar: Sidecar) -> None:
    response = await sidecar.http.get("/")
    assert response.status_code == 200
    body = response.json()
    assert list(body)[:3] == ["version", "commit", "kafka_cluster_id"]
    assert body["version"] == __version__
    assert body["commit"] == "unknown"  # an install from a working tree records no commit
    assert body["kafka_cluster_id"] == sidecar.store.cluster_id
    assert body["config_topic"] == sidecar.store.config.config_topic


# ----------------------------------------------------------------------------- DELETE /connectors/{name}


async def test_deleting_a_connector_nobody_knows_is_connects_404_and_writes_nothing(sidecar: Sidecar) -> None:
    response = await sidecar.http.delete("/connectors/never")
    assert (response.status_code, response.content) == (
        404, b'{"error_code":404,"message":"Connector never not found"}')
    assert await sidecar.status_bytes() == []


async def test_deleting_a_known_connector_is_refused_and_deletes_nothing(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("configured", SOURCE, []))
    await sidecar.put_status("/connectors/running/status", RUNNING)
    for name in ("configured", "running"):
        response = await sidecar.http.delete(f"/connectors/{name}")
        assert (response.status_code, response.json()["error_code"]) == (405, 405)
        assert f"DELETE /connectors/{name}/status" in response.json()["message"]
        assert response.headers["allow"] == "GET, HEAD"
    assert await sidecar.status_bytes() == [b"status-connector-running"]
    assert (await sidecar.http.get("/connectors/running/status")).status_code == 200


async def test_delete_status_writes_tombstones_for_the_connector_and_its_tasks(sidecar: Sidecar) -> None:
    await sidecar.put_status("/connectors/c/status", RUNNING)
    await sidecar.put_status("/connectors/c/tasks/0/status", RUNNING)
    deleted = await sidecar.http.delete("/connectors/c/status", params={"wait": "true"})
    assert deleted.status_code == 200, deleted.text
    assert [r["key"] for r in deleted.json()["results"]] == ["status-task-c-0", "status-connector-c"]
    assert (await sidecar.http.get("/connectors/c/status")).status_code == 404
    # Unconditional: a status written just before may not be read back yet.
    assert (await sidecar.http.delete("/connectors/unknown/status")).status_code == 202


# ----------------------------------------------------------------------------- from Connect's config topic


async def test_connectors_are_listed_from_the_config_topic(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("orders-sink", SINK, [{"task.id": "0"}]), *created("logs", SOURCE, []))
    await sidecar.put_status("/connectors/status-only/status", RUNNING)
    assert (await sidecar.http.get("/connectors")).content == b'["logs","orders-sink"]'
    # The status of a connector without a configuration is still served, as Connect serves it.
    assert (await sidecar.http.get("/connectors/status-only/status")).json()["type"] == "unknown"


async def test_fleet_holds_every_connector_and_task_with_since_when_and_the_events_position(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("orders-sink", SINK, [{"task.id": "0"}]), *created("logs", SOURCE, []))
    await sidecar.put_status("/connectors/orders-sink/status", RUNNING)
    await sidecar.put_status("/connectors/orders-sink/tasks/0/status",
                             {**RUNNING, "state": "FAILED", "trace": "java.lang.Error: gone\n\tat X.y(X.java:1)\n"})
    await sidecar.put_status("/connectors/status-only/status", {**RUNNING, "state": "PAUSED"})
    fleet = (await sidecar.http.get("/fleet")).json()
    by_name = {connector["name"]: connector for connector in fleet["connectors"]}
    assert list(by_name) == ["logs", "orders-sink", "status-only"]
    # Configured without a status: listed, its status fields null.
    assert by_name["logs"] == {"name": "logs", "type": "source", "configured": True, "state": None, "worker_id": None,
                               "since": None, "trace": None, "worker_gone_since": None, "worker_stuck_since": None,
                               "restarts": None, "failure": None, "health": None, "tasks": []}
    orders = by_name["orders-sink"]
    assert (orders["type"], orders["configured"], orders["state"]) == ("sink", True, "RUNNING")
    [task] = orders["tasks"]
    assert (task["id"], task["state"], task["worker_id"], task["trace"]) == (0, "FAILED", "h:8083",
                                                                              "java.lang.Error: gone…")
    assert abs(task["since"] - time.time()) < 60  # the record's Kafka timestamp, in seconds
    assert (by_name["status-only"]["configured"], by_name["status-only"]["state"]) == (False, "PAUSED")
    # Where GET /events stood: the last offset read from each partition, three records in all.
    assert sum(offset + 1 for offset in fleet["position"].values()) == 3
    assert fleet["id"] == ",".join(f"{p}:{o}" for p, o in sorted(fleet["position"].items(), key=lambda i: int(i[0])))


async def test_connector_info_config_and_tasks_are_connects_bytes(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("orders-sink", SINK, [{"task.id": "0"}, {"task.id": "1"}]))
    http = sidecar.http
    info = await http.get("/connectors/orders-sink")
    assert (info.status_code, info.content) == (200, (
        b'{"name":"orders-sink","config":{"connector.class":"io.example.JdbcSinkConnector","name":"orders-sink",'
        b'"topics":"orders","connection.password":"${file:/etc/secrets.properties:db.password}"},'
        b'"tasks":[{"connector":"orders-sink","task":0},{"connector":"orders-sink","task":1}],"type":"sink"}'))
    config = await http.get("/connectors/orders-sink/config")
    assert config.json() == SINK
    assert list(config.json()) == list(SINK)
    tasks = await http.get("/connectors/orders-sink/tasks")
    assert tasks.content == (b'[{"id":{"connector":"orders-sink","task":0},"config":{"task.id":"0"}},'
                             b'{"id":{"connector":"orders-sink","task":1},"config":{"task.id":"1"}}]')
    expanded = await http.get("/connectors?expand=info")
    assert expanded.content == b'{"orders-sink":{"info":' + info.content + b"}}"


async def test_pending_task_configurations_are_not_served_until_committed(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("logs", SOURCE, [{"v": "1"}]), task_config("logs", 0, {"v": "2"}),
                                       task_config("logs", 1, {"v": "2"}))
    assert (await sidecar.http.get("/connectors/logs/tasks")).json() == [
        {"id": {"connector": "logs", "task": 0}, "config": {"v": "1"}}]
    await sidecar.write_config_records(commit("logs", 2))
    assert [t["config"] for t in (await sidecar.http.get("/connectors/logs/tasks")).json()] == [{"v": "2"}, {"v": "2"}]


async def test_a_connector_whose_commit_found_task_configurations_missing_has_no_tasks_on_every_route(
        sidecar: Sidecar) -> None:
    # What compaction can leave, or a hostile writer: a commit record that claims tasks whose configurations are not
    # there. The connector is inconsistent (ClusterConfigState.tasks: none), and the claimed count is never a size.
    await sidecar.write_config_records(*created("logs", SOURCE, []), commit("logs", 3),
                                       *created("huge", SOURCE, []), commit("huge", 2**31 - 1))
    for name in ("logs", "huge"):
        assert (await sidecar.http.get(f"/connectors/{name}/tasks")).content == b"[]"
        assert (await sidecar.http.get(f"/connectors/{name}")).json()["tasks"] == []
    expanded = (await sidecar.http.get("/connectors?expand=info")).json()
    assert [expanded[name]["info"]["tasks"] for name in ("huge", "logs")] == [[], []]
    # A complete set committed afterwards makes it consistent again.
    await sidecar.write_config_records(task_config("logs", 0, {"v": "1"}), commit("logs", 1))
    assert (await sidecar.http.get("/connectors/logs/tasks")).json() == [
        {"id": {"connector": "logs", "task": 0}, "config": {"v": "1"}}]


async def test_a_configuration_value_beyond_a_doubles_range_breaks_no_answer(sidecar: Sidecar) -> None:
    # 1e400 is a BigDecimal to Jackson and an infinite double to Connect's converter (Connect's REST answers 500 for
    # any configuration value that is not a string, and for the whole ?expand=info).
    await sidecar.write_config_records(*created("logs", SOURCE, []),
                                       ("connector-odd", b'{"properties":{"name":"odd","limit":1e400}}'))
    expanded = await sidecar.http.get("/connectors?expand=info")
    assert expanded.status_code == 200
    assert expanded.json()["odd"]["info"]["config"] == {"name": "odd", "limit": "Infinity"}
    assert expanded.json()["logs"]["info"]["config"] == SOURCE
    assert (await sidecar.http.get("/connectors/odd/config")).content == b'{"name":"odd","limit":"Infinity"}'


async def test_configuration_reads_need_the_token_when_one_is_set_and_status_reads_do_not(
        sidecar_factory: SidecarFactory) -> None:
    # A configuration may hold credentials; with sidecar.rest.token set, reading one takes the token.
    async with sidecar_factory(token="s3cret") as sidecar:
        await sidecar.write_config_records(*created("orders-sink", SINK, [{"task.id": "0", "db.password": "hunter2"}]))
        http = sidecar.http
        for url in ("/connectors/orders-sink", "/connectors/orders-sink/config", "/connectors/orders-sink/tasks",
                    "/connectors?expand=info", "/connectors?expand=status&expand=info"):
            for method in ("GET", "HEAD"):
                refused = await http.request(method, url)
                assert (refused.status_code, refused.headers["www-authenticate"]) == (401, "Bearer"), (method, url)
                assert b"hunter2" not in refused.content
            wrong = await http.get(url, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            allowed = await http.get(url, headers={"Authorization": "Bearer s3cret"})
            assert allowed.status_code == 200, url
        for url in ("/connectors", "/connectors?expand=status", "/connectors/orders-sink/status",
                    "/connectors/orders-sink/topics", "/"):
            assert (await http.get(url)).status_code in (200, 404), url  # open, as Connect's status reads are
    async with sidecar_factory() as open_sidecar:  # no token: open, as on Connect
        await open_sidecar.write_config_records(*created("logs", SOURCE, []))
        assert (await open_sidecar.http.get("/connectors/logs/config")).status_code == 200


async def test_config_routes_answer_connects_404_for_an_unconfigured_connector(sidecar: Sidecar) -> None:
    await sidecar.put_status("/connectors/status-only/status", RUNNING)
    for url in ("/connectors/status-only", "/connectors/status-only/config", "/connectors/status-only/tasks",
                "/connectors/never", "/connectors/never/config", "/connectors/never/tasks"):
        response = await sidecar.http.get(url)
        name = url.split("/")[2]
        assert (response.status_code, response.content) == (
            404, f'{{"error_code":404,"message":"Connector {name} not found"}}'.encode()), url


async def test_config_routes_answer_404_without_a_config_topic(without_config_topic: Sidecar) -> None:
    await without_config_topic.put_status("/connectors/c/status", RUNNING)
    for url in ("/connectors/c", "/connectors/c/config", "/connectors/c/tasks"):
        response = await without_config_topic.http.get(url)
        assert (response.status_code, response.json()["message"]) == (404, "Connector c not found"), url


async def test_the_status_type_comes_from_the_configuration(sidecar_factory: SidecarFactory) -> None:
    mirror = {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "topics": ".*"}
    queue = {"connector.class": "io.example.QueueSource", "topics": "in"}
    async with sidecar_factory(**{"sidecar.connector.types": "io.example.QueueSource:source"}) as sidecar:
        await sidecar.write_config_records(*created("orders-sink", SINK, []), *created("logs", SOURCE, []),
                                           *created("mirror", mirror, []), *created("queue", queue, []))
        for name, expected in (("orders-sink", "sink"), ("logs", "source"), ("mirror", "source"), ("queue", "source")):
            await sidecar.put_status(f"/connectors/{name}/status", RUNNING)
            assert (await sidecar.http.get(f"/connectors/{name}/status")).json()["type"] == expected, name
            assert (await sidecar.http.get(f"/connectors/{name}")).json()["type"] == expected, name


async def test_expand_status_and_info_together(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("logs", SOURCE, [{"v": "1"}]))
    await sidecar.put_status("/connectors/logs/status", RUNNING)
    await sidecar.put_status("/connectors/logs/tasks/0/status", {**RUNNING, "state": "FAILED", "trace": "boom"})
    expanded = (await sidecar.http.get("/connectors", params=[("expand", "status"), ("expand", "info")])).json()
    assert expanded == {"logs": {
        "status": {"name": "logs", "connector": {"state": "RUNNING", "worker_id": "h:8083", "version": None},
                   "tasks": [{"id": 0, "state": "FAILED", "worker_id": "h:8083", "version": None, "trace": "boom"}],
                   "type": "source"},
        "info": {"name": "logs", "config": SOURCE, "tasks": [{"connector": "logs", "task": 0}], "type": "source"},
    }}


async def test_new_read_routes_answer_head_and_trailing_slashes(sidecar: Sidecar) -> None:
    await sidecar.write_config_records(*created("logs", SOURCE, [{"v": "1"}]))
    for url in ("/connectors/logs", "/connectors/logs/config", "/connectors/logs/tasks", "/connectors/never"):
        get = await sidecar.http.get(url)
        head = await sidecar.http.head(url)
        assert (head.status_code, head.content, head.headers["content-length"]) == (
            get.status_code, b"", get.headers["content-length"]), url
        assert (await sidecar.http.get(url + "/")).content == get.content


async def test_ready_waits_for_the_config_topic_too(sidecar: Sidecar) -> None:
    ready = await sidecar.http.get("/ready")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    assert sidecar.config_topic is not None
    await sidecar.config_topic.stop()
    not_ready = await sidecar.http.get("/ready")
    assert (not_ready.status_code, not_ready.json()["message"]) == (
        503, "Not ready: the config topic's reader is stopped")
