"""Soak: minutes of status traffic through random faults, for each exhausted-action side by side.

    .venv/bin/python -m bench.soak [--minutes 5] [--seed 1] [--keys 2000] [--rate 500] [--quick]

One librdkafka mock cluster (3 brokers) in this process, one store per policy on its own topic
(20 partitions), all fed the same seeded stream of task statuses and hit by the same seeded random
faults: whole-cluster and single-broker outages of random length, RTT spikes, injected retriable and
fatal Produce errors, leader moves. When the traffic ends the faults are cleared, every store settles
(nothing pending, parked or waiting for its dead letter; bounded), and plain consumers read each topic:

- **lost**: keys whose latest submitted value is not the topic's last value, split by what became of
  that value: refused by Kafka with a fatal error (never retried or parked, by design), dead-lettered
  (its dead letter is in the dead-letter topic), failed (its failure was counted: drop, or a dead
  letter that could not be written either), or silent (no failure: a bug). Expected: no silent loss
  under any policy, and none but fatal refusals under park + spool.
- the counters of each store (``status_update_*_total``): they must add up,
  submitted = written + failed + superseded, where submitted counts parked updates sent again.

The spool's cost on the write path without faults is measured by bench/core.py (``store with spool``).
Faults are drawn from ``--seed``; the traffic interleaves with them on the event loop, so two runs with
one seed meet the same faults in the same order, though not at the very same updates.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from bench import BenchParser, write_json
from harness.faulty_cluster import FaultyCluster
from status_store.config import build_config
from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, TaskStatus, task_key
from status_store.errors import ErrorKind, classify
from status_store.kafka.reading import read_to_end
from status_store.metrics import StoreMetrics
from status_store.retry.updates import Result, StatusUpdate
from status_store.store import StatusStore

PARTITIONS = 20
BROKERS = 3
STATES = (State.RUNNING, State.RUNNING, State.RUNNING, State.PAUSED, State.FAILED, State.UNASSIGNED)
# Retries that give up within ~5 s (4 attempts of at most 1 s, backoff 0.2 -> 2 s), so that outages longer
# than that exercise park, drop and dead-letter; the probe of parked updates runs every 2 s.
RETRY = {"status.storage.retry.max.retries": "3", "status.storage.retry.delivery.timeout.ms": "1000",
         "status.storage.retry.initial.backoff.ms": "200", "status.storage.retry.max.backoff.ms": "2000"}
# NOT_LEADER_OR_FOLLOWER is librdkafka's NOT_LEADER_FOR_PARTITION (the same code, its old name).
RETRIABLE_ERRORS = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_ENOUGH_REPLICAS,
                    KafkaError.FENCED_LEADER_EPOCH)
# Fatal for a Produce request: the store neither retries nor parks an update Kafka refuses with it.
INVALID_RECORD = KafkaError.INVALID_RECORD
TICK_S = 0.05


@dataclass
class Run:
    """One store under one policy, and the latest update the caller submitted per key."""

    policy: str
    store: StatusStore
    metrics: StoreMetrics
    dead_letter_topic: str | None = None
    latest: dict[bytes, tuple[StatusUpdate, bytes]] = field(default_factory=dict)
    submitted: int = 0

    def put(self, status: TaskStatus, key: bytes, value: bytes) -> None:
        self.latest[key] = (self.store.put(status), value)
        self.submitted += 1

    def settled(self) -> bool:
        return (self.store.queue.unsettled == 0 and not self.store.queue.parked()
                and all(events.pending == 0 for events in self.store.event_logs))

    def counter(self, name: str) -> float:
        return sum(sample.value for family in self.metrics.registry.collect() for sample in family.samples
                   if sample.name == name)


@dataclass
class FaultLog:
    """What the fault injector did."""

    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    outage_seconds: float = 0.0
    longest_outage: float = 0.0

    def summary(self) -> str:
        parts = [f"{name}: {count}" for name, count in sorted(self.counts.items())]
        return (", ".join(parts) + f"; {self.outage_seconds:.0f} s of outages in all, the longest "
                f"{self.longest_outage:.1f} s")


def policies(spool_dir: Path, cluster: FaultyCluster) -> Iterator[tuple[str, dict[str, str], str | None]]:
    yield "drop", {"status.storage.retry.exhausted.action": "drop"}, None
    yield "park + spool", {"status.storage.retry.exhausted.action": "park",
                           "status.storage.spool.path": str(spool_dir / "park.db")}, None
    dead = f"soak-dead-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(dead, PARTITIONS, 1)
    yield "dead-letter", {"status.storage.retry.exhausted.action": "dead-letter",
                          "status.storage.retry.dead.letter.topic": dead}, dead


async def start_runs(cluster: FaultyCluster, spool_dir: Path) -> list[Run]:
    runs = []
    for name, settings, dead in policies(spool_dir, cluster):
        topic = f"soak-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, PARTITIONS, 1)
        properties = {"bootstrap.servers": cluster.bootstrap_servers, "status.storage.topic": topic,
                      "status.storage.partitions": str(PARTITIONS), "status.storage.replication.factor": "1",
                      "sidecar.startup.timeout.ms": "60000", "sidecar.shutdown.timeout.ms": "5000",
                      **RETRY, **settings}
        store = StatusStore(build_config(properties), cluster.bootstrap_servers)
        metrics = StoreMetrics.watching(store, CollectorRegistry())
        await store.start()
        runs.append(Run(name, store, metrics, dead))
    return runs


async def traffic(runs: list[Run], keys: int, rate: float, seconds: float, rng: random.Random) -> None:
    """``rate`` updates per second to random keys, the same update to every store."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    next_tick = loop.time()
    owed = 0.0
    number = 0
    while loop.time() < end:
        owed += rate * TICK_S
        while owed >= 1:
            owed -= 1
            number += 1
            k = rng.randrange(keys)
            status = TaskStatus(TaskId(f"connector-{k // 8}", k % 8), rng.choice(STATES), f"worker-{k % 5}:8083",
                                1, f"update {number}")
            key = task_key(status.id).encode()
            value = encode_status(status.state, status.worker_id, status.generation, status.trace)
            assert value is not None  # no DESTROYED among STATES: never a tombstone
            for run in runs:
                run.put(status, key, value)
        next_tick += TICK_S
        await asyncio.sleep(max(0.0, next_tick - loop.time()))


