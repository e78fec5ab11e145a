"""The whole stop keeps to sidecar.shutdown.timeout.ms, from SIGTERM to the process's exit, on a starved CPU: the
real `status-store serve` process in a CPU cgroup with a quota of 100m (a Kubernetes CPU limit a sidecar is often
given), 3,000 writes pending and every broker down (librdkafka's mock cluster). The bound used to be kept only on an
idle machine: the store's close and the interpreter's own finalization came after the store's wait, and took
10.8 s (spool) and 11.6 s (none) of a 10 s bound on a loaded machine; 5.7 s of a 5 s bound at 100m here."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config

from .conftest import Broker
from .helpers import eventually_value

pytestmark = pytest.mark.timeout(180)

WAIT = 30.0
BOUND_S = 5.0
# The share of one CPU the process gets once stopping: 100m, in a period of 100 ms.
QUOTA_US, PERIOD_US = 10_000, 100_000
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


@contextmanager
def cpu_limited(pid: int) -> Iterator[None]:
    """Put process ``pid`` in a CPU cgroup of its own, limited to QUOTA_US per PERIOD_US, for the block; the cgroup is
    removed after it (the process gone). Skips where this machine cannot make cgroups with a CPU quota."""
    name = f"status-store-test-{uuid.uuid4().hex[:8]}"
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        group = CGROUP_V1 / name
        limits = {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(QUOTA_US)}
    elif "cpu" in _read(CGROUP_V2 / "cgroup.controllers").split():
        group = CGROUP_V2 / name
        limits = {"cpu.max": f"{QUOTA_US} {PERIOD_US}"}
    else:
        pytest.skip("no CPU cgroup controller here (cgroup v1's cpu or v2's cpu.max) to limit the process's CPU")
    try:
        group.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a CPU cgroup here ({e}): the starved CPU cannot be made")
    try:
        for key, value in limits.items():
            (group / key).write_text(value)
        (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        def removed() -> bool:
            try:
                group.rmdir()
            except OSError:  # the process is still in it
                return False
            return True

        eventually_value(removed, bool, WAIT, 0.1, what=f"cgroup {group} removed")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def item(key: int) -> dict[str, object]:
    return {"kind": "task", "connector": f"c{key}", "task": 0, "state": "RUNNING", "worker_id": "w:1",
            "generation": 1}


@pytest.mark.parametrize("spool", [True, False], ids=["spool", "no spool"])
async def test_the_whole_stop_keeps_to_its_bound_on_a_starved_cpu(mock_cluster: FaultyCluster, tmp_path: Path,
                                                                 spool: bool) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.partitions": 5, "sidecar.shutdown.timeout.ms": int(BOUND_S * 1000),
        **({"status.storage.spool.path": tmp_path / "spool.db"} if spool else {})})
    port = free_port()
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            mock_cluster.broker_down(-1)
            answer = await http.post("/statuses", json={"updates": [item(key) for key in range(3000)]})
            assert answer.status_code == 202
            assert 'status_retry_queue_pending 3000.0' in (await http.get("/metrics")).text
        with cpu_limited(service.process.pid):
            started = time.monotonic()
            service.process.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(service.process.wait, WAIT)
            stopped_after = time.monotonic() - started
    assert stopped_after < BOUND_S, f"exited {stopped_after:.2f} s after SIGTERM"
    assert code == (0 if spool else 1)  # with a spool, what was pending is kept; without one, it is lost
    summary = [line for line in service.output() if "Stopped with 3000 status update(s)" in line]
    assert len(summary) == 1, service.output()[-10:]
