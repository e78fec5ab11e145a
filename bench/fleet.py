"""A fleet of sidecars against a recovering broker: what held partitions, jitter and the retry budget do to
the load.

    .venv/bin/pip install -e '.[bench]'     # matplotlib, for the chart
    .venv/bin/python -m bench.fleet [--sidecars 100] [--keys 100] [--outage 20] [--capacity 250]
                                    [--chart docs/img/fleet-recovery.png] [--quick]

SIDECARS sidecars, each with its own real ``RetryQueue``, backoff policy and (for the budget variants)
``RetryBudget``, write KEYS keys each, spread over Connect's 5 partitions by Java's partitioner. The
broker goes down at t=0; every key is updated once at a random time in the first second (the statuses a
broker outage causes). At t=OUTAGE the broker comes back with a limited capacity: in each 100 ms window
it accepts the first CAPACITY attempts and fails the rest with a retriable error (NOT_ENOUGH_REPLICAS),
as a recovering cluster sheds load. That is what makes a retry storm feed itself: the attempts it
refuses come back. An update that runs out of retries is parked (the service's default
``exhausted.action``) and sent again when its partition takes writes, so every key is written in the end.

Variants: held partitions (``status.storage.retry.mode=partition``, the default: one probe at a time,
a shared release rate) and per-update retries with each jitter mode, with and without a retry budget.

Time is virtual (``harness.virtual_clock``): the asyncio loop's clock jumps to the next timer instead of sleeping,
so minutes of fleet time take seconds and every run with the same seed gives the same figures. Only the broker is
simulated (an answer after RTT, from the capacity rule); the retry queue, the backoff policies and the
budget are the service's own code, run as the service runs them.

Reported per variant: the peak number of attempts the broker received in one 100 ms window after it
recovered, total attempts (all sidecars, first attempts included), seconds from recovery until every
key's value is written, updates that failed (ran out of retries; parked, then written), and retries the
budgets refused.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, murmur2

from bench import BenchParser, write_json
from harness.virtual_clock import VirtualTimeLoop
from status_store.errors import WriteFailedError
from status_store.retry.backoff import Backoff, JitterMode, RetryMode, backoff_policy
from status_store.retry.budget import BudgetSettings, RetryBudget
from status_store.retry.delivery import Delivery, DoneCallback
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import (
    Outcome,
    ReleasePace,
    Result,
    RetryListener,
    RetryPolicy,
    StatusUpdate,
    UpdateKind,
)

NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
WINDOW_S = 0.1
# KIP-1278's backoff defaults, as the service ships them, and the default cap on a held partition's probes.
INITIAL_MS, MAX_MS, MULTIPLIER = 300, 10000, 2.0
PROBE_MAX_MS = 1000
# Partitions of each sidecar's status topic (Connect's default).
PARTITIONS = 5


# ----------------------------------------------------------------------------- the broker and the fleet


def window(t: float) -> int:
    """The 100 ms window a time falls in (retry times are 100 ms ticks, up to float rounding)."""
    return math.floor(t / WINDOW_S + 1e-6)


@dataclass
class RecoveringBroker:
    """Fails everything until ``recovers_at``, then accepts ``capacity`` attempts per 100 ms window."""

    recovers_at: float
    capacity: int
    rtt: float
    attempts: Counter[int] = field(default_factory=Counter)
    accepted: Counter[int] = field(default_factory=Counter)

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        w = window(now)
        self.attempts[w] += 1
        if now >= self.recovers_at and self.accepted[w] < self.capacity:
            self.accepted[w] += 1
            loop.call_at(now + self.rtt, done, Delivery(0, 0), None)
        else:
            error = WriteFailedError(key.decode(), NOT_ENOUGH_REPLICAS, "NOT_ENOUGH_REPLICAS", "simulated")
            loop.call_at(now + self.rtt, done, None, error)


class Outcomes(RetryListener):
    """Notes when each key's value is written, and how many updates failed (the queue parks what runs out of retries,
    as the service does by default, ``status.storage.retry.exhausted.action=park``: the value waits in its partition
    and is sent again when the partition takes writes)."""

    def __init__(self) -> None:
        self.last_written = 0.0
        self.failed = 0
        self.unwritten: set[str] = set()

    def on_submitted(self, update: StatusUpdate) -> None:
        self.unwritten.add(update.key)

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        if outcome.result is Result.WRITTEN:
            self.last_written = max(self.last_written, asyncio.get_running_loop().time())
            self.unwritten.discard(update.key)
        elif outcome.result is Result.FAILED:
            self.failed += 1


@dataclass(frozen=True)
class Variant:
    """One way the whole fleet retries."""

    name: str
    mode: JitterMode
    jitter: float
    budget: BudgetSettings | None = None
    retry_mode: RetryMode = RetryMode.PER_UPDATE
    probe_max_ms: float = PROBE_MAX_MS

    def backoff(self, rng: random.Random, max_ms: float = MAX_MS) -> Backoff:
        return backoff_policy(self.mode, INITIAL_MS, max_ms, MULTIPLIER, self.jitter, rng.random)

    def policy(self, rng: random.Random, max_retries: int, release: ReleasePace) -> RetryPolicy:
        budget = RetryBudget(self.budget) if self.budget is not None else None
        return RetryPolicy(self.backoff(rng), max_retries, None, budget, self.retry_mode,
                           self.backoff(rng, min(MAX_MS, self.probe_max_ms)), release=release)


def partition_of(key: str) -> int:
    return murmur2(key.encode(), PARTITIONS)


@dataclass
class Result_:
    variant: Variant
    per_window: dict[int, int]
    peak_after: int
    total: int
    after: int
    written_s: float | None
    failed: int
    throttled: int


async def simulate(variant: Variant, args: argparse.Namespace) -> Result_:
    loop = asyncio.get_running_loop()
    broker = RecoveringBroker(args.outage, args.capacity, args.rtt)
    workload = random.Random(args.seed)  # the same submission times for every variant
    queues, watchers = [], []
    for sidecar in range(args.sidecars):
        rng = random.Random(args.seed * 100_003 + sidecar)
        outcomes = Outcomes()
        policy = variant.policy(rng, args.max_retries, args.release)
        queue = RetryQueue(broker.send, policy, [outcomes], route=partition_of)
        if args.exhausted == "park":
            queue.park_after_last_retry()
        queues.append(queue)
        watchers.append(outcomes)
        for key in range(args.keys):
            update = StatusUpdate(f"status-task-sidecar{sidecar}-{key}", b'{"state":"FAILED"}', UpdateKind.TASK)
            loop.call_at(workload.random(), queue.submit, update)
    # Until every key is written (a parked value is sent again), every update dropped, or the horizon.
    while loop.time() < args.horizon:
        await asyncio.sleep(WINDOW_S)
        if loop.time() > 1.0 and all(not q.unsettled and not q.parked_count for q in queues):
            break
    recovered = window(args.outage)
    after = {w: n for w, n in broker.attempts.items() if w >= recovered}
    lost = sum(len(o.unwritten) for o in watchers)
    return Result_(
        variant=variant,
        per_window=dict(broker.attempts),
        peak_after=max(after.values(), default=0),
        total=sum(broker.attempts.values()),
        after=sum(after.values()),
        written_s=None if lost else max(o.last_written for o in watchers) - args.outage,
        failed=sum(o.failed for o in watchers),
        throttled=sum(q.throttled_total for q in queues),
    )


def run(variant: Variant, args: argparse.Namespace) -> Result_:
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(simulate(variant, args))


# ----------------------------------------------------------------------------- report


def budget_settings(text: str) -> BudgetSettings:
    """``tokens,ratio,floor`` from the command line."""
    tokens, ratio, floor = (float(part) for part in text.split(","))
    return BudgetSettings(tokens, ratio, floor)


def release_pace(text: str) -> ReleasePace:
    """``first,pace_ms`` from the command line."""
    first, pace_ms = text.split(",")
    return ReleasePace(int(first), float(pace_ms) / 1000)


def variants(args: argparse.Namespace) -> list[Variant]:
    found = [
        Variant("per update, no jitter", JitterMode.ADDITIVE, 0.0),
        *(Variant(f"held partitions, probes up to {p:g} ms" + (" (default)" if p == PROBE_MAX_MS else ""),
                  JitterMode.ADDITIVE, 0.25, retry_mode=RetryMode.PARTITION, probe_max_ms=p)
          for p in args.probe_max_ms),
        Variant("per update, additive 0.25", JitterMode.ADDITIVE, 0.25),
        Variant("per update, symmetric 0.25", JitterMode.SYMMETRIC, 0.25),
        Variant("per update, full", JitterMode.FULL, 0.25),
    ]
    for b in args.budget:
        label = f"budget {b.max_tokens:g} tokens, ratio {b.token_ratio:g}, floor {b.min_retries_per_s:g}/s"
        found.append(Variant(f"per update, additive 0.25 + {label}", JitterMode.ADDITIVE, 0.25, b))
        found.append(Variant(f"per update, full + {label}", JitterMode.FULL, 0.25, b))
    return found


def ratio(value: int, baseline: int) -> str:
    return f"{value / baseline:.2f}x" if baseline else "-"


def rows(results: list[Result_]) -> list[dict[str, Any]]:
    """Each variant's figures by the table's column names (``--json``); "all written" is None when never."""
    baseline = next((r for r in results if r.variant.name.endswith("no jitter")), results[0])
    return [{"variant": r.variant.name, "peak attempts / 100 ms after recovery": r.peak_after,
             "peak vs no jitter": r.peak_after / baseline.peak_after if baseline.peak_after else None,
             "total attempts": r.total, "total vs no jitter": r.total / baseline.total if baseline.total else None,
             "attempts after recovery": r.after, "all written (s after recovery)": r.written_s,
             "updates failed": r.failed, "retries throttled": r.throttled} for r in results]


def table(results: list[Result_], args: argparse.Namespace) -> str:
    baseline = next((r for r in results if r.variant.name.endswith("no jitter")), results[0])
    lines = [
        f"{args.sidecars} sidecars x {args.keys} keys, broker down for {args.outage:g} s, then "
        f"{args.capacity} attempts per 100 ms; retries: {INITIAL_MS} ms doubling to {MAX_MS} ms, "
        f"max.retries={args.max_retries}; RTT {args.rtt * 1000:g} ms; seed {args.seed}",
        "",
        "| variant | peak attempts / 100 ms after recovery | vs no jitter | total attempts | vs no jitter "
        "| attempts after recovery | all written (s after recovery) | updates failed | retries throttled |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        written = f"{r.written_s:.1f}" if r.written_s is not None else "never"
        lines.append(f"| {r.variant.name} | {r.peak_after:,} | {ratio(r.peak_after, baseline.peak_after)} | "
                     f"{r.total:,} | {ratio(r.total, baseline.total)} | {r.after:,} | {written} | {r.failed:,} | "
                     f"{r.throttled:,} |")
    return "\n".join(lines)


def chart(results: list[Result_], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = max(max(r.per_window) for r in results) + 1
    fig, axes = plt.subplots(len(results), 1, sharex=True, sharey=True, figsize=(10, 2.0 * len(results)))
    for ax, r in zip(axes, results, strict=True):
        xs = [w * WINDOW_S for w in range(end)]
        ax.plot(xs, [r.per_window.get(w, 0) for w in range(end)], linewidth=0.7)
        ax.axhline(args.capacity, color="tab:red", linewidth=0.7, linestyle="--")
        ax.axvline(args.outage, color="tab:green", linewidth=0.7, linestyle=":")
        ax.set_title(r.variant.name, fontsize=9, loc="left")
        ax.set_ylabel("attempts\n/ 100 ms", fontsize=8)
    axes[-1].set_xlabel(f"seconds (broker down until {args.outage:g} s, green; capacity {args.capacity} "
                        "attempts / 100 ms, red)")
    fig.suptitle(f"{args.sidecars} sidecars x {args.keys} keys against a recovering broker")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--sidecars", type=int, full=100, quick=20, help="sidecars in the fleet")
    parser.add_size("--keys", type=int, full=100, quick=20, help="keys per sidecar")
    parser.add_size("--outage", type=float, full=20.0, quick=5.0, help="seconds the broker is down")
    parser.add_size("--capacity", type=int, full=250, quick=10, help="attempts the broker accepts per 100 ms")
    parser.add_argument("--rtt", type=float, default=0.01, help="seconds until an attempt's answer")
    parser.add_argument("--max-retries", type=int, default=10)
    parser.add_argument("--budget", type=budget_settings, action="append",
                        help="a retry budget to try, as max.tokens,token.ratio,min.retries.per.second (repeatable)")
    parser.add_argument("--horizon", type=float, default=3600.0, help="virtual seconds before giving up")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--probe-max-ms", type=float, action="append",
                        help="held partitions: a cap on the probes' backoff to try (repeatable)")
    parser.add_argument("--only", help="run only the variants whose name contains this")
    parser.add_argument("--release", type=release_pace, default=ReleasePace(),
                        help="first batch,pace ms of a released partition (tuning; default: the service's)")
    parser.add_argument("--exhausted", choices=["park", "drop"], default="park",
                        help="what happens after the last retry (the service's default: park)")
    parser.add_argument("--chart", type=Path, help="write the chart (PNG) here")
    args = parser.parse()
    if not args.budget:
        args.budget = [BudgetSettings(10, 0.1, 1.0), BudgetSettings(10, 0.5, 1.0)]  # gRPC's example ratio; ours
    if not args.probe_max_ms:
        args.probe_max_ms = [PROBE_MAX_MS]
    logging.getLogger("status_store").setLevel(logging.CRITICAL)  # one line per failed update: thousands
    results = []
    for variant in variants(args):
        if args.only and args.only not in variant.name:
            continue
        results.append(run(variant, args))
        print(f"done: {variant.name}", file=sys.stderr)
    print(table(results, args))
    write_json(args.json, {"variants": rows(results)})
    if args.chart is not None:
        chart(results, args, args.chart)


if __name__ == "__main__":
    main()
