"""Read throughput of the store with the fleet's series off, on, and on with GET /events' hook attached.

    .venv/bin/python -m bench.fleet_read [--records 400000] [--rounds 3] [--scrape-interval 1]
    .venv/bin/python -m bench.fleet_read --quick     # 20,000 records: a check that it all runs

One topic on the mock cluster holds RECORDS task statuses of a fleet of 2,000 connectors x 10 tasks (20,000
keys, each written RECORDS / 20,000 times, the state changing between RUNNING and FAILED), written as a
Connect worker writes them. Each round, a new store reads it from its start (``start()`` reads to the end)
in each variant, the variants interleaved (in a different order each round):

- ``off``: ``sidecar.metrics.fleet=off``;
- ``objects``: ``sidecar.metrics.fleet=objects`` (the default);
- ``objects + events``: the same, and the hub of ``GET /events`` attached before the store reads (as the
  service attaches it), keeping every record read as an event.

In every variant a scraper reads ``/metrics`` as Prometheus would, every SCRAPE_INTERVAL seconds while the
store reads (collecting on the event loop, writing the text in a thread, as ``GET /metrics`` does). Reported:
records read per second (median of the rounds), the ratio to ``off`` (target: 0.9 or more), and the scrapes.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from prometheus_client import CollectorRegistry, generate_latest

from harness.faulty_cluster import FaultyCluster
from status_store.api.app import store_events
from status_store.api.routes.metrics import Collected
from status_store.config import build_config
from status_store.connect.model import State, TaskId, TaskStatus
from status_store.metrics import StoreMetrics
from status_store.store import StatusStore

from . import BenchParser
from .core import PARTITIONS, raw_write

CONNECTORS, TASKS = 2000, 10
VARIANTS = ("off", "objects", "objects + events")


def fleet_statuses(n: int) -> list[TaskStatus]:
    """``n`` statuses of the fleet's 20,000 tasks, in turn; each write of a task flips it RUNNING/FAILED."""
    keys = CONNECTORS * TASKS
    return [TaskStatus(TaskId(f"connector-{i % CONNECTORS}", (i // CONNECTORS) % TASKS),
                       State.FAILED if (i // keys) % 2 else State.RUNNING, f"worker-{i % 10}.example.com:8083",
                       i // keys, None)
            for i in range(n)]


async def read_once(bootstrap: str, topic: str, variant: str, expected: int, scrape_interval: float,
                    ) -> tuple[float, int]:
    """Seconds for a new store to read the topic to its end in this variant, and the scrapes meanwhile."""
    settings = {"bootstrap.servers": bootstrap, "status.storage.topic": topic, "sidecar.startup.timeout.ms": "600000",
                "sidecar.metrics.fleet": "off" if variant == "off" else "objects"}
    registry = CollectorRegistry()
    store = StatusStore(build_config(settings), bootstrap)
    StoreMetrics.watching(store, registry)
    if variant == "objects + events":
        store_events(store, from_start=True)
    scrapes = 0
    reading = True

    async def scrape() -> None:
        nonlocal scrapes
        while reading:
            await asyncio.sleep(scrape_interval)
            collected = Collected(list(registry.collect()))
            await asyncio.to_thread(generate_latest, collected)
            scrapes += 1

    scraper = asyncio.create_task(scrape())
    started = time.perf_counter()
    await store.start()
    elapsed = time.perf_counter() - started
    reading = False
    scraper.cancel()
    applied = store.cache.stats.applied
    await store.stop()
    assert applied == expected, (variant, applied, expected)
    return elapsed, scrapes


async def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--records", type=int, full=400_000, quick=20_000, help="task statuses in the topic")
    parser.add_size("--rounds", type=int, full=6, quick=1, help="rounds, for the medians")
    parser.add_size("--scrape-interval", type=float, full=1.0, quick=0.5, help="seconds between scrapes")
    args = parser.parse()
    cluster = FaultyCluster(brokers=1)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, 1)
    await raw_write(cluster.bootstrap_servers, topic, fleet_statuses(args.records))
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    scrapes: dict[str, int] = dict.fromkeys(VARIANTS, 0)
    for round_ in range(args.rounds):
        # Each round in another order: no variant always reads first (on a warm machine) or last.
        for variant in VARIANTS[round_ % 3:] + VARIANTS[:round_ % 3]:
            elapsed, scraped = await read_once(cluster.bootstrap_servers, topic, variant, args.records,
                                               args.scrape_interval)
            seconds[variant].append(elapsed)
            scrapes[variant] += scraped
    print(f"{args.records:,} records, {CONNECTORS * TASKS:,} keys, {args.rounds} round(s), a scrape every "
          f"{args.scrape_interval:g} s\n")
    print("| variant | records/s (median) | ratio to off | scrapes while reading |")
    print("|---|---|---|---|")
    off = args.records / statistics.median(seconds["off"])
    for variant in VARIANTS:
        rate = args.records / statistics.median(seconds[variant])
        print(f"| {variant} | {rate:,.0f} | {rate / off:.2f} | {scrapes[variant]} |")
    cluster.close()


if __name__ == "__main__":
    asyncio.run(main())
