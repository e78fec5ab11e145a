"""Schemathesis against the running service's own OpenAPI document: no 5xx, no schema violations."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.service import Service

WAIT = 600
# About 80 s alone; the suite's 120 s default cut it short under load (seen with three test processes).
pytestmark = pytest.mark.timeout(WAIT + 60)


def test_generated_requests_find_no_server_error_and_no_schema_violation(service: Service) -> None:
    running = service.wait_for("Uvicorn running on")
    url = running.split("Uvicorn running on ", 1)[1].split()[0]
    schemathesis = Path(sys.executable).parent / "schemathesis"
    # GET /events is a stream that ends only when the client goes: every request would wait out the timeout.
    # tests/test_events.py covers it with an SSE client.
    result = subprocess.run(
        [str(schemathesis), "run", f"{url}/openapi.json", "--checks",
         "not_a_server_error,response_schema_conformance", "--max-examples", "60", "--seed", "1",
         "--request-timeout", "30", "--exclude-path", "/events"],
        capture_output=True, text=True, timeout=WAIT,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    generated = re.search(r"(\d+) generated", output)
    assert generated is not None, output[-3000:]
    assert int(generated.group(1)) >= 1000, output[-3000:]
