"""The workers of a Connect cluster as its group says (pure: no event loop, no Kafka client): which are members now,
which are gone and since when.

Connect's workers form a group (the worker file's ``group.id``) of protocol type ``connect``; the metadata each
member joins with is Connect's ``WorkerState`` (``ConnectProtocol`` v0, ``IncrementalCooperativeConnectProtocol``
v1 ``compatible`` and v2 ``sessioned``): an int16 version, then the worker's URL (an int16 length and UTF-8 bytes,
``http://127.0.0.1:8083/``), then the config offset and, from v1, the previous assignment. A worker's id in the
statuses is its advertised ``host:port``: the URL's.

A member that dies leaves the group after its ``session.timeout.ms``, but Connect reassigns its tasks only at the
delayed rebalance (``scheduled.rebalance.max.delay.ms``, 5 minutes by default): until then its statuses say RUNNING.
A worker that statuses name and that is not in the group is *gone*: since the first read without it (for one never
seen in the group, since the first read that listed members). Until a read has listed members nothing is gone: a
``group.id`` that names no group (a typo) would otherwise mark every worker gone.

The group answers a member's metadata only while it is Stable (during a rebalance it is empty): a member's URL is
remembered by its member id, which a worker keeps across rebalances.
"""

from __future__ import annotations

import struct
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_INT16 = struct.Struct(">h")


def worker_url(metadata: bytes) -> str | None:
    """The worker URL in a Connect member's metadata (``WorkerState``); None when it holds none (empty during a
    rebalance, or not Connect's)."""
    if len(metadata) < 4:
        return None
    (version,) = _INT16.unpack_from(metadata, 0)
    (length,) = _INT16.unpack_from(metadata, 2)
    if version < 0 or length < 0 or len(metadata) < 4 + length:
        return None
    try:
        return metadata[4:4 + length].decode("utf-8")
    except UnicodeDecodeError:
        return None


def worker_id(url: str) -> str | None:
    """A worker's id from its URL: ``host:port`` (Connect's worker id is its advertised host and port); None for a URL
    without both."""
    parsed = urllib.parse.urlsplit(url)
    try:
        port = parsed.port
    except ValueError:
        return None
    host = parsed.hostname
    if not host or port is None:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class Member:
    """A member of the group as a read lists it: its member id and the metadata it joined with (empty during a
    rebalance)."""

    member_id: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A worker as the group says: its URL (when known), whether it is a member now, since when it is gone."""

    worker_id: str
    url: str | None
    up: bool
    gone_since: float | None


class Liveness:
    """The group's members read on an interval: which workers are in it, which left and when.

    ``read(members, now)`` takes one read of the group (``now``: seconds since the epoch); ``failed(now)`` says a read
    failed (nothing changes: a worker is marked gone only on the group's word). Until a read lists members nothing is
    gone (``seen_since``).
    """

    def __init__(self) -> None:
        self.first_read: float | None = None
        # The first read that listed members: the group exists (None: not yet, nothing is gone).
        self.seen_since: float | None = None
        self.last_read: float | None = None
        self.last_failure: float | None = None
        # Each member's URL, by member id, as long as it is listed (its metadata is empty during a rebalance).
        self._urls: dict[str, str] = {}
        # The workers in the group now (by worker id), with their URLs.
        self._present: dict[str, str] = {}
        # The workers seen in the group that left it, and when (the first read without them).
        self._left: dict[str, tuple[str, float]] = {}
        # Members listed whose URL no read has given (they joined during a rebalance).
        self.unknown_members = 0
        # Reads that changed what the group says (its workers, their URLs, those that left): a view of the fleet
        # made before one is out of date.
        self.changes = 0

    def read(self, members: Iterable[Member], now: float) -> tuple[list[str], list[str]]:
        """One read of the group's members; returns the workers that left and those that came (back) with it."""
        listed: dict[str, str] = {}
        unknown = 0
        for member in members:
            url = worker_url(member.metadata) or self._urls.get(member.member_id)
            if url is None:
                unknown += 1
                continue
            listed[member.member_id] = url
        self._urls = listed
        self.unknown_members = unknown
        present: dict[str, str] = {}
        for url in listed.values():
            found = worker_id(url)
            if found is not None:
                present[found] = url
        left = [w for w in self._present if w not in present]
        came = [w for w in present if w not in self._present]
        if self.first_read is None:
            # Those named before the first read and not in the group are gone since it (``gone_since``).
            came = []
        if self.first_read is None or present != self._present or (present and self.seen_since is None):
            self.changes += 1
        if present and self.seen_since is None:
            self.seen_since = now
        for worker in left:
            self._left[worker] = (self._present[worker], now)
        for worker in present:
            self._left.pop(worker, None)
        self._present = present
        if self.first_read is None:
            self.first_read = now
        self.last_read = now
        return left, came

    def failed(self, now: float) -> None:
        """A read of the group failed: what the last read said stands."""
        self.last_failure = now

    def up(self, worker: str | None) -> bool | None:
        """Whether the worker is a member now; None before the first read (or for a status without a worker id)."""
        if self.first_read is None or worker is None:
            return None
        return worker in self._present

    def gone_since(self, worker: str | None) -> float | None:
        """Since when a worker is gone (None: it is a member, or nothing is known yet: no read has listed members)."""
        if self.seen_since is None or worker is None or worker in self._present:
            return None
        left = self._left.get(worker)
        return left[1] if left is not None else self.seen_since

    def gone(self, worker: str | None) -> bool:
        """Whether the worker is gone."""
        return self.gone_since(worker) is not None

    def forget(self, named: Iterable[str]) -> None:
        """Forget the workers that left and that no status names any more (so what is kept stays bounded)."""
        keep = set(named)
        for worker in [w for w in self._left if w not in keep]:
            del self._left[worker]
            self.changes += 1

    def copy(self) -> Liveness:
        """What this holds now, to read on another thread while this goes on changing."""
        copied = Liveness()
        copied.first_read, copied.last_read, copied.last_failure = self.first_read, self.last_read, self.last_failure
        copied.seen_since = self.seen_since
        copied._urls, copied._present, copied._left = self._urls.copy(), self._present.copy(), self._left.copy()
        copied.unknown_members, copied.changes = self.unknown_members, self.changes
        return copied

    def workers(self, named: Iterable[str] = ()) -> list[WorkerView]:
        """Every worker in the group, that left it and is still remembered, or named by a status (``named``), by id."""
        ids = dict.fromkeys([*self._present, *self._left, *named])
        return [WorkerView(w, self._present.get(w) or self._left.get(w, (None, 0.0))[0], w in self._present,
                           self.gone_since(w)) for w in sorted(ids)]

    def never_members(self, named: Iterable[str]) -> int:
        """How many of the worker ids statuses name (``named``) no read of the group has listed (nor its last read's
        leavers): a worker gone before the first read, or an id nobody's worker has."""
        return sum(1 for w in set(named) if w not in self._present and w not in self._left)

    @property
    def remembered(self) -> frozenset[str]:
        """The workers that left the group and are still remembered: one of them that comes is back, any other new."""
        return frozenset(self._left)

    @property
    def departed(self) -> int:
        """Workers that left the group and are still remembered."""
        return len(self._left)

    @property
    def present(self) -> Mapping[str, str]:
        """The workers in the group now, with their URLs."""
        return self._present
