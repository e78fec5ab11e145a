"""Workers that hang while in the group, against three real Connect 4.4.0 workers and a sidecar reading their group
(``group.id``) and asking each for ``GET /health`` every second (stuck after 5 s, each probe bounded by 12 s): a worker
whose herder thread is blocked by a connector of ours (the scripted connector's ``taskConfigs()``), a worker SIGSTOPped
for less than its session timeout, and a clean rolling restart of the three, which flags none. How soon each is
flagged is printed (and measured in bench/autorestart.py for docs/BENCHMARKS.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.real_connect import ConnectCluster, all_in
from harness.real_kafka import KafkaCluster
from harness.sidecar import LiveSidecar

pytestmark = pytest.mark.timeout(600)

STUCK_AFTER_S, INTERVAL_S, HEALTH_TIMEOUT_S = 5.0, 1.0, 12.0
# A SIGSTOPped worker stays in the group for its session timeout: longer than the pause.
SESSION_TIMEOUT_MS, PAUSE_S = 45000, 15.0
BLOCK_S = 25.0


@pytest.fixture(scope="module")
def cluster(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConnectCluster,
                                                                                               LiveSidecar]]:
    directory = tmp_path_factory.mktemp("stuck-workers")
    with ConnectCluster(kafka_line("kafka-4"), directory / "connect", kafka, "stuck-4", workers=3, settings={
            "session.timeout.ms": str(SESSION_TIMEOUT_MS), "heartbeat.interval.ms": "3000"}) as connect, \
            LiveSidecar(directory / "sidecar", connect, {
                "sidecar.workers.check.interval.ms": str(int(INTERVAL_S * 1000)),
                "sidecar.workers.stuck.after.ms": str(int(STUCK_AFTER_S * 1000)),
                "sidecar.workers.health.timeout.ms": str(int(HEALTH_TIMEOUT_S * 1000))}) as sidecar:
        yield connect, sidecar


def workers(sidecar: LiveSidecar) -> dict[str, dict[str, Any]]:
    return {w["id"]: w for w in sidecar.call("GET", "/fleet")["workers"] or []}


def flagged_after(sidecar: LiveSidecar, worker: str, since: float, timeout: float) -> float:
    """Seconds from ``since`` (time.monotonic) until the sidecar marks the worker stuck."""
    try:
        wait_until(lambda: workers(sidecar).get(worker, {}).get("stuck_since") is not None, timeout,
                   f"{worker} marked stuck", interval=0.2)
    except TimeoutError as e:
        # What the sidecar saw of the worker, and what it said meanwhile.
        said = sidecar.service.output()[-40:] if sidecar.service is not None else []
        raise TimeoutError(f"{e}\nthe sidecar's /fleet: {workers(sidecar)}\nits log:\n" + "".join(said)) from None
    return time.monotonic() - since


def test_a_worker_whose_herder_is_blocked_is_flagged_then_says_why_and_is_cleared(
        cluster: tuple[ConnectCluster, LiveSidecar]) -> None:
    connect, sidecar = cluster
    connect.call("PUT", "/connectors/steady/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "3"})
    connect.wait_for_status("steady", all_in("RUNNING", 3), "running")
    start = time.monotonic()
    connect.call("PUT", "/connectors/blocker/config", {
        "connector.class": SOURCE_CONNECTOR, "tasks.max": "1", "scripted.block": "task-configs",
        "scripted.block.ms": str(int(BLOCK_S * 1000))})
    try:
        blocked = connect.wait_for_status("blocker", lambda s: s["connector"]["state"] == "RUNNING",
                                          "the connector running (its taskConfigs() blocks next)")["connector"][
            "worker_id"]
        took = flagged_after(sidecar, blocked, start, STUCK_AFTER_S + 3 * INTERVAL_S + 5.0)
        print(f"\nherder blocked in taskConfigs(): flagged {took:.1f} s after the connector was created")
        # Connect's own word comes after its 10 s: what the herder does.
        wait_until(lambda: workers(sidecar)[blocked]["health"] == "unhealthy", HEALTH_TIMEOUT_S + 5.0,
                   "its GET /health's 500", interval=0.5)
        assert "generating task configs for connector blocker" in workers(sidecar)[blocked]["health_message"]
        assert workers(sidecar)[blocked]["up"] is True  # in the group all along
        metrics = sidecar.request("GET", "/metrics").body.decode()
        assert f'status_worker_stuck{{worker="{blocked}"}} 1.0' in metrics
        steady = connect.request("GET", "/connectors/steady/status").json()
        if any(t["worker_id"] == blocked for t in steady["tasks"]):
            word = sidecar.call("GET", "/fleet/health?connector=steady")["steady"]
            assert word in ("DEGRADED", "UNHEALTHY")
        wait_until(lambda: workers(sidecar)[blocked]["stuck_since"] is None, BLOCK_S + 20.0,
                   "cleared once its herder is back", interval=0.5)
        assert workers(sidecar)[blocked]["health"] in ("healthy", "slow")
    finally:
        for name in ("blocker", "steady"):
            connect.request("DELETE", f"/connectors/{name}")


def test_a_worker_paused_for_less_than_its_session_timeout_is_flagged_and_cleared(
        cluster: tuple[ConnectCluster, LiveSidecar]) -> None:
    connect, sidecar = cluster
    victim = connect.workers[2]
    start = time.monotonic()
    victim.process.pause()
    try:
        took = flagged_after(sidecar, victim.worker_id, start, STUCK_AFTER_S + 3 * INTERVAL_S + 5.0)
        print(f"\nworker SIGSTOPped: flagged {took:.1f} s after the pause")
        seen = workers(sidecar)[victim.worker_id]
        assert seen["up"] is True  # in the group: its session has not timed out
        assert seen["gone_since"] is None
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - start)))
    finally:
        victim.process.resume()
    wait_until(lambda: workers(sidecar)[victim.worker_id]["stuck_since"] is None, HEALTH_TIMEOUT_S + 10.0,
               "cleared once it answers", interval=0.5)


def test_a_clean_rolling_restart_of_three_workers_flags_none(cluster: tuple[ConnectCluster, LiveSidecar]) -> None:
    connect, sidecar = cluster
    connect.call("PUT", "/connectors/rolling/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "6"})
    connect.wait_for_status("rolling", all_in("RUNNING", 6), "running")
    flagged: list[tuple[str, Any]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                for worker, seen in workers(sidecar).items():
                    if seen.get("stuck_since") is not None:
                        flagged.append((worker, seen))
            except (OSError, AssertionError):
                pass
            done.wait(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for worker in connect.workers:
            worker.stop()
            worker.process.start()
            worker.wait_ready()
        connect.wait_for_status("rolling", all_in("RUNNING", 6), "running after the rolling restart", timeout=90.0)
        time.sleep(STUCK_AFTER_S + 2 * INTERVAL_S)
    finally:
        done.set()
        watcher.join(10)
        connect.request("DELETE", "/connectors/rolling")
    assert flagged == []
    metrics = sidecar.request("GET", "/metrics").body.decode()
    assert all(line.endswith(" 0.0") for line in metrics.splitlines() if line.startswith("status_worker_stuck{"))
