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
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
