"""The REST API against a running store on a real broker (REFERENCE §7): shapes byte for byte, errors,
202/200/503/504 paths, auth on and off, and bad input that never reaches the topic."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest
from prometheus_client import CollectorRegistry

from status_store.api import create_app
from status_store.librdkafka import MockCluster
from status_store.metrics import StoreMetrics
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import read_raw

WAIT = 15.0
TOPIC_AUTHORIZATION_FAILED = 29
RUNNING = {"state": "RUNNING", "worker_id": "h:8083", "generation": 1}


class Api:
    """An HTTP client on the app, the store under it and the mock cluster's control API."""

    def __init__(self, http: httpx.AsyncClient, store: StatusStore, cluster: MockCluster) -> None:
        self.http, self.store, self.cluster = http, store, cluster

    async def write(self, method: str, url: str, body: object = None, **params: str) -> httpx.Response:
        response = await self.http.request(method, url, json=body, params={"wait": "true", **params})
        assert response.status_code == 200, response.text
        return response


ApiFactory = Callable[..., AbstractAsyncContextManager[Api]]


@pytest.fixture
def api_factory(mock_cluster: MockCluster, store_factory: StoreFactory) -> ApiFactory:
    @asynccontextmanager
    async def make(token: str | None = None, max_body_bytes: int = 1 << 20, **settings: str) -> AsyncIterator[Api]:
        registry = CollectorRegistry()
        metrics = StoreMetrics(registry)
        topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
        async with store_factory(mock_cluster.bootstrap_servers, topic, [metrics], **settings) as store:
            app = create_app(store, registry, token, max_body_bytes)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
                yield Api(http, store, mock_cluster)

    return make


@pytest.fixture
async def api(api_factory: ApiFactory) -> AsyncIterator[Api]:
    async with api_factory() as started:
        yield started


async def test_connector_status_is_byte_for_byte_connects(api: Api) -> None:
    await api.write("PUT", "/connectors/conn/status", {**RUNNING, "type": "source"})
    await api.write("PUT", "/connectors/conn/tasks/1/status", RUNNING)
    await api.write("PUT", "/connectors/conn/tasks/0/status",
                    {"state": "FAILED", "trace": "boom\n\tat X.y(X.java:1)\u0001é", "worker_id": "h:8083",
                     "generation": 1})
    await api.store.read_your_writes(WAIT)
    response = await api.http.get("/connectors/conn/status")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content == (
        '{"name":"conn","connector":{"state":"RUNNING","worker_id":"h:8083"},"tasks":['
        '{"id":0,"state":"FAILED","worker_id":"h:8083","trace":"boom\\n\\tat X.y(X.java:1)\\u0001é"},'
        '{"id":1,"state":"RUNNING","worker_id":"h:8083"}],"type":"source"}'
    ).encode()
    task = await api.http.get("/connectors/conn/tasks/1/status")
    assert task.content == b'{"id":1,"state":"RUNNING","worker_id":"h:8083"}'


async def test_missing_statuses_are_404_with_connects_body(api: Api) -> None:
    response = await api.http.get("/connectors/nope/status")
    assert (response.status_code, response.content) == (
        404, b'{"error_code":404,"message":"No status found for connector nope"}')
    response = await api.http.get("/connectors/nope/tasks/0/status")
    assert (response.status_code, response.content) == (
        404, b'{"error_code":404,"message":"No status found for task nope-0"}')


async def test_listing_and_expanding_connectors(api: Api) -> None:
    assert (await api.http.get("/connectors")).json() == []
    await api.write("PUT", "/connectors/b/status", RUNNING)
    await api.write("PUT", "/connectors/a/status", {**RUNNING, "type": "sink"})
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors")).content == b'["a","b"]'
    assert (await api.http.get("/connectors", params={"expand": "info"})).content == b'["a","b"]'
    expanded = await api.http.get("/connectors", params=[("expand", "status"), ("expand", "info")])
    assert expanded.content == (
        b'{"a":{"status":{"name":"a","connector":{"state":"RUNNING","worker_id":"h:8083"},"tasks":[],"type":"sink"}},'
        b'"b":{"status":{"name":"b","connector":{"state":"RUNNING","worker_id":"h:8083"},"tasks":[],"type":"unknown"}}}'
    )


async def test_topics_put_list_delete_and_reset(api: Api) -> None:
    assert (await api.http.get("/connectors/c/topics")).content == b'{"c":{"topics":[]}}'
    for topic in ("t2", "t1", "t3"):
        await api.write("PUT", f"/connectors/c/topics/{topic}", {"task": 0, "discoverTimestamp": 1700000000000})
    await api.write("PUT", "/connectors/c/topics/t4", {"task": 1})  # timestamp defaults to now
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/topics")).content == b'{"c":{"topics":["t1","t2","t3","t4"]}}'
    await api.write("DELETE", "/connectors/c/topics/t2")
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": ["t1", "t3", "t4"]}}
    reset = await api.http.put("/connectors/c/topics/reset")
    assert (reset.status_code, reset.content) == (202, b"")
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": []}}


