"""status-store as a real process beside real Connect workers: on their Kafka cluster, their status topic and
their config topic, as a user runs it (harness/real_kafka.py starts the Kafka and Connect processes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.service import Service

from . import free_port
from .real_kafka import Answer, ConnectCluster, Started, http, write_properties


class LiveSidecar(Started):
    """``status-store serve --config <file>`` on a Connect cluster's topics; stopped by its pid."""

    def __init__(self, workdir: Path, connect: ConnectCluster, settings: Mapping[str, str] | None = None) -> None:
        """The sidecar reads the Connect workers' own properties (as a user points it at a worker's file), with
        ``settings`` of its own added."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.properties = {**connect.settings, **(settings or {})}
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

    def close(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None
