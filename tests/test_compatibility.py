"""docs/compatibility.md stays true: every test it names exists, every route of the API is in it, and the
Connect routes it says are not served answer Connect's 404 or 405."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import httpx
import pytest

from status_store.api import create_app, openapi_document

from .test_connect_oracle import DIFFERENCES

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "compatibility.md"
NOT_FOUND = b'{"error_code":404,"message":"HTTP 404 Not Found"}'
NOT_ALLOWED = b'{"error_code":405,"message":"HTTP 405 Method Not Allowed"}'


def test_every_test_the_table_names_exists() -> None:
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", DOC.read_text())
    assert len(named) > 80
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text())
        functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert name in functions, f"{path}::{name} is named in {DOC.name} but does not exist"


def test_every_route_of_the_api_is_in_the_table() -> None:
    text = DOC.read_text()
    for path in openapi_document()["paths"]:
        if path not in ("/openapi.json", "/docs", "/redoc"):
            assert f"`{path}`" in text or f"`GET {path}`" in text or f" {path}`" in text, path


@pytest.mark.parametrize(("method", "path", "answer"), [
    ("POST", "/connectors", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/config", (405, NOT_ALLOWED)),
    ("PATCH", "/connectors/c/config", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/pause", (404, NOT_FOUND)),
    ("PUT", "/connectors/c/resume", (404, NOT_FOUND)),
    ("PUT", "/connectors/c/stop", (404, NOT_FOUND)),
    ("POST", "/connectors/c/restart", (404, NOT_FOUND)),
    ("POST", "/connectors/c/tasks/0/restart", (404, NOT_FOUND)),
    ("GET", "/connectors/c/offsets", (404, NOT_FOUND)),
    ("PATCH", "/connectors/c/offsets", (404, NOT_FOUND)),
    ("DELETE", "/connectors/c/offsets", (404, NOT_FOUND)),
    ("GET", "/connectors/c/tasks-config", (404, NOT_FOUND)),
    ("POST", "/connectors/c/tasks", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/fence", (404, NOT_FOUND)),
    ("GET", "/connector-plugins", (404, NOT_FOUND)),
    ("GET", "/connector-plugins/FileStreamSource/config", (404, NOT_FOUND)),
    ("PUT", "/connector-plugins/FileStreamSource/config/validate", (404, NOT_FOUND)),
    ("GET", "/admin/loggers", (404, NOT_FOUND)),
])
async def test_connect_routes_that_status_store_does_not_serve_answer_connects_404_or_405(
        method: str, path: str, answer: tuple[int, bytes]) -> None:
    app = create_app(None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        response = await http.request(method, path, json={} if method in ("POST", "PUT", "PATCH") else None)
    assert (response.status_code, response.content) == answer


def test_every_difference_the_live_oracle_allows_is_a_row_that_names_it() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| REST")]
    for difference, words in DIFFERENCES.items():
        found = [row for row in rows if words in row]
        assert len(found) == 1, f"no single row of {DOC.name} holds {words!r} ({difference})"
        assert "tests/test_connect_oracle.py::" in found[0], f"the row on {difference} does not name the live check"