async def test_a_write_answers_202_at_once_and_200_when_waited_for(api: Api) -> None:
    accepted = await api.http.put("/connectors/c/status", json=RUNNING)
    assert accepted.status_code == 202
    assert accepted.json()["results"][0]["key"] == "status-connector-c"
    written = await api.write("PUT", "/connectors/c/tasks/0/status", RUNNING)
    result = written.json()["results"][0]
    assert (result["key"], result["result"], result["attempts"]) == ("status-task-c-0", "written", 1)
    assert result["partition"] in api.store.partitions
    assert result["offset"] >= 0


async def test_delete_connector_writes_tombstones(api: Api) -> None:
    await api.write("PUT", "/connectors/c/status", RUNNING)
    await api.write("PUT", "/connectors/c/tasks/0/status", RUNNING)
    await api.store.read_your_writes(WAIT)
    deleted = await api.write("DELETE", "/connectors/c")
    assert [r["key"] for r in deleted.json()["results"]] == ["status-task-c-0", "status-connector-c"]
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/status")).status_code == 404


async def test_waiting_ends_in_504_while_kafka_is_down(api: Api) -> None:
    api.cluster.broker_down(-1)
    response = await api.http.put("/connectors/c/status", json=RUNNING, params={"wait": "true", "timeout_ms": "1000"})
    assert response.status_code == 504
    assert response.json()["error_code"] == 504
    assert "still being retried" in response.json()["message"]
    retries = await api.http.get("/retries")
    assert retries.status_code == 200
    api.cluster.broker_up(-1)


async def test_waiting_ends_in_503_when_kafka_refuses(api_factory: ApiFactory) -> None:
    async with api_factory(**{"status.storage.retry.max.retries": "0"}) as api:
        api.cluster.push_request_errors(MockCluster.PRODUCE, TOPIC_AUTHORIZATION_FAILED)
        response = await api.http.put("/connectors/c/status", json=RUNNING, params={"wait": "true"})
        assert response.status_code == 503
        assert "TOPIC_AUTHORIZATION_FAILED" in response.json()["message"]


async def test_put_safe_that_connect_would_drop_is_a_409(api: Api) -> None:
    await api.write("PUT", "/connectors/c/status", {**RUNNING, "generation": 5})
    await api.store.read_your_writes(WAIT)
    response = await api.http.put("/connectors/c/status", params={"safe": "true"},
                                  json={"state": "UNASSIGNED", "worker_id": "other:8083", "generation": 4})
    assert response.status_code == 409
    assert response.json()["error_code"] == 409
    same_worker = await api.http.put("/connectors/c/status", params={"safe": "true"},
                                     json={"state": "UNASSIGNED", "worker_id": "h:8083", "generation": 4})
    assert same_worker.status_code == 202


