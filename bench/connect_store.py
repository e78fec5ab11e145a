"""Benchmark status-store's write path and cold start against Kafka Connect's own status backing store, on Apache
Kafka's own broker, every contender in the same run.

    .venv/bin/python -m bench.connect_store [--records 100000] [--statuses 100000] [--rounds 5] [--profile] [--quick]
        [--fleet-connectors 100000] [--fleet-tasks 10]

The baseline is the real thing: Connect 4.x's ``KafkaStatusBackingStore``, made as a distributed worker makes it
(``ConnectDistributed.createHerder``: the worker's schemaless JSON converter, a shared topic admin, the worker's
client ids) by a small Java harness (bench/jvm, compiled with javac against the jars ./scripts/test.sh fetched), in
a JVM of its own run with the options Kafka's launch scripts give a Connect worker (G1, ``-Xmx2G``, both JIT
compilers). It reads commands from its stdin: bench/jvm/src/statusstore/bench/StatusStoreHarness.java.

One Apache Kafka broker (KRaft, the broker and its controller in one JVM, both JIT compilers), on 127.0.0.1.
Every measurement writes to a topic of its own, created beforehand as Connect creates its status topic:
compacted, 5 partitions (Connect's default ``status.storage.partitions``), replication factor 1.

(a) write path: N task statuses (``bench.core.statuses``, with Connect 4.x's ``"version":null``, so that both
    stores write the same bytes; checked at the end by reading both topics back):
    - until acknowledged: ``put`` of each, then ``flush()`` (Java: the producer's flush; status-store: every
      write settled), against a raw confluent-kafka ``Producer`` loop of the same records until flushed;
    - until visible: ``put`` of each, then until every status is read back into the store's cache (Connect's
      visibility rule; Java: ``get()`` answers what was written; status-store: ``read_your_writes()``), against
      the raw produce + read-back pipeline of bench.core.
    Beside each rate, the CPU each process spent per write (every thread: the JVM's with JIT and GC; Python's
    with librdkafka's), and for status-store its event loop's share.
(b) cold start: a store started on a topic of M statuses (written beforehand): from making the store to its
    ``start()`` returning with every status in its cache (topic check, clients, reading every partition to its
    end). KafkaStatusBackingStore in a fresh JVM as a worker starting up has it (another store, on an empty
    topic, started first, as a worker starts its offset store before its status store: the Kafka clients'
    classes are loaded, little is compiled yet), and again in the harness's long-running JVM (warm);
    status-store's ``StatusStore`` in this process; a raw ``Consumer`` reading the records to the end.

(c) a fleet's cold start and memory: a topic of bench/fleet_scale.py's fleet (--fleet-connectors connectors of
    --fleet-tasks tasks, a tenth FAILED with a 2 KB trace: 1.1M statuses by default), read once by each store in a
    process of its own: KafkaStatusBackingStore in a fresh JVM (after an empty store's start, as in (b)), reporting
    its start's time and the heap it holds (used after full collections, less before it was made) and the JVM's
    resident set; status-store's ``StatusStore`` in a fresh Python process, reporting its start's time and its
    resident set's growth (the interpreter's own, and the clients', before it; the statuses read, after a full
    collection). Per status: each one's memory / statuses.

Each round runs every contender once, interleaved; the tables give the median and each round. ``--profile``
adds a cProfile of status-store's event loop in one more write until visible.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench import BenchParser, load_average
from bench.core import make_store, raw_pipeline, raw_read, raw_write, statuses, store_read, store_write
from bench.fleet_scale import write_fleet
from harness import ROOT
from harness.real_kafka import KafkaCluster, KafkaLine, compiled, kafka_line, log4j2_config
from status_store.connect.model import TaskStatus
from status_store.service import tune_collector

PARTITIONS = 5
HARNESS_DIR = ROOT / "bench" / "jvm"
HARNESS_MAIN = "statusstore.bench.StatusStoreHarness"
# What Kafka's launch scripts give a Connect worker's JVM (bin/connect-distributed.sh, bin/kafka-run-class.sh).
CONNECT_JVM_OPTIONS = ["-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                       "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                       "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# Bounds: one command of the harness, and the harness's start and exit.
COMMAND_BOUND_S = 600.0
PROCESS_BOUND_S = 60.0


class Harness:
    """Connect's KafkaStatusBackingStore in a JVM of its own (bench/jvm), asked one command at a time; stopped by
    its pid."""

    def __init__(self, line: KafkaLine, bootstrap_servers: str, workdir: Path) -> None:
        classes = compiled(line, "bench-harness", HARNESS_DIR, HARNESS_DIR / "src")
        name = f"harness-{uuid.uuid4().hex[:8]}"
        logging_config = workdir / f"{name}-log4j2.xml"
        logging_config.write_text(log4j2_config(workdir / f"{name}.log"), encoding="utf-8")
        self.errors_file = workdir / f"{name}.stderr"
        self._errors = open(self.errors_file, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            ["java", *CONNECT_JVM_OPTIONS, f"-Dlog4j2.configurationFile={logging_config}",
             "-cp", f"{line.classpath}:{classes}", HARNESS_MAIN, bootstrap_servers],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors, text=True)
        self._answers: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._answers.put(line)
        self._answers.put(None)

    def ask(self, command: str) -> dict[str, Any]:
        """Send one command; its answer (bounded by COMMAND_BOUND_S)."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        try:
            line = self._answers.get(timeout=COMMAND_BOUND_S)
        except queue.Empty:
            raise TimeoutError(f"the harness did not answer {command!r} within {COMMAND_BOUND_S} s") from None
        if line is None:
            errors = self.errors_file.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the harness exited on {command!r}:\n{errors}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        """Ask it to quit; SIGKILL when it outlasts the bound."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(PROCESS_BOUND_S)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(PROCESS_BOUND_S)
        self._errors.close()


class Samples:
    """Seconds (and CPU seconds) of one contender, round by round."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.cpu: list[float] = []

    async def add(self, run: Awaitable[float]) -> None:
        """One round of a Python contender (which notes its CPU seconds in ``self.cpu`` itself)."""
        self.seconds.append(await run)

    def add_answer(self, answer: dict[str, Any]) -> None:
        """One round of the harness: its seconds and CPU seconds."""
        self.seconds.append(answer["seconds"])
        self.cpu.append(answer["cpu_seconds"])

    def rate(self, n: int) -> float:
        """Records per second, from the median time."""
        return n / statistics.median(self.seconds)

    def each(self, n: int) -> str:
        return ", ".join(f"{n / s:,.0f}" for s in self.seconds)

    def cpu_per_record_us(self, n: int) -> str:
        return f"{statistics.median(self.cpu) / n * 1e6:.1f}" if self.cpu else "n/a"


