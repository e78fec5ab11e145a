"""The answers about the whole fleet (``GET /fleet``, ``GET /connectors?expand=...``): built off the event loop, once
per change set, and the same bytes sent to every client that asks meanwhile.

At 100,000 connectors such an answer is tens of megabytes. Built on the event loop, one stalled the sidecar for
seconds (``/health`` went unanswered and the liveness probe restarted the pod); built once per client, 20 clients at
once held 20 copies (1.7 GB). Here:

- **Off the loop.** The loop only takes a view of what the cache holds (``StatusCache.view``: a few copies of its
  maps) and, for ``/fleet``, the events' position; a thread renders the JSON text from the view, in pieces, and
  compresses it (gzip, in zlib, which lets go of the interpreter's lock) as it goes: the whole text is never held.
- **Once per change set.** An answer is kept with the version it was built at (``StatusCache.version``, and the
  config topic's): a client finds it current, or joins the build in progress when that build is current for it, or
  waits for the next build, which starts when the one in progress ends, for every client that waits: a build is at
  the version of what it reads when it starts, never the older one of the client that starts it, so every client
  waiting then joins it (a client never gets an answer older than its request, and a burst of clients makes at most
  two builds of each answer, however often the statuses change meanwhile).
- **The same bytes.** Every client gets the one compressed copy: with ``Accept-Encoding: gzip`` as it is, otherwise
  decompressed as it is sent, on threads of their own (``DECOMPRESS_THREADS``; zlib lets go of the interpreter's
  lock), a bounded piece at a time: decompressed on the loop, 60 clients without gzip (curl's default) at 100,000
  connectors held ``/health`` for up to 12.6 s. Sent piece by piece behind the connection's flow control, so a
  client's buffers hold little of it.
- **A bound on builds at once** (``MAX_BUILDS``, all answers together, on threads of their own): past it a client
  that needs a new build is answered 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

# Builds running at once, all answers together: each holds a view and a compressor, and takes a core's share.
MAX_BUILDS = 2
# The compressor's level: fast (the build's time is the clients' wait), and JSON of statuses compresses well anyway.
GZIP_LEVEL = 1
# Text rendered before it is handed to the compressor, and the most sent per send.
PIECE_BYTES = 1 << 20
SEND_BYTES = 256 * 1024
# Threads decompressing answers for clients that do not take gzip, all answers together, and the most text each
# hands the loop at a time (sent in SEND_BYTES slices).
DECOMPRESS_THREADS = 2
DECOMPRESS_BYTES = 1 << 20
# gzip's wrapper for zlib.
_GZIP = 31

# What renders an answer: the pieces of its text, on a thread (made on the loop by ``Prepare``).
Render = Callable[[], Iterable[str]]
# What an answer's build does on the loop first: takes the view (and position) and returns the rendering.
Prepare = Callable[[], Render]
# The version of what an answer shows, now (it only grows).
Version = Callable[[], int]


class TooManyBuilds(Exception):
    """As many answers as allowed are being built; ``retry_after_s`` says when to try again."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"{MAX_BUILDS} answers about the whole fleet are being built")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Built:
    """An answer built: its gzip bytes, the length of its text, the version it holds."""

    gzipped: bytes
    length: int
    version: int


@dataclass(slots=True)
class _Answer:
    """One answer (per kind and parameters): the last built and the build in progress."""

    built: Built | None = None
    building: asyncio.Future[Built] | None = None
    building_version: int = -1


@dataclass(slots=True)
class SharedAnswers:
    """The answers about the whole fleet of one app."""

    max_builds: int = MAX_BUILDS
    _answers: dict[Hashable, _Answer] = field(default_factory=dict)
    _running: int = 0
    # The builds' own threads (none idle until the first build): never queued behind other work on the loop's
    # default executor.
    _threads: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(MAX_BUILDS, "fleet-answer"))
    # Decompressing for clients that do not take gzip: never on the loop, never queued behind builds.
    decompressing: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(DECOMPRESS_THREADS, "fleet-answer-text"))
    refused: int = 0
    builds: dict[str, int] = field(default_factory=dict)
    last_build_s: float = 1.0
    # Clients waiting for a build now.
    waiting: int = 0

    async def get(self, kind: str, key: Hashable, version: Version, prepare: Prepare) -> Built:
        """The answer ``(kind, key)`` at the version it has now or newer: the one built, the build in progress, or a
        new build (``prepare`` on the loop, its rendering on a thread) at the version it has when the build starts.
        ``TooManyBuilds`` when a new build is needed and ``max_builds`` run."""
        answer = self._answers.setdefault((kind, key), _Answer())
        wanted = version()
        self.waiting += 1
        try:
            while True:
                if answer.built is not None and answer.built.version >= wanted:
                    return answer.built
                building = answer.building
                if building is not None:
                    if answer.building_version >= wanted:
                        return await asyncio.shield(building)
                    # Older than this request: the next build starts when it ends (by the first who finds none).
                    await asyncio.wait((building,))
                    continue
                if self._running >= self.max_builds:
                    self.refused += 1
                    raise TooManyBuilds(max(1, math.ceil(self.last_build_s)))
                # The build reads what is there now: its version, not this client's older one, so that every
                # client waiting now (they asked at versions up to this one) joins it.
                now = version()
                answer.building_version = now
                answer.building = asyncio.ensure_future(self._build(kind, answer, now, prepare()))
        finally:
            self.waiting -= 1

    async def _build(self, kind: str, answer: _Answer, version: int, render: Render) -> Built:
        self._running += 1
        self.builds[kind] = self.builds.get(kind, 0) + 1
        started = time.monotonic()
        try:
            gzipped, length = await asyncio.get_running_loop().run_in_executor(self._threads, compressed, render)
        finally:
            self._running -= 1
            answer.building = None
        self.last_build_s = time.monotonic() - started
        built = Built(gzipped, length, version)
        if answer.built is None or answer.built.version < version:
            answer.built = built
        return built


