"""Benchmark the retry engine (issue 3), every policy in the same run.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/retry.py [--keys 1000] [--fault-seconds 10] [--pending 100000]

(a) Broker pressure: KEYS keys, each updated once a second, while every Produce request fails
    with a retriable error (NOT_ENOUGH_REPLICAS, injected on librdkafka's mock cluster) for
    FAULT seconds. Counted: Produce requests that reached the broker (mock request tracking) and
    attempts per key, until every key's latest value is durable. Policies, all on the same Kafka
    log: immediate infinite resend per update (Connect today), a static 100 ms backoff per update,
    KIP-1278's defaults per update (300 ms doubling to 10 s, jitter 0.25, 5 retries: the KIP's own
    proposal, no coalescing), and status-store's retry queue with the same defaults plus per-key
    coalescing.
(b) Recovery: from the fault cleared to every key's latest value durable, against the latest
    retry the queue had scheduled when the fault cleared.
(c) Scheduler scale: PENDING updates waiting for a retry in one RetryQueue vs the same number of
    tenacity AsyncRetrying loops (one sleeping task each); peak memory (tracemalloc) and CPU time,
    each in a fresh process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaError

from status_store.backoff import AdditiveJitter
from status_store.config import build_config
from status_store.errors import WriteFailedError, classify
from status_store.kafka_log import Delivery, DoneCallback, KafkaLog
from status_store.librdkafka import MockCluster
from status_store.model import ConnectorStatus, State
from status_store.retry_queue import RetryPolicy, RetryQueue, StatusUpdate
from status_store.store import StatusStore

NOT_ENOUGH_REPLICAS = 19
TOPIC = "status"


class IndependentRetrier:
    """Retries each update on its own, as Connect and the KIP's PR do: no coalescing, no ordering."""

    def __init__(self, log: KafkaLog, delay: Callable[[int], float | None]) -> None:
        self.log, self.delay = log, delay
        self.attempts = 0
        self.latest: dict[str, int] = {}
        self.durable: dict[str, int] = {}
        self.dropped = 0
        self.closed = False

    def submit(self, key: str, version: int, value: bytes) -> None:
        self.latest[key] = version
        self._send(key, version, value, 0)

    def _send(self, key: str, version: int, value: bytes, retries: int) -> None:
        if self.closed:
            return
        self.attempts += 1

        def done(delivery: Delivery | None, error: WriteFailedError | None) -> None:
            if error is None:
                self.durable[key] = max(self.durable.get(key, -1), version)
                return
            wait = self.delay(retries)
            if wait is None:
                self.dropped += 1
            elif wait == 0:
                self._send(key, version, value, retries + 1)
            else:
                asyncio.get_running_loop().call_later(wait, self._send, key, version, value, retries + 1)

        self.log.send(key.encode(), value, done)

    def all_durable(self) -> bool:
        return all(self.durable.get(k, -1) >= v for k, v in self.latest.items())


def value(key: int, version: int) -> ConnectorStatus:
    return ConnectorStatus(f"connector-{key}", State.FAILED if version % 2 else State.RUNNING, "w1:8083", 1)


async def pressure(policy: str, keys: int, fault: float) -> dict[str, float]:
    cluster = MockCluster(brokers=1)
    cluster.create_topic(TOPIC, 5, 1)
    config = build_config({"bootstrap.servers": cluster.bootstrap_servers, "status.storage.topic": TOPIC,
                           "sidecar.shutdown.timeout.ms": "1000"})
    loop = asyncio.get_running_loop()
    store: StatusStore | None = None
    log: KafkaLog | None = None
    retrier: IndependentRetrier | None = None
    latest: dict[int, StatusUpdate] = {}
    if policy == "status-store":
        store = StatusStore(config, cluster.bootstrap_servers)
        await store.start()
    else:
        log = KafkaLog(TOPIC, cluster.bootstrap_servers, {}, lambda records: None)
        await log.start(30)
        kip = AdditiveJitter(300, 10000, 2.0, 0.25)
        delays: dict[str, Callable[[int], float | None]] = {
            "immediate (Connect today)": lambda n: 0.0,
            "static 100 ms": lambda n: 0.1,
            "KIP-1278 defaults, per update": lambda n: kip.delay(n) if n < 5 else None,
        }
        retrier = IndependentRetrier(log, delays[policy])
    cluster.start_tracking()
    cluster.push_request_errors(MockCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 2_000_000)
    started = loop.time()
    rounds = int(fault)
    for round_ in range(rounds):
        for key in range(keys):
            status = value(key, round_)
            if store is not None:
                latest[key] = store.put(status)
            else:
                assert retrier is not None
                from status_store.codec import encode_status
                encoded = encode_status(status.state, status.worker_id, status.generation, None)
                assert encoded is not None
                retrier.submit(f"status-connector-connector-{key}", round_, encoded)
            # Spread each round's updates over its second.
            if key % 50 == 49:
                await asyncio.sleep(max(0.0, started + round_ + (key + 1) / keys - loop.time()))
    await asyncio.sleep(max(0.0, started + fault - loop.time()))
    next_due = 0.0
    if store is not None:
        waiting = store.queue.waiting_retries()
        next_due = max((u.due or 0.0) for u in waiting) - loop.time() if waiting else 0.0
    cluster.clear_request_errors(MockCluster.PRODUCE)
    cleared = loop.time()
    deadline = cleared + 60
    while loop.time() < deadline:
        if store is not None and all(u.done() for u in latest.values()):
            break
        if retrier is not None and retrier.all_durable():
            break
        await asyncio.sleep(0.01)
    recovered = loop.time() - cleared
    requests = len(cluster.requests(MockCluster.PRODUCE))
    if store is not None:
        failed = sum(1 for u in latest.values() if u.outcome is not None and not u.outcome.ok)
        attempts = store.queue.attempts_total
        await store.stop()
    else:
        assert retrier is not None
        assert log is not None
        failed = sum(1 for k, v in retrier.latest.items() if retrier.durable.get(k, -1) < v)
        attempts = retrier.attempts
        retrier.closed = True
        await log.stop(1.0)
    cluster.close()
    return {"requests": requests, "attempts_per_key": attempts / keys, "recovery_s": recovered,
            "next_due_s": next_due, "latest_lost": failed}


