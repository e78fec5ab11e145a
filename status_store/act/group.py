"""Reading the Connect group's members on an interval (``group.id``, ``sidecar.workers.check.interval.ms``) into the
workers' liveness (``workers.Liveness``), telling who left and who came back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaException

from ..kafka.groups import CONNECT_PROTOCOL_TYPE, admin_client, read_group
from ..logs import RateLimit
from .workers import Liveness, Member

log = logging.getLogger(__name__)

READ_FAILURE_LOG_INTERVAL_S = 60.0
# Changes: the workers that left the group and those that came (back), at this time (seconds since the epoch).
Changes = Callable[[list[str], list[str], float], None]


class GroupWatch:
    """The group's members read every ``interval_s`` seconds (each read bounded by the same time, at most 10 s)."""

    def __init__(self, group: str, bootstrap_servers: str, client_configs: Mapping[str, str], interval_s: float,
                 liveness: Liveness, changed: Changes, named: Callable[[], Callable[[], Iterable[str]]],
                 clock: Callable[[], float] = time.time) -> None:
        """``named``: on the event loop, what gives on a thread the worker ids the statuses name now (a worker that
        left is forgotten once none does)."""
        self.group = group
        self.liveness = liveness
        self.read_failures = 0
        self._interval_s = interval_s
        self._changed = changed
        self._named = named
        self._clock = clock
        self._admin = admin_client(bootstrap_servers, client_configs)
        self._task: asyncio.Task[None] | None = None
        self._failure_log = RateLimit(READ_FAILURE_LOG_INTERVAL_S)
        self._warned_protocol = False
        self._warned_empty = False

    def start(self) -> None:
        """Read the group now, then every interval."""
        self._task = asyncio.create_task(self._run(), name=f"status-store-group-{self.group}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.read_once()
            except Exception:
                # A bug of ours must not end the reads for good (the group's members would be frozen as last read).
                held = self._failure_log.take()
                if held is not None:
                    more = f" ({held} more since the last one logged)" if held else ""
                    log.exception("Reading the Connect group %s (group.id) hit an error; reading again in %.0f s%s",
                                  self.group, self._interval_s, more)
            await asyncio.sleep(self._interval_s)

    async def read_once(self) -> None:
        """One read of the group, told to the liveness (a failed read changes nothing, and is logged and counted)."""
        try:
            read = await read_group(self._admin, self.group, min(10.0, max(1.0, self._interval_s)))
        except KafkaException as e:
            self._failed(str(e.args[0]) if e.args else repr(e))
            return
        if read.members and read.protocol_type != CONNECT_PROTOCOL_TYPE:
            if not self._warned_protocol:
                self._warned_protocol = True
                log.warning("The group %s (group.id) is a group of protocol type %r, not Connect's workers "
                            "(connect): no worker is marked gone", self.group, read.protocol_type)
            self._failed(f"protocol type {read.protocol_type!r}")
            return
        now = self._clock()
        first = self.liveness.first_read is None
        returning = self.liveness.remembered
        left, came = self.liveness.read((Member(m, metadata) for m, metadata in read.members), now)
        if first:
            log.info("Connect group %s: %d worker(s) in it (%s)", self.group, len(self.liveness.present),
                     ", ".join(sorted(self.liveness.present)) or "none")
        if self.liveness.seen_since is None and not self._warned_empty:
            named = await asyncio.to_thread(self._named())
            if named:
                self._warned_empty = True
                log.warning("The Connect group %s (group.id) has no member while statuses name %d worker(s) (%s): is "
                            "group.id the workers' own? No worker is marked gone until the group is seen with "
                            "members", self.group, len(set(named)), ", ".join(sorted(set(named))[:5]))
        for worker in left:
            log.warning("Worker %s left the Connect group %s: its statuses are marked 'worker gone' until Connect "
                        "reassigns them", worker, self.group)
        for worker in came:
            if worker in returning:
                log.info("Worker %s is in the Connect group %s again", worker, self.group)
            else:
                log.info("Worker %s joined the Connect group %s", worker, self.group)
        if left or came:
            self._changed(left, came, now)
        if self.liveness.departed:
            # The statuses' worker ids: a pass over every status, on a thread from a view of the cache.
            self.liveness.forget(await asyncio.to_thread(self._named()))

    def _failed(self, reason: str) -> None:
        self.read_failures += 1
        self.liveness.failed(self._clock())
        self._failure_log.log(log, logging.WARNING, "Cannot read the Connect group %s (group.id): %s; the workers "
                              "are marked as the last read said", self.group, reason)