async def faults(cluster: FaultyCluster, topics: list[str], seconds: float, rng: random.Random, log: FaultLog) -> None:
    """Random faults, one at a time, with calm gaps between them; everything restored at the end."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def hold(length: float) -> float:
        length = max(0.0, min(length, end - loop.time()))
        await asyncio.sleep(length)
        return length

    try:
        while loop.time() < end:
            await hold(rng.uniform(1.0, 6.0))
            if loop.time() >= end:
                break
            kind = rng.choice(["outage", "broker outage", "rtt", "errors", "errors", "leaders"])
            log.counts[kind] += 1
            if kind in ("outage", "broker outage"):
                broker = -1 if kind == "outage" else rng.choice(range(1, BROKERS + 1))
                # Mostly short blips, some longer than the ~5 s the retries last.
                length = rng.uniform(0.5, 3.0) if rng.random() < 0.6 else rng.uniform(5.0, 25.0)
                cluster.broker_down(broker)
                try:
                    length = await hold(length)
                finally:
                    cluster.broker_up(broker)
                log.outage_seconds += length
                log.longest_outage = max(log.longest_outage, length)
            elif kind == "rtt":
                cluster.set_rtt(-1, rng.choice([100, 300, 800, 1500, 3000]))
                try:
                    await hold(rng.uniform(1.0, 8.0))
                finally:
                    cluster.set_rtt(-1, 0)
            elif kind == "errors":
                codes = [INVALID_RECORD if rng.random() < 0.2 else rng.choice(RETRIABLE_ERRORS)
                         for _ in range(rng.randint(1, 6))]
                log.counts["fatal errors injected"] += codes.count(INVALID_RECORD)
                log.counts["retriable errors injected"] += len(codes) - codes.count(INVALID_RECORD)
                cluster.push_request_errors(FaultyCluster.PRODUCE, *codes)
            else:
                for topic in topics:
                    for partition in rng.sample(range(PARTITIONS), 5):
                        cluster.set_leader(topic, partition, rng.choice(range(1, BROKERS + 1)))
    finally:
        cluster.broker_up(-1)
        cluster.set_rtt(-1, 0)
        cluster.clear_request_errors(FaultyCluster.PRODUCE)


def read_topic(bootstrap: str, topic: str, timeout: float = 120.0) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of a topic, in partition order, read with a plain consumer (bounded)."""
    records = [(m.partition() or 0, m.key(), m.value())
               for batch in read_to_end({"bootstrap.servers": bootstrap}, topic, timeout, 5000) for m in batch]
    return [(key, value) for _, key, value in sorted(records, key=lambda record: record[0])]


