"""The REST API over HTTPS (status_store/api/credentials.py): the real service process serving certificates made by
the test (harness/certs.py), mutual TLS, certificate, CA and token files replaced while it runs (as cert-manager and
a rotated secret replace them), and the CLI over HTTPS. The agent over HTTPS: tests/test_secured_kafka_live.py."""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import free_port
from harness.certs import Issued, TestCA
from harness.service import Service
from status_store.api.credentials import CHECK_INTERVAL_S, WriteTokens

from .helpers import eventually_value

WAIT = 20.0


def https_config(directory: Path, server: Issued, ca: TestCA | None = None, **settings: str) -> Path:
    """A `status-store serve --config` file on the embedded broker, serving HTTPS with copies of the files (a test
    replaces them), and mutual TLS with ``ca``'s clients when given."""
    files = directory / "tls"
    files.mkdir(exist_ok=True)
    shutil.copy(server.cert, files / "tls.crt")
    shutil.copy(server.key, files / "tls.key")
    lines = ["sidecar.embedded.broker=true", f"sidecar.rest.tls.cert.file={files / 'tls.crt'}",
             f"sidecar.rest.tls.key.file={files / 'tls.key'}"]
    if ca is not None:
        shutil.copy(ca.cert, files / "ca.crt")
        lines.append(f"sidecar.rest.tls.ca.file={files / 'ca.crt'}")
    lines += [f"{key}={value}" for key, value in settings.items()]
    config = directory / "sidecar.properties"
    config.write_text("\n".join(lines) + "\n")
    return config


def replace(target: Path, source: Path) -> None:
    """Replace a file the way a Kubernetes secret's files are: the new content under a new inode, moved in place."""
    fresh = target.with_name(target.name + ".new")
    shutil.copy(source, fresh)
    fresh.replace(target)


def peer_serial(port: int, trusted: TestCA, client: Issued | None = None) -> int:
    """The serial number of the certificate the service presents on a new connection (verified against
    ``trusted``), presenting ``client``'s certificate when given."""
    context = ssl.create_default_context(cafile=trusted.cert)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        # TLS 1.3: the server's verdict on the client's certificate comes with the first read.
        tls.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert tls.recv(12).startswith(b"HTTP/1.1 200")
        der = tls.getpeercert(binary_form=True)
    from cryptography import x509

    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def get(url: str, trusted: TestCA, client: Issued | None = None, token: str | None = None,
        method: str = "GET", body: object = None) -> int:
    context = ssl.create_default_context(cafile=trusted.cert)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=WAIT, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("rest-ca"))


@pytest.fixture
def started() -> Iterator[list[Service]]:
    """The services a test starts, stopped at its end."""
    services: list[Service] = []
    with contextlib.ExitStack() as stack:
        yield services
        for service in services:
            stack.push(service)  # each reaped, even when another's reaping fails


def serve(started: list[Service], config: Path) -> int:
    port = free_port()
    service = Service("--config", str(config), "--port", str(port))
    started.append(service)
    assert "https://127.0.0.1" in service.wait_for("Uvicorn running on")
    return port


def test_mutual_tls_serves_clients_of_the_ca_and_refuses_the_others(ca: TestCA, tmp_path: Path,
                                                                    started: list[Service]) -> None:
    port = serve(started, https_config(tmp_path, ca.server("rest-server"), ca))
    agent = ca.client("agent")
    assert get(f"https://127.0.0.1:{port}/ready", ca, agent) == 200
    stranger = TestCA(tmp_path / "stranger").client("stranger")
    for client in (None, stranger):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            get(f"https://127.0.0.1:{port}/ready", ca, client)
    # Plain HTTP on the HTTPS port gets nothing.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=WAIT)


def test_requested_client_certificates_are_checked_when_given(ca: TestCA, tmp_path: Path,
                                                              started: list[Service]) -> None:
    port = serve(started, https_config(tmp_path, ca.server("rest-requested"), ca,
                                       **{"sidecar.rest.tls.client.auth": "requested"}))
    assert get(f"https://127.0.0.1:{port}/ready", ca) == 200
    stranger = TestCA(tmp_path / "stranger").client("stranger")
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        get(f"https://127.0.0.1:{port}/ready", ca, stranger)


def test_replaced_files_are_served_to_new_connections_without_a_restart(ca: TestCA, tmp_path: Path,
                                                                        started: list[Service]) -> None:
    """cert-manager renews the certificate and the CA in place: a new connection sees the new ones."""
    first = ca.server("rest-first")
    config = https_config(tmp_path, first, ca)
    port = serve(started, config)
    service = started[0]
    agent = ca.client("agent-first")
    old_serial = peer_serial(port, ca, agent)
    renewed = ca.server("rest-renewed")
    replace(tmp_path / "tls" / "tls.key", renewed.key)
    replace(tmp_path / "tls" / "tls.crt", renewed.cert)
    new_serial = eventually_value(lambda: peer_serial(port, ca, agent), lambda serial: serial != old_serial, WAIT)
    from cryptography import x509

    assert new_serial == x509.load_pem_x509_certificate(renewed.cert.read_bytes()).serial_number
    # The CA of client certificates rotates too: the new CA's clients are let in, the old CA's no more.
    rotated = TestCA(tmp_path / "rotated-ca", "rotated CA")
    newcomer = rotated.client("agent-rotated")
    replace(tmp_path / "tls" / "ca.crt", rotated.cert)
    eventually_value(lambda: _refused(port, ca, agent), lambda refused: refused, WAIT)
    assert peer_serial(port, ca, newcomer) == new_serial
    # A replacement that cannot be used (a key of another certificate) keeps what was served, with one warning.
    replace(tmp_path / "tls" / "tls.key", ca.server("mismatched").key)

    def unusable_warnings() -> list[str]:
        # Files are looked at on use (a handshake), so each look is a connection: still served from before.
        assert peer_serial(port, ca, newcomer) == new_serial
        return [line for line in service.output() if "TLS files changed but cannot be used" in line]

    eventually_value(unusable_warnings, bool, WAIT, CHECK_INTERVAL_S, what="the warnings")
    for _ in range(3):
        # Held over three more check intervals (the pause is the test: the unusable files are looked at again and
        # again, still served from before, with no second warning).
        time.sleep(CHECK_INTERVAL_S)
        warnings = unusable_warnings()
    assert len(warnings) == 1, warnings


