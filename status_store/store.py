"""StatusStore: Connect's status backing store semantics on a Kafka log.

Writes follow Connect's ``KafkaStatusBackingStore``: every write moves its writer's generation (Connect keeps one
per worker's store: here one per writer, an agent's session or, for a write that names none, its status's worker);
``put_safe`` drops a write that could overwrite a newer status of another worker. Connect's per-key write sequence
(a retry abandoned once its key was written again) is the retry queue's slot per key here: a newer write takes an
older one's place. Reads come from a ``StatusCache`` (cache.py, Connect's read rules) that the reader feeds: it
changes only when a record is read back from the topic, so a write is visible after read-back.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Message

from .config import StoreConfig
from .connect import codec
from .connect.cache import CacheEntry, StatusCache
from .connect.model import ConnectorStatus, Status, TaskId, TopicStatus, connector_key, task_key, topic_key
from .connect.record_limit import RecordLimit
from .durable.after_retry import AfterLastRetry, ExhaustedStats
from .durable.history import AppendLog, EventTopics
from .durable.replay import replay, tokens
from .durable.spool import Spool
from .durable.spool_file import SPOOL_KEY
from .errors import StoreClosedError, WriteRejectedError
from .kafka.late_writes import LateWrites
from .kafka.partition_watch import PartitionWatch
from .kafka.producer import TopicProducer
from .kafka.reader import TopicReader, status_records
from .kafka.topics import ensure_topic
from .retry.backoff import Random, RetryMode
from .retry.delivery import read_targets
from .retry.queue import RetryQueue
from .retry.updates import RetryListener, StatusUpdate, UpdateKind

log = logging.getLogger(__name__)

# A writer that holds its writes itself until their outcome (a worker's agent, which sends them again to a restarted
# sidecar, and writes through Connect's own store once its lease ends): asked before each send of its writes, it
# gives the reason not to send any more (its lease ended), or None. Its writes are not spooled (nor replayed after
# a crash) unless it hands them over for good (``Spool.adopt``).
Lease = Callable[[], str | None]

# Deprecated in this release and to be removed in the next: per-update retries lost to the default on every figure of
# bench/retry.py and bench/fleet.py measured in one sitting (docs/BENCHMARKS.md, "Per-update retries and the retry
# budget: deprecated"), and the budget exists only in that mode.
DEPRECATED_PER_UPDATE = ("status.storage.retry.mode=per-update is deprecated and will be removed in the next release "
                         "(the default, partition, sent fewer Produce requests, recovered sooner and used less memory "
                         "in every benchmark: docs/BENCHMARKS.md); remove the setting")
DEPRECATED_BUDGET = ("status.storage.retry.budget.max.tokens is deprecated with status.storage.retry.mode=per-update "
                     "and will be removed in the next release (a held partition already sends one probe at a time); "
                     "remove the status.storage.retry.budget.* settings")


def deprecations(config: StoreConfig) -> list[str]:
    """The deprecated settings this configuration sets, each as the warning the store logs at its start."""
    retry = config.retry
    found = [DEPRECATED_PER_UPDATE] if retry.mode is RetryMode.PER_UPDATE else []
    if retry.budget.enabled:
        found.append(DEPRECATED_BUDGET)
    return found


# Of the stop's bound, what is kept for closing the clients and the spool once the outcomes are awaited (at most half
# of it).
CLOSE_RESERVE_S = 0.5
# When the spool cannot be written, writes are refused with this Retry-After (its commits are retried after a wait
# from 0.1 s to 2 s, and its settled rows go as Kafka takes the writes: a freed disk takes writes again soon).
SPOOL_RETRY_AFTER_S = 1.0
# A held partition the cluster says can take writes for this many delivery timeouts is written through a new producer.
STUCK_DELIVERY_TIMEOUTS = 2


@dataclass(frozen=True, slots=True)
class StoreParts:
    """The parts of a status store, built in dependency order by ``build``."""

    cache: StatusCache
    record_limit: RecordLimit
    spool: Spool | None
    reader: TopicReader
    producer: TopicProducer
    queue: RetryQueue
    events: EventTopics
    after: AfterLastRetry
    watch: PartitionWatch
    late: LateWrites


def build(config: StoreConfig, bootstrap_servers: str, rng: Random = random.random) -> StoreParts:
    """Every part of a store, each made after what it needs, the status queue's listeners subscribed in their order."""
    retry = config.retry
    # What the reader has read back, with Connect's read rules: every read goes here.
    cache = StatusCache()
    spool = Spool(config.spool_path, tokens=tokens(cache)) if config.spool_path is not None else None
    late: LateWrites | None = None

    def read(records: Sequence[Message]) -> None:
        cache.apply(status_records(records))
        if late is not None:
            late.read(records)

    reader = TopicReader(config.topic, bootstrap_servers, config.client_configs, read)
    producer = TopicProducer(config.topic, bootstrap_servers, config.client_configs, retry.delivery_timeout_ms,
                             on_restart=reader.restart)
    # A write given up that may still land is watched, and undone if it lands late over a newer record of its key.
    late = LateWrites(config.topic, producer.send_written, _call_later,
                      lambda partition: max(producer.written_to(partition), reader.applied_to(partition)) - 1,
                      max_watches=config.late_write_watches_max, watch_age_s=config.late_write_watch_ms / 1000)
    producer.on_given_up = late.given_up
    # Held partitions are Kafka's: keys are placed as Java's partitioner (and so Connect) places them.
    queue = RetryQueue(producer.send, retry.policy(rng, budgeted=True), name=config.topic, route=producer.partition_of)
    if spool is not None:
        queue.subscribe(spool)
    # The event topics retry like status writes, but outside the status writes' retry budget and bound; the history
    # listens to the status queue.
    events = EventTopics(config, bootstrap_servers, retry.policy(rng, budgeted=False), queue)
    # Decides what becomes of an update after its last retry, then settles its spool row.
    after = AfterLastRetry(config, bootstrap_servers, queue, events.dead_letters, spool, cache.note_written)
    queue.subscribe(after)
    # While partitions are held, the cluster's word that one can take writes again sends its probe at once.
    # A topic created again under its name (a new id) is written and read with new clients, and a partition held
    # while the cluster says it can take writes is written through a new producer (partition_watch.py): past two
    # delivery timeouts, an attempt in flight to a leader that moved has failed and the next one gone to the new one.
    watch = PartitionWatch(config.topic, bootstrap_servers, config.client_configs,
                           lambda: queue.held_partitions, queue.writable_again,
                           recreated=lambda: _renew_clients(producer, reader),
                           stuck=lambda: producer.renew("the one before failed writes the cluster could take"),
                           stuck_after_s=STUCK_DELIVERY_TIMEOUTS * retry.delivery_timeout_ms / 1000)
    return StoreParts(cache, RecordLimit.of(config.client_configs, config.topic_configs), spool, reader, producer,
                      queue, events, after, watch, late)


