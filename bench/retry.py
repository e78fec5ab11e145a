"""Benchmark the retry engine against per-update retry policies in Connect's status store, every writer in the same
run (the real Connect worker's own immediate resend is measured by bench/connect_outage.py, on Apache Kafka).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python -m bench.retry                 # every scenario, full size (about 10 minutes here)
    .venv/bin/python -m bench.retry --quick         # small keys and seconds: a check that it all runs
    .venv/bin/python -m bench.retry --store '' --store 'status.storage.retry.max.retries=10'

The writers: Kafka Connect's status writes on a plain librdkafka producer with Connect's settings, each update
resent on its own after a backoff (``writers.ConnectWriter``: a static 100 ms backoff; KIP-1278's backoff per
update, what the KIP as proposed would make of Connect's store), and status-store with
each set of settings in ``STORE_VARIANTS`` (or ``--store``). Every writer gets a fresh librdkafka mock
cluster in this process (``mock_faults.BenchCluster``), one after the other, and the same traffic: KEYS
connector statuses, each updated once a second, spread over the second. Produce requests are
librdkafka's, one per partition batch, for every writer alike.

(a) Broker pressure: every Produce request fails with NOT_ENOUGH_REPLICAS for FAULT seconds, one
    broker, Connect's 5 partitions. Counted: Produce requests during the fault (mock request
    tracking), records handed to the producer per key, keys whose last record in the topic is older
    than their latest value (a stale retry landed last), latest values given up, status-store's log lines.
(b) Recovery: seconds from the fault cleared until every key's latest value is durable; the median of
    RUNS runs of (a).
(c) Partial outage: three brokers, partition p led by broker p % 3 + 1; broker 2 (partitions 1 and 4)
    is down for PARTIAL seconds and a random fraction of one. Keys on the healthy partitions: p99
    submit-to-durable latency of the updates submitted during the outage, against the same writer in a
    run without it. Keys on the down broker's partitions (Java's murmur2 partition of the key): seconds
    from its return to durable.
    Medians of RUNS runs: when the broker returns, a client reconnects at its next reconnect backoff,
    so a single run's recovery is a draw between zero and that backoff.
(d) The fleet of sidecars is bench/fleet.py.
(e) Memory: PENDING distinct keys written while every broker is down, in a fresh process per store
    variant: bytes per pending update as RSS growth (one process) and as traced Python memory
    (tracemalloc, another process), and the log lines the outage wrote.
(f) Scheduler scale: SCALE updates waiting for a retry in one RetryQueue against as many tenacity
    AsyncRetrying loops (one sleeping task each); peak traced memory and CPU, each in a fresh process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import math
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, murmur2

from bench import BenchParser, write_json
from bench.mock_faults import BenchCluster
from bench.writers import (
    ConnectPolicy,
    ConnectWriter,
    Ledger,
    StoreWriter,
    Writer,
    key_for,
    status_for,
    store_label,
    wait_until,
)
from harness.faulty_cluster import FaultyCluster
from status_store.config import build_config
from status_store.errors import WriteFailedError, classify
from status_store.retry.backoff import AdditiveJitter
from status_store.retry.delivery import DoneCallback
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import RetryPolicy, StatusUpdate, UpdateKind
from status_store.store import StatusStore

TOPIC = "status"
PARTITIONS = 5  # Connect's default status.storage.partitions
# The partial outage: partition p is led by broker p % 3 + 1, and this one goes down.
PARTIAL_BROKERS = 3
DOWN_BROKER = 2
# Updates go out in this many slices a second.
SLICES_PER_SECOND = 100
# Bounds on every wait: for recovery, then for the last retries to settle.
RECOVERY_BOUND_S = 60.0
SETTLE_BOUND_S = 30.0

_KIP_1278 = AdditiveJitter(300, 10000, 2.0, 0.25)
_KIP_1278_RETRIES = 5

BASELINES: list[ConnectPolicy] = [
    ConnectPolicy("static 100 ms", lambda retries: 0.1),
    ConnectPolicy("KIP-1278 per update",
                  lambda retries: _KIP_1278.delay(retries) if retries < _KIP_1278_RETRIES else None),
]
STATIC = BASELINES[0].name
# The ratios each status-store variant is held to: (baseline, at least this many times fewer requests).
REQUEST_TARGETS: list[tuple[str, float]] = [(BASELINES[0].name, 10), (BASELINES[1].name, 20)]

# status-store variants, each a set of settings over the harness's own (bootstrap servers, topic).
# One entry per engine to compare, e.g. {"status.storage.retry.mode": "per-update"}.
STORE_VARIANTS: list[dict[str, str]] = [{}, {"status.storage.retry.mode": "per-update"}]

Contender = ConnectPolicy | dict[str, str]


def contender_name(contender: Contender) -> str:
    """A writer's name in the tables."""
    return contender.name if isinstance(contender, ConnectPolicy) else store_label(contender)