# ----------------------------------------------------------------------------- (c) scale


def scale_ours(pending: int) -> None:
    error = WriteFailedError("k", KafkaError.NOT_ENOUGH_REPLICAS, "NOT_ENOUGH_REPLICAS", "injected")
    assert classify(error.code).value == "retriable"

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def send(key: bytes, value: bytes | None, done: DoneCallback) -> None:
            loop.call_soon(done, None, error)  # every attempt fails: each update waits for a retry

        queue = RetryQueue(send, RetryPolicy(AdditiveJitter(60000, 60000, 2.0, 0.25), 5))
        tracemalloc.start()
        cpu = time.process_time()
        for i in range(pending):
            queue.submit(StatusUpdate(f"status-task-c-{i}", b"x" * 80, "task"))
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
    from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_fixed

    async def one(value: bytes, started: list[int]) -> None:
        async for attempt in AsyncRetrying(wait=wait_fixed(60), stop=stop_after_attempt(6),
                                           retry=retry_if_exception_type(RuntimeError)):
            with attempt:
                started[0] += 1
                raise RuntimeError("injected")

    async def main() -> None:
        started = [0]
        tracemalloc.start()
        cpu = time.process_time()
        tasks = [asyncio.create_task(one(b"x" * 80, started)) for _ in range(pending)]
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


def run_scale(which: str, pending: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--scale-child", which, "--pending", str(pending)],
                         capture_output=True, text=True, timeout=600, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--fault-seconds", type=float, default=10.0)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--scale-child", choices=["ours", "tenacity"])
    args = parser.parse_args()
    if args.scale_child:
        (scale_ours if args.scale_child == "ours" else scale_tenacity)(args.pending)
    else:
        asyncio.run(main(args))


async def main(args: argparse.Namespace) -> None:
    random.seed(1)
    policies = ["immediate (Connect today)", "static 100 ms", "KIP-1278 defaults, per update", "status-store"]
    results = {p: await pressure(p, args.keys, args.fault_seconds) for p in policies}
    ours = results["status-store"]
    print(f"(a) broker pressure: {args.keys} keys updated every second, {args.fault_seconds:g} s of "
          "NOT_ENOUGH_REPLICAS on every Produce request\n")
    print("| policy | Produce requests | attempts per key | requests vs ours | recovery (s) | latest values lost |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['requests']:,.0f} | {r['attempts_per_key']:.1f} | "
              f"{r['requests'] / max(ours['requests'], 1):.1f}x | {r['recovery_s']:.2f} | {r['latest_lost']:.0f} |")
    print(f"\n(b) recovery of status-store: {ours['recovery_s']:.2f} s after the fault cleared; the latest "
          f"retry it had scheduled was {ours['next_due_s']:.2f} s away (target: within that + 1 s)\n")
    scale = {name: run_scale(name, args.pending) for name in ("ours", "tenacity")}
    print(f"(c) {args.pending:,} pending retries\n")
    print("| scheduler | peak traced memory (MiB) | CPU to schedule (s) | CPU idle for 2 s (s) |")
    print("|---|---:|---:|---:|")
    for name, label in (("ours", "status-store RetryQueue"), ("tenacity", "tenacity AsyncRetrying, a task each")):
        r = scale[name]
        print(f"| {label} | {r['peak_mib']:.1f} | {r['setup_cpu_s']:.2f} | {r['idle_cpu_s']:.3f} |")
    print(f"\nratios tenacity/ours: memory {scale['tenacity']['peak_mib'] / scale['ours']['peak_mib']:.1f}x, "
          f"CPU {scale['tenacity']['setup_cpu_s'] / scale['ours']['setup_cpu_s']:.1f}x")


if __name__ == "__main__":
    cli()
