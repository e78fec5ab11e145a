"""The sidecar started before its Connect worker: it waits for the topics the worker creates (Connect's config topic;
its status topic when it may not create it), says at ``/ready`` what it waits for, stays alive for the liveness probe,
and never exits for it; once the topics are there it starts as always. A ``status-store serve`` process on the mock
cluster, which has no CreateTopics (the sidecar cannot create the status topic there, as a client without the right
cannot); then a stock Connect 4.4.0 worker with the agent, started after its sidecar on Apache Kafka's broker."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.real_connect import ConnectCluster, ConnectWorker, all_in
from harness.real_kafka import KafkaCluster
from harness.service import Service, sidecar_config
from harness.sidecar import LiveSidecar, javaagent

from .helpers import eventually_value

WAIT = 30.0


def answer_of(http: httpx.Client, path: str) -> tuple[int, str]:
    response = http.get(path)
    return response.status_code, response.json()["message"]


def until(http: httpx.Client, path: str, status: int, words: str) -> str:
    """Ask until ``path`` answers ``status`` with ``words`` in its message; the message."""
    seen = eventually_value(lambda: answer_of(http, path), lambda a: a[0] == status and words in a[1], WAIT,
                            0.1, f"GET {path} (wanted {status} with {words!r})")
    return seen[1]


def log_of(worker: ConnectWorker) -> str:
    """What the worker has logged so far (the agent's lines included)."""
    path = worker.process.log_file
    return path.read_text(errors="replace") if path.exists() else ""


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


def test_workers_started_after_their_sidecar_hand_it_their_statuses(kafka: KafkaCluster, tmp_path: Path) -> None:
    port = free_port()
    connect = ConnectCluster(kafka_line("kafka-4"), tmp_path / "workers", kafka, "started-second", workers=2,
                             jvm_options=[javaagent(f"http://127.0.0.1:{port}", {"probe.interval.ms": "500"})])
    first, second = connect.workers
    # The sidecar on the workers' own file, but asking for a replication factor the one broker refuses: it cannot
    # create the status topic, as a client without the right cannot, and waits for the workers'.
    sidecar = LiveSidecar(tmp_path / "sidecar", connect, {"status.storage.replication.factor": "2",
                                                          "sidecar.workers.check.interval.ms": "500"}, port)
    with sidecar, httpx.Client(base_url=sidecar.url, timeout=WAIT) as http:
        service = sidecar.service
        assert service is not None
        try:
            waiting = until(http, "/ready", 503, f"waiting for the status topic '{connect.status_topic}'")
            assert "replication factor" in waiting
            first.start()
            until(http, "/ready", 200, "")
            # The agent found the sidecar not ready (it waited for the worker's topics), so the worker's statuses stayed
            # on Connect's own path; it asks again every probe interval and hands over once Connect's path is quiet.
            # What the worker writes before that goes through Connect's own store, as it should: a connector made as
            # soon as /ready answered 200 had its RUNNING written by the worker, before the agent's next probe, in 3
            # runs of 8 (the sidecar's count of writes then stayed below 3). The connector is made once the agent
            # has handed over: every status of it goes through the sidecar.
            wait_until(lambda: "handing the worker's statuses to the sidecar" in log_of(first), WAIT,
                       "the agent handed the worker's statuses to the sidecar")
            connect.call("PUT", "/connectors/late/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2"})
            connect.wait_for_status("late", all_in("RUNNING", 2), "running", WAIT)

            def handed_over() -> bool:
                metrics = http.get("/metrics").text
                return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                           if line.startswith("status_update_success_total{")) >= 3

            wait_until(handed_over, WAIT, "the sidecar wrote the worker's statuses")
            # The sidecar has read the group with the first worker in it; then the second joins, for the first time.
            wait_until(lambda: first.worker_id in "".join(service.output()), WAIT, "the sidecar saw the first worker")
            second.start()
            joined = f"Worker {second.worker_id} joined the Connect group started-second"
            wait_until(lambda: joined in "".join(service.output()), WAIT, "the sidecar saw the second worker join")
            lines = "".join(service.output())
            assert "(again)" not in lines
            assert "Connect group started-second again" not in lines
        finally:
            connect.close()