def make_writer(contender: Contender, bootstrap_servers: str, ledger: Ledger) -> Writer:
    """A Connect baseline or a status-store variant, on the given cluster."""
    if isinstance(contender, ConnectPolicy):
        return ConnectWriter(contender, bootstrap_servers, TOPIC, ledger)
    return StoreWriter(contender, bootstrap_servers, TOPIC, ledger)


class LogCounter(logging.Handler):
    """Counts status-store's log records at WARNING and above (and keeps them off the terminal)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def count_store_logs() -> LogCounter:
    """Route status-store's logs to a counter only."""
    counter = LogCounter()
    logger = logging.getLogger("status_store")
    logger.handlers[:] = [counter]
    logger.propagate = False
    return counter


async def drive(writer: Writer, keys: int, start: float, rounds: int) -> None:
    """Update every key once a second for ``rounds`` seconds from ``start``, spread over each second."""
    loop = asyncio.get_running_loop()
    offset = time.monotonic() - loop.time()
    per_slice = max(1, keys // SLICES_PER_SECOND)
    for version in range(rounds):
        for key_index in range(keys):
            writer.submit(key_index, version)
            if (key_index + 1) % per_slice == 0:
                due = start + version + (key_index + 1) / keys
                await asyncio.sleep(max(0.0, due - offset - loop.time()))


# ----------------------------------------------------------------------------- (a), (b) pressure and recovery


@dataclass
class PressureRun:
    """One writer through one run of scenario (a)."""

    requests: int
    attempts_per_key: float
    recovery_s: float | None
    stale: int
    lost: int
    log_lines: int


async def pressure(contender: Contender, keys: int, fault_s: int, logs: LogCounter) -> PressureRun:
    """Scenario (a): every Produce request fails for ``fault_s`` seconds while every key is updated each second."""
    cluster = BenchCluster()
    cluster.create_topic(TOPIC, PARTITIONS, 1)
    ledger = Ledger()
    writer = make_writer(contender, cluster.bootstrap_servers, ledger)
    try:
        await writer.start()
        logs.count = 0
        began = cluster.fail_produce(KafkaError.NOT_ENOUGH_REPLICAS)
        await drive(writer, keys, began, fault_s)
        await asyncio.sleep(max(0.0, began + fault_s - time.monotonic()))
        cleared = cluster.heal_produce()
        await wait_until(ledger.all_durable, RECOVERY_BOUND_S)
        await writer.settle(SETTLE_BOUND_S)
        return PressureRun(cluster.produce_requests(began, cleared), writer.attempts / keys,
                           ledger.durable_after(cleared, ledger.latest), ledger.stale(), ledger.latest_lost(),
                           logs.count)
    finally:
        await writer.stop()
        cluster.close()


@dataclass
class PressureSummary:
    """A writer's runs of scenario (a), summed up."""

    name: str
    runs: list[PressureRun] = field(default_factory=list)

    @property
    def requests(self) -> float:
        """Median Produce requests during the fault."""
        return statistics.median(r.requests for r in self.runs)

    @property
    def recovery(self) -> float | None:
        """Median recovery."""
        return median_seconds([r.recovery_s for r in self.runs])


def median_seconds(times: list[float | None]) -> float | None:
    """The median duration; None when some run never got there within its bound."""
    return None if any(t is None for t in times) else statistics.median(t for t in times if t is not None)


def seconds(value: float | None) -> str:
    """A duration for the tables ("never" when there is none)."""
    return "never" if value is None else f"{value:.2f}"


def report_pressure(summaries: list[PressureSummary], keys: int, fault_s: int) -> list[dict[str, Any]]:
    """Print scenario (a) and (b)'s tables; returns the first one's rows by column name."""
    runs = len(summaries[0].runs)
    print(f"(a) broker pressure and (b) recovery: {keys:,} keys updated every second, {fault_s} s of "
          f"NOT_ENOUGH_REPLICAS on every Produce request; medians of {runs} run(s)\n")
    print("| writer | Produce requests during the fault | records sent per key | recovery (s) | recovery, each run (s) "
          "| keys left stale | latest values given up | log lines (WARNING+) |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    found = []
    for s in summaries:
        row = {"writer": s.name, "Produce requests during the fault": s.requests,
               "records sent per key": statistics.median(r.attempts_per_key for r in s.runs),
               "recovery (s)": s.recovery, "recovery, each run (s)": [r.recovery_s for r in s.runs],
               "keys left stale": max(r.stale for r in s.runs),
               "latest values given up": max(r.lost for r in s.runs),
               "log lines (WARNING+)": statistics.median(r.log_lines for r in s.runs)}
        found.append(row)
        each = ", ".join(seconds(r.recovery_s) for r in s.runs)
        print(f"| {s.name} | {s.requests:,.0f} | {row['records sent per key']:,.1f} | {seconds(s.recovery)} | {each} "
              f"| {row['keys left stale']} | {row['latest values given up']} | {row['log lines (WARNING+)']:,.0f} |")
    by_name = {s.name: s for s in summaries}
    print("\nProduce requests of each baseline per request of status-store (target in brackets), and recovery "
          "against the static backoff's in the same runs:\n")
    print("| status-store variant | " + " | ".join(f"vs {name} (≥ {target:g})" for name, target in REQUEST_TARGETS)
          + f" | recovery (s) | {STATIC}: recovery (s) |")
    print("|---|" + "---:|" * (len(REQUEST_TARGETS) + 2))
    for s in summaries:
        if s.name in {b.name for b in BASELINES}:
            continue
        ratios = " | ".join(f"{by_name[name].requests / max(s.requests, 1):,.1f}x" for name, _ in REQUEST_TARGETS)
        print(f"| {s.name} | {ratios} | {seconds(s.recovery)} | {seconds(by_name[STATIC].recovery)} |")
    print()
    return found


# ----------------------------------------------------------------------------- (c) partial outage


def leader_of(partition: int) -> int:
    """The broker that leads ``partition`` in the partial-outage cluster."""
    return partition % PARTIAL_BROKERS + 1


@dataclass
class PartialRun:
    """One writer through one run of scenario (c)."""

    healthy_p99_ms: float
    held_recovery_s: float | None


async def partial(contender: Contender, keys: int, outage_s: int, with_outage: bool) -> PartialRun:
    """Scenario (c): one broker of three down for ``outage_s`` seconds and a random part of one more (or not),
    every key updated each second from one second before the outage for ``outage_s`` more seconds.

    The random part keeps the broker's return out of step with the clients' reconnect timers: once their
    backoff reaches its cap, they try every cap seconds from the moment the broker went down, so a whole
    number of seconds down would make every run miss the return by a hair and wait a whole cap."""
    cluster = BenchCluster(PARTIAL_BROKERS)
    cluster.create_topic(TOPIC, PARTITIONS, PARTIAL_BROKERS)
    for partition in range(PARTITIONS):
        cluster.set_leader(TOPIC, partition, leader_of(partition))
    held = {key_for(k) for k in range(keys) if leader_of(murmur2(key_for(k).encode(), PARTITIONS)) == DOWN_BROKER}
    healthy = {key_for(k) for k in range(keys)} - held
    ledger = Ledger()
    writer = make_writer(contender, cluster.bootstrap_servers, ledger)
    try:
        await writer.start()
        start = time.monotonic()
        down_at, updates_end = start + 1, start + 1 + outage_s
        up_at = updates_end + random.random()

        async def outage() -> None:
            await asyncio.sleep(max(0.0, down_at - time.monotonic()))
            if with_outage:
                cluster.broker_down(DOWN_BROKER)
            await asyncio.sleep(max(0.0, up_at - time.monotonic()))
            if with_outage:
                cluster.broker_up(DOWN_BROKER)

        await asyncio.gather(drive(writer, keys, start, 1 + outage_s), outage())
        await wait_until(ledger.all_durable, RECOVERY_BOUND_S)
        latencies = ledger.submit_to_durable(healthy, down_at, updates_end)
        return PartialRun(percentile(latencies, 99) * 1000, ledger.durable_after(up_at, held))
    finally:
        await writer.stop()
        cluster.close()


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


@dataclass
class PartialSummary:
    """A writer's runs of scenario (c), each without and with the outage."""

    name: str
    calm: list[PartialRun] = field(default_factory=list)
    outage: list[PartialRun] = field(default_factory=list)


def report_partial(summaries: list[PartialSummary], keys: int, outage_s: int) -> list[dict[str, Any]]:
    """Print scenario (c)'s table; returns its rows by column name."""
    held = sorted({p for p in range(PARTITIONS) if leader_of(p) == DOWN_BROKER})
    runs = len(summaries[0].outage)
    print(f"(c) partial outage: {keys:,} keys updated every second, broker {DOWN_BROKER} of {PARTIAL_BROKERS} "
          f"(leader of partitions {', '.join(map(str, held))} of {PARTITIONS}) down for {outage_s} s; medians of "
          f"{runs} run(s)\n")
    print("| writer | healthy partitions: p99 submit-to-durable, no outage (ms) | with the outage (ms) | ratio "
          "| down broker's partitions: durable after its return (s) | each run (s) |")
    print("|---|---:|---:|---:|---:|---|")
    found = []
    for s in summaries:
        calm = statistics.median(r.healthy_p99_ms for r in s.calm)
        outage = statistics.median(r.healthy_p99_ms for r in s.outage)
        recovery = [r.held_recovery_s for r in s.outage]
        found.append({"writer": s.name, "healthy partitions: p99 submit-to-durable, no outage (ms)": calm,
                      "with the outage (ms)": outage, "ratio": outage / calm,
                      "down broker's partitions: durable after its return (s)": median_seconds(recovery),
                      "each run (s)": recovery})
        print(f"| {s.name} | {calm:.1f} | {outage:.1f} | {outage / calm:.2f}x | {seconds(median_seconds(recovery))} "
              f"| {', '.join(seconds(t) for t in recovery)} |")
    print()
    return found


# ----------------------------------------------------------------------------- (e) memory


def rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# status-store's attempts fail after this long with every broker down (status.storage.retry.delivery.timeout.ms):
# the memory scenario shortens it from 10 s so that a short run sees updates in flight, waiting for a retry,
# and (with the default retries, after about 17 s) out of retries.
MEMORY_DELIVERY_TIMEOUT_MS = 1000


async def memory_child(settings: dict[str, str], pending: int, seconds: float, traced: bool) -> dict[str, float]:
    """Scenario (e), in a fresh process: ``pending`` distinct keys written with every broker down, then
    ``seconds`` of the outage."""
    logs = count_store_logs()
    cluster = FaultyCluster()
    cluster.create_topic(TOPIC, PARTITIONS, 1)
    config = build_config({"bootstrap.servers": cluster.bootstrap_servers, "status.storage.topic": TOPIC,
                           "status.storage.retry.delivery.timeout.ms": str(MEMORY_DELIVERY_TIMEOUT_MS), **settings})
    store = StatusStore(config, cluster.bootstrap_servers)
    await store.start()
    statuses = [status_for(i, 0) for i in range(pending)]
    gc.collect()
    if traced:
        tracemalloc.start()
    base = rss_bytes()
    logs.count = 0
    cluster.broker_down()
    for i, status in enumerate(statuses):
        store.put(status)
        if i % 1000 == 999:
            await asyncio.sleep(0)  # as writes arrive from the HTTP API: the loop runs between them
    peak = rss_bytes()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        peak = max(peak, rss_bytes())
    end = rss_bytes()
    traced_now, traced_peak = tracemalloc.get_traced_memory() if traced else (0, 0)
    return {"rss_peak": peak - base, "rss_end": end - base, "traced_end": traced_now, "traced_peak": traced_peak,
            "unsettled": store.queue.unsettled, "parked": store.queue.parked_count, "log_lines": logs.count}


async def memory_child_main(settings: dict[str, str], pending: int, seconds: float, traced: bool) -> None:
    """Print scenario (e)'s figures as JSON and leave at once: stopping the store would only fail every update,
    and leaving the loop would wait for its threads, still asking brokers that are down."""
    result = await memory_child(settings, pending, seconds, traced)
    print(json.dumps(result), flush=True)
    os._exit(0)


def fresh_process(*arguments: str) -> subprocess.Popen[str]:
    """This benchmark in a fresh process, run with ``arguments``; its output is piped."""
    return subprocess.Popen([sys.executable, "-m", "bench.retry", *arguments], stdout=subprocess.PIPE, text=True)


def run_memory(settings: dict[str, str], pending: int, seconds: float, traced: bool) -> subprocess.Popen[str]:
    """Start scenario (e) for one store variant in a fresh process."""
    return fresh_process("--memory-child", json.dumps(settings), "--pending", str(pending), "--memory-seconds",
                         str(seconds), *(["--traced"] if traced else []))


def child_result(child: subprocess.Popen[str]) -> dict[str, float]:
    """The JSON line a child printed last."""
    out, _ = child.communicate(timeout=600)
    if child.returncode:
        raise RuntimeError(f"{child.args!r} exited with {child.returncode}")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def report_memory(variants: list[dict[str, str]], pending: int, seconds: float) -> list[dict[str, Any]]:
    """Run and print scenario (e): the RSS and tracemalloc processes of every variant run side by side (memory,
    unlike time, does not suffer from sharing the cores). Returns the table's rows by column name."""
    children = [(run_memory(v, pending, seconds, False), run_memory(v, pending, seconds, True)) for v in variants]
    print(f"(e) memory: {pending:,} distinct keys written with every broker down, then {seconds:g} s of the outage; "
          f"attempts time out after {MEMORY_DELIVERY_TIMEOUT_MS} ms; a fresh process each\n")
    print("| status-store variant | pending / parked at the end | RSS growth, peak / end (MiB) "
          "| bytes per update (RSS peak) | traced Python memory, peak / end (MiB) | bytes per update (traced peak) "
          "| log lines (WARNING+) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    mib = 2**20
    found = []
    for settings, (plain, traced) in zip(variants, children, strict=True):
        r, t = child_result(plain), child_result(traced)
        found.append({"status-store variant": store_label(settings), "pending": r["unsettled"], "parked": r["parked"],
                      "RSS growth, peak (MiB)": r["rss_peak"] / mib, "RSS growth, end (MiB)": r["rss_end"] / mib,
                      "bytes per update (RSS peak)": r["rss_peak"] / pending,
                      "traced Python memory, peak (MiB)": t["traced_peak"] / mib,
                      "traced Python memory, end (MiB)": t["traced_end"] / mib,
                      "bytes per update (traced peak)": t["traced_peak"] / pending,
                      "log lines (WARNING+)": r["log_lines"]})
        print(f"| {store_label(settings)} | {r['unsettled']:,.0f} / {r['parked']:,.0f} "
              f"| {r['rss_peak'] / mib:.1f} / {r['rss_end'] / mib:.1f} | {r['rss_peak'] / pending:,.0f} "
              f"| {t['traced_peak'] / mib:.1f} / {t['traced_end'] / mib:.1f} | {t['traced_peak'] / pending:,.0f} "
              f"| {r['log_lines']:,.0f} |")
    print()
    return found


# ----------------------------------------------------------------------------- (f) scheduler scale


def scale_ours(pending: int) -> None:
    """Scenario (f) for status-store's RetryQueue, in this (fresh) process."""
    error = WriteFailedError("k", KafkaError.NOT_ENOUGH_REPLICAS, "NOT_ENOUGH_REPLICAS", "injected")
    assert classify(error).value == "retriable"

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def send(key: bytes, value: bytes | None, done: DoneCallback) -> None:
            loop.call_soon(done, None, error)  # every attempt fails: each update waits for a retry

        queue = RetryQueue(send, RetryPolicy(AdditiveJitter(60000, 60000, 2.0, 0.25), 5))
        tracemalloc.start()
        cpu = time.process_time()
        for i in range(pending):
            queue.submit(StatusUpdate(f"status-task-c-{i}", b"x" * 80, UpdateKind.TASK))
        await asyncio.sleep(0)  # the failures run as callbacks on the next loop turns
        await asyncio.sleep(0)
        setup_cpu = time.process_time() - cpu
        _, peak = tracemalloc.get_traced_memory()
        cpu = time.process_time()
        await asyncio.sleep(2)
        idle_cpu = time.process_time() - cpu
        assert len(queue.waiting_retries()) == pending
        print(json.dumps({"peak_mib": peak / 2**20, "setup_cpu_s": setup_cpu, "idle_cpu_s": idle_cpu}))

    asyncio.run(main())


def scale_tenacity(pending: int) -> None:
    """Scenario (f) for tenacity, one sleeping AsyncRetrying loop per update, in this (fresh) process."""
    from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_fixed

    async def one(started: list[int]) -> None:
        async for attempt in AsyncRetrying(wait=wait_fixed(60), stop=stop_after_attempt(6),
                                           retry=retry_if_exception_type(RuntimeError)):
            with attempt:
                started[0] += 1
                raise RuntimeError("injected")

    async def main() -> None:
        started = [0]
        tracemalloc.start()
        cpu = time.process_time()
        tasks = [asyncio.create_task(one(started)) for _ in range(pending)]
        await asyncio.sleep(0)  # every task runs its first attempt and goes to sleep
        await asyncio.sleep(0)
        assert started[0] == pending
        setup_cpu = time.process_time() - cpu
        _, peak = tracemalloc.get_traced_memory()
        cpu = time.process_time()
        await asyncio.sleep(2)
        idle_cpu = time.process_time() - cpu
        for task in tasks:
            task.cancel()
        print(json.dumps({"peak_mib": peak / 2**20, "setup_cpu_s": setup_cpu, "idle_cpu_s": idle_cpu}))

    asyncio.run(main())


def report_scale(pending: int) -> list[dict[str, Any]]:
    """Run and print scenario (f), a fresh process each, one after the other; returns the table's rows by column
    name."""
    scale = {name: child_result(fresh_process("--scale-child", name, "--pending", str(pending)))
             for name in ("ours", "tenacity")}
    print(f"(f) scheduler scale: {pending:,} pending retries\n")
    print("| scheduler | peak traced memory (MiB) | CPU to schedule (s) | CPU idle for 2 s (s) |")
    print("|---|---:|---:|---:|")
    found = []
    for name, label in (("ours", "status-store RetryQueue"), ("tenacity", "tenacity AsyncRetrying, a task each")):
        r = scale[name]
        found.append({"scheduler": label, "peak traced memory (MiB)": r["peak_mib"],
                      "CPU to schedule (s)": r["setup_cpu_s"], "CPU idle for 2 s (s)": r["idle_cpu_s"]})
        print(f"| {label} | {r['peak_mib']:.1f} | {r['setup_cpu_s']:.2f} | {r['idle_cpu_s']:.3f} |")
    print(f"\nratios tenacity/ours: memory {scale['tenacity']['peak_mib'] / scale['ours']['peak_mib']:.1f}x, "
          f"CPU {scale['tenacity']['setup_cpu_s'] / scale['ours']['setup_cpu_s']:.1f}x\n")
    return found


# ----------------------------------------------------------------------------- command line


def parse_store(text: str) -> dict[str, str]:
    """``key=value,key=value`` (empty: the defaults)."""
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise argparse.ArgumentTypeError(f"expected key=value[,key=value...], got {text!r}")
    return {key.strip(): value.strip() for key, value in pairs}


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--quick`` filling in small sizes."""
    parser = BenchParser(__doc__)
    parser.add_size("--keys", type=int, full=1000, quick=100, help="keys in (a), (b), (c)")
    parser.add_size("--fault-seconds", type=int, full=10, quick=1, help="(a) fault length")
    parser.add_size("--runs", type=int, full=3, quick=1, help="runs of (a) and (c) for the medians")
    parser.add_size("--partial-seconds", type=int, full=10, quick=1, help="(c) outage length")
    parser.add_size("--pending", type=int, full=100_000, quick=5000, help="(e) pending updates")
    parser.add_size("--scale-pending", type=int, full=100_000, quick=2000, help="(f) pending retries")
    parser.add_size("--memory-seconds", type=float, full=20.0, quick=1.0, help="(e) outage after the writes")
    parser.add_argument("--scenarios", default="a,c,e,f", help="which to run, of a (with b), c, e, f")
    parser.add_argument("--store", action="append", type=parse_store, metavar="KEY=VALUE,...",
                        help="a status-store variant (repeatable; '' for the defaults); default: STORE_VARIANTS")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scale-child", choices=["ours", "tenacity"], help=argparse.SUPPRESS)
    return parser.parse(argv)


async def main(args: argparse.Namespace) -> None:
    """Run the chosen scenarios and print their tables."""
    random.seed(1)  # KIP-1278's jitter draws
    scenarios = set(args.scenarios.split(","))
    variants: list[dict[str, str]] = args.store if args.store is not None else STORE_VARIANTS
    contenders: list[Contender] = [*BASELINES, *variants]
    logs = count_store_logs()
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    found: dict[str, Any] = {"load average at the start": os.getloadavg()}
    if "a" in scenarios:
        summaries = [PressureSummary(contender_name(c)) for c in contenders]
        for _ in range(args.runs):
            for contender, summary in zip(contenders, summaries, strict=True):
                summary.runs.append(await pressure(contender, args.keys, args.fault_seconds, logs))
        found["pressure"] = report_pressure(summaries, args.keys, args.fault_seconds)
    if "c" in scenarios:
        # Quick: one baseline, since each writer takes two runs of a few seconds.
        quick_contenders: list[Contender] = [BASELINES[0], *variants]
        partial_contenders = quick_contenders if args.quick else contenders
        partials = [PartialSummary(contender_name(c)) for c in partial_contenders]
        for _ in range(args.runs):
            for contender, partial_summary in zip(partial_contenders, partials, strict=True):
                partial_summary.calm.append(await partial(contender, args.keys, args.partial_seconds,
                                                                 with_outage=False))
                partial_summary.outage.append(await partial(contender, args.keys, args.partial_seconds,
                                                                   with_outage=True))
        found["partial outage"] = report_partial(partials, args.keys, args.partial_seconds)
    if "e" in scenarios:
        found["memory"] = report_memory(variants, args.pending, args.memory_seconds)
    if "f" in scenarios:
        found["scheduler scale"] = report_scale(args.scale_pending)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, {**found, "load average at the end": os.getloadavg()})


def cli(argv: Sequence[str] | None = None) -> None:
    """Entry point: the benchmark, or one of its fresh-process children."""
    args = arguments(argv)
    if args.scale_child:
        (scale_ours if args.scale_child == "ours" else scale_tenacity)(args.pending)
    elif args.memory_child is not None:
        asyncio.run(memory_child_main(json.loads(args.memory_child), args.pending, args.memory_seconds, args.traced))
    else:
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
