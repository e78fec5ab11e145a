"""A large fleet read back by one sidecar: GET /fleet and GET /connectors?expand=status for one client and for many
at once, /health meanwhile, memory, and the cold start.

    .venv/bin/python -m bench.fleet_scale [--connectors 100000] [--tasks 10] [--clients 20] [--rounds 3] [--plain]
    .venv/bin/python -m bench.fleet_scale --quick    # 300 connectors of 3 tasks on the mock cluster: it all runs

The fleet (connectors of --tasks tasks each; every tenth connector and its tasks FAILED with a 2 KB trace, the rest
RUNNING, on 50 workers) is written straight into a compacted status topic of 5 partitions with a plain producer in
Connect's bytes, on Apache Kafka's broker (one node, the jars ./scripts/test.sh fetched; --quick: the mock cluster
in this process). Then ``status-store serve`` starts on it as a process of its own, and:

- cold start: from the process's start to its log line ``Status store ready`` (the topic read to its end), and to
  its HTTP server answering; beside it the same on an empty topic (the interpreter and the clients' set-up);
- memory: the process's RSS once started (steady), against the same process on an empty topic: per status;
- for each answer (``/fleet``, ``/connectors?expand=status``) and each round: one client alone (after a change, so
  that the answer is built for it), then --clients clients at once (after another change), each client reading
  the whole answer as a browser does (``Accept-Encoding: gzip``; with ``--plain`` as curl does by default, not
  asking for gzip, so the sidecar sends its answer decompressed); the time each client waited for its whole
  answer, the builds the sidecar made (``status_fleet_answer_builds_total``), and meanwhile ``GET /health`` asked
  every 20 ms on a connection of its own, from a process of its own (its latencies: p50, p99, max), and the
  process's peak RSS (VmHWM, reset before each answer's runs) against its steady RSS.

Targets: each of the clients at once within 3x one client's time; /health p99 under 100 ms; peak RSS
under 1.5x the steady RSS. Printed with the load average at the start and the end (other engineers share the
cores): read the figures against it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from bench import BenchParser, load_average, write_json
from bench.core import produce_all
from harness import free_port, stop
from harness.faulty_cluster import FaultyCluster
from harness.service import sidecar_config
from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, connector_key, task_key

PARTITIONS = 5
WAIT_S = 600.0
HEALTH_EVERY_S = 0.02
# A Java stack trace of about 2 KB, as a failed task's status carries it.
TRACE = "org.apache.kafka.connect.errors.ConnectException: the sink's table is gone\n" + "".join(
    f"\tat io.example.sink.Writer.put{n}(Writer.java:{100 + n})\n" for n in range(45))


def statuses(connectors: int, tasks: int) -> Iterator[tuple[bytes, bytes]]:
    """The fleet's records (key, value) in Connect's bytes: every tenth connector FAILED, with its tasks."""
    for c in range(connectors):
        name = f"connector-{c:06d}"
        failed = c % 10 == 0
        state, trace = (State.FAILED, TRACE) if failed else (State.RUNNING, None)
        value = encode_status(state, f"worker-{c % 50}.example.com:8083", 3, trace, "2.4.1")
        assert value is not None
        yield connector_key(name).encode(), value
        for t in range(tasks):
            yield task_key(TaskId(name, t)).encode(), value


def write_fleet(bootstrap: str, topic: str, connectors: int, tasks: int) -> int:
    """Every record through one plain producer (Java's partitioner, as Connect's); how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 50,
                         "batch.size": 1_000_000, "compression.type": "lz4", "log_level": 0})
    count = produce_all(producer, topic, statuses(connectors, tasks))
    assert producer.flush(WAIT_S) == 0
    return count


@contextlib.contextmanager
def broker(quick: bool, workdir: Path) -> Iterator[tuple[str, Callable[[str], None]]]:
    """Bootstrap servers, and how to make a compacted status topic there."""
    if quick:
        cluster = FaultyCluster(brokers=1)
        try:
            yield cluster.bootstrap_servers, lambda topic: cluster.create_topic(topic, PARTITIONS, 1)
        finally:
            cluster.close()
        return
    from harness.java_process import kafka_line
    from harness.real_kafka import KafkaCluster

    with KafkaCluster(kafka_line("kafka-4"), workdir / "kafka", full_jit=True) as kafka:
        yield kafka.bootstrap_servers, lambda topic: kafka.create_topic(topic, PARTITIONS, 1,
                                                                        {"cleanup.policy": "compact"})