async def process_cpu_of(run: Awaitable[float], cpu: list[float]) -> float:
    """Run a raw client's measurement, noting the process's CPU seconds for it."""
    before = time.process_time()
    seconds = await run
    cpu.append(time.process_time() - before)
    return seconds


async def write_path(kafka: KafkaCluster, harness: Harness, n: int, rounds: int
                     ) -> tuple[dict[str, Samples], dict[str, Samples], list[float], tuple[str, str]]:
    """(a): every contender once per round, on fresh topics; the samples until acknowledged and until visible,
    status-store's event loop CPU until visible, and one topic of each store written until visible."""
    items = statuses(n, version=None)
    bootstrap = kafka.bootstrap_servers

    def fresh() -> str:
        topic = f"write-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(topic, PARTITIONS, 1, {"cleanup.policy": "compact"})
        return topic

    acknowledged = {name: Samples() for name in ("raw produce loop", "KafkaStatusBackingStore", "status-store")}
    visible = {name: Samples() for name in ("raw pipeline", "KafkaStatusBackingStore", "status-store")}
    loop_cpu: list[float] = []
    written = ("", "")
    for _ in range(rounds):
        raw, java, store = acknowledged.values()
        await raw.add(process_cpu_of(raw_write(bootstrap, fresh(), items), raw.cpu))
        java.add_answer(harness.ask(f"write {fresh()} {n} ack"))
        await store.add(store_write(bootstrap, fresh(), items, process_cpu=store.cpu))
        raw, java, store = visible.values()
        await raw.add(process_cpu_of(raw_pipeline(bootstrap, fresh(), items, PARTITIONS), raw.cpu))
        written = (fresh(), fresh())
        java.add_answer(harness.ask(f"write {written[0]} {n} visible"))
        await store.add(store_write(bootstrap, written[1], items, visible=True, loop_cpu=loop_cpu,
                                    process_cpu=store.cpu))
    return acknowledged, visible, loop_cpu, written


