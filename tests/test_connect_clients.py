"""Real Connect REST clients from the package index, pointed at a running sidecar whose config and status
topics hold what Connect workers write: they must give the answers and verdicts they give against Connect.

- ``kafka-connect-healthcheck``: a health-check server for Connect. Its own request handler and health logic
  run here in-process, bound to 127.0.0.1 (its command line binds every interface).
- ``kafka-connect-py``: a client library (``KafkaConnect``).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Producer
from kafka_connect.kafka_connect import KafkaConnect
from kafka_connect_healthcheck.handler import RequestHandler
from kafka_connect_healthcheck.health import Health

from harness import free_port
from harness.service import Service

from .connect_records import created, write_records

WAIT = 15.0
CONFIG_TOPIC = "connect-configs"
STATUS_TOPIC = "connect-status"
WORKER = "10.0.0.7:8083"
SINK = {"connector.class": "io.example.JdbcSinkConnector", "name": "orders-sink", "topics": "orders",
        "tasks.max": "2", "connection.password": "${file:/etc/secrets.properties:db.password}"}
SOURCE = {"connector.class": "io.example.FileSource", "name": "logs", "file": "/var/log/app.log", "tasks.max": "1"}
TRACE = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat io.example.SinkTask.put(SinkTask.java:9)\n"


class Sidecar:
    """``status-store serve`` on its embedded broker with Connect's config topic, and writers for both topics as
    Connect workers write them."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.bootstrap_servers = service.wait_for("bootstrap.servers=").split("bootstrap.servers=", 1)[1].strip()
        running = service.wait_for("Uvicorn running on")
        self.url = running.split("Uvicorn running on ", 1)[1].split()[0]

    def write_configs(self) -> None:
        write_records(self.bootstrap_servers, CONFIG_TOPIC, [
            *created("orders-sink", SINK, [{"task.id": "0"}, {"task.id": "1"}]),
            *created("logs", SOURCE, [{"file": "/var/log/app.log"}]),
        ])

    def write_statuses(self, *statuses: tuple[str, str, str | None]) -> None:
        """(key suffix, state, trace) records, as Connect's status store writes them (Java's partitioner)."""
        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "partitioner": "murmur2_random"})
        for key, state, trace in statuses:
            value = {"state": state, "trace": trace, "worker_id": WORKER, "generation": 3}
            producer.produce(STATUS_TOPIC, json.dumps(value, separators=(",", ":")).encode(), f"status-{key}".encode())
        assert producer.flush(WAIT) == 0
        # Ready: both topics read to their end, so the service has everything written before.
        with urllib.request.urlopen(f"{self.url}/ready", timeout=WAIT) as ready:
            assert ready.status == 200


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    config = tmp_path / "status-store.properties"
    config.write_text(f"sidecar.embedded.broker=true\nconfig.storage.topic={CONFIG_TOPIC}\n")
    with Service("--config", str(config), "--port", str(free_port())) as service:
        started = Sidecar(service)
        started.write_configs()
        started.write_statuses(("connector-orders-sink", "RUNNING", None), ("task-orders-sink-0", "RUNNING", None),
                               ("task-orders-sink-1", "RUNNING", None), ("connector-logs", "RUNNING", None),
                               ("task-logs-0", "RUNNING", None))
        yield started


def health_verdict(connect_url: str, worker_id: str | None = None) -> tuple[int, dict[str, Any]]:
    """What kafka-connect-healthcheck's server answers on ``GET /`` against ``connect_url``."""
    health = Health(connect_url, worker_id, ["FAILED"], "", 0, ["connector", "task"])
    server = HTTPServer(("127.0.0.1", 0), partial(RequestHandler, health))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        try:
            with urllib.request.urlopen(url, timeout=WAIT) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


def test_the_healthcheck_says_healthy_while_all_run_and_unhealthy_once_a_task_failed(sidecar: Sidecar) -> None:
    status, verdict = health_verdict(sidecar.url)
    assert (status, verdict["healthy"], verdict["failures"]) == (200, True, [])
    sidecar.write_statuses(("task-orders-sink-1", "FAILED", TRACE))
    status, verdict = health_verdict(sidecar.url)
    assert (status, verdict["healthy"]) == (503, False)
    assert verdict["failures"] == [{"type": "task", "connector": "orders-sink", "id": 1, "state": "FAILED",
                                    "worker_id": WORKER, "trace": TRACE}]
    sidecar.write_statuses(("connector-logs", "FAILED", TRACE))
    _, verdict = health_verdict(sidecar.url)
    assert {(f["type"], f["connector"]) for f in verdict["failures"]} == {("task", "orders-sink"),
                                                                           ("connector", "logs")}


def test_the_healthcheck_of_a_worker_that_runs_nothing_here_reaches_the_connector_details(sidecar: Sidecar) -> None:
    # With none of the connectors on its worker, it checks that Connect answers GET /connectors/{name}.
    status, verdict = health_verdict(sidecar.url, worker_id="elsewhere:8083")
    assert (status, verdict["healthy"], verdict["failures"]) == (200, True, [])


def test_kafka_connect_py_lists_and_reads_connectors_as_from_connect(sidecar: Sidecar) -> None:
    sidecar.write_statuses(("task-orders-sink-1", "FAILED", TRACE))
    client = KafkaConnect(sidecar.url)
    cluster = client.get_cluster_info()
    assert list(cluster)[:3] == ["version", "commit", "kafka_cluster_id"]
    assert client.list_connectors() == ["logs", "orders-sink"]
    assert client.list_connectors(pattern="orders") == ["orders-sink"]
    assert client.list_connectors(state="running") == ["logs", "orders-sink"]
    expanded = client.list_connectors(expand="status")
    assert expanded["orders-sink"]["status"]["tasks"][1] == {"id": 1, "state": "FAILED", "worker_id": WORKER,
                                                             "version": None, "trace": TRACE}
    info = client.list_connectors(expand="info")
    assert info["logs"]["info"] == {"name": "logs", "config": SOURCE, "tasks": [{"connector": "logs", "task": 0}],
                                    "type": "source"}
    assert client.get_connector("orders-sink") == {
        "name": "orders-sink", "config": SINK, "type": "sink",
        "tasks": [{"connector": "orders-sink", "task": 0}, {"connector": "orders-sink", "task": 1}]}
    assert client.get_connector_config("orders-sink") == SINK
    assert client.get_connector_status("logs") == {
        "name": "logs", "connector": {"state": "RUNNING", "worker_id": WORKER, "version": None},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": WORKER, "version": None}], "type": "source"}
    assert client.list_connector_tasks("orders-sink") == [
        {"id": {"connector": "orders-sink", "task": n}, "config": {"task.id": str(n)}} for n in (0, 1)]
    assert client.get_connector_task_status("orders-sink", 1)["state"] == "FAILED"
    assert client.list_connector_topics("logs") == {"logs": {"topics": []}}
    with pytest.raises(requests.HTTPError) as missing:
        client.get_connector("never")
    assert missing.value.response.json() == {"error_code": 404, "message": "Connector never not found"}


def test_kafka_connect_py_cannot_delete_a_connector_through_the_sidecar(sidecar: Sidecar) -> None:
    client = KafkaConnect(sidecar.url)
    with pytest.raises(requests.HTTPError) as refused:
        client.delete_connector("logs")
    assert refused.value.response.status_code == 405
    assert client.get_connector_status("logs")["connector"]["state"] == "RUNNING"
