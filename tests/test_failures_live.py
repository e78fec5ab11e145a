"""Failure classes on a real connector of Connect's own: FileStreamSinkConnector writing into a directory that does not
exist, on the session's Connect 3.9.2 worker (connect-file's 4.x cannot run in the 4.4.0 worker: harness/jvm/pom.xml),
with a sidecar beside it restarting its worker's failures. The failure is a ``user`` one: it is never restarted, and
every view says why. The scripted connector's failures on Connect 4.4.0 are in tests/test_autorestart_live.py."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.java_process import wait_until
from harness.real_connect import ConnectCluster
from harness.real_kafka import KafkaCluster
from harness.sidecar import LiveSidecar
from status_store.connect.failures import cause_chain, classify

pytestmark = pytest.mark.timeout(300)

CORPUS = Path(__file__).with_name("failure_traces")
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
INITIAL_S = 1.0


@pytest.fixture(scope="module")
def sidecar(connect3_worker: ConnectCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSidecar]:
    worker = connect3_worker.workers[0]
    with LiveSidecar(tmp_path_factory.mktemp("failures-live"), connect3_worker, {
            "sidecar.restart.enable": "true", "sidecar.restart.workers": worker.url,
            "sidecar.restart.initial.backoff.ms": str(int(INITIAL_S * 1000)), "sidecar.restart.jitter.factor": "0"},
            ) as running:
        yield running


def test_a_filestream_sink_into_a_missing_directory_is_a_user_failure_never_restarted(
        sidecar: LiveSidecar, connect3_worker: ConnectCluster, kafka: KafkaCluster, tmp_path: Path) -> None:
    connect = connect3_worker
    topic = f"file-input-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 1, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    producer.produce(topic, b"a line")
    assert producer.flush(15) == 0
    connect.call("PUT", "/connectors/file-missing/config", {
        "connector.class": FILE_SINK, "tasks.max": "1", "topics": topic, "file": str(tmp_path / "missing" / "out.txt")})
    try:
        status = connect.wait_for_status("file-missing", lambda s: [t["state"] for t in s["tasks"]] == ["FAILED"],
                                         "task 0 FAILED")
        trace = status["tasks"][0]["trace"]
        failure = classify(trace)
        assert (failure.failure_class.value, failure.family and failure.family.value) == ("user", "missing")
        assert failure.cause == f"NoSuchFileException: {tmp_path / 'missing' / 'out.txt'}"
        # The corpus's recorded trace is this one: the same exceptions, outermost first.
        recorded = (CORPUS / "filestream-missing-directory.trace").read_text(encoding="utf-8")
        assert [t.exception for t in cause_chain(trace)] == [t.exception for t in cause_chain(recorded)]

        def skipped() -> dict[str, Any] | None:
            entry = next((c for c in sidecar.call("GET", "/fleet")["connectors"] if c["name"] == "file-missing"), None)
            restarts = entry["tasks"][0]["restarts"] if entry is not None and entry["tasks"] else None
            return entry if restarts is not None and restarts["skipped"] == "failure_class" else None

        wait_until(lambda: skipped() is not None, 30, "the sidecar's word: not restarted, a user failure")
        time.sleep(INITIAL_S * 3)  # past the backoff a restart would have waited
        entry = skipped()
        assert entry is not None
        task = entry["tasks"][0]
        assert task["restarts"]["state"] == "excluded"
        assert task["failure"]["class"] == "user"
        assert task["failure"]["family"] == "missing"
        assert task["failure"]["action"].startswith("Create what is missing")
        # Nothing was sent to the worker, which still says FAILED.
        metrics = sidecar.request("GET", "/metrics").body.decode()
        assert 'status_restarts_skipped_total{reason="failure_class"} 1.0' in metrics
        # (status_restarts_total has no connector label, and the session's workers hold other modules' connectors,
        # whose failures this sidecar may restart: the entry's state above and the worker's FAILED below say that
        # none was sent for this one.)
        assert 'status_failed{class="user",kind="task"} 1.0' in metrics
        assert any(line.startswith('status_task_failure{') and 'connector="file-missing"' in line
                   and 'class="user"' in line for line in metrics.splitlines())
        assert connect.request("GET", "/connectors/file-missing/tasks/0/status").json()["state"] == "FAILED"
        # ?expand=failure on the sidecar's status route (Connect's shape otherwise, as the plain route shows).
        expanded = json.loads(sidecar.request("GET", "/connectors/file-missing/status?expand=failure").body)
        assert expanded["tasks"][0]["failure"]["class"] == "user"
        assert expanded["connector"]["failure"] is None
        assert "failure" not in sidecar.call("GET", "/connectors/file-missing/status")["tasks"][0]
    finally:
        connect.call("DELETE", "/connectors/file-missing")
