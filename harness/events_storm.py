"""Clients of ``GET /events`` by the thousand against a running sidecar, a probe process asking ``GET /health``
throughout, and write batches beside them: the machinery of bench/events_storm.py, and of the test that runs its
storm (tests/test_events.py).

    python -m harness.events_storm --probe PORT    # the probe process (Probe starts it)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness import ROOT
from harness.http import read_response, request_bytes

PROBE_INTERVAL_S = 0.02


# The probe process's first line once it probes, and how long its start may take (a loaded machine, a cold import).
PROBING = "probing"
PROBE_START_TIMEOUT_S = 120.0


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


def probe(port: int) -> None:
    """GET /health every PROBE_INTERVAL_S on a new connection, until a line comes on stdin; then print each probe as
    [start (epoch seconds), status (0: no answer), seconds], as JSON. A line ``probing`` goes first, once the first
    probe is made, so that its starter knows the probes run (``Probe``)."""
    samples: list[tuple[float, int, float]] = []
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    while not samples or not select.select([sys.stdin], [], [], 0)[0]:
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
        if len(samples) == 1:
            print(PROBING, flush=True)
        time.sleep(PROBE_INTERVAL_S)
    print(json.dumps(samples))


class Probe:
    """The probe process: its samples once stopped."""

    def __init__(self, port: int) -> None:
        """Start the probe process and return once it made its first probe: on a loaded machine starting a Python
        process takes seconds, and a phase that passed before the probes began had none (a whole-suite run at a load
        of 35 saw the quick storm's baseline phase with no probe)."""
        self._process = subprocess.Popen([sys.executable, "-m", "harness.events_storm", "--probe", str(port)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self._process.stdout is not None
        deadline = time.monotonic() + PROBE_START_TIMEOUT_S
        while not select.select([self._process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if time.monotonic() >= deadline:
                self._process.kill()
                self._process.wait()
                raise RuntimeError(f"the /health probe process made no probe within {PROBE_START_TIMEOUT_S:.0f} s")
        line = self._process.stdout.readline().strip()
        if line != PROBING:
            self._process.wait()
            raise RuntimeError(f"the /health probe process did not start probing (it said {line!r}, exit code "
                               f"{self._process.returncode})")

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
        """The probes in flight from ``start`` to ``end`` (epoch seconds): started before ``end`` and answered (or given
        up) at or after ``start``. A probe that waited through a phase is that phase's, though it started before it: the
        connecting phase of a quick storm (150 clients) can pass within one probe that waits in the listen queue behind
        them, and a phase counted by the probes' starts alone then had none."""
        within = [(status, seconds) for started, status, seconds in samples
                  if started < end and started + seconds >= start]
        return cls(sorted(seconds for _, seconds in within), sum(1 for status, _ in within if status != 200))

    def quantile_ms(self, q: float) -> float:
        """The q-quantile of the probes' time, in ms (nearest rank)."""
        if not self.seconds:
            return float("nan")
        return self.seconds[min(len(self.seconds) - 1, int(len(self.seconds) * q))] * 1000


@dataclass
class StreamOutcome:
    """One GET /events client: whether it reads, its answer (None: none yet; 0: no answer), what it got; ``got_all``
    is set once a reading one has ``expected`` frames."""

    reading: bool
    expected: int
    status: int | None = None
    # Why a client got no answer (status 0): the exception, and its errno if any.
    error: str | None = None
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
    except (OSError, TimeoutError, ConnectionError, IndexError, ValueError) as e:
        if outcome.status is None:
            outcome.status = 0
            outcome.error = f"{type(e).__name__}: {e}"
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


def raise_open_files(needed: int) -> None:
    """This process's limit of open files raised to ``needed`` (within its hard limit): one per client."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(needed, hard),
                                                    hard))


if __name__ == "__main__":
    probe(int(sys.argv[sys.argv.index("--probe") + 1]))
