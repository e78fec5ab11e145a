"""The REST API against a running store on a real broker: Connect's shapes byte for byte, errors,
202/200/503/504 paths, auth on and off, and bad input that never reaches the topic."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app
from status_store.api.deps import checked_name
from status_store.api.middleware import path_problem
from status_store.api.responses import ApiError
from status_store.logs import RateLimit
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually, eventually_awaited, read_raw, write_raw

WAIT = 15.0
TOPIC_AUTHORIZATION_FAILED = KafkaError.TOPIC_AUTHORIZATION_FAILED
RUNNING = {"state": "RUNNING", "worker_id": "h:8083", "generation": 1}


class Api:
    """An HTTP client on the app, the app, the store under it and the mock cluster's control API."""

    def __init__(self, http: httpx.AsyncClient, app: FastAPI, store: StatusStore, cluster: FaultyCluster) -> None:
        self.http, self.app, self.store, self.cluster = http, app, store, cluster

    async def write(self, method: str, url: str, body: object = None, **params: str) -> httpx.Response:
        response = await self.http.request(method, url, json=body, params={"wait": "true", **params})
        assert response.status_code == 200, response.text
        return response


ApiFactory = Callable[..., AbstractAsyncContextManager[Api]]


@pytest.fixture
def api_factory(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> ApiFactory:
    @asynccontextmanager
    async def make(token: str | None = None, max_body_bytes: int = 1 << 20, **settings: str) -> AsyncIterator[Api]:
        registry = CollectorRegistry()
        topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
        async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **settings) as store:
            app = create_app(store, registry, token, max_body_bytes)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
                yield Api(http, app, store, mock_cluster)

    return make


@pytest.fixture
async def api(api_factory: ApiFactory) -> AsyncIterator[Api]:
    async with api_factory() as started:
        yield started


