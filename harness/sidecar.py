"""status-store as a real process beside real Connect workers: on their Kafka cluster, their status topic and
their config topic, as a user runs it (harness/real_kafka.py starts the Kafka and Connect processes); and stock
Connect workers that hand their statuses to it through the agent (``agent/``), started with nothing but
``-javaagent``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.service import Service

from . import ROOT, free_port
from .http_proxy import HttpFaultProxy
from .java_process import START_WAIT, KafkaLine, RealKafkaMissing, write_properties
from .real_connect import Answer, ConnectCluster, http
from .real_kafka import KafkaCluster, Started

# What `mvn -f agent/pom.xml verify` builds (./scripts/test.sh runs it before the tests), or another build named by
# HARNESS_AGENT_JAR (the fault matrix run before and after a change of the agent's, each with its own). Not a
# STATUS_STORE_ name: the agent refuses an environment variable of its prefix it does not know, and the sidecar reads
# every STATUS_STORE_ variable as a setting.
AGENT_JAR = Path(os.environ.get("HARNESS_AGENT_JAR") or ROOT / "agent" / "target" / "status-store-agent.jar")


class LiveSidecar(Started):
    """``status-store serve --config <file>`` on a Connect cluster's topics; stopped by its pid."""

    def __init__(self, workdir: Path, connect: ConnectCluster, settings: Mapping[str, str] | None = None,
                 port: int | None = None) -> None:
        """The sidecar reads the Connect workers' own properties (as a user points it at a worker's file), with
        ``settings`` of its own added."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.properties = {**connect.settings, **(settings or {})}
        scheme = "https" if "sidecar.rest.tls.cert.file" in self.properties else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.config_file = workdir / "status-store.properties"
        write_properties(self.config_file, self.properties)
        self.service: Service | None = None

    def start(self) -> None:
        self.service = Service("--config", str(self.config_file), "--port", str(self.port))
        self.service.wait_for("Uvicorn running on")

    def request(self, method: str, path: str, body: object = None, accept: str = "application/json") -> Answer:
        return http(method, self.url + path, body, accept=accept)

    def call(self, method: str, path: str, body: object = None, expect: tuple[int, ...] = (200, 202)) -> Any:
        answer = self.request(method, path, body)
        assert answer.status in expect, f"{method} {path} -> {answer.status} {answer.body[:500]!r}"
        return answer.json()

    def kill(self) -> None:
        """SIGKILL (a crash): nothing of its own shutdown runs."""
        if self.service is not None:
            self.service.process.kill()
            self.service.process.wait(30)
            self.service = None

    def close(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None


def agent_jar() -> Path:
    """The agent's jar, built from agent/ by the test command."""
    if not AGENT_JAR.exists():
        raise RealKafkaMissing(f"the agent's jar {AGENT_JAR} is not built: ./scripts/test.sh builds it "
                               "(mvn -B -q -f agent/pom.xml verify)")
    return AGENT_JAR


def javaagent(url: str, options: Mapping[str, str] | None = None) -> str:
    """The JVM option that attaches the agent, as a user puts it in KAFKA_OPTS."""
    given = ",".join(f"{key}={value}" for key, value in {"url": url, **(options or {})}.items())
    return f"-javaagent:{agent_jar()}={given}"


class AgentPod(Started):
    """Stock Connect workers started with the agent, and the sidecar they hand their statuses to (one for all of
    them, as on Strimzi; on the workers' own topics). The sidecar starts first, on topics created as Connect creates
    them, so that every status the workers write goes through it."""

    def __init__(self, line: KafkaLine, workdir: Path, kafka: KafkaCluster, name: str, workers: int = 2,
                 settings: Mapping[str, str] | None = None, sidecar_settings: Mapping[str, str] | None = None,
                 agent_options: Mapping[str, str] | None = None, full_jit: bool = False, proxied: bool = False,
                 jvm_options: Sequence[str] = ()) -> None:
        """``proxied``: the agents reach the sidecar through an ``HttpFaultProxy`` (``proxy``), which can refuse
        or delay their requests. ``jvm_options``: more options for the workers' JVMs."""
        port = free_port()
        self.proxy = HttpFaultProxy(port) if proxied else None
        url = self.proxy.url if self.proxy is not None else f"http://127.0.0.1:{port}"
        self.connect = ConnectCluster(line, workdir / "connect", kafka, name, workers, settings, full_jit,
                                      [javaagent(url, agent_options), *jvm_options])
        self.sidecar = LiveSidecar(workdir / "sidecar", self.connect, sidecar_settings, port)

    def start(self, timeout: float = START_WAIT) -> None:
        self.connect.create_topics()
        if self.proxy is not None:
            self.proxy.start()
        self.sidecar.start()
        self.connect.start(timeout)

    def close(self) -> None:
        self.connect.close()
        self.sidecar.close()
        if self.proxy is not None:
            self.proxy.close()