def _renew_clients(producer: TopicProducer, reader: TopicReader) -> None:
    producer.renew("the topic was created again", log_started_over=True)
    for partition in reader.partitions:
        reader.restart(partition)


def _call_later(delay: float, callback: Callable[[], None]) -> object:
    return asyncio.get_running_loop().call_later(delay, callback)


class StatusStore:
    """Connector, task and topic statuses kept in Connect's compacted status topic."""

    def __init__(self, config: StoreConfig, bootstrap_servers: str,
                 listeners: Sequence[RetryListener] = (), rng: Random = random.random) -> None:
        """``listeners``: told of every status update (``RetryQueue.subscribe``), after the store's own."""
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        # Each writer's generation while it has writes pending (only a pending write's retry is judged by it): as
        # many entries as writers with pending writes, each gone with its writer's last pending write.
        self._writers: weakref.WeakValueDictionary[tuple[str, str | None], _Writer] = weakref.WeakValueDictionary()
        # Set by stop(): whether the spool keeps what the stop cut short, for the next start to replay.
        self.kept_at_stop = False
        # Writes refused because the spool could not be written.
        self.spool_rejected_total = 0
        # Set when the service begins to stop: waits for outcomes (``?wait=true``) end at once.
        self._stopping = asyncio.Event()
        parts = build(config, bootstrap_servers, rng)
        self._cache, self.record_limit, self._spool = parts.cache, parts.record_limit, parts.spool
        self._reader, self._producer, self._queue = parts.reader, parts.producer, parts.queue
        self._events, self._after, self._watch = parts.events, parts.after, parts.watch
        self.late_writes = parts.late
        for listener in listeners:
            self._queue.subscribe(listener)

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Set up the topic and read it to the end; bounded by ``sidecar.startup.timeout.ms``."""
        cfg = self.config
        for warning in deprecations(cfg):
            log.warning(warning)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.startup_timeout_s
        async with asyncio.timeout(cfg.startup_timeout_s):
            await ensure_topic(self.bootstrap_servers, cfg.client_configs, cfg.topic, cfg.partitions,
                               cfg.replication_factor, cfg.topic_configs, cfg.startup_timeout_s)
        await self._events.start(deadline)
        # One bound for the whole start: reading to the end gets what the topic set-up left.
        await self._producer.start(max(0.001, deadline - loop.time()))
        try:
            await self._reader.start(max(0.001, deadline - loop.time()))
        except BaseException:
            await self._producer.stop(0.0)
            raise
        self._watch.start()
        if self._spool is not None:
            replay(self._spool, self._cache, self._send_status, self._submit, self._queue.supersede)
        log.info("Status store ready: topic %s, %d partitions, %d connectors cached",
                 cfg.topic, len(self._producer.partitions), len(self._cache.connectors()))

    def stopping(self) -> None:
        """The service begins to stop: waits for outcomes end now (their requests are answered that the store is
        stopping), so that they do not hold the stop."""
        self._stopping.set()

    async def stop(self, timeout: float | None = None) -> list[StatusUpdate]:
        """Settle pending updates, then close, all within ``timeout`` seconds (default ``sidecar.shutdown.timeout.ms``;
        never longer: KAFKA-15563): the outcomes are awaited for that less ``CLOSE_RESERVE_S``. Returns the updates
        that failed because the store stopped first (also logged). With a spool they are not lost
        (``kept_at_stop``): the spool keeps them, and the next start replays them."""
        self.stopping()
        loop = asyncio.get_running_loop()
        bound = self.config.shutdown_timeout_s if timeout is None else max(0.0, timeout)
        deadline = loop.time() + bound
        self._after.stop()
        self.late_writes.stop()
        await self._watch.stop()
        unsettled = await self._queue.stop(max(0.0, deadline - loop.time() - min(CLOSE_RESERVE_S, bound / 2)))
        # The outcomes above are events too: the append-only topics stop after the status queue.
        await self._events.stop(deadline)
        await self._producer.stop(0.0)
        await self._reader.stop()
        self.kept_at_stop = self._spool.close() if self._spool is not None else False
        return self._after.cut_short_at_stop(unsettled, self.kept_at_stop)

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster id, once started."""
        return self._producer.cluster_id

    @property
    def partitions(self) -> tuple[int, ...]:
        """The status topic's partitions, once started."""
        return self._producer.partitions

    @property
    def partition_signals(self) -> int:
        """Held partitions probed at once because the cluster said they could take writes again."""
        return self._watch.signals

    @property
    def queue(self) -> RetryQueue:
        """The retry queue of this store (for observing pending updates)."""
        return self._queue

    @property
    def event_logs(self) -> list[AppendLog]:
        """The append-only topics this store writes besides the status topic (history, dead letters)."""
        return self._events.logs

    def commit_spool(self) -> bool:
        """Make the spool's record of every update submitted so far durable now (the HTTP API does this
        before it answers; otherwise it happens at the end of the event loop's turn). False when the spool
        could not be written now (a full disk, another process holding it locked): the changes wait and are
        tried again, and new writes are refused meanwhile (``check_room``)."""
        return self._spool.commit() if self._spool is not None else True

    def check_room(self, keys: Sequence[str]) -> None:
        """Raise ``WriteRejectedError`` if writes of these keys cannot be accepted now (a batch asks once, before it
        submits anything): the spool cannot be written (what they hold could not be made durable), or they would
        grow the retry queue past ``status.storage.retry.max.pending`` (a write that replaces its key's waiting
        update takes no room)."""
        spool = self._spool
        if spool is not None and not spool.writable:
            self.spool_rejected_total += 1
            raise WriteRejectedError(f"the spool ({SPOOL_KEY}={spool.path}) cannot be written ({spool.failure}): "
                                     "an accepted write could not be made durable", SPOOL_RETRY_AFTER_S)
        self._queue.check_room(keys)

    @property
    def spool(self) -> Spool | None:
        """The durable spool, when ``status.storage.spool.path`` is set."""
        return self._spool

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until everything written to the topic before this call is in the cache."""
        await self._reader.read_to_end(timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every update submitted so far has an outcome (written, failed or superseded)."""
        await self._queue.flush(timeout)

    async def wait_visible(self, updates: Sequence[StatusUpdate], timeout: float | None = None) -> None:
        """Wait until these updates are settled and the written ones have been read back into the cache;
        ``StoreClosedError`` when the service begins to stop first."""
        visible = asyncio.ensure_future(self._visible(updates))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wait((visible, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not visible.done():
                visible.cancel()
        if not visible.done() or visible.cancelled():
            raise StoreClosedError("the service is stopping")
        visible.result()

    async def _visible(self, updates: Sequence[StatusUpdate]) -> None:
        await asyncio.gather(*(update.result() for update in updates))
        await self._reader.wait_applied(read_targets(u.outcome.delivery for u in updates if u.outcome is not None))

    async def read_your_writes(self, timeout: float | None = None) -> None:
        """Wait until every update submitted so far has an outcome and the written ones are read back."""
        async with asyncio.timeout(timeout):
            await self._queue.flush()
            await self._reader.wait_applied(self._producer.written_targets())

    # ----------------------------------------------------------------------------- writes

    def put(self, status: Status, lease: Lease | None = None, *, writer: str | None = None) -> StatusUpdate:
        """Write a status unconditionally. Never blocks; await ``result()`` on the update for its outcome.
        ``lease``: the write is its writer's (see ``Lease``). ``writer``: who writes it, as one Connect worker's store
        (an agent's session); None: the worker its status names. Its retries are abandoned, as Connect's, when that
        writer's generation has moved since (``generation_of``), never another writer's."""
        update = self._send_status(status, False, lease, writer)
        assert update is not None
        return update

    def put_safe(self, status: Status, lease: Lease | None = None, *,
                 writer: str | None = None) -> StatusUpdate | None:
        """Write a status unless it could overwrite a newer status of another worker, as Connect does: written when
        nothing is cached for the key, the cached status came from the same worker, or its generation is not newer;
        otherwise dropped (returns None). The check is repeated before every retry. ``lease``, ``writer``: as
        ``put``."""
        return self._send_status(status, True, lease, writer)

    def generation_of(self, writer: str | None, status: Status) -> int | None:
        """The generation of the last status of this writer (``put``'s ``writer``; None: ``status``'s worker) while it
        has writes pending; None when it has none."""
        found = self._writers.get(_writer_key(writer, status))
        return None if found is None else found.generation

    def deletion_keys(self, connector: str) -> list[str]:
        """The keys ``delete_connector`` tombstones: every known task's, then the connector's."""
        tasks = [task_key(TaskId(connector, task)) for task in self._cache.task_numbers(connector)]
        return [*tasks, connector_key(connector)]

    def delete_connector(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every known task of the connector, then for the connector itself."""
        keys = self.deletion_keys(connector)
        self.check_room(keys)
        self._cache.forget_connector_type(connector)
        updates = [self._submit(key, None, UpdateKind.TASK) for key in keys[:-1]]
        updates.append(self._submit(keys[-1], None, UpdateKind.CONNECTOR))
        return updates

    def put_topic(self, status: TopicStatus, lease: Lease | None = None) -> StatusUpdate:
        """Record that a connector uses a topic."""
        key = topic_key(status.connector, status.topic)
        self.check_room((key,))
        value = codec.encode_topic_status(status)
        self.record_limit.check(key, value)
        return self._submit(key, value, UpdateKind.TOPIC, lease)

    def delete_topic(self, connector: str, topic: str, lease: Lease | None = None) -> StatusUpdate:
        """Forget that a connector uses a topic (a tombstone)."""
        key = topic_key(connector, topic)
        self.check_room((key,))
        return self._submit(key, None, UpdateKind.TOPIC, lease)

    def reset_topics(self, connector: str) -> list[StatusUpdate]:
        """Tombstones for every topic status listed for the connector, as Connect's reset writes them (the keys
        are ``StatusCache.topic_keys``)."""
        keys = self._cache.topic_keys(connector)
        self.check_room(keys)
        return [self._submit(key, None, UpdateKind.TOPIC) for key in keys]

    def _send_status(self, status: Status, safe: bool, lease: Lease | None = None,
                     writer: str | None = None) -> StatusUpdate | None:
        if isinstance(status, ConnectorStatus):
            key, kind = connector_key(status.connector), UpdateKind.CONNECTOR
        else:
            key, kind = task_key(status.id), UpdateKind.TASK
        # Refusals first: a write refused for room, the spool or size changes nothing.
        self.check_room((key,))
        value = self.record_limit.encode(key, status)
        entry = (self._cache.connector_entry(status.connector) if isinstance(status, ConnectorStatus)
                 else self._cache.task_entry(status.id))
        # As Connect's store of one worker: its generation moves with each of its writes, a dropped put_safe too.
        writer_key = _writer_key(writer, status)
        own = self._writers.get(writer_key)
        if own is None:
            own = self._writers[writer_key] = _Writer()
        own.generation = status.generation
        if safe and not entry.can_write_safely(status):
            log.debug("put_safe dropped %s: cached status of another worker is newer", key)
            return None
        # Room was checked above, for this write.
        rules = _ConnectRules(own, entry, status, safe, lease)
        return self._leased(StatusUpdate(key, value, kind, rules, safe, spooled=lease is None), lease, True)

    def _submit(self, key: str, value: bytes | None, kind: UpdateKind, lease: Lease | None = None) -> StatusUpdate:
        if lease is None:
            return self._queue.submit(StatusUpdate(key, value, kind))
        return self._leased(StatusUpdate(key, value, kind, _LeaseRule(lease), spooled=False), lease)

    def _leased(self, update: StatusUpdate, lease: Lease | None, room_checked: bool = False) -> StatusUpdate:
        """Submit a write, unless its writer's lease ended already (a request that arrived after its own lease): then
        it is settled at once, never sent (the queue asks the lease only before a write that waited, or a retry), and
        takes no other write's place."""
        if lease is not None and (ended := lease()) is not None:
            return self._queue.supersede(update, ended)
        return self._queue.submit(update, room_checked)

    @property
    def exhausted(self) -> ExhaustedStats:
        """What became of updates after their last retry."""
        return self._after.stats

    # ----------------------------------------------------------------------------- reads

    @property
    def cache(self) -> StatusCache:
        """Every status read back from the topic, with Connect's read rules: all reads go here."""
        return self._cache


def _writer_key(writer: str | None, status: Status) -> tuple[str, str | None]:
    """Whose generation judges a status write: the named writer's (an agent's session), else its status's worker's."""
    return ("writer", writer) if writer is not None else ("worker", status.worker_id)


# How a retry abandoned by Connect's generation rule begins its reason (``agents.outcome_body`` reads it).
GENERATION_MOVED = "its writer's generation moved"


class _Writer:
    """One writer's generation, as Connect's store of one worker keeps it: moved by that writer's writes only. Kept
    alive by its pending writes' rules (``StatusStore._writers`` holds it weakly)."""

    __slots__ = ("__weakref__", "generation")

    def __init__(self) -> None:
        self.generation = 0


class _ConnectRules:
    """Connect's reasons not to send a status write: on a retry, the key is gone or its writer's generation moved
    on; on any send, a safe write that is no longer safe. (A newer write of the key supersedes in the queue.) One
    small object per pending write, not a partial of a bound method (three objects, each traversed by every full
    garbage collection)."""

    __slots__ = ("entry", "lease", "safe", "status", "writer")

    def __init__(self, writer: _Writer, entry: CacheEntry, status: Status, safe: bool, lease: Lease | None) -> None:
        self.writer, self.entry, self.status, self.safe, self.lease = writer, entry, status, safe, lease

    def __call__(self, retry: bool) -> str | None:
        if self.lease is not None and (ended := self.lease()) is not None:
            return ended
        if retry and self.entry.deleted:
            return "the key was deleted (a tombstone was read)"
        if retry and self.status.generation != self.writer.generation:
            return f"{GENERATION_MOVED} from {self.status.generation} to {self.writer.generation}"
        if self.safe and not self.entry.can_write_safely(self.status):
            return "another worker's newer status was read"
        return None


class _LeaseRule:
    """The reason not to send a leased write that is no status (a topic's): its writer's lease ended."""

    __slots__ = ("lease",)

    def __init__(self, lease: Lease) -> None:
        self.lease = lease

    def __call__(self, retry: bool) -> str | None:
        return self.lease()