async def cold_start(kafka: KafkaCluster, harness: Harness, workdir: Path, m: int, rounds: int
                     ) -> dict[str, Samples]:
    """(b): a topic of ``m`` statuses, read to its end by each contender once per round."""
    bootstrap = kafka.bootstrap_servers
    topic = f"read-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS, 1, {"cleanup.policy": "compact"})
    await raw_write(bootstrap, topic, statuses(m, version=None))
    # A worker starts its offset store (another KafkaBasedLog) before its status store: that much is warm then.
    offsets = f"offsets-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(offsets, PARTITIONS, 1, {"cleanup.policy": "compact"})
    started = {name: Samples() for name in ("raw consumer", "KafkaStatusBackingStore, fresh JVM",
                                            "KafkaStatusBackingStore, warm JVM", "status-store")}
    raw, fresh_jvm, warm_jvm, store = started.values()
    for _ in range(rounds):
        await raw.add(process_cpu_of(raw_read(bootstrap, topic, m, PARTITIONS), raw.cpu))
        fresh = Harness(kafka.line, bootstrap, workdir)
        try:
            fresh.ask(f"read {offsets} 0")
            fresh_jvm.add_answer(fresh.ask(f"read {topic} {m}"))
        finally:
            fresh.stop()
        warm_jvm.add_answer(harness.ask(f"read {topic} {m}"))
        await store.add(store_read(bootstrap, topic, m, process_cpu=store.cpu))
    return started


@dataclass
class FleetRead:
    """(c): each store's one read of the fleet's topic."""

    statuses: int
    java: dict[str, Any]
    python: dict[str, Any]


async def fleet_read(kafka: KafkaCluster, workdir: Path, connectors: int, tasks: int) -> FleetRead:
    """(c): the fleet written once, then read by each store in a process of its own."""
    bootstrap = kafka.bootstrap_servers
    topic = f"fleet-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS, 1, {"cleanup.policy": "compact"})
    count = write_fleet(bootstrap, topic, connectors, tasks)
    offsets = f"offsets-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(offsets, PARTITIONS, 1, {"cleanup.policy": "compact"})
    fresh = Harness(kafka.line, bootstrap, workdir)
    try:
        fresh.ask(f"read {offsets} 0")
        java = fresh.ask(f"fleet {topic} {count}")
    finally:
        fresh.stop()
    child = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "bench.connect_store", "--store-fleet",
                                                     bootstrap, topic, str(count)],
                                    capture_output=True, text=True, timeout=COMMAND_BOUND_S)
    if child.returncode != 0:
        raise RuntimeError(f"the status-store reader failed:\n{child.stderr[-3000:]}")
    return FleetRead(count, java, json.loads(child.stdout.strip().splitlines()[-1]))


def resident_bytes() -> int:
    """This process's resident set (VmRSS), in bytes."""
    found = re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert found is not None
    return int(found.group(1)) * 1024