def compressed(render: Render) -> tuple[bytes, int]:
    """The rendered text, gzip-compressed as it comes, and its length in bytes (UTF-8)."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP)
    out: list[bytes] = []
    length = 0
    pending: list[str] = []
    pending_chars = 0
    for piece in render():
        pending.append(piece)
        pending_chars += len(piece)
        if pending_chars >= PIECE_BYTES:
            data = "".join(pending).encode()
            length += len(data)
            out.append(compressor.compress(data))
            pending, pending_chars = [], 0
    data = "".join(pending).encode()
    length += len(data)
    out.append(compressor.compress(data))
    out.append(compressor.flush())
    return b"".join(out), length


def accepts_gzip(request: Request) -> bool:
    """Whether the client takes a gzip-encoded answer (``Accept-Encoding: gzip``, not with ``q=0``)."""
    for coding in request.headers.get("accept-encoding", "").lower().split(","):
        name, _, parameters = coding.strip().partition(";")
        if name.strip() in ("gzip", "*"):
            quality = parameters.strip().removeprefix("q=")
            return not (parameters.strip().startswith("q=") and _zero(quality))
    return False


def _zero(quality: str) -> bool:
    try:
        return float(quality) == 0
    except ValueError:
        return False


class SharedAnswerResponse(Response):
    """A built answer, sent piece by piece: its gzip bytes as they are, or decompressed as it goes on
    ``decompressing``'s threads."""

    media_type = "application/json"

    def __init__(self, built: Built, gzip: bool, decompressing: ThreadPoolExecutor) -> None:
        headers = {"vary": "Accept-Encoding"}
        if gzip:
            headers["content-encoding"] = "gzip"
        super().__init__(headers=headers)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.raw_headers.append((b"content-length", str(len(built.gzipped) if gzip else built.length).encode()))
        self._built, self._gzip, self._decompressing = built, gzip, decompressing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            if self._gzip:
                for piece in _slices(self._built.gzipped):
                    if gone.done():
                        return  # the client went away: nothing more is sent
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            else:
                loop = asyncio.get_running_loop()
                text = _decompressed(self._built.gzipped)
                while not gone.done():  # the client went away: nothing more is decompressed or sent
                    piece = await loop.run_in_executor(self._decompressing, next, text, b"")
                    if not piece:
                        break
                    for part in _slices(piece):
                        await send({"type": "http.response.body", "body": part, "more_body": True})
            if not gone.done():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _slices(data: bytes) -> Iterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), SEND_BYTES):
        yield bytes(view[start:start + SEND_BYTES])


def _decompressed(data: bytes) -> Iterator[bytes]:
    """The text of gzip bytes, at most ``DECOMPRESS_BYTES`` at a time (each piece a bounded piece of work)."""
    decompressor = zlib.decompressobj(_GZIP)
    view = memoryview(data)
    at = 0
    while True:
        if decompressor.unconsumed_tail:
            piece = decompressor.decompress(decompressor.unconsumed_tail, DECOMPRESS_BYTES)
        elif at < len(data):
            piece = decompressor.decompress(view[at:at + DECOMPRESS_BYTES], DECOMPRESS_BYTES)
            at += DECOMPRESS_BYTES
        else:
            piece = decompressor.flush()
            if piece:
                yield piece
            return
        if piece:
            yield piece


class SharedAnswersCollector(Collector):
    """``status_fleet_answer_builds_total`` by answer, and the clients refused at the bound on builds."""

    def __init__(self, answers: SharedAnswers) -> None:
        self._answers = answers

    def collect(self) -> Iterator[Metric]:
        builds = CounterMetricFamily("status_fleet_answer_builds", "Answers about the whole fleet built (GET /fleet, "
                                     "GET /connectors?expand=...), by answer: once per change set, shared by every "
                                     "client asking meanwhile.", labels=["answer"])
        for kind, count in sorted(self._answers.builds.items()):
            builds.add_metric([kind], count)
        yield builds
        yield CounterMetricFamily("status_fleet_answer_refused", "Clients refused (503) because as many answers about "
                                  "the whole fleet as allowed were being built.", value=self._answers.refused)
        yield GaugeMetricFamily("status_fleet_answer_last_build_seconds", "How long the last answer about the whole "
                                "fleet took to build (off the event loop).", value=self._answers.last_build_s)
        yield GaugeMetricFamily("status_fleet_answer_waiting", "Clients waiting now for an answer about the whole "
                                "fleet to be built.", value=self._answers.waiting)
