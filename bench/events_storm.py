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
import json
import os
import re
import resource
import select
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from bench import ROOT, BenchParser, free_port, stop
from bench.rest_api import read_response, request_bytes, wait_listening

PROBE_INTERVAL_S = 0.02
# How long the reading subscribers are given to get the write batch's last events.
SETTLE_S = 10.0
# Bound on any one exchange with the sidecar: past it, the exchange counts as not answered.
ANSWER_TIMEOUT_S = 30.0
EVENTS_REQUEST = b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
# What the sidecar counted, printed at the end of the run.
SIDECAR_COUNTS = ("status_events_refused_total", "status_events_dropped_total",
                  'http_connections_closed_total{reason="connection_limit"}',
                  'http_connections_closed_total{reason="stalled"}',
                  'http_connections_closed_total{reason="head_timeout"}')
# A client that stopped reading: the kernel buffers little for it.
STALLED_RECEIVE_BUFFER = 4096


# ----------------------------------------------------------------------------- the probe (a process of its own)


def probe(port: int) -> None:
    """GET /health every PROBE_INTERVAL_S on a new connection, until a line comes on stdin; then print each probe as
    [start (epoch seconds), status (0: no answer), seconds], as JSON."""
    samples: list[tuple[float, int, float]] = []
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    while not select.select([sys.stdin], [], [], 0)[0]:
        started, clock = time.time(), time.perf_counter()
        status = 0
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
                sock.sendall(request)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            status = int(answer.split(b" ", 2)[1])
        except (OSError, IndexError, ValueError):
            pass
        samples.append((started, status, time.perf_counter() - clock))
        time.sleep(PROBE_INTERVAL_S)
    print(json.dumps(samples))


class Probe:
    """The probe process: its samples once stopped."""

    def __init__(self, port: int) -> None:
        self._process = subprocess.Popen([sys.executable, "-m", "bench.events_storm", "--probe", str(port)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)})

    def stop(self) -> list[tuple[float, int, float]]:
        """Stop probing; every probe made."""
        out, _ = self._process.communicate("stop\n", timeout=ANSWER_TIMEOUT_S + 30)
        return [(started, status, seconds) for started, status, seconds in json.loads(out)]


@dataclass
class Probes:
    """The probes of one phase."""

    seconds: list[float]
    not_ok: int

    @classmethod
    def between(cls, samples: Sequence[tuple[float, int, float]], start: float, end: float) -> Probes:
        """The probes started from ``start`` to ``end`` (epoch seconds)."""
        within = [(status, seconds) for started, status, seconds in samples if start <= started < end]
        return cls(sorted(seconds for _, seconds in within), sum(1 for status, _ in within if status != 200))

    def quantile_ms(self, q: float) -> float:
        """The q-quantile of the probes' time, in ms (nearest rank)."""
        if not self.seconds:
            return float("nan")
        return self.seconds[min(len(self.seconds) - 1, int(len(self.seconds) * q))] * 1000


# ----------------------------------------------------------------------------- the clients


@dataclass
class StreamOutcome:
    """One GET /events client: whether it reads, its answer (None: none yet; 0: no answer), what it got; ``got_all``
    is set once a reading one has ``expected`` frames."""

    reading: bool
    expected: int
    status: int | None = None
    retry_after: bool = False
    frames: int = 0
    got_all: asyncio.Event = field(default_factory=asyncio.Event)


