"""GET /events under a storm of clients: what the probes and the writes of a running sidecar see while STREAMS
clients subscribe at once (every other one never reads), against the same writes with no subscriber, in the
same run.

    .venv/bin/python -m bench.events_storm [--streams 2000] [--updates 10000] [--batch 500] [--rounds 3]
    .venv/bin/python -m bench.events_storm --quick    # 150 clients, 400 updates: a check that it all runs

`status-store serve` runs as a process of its own on its embedded broker, with room for the clients'
connections (its limit of open files is --nofile). After a first write batch, not measured (the first writes
of a fresh sidecar set up what the others reuse), each round, on the same sidecar:

1. baseline: a write batch (--updates task statuses in POST /statuses requests of --batch, each with
   ?wait=true, so that each answers once its updates are durable and read back), with no subscriber;
2. storm: --streams clients send GET /events at once from plain sockets, every other one with a small receive
   buffer and reading nothing past the answer's head (a client that stopped reading); once every one has its
   answer (200: subscribed; 503: refused, past sidecar.events.subscribers.max), the same write batch while the
   subscribed ones stay; then every client goes.

A probe process asks GET /health every 20 ms throughout, on a new connection each time as kubelet does.
Reported: the write batch's time (median of the rounds) and its ratio to the baseline (target: within 2x), and
the sidecar's CPU time during it (on a shared machine, the work it cost, whatever the other processes left of
the cores); /health p50, p99 and max in each phase (target: p99 under 100 ms) and the probes not answered 200;
the streams subscribed and refused; the events the reading subscribers got; the sidecar's RSS after each phase
and its peak (VmHWM); what the sidecar counted (refused, dropped, connections closed by its bounds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench import BenchParser, write_json
from harness import ROOT, free_port, stop
from harness.events_storm import (
    SIDECAR_COUNTS,
    Probe,
    Probes,
    Storm,
    WriteBatch,
    probe,
    raise_open_files,
    sidecar_metrics,
    storm,
    until_no_subscriber,
    write_batch,
)
from harness.http import wait_listening

# ----------------------------------------------------------------------------- the probe (a process of its own)


# ----------------------------------------------------------------------------- the clients


# ----------------------------------------------------------------------------- the sidecar


@dataclass
class Sidecar:
    """A running ``status-store serve``."""

    pid: int
    port: int


@contextmanager
def sidecar(nofile: int) -> Iterator[Sidecar]:
    """``status-store serve`` on its embedded broker, limited to ``nofile`` open files."""
    port = free_port()

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    process = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", "--port", str(port), "--log-level",
                                "ERROR"], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=limit_files)
    try:
        wait_listening(port, process)
        yield Sidecar(process.pid, port)
    finally:
        stop(process)


def memory_mb(pid: int, field_name: str) -> float:
    """A process's VmRSS or VmHWM, in MB."""
    with open(f"/proc/{pid}/status") as status:
        found = re.search(rf"^{field_name}:\s+(\d+) kB", status.read(), re.MULTILINE)
    return int(found.group(1)) / 1024 if found else float("nan")


# ----------------------------------------------------------------------------- the run


@dataclass
class Round:
    """One round's figures."""

    baseline: WriteBatch
    baseline_probes: Probes
    baseline_rss: float
    storm: Storm
    connecting_probes: Probes
    writing_probes: Probes
    storm_rss: float


async def one_round(served: Sidecar, args: argparse.Namespace, generation: int,
                    ) -> tuple[WriteBatch, float, Storm, float]:
    """The baseline write batch, then the storm with the same batch; the RSS after each."""
    baseline = await write_batch(served.port, args.updates, args.batch, generation, served.pid)
    baseline_rss = memory_mb(served.pid, "VmRSS")
    await asyncio.sleep(0.5)  # a pause between the phases, for the probes
    result = await storm(served.port, args.streams, args.updates, args.batch, generation + 1, served.pid)
    storm_rss = memory_mb(served.pid, "VmRSS")
    await until_no_subscriber(served.port)
    return baseline, baseline_rss, result, storm_rss


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--streams", type=int, full=2000, quick=150, help="clients of GET /events at once")
    parser.add_size("--updates", type=int, full=10_000, quick=400, help="status updates of the write batch")
    parser.add_size("--batch", type=int, full=500, quick=100, help="updates per POST /statuses request")
    parser.add_size("--rounds", type=int, full=3, quick=1, help="rounds, for the medians")
    parser.add_argument("--nofile", type=int, default=4096, help="the sidecar's limit of open files (default 4096)")
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse()
    if args.probe is not None:
        probe(args.probe)
        return
    raise_open_files(args.streams + 1024)
    rounds: list[Round] = []
    with sidecar(args.nofile) as served:
        asyncio.run(write_batch(served.port, args.updates, args.batch, 0))
        for number in range(args.rounds):
            prober = Probe(served.port)
            started = time.time()
            baseline, baseline_rss, result, storm_rss = asyncio.run(one_round(served, args, 1 + 2 * number))
            samples = prober.stop()
            rounds.append(Round(baseline, Probes.between(samples, started, result.began - 0.5), baseline_rss, result,
                                Probes.between(samples, result.began, result.answered),
                                Probes.between(samples, result.answered, result.ended), storm_rss))
        peak = memory_mb(served.pid, "VmHWM")
        counted = asyncio.run(sidecar_metrics(served.port))
    print_table(args, rounds, peak)
    print("the sidecar's counts over the run: " + ", ".join(
        f"{name} {counted.get(name, float('nan')):,.0f}" for name in SIDECAR_COUNTS))


