"""The spool's write path alone: what its commits cost per write.

    .venv/bin/python -m bench.spool [--writes 20000] [--rounds 5] [--quick]

Each write is a task status of one of 2,000 connectors, accepted (a row inserted) and then settled as written (its row
deleted), as the store does. Two shapes: one write a commit (the HTTP API commits before it answers each request, and
the outcome is committed at the end of a later turn of the event loop), and 500 writes a commit (a burst in one turn
of the loop, a batch). The spool's file is in a temporary directory on this machine's disk; no Kafka. Prints one JSON
line a shape: microseconds per write, wall time and this process's CPU time (medians of the rounds), and where
``status_store`` was imported from, so that two versions of it can be compared in one sitting (run from each version's
tree, alternating).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import status_store
from status_store.durable.spool import Spool
from status_store.retry.delivery import Delivery
from status_store.retry.updates import Outcome, Result, StatusUpdate, UpdateKind

KEYS = 2_000
VALUE = b'{"state":"RUNNING","trace":null,"worker_id":"10.0.0.7:8083","generation":7}'


def microseconds_per_write(directory: Path, writes: int, batch: int) -> tuple[float, float]:
    """Accept and settle ``writes`` updates, ``batch`` of them a commit; wall and CPU time per write."""
    spool = Spool(directory / "spool.db")

    async def drive() -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        for first in range(0, writes, batch):
            updates = []
            for number in range(first + 1, first + batch + 1):
                update = StatusUpdate(f"status-task-c{number % KEYS}-0", VALUE, UpdateKind.TASK)
                update.number = number
                spool.on_submitted(update)
                updates.append(update)
            spool.commit()
            for update in updates:
                spool.settled(update, Outcome(update.key, Result.WRITTEN, 1, "written", Delivery(0, update.number)))
            spool.commit()
            await asyncio.sleep(0)  # the end of the loop's turn (the commit scheduled by the changes finds none)
        return time.perf_counter() - started, time.process_time() - cpu

    try:
        elapsed, cpu = asyncio.run(drive())
    finally:
        spool.close()
    return elapsed / writes * 1e6, cpu / writes * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1,000 writes, one round: that it runs")
    args = parser.parse_args()
    if args.quick:
        args.writes, args.rounds = 1_000, 1
    for batch in (1, 500):
        results = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="bench-spool-") as directory:
                results.append(microseconds_per_write(Path(directory), args.writes, batch))
        print(json.dumps({"batch": batch, "writes": args.writes,
                          "us_per_write": round(statistics.median(wall for wall, _ in results), 2),
                          "cpu_us_per_write": round(statistics.median(cpu for _, cpu in results), 2),
                          "rounds": [[round(wall, 2), round(cpu, 2)] for wall, cpu in results],
                          "status_store": str(Path(status_store.__file__).parent)}), flush=True)

if __name__ == "__main__":
    main()
