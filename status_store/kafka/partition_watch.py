"""The signal that a held partition can take writes again, read from the cluster while partitions are held.

A held partition is probed on a backoff schedule (up to ``status.storage.retry.probe.max.backoff.ms``, 1 s): a
partition that recovered waits for its next probe. Meanwhile the cluster says when it has recovered: the
partition has a leader, and at least ``min.insync.replicas`` replicas in sync (the topic's setting). While some
partition is held, ``PartitionWatch`` reads both every ``WATCH_INTERVAL_S`` (a Metadata and a DescribeConfigs
request, not a write) and, when what it reads of a held partition changes to writable, tells its owner at once
(``writable_again``): the probe goes then, not at its time. What it cannot read (no permission to describe the
topic's configuration) it does without: the leader and the in-sync replicas alone then.

It also reads the topic's id, every ``TOPIC_ID_INTERVAL_S`` while partitions are held and every
``TOPIC_ID_IDLE_INTERVAL_S`` else: a new id says the topic was deleted and created again under its name, which
librdkafka's clients do not follow (its issue #4898: a producer from before times out every write to a partition whose
leader moved, a reader from before fetches some partitions in vain, both for good), and the owner is told
(``recreated``) to renew them. The idle reading is what tells a sidecar that writes nothing itself (it reads a worker's
own writes).

A held partition the cluster has said is writable for ``stuck_after_s`` without a break, its writes failing all the
while, is the client's, not the cluster's: librdkafka can keep a stale leader for good (its issues #4898 and #4976
among others), where Java's client (Connect's) follows the metadata. The owner is told (``stuck``) to write through a
new producer; if the partitions stay held, again after twice as long each time (up to ``STUCK_MAX_S``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource

from .client_log import client_logging
from .settings import list_topics

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.2
READ_TIMEOUT_S = 2.0
# Probes a recovery read from the cluster may send, one per reading while the last one failed (the metadata can say
# writable a moment before the leader applies it); then the probes' own schedule again, until the next change.
SIGNALS_PER_CHANGE = 3
# A configuration the cluster would not describe is asked for again after this long.
CONFIGS_RETRY_S = 60.0
# How often the topic's id is read while partitions are held, and while none is (from the start on).
TOPIC_ID_INTERVAL_S = 1.0
TOPIC_ID_IDLE_INTERVAL_S = 10.0
# What a broker without topic ids (before Kafka 2.8) answers for one: no id.
NO_TOPIC_ID = (0, 0)
# The longest a held partition the cluster says is writable waits for its producer's next renewal.
STUCK_MAX_S = 600.0


class Reading(NamedTuple):
    """What the cluster says of one partition."""

    leader: int
    in_sync: int
    min_in_sync: int | None

    @property
    def writable(self) -> bool:
        """A leader, and enough replicas in sync (as far as known)."""
        return self.leader >= 0 and (self.min_in_sync is None or self.in_sync >= self.min_in_sync)


class PartitionWatch:
    """Reads the held partitions' state from the cluster and says when one became writable."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str],
                 held: Callable[[], Sequence[int]], writable_again: Callable[[int], object],
                 recreated: Callable[[], object] = lambda: None, stuck: Callable[[], object] = lambda: None,
                 stuck_after_s: float = 20.0) -> None:
        """``recreated``: called when the topic's id changed (it was deleted and created again). ``stuck``: called
        when a held partition has been writable by the cluster's word for ``stuck_after_s`` without a break."""
        self.topic = topic
        # Never creates the topic; the client's log lines go where every client's go.
        self._settings: dict[str, Any] = {**client_configs, "bootstrap.servers": bootstrap_servers,
                                          "allow.auto.create.topics": False, **client_logging(bootstrap_servers)}
        self._held = held
        self._writable_again = writable_again
        self._recreated = recreated
        self._stuck, self._stuck_after_s = stuck, stuck_after_s
        # Per held partition, the loop time since which every reading has said it is writable; how long that must
        # last for a renewal now (doubled by each renewal while partitions stay held).
        self._writable_since: dict[int, float] = {}
        self._stuck_bound_s = stuck_after_s
        # The topic's id as last read (None: not read yet), the loop time it was last asked for, and the reading under
        # way (its own task: a broker that does not answer holds up none of the held partitions' readings).
        self._topic_id: str | None = None
        self._topic_id_asked = -TOPIC_ID_IDLE_INTERVAL_S
        self._topic_id_reading: asyncio.Task[None] | None = None
        self._admin: AdminClient | None = None
        self._last: dict[int, Reading] = {}
        # Signals left for a held partition's latest change to writable.
        self._left: dict[int, int] = {}
        # The loop time before which the topic's configuration is not asked for again (it could not be read).
        self._configs_after = 0.0
        self._task: asyncio.Task[None] | None = None
        # Signals given (for the metrics and the tests).
        self.signals = 0

    def start(self) -> None:
        """Watch from now on (on the running event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Watch no more."""
        tasks = [task for task in (self._task, self._topic_id_reading) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = self._topic_id_reading = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            held = set(self._held())
            loop = asyncio.get_running_loop()
            interval = TOPIC_ID_INTERVAL_S if held else TOPIC_ID_IDLE_INTERVAL_S
            reading_id = self._topic_id_reading is not None and not self._topic_id_reading.done()
            if not reading_id and loop.time() >= self._topic_id_asked + interval:
                self._topic_id_asked = loop.time()
                self._topic_id_reading = loop.create_task(self._check_topic_id())
            if not held:
                self._last.clear()
                self._left.clear()
                self._writable_since.clear()
                self._stuck_bound_s = self._stuck_after_s
                continue
            try:
                readings = await self._read()
            except Exception as e:  # the brokers away: the probes go on their schedule meanwhile
                log.debug("Could not read the state of %s's held partitions: %s", self.topic, e)
                self._writable_since.clear()  # not read: no longer "without a break"
                continue
            now = loop.time()
            for partition in sorted(held):
                reading = readings.get(partition)
                if reading is None:
                    self._writable_since.pop(partition, None)
                    continue
                before = self._last.get(partition)
                self._last[partition] = reading
                if not reading.writable:
                    self._left.pop(partition, None)
                    self._writable_since.pop(partition, None)
                    continue
                self._writable_since.setdefault(partition, now)
                if before is not None and reading != before:
                    log.debug("Partition %d of %s can take writes again (%s): probing it now", partition, self.topic,
                              reading)
                    self._left[partition] = SIGNALS_PER_CHANGE
                if self._left.get(partition, 0) > 0 and self._writable_again(partition):
                    self.signals += 1
                    self._left[partition] -= 1
            for partition in set(self._last) - held:
                del self._last[partition]
                self._left.pop(partition, None)
                self._writable_since.pop(partition, None)
            self._renew_if_stuck(now)

    def _renew_if_stuck(self, now: float) -> None:
        stuck = sorted(p for p, since in self._writable_since.items() if now - since >= self._stuck_bound_s)
        if stuck:
            log.warning("Partition(s) %s of %s held for %.0f s while the cluster says they can take writes (a leader, "
                        "enough replicas in sync): writing through a new producer (a client can keep a stale leader)",
                        ", ".join(map(str, stuck)), self.topic, self._stuck_bound_s)
            self._writable_since.clear()
            self._stuck_bound_s = min(2 * self._stuck_bound_s, max(STUCK_MAX_S, self._stuck_after_s))
            self._tell(self._stuck)

    def _tell(self, owner: Callable[[], object]) -> None:
        """Call the owner; what it raises is logged, and the watch goes on."""
        try:
            owner()
        except Exception:
            log.exception("Renewing the clients of %s failed; the watch goes on", self.topic)

    async def _read(self) -> dict[int, Reading]:
        if self._admin is None:
            self._admin = AdminClient(self._settings)
        metadata = await list_topics(self._admin, self.topic, READ_TIMEOUT_S)
        described = metadata.topics.get(self.topic)
        if described is None or described.error is not None:
            return {}
        min_in_sync = await self._min_in_sync()
        return {number: Reading(partition.leader, len(partition.isrs), min_in_sync)
                for number, partition in described.partitions.items()}

    async def _check_topic_id(self) -> None:
        """Read the topic's id; tell the owner when it is not the one last read. No id (a broker before Kafka 2.8)
        is no reading."""
        try:
            if self._admin is None:
                self._admin = AdminClient(self._settings)
            future = self._admin.describe_topics(TopicCollection([self.topic]),
                                                 request_timeout=READ_TIMEOUT_S)[self.topic]
            async with asyncio.timeout(READ_TIMEOUT_S + 1):
                found = (await asyncio.wrap_future(future)).topic_id
        except Exception as e:  # the brokers away, the topic gone for now, no permission: read again later
            log.debug("Could not read the id of %s: %s", self.topic, e)
            return
        if (found.get_most_significant_bits(), found.get_least_significant_bits()) == NO_TOPIC_ID:
            return
        topic_id = str(found)
        if self._topic_id is not None and topic_id != self._topic_id:
            log.warning("%s was deleted and created again (its id was %s, now %s): renewing the clients that write "
                        "and read it", self.topic, self._topic_id, topic_id)
            self._writable_since.clear()  # renewed now: a held partition's wait for a renewal starts again
            self._tell(self._recreated)
        self._topic_id = topic_id

    async def _min_in_sync(self) -> int | None:
        """The topic's ``min.insync.replicas`` (its own, or the brokers' default); None when it cannot be read (no
        permission to describe the topic, a broker without the API): asked again a minute later."""
        loop = asyncio.get_running_loop()
        if self._admin is None or loop.time() < self._configs_after:
            return None
        resource = ConfigResource("TOPIC", self.topic)
        try:
            future = self._admin.describe_configs([resource], request_timeout=READ_TIMEOUT_S)[resource]
            async with asyncio.timeout(READ_TIMEOUT_S + 1):
                entries = await asyncio.wrap_future(future)
            entry = entries.get("min.insync.replicas")
            return int(entry.value) if entry is not None and entry.value is not None else None
        except Exception as e:
            self._configs_after = loop.time() + CONFIGS_RETRY_S
            log.debug("Cannot read the configuration of %s (%s): a held partition's recovery is read from its "
                      "leader and in-sync replicas alone for %.0f s", self.topic, e, CONFIGS_RETRY_S)
            return None