async def test_the_batch_endpoint_applies_updates_in_order(api: Api) -> None:
    batch = {"updates": [
        {"kind": "connector", "connector": "c", **RUNNING, "type": "source"},
        {"kind": "task", "connector": "c", "task": 0, **RUNNING},
        {"kind": "task", "connector": "c", "task": 0, "state": "PAUSED", "worker_id": "h:8083", "generation": 1},
        {"kind": "topic", "connector": "c", "topic": "orders", "task": 0, "discoverTimestamp": 1},
        {"kind": "connector", "connector": "gone", **RUNNING},
        {"kind": "delete_connector", "connector": "gone"},
        {"kind": "delete_topic", "connector": "c", "topic": "never"},
    ]}
    response = await api.http.post("/statuses", json=batch, params={"wait": "true"})
    assert response.status_code == 200, response.text
    assert [r["result"] for r in response.json()["results"]].count("written") >= 5
    await api.store.read_your_writes(WAIT)
    status = (await api.http.get("/connectors/c/status")).json()
    assert status["tasks"] == [{"id": 0, "state": "PAUSED", "worker_id": "h:8083"}]
    assert status["type"] == "source"
    assert (await api.http.get("/connectors/gone/status")).status_code == 404
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": ["orders"]}}


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "message"),
    [
        ("PUT", "/connectors/c/status", b"{not json", 400, "not valid JSON"),
        ("PUT", "/connectors/c/status", {**RUNNING, "state": "EXPLODED"}, 422, "state"),
        ("PUT", "/connectors/c/status", {**RUNNING, "generation": -1}, 422, "generation"),
        ("PUT", "/connectors/c/status", {**RUNNING, "generation": "1"}, 422, "generation"),
        ("PUT", "/connectors/c/status", {**RUNNING, "extra": 1}, 422, "extra"),
        ("PUT", "/connectors/c/status", {"state": "RUNNING", "generation": 1}, 422, "worker_id"),
        ("PUT", "/connectors/c/tasks/abc/status", RUNNING, 422, "task"),
        ("PUT", "/connectors/c/tasks/-1/status", RUNNING, 422, "task"),
        ("PUT", "/connectors/c/tasks/0/status", {**RUNNING, "state": "STOPPED"}, 422, "STOPPED"),
        ("PUT", "/connectors/a%01b/status", RUNNING, 400, "control characters"),
        ("PUT", "/connectors/%20/status", RUNNING, 400, "must not be empty"),
        ("PUT", "/connectors/c/topics/bad:topic", {"task": 0}, 400, "not a legal Kafka topic name"),
        ("POST", "/statuses", {"updates": []}, 422, "updates"),
        ("POST", "/statuses", {"updates": [{"kind": "task", "connector": "c", "task": 0, **RUNNING},
                                           {"kind": "task", "connector": "c", "task": 1, "state": "STOPPED",
                                            "worker_id": "h", "generation": 1}]}, 422, "STOPPED"),
    ],
)
async def test_bad_input_is_refused_with_connects_body_and_never_reaches_the_topic(
        api: Api, method: str, url: str, body: object, status: int, message: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await api.http.request(method, url, content=content, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()
    assert error["error_code"] == status
    assert message in error["message"]
    await api.store.flush(WAIT)
    assert read_raw(api.store) == []


async def test_a_body_over_the_limit_is_413(api_factory: ApiFactory) -> None:
    async with api_factory(max_body_bytes=200) as api:
        response = await api.http.put("/connectors/c/status", json={**RUNNING, "trace": "x" * 500})
        assert response.status_code == 413
        assert response.json() == {"error_code": 413, "message": "The request body is larger than 200 bytes"}
        assert read_raw(api.store) == []


async def test_writes_need_the_token_when_one_is_set_and_reads_do_not(api_factory: ApiFactory) -> None:
    async with api_factory(token="s3cret") as api:
        missing = await api.http.put("/connectors/c/status", json=RUNNING)
        wrong = await api.http.put("/connectors/c/status", json=RUNNING, headers={"Authorization": "Bearer nope"})
        for response in (missing, wrong):
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error_code"] == 401
        for url in ("/statuses", "/connectors/c"):
            assert (await api.http.request("DELETE" if url != "/statuses" else "POST", url)).status_code == 401
        right = await api.http.put("/connectors/c/status", json=RUNNING, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 202
        assert (await api.http.get("/connectors")).status_code == 200
        assert (await api.http.get("/connectors/c/topics")).status_code == 200


async def test_ready_follows_the_broker(api: Api) -> None:
    ready = await api.http.get("/ready")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    api.cluster.broker_down(-1)
    not_ready = await asyncio.wait_for(api.http.get("/ready"), WAIT)
    assert not_ready.status_code == 503
    assert not_ready.json()["message"].startswith("Not ready")
    api.cluster.broker_up(-1)


async def test_retries_lists_pending_updates(api_factory: ApiFactory) -> None:
    settings = {"status.storage.retry.initial.backoff.ms": "5000", "status.storage.retry.max.backoff.ms": "5000",
                "status.storage.retry.delivery.timeout.ms": "200"}
    async with api_factory(**settings) as api:
        api.cluster.broker_down(-1)
        await api.http.put("/connectors/c/status", json=RUNNING)
        for _ in range(100):
            pending = (await api.http.get("/retries")).json()
            if pending:
                break
            await asyncio.sleep(0.05)
        assert pending[0]["key"] == "status-connector-c"
        assert pending[0]["attempts"] == 1
        assert 0 < pending[0]["next_attempt_in_seconds"] <= 6.25
        assert "_MSG_TIMED_OUT" in pending[0]["last_error"]
        api.cluster.broker_up(-1)


async def test_parked_lists_updates_out_of_retries_and_metrics_count_them(api_factory: ApiFactory) -> None:
    settings = {"status.storage.retry.max.retries": "0", "status.storage.retry.delivery.timeout.ms": "200",
                "status.storage.retry.max.backoff.ms": "60000"}
    async with api_factory(**settings) as api:
        assert (await api.http.get("/retries/parked")).json() == []
        api.cluster.broker_down(-1)
        await api.http.put("/connectors/c/status", json=RUNNING)
        for _ in range(100):
            parked = (await api.http.get("/retries/parked")).json()
            if parked:
                break
            await asyncio.sleep(0.05)
        assert [(p["key"], p["kind"], p["attempts"]) for p in parked] == [("status-connector-c", "connector", 1)]
        assert "_MSG_TIMED_OUT" in parked[0]["last_error"]
        text = (await api.http.get("/metrics")).text
        assert "status_update_parked_total 1.0" in text
        assert "status_parked_updates 1.0" in text
        api.cluster.broker_up(-1)


async def test_metrics_count_http_requests_by_route(api: Api) -> None:
    await api.http.get("/connectors/x/status")
    text = (await api.http.get("/metrics")).text
    assert 'http_requests_total{method="GET",route="/connectors/{name}/status",status="404"} 1.0' in text
    assert "status_update_success_total" in text