async def store_fleet(bootstrap: str, topic: str, expected: int) -> None:
    """(c)'s status-store side, in a process of its own: a ``StatusStore`` started on the topic; prints its figures as
    one line of JSON."""
    store = make_store(bootstrap, topic)
    gc.collect()
    before = resident_bytes()
    cpu = time.process_time()
    start = time.perf_counter()
    await store.start()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu
    statuses_read = sum(1 for _ in store.cache.fleet())
    gc.collect()
    after = resident_bytes()
    await store.stop()
    assert statuses_read == expected, (statuses_read, expected)
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "statuses": statuses_read,
                      "rss_growth_bytes": after - before, "rss_bytes": after}))


def fleet_report(read: FleetRead) -> None:
    """(c)'s table."""
    n = read.statuses
    java, python = read.java, read.python
    print(f"\n(c) a fleet's cold start and memory: {n:,} statuses (bench/fleet_scale.py's fleet), one read each, "
          "each store in a fresh process\n")
    print("| reader | start, read to the end (s) | CPU (s) | memory held | per status (bytes) | process RSS (MiB) |")
    print("|---|---:|---:|---|---:|---:|")
    print(f"| fleet: KafkaStatusBackingStore, fresh JVM | {java['seconds']:.2f} | {java['cpu_seconds']:.2f} | "
          f"heap after full collections: {java['heap_bytes'] / 2**20:,.0f} MiB | {java['heap_bytes'] / n:,.0f} | "
          f"{java['rss_bytes'] / 2**20:,.0f} |")
    print(f"| fleet: status-store StatusStore | {python['seconds']:.2f} | {python['cpu_seconds']:.2f} | RSS growth: "
          f"{python['rss_growth_bytes'] / 2**20:,.0f} MiB | {python['rss_growth_bytes'] / n:,.0f} | "
          f"{python['rss_bytes'] / 2**20:,.0f} |")
    print(f"\nstatus-store: cold start at {java['seconds'] / python['seconds']:.2f}x Connect's speed (target >= 1), "
          f"memory per status at {python['rss_growth_bytes'] / java['heap_bytes']:.2f}x Connect's heap per status "
          "(target <= 1)")


def same_records(kafka: KafkaCluster, topics: tuple[str, str]) -> bool:
    """Whether both stores left the same (key, value) records in their topics (order aside)."""
    first, second = (sorted(kafka.records(topic), key=lambda record: record[0]) for topic in topics)
    return first == second


async def profile_store(kafka: KafkaCluster, items: list[TaskStatus]) -> str:
    """The top of a cProfile of the event loop in one write until visible (cumulative and own time)."""
    topic = f"profile-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS, 1, {"cleanup.policy": "compact"})
    profiler = cProfile.Profile()
    profiler.enable()
    await store_write(kafka.bootstrap_servers, topic, items, visible=True)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    return out.getvalue()


