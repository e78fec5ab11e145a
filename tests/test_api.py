"""The HTTP API of this issue: GET / and GET /health, and the OpenAPI document kept in sync."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store import __version__
from status_store.api import create_app, openapi_document
from status_store.connect.model import ConnectorStatus, State
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory

OPENAPI = Path(__file__).parent.parent / "api" / "openapi.json"


def client(store: StatusStore | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(store)), base_url="http://test")


async def test_root_names_version_cluster_and_topic(store: StatusStore) -> None:
    async with client(store) as http:
        response = await http.get("/")
    assert response.status_code == 200
    body = response.json()
    instance = body.pop("instance")
    assert body == {
        "version": __version__,
        "commit": "unknown",
        "kafka_cluster_id": store.cluster_id,
        "bootstrap_servers": store.bootstrap_servers,
        "status_topic": store.config.topic,
        "config_topic": None,
        "embedded_broker": False,
        # What a worker's agent checks (agent/PROTOCOL.md).
        "agent_protocol": 1,
        "write_bound_ms": store.config.retry.delivery_timeout_ms,
    }
    assert store.cluster_id
    assert isinstance(instance, str)
    assert len(instance) >= 16


async def test_health_answers_like_connect() -> None:
    async with client(None) as http:
        response = await http.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "healthy"


async def test_root_without_a_store_is_503() -> None:
    async with client(None) as http:
        response = await http.get("/")
    assert response.status_code == 503


async def test_the_documentation_pages_are_off_by_default_and_under_a_content_security_policy_when_on() -> None:
    """FastAPI's /docs and /redoc load their scripts from CDNs: not on by default, where a writer pastes the token."""
    async with client(None) as http:
        assert [(await http.get(path)).status_code for path in ("/docs", "/redoc")] == [404, 404]
        assert (await http.get("/openapi.json")).status_code == 200
    app = create_app(None, docs=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        for path in ("/docs", "/redoc"):
            page = await http.get(path)
            assert page.status_code == 200
            policy = dict(part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";"))
            assert policy["default-src"] == "'none'"
            assert policy["frame-ancestors"] == "'none'"
            scripts = policy["script-src"].split()
            # Each script the page loads is from an origin the policy names, and its inline script is allowed by
            # its digest, never by 'unsafe-inline'.
            for source in re.findall(r'<script src="([^"]+)"', page.text):
                assert any(source.startswith(allowed) for allowed in scripts if allowed.startswith("https://"))
            inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
            assert [f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" in scripts
                    for s in inline] == [True] * len(inline)
            assert "'unsafe-inline'" not in scripts


def test_openapi_document_is_in_sync() -> None:
    expected = json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
    assert OPENAPI.read_text() == expected, "api/openapi.json drifted: run `status-store openapi > api/openapi.json`"


async def test_metrics_exposes_the_kip_counters(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry) as store:
        assert (await store.put(ConnectorStatus("c", State.RUNNING, "w:1", 1)).result(15)).ok
        app = create_app(store, registry)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'status_update_success_total{kind="connector"} 1.0' in response.text
    assert 'status_update_failure_total{kind="connector"} 0.0' in response.text
    assert 'status_update_retry_total{kind="connector"} 0.0' in response.text
