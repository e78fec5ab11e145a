"""The sidecar started before its Connect worker: it waits for the topics the worker creates (Connect's config topic;
its status topic when it may not create it), says at ``/ready`` what it waits for, stays alive for the liveness probe,
and never exits for it; once the topics are there it starts as always. A ``status-store serve`` process on the mock
cluster, which has no CreateTopics (the sidecar cannot create the status topic there, as a client without the right
cannot)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config

WAIT = 30.0


def answer_of(http: httpx.Client, path: str) -> tuple[int, str]:
    response = http.get(path)
    return response.status_code, response.json()["message"]


def until(http: httpx.Client, path: str, status: int, words: str) -> str:
    """Ask until ``path`` answers ``status`` with ``words`` in its message; the message."""
    deadline = time.monotonic() + WAIT
    seen: tuple[int, str] = (0, "")
    while time.monotonic() < deadline:
        seen = answer_of(http, path)
        if seen[0] == status and words in seen[1]:
            return seen[1]
        time.sleep(0.1)
    raise AssertionError(f"GET {path}: not {status} with {words!r} within {WAIT} s; last {seen}")


def test_a_sidecar_started_before_its_worker_waits_for_the_topics_and_says_so(mock_cluster: FaultyCluster,
                                                                               tmp_path: Path) -> None:
    status_topic, config_topic = f"status-{uuid.uuid4().hex[:8]}", f"configs-{uuid.uuid4().hex[:8]}"
    port = free_port()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, status_topic,
                            {"config.storage.topic": config_topic})
    service = Service("--config", str(config), "--port", str(port))
    try:
        service.wait_for("Uvicorn running on")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            # Alive for the liveness probe, not ready, and every other route says why (a worker's agent asks GET /).
            waiting = until(http, "/ready", 503, f"waiting for the status topic '{status_topic}' (it does not exist")
            assert "a Connect worker creates it" in waiting
            health = http.get("/health")
            assert health.status_code == 200
            assert "waiting for the status topic" in health.json()["message"]
            status, said = answer_of(http, "/")
            assert status == 503
            assert said.startswith(f"status-store is starting: waiting for the status topic '{status_topic}'")
            # The worker creates its topics: first the status topic, then (here, seconds later) the config topic.
            mock_cluster.create_topic(status_topic, 5, 1)
            until(http, "/ready", 503, f"waiting for Connect's config topic '{config_topic}' (it does not exist")
            mock_cluster.create_topic(config_topic, 1, 1)
            until(http, "/ready", 200, "")
            assert http.get("/").json()["status_topic"] == status_topic
            written = http.put("/connectors/c/status", params={"wait": "true"},
                               json={"state": "RUNNING", "worker_id": "w:8083", "generation": 0})
            assert written.status_code == 200, written.text
        lines = "".join(service.output())
        assert lines.count(f"Waiting for the status topic '{status_topic}'") == 1, lines
        assert f"Done waiting for Connect's config topic '{config_topic}'" in lines
        assert service.process.poll() is None
    finally:
        assert service.stop() == 0


def test_a_waiting_sidecar_stops_on_sigterm(mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, f"status-{uuid.uuid4().hex[:8]}", {})
    service = Service("--config", str(config), "--port", str(free_port()))
    try:
        service.wait_for("Waiting for the status topic")
        service.wait_for("Uvicorn running on")
    finally:
        # The start's wait is cut short; what is stopped is what had started.
        assert service.stop() == 0