def retries(api: Api, path: str) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    """A probe of one of the /retries lists."""
    async def listed() -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = (await api.http.get(path)).json()
        return answer
    return listed


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
        '{"name":"conn","connector":{"state":"RUNNING","worker_id":"h:8083","version":null},"tasks":['
        '{"id":0,"state":"FAILED","worker_id":"h:8083","version":null,"trace":"boom\\n\\tat X.y(X.java:1)\\u0001é"},'
        '{"id":1,"state":"RUNNING","worker_id":"h:8083","version":null}],"type":"source"}'
    ).encode()
    task = await api.http.get("/connectors/conn/tasks/1/status")
    assert task.content == b'{"id":1,"state":"RUNNING","worker_id":"h:8083","version":null}'


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
    expanded = await api.http.get("/connectors", params={"expand": "status"})
    assert expanded.content == (
        b'{"a":{"status":{"name":"a","connector":{"state":"RUNNING","worker_id":"h:8083","version":null},"tasks":[],'
        b'"type":"sink"}},"b":{"status":{"name":"b","connector":{"state":"RUNNING","worker_id":"h:8083","version":null},'
        b'"tasks":[],"type":"unknown"}}}'
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


async def test_topic_tracking_turned_off_answers_connects_403_and_writes_no_topic(api_factory: ApiFactory) -> None:
    async with api_factory(**{"topic.tracking.enable": "false"}) as api:
        disabled = b'{"error_code":403,"message":"Topic tracking is disabled."}'
        asked = [await api.http.get("/connectors/c/topics"), await api.http.put("/connectors/c/topics/reset"),
                 await api.http.put("/connectors/c/topics/t", json={"task": 0}),
                 await api.http.put("/connectors/c/topics/reset", json={"task": 0}),
                 await api.http.delete("/connectors/c/topics/t"),
                 await api.http.post("/statuses", json={"updates": [
                     {"kind": "connector", "connector": "c", **RUNNING},
                     {"kind": "topic", "connector": "c", "topic": "t", "task": 0}]})]
        assert [(answer.status_code, answer.content) for answer in asked] == [(403, disabled)] * len(asked)
        await api.write("PUT", "/connectors/c/status", RUNNING)  # statuses are written as ever
        assert [key for _, key, _ in read_raw(api.store)] == [b"status-connector-c"]


async def test_topic_resets_turned_off_answer_connects_403_and_reset_nothing(api_factory: ApiFactory) -> None:
    async with api_factory(**{"topic.tracking.allow.reset": "false"}) as api:
        await api.write("PUT", "/connectors/c/topics/t", {"task": 0})
        reset = await api.http.put("/connectors/c/topics/reset")
        assert (reset.status_code, reset.content) == (
            403, b'{"error_code":403,"message":"Topic tracking reset is disabled."}')
        await api.store.read_your_writes(WAIT)
        assert (await api.http.get("/connectors/c/topics")).content == b'{"c":{"topics":["t"]}}'
        assert [value is None for _, _, value in read_raw(api.store)] == [False]


async def test_a_write_answers_202_at_once_and_200_when_waited_for(api: Api) -> None:
    accepted = await api.http.put("/connectors/c/status", json=RUNNING)
    assert accepted.status_code == 202
    assert accepted.json()["results"][0]["key"] == "status-connector-c"
    written = await api.write("PUT", "/connectors/c/tasks/0/status", RUNNING)
    result = written.json()["results"][0]
    assert (result["key"], result["result"], result["attempts"]) == ("status-task-c-0", "written", 1)
    assert result["partition"] in api.store.partitions
    assert result["offset"] >= 0


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
        api.cluster.push_request_errors(FaultyCluster.PRODUCE, TOPIC_AUTHORIZATION_FAILED)
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
    assert status["tasks"] == [{"id": 0, "state": "PAUSED", "worker_id": "h:8083", "version": None}]
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
        ("PUT", "/connectors/c/tasks/abc/status", RUNNING, 404, "HTTP 404 Not Found"),
        ("PUT", "/connectors/c/tasks/-1/status", RUNNING, 404, "HTTP 404 Not Found"),
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
        for url in ("/statuses", "/connectors/c", "/connectors/c/status"):
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
        pending = await eventually_awaited(retries(api, "/retries"), bool, WAIT, what="the retries")
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
        parked = await eventually_awaited(retries(api, "/retries/parked"), bool, WAIT, what="the parked updates")
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


JSON = {"content-type": "application/json"}
NOT_FOUND = b'{"error_code":404,"message":"HTTP 404 Not Found"}'


async def nothing_written(api: Api) -> bool:
    await api.store.flush(WAIT)
    return read_raw(api.store) == []


@pytest.mark.parametrize("field", ["trace", "worker_id", "connector"])
async def test_a_lone_surrogate_fails_the_whole_batch_with_a_422_and_writes_nothing(api: Api, field: str) -> None:
    bad = {"kind": "task", "connector": "c", "task": 2, **RUNNING, field: "boom \ud800"}
    batch = {"updates": [{"kind": "connector", "connector": "c", **RUNNING},
                         {"kind": "task", "connector": "c", "task": 0, **RUNNING}, bad]}
    response = await api.http.post("/statuses", content=json.dumps(batch).encode(), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == 422
    assert "not valid Unicode" in response.json()["message"]
    assert await nothing_written(api)


@pytest.mark.parametrize("field", ["trace", "worker_id"])
async def test_a_lone_surrogate_in_a_single_write_is_a_422(api: Api, field: str) -> None:
    body = json.dumps({**RUNNING, field: "x\udfffy"}).encode()
    for url in ("/connectors/c/status", "/connectors/c/tasks/0/status"):
        response = await api.http.put(url, content=body, headers=JSON)
        assert (response.status_code, response.json()["error_code"]) == (422, 422), response.text
        assert field in response.json()["message"]
    assert await nothing_written(api)


async def test_a_batch_item_that_fails_late_checks_writes_nothing(api: Api) -> None:
    batch = {"updates": [{"kind": "connector", "connector": "c", **RUNNING},
                         {"kind": "task", "connector": "c", "task": 0, **RUNNING},
                         {"kind": "topic", "connector": "c/d", "topic": "t", "task": 0}]}
    response = await api.http.post("/statuses", json=batch)
    assert (response.status_code, response.json()["error_code"]) == (400, 400)
    assert await nothing_written(api)


async def test_put_topics_reset_with_a_body_records_the_topic_named_reset(api: Api) -> None:
    await api.write("PUT", "/connectors/c/topics/other", {"task": 0})
    written = await api.write("PUT", "/connectors/c/topics/reset", {"task": 1, "discoverTimestamp": 5})
    assert [r["key"] for r in written.json()["results"]] == ["status-topic-reset:connector-c"]
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": ["other", "reset"]}}
    assert api.store.cache.get_topic("c", "reset") is not None
    for body, status in ((b"{not json", 400), (b"{}", 422), (b'{"task": 0, "tasks": 1}', 422), (b"null", 422)):
        refused = await api.http.put("/connectors/c/topics/reset", content=body, headers=JSON)
        assert (refused.status_code, refused.json()["error_code"]) == (status, status), body
    await api.store.read_your_writes(WAIT)
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": ["other", "reset"]}}


async def test_put_topics_reset_without_a_body_is_connects_reset(api: Api) -> None:
    for headers in ({}, JSON):  # Connect's clients send no body, with or without a content type
        await api.write("PUT", "/connectors/c/topics/reset", {"task": 0})
        await api.write("PUT", "/connectors/c/topics/t", {"task": 0})
        await api.store.read_your_writes(WAIT)
        reset = await api.http.put("/connectors/c/topics/reset", headers=headers)
        assert (reset.status_code, reset.content) == (202, b"")
        await api.store.read_your_writes(WAIT)
        assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": []}}
    await api.write("PUT", "/connectors/c/topics/t", {"task": 0})
    await api.store.read_your_writes(WAIT)
    waited = await api.write("PUT", "/connectors/c/topics/reset")
    assert [r["key"] for r in waited.json()["results"]] == ["status-topic-t:connector-c"]
    assert (await api.http.get("/connectors/c/topics")).json() == {"c": {"topics": []}}


async def test_a_refused_put_safe_leaves_the_connector_type_alone(api: Api) -> None:
    await api.write("PUT", "/connectors/c/status", {**RUNNING, "generation": 5, "type": "source"})
    await api.store.read_your_writes(WAIT)
    older = {"state": "UNASSIGNED", "worker_id": "other:8083", "generation": 4, "type": "sink"}
    refused = await api.http.put("/connectors/c/status", params={"safe": "true"}, json=older)
    assert refused.status_code == 409
    batch = await api.http.post("/statuses", params={"wait": "true"},
                                json={"updates": [{"kind": "connector", "connector": "c", "safe": True, **older}]})
    assert (batch.status_code, batch.json()["results"]) == (200, [])
    assert (await api.http.get("/connectors/c/status")).json()["type"] == "source"
    accepted = await api.http.put("/connectors/c/status", json={**older, "generation": 6})
    assert accepted.status_code == 202
    assert (await api.http.get("/connectors/c/status")).json()["type"] == "sink"


async def test_http_metric_labels_come_from_closed_sets(api: Api) -> None:
    for i in range(300):
        await api.http.request(f"MADEUP{i}", f"/nowhere/{i}")
    for i in range(100):
        await api.http.request(f"OTHER{i}", "/connectors")
    text = (await api.http.get("/metrics")).text
    assert 'http_requests_total{method="other",route="unmatched",status="404"} 300.0' in text
    assert 'http_requests_total{method="other",route="/connectors",status="405"} 100.0' in text
    series = [line for line in text.splitlines() if line.startswith(("http_requests_total{", "http_request_dur"))]
    assert len(series) < 60
    assert "MADEUP" not in text
    assert "nowhere" not in text


def unread_body(chunks: list[bytes], read: list[bytes]) -> AsyncIterator[bytes]:
    """A streamed request body that records what the app reads of it."""
    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            read.append(chunk)
            yield chunk

    return stream()


@pytest.mark.parametrize(("method", "url"), [("PUT", "/connectors/c/status"), ("POST", "/statuses"),
                                             ("PUT", "/connectors/c/topics/reset"),
                                             ("PUT", "/connectors/c/tasks/0/status")])
async def test_an_unauthenticated_write_is_refused_before_its_body_is_read(
        api_factory: ApiFactory, method: str, url: str) -> None:
    async with api_factory(token="s3cret") as api:
        for content_type in ("application/json", "text/plain"):
            read: list[bytes] = []
            response = await api.http.request(method, url, content=unread_body([b"{not json"], read),
                                              headers={"content-type": content_type})
            assert (response.status_code, response.json()["error_code"]) == (401, 401), response.text
            assert read == []
        authorized = await api.http.request(method, url, content=b"{not json",
                                            headers={**JSON, "authorization": "Bearer s3cret"})
        assert authorized.status_code == 400
        assert await nothing_written(api)


async def test_refused_tokens_are_logged_at_most_once_per_interval(api_factory: ApiFactory,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    async with api_factory(token="s3cret") as api:
        api.app.state.refused_log = RateLimit(10.0, clock=lambda: clock[0])
        with caplog.at_level(logging.WARNING, logger="status_store.api.routing"):
            for _ in range(20):
                await api.http.put("/connectors/c/status", json=RUNNING, headers={"authorization": "Bearer x"})
            clock[0] = 10.0
            await api.http.delete("/connectors/c")
    lines = [r.getMessage() for r in caplog.records if r.name == "status_store.api.routing"]
    assert lines == ["Refused PUT /connectors/c/status from 127.0.0.1: wrong bearer token",
                     "Refused DELETE /connectors/c from 127.0.0.1: no bearer token "
                     "(and 19 more like it since the last one logged)"]


async def test_a_chunked_body_over_the_limit_is_413(api_factory: ApiFactory) -> None:
    async with api_factory(max_body_bytes=200) as api:
        body = json.dumps({**RUNNING, "trace": "x" * 500}).encode()
        read: list[bytes] = []
        response = await api.http.put("/connectors/c/status", headers=JSON,
                                      content=unread_body([body[i:i + 100] for i in range(0, len(body), 100)], read))
        assert response.status_code == 413, response.text
        assert response.json() == {"error_code": 413, "message": "The request body is larger than 200 bytes"}
        assert response.headers["connection"] == "close"
        assert len(read) == 3  # the body was not read past the limit
        assert await nothing_written(api)


async def test_a_write_body_that_is_not_json_is_415(api: Api) -> None:
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         "application/jsonx"):
        headers = {"content-type": content_type} if content_type is not None else {}
        for method, url in (("PUT", "/connectors/c/status"), ("POST", "/statuses"),
                            ("PUT", "/connectors/c/topics/t"), ("PUT", "/connectors/c/topics/reset")):
            response = await api.http.request(method, url, content=json.dumps(RUNNING).encode(), headers=headers)
            assert response.content == b'{"error_code":415,"message":"HTTP 415 Unsupported Media Type"}', url
            assert response.status_code == 415
    assert await nothing_written(api)


async def test_json_media_types_are_accepted(api: Api) -> None:
    for content_type in ("application/json; charset=utf-8", "Application/JSON", "application/vnd.connect+json"):
        response = await api.http.put("/connectors/c/status", content=json.dumps(RUNNING).encode(),
                                      headers={"content-type": content_type})
        assert response.status_code == 202, response.text


async def test_head_is_answered_wherever_get_is(api: Api) -> None:
    await api.write("PUT", "/connectors/c/status", RUNNING)
    await api.write("PUT", "/connectors/c/tasks/0/status", RUNNING)
    await api.store.read_your_writes(WAIT)
    for url in ("/", "/health", "/ready", "/connectors", "/connectors?expand=status", "/connectors/c/status",
                "/connectors/c/tasks/0/status", "/connectors/nope/status", "/connectors/c/topics", "/retries",
                "/retries/parked", "/metrics", "/connectors/c/tasks/01/status"):
        get = await api.http.get(url)
        head = await api.http.head(url)
        assert head.status_code == get.status_code, url
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        if url != "/metrics":  # the exposition changes between the two requests
            assert head.headers["content-length"] == get.headers["content-length"]
    assert 'method="HEAD"' in (await api.http.get("/metrics")).text


async def test_head_is_refused_where_get_is_not(api: Api) -> None:
    response = await api.http.head("/statuses")
    assert response.status_code == 405


async def test_a_trailing_slash_is_served_never_redirected(api: Api) -> None:
    await api.write("PUT", "/connectors/c/status", RUNNING)
    await api.store.read_your_writes(WAIT)
    for url in ("/connectors/", "/connectors/c/status/", "/connectors/c/topics/", "/health/"):
        response = await api.http.get(url, headers={"host": "evil.example"})
        assert "location" not in response.headers
        assert response.status_code == 200, url
        assert response.content == (await api.http.get(url.rstrip("/"))).content
    written = await api.http.put("/connectors/d/status/", json=RUNNING, headers={"host": "evil.example"})
    assert written.status_code == 202


async def test_a_task_number_that_is_not_canonical_decimal_addresses_no_task(api: Api) -> None:
    for number in (1, 10):
        await api.write("PUT", f"/connectors/c/tasks/{number}/status", RUNNING)
    await api.store.read_your_writes(WAIT)
    before = sorted(read_raw(api.store))
    for task in ("+1", "%201", "1%20", "1.0", "1_0", "01", "00", "-0", "0x1", "1e1", "%D9%A1", "2147483648",
                 "99999999999", "abc", "-01", "-2147483649"):
        read = await api.http.get(f"/connectors/c/tasks/{task}/status")
        assert (read.status_code, read.content) == (404, NOT_FOUND), task
        write = await api.http.put(f"/connectors/c/tasks/{task}/status", json={**RUNNING, "state": "PAUSED"})
        assert (write.status_code, write.content) == (404, NOT_FOUND), task
    await api.store.flush(WAIT)
    assert sorted(read_raw(api.store)) == before
    assert (await api.http.get("/connectors/c/tasks/10/status")).json()["state"] == "RUNNING"


async def test_a_negative_task_number_reads_connects_404_for_a_task_without_status(api: Api) -> None:
    # Connect 4.4's Integer.valueOf takes "-1", and no task -1 has a status (tests/test_connect_live.py).
    for task in ("-1", "-2147483648"):
        read = await api.http.get(f"/connectors/c/tasks/{task}/status")
        assert (read.status_code, read.content) == (
            404, f'{{"error_code":404,"message":"No status found for task c-{task}"}}'.encode())
    # Writes take no negative task number.
    assert (await api.http.put("/connectors/c/tasks/-1/status", json=RUNNING)).content == NOT_FOUND


@pytest.mark.parametrize(("method", "url"), [("GET", "/connectors/%FF/status"), ("PUT", "/connectors/%C3%28/status"),
                                             ("PUT", "/connectors/%ED%A0%80/status"),
                                             ("GET", "/connectors/c/tasks/0/status?x=%FF&y=1")])
async def test_a_path_that_is_not_utf8_is_400(api: Api, method: str, url: str) -> None:
    response = await api.http.request(method, url, json=RUNNING)
    if "?" in url:  # the query is not part of the path
        assert response.status_code == 404
        return
    assert response.status_code == 400
    assert response.json() == {"error_code": 400, "message": "The path is not valid UTF-8 once percent-decoded"}
    assert await nothing_written(api)


@pytest.mark.parametrize(("method", "url", "body"), [
    ("PUT", "/connectors/a%2Fb/status", RUNNING), ("PUT", "/connectors/a%2fb/tasks/0/status", RUNNING),
    ("GET", "/connectors/a%2Fb/status", None), ("GET", "/connectors/a%2Fb/topics", None),
    ("DELETE", "/connectors/a%2Fb", None), ("DELETE", "/connectors/a%2Fb/status", None),
    ("PUT", "/connectors/a%2Fb/topics/t", {"task": 0}),
    ("PUT", "/connectors/c%2Ftopics%2Freset", {"task": 0}), ("DELETE", "/connectors/c%2Ftopics%2Ft", None),
])
async def test_an_encoded_slash_in_a_path_is_400(api: Api, method: str, url: str, body: object) -> None:
    response = await api.http.request(method, url, json=body)
    assert (response.status_code, response.json()["error_code"]) == (400, 400)
    assert "'/'" in response.json()["message"]
    assert await nothing_written(api)


@pytest.mark.parametrize(("method", "url", "body"), [
    ("GET", "/connectors//status", None), ("GET", "/connectors//tasks/0/status", None), ("GET", "/connectors//", None),
    ("GET", "/connectors/c//status", None), ("GET", "/connectors/c/status//", None),
    ("PUT", "/connectors//status", RUNNING), ("PUT", "/connectors/c/tasks//status", RUNNING),
    ("DELETE", "/connectors//status", None), ("PUT", "/connectors//topics/t", {"task": 0}),
])
async def test_an_empty_path_segment_is_400_as_jettys_uri_check_answers_it(api: Api, method: str, url: str,
                                                                          body: object) -> None:
    # Connect 4.x's Jetty 12 refuses a path with an empty segment before any route sees it (the path that would
    # name the connector "" among them): tests/test_connect_records_live.py asks a live worker. A single trailing
    # slash is no empty segment: it is served as the path without it.
    response = await api.http.request(method, url, json=body)
    assert (response.status_code, response.json()) == (400, {"error_code": 400,
                                                             "message": "Ambiguous URI empty segment"})
    assert await nothing_written(api)


@pytest.mark.parametrize(("url", "message"), [
    ("/connectors/%2e/status", "Ambiguous URI path segment"),
    ("/connectors/c/%2E%2e/status", "Ambiguous URI path segment"),
    ("/connectors/%2e%2e", "Ambiguous URI path segment"), ("/connectors/a%5Cb/status", "Suspicious Path Character"),
    ("/connectors/a\\b/status", "Suspicious Path Character"),
    ("/connectors/a%00b/status", "The path must not contain a NUL character (%00)"),
])
async def test_a_path_jettys_uri_checks_refuse_is_400(api: Api, url: str, message: str) -> None:
    # As Connect 4.4's Jetty 12 refuses them (tests/test_connect_live.py::test_http_details_are_answered_as_connect_
    # answers_them): on reads and on writes, nothing written.
    for method in ("GET", "PUT"):
        response = await api.http.request(method, url, json=RUNNING if method == "PUT" else None)
        assert (response.status_code, response.json()) == (400, {"error_code": 400, "message": message}), method
    assert await nothing_written(api)


def test_plain_dot_segments_are_routed_as_they_are_unless_they_climb_above_the_root() -> None:
    # Connect routes /connectors/./status as the connector "." (httpx resolves plain dot segments before sending,
    # so the rule is asked directly; tests/test_connect_live.py sends them as they are to both servers).
    assert path_problem(b"/connectors/./status") is None
    assert path_problem(b"/connectors/c/tasks/../status") is None
    assert path_problem(b"/connectors/../..") == path_problem(b"/connectors/x/../../../status") == (
        "Bad URI: the path climbs above its root")


@pytest.mark.parametrize("item", [
    {"kind": "connector", "connector": "a/b", **RUNNING}, {"kind": "task", "connector": "a/b", "task": 0, **RUNNING},
    {"kind": "topic", "connector": "a/b", "topic": "t", "task": 0}, {"kind": "delete_connector", "connector": "a/b"},
    {"kind": "delete_topic", "connector": "/", "topic": "t"},
])
async def test_the_batch_refuses_a_slash_in_a_connector_name_as_the_paths_do(api: Api, item: object) -> None:
    response = await api.http.post("/statuses", json={"updates": [item]})
    assert (response.status_code, response.json()["error_code"]) == (400, 400)
    assert "must not contain '/'" in response.json()["message"]
    assert await nothing_written(api)


async def test_unmatched_routes_answer_connects_404_and_405(api: Api) -> None:
    missing = await api.http.get("/nope")
    assert (missing.status_code, missing.content) == (404, NOT_FOUND)
    wrong = await api.http.post("/connectors", json={})
    assert (wrong.status_code, wrong.content) == (405, b'{"error_code":405,"message":"HTTP 405 Method Not Allowed"}')
    assert "GET" in wrong.headers["allow"]


async def test_options_is_answered_as_connects_jersey_answers_it(api_factory: ApiFactory) -> None:
    # Connect 4.4 (Jetty 12, Jersey 3.1) answers as tests/test_connect_live.py::test_http_details_are_answered_as_
    # connect_answers_them shows: OPTIONS / with curl's Accept: */* answers 200, "Allow: HEAD,GET,OPTIONS" and the body
    # "HEAD, GET, OPTIONS" as text/plain; with Accept: application/json, an empty body labelled application/json. The
    # methods are those the path serves here (and no token is needed: nothing is read or written).
    async with api_factory(token="s3cret") as api:
        root = await api.http.options("/", headers={"Accept": "*/*"})
        assert (root.status_code, root.headers["allow"], root.headers["content-type"], root.content) == (
            200, "HEAD,GET,OPTIONS", "text/plain", b"HEAD, GET, OPTIONS")
        task = await api.http.options("/connectors/c/tasks/0/status/", headers={"Accept": "application/json"})
        assert (task.status_code, task.headers["allow"], task.content) == (200, "HEAD,GET,OPTIONS,PUT", b"")
        assert task.headers["content-type"] == "application/json"  # labelled with the type the client prefers
        ranked = await api.http.options("/", headers={"Accept": "text/plain;q=0.5, application/*"})
        assert (ranked.headers["content-type"], ranked.content) == ("application/*", b"")
        status = await api.http.options("/connectors/c/status", headers={"Accept": "text/plain"})
        assert status.content == b"HEAD, DELETE, GET, OPTIONS, PUT"
        missing = await api.http.options("/nope")
        assert (missing.status_code, missing.content) == (404, NOT_FOUND)
        assert (await api.http.options("/connectors/c/pause")).status_code == 501
        head = await api.http.head("/connectors/c/topics")
        assert head.status_code == 200  # HEAD and GET unchanged


async def test_a_write_to_a_stopped_store_is_503(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic) as store:
        app = create_app(store)
        await store.stop()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            response = await http.put("/connectors/c/status", json=RUNNING)
    assert response.status_code == 503
    assert response.json() == {"error_code": 503, "message": "The status store is not running"}


async def test_a_full_retry_queue_answers_503_with_retry_after_and_a_batch_submits_nothing(
        api_factory: ApiFactory) -> None:
    async with api_factory(**{"status.storage.retry.max.pending": "3"}) as api:
        api.cluster.broker_down(-1)
        for name in ("a", "b", "c"):
            assert (await api.http.put(f"/connectors/{name}/status", json=RUNNING)).status_code == 202
        response = await api.http.put("/connectors/d/status", json=RUNNING)
        assert response.status_code == 503
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["error_code"] == 503
        assert "status.storage.retry.max.pending" in response.json()["message"]
        # A batch that would pass the bound is refused whole, before any item is submitted.
        pending = api.store.queue.unsettled
        batch = {"updates": [{"kind": "connector", "connector": "a", **RUNNING},
                             {"kind": "connector", "connector": "e", **RUNNING}]}
        response = await api.http.post("/statuses", json=batch)
        assert response.status_code == 503
        assert api.store.queue.unsettled == pending
        api.cluster.broker_up(-1)


async def test_a_record_that_cannot_fit_answers_413_and_a_batch_with_one_submits_nothing(
        api_factory: ApiFactory) -> None:
    async with api_factory(**{"sidecar.kafka.message.max.bytes": "1000"}) as api:
        big = {**RUNNING, "worker_id": "w" * 900}
        response = await api.http.put("/connectors/c/status", json=big)
        assert response.status_code == 413
        assert response.json()["error_code"] == 413
        batch = {"updates": [{"kind": "connector", "connector": "ok", **RUNNING},
                             {"kind": "connector", "connector": "c", **big}]}
        assert (await api.http.post("/statuses", json=batch)).status_code == 413
        assert api.store.queue.unsettled == 0
        await api.store.read_your_writes(WAIT)
        assert api.store.cache.get_connector("ok") is None


async def test_a_failed_status_with_a_huge_trace_is_written_with_its_trace_cut(api_factory: ApiFactory) -> None:
    async with api_factory() as api:
        # Under the HTTP body limit (1 MiB), over the record limit (message.max.bytes, 1,000,000).
        trace = "java.lang.IllegalStateException: boom\n" + "\tat x.Y.z(Y.java:1)\n" * 46_500
        body = {"state": "FAILED", "trace": trace, "worker_id": "h:8083", "generation": 1}
        response = await api.write("PUT", "/connectors/c/status", body)
        assert response.json()["results"][0]["result"] == "written"
        status = (await api.http.get("/connectors/c/status")).json()
        assert status["connector"]["state"] == "FAILED"
        assert status["connector"]["trace"].startswith("java.lang.IllegalStateException: boom\n")
        assert "more characters cut by status-store" in status["connector"]["trace"]


async def test_retries_and_parked_answer_a_page_at_a_time(api_factory: ApiFactory) -> None:
    settings = {"status.storage.retry.delivery.timeout.ms": "200", "status.storage.retry.max.retries": "0",
                "status.storage.retry.max.backoff.ms": "60000", "status.storage.retry.initial.backoff.ms": "60000"}
    async with api_factory(**settings) as api:
        api.cluster.broker_down(-1)
        batch = {"updates": [{"kind": "connector", "connector": f"c{i}", **RUNNING} for i in range(250)]}
        assert (await api.http.post("/statuses", json=batch)).status_code == 202
        # With no retries, each update is parked once its one attempt fails (or probed, one at a time).
        await eventually(lambda: len(api.store.queue.parked()) >= 240)
        page = await api.http.get("/retries/parked", params={"limit": "100"})
        assert page.status_code == 200
        assert len(page.json()) == 100
        total = int(page.headers["x-total-count"])
        assert total >= 240
        assert page.headers["link"] == '</retries/parked?limit=100&offset=100>; rel="next"'
        last = await api.http.get("/retries/parked", params={"limit": "100", "offset": "200"})
        assert len(last.json()) == total - 200
        assert "link" not in last.headers
        assert {u["key"] for u in page.json()}.isdisjoint(u["key"] for u in last.json())
        assert (await api.http.get("/retries", params={"limit": "1001"})).status_code == 422
        assert len((await api.http.get("/retries", params={"limit": "5"})).json()) <= 5
        api.cluster.broker_up(-1)


async def test_statuses_other_writers_left_are_served_as_connect_serves_them(api: Api) -> None:
    # No worker id (Connect shows null), a lone surrogate and a character above U+FFFF (Jackson escapes both).
    write_raw(api.store, (b"status-connector-odd", b'{"state":"RUNNING","trace":null,"generation":1}'),
              (b"status-task-odd-0", b'{"state":"FAILED","trace":"\\ud800 \xf0\x9f\x98\x80","worker_id":"w",'
                                     b'"generation":1}'))
    await api.store.read_to_end(WAIT)
    response = await api.http.get("/connectors/odd/status")
    assert response.content == (
        b'{"name":"odd","connector":{"state":"RUNNING","worker_id":null,"version":null},"tasks":['
        b'{"id":0,"state":"FAILED","worker_id":"w","version":null,"trace":"\\uD800 \\uD83D\\uDE00"}],"type":"unknown"}')


async def test_topics_other_writers_left_are_listed_by_their_values_once_each(api: Api) -> None:
    # Connect lists the names the values hold (empty, with a ':', another than the key's), as a set.
    def value(name: str) -> bytes:
        return f'{{"topic":{{"name":"{name}","connector":"c","task":0,"discoverTimestamp":1}}}}'.encode()

    write_raw(api.store, (b"status-topic-a:connector-c", value("")), (b"status-topic-b:connector-c", value("x:y")),
              (b"status-topic-c:connector-c", value("t")), (b"status-topic-d:connector-c", value("t")),
              (b"status-topic-t:connector-c", value("t\U0001f600")))
    await api.store.read_to_end(WAIT)
    response = await api.http.get("/connectors/c/topics")
    assert response.content == b'{"c":{"topics":["","x:y","t","t\\uD83D\\uDE00"]}}'


ODD_BODIES = [
    b'{"state":"RUNNING","worker_id":"a","generation":1,"worker_id":"b"}',  # a repeated key: the last one counts
    b'{"state":"RUNNING","worker_id":"a\nb","generation":1}',  # a raw control character in a string
    b'{"state":"RUNNING","worker_id":"a","generation":1} x',  # text after the value
    b' {"state":"RUNNING","worker_id":"a","generation":1} \r\n',
    b'\xef\xbb\xbf{"state":"RUNNING","worker_id":"a","generation":1}',  # a UTF-8 byte order mark
    '{"state":"RUNNING","worker_id":"a","generation":1}'.encode("utf-16"),
    b'{"state":"RUNNING","worker_id":"\\ud83d\\ude00","generation":1}',
    b'{"state":"RUNNING","worker_id":"\xed\xa0\x80","generation":1}',  # a surrogate encoded as UTF-8
    b'{"state":"RUNNING","worker_id":"a","generation":1.0}',
    b'{"state":"RUNNING","worker_id":"a","generation":-0}',
    b'{"state":"RUNNING","worker_id":"a","generation":01}',
    b'{"state":"RUNNING","worker_id":"a","generation":NaN}',
    b'{"state":"RUNNING","worker_id":"a","generation":1,"type":"source","type":null}',
    b'{"state":"STOPPED","worker_id":"a","generation":1,"trace":null}',
    b'{"state":"RUNNING","worker_id":"a","generation":1,"extra":1}',
    b'[]',
    b'',
]


def as_batch(body: bytes) -> bytes:
    """The body as the one task item of a batch, where it has a JSON object (other bodies as they are)."""
    start = body.find(b"{")
    if start < 0:
        return body
    return body[:start] + b'{"updates":[{"kind":"task","connector":"c","task":0,' + body[start + 1:] + b"]}"


def without_attempts(response: httpx.Response) -> tuple[int, object]:
    """The status and body of an answer, without the attempts so far (they depend on when the answer left)."""
    body = response.json() if response.content else None
    for result in body.get("results", []) if isinstance(body, dict) else []:
        result.pop("attempts")
    return response.status_code, body


@pytest.mark.parametrize("body", ODD_BODIES)
async def test_a_write_without_query_parameters_is_answered_as_fastapi_answers_it(api: Api, body: bytes) -> None:
    # The common write (no query parameters) is read without FastAPI's request handler; with a query parameter
    # FastAPI reads it: both must give the same answer, whatever the body.
    for method, url, content in (("PUT", "/connectors/c/status", body), ("PUT", "/connectors/c/tasks/0/status", body),
                                 ("PUT", "/connectors/c/tasks/01/status", body), ("POST", "/statuses", as_batch(body))):
        direct = await api.http.request(method, url, content=content, headers=JSON)
        through_fastapi = await api.http.request(method, url, content=content, headers=JSON,
                                                 params={"timeout_ms": "30000"})
        assert without_attempts(direct) == without_attempts(through_fastapi), url


_AGENT_UPDATE = b'{"seq":1,"kind":"connector","connector":"c","state":"RUNNING","worker_id":"w","generation":1}'
# Agent requests (``AGENT`` stands for the session's name), each sent once without query parameters and once with one.
ODD_AGENT_BODIES = [
    b'{"agent":"AGENT","ack":0,"updates":[' + _AGENT_UPDATE + b']}',
    b'{"agent":"x","agent":"AGENT","updates":[' + _AGENT_UPDATE + b']}',  # a repeated key: the last one counts
    b'\xef\xbb\xbf{"agent":"AGENT","updates":[]}',  # a UTF-8 byte order mark
    '{"agent":"AGENT","updates":[]}'.encode("utf-16"),
    b'{"agent":"AGENT","worker_id":"\\ud800","updates":[]}',  # a lone surrogate
    b'{"agent":"AGENT","worker_id":"\xed\xa0\x80","updates":[]}',  # a surrogate encoded as UTF-8
    b'{"agent":"AGENT","worker_id":"a\nb","updates":[]}',  # a raw control character in a string
    b'{"agent":"AGENT","ack":1.0,"updates":[]}',
    b'{"agent":"AGENT","ack":-0,"updates":[]}',
    b'{"agent":"AGENT","wait_ms":NaN,"updates":[]}',
    b'{"agent":"AGENT","final":"true","updates":[]}',
    b'{"agent":"AGENT","lease_ms":0,"updates":[]}',
    b'{"agent":"AGENT","instance":"another","updates":[' + _AGENT_UPDATE + b']}',
    b'{"agent":"AGENT","updates":{}}',
    b'{"agent":"AGENT","updates":[{"kind":"connector"}]}',  # an update without its seq
    b'{"agent":"AGENT","updates":[{"seq":1,"kind":"nope"},{"seq":2,"kind":"task","connector":"c","state":"RUNNING",'
    b'"generation":1}]}',
    b'{"agent":"AGENT","updates":[]} x',  # text after the value
    b'{"agent":"","updates":[]}',
    b'{"updates":[]}',
    b'[]',
    b'',
]


@pytest.mark.parametrize("body", ODD_AGENT_BODIES)
async def test_an_agent_request_without_query_parameters_is_answered_as_fastapi_answers_it(api: Api, body: bytes,
                                                                                          ) -> None:
    # An agent's request without query parameters is read without FastAPI's request handler; with one FastAPI
    # reads it (the route takes none): both must give the same answer, whatever the body (each its own session).
    direct = await api.http.post("/agent/statuses", content=body.replace(b"AGENT", b"direct"), headers=JSON)
    through_fastapi = await api.http.post("/agent/statuses", content=body.replace(b"AGENT", b"fastapi"),
                                          headers=JSON, params={"through": "fastapi"})
    assert (direct.status_code, direct.json()) == (through_fastapi.status_code, through_fastapi.json())


def _fast_lane_requests() -> list[tuple[str, bytes, dict[str, str]]]:
    """Requests of the write routes the middleware serves itself: common ones, and each of the refusals."""
    token = {"authorization": "Bearer t", **JSON}
    agent = b'{"agent":"a","updates":[' + _AGENT_UPDATE + b']}'
    batch = b'{"updates":[{"kind":"task","connector":"c","task":0,"state":"RUNNING","generation":1}]}'
    requests = []
    wake = b'{"agent":"a","seq":7}'
    for url, body in (("/agent/statuses", agent), ("/statuses", batch), ("/agent/wake", wake)):
        requests += [(url, body, token), (url, body, JSON), (url, body, {"authorization": "Bearer u", **JSON}),
                     (url, body, {"authorization": "Bearer t", "content-type": "text/plain"}),
                     (url, body + b" " * 2000, token), (url, body[:-1], token), (url, b"", token),
                     (url + "/", body, token)]
    requests.append(("/agent/statuses", agent.replace(b'"agent":"a"', b'"agent":"b","instance":"x"'), token))
    return requests


async def test_the_fast_lane_answers_as_the_router_and_fastapi_answer(
        api_factory: ApiFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # POST /agent/statuses, POST /agent/wake and POST /statuses are served by the middleware itself
    # (routing.serve_directly), past the router and the exception middleware: each request is answered as the same app
    # without that lane answers it.
    async with api_factory(token="t", max_body_bytes=2000) as api:
        monkeypatch.setattr("status_store.api.middleware.direct_routes", lambda routes: {})
        laneless = create_app(api.store, CollectorRegistry(), "t", 2000)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=laneless), base_url="http://test") as other:
            await other.get("/health")  # the laneless app's middleware is made now, while direct_routes is patched
            monkeypatch.undo()
            for url, body, headers in _fast_lane_requests():
                lane = await api.http.post(url, content=body, headers=headers)
                router = await other.post(url, content=body, headers=headers)
                assert lane.status_code == router.status_code, (url, body, headers, lane.text, router.text)
                assert lane.headers.get("www-authenticate") == router.headers.get("www-authenticate")
                assert lane.headers.get("connection") == router.headers.get("connection")
                # Each app is its own sidecar instance; a batch's answers carry the attempts so far.
                answers = [json.loads(response.text.replace(app.state.agents.instance, "I")) if response.content
                           else None for response, app in ((lane, api.app), (router, laneless))]
                for answer in answers:
                    for result in answer.get("results", []) if isinstance(answer, dict) else []:
                        result.pop("attempts")
                assert answers[0] == answers[1], (url, body, headers)


def test_names_with_any_control_character_are_refused_and_no_other_character_is() -> None:
    # Connect refuses a connector name with a character of Unicode's category Cc.
    for code_point in range(sys.maxunicode + 1):
        character = chr(code_point)
        name = f"a{character}b"
        if unicodedata.category(character) == "Cc":
            with pytest.raises(ApiError, match="control characters"):
                checked_name(name)
        elif character != "/":
            assert checked_name(name) == name