def losses(run: Run, bootstrap: str) -> collections.Counter[str]:
    """Keys whose latest value is not the topic's last one, by what became of that value."""
    last = dict(read_topic(bootstrap, run.store.config.topic))
    lettered: set[tuple[bytes, bytes]] = set()
    if run.dead_letter_topic is not None:
        for key, letter in read_topic(bootstrap, run.dead_letter_topic):
            if key is not None and letter is not None:
                lettered.add((key, json.loads(letter)["value"].encode()))
    lost: collections.Counter[str] = collections.Counter()
    for key, (update, value) in run.latest.items():
        if last.get(key) == value:
            continue
        outcome = update.outcome
        if (key, value) in lettered:
            lost["dead-lettered"] += 1
        elif outcome is None or outcome.result is not Result.FAILED:
            lost["silent"] += 1
        elif outcome.error is not None and classify(outcome.error) is ErrorKind.FATAL:
            lost["refused (fatal)"] += 1
        else:
            lost["failed"] += 1
    return lost


async def main() -> None:
    """Run the soak and print what it found."""
    parser = BenchParser(__doc__)
    parser.add_size("--minutes", type=float, full=5.0, quick=0.2, help="how long the traffic and the faults last")
    parser.add_argument("--seed", type=int, default=1, help="seed of the traffic and of the faults")
    parser.add_size("--keys", type=int, full=2000, quick=200, help="distinct task keys")
    parser.add_size("--rate", type=float, full=500.0, quick=100.0, help="status updates per second (to every store)")
    parser.add_size("--settle-timeout", type=float, full=180.0, quick=60.0, help="bound on the recovery, seconds")
    parser.add_argument("--log", help="write the stores' warnings and errors to this file (default: none)")
    args = parser.parse()
    # Every failed write is logged: thousands of lines during a soak.
    logging.basicConfig(filename=args.log or "/dev/null", level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    seconds = args.minutes * 60
    cluster = FaultyCluster(brokers=BROKERS)
    fault_log = FaultLog()
    with tempfile.TemporaryDirectory() as spool_dir:
        runs = await start_runs(cluster, Path(spool_dir))
        topics = [run.store.config.topic for run in runs]
        started = time.monotonic()
        await asyncio.gather(traffic(runs, args.keys, args.rate, seconds, random.Random(args.seed)),
                             faults(cluster, topics, seconds, random.Random(args.seed + 1), fault_log))
        ended = time.monotonic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + args.settle_timeout
        while loop.time() < deadline:
            if all(run.settled() for run in runs):
                break
            await asyncio.sleep(0.1)
        recovered = time.monotonic() - ended
        unsettled = {run.policy: (run.store.queue.unsettled, len(run.store.queue.parked())) for run in runs
                     if not run.settled()}
        lost = {run.policy: await asyncio.to_thread(losses, run, cluster.bootstrap_servers) for run in runs}
        for run in runs:
            await run.store.stop()
    cluster.close()

    print(f"{args.minutes:g} min of traffic ({ended - started:.0f} s), seed {args.seed}, {args.keys} keys, "
          f"{args.rate:g} updates/s to each store; mock cluster of {BROKERS} brokers, {PARTITIONS} partitions "
          f"per topic\n")
    print(f"faults: {fault_log.summary()}\n")
    print(f"recovery after the traffic: every store settled {recovered:.1f} s after the faults were cleared"
          if not unsettled else f"NOT settled within {args.settle_timeout:g} s (unsettled, parked): {unsettled}")
    print()
    print("| policy | submitted by the caller | submitted to the queue | written (durable) | superseded | failed "
          "| parked | dead-lettered | dead letter failed | counters add up | lost | lost: refused (fatal) "
          "| lost: dead-lettered | lost: failed | lost: silent |")
    print("|---|" + "---:|" * 8 + "---|" + "---:|" * 5)
    policies = []
    for run in runs:
        c = {name: run.counter(f"status_update_{name}_total") for name in (
            "submitted", "success", "superseded", "failure", "parked", "dead_lettered", "dead_letter_failed")}
        adds_up = c["submitted"] == c["success"] + c["superseded"] + c["failure"]
        gone = lost[run.policy]
        figures = [c[name] for name in ("submitted", "success", "superseded", "failure", "parked", "dead_lettered",
                                         "dead_letter_failed")]
        print(f"| {run.policy} | {run.submitted:,} | " + " | ".join(f"{n:,.0f}" for n in figures)
              + f" | {'yes' if adds_up else 'NO'} | {sum(gone.values()):,} | "
              + " | ".join(f"{gone[name]:,}" for name in ("refused (fatal)", "dead-lettered", "failed", "silent"))
              + " |")
        policies.append({"policy": run.policy, "submitted by the caller": run.submitted,
                         **dict(zip(("submitted to the queue", "written (durable)", "superseded", "failed", "parked",
                                     "dead-lettered", "dead letter failed"), figures, strict=True)),
                         "counters add up": adds_up, "lost": sum(gone.values()),
                         **{f"lost: {name}": gone[name] for name in ("refused (fatal)", "dead-lettered", "failed",
                                                                      "silent")}})
    write_json(args.json, {"settled": not unsettled, "recovery_s": recovered, "policies": policies})


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