@dataclass
class Sidecar:
    """``status-store serve`` on a topic: its process, when it was started, and the times of its start's marks."""

    process: subprocess.Popen[str]
    port: int
    started: float
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def memory(self, field_name: str = "VmRSS") -> int:
        """A figure of /proc/<pid>/status, in bytes (VmRSS: now; VmHWM: the peak since it was last reset)."""
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(rf"^{field_name}:\s+(\d+) kB", text, re.MULTILINE)
        assert found is not None, field_name
        return int(found.group(1)) * 1024

    def reset_peak(self) -> None:
        """Start the peak RSS (VmHWM) over from now (Linux: /proc/<pid>/clear_refs)."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")


@contextlib.contextmanager
def serve(bootstrap: str, topic: str, workdir: Path) -> Iterator[Sidecar]:
    """The sidecar on ``topic``, started (its output read on: the marks of its start noted, the rest dropped)."""
    config = sidecar_config(workdir, bootstrap, topic, {"status.storage.partitions": PARTITIONS,
                                                        "sidecar.startup.timeout.ms": 600000})
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", "--config", str(config),
                                "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sidecar = Sidecar(process, port, started)
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            for mark in ("Status store ready", "Uvicorn running on"):
                if mark in line and mark not in sidecar.marks:
                    sidecar.marks[mark] = time.monotonic() - started
                    if mark == "Uvicorn running on":
                        ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(WAIT_S) or process.poll() is not None:
            raise RuntimeError("status-store serve did not start")
        time.sleep(2)  # the collector's settling after the start (tune_collector), and the first scrape-less calm
        yield sidecar
    finally:
        stop(process)


# The probe of /health, in a process of its own (this one's threads, reading the answers, would delay it): GET /health
# every interval on one connection until its standard input closes, then its latencies (seconds) as a JSON list.
_PROBE = """
import http.client, json, sys, threading, time
port, every = int(sys.argv[1]), float(sys.argv[2])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
latencies = []
while not done.is_set():
    start = time.perf_counter()
    connection.request("GET", "/health")
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
    latencies.append(time.perf_counter() - start)
    done.wait(every)
