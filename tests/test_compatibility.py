"""docs/compatibility.md stays true: every test it names exists, every route of the API is in it, and the
Connect routes it says are not served answer Connect's 404 or 405, or 501 saying where to go."""

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


# The Connect versions each live test runs (a test's own entry, else its module's): the table's "Checked live on"
# column names exactly the versions of the live tests in its "Checked by" column, and "—" where there are none.
LIVE_TESTS = {
    "tests/test_connect_oracle.py": {"4.4.0"},
    "tests/test_connect_live.py": {"4.4.0"},
    "tests/test_connect_live.py::test_every_record_connect_4_and_3_write_is_what_status_store_writes_for_it":
        {"4.4.0", "3.9.2"},
    "tests/test_connect_live.py::test_records_of_connect_3_are_served_as_connect_4_serves_them": {"3.9.2"},
    "tests/test_real_faults.py": {"4.4.0"},
    "tests/test_connect_records_live.py": {"4.4.0"},
}


def test_the_live_column_names_the_connect_versions_its_tests_run() -> None:
    pom = (ROOT / "harness" / "jvm" / "pom.xml").read_text()
    assert all(f"<version>{version}</version>" in pom for versions in LIVE_TESTS.values() for version in versions)
    text = DOC.read_text()
    header = "| Area | Connect | status-store | Same? | Checked live on | Why, and notes | Checked by |"
    rows = text[text.index(header):].split("\n\n")[0].splitlines()[2:]
    assert len(rows) > 70
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", cells[6])
        versions = set().union(*(LIVE_TESTS.get(f"{path}::{name}", LIVE_TESTS.get(path, set()))
                                 for path, name in named))
        claimed = set(re.findall(r"\b\d+\.\d+\.\d+\b", cells[4]))
        assert (claimed, cells[4] == "—") == (versions, not versions), f"{cells[0]}: {cells[1][:60]}"


def test_every_route_of_the_api_is_in_the_table() -> None:
    text = DOC.read_text()
    for path in openapi_document()["paths"]:
        if path not in ("/openapi.json", "/docs", "/redoc"):
            assert f"`{path}`" in text or f"`GET {path}`" in text or f" {path}`" in text, path


NOT_SERVED = 501


@pytest.mark.parametrize(("method", "path", "answer"), [
    ("POST", "/connectors", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/config", (405, NOT_ALLOWED)),
    ("PATCH", "/connectors/c/config", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/pause", NOT_SERVED),
    ("PUT", "/connectors/c/resume", NOT_SERVED),
    ("PUT", "/connectors/c/stop", NOT_SERVED),
    ("POST", "/connectors/c/restart", NOT_SERVED),
    ("POST", "/connectors/c/tasks/0/restart", NOT_SERVED),
    ("GET", "/connectors/c/offsets", NOT_SERVED),
    ("PATCH", "/connectors/c/offsets", NOT_SERVED),
    ("DELETE", "/connectors/c/offsets", NOT_SERVED),
    ("GET", "/connectors/c/tasks-config", (404, NOT_FOUND)),
    ("POST", "/connectors/c/tasks", (405, NOT_ALLOWED)),
    ("PUT", "/connectors/c/fence", NOT_SERVED),
    ("GET", "/connector-plugins", NOT_SERVED),
    ("GET", "/connector-plugins/FileStreamSource/config", NOT_SERVED),
    ("PUT", "/connector-plugins/FileStreamSource/config/validate", NOT_SERVED),
    ("GET", "/admin/loggers", NOT_SERVED),
    ("GET", "/admin/loggers/org.apache.kafka", NOT_SERVED),
    ("PUT", "/admin/loggers/org.apache.kafka", NOT_SERVED),
])
async def test_connect_routes_that_status_store_does_not_serve_say_so(
        method: str, path: str, answer: tuple[int, bytes] | int) -> None:
    """Those whose resource status-store serves with other methods answer Connect's 405; the rest answer 501, so
    that a client can tell "not served here" from Connect's 404 for a connector that does not exist."""
    app = create_app(None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        response = await http.request(method, path, json={} if method in ("POST", "PUT", "PATCH") else None)
    if answer == NOT_SERVED:
        assert response.status_code == NOT_SERVED
        message = response.json()["message"]
        assert message.startswith(f"status-store does not serve {method} {path}: it is a Kafka Connect worker's route")
        assert message.endswith("Send it to a Connect worker's REST API (port 8083 by default)")
    else:
        assert (response.status_code, response.content) == answer


def test_every_difference_the_live_oracle_allows_is_a_row_that_names_it() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| REST")]
    for difference, words in DIFFERENCES.items():
        found = [row for row in rows if words in row]
        assert len(found) == 1, f"no single row of {DOC.name} holds {words!r} ({difference})"
        assert "tests/test_connect_oracle.py::" in found[0], f"the row on {difference} does not name the live check"
