"""The HTTP API of this issue: GET / and GET /health, and the OpenAPI document kept in sync."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from status_store import __version__
from status_store.api import create_app, openapi_document
from status_store.store import StatusStore

OPENAPI = Path(__file__).parent.parent / "api" / "openapi.json"


def client(store: StatusStore | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(store)), base_url="http://test")


async def test_root_names_version_cluster_and_topic(store: StatusStore) -> None:
    async with client(store) as http:
        response = await http.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "version": __version__,
        "kafka_cluster_id": store.cluster_id,
        "bootstrap_servers": store.bootstrap_servers,
        "status_topic": store.config.topic,
        "embedded_broker": False,
    }
    assert store.cluster_id


async def test_health_answers_like_connect() -> None:
    async with client(None) as http:
        response = await http.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "healthy"


async def test_root_without_a_store_is_503() -> None:
    async with client(None) as http:
        response = await http.get("/")
    assert response.status_code == 503


def test_openapi_document_is_in_sync() -> None:
    expected = json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
    assert OPENAPI.read_text() == expected, "api/openapi.json drifted: run `status-store openapi > api/openapi.json`"
