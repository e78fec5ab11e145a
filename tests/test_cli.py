"""The command line, end to end: `status-store serve` as a real process on the embedded broker."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from status_store.model import ConnectorStatus, State

from .brokers import free_port
from .conftest import StoreFactory

WAIT = 30.0


class Service:
    """A `status-store serve` process whose output lines are collected by background threads."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)

    def wait_for(self, text: str) -> str:
        """The first output line containing ``text``; fails after WAIT seconds."""
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                pytest.fail(f"no line with {text!r} in {WAIT} s; output so far: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail("status-store did not stop within the bound after SIGTERM")


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service("--port", str(free_port()))
    yield running
    running.stop()


async def test_serve_runs_on_the_embedded_broker(service: Service, store_factory: StoreFactory) -> None:
    banner = service.wait_for("Embedded Kafka broker")
    bootstrap = banner.strip().rsplit("bootstrap.servers=", 1)[1]
    running = service.wait_for("Uvicorn running on")
    url = running.split("Uvicorn running on ", 1)[1].split()[0]
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        info = (await http.get("/")).json()
        assert (await http.get("/health")).status_code == 200
    assert info["embedded_broker"] is True
    assert info["bootstrap_servers"] == bootstrap
    assert info["status_topic"] == "connect-status"
    assert url.startswith("http://127.0.0.1:")
    # A second client reaches the embedded broker at the printed address.
    async with store_factory(bootstrap, "connect-status") as other:
        other.put(ConnectorStatus("conn", State.RUNNING, "w:8083", 0))
        await other.read_your_writes(WAIT)
        assert other.get_connector("conn") is not None
    assert service.stop() == 0
    assert any("NOT durable" in line for line in service.seen)


def test_bad_configuration_fails_fast_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("status.storage.partitions=-3\n")
    result = subprocess.run([sys.executable, "-m", "status_store.cli", "serve", "--config", str(config)],
                            capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2
    assert "status.storage.partitions" in result.stderr
    assert "must be in" in result.stderr
