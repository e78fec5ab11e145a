"""Auto-restart against a secured worker, for real: a Connect 3.9.2 worker serving HTTPS with Connect's own
BasicAuthSecurityRestExtension (harness/secured_connect.py), and four sidecars acting for it at once: with the CA file
and the credentials file (it restarts the failed task), without credentials (a 401), with a CA that did not sign the
worker's certificate (a TLS failure), with a wrong password in the worker's URL (a 401, the password never logged).
Each trouble is one line that names it and one request, then a pause: never a storm."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.certs import TestCA
from harness.java_process import SOURCE_CONNECTOR, wait_until
from harness.real_kafka import KafkaCluster
from harness.secured_connect import SecuredConnect
from harness.sidecar import LiveSidecar

pytestmark = pytest.mark.timeout(300)

WRONG = "not-the-password"
SIDECAR = {"sidecar.restart.enable": "true", "sidecar.restart.initial.backoff.ms": "1000",
           "sidecar.restart.jitter.factor": "0", "sidecar.restart.request.timeout.ms": "5000"}


@pytest.fixture(scope="module")
def secured(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConnect]:
    directory = tmp_path_factory.mktemp("secured-workers")
    with SecuredConnect(kafka, directory / "worker", "secured-3", TestCA(directory / "ca")) as worker:
        yield worker


def sidecar(secured: SecuredConnect, directory: Path, name: str, url: str, **settings: str) -> LiveSidecar:
    return LiveSidecar(directory / name, secured.connect, {
        **SIDECAR, "sidecar.restart.workers": f"{secured.worker_id}={url}", "sidecar.name": name, **settings})


def metric(side: LiveSidecar, outcome: str) -> float:
    text = side.request("GET", "/metrics").body.decode()
    line = next(line for line in text.splitlines() if line.startswith(f'status_restarts_total{{outcome="{outcome}"}}'))
    return float(line.rsplit(" ", 1)[1])


def test_a_secured_worker_is_restarted_with_its_ca_and_credentials_and_each_trouble_is_one_line(
        secured: SecuredConnect, tmp_path: Path) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text(f"{secured.user}:{secured.password}\n")
    stranger = TestCA(tmp_path / "other-ca", "a CA the worker never used")
    ca = str(secured.ca.cert)
    sidecars = {
        "right": sidecar(secured, tmp_path, "right", secured.url, **{
            "sidecar.workers.rest.ssl.ca.location": ca, "sidecar.workers.rest.credentials.file": str(credentials)}),
        "no-credentials": sidecar(secured, tmp_path, "no-credentials", secured.url,
                                  **{"sidecar.workers.rest.ssl.ca.location": ca}),
        "untrusted": sidecar(secured, tmp_path, "untrusted", secured.url, **{
            "sidecar.workers.rest.ssl.ca.location": str(stranger.cert),
            "sidecar.workers.rest.credentials.file": str(credentials)}),
        "url-password": sidecar(secured, tmp_path, "url-password",
                                secured.url.replace("https://", f"https://{secured.user}:{WRONG}@"),
                                **{"sidecar.workers.rest.ssl.ca.location": ca}),
    }
    for side in sidecars.values():
        side.start()
    try:
        status, _ = secured.request("PUT", "/connectors/secured-once/config", {
            "connector.class": SOURCE_CONNECTOR, "tasks.max": "1", "scripted.task": "fail-once"})
        assert status in (200, 201)

        def task_state() -> str | None:
            code, body = secured.request("GET", "/connectors/secured-once/status")
            return body["tasks"][0]["state"] if code == 200 and body.get("tasks") else None

        wait_until(lambda: task_state() == "RUNNING" and metric(sidecars["right"], "restarted") == 1, 60,
                   "restarted by the sidecar with the CA and the credentials")
        troubles = {"no-credentials": "unauthorized", "untrusted": "tls-failed", "url-password": "unauthorized"}
        wait_until(lambda: all(metric(sidecars[name], outcome) == 1 for name, outcome in troubles.items()), 30,
                   "each troubled sidecar: its trouble")
        time.sleep(5.0)  # more than the initial backoff, again and again: a storm would show now
        for name, outcome, said in (
                ("no-credentials", "unauthorized", r"the sidecar's credentials are missing or wrong"),
                # The first request may be the restart's check or the sidecar's GET /health probe of the worker.
                ("untrusted", "tls-failed", (r"the TLS handshake of GET /(connectors/secured-once/status|health) "
                                            r"failed \(certificate verify failed:")),
                ("url-password", "unauthorized", r"the sidecar's credentials are missing or wrong")):
            side = sidecars[name]
            assert metric(side, outcome) == 1, name  # one request, then the pause
            assert metric(side, "unreachable") == 0, name  # a TLS failure is not "unreachable"
            assert side.service is not None
            output = side.service.output()
            lines = [line for line in output if re.search(said, line)]
            assert len(lines) == 1, (name, lines)
            assert WRONG not in "".join(output), name
        (named,) = [line for line in sidecars["url-password"].service.output()  # type: ignore[union-attr]
                    if "credentials are missing or wrong" in line]
        assert f"{secured.user}:***@127.0.0.1" in named
    finally:
        secured.request("DELETE", "/connectors/secured-once")
        for side in sidecars.values():
            side.close()
