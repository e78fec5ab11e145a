"""A secured cluster for real: one Apache Kafka 4.4.0 broker (KRaft) serving SASL_SSL with SCRAM-SHA-512 and mutual
TLS (harness/secured_kafka.py, certificates made by the test), a stock Connect 4.4.0 worker on it with the agent, and
the sidecar started from the worker's own properties file; the agent hands its statuses over HTTPS with mutual TLS.
And the bad days: a wrong password, an untrusted CA, an expired broker certificate, an expired client certificate,
a password rotated under a running sidecar: one line each naming the cause, /ready's 503 saying it.

One broker process for the module, its tests in one xdist group."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import free_port
from harness.certs import Issued, TestCA
from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.real_connect import ConnectCluster, states
from harness.secured_kafka import ROTATED_PASSWORD, ROTATED_USER, SecuredKafka
from harness.service import Service
from harness.sidecar import LiveSidecar, javaagent

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("secured-kafka")]

WAIT = 60.0
# Ready within this once the brokers take the login again.
READY_WAIT = 30.0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    with SecuredKafka(kafka_line("kafka-4"), tmp_path_factory.mktemp("secured-kafka")) as kafka:
        yield kafka


@dataclass
class SecuredPod:
    """A Connect worker on the SCRAM listener with the agent, and its sidecar serving HTTPS with mutual TLS."""

    kafka: SecuredKafka
    connect: ConnectCluster
    sidecar: LiveSidecar
    rest_ca: TestCA
    client: Issued

    def ask(self, path: str) -> tuple[int, Any]:
        """GET the sidecar over HTTPS, presenting a client certificate of its CA."""
        return https_get(self.sidecar.url + path, self.rest_ca, self.client)


def https_get(url: str, ca: TestCA, client: Issued | None = None) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=ca.cert)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            body = answer.read()
            return answer.status, json.loads(body) if answer.headers.get_content_type() == "application/json" else body
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def rest_tls(ca: TestCA, server: Issued) -> dict[str, str]:
    return {"sidecar.rest.tls.cert.file": str(server.cert), "sidecar.rest.tls.key.file": str(server.key),
            "sidecar.rest.tls.ca.file": str(ca.cert)}


@pytest.fixture(scope="module")
def pod(secured: SecuredKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPod]:
    workdir = tmp_path_factory.mktemp("secured-pod")
    rest_ca = TestCA(workdir / "rest-ca", "sidecar REST CA")
    agent = rest_ca.client("worker-agent")
    port = free_port()
    # The worker's file as users write it: SASL_SSL, SCRAM-SHA-512 in a JAAS line, a PKCS#12 trust store (Strimzi's
    # ca.p12). The agent reaches the sidecar over HTTPS, trusting the REST CA and presenting its own certificate.
    options = {"tls.ca.file": str(rest_ca.cert), "tls.cert.file": str(agent.cert), "tls.key.file": str(agent.key),
               "probe.interval.ms": "500"}
    connect = ConnectCluster(kafka_line("kafka-4"), workdir / "connect", secured, "secured", workers=1,
                             settings=secured.worker_scram("p12"),
                             jvm_options=[javaagent(f"https://127.0.0.1:{port}", options)])
    sidecar = LiveSidecar(workdir / "sidecar", connect, rest_tls(rest_ca, rest_ca.server("sidecar-rest")), port)
    connect.create_topics()
    with sidecar, connect:
        yield SecuredPod(secured, connect, sidecar, rest_ca, rest_ca.client("test-client"))


def worker_log(connect: ConnectCluster) -> str:
    return "\n".join(path.read_text(errors="replace") for worker in connect.workers
                     for path in (worker.process.stdout_file, worker.process.log_file) if path.exists())


def test_a_worker_on_scram_over_tls_hands_its_statuses_to_the_sidecar_over_mutual_tls(pod: SecuredPod) -> None:
    connect = pod.connect
    wait_until(lambda: "handing the worker's statuses to the sidecar at https://" in worker_log(connect), WAIT,
               "the agent on the sidecar over HTTPS")
    connect.call("PUT", "/connectors/secured/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2",
                                                       "scripted.task.1": "fail"})
    connect.wait_for_status("secured", lambda st: states(st) == ("RUNNING", ["RUNNING", "FAILED"]), "task 1 failed",
                            WAIT)
    # Connect's REST reads the topic; the sidecar, over HTTPS, answers the same.
    theirs = connect.call("GET", "/connectors/secured/status")

    def same() -> bool:
        code, ours = pod.ask("/connectors/secured/status")
        return code == 200 and {**ours, "type": theirs["type"]} == theirs

    wait_until(same, WAIT, "the sidecar answers what Connect answers")
    code, metrics = pod.ask("/metrics")
    assert code == 200
    handed = [line for line in metrics.decode().splitlines() if line.startswith("status_agent_updates_total")]
    assert any(float(line.rsplit(" ", 1)[1]) > 0 for line in handed), handed
    # Every record is in the topic, read through the plain listener.
    keys = {key for key, _ in pod.kafka.records(connect.status_topic)}
    assert {b"status-connector-secured", b"status-task-secured-0", b"status-task-secured-1"} <= keys
    # A client of another CA gets nothing from the sidecar.
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        https_get(pod.sidecar.url + "/ready", pod.rest_ca, TestCA(pod.sidecar.config_file.parent / "other").client("x"))
    connect.call("DELETE", "/connectors/secured")


def test_a_sidecar_on_mutual_tls_to_kafka_reads_and_writes_the_workers_topic(pod: SecuredPod, tmp_path: Path
                                                                              ) -> None:
    """The same worker file, but the mutual TLS listener and a PKCS#12 keystore: the sidecar reads what the worker
    wrote through the other listener, and its own write lands in the topic."""
    connect, kafka = pod.connect, pod.kafka
    connect.call("PUT", "/connectors/mutual/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "1"})
    connect.wait_for_status("mutual", lambda st: states(st) == ("RUNNING", ["RUNNING"]), "running", WAIT)
    other = LiveSidecar(tmp_path, connect, kafka.worker_mtls(kafka.client_cert, "p12"))
    with other:
        wait_until(lambda: other.request("GET", "/connectors/mutual/status").status == 200, WAIT,
                   "the worker's statuses read over mutual TLS")
        written = other.request("PUT", "/connectors/written-over-mtls/status?wait=true",
                                {"state": "RUNNING", "worker_id": "w:1", "generation": 1})
        assert written.status == 200, written.body
    assert b"status-connector-written-over-mtls" in {key for key, _ in kafka.records(connect.status_topic)}
    connect.call("DELETE", "/connectors/mutual")


REFUSALS = {
    "wrong password": ("Kafka at {scram} refused the login (SCRAM-SHA-512): SASL authentication error: "
                       "Authentication failed"),
    "untrusted CA": "Kafka at {scram}: the broker's TLS certificate is not signed by a CA this service trusts",
    "expired broker certificate": "Kafka at {stale}: the broker's TLS certificate expired on ",
    "expired client certificate": "Kafka at {mtls} refused this service's TLS client certificate",
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refusal_is_one_line_naming_its_cause(secured: SecuredKafka, tmp_path: Path, case: str) -> None:
    settings = {
        "wrong password": secured.worker_scram("p12", password="not-the-password"),
        "untrusted CA": {**secured.worker_scram("p12"),
                         **secured.truststore("p12", TestCA(tmp_path / "another-ca", "another CA"))},
        "expired broker certificate": {"bootstrap.servers": secured.stale_servers, "security.protocol": "SSL",
                                       **secured.truststore("p12")},
        "expired client certificate": secured.worker_mtls(secured.expired_client_cert, "p12"),
    }[case]
    config = tmp_path / "worker.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in {
        "status.storage.topic": "refused-status", "sidecar.startup.timeout.ms": "3000", **settings}.items()))
    done = subprocess.run([sys.executable, "-m", "status_store.cli", "serve", "--config", str(config), "--port", "0"],
                          capture_output=True, text=True, timeout=WAIT)
    expected = REFUSALS[case].format(scram=secured.scram_servers, stale=secured.stale_servers,
                                     mtls=secured.mtls_servers)
    lines = done.stderr.splitlines()
    named = [line for line in lines if " ERROR status_store.kafka.security_failures: " in line]
    assert len(named) == 1, lines
    assert expected in named[0]
    # Nothing of librdkafka's own stream of warnings; the start fails naming the cause.
    assert not [line for line in lines if "status_store.librdkafka" in line], lines
    assert done.returncode == 2
    assert lines[-1].startswith("status-store: cannot reach Kafka at ")
    assert expected in lines[-1]
    if case == "expired client certificate":
        assert "it expired on " in named[0]


def test_ready_says_why_when_the_broker_refuses_a_rotated_password(secured: SecuredKafka, tmp_path: Path) -> None:
    """The user's password is changed on the brokers while the sidecar runs (the listener asks its clients to log in
    again every few seconds): /ready answers 503 naming the refused login, one line says it, and once the password is
    back the sidecar is ready again without a restart."""
    port = free_port()
    config = tmp_path / "worker.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in {
        "status.storage.topic": "rotated-status", "status.storage.replication.factor": "1",
        **secured.worker_scram("p12", user=ROTATED_USER, password=ROTATED_PASSWORD)}.items()))
    with Service("--config", str(config), "--port", str(port)) as service:
        service.wait_for("Uvicorn running on")
        url = f"http://127.0.0.1:{port}/ready"
        wait_until(lambda: _ready(url)[0] == 200, READY_WAIT, "ready")
        secured.set_password(ROTATED_USER, "changed-on-the-brokers")
        try:
            wait_until(lambda: _ready(url)[0] == 503, WAIT, "not ready once the login is refused")
            code, body = _ready(url)
            assert code == 503
            assert "refused the login (SCRAM-SHA-512)" in body["message"]
        finally:
            secured.set_password(ROTATED_USER, ROTATED_PASSWORD)
        wait_until(lambda: _ready(url)[0] == 200, READY_WAIT, "ready again")
    named = [line for line in service.output() if "status_store.kafka.security_failures" in line]
    assert len(named) == 1, "\n".join(named)


def _ready(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError as e:
        return 0, str(e)

