"""librdkafka's own log lines go through Python logging: named, at the level of their severity, never
raw on stderr; what is expected of an embedded broker is DEBUG there and a WARNING from a real cluster."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from status_store.kafka.client_log import ClientLog
from status_store.kafka.topics import ensure_topic

ROOT = Path(__file__).parent.parent
WAIT = 30.0
REFUSED = "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)"


def levels(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "status_store.librdkafka"]


def test_a_line_keeps_its_severity_and_names_its_client(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        ClientLog(embedded=False).line(logging.ERROR, "SSL", "status-store#producer-1", "[thrd:app]: handshake failed")
        ClientLog(embedded=True).line(logging.INFO, "CONF", "status-store#consumer-2", "something to know")
    assert levels(caplog) == [(logging.ERROR, "status-store#producer-1 SSL: handshake failed"),
                              (logging.INFO, "status-store#consumer-2 CONF: something to know")]


def test_what_an_embedded_broker_makes_expected_is_debug_there_and_a_warning_elsewhere(
        caplog: pytest.LogCaptureFixture) -> None:
    expected = [(logging.ERROR, "FAIL", REFUSED),
                (logging.INFO, "FAIL", "127.0.0.1:9/1: Disconnected: connection closed by peer"),
                (logging.INFO, "CONFWARN", "No `bootstrap.servers` configured: client will not be "
                                                             "able to connect to Kafka cluster")]
    with caplog.at_level(logging.DEBUG):
        for level, facility, text in expected:
            ClientLog(embedded=True).line(level, facility, "c#producer-1", text)
        embedded = [level for level, _ in levels(caplog)]
        caplog.clear()
        for level, facility, text in expected:
            ClientLog(embedded=False).line(level, facility, "c#producer-1", text)
        real = [level for level, _ in levels(caplog)]
    assert embedded == [logging.DEBUG] * 3
    assert real == [logging.WARNING] * 3


def test_a_repeated_problem_is_logged_once_then_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    client_log = ClientLog(embedded=False)
    with caplog.at_level(logging.DEBUG):
        for elapsed in (0, 3, 12):
            client_log.line(logging.ERROR, "FAIL", "c#producer-1", REFUSED.replace("after 0ms", f"after {elapsed}ms"))
        client_log.line(logging.ERROR, "FAIL", "c#producer-2", REFUSED)  # another client
    assert [level for level, _ in levels(caplog)] == [logging.WARNING, logging.DEBUG, logging.DEBUG, logging.WARNING]
    assert client_log.last_problem is not None
    assert "Connection refused" in client_log.last_problem


def test_no_client_line_reaches_stderr_raw() -> None:
    # A mock cluster (its own handle warns that it has no bootstrap.servers) and a producer whose broker
    # refuses connections, in a process whose log shows INFO and above.
    code = f"""
import logging, sys
from confluent_kafka import Producer
from status_store.kafka.settings import producer_settings
from harness.faulty_cluster import FaultyCluster
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
cluster = FaultyCluster(1)
producer = Producer(producer_settings("127.0.0.1:{free_port()}", {{}}))
for _ in range(20):
    producer.poll(0.1)
cluster.close()
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines, "the refused connection was not logged"
    assert all(line.startswith("WARNING status_store.librdkafka: status-store#producer-") for line in lines), lines
    assert "Connection refused" in lines[0]
    assert len(lines) == 1  # its repeats are DEBUG


@pytest.fixture
def external_mock_cluster() -> Iterator[str]:
    """A mock cluster in another process: a real broker as far as this process can tell."""
    code = ("import sys\nfrom harness.faulty_cluster import FaultyCluster\ncluster = FaultyCluster(1)\n"
            "cluster.create_topic('connect-status', 5, 1)\nprint(cluster.bootstrap_servers, flush=True)\n"
            "sys.stdin.read()\ncluster.close()\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               cwd=ROOT)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.communicate("", timeout=WAIT)


async def test_configs_that_cannot_be_described_are_a_warning_only_from_a_real_cluster(
        external_mock_cluster: str, caplog: pytest.LogCaptureFixture) -> None:
    embedded = FaultyCluster(1)
    try:
        embedded.create_topic("connect-status", 5, 1)
        with caplog.at_level(logging.DEBUG, logger="status_store.kafka.topics"):
            await ensure_topic(embedded.bootstrap_servers, {}, "connect-status", 5, 1, {}, WAIT)
            await ensure_topic(external_mock_cluster, {}, "connect-status", 5, 1, {}, WAIT)
    finally:
        embedded.close()
    described = [r.levelno for r in caplog.records if r.getMessage().startswith("Cannot describe the configs")]
    assert described == [logging.DEBUG, logging.WARNING]