def _refused(port: int, trusted: TestCA, client: Issued) -> bool:
    try:
        peer_serial(port, trusted, client)
    except (ssl.SSLError, ConnectionError, AssertionError):
        return True
    return False


def test_the_token_file_is_read_again_when_it_changes(ca: TestCA, tmp_path: Path, started: list[Service]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token-0123456789\n")
    port = serve(started, https_config(tmp_path, ca.server("rest-token"), None,
                                       **{"sidecar.rest.token.file": str(token_file)}))
    url = f"https://127.0.0.1:{port}/connectors/c/status"
    status = {"state": "RUNNING", "worker_id": "w:1", "generation": 1}
    assert get(url, ca, token="first-token-0123456789", method="PUT", body=status) == 202
    assert get(url, ca, token="second-token-0123456789", method="PUT", body=status) == 401
    # A rotation: both tokens for a while, then the new one alone.
    token_file.write_text("first-token-0123456789\nsecond-token-0123456789\n")
    eventually_value(lambda: get(url, ca, token="second-token-0123456789", method="PUT", body=status),
                     lambda code: code == 202, WAIT)
    assert get(url, ca, token="first-token-0123456789", method="PUT", body=status) == 202
    replace(token_file, _written(tmp_path / "only-second", "second-token-0123456789\n"))
    eventually_value(lambda: get(url, ca, token="first-token-0123456789", method="PUT", body=status),
                     lambda code: code == 401, WAIT)
    assert get(url, ca, token="second-token-0123456789", method="PUT", body=status) == 202


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_token_file_that_goes_bad_keeps_the_tokens_read_before(tmp_path: Path) -> None:
    clock = [0.0]
    path = tmp_path / "token"
    path.write_text("a-token-0123456789\n")
    tokens = WriteTokens(path=str(path), clock=lambda: clock[0])
    assert tokens.accepts("a-token-0123456789")
    path.write_text("\n")
    clock[0] += CHECK_INTERVAL_S
    assert tokens.accepts("a-token-0123456789")
    path.write_text("another-token-0123456789")
    assert tokens.accepts("a-token-0123456789")  # not looked at again within the interval
    clock[0] += CHECK_INTERVAL_S
    assert not tokens.accepts("a-token-0123456789")
    assert tokens.accepts("another-token-0123456789")


def test_files_that_cannot_be_used_stop_the_start_naming_the_setting(ca: TestCA, tmp_path: Path) -> None:
    server, other = ca.server("rest-mismatch"), ca.server("rest-other")
    config = https_config(tmp_path, server)
    shutil.copy(other.key, tmp_path / "tls" / "tls.key")
    done = subprocess.run([sys.executable, "-m", "status_store.cli", "serve", "--config", str(config), "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert "configuration sidecar.rest.tls.key.file" in done.stderr


def test_status_and_watch_over_https_with_a_ca_file_and_a_client_certificate(ca: TestCA, tmp_path: Path,
                                                                            started: list[Service]) -> None:
    port = serve(started, https_config(tmp_path, ca.server("rest-cli"), ca))
    cli = ca.client("cli")
    url = f"https://127.0.0.1:{port}"
    assert get(f"{url}/connectors/shown/status", ca, cli, method="PUT",
               body={"state": "RUNNING", "worker_id": "w:1", "generation": 1}) == 202
    command = [sys.executable, "-m", "status_store.cli", "status", "--url", url, "--cacert", str(ca.cert)]
    shown = eventually_value(lambda: subprocess.run([*command, "--cert", str(cli.cert), "--key", str(cli.key)],
                                                    capture_output=True, text=True, timeout=60),
                             lambda done: "shown" in done.stdout, WAIT)
    assert shown.returncode == 0
    assert "RUNNING" in shown.stdout
    without = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert without.returncode == 1
    assert without.stderr.startswith(f"status-store: cannot reach {url}/connectors?expand=status")
    untrusted = subprocess.run([*command[:-2], "--cert", str(cli.cert), "--key", str(cli.key)],
                               capture_output=True, text=True, timeout=60)
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
    watching = subprocess.Popen([sys.executable, "-m", "status_store.cli", "watch", "--url", url, "--cacert",
                                 str(ca.cert), "--cert", str(cli.cert), "--key", str(cli.key)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(watching, lines), daemon=True).start()
    try:
        eventually_value(lambda: _metrics(url, ca, cli), lambda text: "status_events_subscribers 1.0" in text, WAIT)
        assert get(f"{url}/connectors/shown/status", ca, cli, method="PUT",
                   body={"state": "PAUSED", "worker_id": "w:1", "generation": 1}) == 202
        assert "connector shown  PAUSED" in lines.get(timeout=WAIT)
    finally:
        watching.kill()
        watching.wait(WAIT)


def _pump(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    for line in process.stdout or ():
        lines.put(line)


def _metrics(url: str, trusted: TestCA, client: Issued) -> str:
    context = ssl.create_default_context(cafile=trusted.cert)
    context.load_cert_chain(client.cert, client.key)
    with urllib.request.urlopen(f"{url}/metrics", timeout=WAIT, context=context) as answer:
        return str(answer.read().decode())
