"""Size and time of a /metrics scrape with the fleet's series, at CONNECTORS connectors x TASKS tasks.

    .venv/bin/python -m bench.fleet_scrape [--connectors 10000] [--tasks 10] [--scrapes 5]
    .venv/bin/python -m bench.fleet_scrape --quick     # 100 connectors: a check that it all runs

The cache is filled the way the reader fills it (``StatusCache.apply`` on Connect's records, one record per
connector and task, 1% of the tasks FAILED), then the fleet's collector is exposed in Prometheus's text
format as ``GET /metrics`` serves it, once per ``sidecar.metrics.fleet`` mode (objects with no cap reached,
objects capped at 20,000, counts). No broker: the scrape reads the cache only, so a broker adds nothing to it.

Reported per mode: series, bytes of the exposition, and the median time of a scrape's two parts: collecting
(on the event loop: the loop waits for it) and writing the text (in a thread: the loop goes on). Also the time
to read the records into the cache.
"""

from __future__ import annotations

import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

from status_store.api.routes.metrics import Collected
from status_store.config import FleetMetrics
from status_store.connect import codec
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import State
from status_store.fleet.series import FleetCollector

from . import BenchParser


def fill(connectors: int, tasks: int) -> StatusCache:
    """A cache holding every connector's and task's status, as read from the topic."""
    running = codec.encode_status(State.RUNNING, "worker-1:8083", 1, None)
    failed = codec.encode_status(State.FAILED, "worker-2:8083", 1, "org.apache.kafka.connect.errors.ConnectException")
    records: list[StatusRecord] = []
    now = time.time()
    for c in range(connectors):
        records.append(StatusRecord(f"status-connector-connector-{c}".encode(), running, 0, len(records), now))
        for t in range(tasks):
            value = failed if (c * tasks + t) % 100 == 0 else running
            records.append(StatusRecord(f"status-task-connector-{c}-{t}".encode(), value, 0, len(records), now))
    cache = StatusCache()
    started = time.perf_counter()
    cache.apply(records)
    print(f"read {len(records):,} records into the cache in {time.perf_counter() - started:.2f} s")
    return cache


def measure(cache: StatusCache, mode: FleetMetrics, max_objects: int, scrapes: int) -> None:
    """Expose the fleet's series ``scrapes`` times as ``GET /metrics`` does; print series, bytes and times."""
    registry = CollectorRegistry()
    registry.register(FleetCollector(cache.view, mode, max_objects))
    collecting, writing, text = [], [], b""
    for _ in range(scrapes):
        started = time.perf_counter()
        collected = Collected(list(registry.collect()))
        collecting.append(time.perf_counter() - started)
        started = time.perf_counter()
        text = generate_latest(collected)
        writing.append(time.perf_counter() - started)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    print(f"{mode.value:>7} max.objects={max_objects:>7}: {series:>8,} series, {len(text) / 1e6:6.1f} MB, "
          f"collect {statistics.median(collecting):.2f} s, write {statistics.median(writing):.2f} s (medians)")


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--connectors", type=int, full=10000, quick=100, help="connectors in the cache")
    parser.add_size("--tasks", type=int, full=10, quick=10, help="tasks per connector")
    parser.add_size("--scrapes", type=int, full=5, quick=1, help="scrapes per mode (the median is reported)")
    args = parser.parse()
    cache = fill(args.connectors, args.tasks)
    objects = args.connectors * (args.tasks + 1)
    measure(cache, FleetMetrics.OBJECTS, objects, args.scrapes)
    measure(cache, FleetMetrics.OBJECTS, 20000, args.scrapes)
    measure(cache, FleetMetrics.COUNTS, 0, args.scrapes)


if __name__ == "__main__":
    main()
