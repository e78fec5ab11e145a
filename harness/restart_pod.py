"""Connect workers with a sidecar beside each, acting for it alone (``sidecar.restart.workers``), each worker's REST
API reached through an HTTP proxy that notes the time of every request (``HttpFaultProxy.seen``): where Connect
receives a restart is where it is measured. For auto-restart's tests (tests/test_autorestart_live.py) and benchmark
(bench/autorestart.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .http_proxy import HttpFaultProxy
from .real_kafka import ConnectCluster, KafkaCluster, Started, kafka_line
from .sidecar import LiveSidecar

RESTART = re.compile(r"POST /connectors/([^/ ?]+)(?:/tasks/(\d+))?/restart")


class RestartPod(Started):
    """``workers`` Connect 4.x workers (group ``name``), each with its REST proxy and its sidecar acting for it
    alone; every sidecar writes restarts to ``history_topic``."""

    def __init__(self, kafka: KafkaCluster, workdir: Path, name: str, sidecar_settings: Mapping[str, str],
                 workers: int = 2, worker_settings: Mapping[str, str] | None = None, full_jit: bool = False) -> None:
        self.connect = ConnectCluster(kafka_line("kafka-4"), workdir / "connect", kafka, name, workers=workers,
                                      settings=worker_settings, full_jit=full_jit)
        self.proxies = [HttpFaultProxy(worker.port) for worker in self.connect.workers]
        self.history_topic = f"{name}-history"
        self.sidecars = [
            LiveSidecar(workdir / f"sidecar-{i}", self.connect,
                        {**sidecar_settings, "sidecar.restart.workers": f"{worker.worker_id}={proxy.url}",
                         "status.storage.history.topic": self.history_topic, "sidecar.name": f"sidecar-{i}"})
            for i, (worker, proxy) in enumerate(zip(self.connect.workers, self.proxies, strict=True))]

    def start(self) -> None:
        for proxy in self.proxies:
            proxy.start()
        self.connect.start()
        for sidecar in self.sidecars:
            sidecar.start()

    def close(self) -> None:
        for sidecar in self.sidecars:
            sidecar.close()
        self.connect.close()
        for proxy in self.proxies:
            proxy.close()

    def of(self, worker_id: str) -> tuple[LiveSidecar, HttpFaultProxy]:
        """The sidecar and the proxy of a worker."""
        index = [w.worker_id for w in self.connect.workers].index(worker_id)
        return self.sidecars[index], self.proxies[index]

    def restarts(self, connector: str) -> list[tuple[float, int, str | None]]:
        """Every restart request of a connector (or its tasks) a worker received: (time, worker index, task)."""
        found = []
        for index, proxy in enumerate(self.proxies):
            for at, line in list(proxy.seen):
                match = RESTART.match(line)
                if match and match.group(1) == connector:
                    found.append((at, index, match.group(2)))
        return sorted(found)

    def history(self, connector: str) -> list[dict[str, Any]]:
        """The history topic's restart events of a connector."""
        events = [json.loads(value) for _, value in self.connect.kafka.records(self.history_topic) if value]
        return [e for e in events if e.get("event") == "restart" and e.get("connector") == connector]
