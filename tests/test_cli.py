"""The command line, end to end: `status-store serve` as a real process on the embedded broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from status_store.model import ConnectorStatus, State

from .conftest import StoreFactory
from .helpers import Service

WAIT = 30.0


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