async def stream(port: int, outcome: StreamOutcome, answered: Callable[[], None], leave: asyncio.Event) -> None:
    """A GET /events client on a plain socket until ``leave``: one that reads counts the frames it gets; one that
    does not reads nothing past the answer's head. ``answered`` is called once it has its answer (or none)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    if not outcome.reading:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STALLED_RECEIVE_BUFFER)
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT_S * 4):  # connecting may wait for the kernel's backlog
            await loop.sock_connect(sock, ("127.0.0.1", port))
            await loop.sock_sendall(sock, EVENTS_REQUEST)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = await loop.sock_recv(sock, 4096)
                if not chunk:
                    raise ConnectionError("closed before an answer")
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        outcome.status = int(head.split(b" ", 2)[1])
        outcome.retry_after = b"\r\nretry-after:" in head.lower()
        answered()
        if outcome.status == 200 and outcome.reading:
            await _count_frames(sock, body, outcome, leave)
        else:
            await leave.wait()
    except (OSError, TimeoutError, ConnectionError, IndexError, ValueError):
        if outcome.status is None:
            outcome.status = 0
            answered()
    finally:
        sock.close()


async def _count_frames(sock: socket.socket, first: bytes, outcome: StreamOutcome, leave: asyncio.Event) -> None:
    """Read until ``leave`` (or the end of the stream), counting the frames (each ends with a blank line)."""
    loop = asyncio.get_running_loop()
    outcome.frames = first.count(b"\n\n")
    tail = first[-1:]
    leaving = asyncio.ensure_future(leave.wait())
    try:
        while True:
            receiving = asyncio.ensure_future(loop.sock_recv(sock, 1 << 16))
            await asyncio.wait({receiving, leaving}, return_when=asyncio.FIRST_COMPLETED)
            if not receiving.done():
                receiving.cancel()
                return
            chunk = receiving.result()
            if not chunk:
                return
            outcome.frames += (tail + chunk).count(b"\n\n") - tail.count(b"\n\n")
            tail = chunk[-1:]
            if outcome.frames >= outcome.expected:
                outcome.got_all.set()
    finally:
        leaving.cancel()


def cpu_seconds(pid: int | None) -> float:
    """A process's CPU time so far (user and system), in seconds; 0 without a process. On a shared machine, the
    work a phase cost the sidecar, whatever the others left it of the cores."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class WriteBatch:
    """The statuses of the write batch's requests, how long it took and the sidecar's CPU time meanwhile."""

    statuses: list[int] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0


async def write_batch(port: int, updates: int, batch: int, generation: int, pid: int | None = None) -> WriteBatch:
    """``updates`` task statuses (1,000 connectors) in POST /statuses requests of ``batch``, each waited for
    (?wait=true), one after the other on a keep-alive connection (a new one after a request not answered, which
    counts as status 0); ``pid``: the sidecar's, for its CPU time."""
    result = WriteBatch()
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    started, cpu = time.perf_counter(), cpu_seconds(pid)
    try:
        for first in range(0, updates, batch):
            items = [{"kind": "task", "connector": f"connector-{i % 1000}", "task": i // 1000, "state": "RUNNING",
                      "worker_id": "worker-1.example.com:8083", "generation": generation}
                     for i in range(first, min(updates, first + batch))]
            try:
                async with asyncio.timeout(ANSWER_TIMEOUT_S):
                    if connection is None:
                        connection = await asyncio.open_connection("127.0.0.1", port)
                    reader, writer = connection
                    writer.write(request_bytes("POST", "/statuses?wait=true", json.dumps({"updates": items}).encode()))
                    result.statuses.append(await read_response(reader))
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                result.statuses.append(0)
                if connection is not None:
                    connection[1].close()
                connection = None
    finally:
        result.seconds, result.cpu_seconds = time.perf_counter() - started, cpu_seconds(pid) - cpu
        if connection is not None:
            connection[1].close()
    return result


@dataclass
class Storm:
    """What the clients of one storm got, and the write batch made while the subscribed ones stayed."""

    streams: list[StreamOutcome]
    writes: WriteBatch
    # Epoch seconds: the clients sent their requests, every one had its answer, the write batch ended.
    began: float
    answered: float
    ended: float
    # The sidecar's CPU time from the first request to the last answer (0 without its pid).
    connecting_cpu_seconds: float

    def count(self, status: int) -> int:
        """The clients answered with this status."""
        return sum(1 for s in self.streams if s.status == status)


async def storm(port: int, streams: int, updates: int, batch: int, generation: int, pid: int | None = None) -> Storm:
    """``streams`` clients of GET /events at once (every other one never reads); once each has its answer, the
    write batch; then they all go. ``pid``: the sidecar's, for its CPU time."""
    leave, all_answered = asyncio.Event(), asyncio.Event()
    # A reading client expects ": subscribed" and one event per update.
    outcomes = [StreamOutcome(reading=i % 2 == 0, expected=updates + 1) for i in range(streams)]
    waiting = [streams]

    def one_answered() -> None:
        waiting[0] -= 1
        if not waiting[0]:
            all_answered.set()

    began, cpu = time.time(), cpu_seconds(pid)
    clients = [asyncio.create_task(stream(port, outcome, one_answered, leave)) for outcome in outcomes]
    await all_answered.wait()  # each client's own wait is bounded
    answered, connecting_cpu = time.time(), cpu_seconds(pid) - cpu
    writes = await write_batch(port, updates, batch, generation, pid)
    ended = time.time()
    # The last events on their way to the reading subscribers (bounded: a slow one is the sidecar's to drop).
    readers = [asyncio.ensure_future(o.got_all.wait()) for o in outcomes if o.reading and o.status == 200]
    if readers:
        _, late = await asyncio.wait(readers, timeout=SETTLE_S)
        for reader in late:
            reader.cancel()
    leave.set()
    await asyncio.gather(*clients)
    return Storm(outcomes, writes, began, answered, ended, connecting_cpu)


