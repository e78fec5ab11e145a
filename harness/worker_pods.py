"""Stock Connect workers in the Kubernetes pod layout: each worker started with the agent (``-javaagent``, nothing
else) and a sidecar of its own beside it (``status-store serve`` on that worker's own properties file), the agent
reaching its sidecar through an ``HttpFaultProxy`` (which can refuse or answer wrongly), the sidecar reaching Kafka
through a listener of its own (``KafkaCluster(client_listeners=[SIDECARS])``, each broker's behind a ``KafkaProxy``)
while the worker connects to the brokers directly: so Kafka can be cut off from the sidecars alone. Each worker
serves JMX, where the agent's figures say which path it is on (``on_sidecar``).

``harness.sidecar.AgentPod`` is the other layout: one sidecar for every worker (Strimzi's, where a pod cannot have a
sidecar container).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path

from .http_proxy import HttpFaultProxy
from .java_process import START_WAIT, KafkaLine, free_ports, jmx_attributes, jmx_options
from .real_connect import ConnectCluster, ConnectWorker
from .real_kafka import KafkaCluster, Started
from .sidecar import LiveSidecar, javaagent

# The listener of the brokers the sidecars reach Kafka through.
SIDECARS = "SIDECARS"
AGENT_MBEANS = "kafka.connect:type=status-store-agent-metrics,*"


class WorkerPod:
    """One worker, its sidecar, the HTTP proxy between its agent and the sidecar, and the worker's JMX port."""

    def __init__(self, worker: ConnectWorker, sidecar: LiveSidecar, proxy: HttpFaultProxy, jmx_port: int) -> None:
        self.worker, self.sidecar, self.proxy, self.jmx_port = worker, sidecar, proxy, jmx_port

    def kill_sidecar(self) -> None:
        """SIGKILL the sidecar (a crash); its proxy stops listening with it, as nothing listens at a killed
        sidecar's port."""
        self.proxy.listen(False)
        self.sidecar.kill()

    def stop_sidecar(self) -> None:
        """Stop the sidecar (SIGTERM, its clean shutdown); its proxy stops listening first, as the sidecar's server
        stops taking connections before the rest of it stops."""
        self.proxy.listen(False)
        self.sidecar.close()

    def start_sidecar(self) -> None:
        """Start the sidecar; its proxy listens again once the sidecar does."""
        self.sidecar.start()
        self.proxy.listen(True)

    def pause_sidecar(self) -> None:
        """SIGSTOP the sidecar: it keeps its sockets and answers nothing."""
        os.kill(self._sidecar_pid(), signal.SIGSTOP)

    def resume_sidecar(self) -> None:
        os.kill(self._sidecar_pid(), signal.SIGCONT)

    def _sidecar_pid(self) -> int:
        """The sidecar's pid, once its command line says it is still our ``status-store serve``."""
        service = self.sidecar.service
        assert service is not None, "the sidecar is not running"
        pid = service.process.pid
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"status_store.cli" not in command or b"serve" not in command:
            raise RuntimeError(f"pid {pid} is not our sidecar: {command}")
        return pid

    def agent_figures(self, line: KafkaLine) -> dict[str, float]:
        """The agent's own figures in the worker's JMX (none while its JMX does not answer)."""
        try:
            found = jmx_attributes(line, self.jmx_port, AGENT_MBEANS)
        except RuntimeError:
            return {}
        return {name: float(value) for attributes in found.values() for name, value in attributes.items()}

    def on_sidecar(self, line: KafkaLine) -> bool:
        """Whether the worker's agent hands its statuses to the sidecar, with nothing queued."""
        figures = self.agent_figures(line)
        return figures.get("on-sidecar-path") == 1 and figures.get("queued-keys") == 0


class WorkerPods(Started):
    """``workers`` pods of one Connect group (topics of its own, named ``name``) on ``kafka``, which must have the
    ``SIDECARS`` listener."""

    def __init__(self, line: KafkaLine, workdir: Path, kafka: KafkaCluster, name: str, workers: int = 2,
                 agent_options: Mapping[str, str] | None = None, sidecar_settings: Mapping[str, str] | None = None,
                 full_jit: bool = False) -> None:
        self.line = line
        self.connect = ConnectCluster(line, workdir / "connect", kafka, name, workers, full_jit=full_jit)
        ports = iter(free_ports(2 * workers))
        self.pods = []
        for index, worker in enumerate(self.connect.workers):
            sidecar_port, jmx_port = next(ports), next(ports)
            proxy = HttpFaultProxy(sidecar_port)
            # Each worker's agent points at its own sidecar: the JVM options differ per worker, so they are set on
            # each worker's process before it starts.
            worker.process.jvm_options = [javaagent(proxy.url, agent_options), *jmx_options(jmx_port)]
            sidecar = LiveSidecar(workdir / f"sidecar-{index}", self.connect,
                                  {**worker.settings, "bootstrap.servers": kafka.bootstrap(SIDECARS),
                                   "sidecar.name": f"{name}-sidecar-{index}", **(sidecar_settings or {})},
                                  sidecar_port)
            self.pods.append(WorkerPod(worker, sidecar, proxy, jmx_port))

    @property
    def sidecars(self) -> list[LiveSidecar]:
        return [pod.sidecar for pod in self.pods]

    @property
    def proxies(self) -> list[HttpFaultProxy]:
        return [pod.proxy for pod in self.pods]

    def start(self, timeout: float = START_WAIT) -> None:
        """The topics as Connect creates them, then the proxies and sidecars (which read them), then the workers."""
        self.connect.create_topics()
        for pod in self.pods:
            pod.proxy.start()
            pod.sidecar.start()
        self.connect.start(timeout)

    def close(self) -> None:
        self.connect.close()
        for pod in self.pods:
            if pod.sidecar.service is not None and pod.sidecar.service.process.poll() is None:
                pod.resume_sidecar()  # a stopped process cannot take its SIGTERM
            pod.sidecar.close()
            pod.proxy.close()
