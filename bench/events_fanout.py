"""GET /events fan-out: status events delivered per second to one client and to SUBSCRIBERS clients.

    .venv/bin/python -m bench.events_fanout [--events 20000] [--subscribers 100] [--rounds 3]
    .venv/bin/python -m bench.events_fanout --quick     # 500 events, 10 clients: a check that it all runs

The API is served by the real HTTP server (uvicorn, as ``status-store serve`` configures it) on 127.0.0.1; its
``GET /events`` hub watches a cache that is fed EVENTS task status records the way the reader feeds it
(``StatusCache.apply``, batches of 500, the event loop free between batches), so what is measured is the
stream, not Kafka. The clients are plain sockets in the same process that read the stream and count its
events (no parsing: a client's own cost is not the server's). Each round, first one client then SUBSCRIBERS
clients subscribe, the records are applied, and the time runs until every client has every event.

Reported (medians of the rounds): events delivered per second over all clients, and the ratio of the many
clients' total to the one client's (how the fan-out scales: SUBSCRIBERS means no cost per client), and the
clients dropped (none expected: every client's queue holds all the events).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import uvicorn

from harness import free_port
from status_store.api import create_app
from status_store.api.http_server import http_config
from status_store.connect import codec
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import State
from status_store.fleet.events import StatusEvents

from . import BenchParser

BATCH = 500
HEARTBEAT_S = 15.0


def records(n: int) -> list[StatusRecord]:
    """``n`` task status records of 1,000 connectors x 10 tasks, on 5 partitions, every 50th FAILED."""
    running = codec.encode_status(State.RUNNING, "worker-1.example.com:8083", 3, None)
    failed = codec.encode_status(State.FAILED, "worker-2.example.com:8083", 3,
                                 "org.apache.kafka.connect.errors.ConnectException: boom\n\tat X.y(X.java:1)")
    return [StatusRecord(f"status-task-connector-{i % 1000}-{i // 1000 % 10}".encode(),
                         failed if i % 50 == 0 else running, i % 5, i // 5, time.time()) for i in range(n)]


async def client(port: int, events: int, subscribed: asyncio.Event) -> None:
    """Subscribe, then read until ``events`` events came (each frame ends with a blank line)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    frames, tail = 0, b""
    while frames < events + 1:  # the first frame is the ": subscribed" comment
        chunk = await reader.read(1 << 16)
        if not chunk:
            raise RuntimeError("the stream ended early")
        frames += (tail + chunk).count(b"\n\n") - tail.count(b"\n\n")
        tail = chunk[-1:]
        if frames >= 1:
            subscribed.set()
    writer.close()


async def round_trip(port: int, hub: StatusEvents, cache: StatusCache, batch_records: list[list[StatusRecord]],
                     subscribers: int) -> float:
    """Seconds from the first record applied until every one of ``subscribers`` clients had every event."""
    events = sum(len(batch) for batch in batch_records)
    ready = [asyncio.Event() for _ in range(subscribers)]
    clients = [asyncio.create_task(client(port, events, ready[i])) for i in range(subscribers)]
    await asyncio.gather(*(event.wait() for event in ready))
    started = time.perf_counter()
    for batch in batch_records:
        cache.apply(batch)
        await asyncio.sleep(0)
    await asyncio.gather(*clients)
    elapsed = time.perf_counter() - started
    await until(lambda: hub.subscribers == 0)  # every stream ended: the next round starts from none
    return elapsed


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait, bounded, until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not hold in time")
        await asyncio.sleep(0.01)


async def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--events", type=int, full=20_000, quick=500, help="status records applied per round")
    parser.add_size("--subscribers", type=int, full=100, quick=10, help="clients of the fan-out")
    parser.add_size("--rounds", type=int, full=3, quick=1, help="rounds, for the medians")
    args = parser.parse()
    all_records = records(args.events * args.rounds * 2)
    cache = StatusCache()
    # Every client's queue holds a round's events: what is measured is delivery, not dropping.
    hub = StatusEvents(cache, buffer_max=args.events, queue_max=args.events + 1, from_start=True)
    app = create_app(None, status_events=hub)
    app.state.events_heartbeat_s = HEARTBEAT_S
    port = free_port()
    server = uvicorn.Server(http_config(app, "127.0.0.1", port))
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started)
    seconds: dict[int, list[float]] = {1: [], args.subscribers: []}
    used = 0
    for _ in range(args.rounds):
        for subscribers in seconds:
            chunk = all_records[used:used + args.events]
            used += args.events
            batches = [chunk[i:i + BATCH] for i in range(0, len(chunk), BATCH)]
            seconds[subscribers].append(await round_trip(port, hub, cache, batches, subscribers))
    hub.close()
    server.should_exit = True
    await serving
    print(f"{args.events:,} events per round, {args.rounds} round(s), batches of {BATCH}\n")
    print("| clients | events/s delivered (all clients) | per client | ratio to one client |")
    print("|---|---|---|---|")
    one = args.events / statistics.median(seconds[1])
    for subscribers, times in seconds.items():
        delivered = args.events * subscribers / statistics.median(times)
        print(f"| {subscribers} | {delivered:,.0f} | {delivered / subscribers:,.0f} | {delivered / one:.1f} |")
    print(f"\nclients dropped: {hub.dropped}")


if __name__ == "__main__":
    asyncio.run(main())