async def sidecar_metrics(port: int) -> dict[str, float]:
    """The sidecar's /metrics now: each sample (name and labels as written) and its value."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        text = (await reader.read()).decode()
    finally:
        writer.close()
    return {name: float(value) for name, value in re.findall(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", text, re.MULTILINE)}


async def until_no_subscriber(port: int) -> None:
    """Wait, bounded, until the sidecar has let every client go."""
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while (await sidecar_metrics(port)).get("status_events_subscribers") != 0:
        if time.monotonic() > deadline:
            raise TimeoutError("the sidecar still has subscribers")
        await asyncio.sleep(0.1)


# ----------------------------------------------------------------------------- the sidecar


def raise_open_files(needed: int) -> None:
    """This process's limit of open files raised to ``needed`` (within its hard limit): one per client."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(needed, hard),
                                                    hard))


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
    """The Markdown table of the run: medians of the rounds, the probes of every round together."""
    print(f"{args.streams:,} clients of GET /events (every other one never reads), a write batch of {args.updates:,} "
          f"task statuses in POST /statuses?wait=true requests of {args.batch}; {len(rounds)} round(s), medians\n")
    print("| phase | write batch (s) | ratio | sidecar CPU (s) | ratio | writes not 2xx | /health p50 (ms) | p99 (ms) "
          "| max (ms) | /health not 200 | sidecar RSS after (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def probes(phase: list[Probes]) -> str:
        merged = Probes(sorted(s for p in phase for s in p.seconds), sum(p.not_ok for p in phase))
        return (f"{merged.quantile_ms(0.5):.1f} | {merged.quantile_ms(0.99):.1f} | {merged.quantile_ms(1.0):.1f} | "
                f"{merged.not_ok} of {len(merged.seconds)}")

    def writes(batches: list[WriteBatch], baseline: list[WriteBatch]) -> str:
        seconds = statistics.median(b.seconds for b in batches)
        cpu = statistics.median(b.cpu_seconds for b in batches)
        ratio = seconds / statistics.median(b.seconds for b in baseline)
        cpu_ratio = cpu / statistics.median(b.cpu_seconds for b in baseline)
        failed = sum(1 for b in batches for status in b.statuses if not 200 <= status < 300)
        return f"{seconds:.2f} | {ratio:.2f} | {cpu:.2f} | {cpu_ratio:.2f} | {failed}"

    baselines = [r.baseline for r in rounds]
    connecting_cpu = statistics.median(r.storm.connecting_cpu_seconds for r in rounds)
    print(f"| baseline: no subscriber | {writes(baselines, baselines)} | {probes([r.baseline_probes for r in rounds])} "
          f"| {statistics.median(r.baseline_rss for r in rounds):.0f} |")
    print(f"| storm: {args.streams:,} clients connecting | | | {connecting_cpu:.2f} | | | "
          f"{probes([r.connecting_probes for r in rounds])} | |")
    print(f"| storm: write batch, the subscribed clients there | {writes([r.storm.writes for r in rounds], baselines)} "
          f"| {probes([r.writing_probes for r in rounds])} | {statistics.median(r.storm_rss for r in rounds):.0f} |")
    last = rounds[-1].storm
    readers = [s for s in last.streams if s.status == 200 and s.reading]
    print(f"\nclients (last round): subscribed {last.count(200)}, refused (503) {last.count(503)} "
          f"(with Retry-After: {sum(1 for s in last.streams if s.status == 503 and s.retry_after)}), "
          f"closed without an answer (shed at the connection limit) or none in time "
          f"{len(last.streams) - last.count(200) - last.count(503)}")
    events = statistics.median(s.frames - 1 for s in readers) if readers else 0  # less the ": subscribed" line
    print(f"events per reading subscriber (last round): {events:,.0f} median, of {args.updates:,} written")
    print(f"sidecar peak RSS (VmHWM): {peak_mb:.0f} MB")

if __name__ == "__main__":
    main()