def print_table(args: argparse.Namespace, rounds: list[Round], peak_mb: float) -> None:
    """The Markdown table of the run: medians of the rounds, the probes of every round together (and the same by
    column name to ``--json``)."""
    print(f"{args.streams:,} clients of GET /events (every other one never reads), a write batch of {args.updates:,} "
          f"task statuses in POST /statuses?wait=true requests of {args.batch}; {len(rounds)} round(s), medians\n")
    print("| phase | write batch (s) | ratio | sidecar CPU (s) | ratio | writes not 2xx | /health p50 (ms) | p99 (ms) "
          "| max (ms) | /health not 200 | sidecar RSS after (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def probes(phase: list[Probes]) -> dict[str, float]:
        merged = Probes(sorted(s for p in phase for s in p.seconds), sum(p.not_ok for p in phase))
        return {"/health p50 (ms)": merged.quantile_ms(0.5), "/health p99 (ms)": merged.quantile_ms(0.99),
                "/health max (ms)": merged.quantile_ms(1.0), "/health not 200": merged.not_ok,
                "/health probes": len(merged.seconds)}

    def writes(batches: list[WriteBatch], baseline: list[WriteBatch]) -> dict[str, float]:
        seconds = statistics.median(b.seconds for b in batches)
        cpu = statistics.median(b.cpu_seconds for b in batches)
        return {"write batch (s)": seconds,
                "write batch ratio": seconds / statistics.median(b.seconds for b in baseline),
                "sidecar CPU (s)": cpu, "sidecar CPU ratio": cpu / statistics.median(b.cpu_seconds for b in baseline),
                "writes not 2xx": sum(1 for b in batches for status in b.statuses if not 200 <= status < 300)}

    def probe_cells(row: dict[str, Any]) -> str:
        return (f"{row['/health p50 (ms)']:.1f} | {row['/health p99 (ms)']:.1f} | {row['/health max (ms)']:.1f} | "
                f"{row['/health not 200']} of {row['/health probes']}")

    def write_cells(row: dict[str, Any]) -> str:
        return (f"{row['write batch (s)']:.2f} | {row['write batch ratio']:.2f} | {row['sidecar CPU (s)']:.2f} | "
                f"{row['sidecar CPU ratio']:.2f} | {row['writes not 2xx']}")

    baselines = [r.baseline for r in rounds]
    baseline = {"phase": "baseline: no subscriber", **writes(baselines, baselines),
                **probes([r.baseline_probes for r in rounds]),
                "sidecar RSS after (MB)": statistics.median(r.baseline_rss for r in rounds)}
    connecting = {"phase": f"storm: {args.streams:,} clients connecting",
                  "sidecar CPU (s)": statistics.median(r.storm.connecting_cpu_seconds for r in rounds),
                  **probes([r.connecting_probes for r in rounds])}
    storm = {"phase": "storm: write batch, the subscribed clients there",
             **writes([r.storm.writes for r in rounds], baselines), **probes([r.writing_probes for r in rounds]),
             "sidecar RSS after (MB)": statistics.median(r.storm_rss for r in rounds)}
    print(f"| {baseline['phase']} | {write_cells(baseline)} | {probe_cells(baseline)} "
          f"| {baseline['sidecar RSS after (MB)']:.0f} |")
    print(f"| {connecting['phase']} | | | {connecting['sidecar CPU (s)']:.2f} | | | {probe_cells(connecting)} | |")
    print(f"| {storm['phase']} | {write_cells(storm)} | {probe_cells(storm)} | {storm['sidecar RSS after (MB)']:.0f} |")
    last = rounds[-1].storm
    readers = [s for s in last.streams if s.status == 200 and s.reading]
    clients = {"subscribed": last.count(200), "refused (503)": last.count(503),
               "refused with Retry-After": sum(1 for s in last.streams if s.status == 503 and s.retry_after),
               "closed without an answer": len(last.streams) - last.count(200) - last.count(503)}
    print(f"\nclients (last round): subscribed {clients['subscribed']}, refused (503) {clients['refused (503)']} "
          f"(with Retry-After: {clients['refused with Retry-After']}), "
          f"closed without an answer (shed at the connection limit) or none in time "
          f"{clients['closed without an answer']}")
    events = statistics.median(s.frames - 1 for s in readers) if readers else 0  # less the ": subscribed" line
    print(f"events per reading subscriber (last round): {events:,.0f} median, of {args.updates:,} written")
    print(f"sidecar peak RSS (VmHWM): {peak_mb:.0f} MB")
    write_json(args.json, {"phases": [baseline, connecting, storm], "clients (last round)": clients,
                           "events per reading subscriber": events, "sidecar peak RSS (MB)": peak_mb})

if __name__ == "__main__":
    main()