print(json.dumps(latencies))
"""


class HealthProbe:
    """``GET /health`` every HEALTH_EVERY_S on a connection of its own, from a process of its own, while it runs: the
    latencies."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.latencies: list[float] = []
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> HealthProbe:
        self._process = subprocess.Popen([sys.executable, "-c", _PROBE, str(self.port), str(HEALTH_EVERY_S)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        out, _ = self._process.communicate(timeout=WAIT_S)
        self.latencies = json.loads(out)


def fetch(url: str, plain: bool = False) -> tuple[float, int]:
    """One client's GET, as a browser reads it (gzip taken; ``plain``: as curl does by default, gzip not asked
    for), the whole body read: seconds, and the bytes sent."""
    host, _, rest = url.removeprefix("http://").partition("/")
    name, port = host.split(":")
    connection = http.client.HTTPConnection(name, int(port), timeout=WAIT_S)
    start = time.perf_counter()
    connection.request("GET", "/" + rest, headers={} if plain else {"Accept-Encoding": "gzip"})
    answer = connection.getresponse()
    body = answer.read()
    seconds = time.perf_counter() - start
    connection.close()
    assert answer.status == 200, (answer.status, body[:200])
    return seconds, len(body)


def builds(sidecar: Sidecar, answer: str) -> int:
    """The builds the sidecar made of an answer so far."""
    connection = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=WAIT_S)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    found = re.search(rf'^status_fleet_answer_builds_total{{answer="{re.escape(answer)}"}} (\S+)$', text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


@dataclass
class Runs:
    """One answer's figures over the rounds."""

    path: str
    answer: str
    alone: list[float] = field(default_factory=list)
    together: list[list[float]] = field(default_factory=list)
    size: int = 0
    builds_together: list[int] = field(default_factory=list)
    health: list[float] = field(default_factory=list)
    peak_rss: int = 0


def run(sidecar: Sidecar, bootstrap: str, topic: str, path: str, answer: str, clients: int, rounds: int,
        plain: bool = False) -> Runs:
    """Each round: a change, one client alone; another change, ``clients`` at once; /health asked throughout."""
    runs = Runs(path, answer)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "log_level": 0})
    change = 0

    def changed() -> None:
        """A status written (a connector flips), and read back by the sidecar: the answers are built anew."""
        nonlocal change
        change += 1
        value = encode_status(State.PAUSED if change % 2 else State.RUNNING, "worker-0.example.com:8083", 4, None)
        producer.produce(topic, value, connector_key("connector-000001").encode())
        assert producer.flush(WAIT_S) == 0
        time.sleep(0.5)  # read back (a Fetch of the reader's is 100 ms at most)

    sidecar.reset_peak()
    with HealthProbe(sidecar.port) as probe, ThreadPoolExecutor(clients) as pool:
        for _ in range(rounds):
            changed()
            seconds, runs.size = fetch(sidecar.url + path, plain)
            runs.alone.append(seconds)
            changed()
            before = builds(sidecar, answer)
            runs.together.append([seconds for seconds, _ in pool.map(fetch, [sidecar.url + path] * clients,
                                                                     [plain] * clients)])
            runs.builds_together.append(builds(sidecar, answer) - before)
    runs.health = probe.latencies
    runs.peak_rss = sidecar.memory("VmHWM")
    return runs


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def report(connectors: int, tasks: int, records: int, clients: int, empty: Sidecar, full: Sidecar,
           steady: int, empty_rss: int, answers: list[Runs], json_path: Path | None = None,
           plain: bool = False) -> None:
    """The run's tables (and the same by column name to ``json_path``, ``--json``)."""
    statuses_count = connectors * (1 + tasks)
    sent = "bytes (plain)" if plain else "bytes (gzip)"
    print(f"\n{connectors:,} connectors x {tasks} tasks: {statuses_count:,} statuses ({records:,} records, a tenth "
          f"FAILED with a {len(TRACE):,}-byte trace), {PARTITIONS} partitions\n")
    print("| sidecar | store ready (s) | HTTP answering (s) | RSS (MiB) |")
    print("|---|---:|---:|---:|")
    for name, sidecar, rss in (("empty topic", empty, empty_rss), ("the fleet", full, steady)):
        print(f"| {name} | {sidecar.marks.get('Status store ready', float('nan')):.2f} | "
              f"{sidecar.marks.get('Uvicorn running on', float('nan')):.2f} | {rss / 2**20:,.0f} |")
    per_status = (steady - empty_rss) / statuses_count
    print(f"\nmemory per status: {per_status:,.0f} bytes (RSS over the empty topic's, / statuses)")
    more = full.marks["Status store ready"] - empty.marks["Status store ready"]
    print(f"cold start of the fleet's topic: {more:.2f} s more than an empty topic's\n")
    print(f"| answer | {sent} | one client (s) | {clients} at once: median, slowest (s) | slowest / one | "
          "builds for the clients at once | /health p50, p99, max (ms) | peak RSS / steady |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    found = []
    for runs in answers:
        alone = statistics.median(runs.alone)
        slowest = statistics.median(max(together) for together in runs.together)
        middle = statistics.median(statistics.median(together) for together in runs.together)
        health = [s * 1000 for s in runs.health]
        print(f"| `{runs.path}` | {runs.size:,} | {alone:.2f} | {middle:.2f}, {slowest:.2f} | {slowest / alone:.1f} | "
              f"{', '.join(map(str, runs.builds_together))} | {percentile(health, 0.5):.1f}, "
              f"{percentile(health, 0.99):.1f}, {max(health):.1f} | {runs.peak_rss / steady:.2f} |")
        found.append({"answer": runs.path, sent: runs.size, "one client (s)": alone,
                      "at once: median (s)": middle, "at once: slowest (s)": slowest, "slowest / one": slowest / alone,
                      "builds for the clients at once": runs.builds_together,
                      "/health p50 (ms)": percentile(health, 0.5), "/health p99 (ms)": percentile(health, 0.99),
                      "/health max (ms)": max(health), "peak RSS / steady": runs.peak_rss / steady})
    print("\ntargets: slowest / one <= 3; /health p99 < 100 ms; peak RSS / steady < 1.5")
    write_json(json_path, {"clients at once": clients, "clients ask for gzip": not plain,
                           "memory per status (bytes)": per_status,
                           "cold start over an empty topic (s)": more, "answers": found})


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--connectors", type=int, full=100_000, quick=300, help="connectors")
    parser.add_size("--tasks", type=int, full=10, quick=3, help="tasks per connector")
    parser.add_size("--clients", type=int, full=20, quick=4, help="clients at once")
    parser.add_size("--rounds", type=int, full=3, quick=1, help="rounds per answer")
    parser.add_argument("--plain", action="store_true",
                        help="clients do not ask for gzip (curl's default): the sidecar sends each answer decompressed")
    args = parser.parse()
    print(f"load average at the start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-fleet-scale-") as scratch:
        workdir = Path(scratch)
        with broker(args.quick, workdir) as (bootstrap, create_topic):
            create_topic("empty-status")
            create_topic("fleet-status")
            started = time.monotonic()
            records = write_fleet(bootstrap, "fleet-status", args.connectors, args.tasks)
            print(f"wrote {records:,} records in {time.monotonic() - started:.1f} s")
            (workdir / "empty").mkdir()
            with serve(bootstrap, "empty-status", workdir / "empty") as empty:
                empty_rss = empty.memory()
            (workdir / "fleet").mkdir()
            with serve(bootstrap, "fleet-status", workdir / "fleet") as full:
                steady = full.memory()
                answers = [run(full, bootstrap, "fleet-status", path, answer, args.clients, args.rounds, args.plain)
                           for path, answer in (("/fleet", "fleet"),
                                                ("/connectors?expand=status", "expand=status"))]
    report(args.connectors, args.tasks, records, args.clients, empty, full, steady, empty_rss, answers, args.json,
           args.plain)
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
