"""A refused login or certificate, named once (status_store/kafka/security_failures.py): librdkafka's own lines, as
it logs them at every reconnection of every client, become one line per cause; a broker's certificate is explained
by fetching it from a real TLS server (expired, naming another host, from another CA). The same against a real
secured Kafka broker: tests/test_secured_kafka_live.py."""

from __future__ import annotations

import datetime
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from harness.certs import DAY, PASSWORD, Issued, TestCA
from status_store.kafka import client_log
from status_store.kafka.client_log import ClientLog
from status_store.kafka.security_failures import (
    CURRENT_S,
    REMIND_S,
    Failure,
    SecurityFailures,
    broker_certificate_problem,
    own_certificate_problem,
)

from .helpers import eventually

LOGIN_FAILED = ("[thrd:sasl_ssl://127.0.0.1:9093/bootstrap]: sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication "
                "error: Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512 (after 314ms in state AUTH_REQ)")
VERIFY_FAILED = ("ssl://127.0.0.1:{port}/1: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
                 "failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured"
                 " or root CA certificates are installed (install ca-certificates package) (after 5ms in state "
                 "SSL_HANDSHAKE)")
CLIENT_REFUSED = ("ssl://127.0.0.1:9094/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert "
                  "certificate unknown: SSL alert number 46 (after 3ms in state APIVERSION_QUERY)")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def failures(monkeypatch: pytest.MonkeyPatch) -> SecurityFailures:
    """A fresh record of causes, the one every ``ClientLog`` of the test hands its lines to."""
    fresh = SecurityFailures()
    monkeypatch.setattr(client_log, "security_failures", fresh)
    return fresh


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("certs"))


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_refused_login_is_one_line_for_every_client_and_retry(failures: SecurityFailures,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    clients = [ClientLog(embedded=False) for _ in range(3)]
    with caplog.at_level(logging.DEBUG):
        for attempt in range(20):
            for number, client in enumerate(clients):
                client.line(logging.ERROR, "FAIL", f"rdkafka#producer-{number}", LOGIN_FAILED.replace("314", str(
                    300 + attempt)))
        await eventually(lambda: errors(caplog) != [])
        # A consumer's coordinator connection names no broker: the same cause.
        clients[0].line(logging.ERROR, "FAIL", "rdkafka#consumer-4", "GroupCoordinator: SASL authentication error: "
                        "SaslAuthenticateRequest failed: Local: Broker transport failure")
    assert errors(caplog) == [
        "Kafka at 127.0.0.1:9093 refused the login (the SASL mechanism): SASL authentication error: Authentication "
        "failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512. Check the username "
        "and password (sasl.jaas.config, or sidecar.kafka.sasl.username and sasl.password)"]
    # librdkafka's own lines are still there, at DEBUG.
    assert sum("SASL authentication error" in r.getMessage() for r in caplog.records
               if r.levelno == logging.DEBUG) == 61
    problem = failures.current()
    assert problem is not None
    assert problem.failure is Failure.LOGIN
    assert problem.broker == "127.0.0.1:9093"


async def test_a_coordinators_line_first_is_the_same_cause_as_the_brokers(failures: SecurityFailures,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A group coordinator's connection may fail first, in its own words ("GroupCoordinator: host:port: ..."), or
    naming no broker at all; the broker's own lines after it are the same cause, not a second one."""
    coordinator = ("GroupCoordinator: 127.0.0.1:9093: SASL authentication error: Authentication failed during "
                   "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 341ms in state "
                   "AUTH_REQ)")
    client = ClientLog(embedded=False)
    with caplog.at_level(logging.WARNING):
        client.line(logging.ERROR, "FAIL", "rdkafka#consumer-1", coordinator)
        client.line(logging.ERROR, "FAIL", "rdkafka#consumer-1", "GroupCoordinator: SASL authentication error: "
                    "SaslAuthenticateRequest failed: Local: Broker transport failure")
        client.line(logging.ERROR, "FAIL", "rdkafka#producer-2", LOGIN_FAILED)
        await eventually(lambda: errors(caplog) != [])
    nameless = SecurityFailures(explain=lambda failure, broker, detail, settings: f"{broker}: {detail}")
    with caplog.at_level(logging.WARNING):
        assert nameless.noticed("FAIL", "GroupCoordinator: SASL authentication error: SaslAuthenticateRequest failed")
        assert nameless.noticed("FAIL", LOGIN_FAILED.split("]: ", 1)[1])  # as ClientLog hands it: no thread prefix
        await eventually(lambda: len(errors(caplog)) == 2)
    assert errors(caplog) == [
        "Kafka at 127.0.0.1:9093 refused the login (the SASL mechanism): SASL authentication error: Authentication "
        "failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512. Check the username "
        "and password (sasl.jaas.config, or sidecar.kafka.sasl.username and sasl.password)",
        "?: GroupCoordinator: SASL authentication error: SaslAuthenticateRequest failed"]
    problem = nameless.current()
    assert problem is not None
    assert problem.broker == "127.0.0.1:9093"


async def test_a_cause_that_lasts_is_named_again_every_few_minutes_with_a_count(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = SecurityFailures(clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            assert failures.noticed("FAIL", LOGIN_FAILED)
            clock.now += 1
        await eventually(lambda: len(errors(caplog)) == 1)
        clock.now += REMIND_S
        assert failures.noticed("FAIL", LOGIN_FAILED)
    assert len(errors(caplog)) == 2
    assert errors(caplog)[1].endswith("(seen 4 more times since it was last logged)")


def test_the_cause_is_current_while_it_is_seen(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = SecurityFailures(clock, explain=lambda failure, broker, detail, settings: detail)
    assert failures.current() is None
    assert not failures.noticed("FAIL", "127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused")
    assert failures.noticed("FAIL", CLIENT_REFUSED)
    current = failures.current()
    assert current is not None
    assert current.failure is Failure.CLIENT_CERTIFICATE
    clock.now += CURRENT_S + 1
    assert failures.current() is None


@contextmanager
def tls_server(issued: Issued) -> Iterator[int]:
    """A TLS server on 127.0.0.1 presenting ``issued``, that completes handshakes and closes; its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.cert, issued.key)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(10)


def test_a_brokers_certificate_is_explained_by_its_dates_or_its_issuer(ca: TestCA) -> None:
    yesterday = datetime.datetime.now(datetime.UTC) - DAY
    expired = ca.server("expired", not_before=yesterday - 30 * DAY, not_after=yesterday)
    with tls_server(expired) as port:
        assert broker_certificate_problem("127.0.0.1", port).startswith("expired on ")  # type: ignore[union-attr]
    early = ca.server("early", not_before=yesterday + 10 * DAY, not_after=yesterday + 40 * DAY)
    with tls_server(early) as port:
        assert broker_certificate_problem("127.0.0.1", port).startswith("is not valid before ")  # type: ignore[union-attr]
    good = ca.server("good")
    with tls_server(good) as port:
        # Its dates are right and it names the host: then its issuer is the one not trusted.
        assert "is not signed by a CA this service trusts" in str(broker_certificate_problem("127.0.0.1", port))


def test_this_services_own_certificate_is_checked_for_its_dates(ca: TestCA) -> None:
    yesterday = datetime.datetime.now(datetime.UTC) - DAY
    expired = ca.client("expired-client", not_before=yesterday - 30 * DAY, not_after=yesterday)
    assert "it expired on" in own_certificate_problem({"ssl.keystore.location": str(expired.p12),
                                                        "ssl.keystore.password": PASSWORD})
    assert "it expired on" in own_certificate_problem({"ssl.certificate.location": str(expired.cert)})
    valid = ca.client("valid-client")
    assert "does not trust its CA" in own_certificate_problem({"ssl.certificate.pem": valid.cert.read_text()})
    assert "presents none" in own_certificate_problem({})
