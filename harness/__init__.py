"""The shared harness of the tests and the benchmarks: real brokers and Connect workers to run them against, the
mock cluster's fault injection, a sidecar process, generated status history and the analytics' oracles. Never
shipped, never imported by ``status_store``; ``tests/`` and ``bench/`` both import it, never each other.

- ``faulty_cluster``: the embedded broker's faults (broker down, latency, injected errors, request tracking).
- ``tansu``: Tansu as a separate broker process; ``real_kafka``: Apache Kafka's brokers, ``real_connect``: Connect
  workers on them, ``java_process``: the JVM processes of both (the jars from Maven, ``harness/jvm``);
  ``kafka_proxy``: a proxy that counts and breaks their traffic.
- ``service``: ``status-store serve`` as a process; ``sidecar``: one beside a Connect cluster; ``worker_pods``: a
  sidecar beside each worker (the pod layout); ``http``: raw HTTP/1.1 exchanges; ``events_storm``: clients of
  ``GET /events`` by the thousand.
- The fault matrix: ``matrix_bed`` (the pod and stock workers side by side), ``matrix_faults`` (the rows),
  ``matrix_workload`` (the steps and the oracle), ``matrix_views`` (where a status is looked up, and the verdict),
  ``matrix_rows`` (one row run).
- ``history_gen``: generated status history; ``pandas_history``, ``duckdb_history``: the analytics' baselines and
  differential oracles, compared by ``history_compare``; ``spark_cluster``: a Spark standalone cluster.
- ``certs``: a test's own CA and certificates (PEM, PKCS#12, JKS) for the secured brokers, workers and sidecar.
- ``virtual_clock``: an asyncio loop whose clock jumps to its next timer (simulations with no real I/O).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# Java options for short-lived JVMs on a small machine (Spark's daemons, quick runs): a small, quick collector
# and the fast compiler only.
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def stop(process: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop a process by its pid: SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a server to listen on (see ``free_ports``)."""
    return free_ports(1)[0]


# The ports handed out are taken below the kernel's ephemeral range: a port from that range (what binding port 0
# gives) can be taken meanwhile as the local port of any outgoing connection (the suite makes thousands), and the
# server it was meant for then fails with "Address already in use" (a Connect worker's REST port, seconds after it
# was picked, in a whole-suite run). Each pytest-xdist worker picks from a slice of its own, and each process walks
# its slice from a random start, never handing out a port twice until it wraps.
_LOWEST_PORT = 10000
_next_port: int | None = None


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (Linux's default 32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_slice() -> range:
    """This process's slice of the ports below the ephemeral range: its pytest-xdist worker's share."""
    low, high = _LOWEST_PORT, _ephemeral_low()
    if high - low < 1000:
        low = 1024
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER", "gw0"), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    try:
        index, count = int(worker.removeprefix("gw")), max(1, int(workers))
    except ValueError:
        index, count = 0, 1
    size = (high - low) // count
    start = low + (index % count) * size
    return range(start, start + size)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody is bound to on 127.0.0.1 now, below the kernel's ephemeral range and in this
    process's own slice of it (above)."""
    global _next_port
    ports = port_slice()
    if _next_port is None or _next_port not in ports:
        _next_port = ports.start + random.randrange(len(ports))
    found: list[int] = []
    for _ in range(len(ports)):
        port, _next_port = _next_port, ports.start + (_next_port + 1 - ports.start) % len(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # bound, or lingering in TIME_WAIT: the next one
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free ports in {ports.start}-{ports.stop - 1} on 127.0.0.1")
