"""The workers' REST client (``act/worker_rest.py``) against real HTTPS servers on 127.0.0.1, with certificates the
test makes (harness/certs.py), answering as Connect's BasicAuthSecurityRestExtension does (401, "User cannot access
the resource.", checked live in tests/test_secured_workers_live.py): a CA file trusted or not, an expired certificate,
credentials from a file (rotated without a restart) or a URL; each trouble one line, a pause, no password logged."""

from __future__ import annotations

import base64
import contextlib
import datetime
import logging
import random
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.certs import TestCA
from status_store.act.restarter import AutoRestart
from status_store.act.worker_rest import TROUBLE_PAUSE_S, Trouble, WorkerRest
from status_store.config import build_config
from status_store.connect.cache import StatusCache
from status_store.errors import ConfigError

PASSWORD = "s3cret-pass"


class ConnectLikeServer:
    """An HTTPS server answering ``GET /health`` as a Connect worker with basic authentication does: 200 with the
    right ``user:password``, else 401 with Connect's body."""

    def __init__(self, cert: Path, key: Path, user: str = "connect", password: str = PASSWORD) -> None:
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                ok = self.headers.get("Authorization") == server.expected
                body = (b'{"status":"healthy","message":"Worker has completed startup"}' if ok
                        else b"User cannot access the resource.")
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @contextlib.contextmanager
    def running(self) -> Iterator[ConnectLikeServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("worker-rest-ca"))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "status_store.act.worker_rest"
            and r.levelno == logging.WARNING]


async def test_a_worker_over_https_with_credentials_from_a_file_rotated_without_a_restart(
        ca: TestCA, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "status_store.act.worker_rest")
    server_cert = ca.server("worker-ok")
    credentials = tmp_path / "credentials"
    credentials.write_text("# the workers' REST user\nconnect: wrong\n")
    clock = Clock()
    rest = WorkerRest(5.0, str(ca.cert), str(credentials), clock)
    rest.start()
    try:
        with ConnectLikeServer(server_cert.cert, server_cert.key).running() as server:
            refused = await rest.get("w:8443", server.url + "/health")
            assert (refused.status, refused.trouble) == (401, Trouble.UNAUTHORIZED)
            assert rest.paused_until("w:8443") == clock.now + TROUBLE_PAUSE_S
            # Asked again anyway: no second line while the trouble lasts.
            await rest.get("w:8443", server.url + "/health")
            (line,) = warnings(caplog)
            assert "it answered HTTP 401 to GET /health: the sidecar's credentials are missing or wrong" in line
            assert "wrong" not in line.split("GET /health")[0]
            # The secret is rotated in the file: the next request takes it.
            credentials.write_text("connect:" + PASSWORD + "\n")
            answer = await rest.get("w:8443", server.url + "/health")
            assert answer.ok
            assert answer.json["status"] == "healthy"
            assert rest.paused_until("w:8443") is None
            assert any("answers the sidecar again (refused credentials is over)" in r.getMessage()
                       for r in caplog.records)
    finally:
        await rest.stop()


async def test_a_certificate_the_ca_file_does_not_trust_or_an_expired_one_is_a_tls_failure_said_once(
        ca: TestCA, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "status_store.act.worker_rest")
    other = TestCA(tmp_path / "other", "another CA")
    stranger = other.server("stranger")
    expired = ca.server("expired", not_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1))
    rest = WorkerRest(5.0, str(ca.cert), None, Clock())
    rest.start()
    try:
        for issued, worker, why in ((stranger, "s:8443", "certificate verify failed"),
                                    (expired, "e:8443", "certificate has expired")):
            with ConnectLikeServer(issued.cert, issued.key).running() as server:
                for _ in range(3):
                    reply = await rest.get(worker, server.url + "/health")
                    assert (reply.status, reply.trouble) == (None, Trouble.TLS)
                    assert why in (reply.error or "")
                assert server.requests == 0
        lines = warnings(caplog)
        assert len(lines) == 2  # one per worker, not one per request
        assert all("the TLS handshake of GET /health failed (certificate verify failed: " in line
                   and "not an unreachable worker" in line for line in lines)
        assert "certificate has expired" in lines[1]
    finally:
        await rest.stop()


async def test_a_password_in_a_worker_url_is_sent_and_never_logged(
        ca: TestCA, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server_cert = ca.server("worker-url")
    rest = WorkerRest(5.0, str(ca.cert), None, Clock())
    rest.start()
    try:
        with ConnectLikeServer(server_cert.cert, server_cert.key).running() as server:
            secured = server.url.replace("https://", f"https://connect:{PASSWORD}@")
            assert (await rest.get("w:8443", secured + "/health")).ok
            wrong = server.url.replace("https://", "https://connect:not-the-one@")
            assert (await rest.get("w:8443", wrong + "/health")).trouble is Trouble.UNAUTHORIZED
        # Nothing listens any more: the error names no password either.
        gone = await rest.get("w:8443", secured + "/health")
        assert (gone.trouble, gone.status) == (None, None)
        assert PASSWORD not in (gone.error or "")
    finally:
        await rest.stop()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "connect:***@127.0.0.1" in text
    assert PASSWORD not in text
    assert "not-the-one" not in text


def test_a_bad_worker_url_or_ca_file_is_a_config_error_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config({"sidecar.restart.workers": f"https://connect:{PASSWORD}@h:notaport"})
    assert PASSWORD not in str(raised.value)
    assert "connect:***@h:notaport" in str(raised.value)
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    for path in (tmp_path / "ca.pem", tmp_path / "missing.pem"):
        with pytest.raises(ConfigError) as raised:
            build_config({"sidecar.workers.rest.ssl.ca.location": str(path)})
        assert raised.value.key == "sidecar.workers.rest.ssl.ca.location"


async def test_auto_restart_says_which_workers_it_acts_for_without_their_passwords(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "status_store.act.restarter")
    config = build_config({"sidecar.restart.enable": "true",
                           "sidecar.restart.workers": f"w:8443=https://connect:{PASSWORD}@127.0.0.1:8443"})
    rest = WorkerRest(5.0)
    restarter = AutoRestart(config.restart, StatusCache(), lambda _: None, random.random, rest)
    rest.start()
    restarter.start()
    await restarter.stop()
    await rest.stop()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "status_store.act.restarter"]
    assert line == "Auto-restart on for the connectors and tasks of w:8443 (https://connect:***@127.0.0.1:8443)"