def report(n: int, m: int, rounds: int, acknowledged: dict[str, Samples], visible: dict[str, Samples],
           loop_cpu: list[float], started: dict[str, Samples], same: bool) -> None:
    """Print the tables and the ratios."""
    print(f"(a) write path: {n:,} task statuses per pass, {PARTITIONS} partitions, one Apache Kafka "
          f"{kafka_line('kafka-4').version} broker; medians of {rounds} round(s)\n")
    print("| path | writer | records/s | each round | CPU per write (µs) | ratio to KafkaStatusBackingStore |")
    print("|---|---|---:|---|---:|---:|")
    for path, samples in (("until acknowledged", acknowledged), ("until visible", visible)):
        java = samples["KafkaStatusBackingStore"].rate(n)
        for name, sample in samples.items():
            print(f"| {path} | {name} | {sample.rate(n):,.0f} | {sample.each(n)} | {sample.cpu_per_record_us(n)} | "
                  f"{sample.rate(n) / java:.2f} |")
    store, java = visible["status-store"].rate(n), visible["KafkaStatusBackingStore"].rate(n)
    print(f"\nwrite until visible: status-store at {store / java:.2f} of KafkaStatusBackingStore (target >= 0.5), "
          f"{store / visible['raw pipeline'].rate(n):.2f} of the raw pipeline; until acknowledged: "
          f"{acknowledged['status-store'].rate(n) / acknowledged['KafkaStatusBackingStore'].rate(n):.2f} of "
          f"KafkaStatusBackingStore")
    print(f"status-store's event loop CPU per write until visible: {statistics.median(loop_cpu) / n * 1e6:.1f} µs")
    print(f"both stores wrote the same records: {'yes' if same else 'NO'}\n")
    print(f"(b) cold start: a topic of {m:,} statuses read to its end; medians of {rounds} round(s)\n")
    print("| reader | statuses/s | seconds | each round (s) | CPU (s) | ratio to KafkaStatusBackingStore, fresh JVM |")
    print("|---|---:|---:|---|---:|---:|")
    cold = started["KafkaStatusBackingStore, fresh JVM"].rate(m)
    for name, sample in started.items():
        each = ", ".join(f"{s:.2f}" for s in sample.seconds)
        print(f"| {name} | {sample.rate(m):,.0f} | {statistics.median(sample.seconds):.2f} | {each} | "
              f"{statistics.median(sample.cpu):.2f} | {sample.rate(m) / cold:.2f} |")
    warm = started["KafkaStatusBackingStore, warm JVM"].rate(m)
    print(f"\ncold start: status-store at {started['status-store'].rate(m) / cold:.2f} of KafkaStatusBackingStore's "
          f"start in a fresh JVM, {started['status-store'].rate(m) / warm:.2f} of its start in a warm JVM")


async def main() -> None:
    """Start the broker and the harness, run (a), (b) and (c), print the tables."""
    parser = BenchParser(__doc__)
    parser.add_size("--records", type=int, full=100_000, quick=2000, help="task statuses written per pass")
    parser.add_size("--statuses", type=int, full=100_000, quick=2000, help="statuses in the topic of the cold start")
    parser.add_size("--rounds", type=int, full=5, quick=1, help="rounds, each running every contender once")
    parser.add_size("--fleet-connectors", type=int, full=100_000, quick=200, help="(c): connectors of the fleet")
    parser.add_size("--fleet-tasks", type=int, full=10, quick=3, help="(c): tasks per connector")
    parser.add_argument("--profile", action="store_true", help="a cProfile of status-store's event loop too")
    parser.add_argument("--store-fleet", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "STATUSES"), help=argparse.SUPPRESS)
    args = parser.parse()
    if args.store_fleet is not None:  # (c)'s status-store side, in a process of its own
        bootstrap, topic, expected = args.store_fleet
        await store_fleet(bootstrap, topic, int(expected))
        return
    tune_collector()  # as the sidecar does once its store has started
    line = kafka_line("kafka-4")
    print(f"load average at the start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-connect-store-") as scratch:
        workdir = Path(scratch)
        # Quick runs check that it all runs: the broker starts sooner with the fast compiler alone.
        kafka = KafkaCluster(line, workdir / "kafka", full_jit=not args.quick)
        harness: Harness | None = None
        try:
            kafka.start()
            harness = Harness(line, kafka.bootstrap_servers, workdir)
            acknowledged, visible, loop_cpu, written = await write_path(kafka, harness, args.records, args.rounds)
            same = same_records(kafka, written)
            started = await cold_start(kafka, harness, workdir, args.statuses, args.rounds)
            fleet = await fleet_read(kafka, workdir, args.fleet_connectors, args.fleet_tasks)
            profile = (await profile_store(kafka, statuses(args.records, version=None))) if args.profile else ""
        finally:
            if harness is not None:
                harness.stop()
            kafka.close()
    report(args.records, args.statuses, args.rounds, acknowledged, visible, loop_cpu, started, same)
    fleet_report(fleet)
    print(f"\nload average at the end: {load_average()}")
    if profile:
        print(f"\nstatus-store's event loop, one write until visible of {args.records:,} statuses:\n\n{profile}")


if __name__ == "__main__":
    asyncio.run(main())
