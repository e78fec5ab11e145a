"""The Kafka log under the store: a producer, a tailing reader, barriers, and topic bootstrap.

Writes go through librdkafka's producer with Connect's settings (Java-compatible partitioning,
``acks=all``, no client-level retries, one request in flight). A background thread serves
delivery reports and hands them to the event loop in batches, so ``send`` never blocks.

The reader assigns every partition (no consumer group), reads from the beginning and keeps
tailing, handing records to the event loop in batches. ``read_to_end`` is a barrier that does
not trust ListOffsets (wrong on some brokers): it re-assigns every partition at the reader's own
position, which makes the next Fetch report the partition's high watermark, and waits until the
reader has reached it on every partition (librdkafka's partition-EOF event). The watermark comes
from a Fetch issued after the barrier began, so every record written before the call is read.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from .errors import KafkaUnavailableError, StoreClosedError, TopicSetupError, WriteFailedError
from .librdkafka import client_logging, is_embedded

log = logging.getLogger(__name__)

_POLL_INTERVAL_S = 0.1
DEFAULT_DELIVERY_TIMEOUT_MS = 10000
CONSUME_BATCH = 5000


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where Kafka stored a write."""

    partition: int
    offset: int


def producer_settings(bootstrap_servers: str, client_configs: Mapping[str, str],
                      delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS) -> dict[str, Any]:
    """librdkafka producer settings matching Connect's status producer.

    ``delivery_timeout_ms`` bounds one attempt: how long librdkafka holds a write (queued or in
    flight) before failing it back to the retry queue.
    """
    return {
        **client_configs,
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_configs.get("client.id", "status-store"),
        **client_logging(bootstrap_servers),
        # Java's default partitioner (murmur2 of the key), so Connect and we agree on partitions.
        "partitioner": "murmur2_random",
        "acks": "all",
        # Retries belong to status-store, not the client (as in Connect).
        "retries": 0,
        "max.in.flight.requests.per.connection": 1,
        "enable.idempotence": False,
        "message.timeout.ms": delivery_timeout_ms,
        "request.timeout.ms": min(30000, delivery_timeout_ms),
        # The status topic is set up deliberately (ensure_topic), never auto-created by a write.
        "allow.auto.create.topics": False,
    }


def consumer_settings(bootstrap_servers: str, client_configs: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka consumer settings for a group-less reader of the whole topic."""
    return {
        **client_configs,
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_configs.get("client.id", "status-store"),
        **client_logging(bootstrap_servers),
        # librdkafka wants a group id even for assign(); nothing is ever committed or joined.
        "group.id": f"status-store-reader-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        # Bounds how long an idle read_to_end waits for the Fetch that reports the end.
        "fetch.wait.max.ms": 100,
        "allow.auto.create.topics": False,
    }


# Runs on the event loop when a write settles: (where it is, None) or (None, why it failed).
DoneCallback = Callable[["Delivery | None", "WriteFailedError | None"], None]
# (send number, error, partition, offset, key) of one delivery report.
_Report = tuple[int, KafkaError | None, int, int, bytes | None]


class _Waiter:
    """A caller waiting until the reader has applied records up to some offsets."""

    __slots__ = ("future", "targets")

    def __init__(self, targets: dict[int, int], future: asyncio.Future[None]) -> None:
        self.targets, self.future = targets, future


class KafkaLog:
    """Producer and tailing reader of one topic; records reach ``on_records`` on the event loop."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str,
        client_configs: Mapping[str, str],
        on_records: Callable[[Sequence[Message]], None] | None,
        delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
        writes: bool = True,
    ) -> None:
        """``on_records`` None: write only (an append-only topic such as the history topic); no reader.
        ``writes`` False: read only (another service's topic, such as Connect's config topic); no producer."""
        self.topic = topic
        self._bootstrap = bootstrap_servers
        self._client_configs = dict(client_configs)
        self._on_records = on_records
        self._delivery_timeout_ms = delivery_timeout_ms
        self._writes = writes
        self.cluster_id: str | None = None
        self.partitions: tuple[int, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        # Delivery reports, filled by the producer thread and drained on the loop.
        self._reports: collections.deque[_Report] = collections.deque()
        self._drain_scheduled = False
        # Writes librdkafka's queue had no room for, sent in order as room frees up.
        self._backlog: collections.deque[tuple[bytes, bytes | None, int]] = collections.deque()
        # The completion callbacks of unsettled writes, by send number.
        self._pending: dict[int, DoneCallback] = {}
        self._sends = itertools.count()
        self._written: dict[int, int] = {}
        self._applied: dict[int, int] = {}
        self._waiters: list[_Waiter] = []
        # Barrier requests, taken by the reader thread in rounds.
        self._barrier_requests: collections.deque[asyncio.Future[None]] = collections.deque()
        # Partitions whose log started over, to be read again from their beginning (taken by the reader).
        self._restarts: collections.deque[int] = collections.deque()
        self._error_logged_at: dict[int, float] = {}
        self._closed = False

    # ----------------------------------------------------------------------------- lifecycle

    async def start(self, timeout: float) -> None:
        """Connect, find the partitions, and read the topic to its end; bounded by ``timeout``."""
        self._loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        if self._writes:
            self._producer = Producer(producer_settings(self._bootstrap, self._client_configs,
                                                        self._delivery_timeout_ms))
        if self._on_records is not None:
            self._consumer = Consumer(consumer_settings(self._bootstrap, self._client_configs))
        client = self._consumer if self._consumer is not None else self._producer
        assert client is not None, "a Kafka log that neither reads nor writes"
        try:
            metadata = await asyncio.to_thread(client.list_topics, self.topic, timeout)
        except KafkaException as e:
            await self._close_clients()
            raise _unreachable(self._bootstrap, e) from None
        self.cluster_id = metadata.cluster_id
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            await self._close_clients()
            reason = topic.error if topic is not None and topic.error is not None else "no partitions"
            raise TopicSetupError(f"topic {self.topic!r} cannot be used: {reason}")
        self.partitions = tuple(sorted(topic.partitions))
        self._threads = [] if self._producer is None else [
            threading.Thread(target=self._serve_deliveries, name="status-store-producer", daemon=True)]
        first_round = self._loop.create_future()
        if self._consumer is None:
            first_round.set_result(None)
        else:
            self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions])
            self._threads.append(threading.Thread(target=self._read, args=(first_round,), name="status-store-reader",
                                                  daemon=True))
        for thread in self._threads:
            thread.start()
        try:
            await asyncio.wait_for(first_round, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            await self.stop(0)
            raise TimeoutError(
                f"could not read topic {self.topic!r} to its end within {timeout:g} s "
                f"(brokers {self._bootstrap})"
            ) from None

    async def stop(self, timeout: float) -> int:
        """Flush pending writes for at most ``timeout`` seconds, then close.

        Returns how many writes were still pending and failed; it never waits longer than the bound.
        """
        if self._closed:
            return 0
        self._closed = True
        pending = 0
        producer = self._producer
        if producer is not None:
            pending = await asyncio.to_thread(producer.flush, timeout)
            if pending:
                log.error("%d status write(s) still pending after %.1f s; they are failed, not written",
                          pending, timeout)
                producer.purge()
                await asyncio.to_thread(producer.poll, 0)
        for key, _, number in self._backlog:
            pending += 1
            self._settle(number, WriteFailedError(key.decode(errors="replace"), KafkaError._DESTROY, "_DESTROY",
                                                  "the store stopped before this write was sent"))
        self._backlog.clear()
        self._stopping.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        self._drain_reports()
        await self._close_clients()
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(StoreClosedError("the store stopped"))
        self._waiters.clear()
        while self._barrier_requests:
            request = self._barrier_requests.popleft()
            if not request.done():
                request.set_exception(StoreClosedError("the store stopped"))
        return pending

    async def _close_clients(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await asyncio.to_thread(consumer.close)
        self._producer = None

    # ----------------------------------------------------------------------------- writes

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        """Hand one record to the producer; never blocks. ``done`` runs on the event loop when Kafka
        has acknowledged the record (with where it is) or failed it (with the error)."""
        if self._closed or self._producer is None:
            raise StoreClosedError("the Kafka log is not running")
        number = next(self._sends)
        self._pending[number] = done
        if self._backlog or not self._produce(key, value, number):
            self._backlog.append((key, value, number))

    def _produce(self, key: bytes, value: bytes | None, number: int) -> bool:
        """Produce one record; False when librdkafka's queue is full."""
        assert self._producer is not None
        try:
            self._producer.produce(self.topic, value, key, on_delivery=functools.partial(self._delivered, number))
        except BufferError:
            if len(self._producer) == 0:
                # The queue is empty and the record still does not fit: it never will.
                self._settle(number, WriteFailedError(key.decode(errors="replace"), KafkaError.MSG_SIZE_TOO_LARGE,
                                                      "MSG_SIZE_TOO_LARGE", "larger than the producer's whole queue"))
                return True
            return False
        except KafkaException as e:
            self._settle(number, _write_failed(key, e.args[0]))
        return True

    def _delivered(self, number: int, error: KafkaError | None, message: Message) -> None:
        # Runs on whichever thread polled the producer: only hand over, never touch a future.
        self._reports.append((number, error, message.partition() or 0, message.offset() or 0,
                              message.key() if error is not None else None))

    def _serve_deliveries(self) -> None:
        producer = self._producer
        assert producer is not None
        while not self._stopping.is_set():
            try:
                producer.poll(_POLL_INTERVAL_S)
                self._schedule_drain()
            except Exception:
                log.exception("Serving delivery reports hit an error; retrying in 1 s")
                self._stopping.wait(1.0)

    def _schedule_drain(self) -> None:
        if self._reports and not self._drain_scheduled and self._loop is not None:
            self._drain_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain_reports)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                self._drain_scheduled = False

    def _drain_reports(self) -> None:
        self._drain_scheduled = False
        reports, written, pending = self._reports, self._written, self._pending
        while reports:
            number, error, partition, offset, key = reports.popleft()
            if error is not None:
                self._settle(number, _write_failed(key, error))
                continue
            last = written.get(partition, -1)
            if offset > last:
                written[partition] = offset
            elif offset < last:
                # Offsets went back: the partition's log started over (the topic was deleted and created
                # again). What was applied belongs to the old log; read-your-writes waits for the new one.
                log.error("Partition %d of %s acknowledged offset %d after %d: the topic was created again; "
                          "reading it anew", partition, self.topic, offset, last)
                written[partition] = offset
                self._applied[partition] = 0
                self._restarts.append(partition)
            done = pending.pop(number, None)
            if done is not None:
                done(Delivery(partition, offset), None)
        while self._backlog and self._producer is not None:
            key, value, number = self._backlog[0]
            if not self._produce(key, value, number):
                break
            self._backlog.popleft()

    def _settle(self, number: int, error: WriteFailedError) -> None:
        done = self._pending.pop(number, None)
        if done is not None:
            done(None, error)

    # ----------------------------------------------------------------------------- reads

    def _read(self, first_round: asyncio.Future[None]) -> None:
        consumer, loop = self._consumer, self._loop
        assert consumer is not None
        assert loop is not None
        assignment = [TopicPartition(self.topic, p) for p in self.partitions]
        round_: list[asyncio.Future[None]] | None = [first_round]
        at_end: set[int] = set()
        positions: dict[int, int] = {}
        reassign = False
        while not self._stopping.is_set():
            try:
                if round_ is None and self._barrier_requests:
                    round_ = []
                    while self._barrier_requests:
                        round_.append(self._barrier_requests.popleft())
                    # Re-assigning restarts fetching, so the partitions report their end again.
                    reassign = True
                while self._restarts:
                    positions.pop(self._restarts.popleft(), None)
                    reassign = True
                if reassign:
                    consumer.assign([TopicPartition(self.topic, p, positions.get(p, OFFSET_BEGINNING))
                                     for p in self.partitions])
                    at_end, reassign = set(), False
                messages = consumer.consume(CONSUME_BATCH, _POLL_INTERVAL_S)
                records = [message for message in messages if message.error() is None]
                if len(records) < len(messages):
                    self._note_events(messages, at_end)
                reached: dict[int, int] = {}
                if records:
                    # librdkafka tracks what consume() has returned: one call instead of a look at each record.
                    reached = {tp.partition: tp.offset for tp in consumer.position(assignment) if tp.offset >= 0}
                    positions.update(reached)
                completed = None
                if round_ is not None and at_end.issuperset(self.partitions):
                    completed, round_ = round_, None
                if records or completed:
                    try:
                        loop.call_soon_threadsafe(self._apply, records, reached, completed)
                    except RuntimeError:
                        return
            except Exception:
                # A bug or a client error must not silently end the reader: log it, then read again from
                # the last records handed over, so nothing consumed but not applied is skipped.
                log.exception("The reader hit an error on topic %s; reading again in 1 s", self.topic)
                reassign = True
                self._stopping.wait(1.0)

    def _note_events(self, messages: list[Message], at_end: set[int]) -> None:
        for message in messages:
            error = message.error()
            if error is None:
                continue
            if error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition() or 0)
            else:
                self._log_read_error(error)

    def _log_read_error(self, error: KafkaError) -> None:
        now = time.monotonic()
        if now - self._error_logged_at.get(error.code(), -60.0) >= 30:
            self._error_logged_at[error.code()] = now
            log.warning("Reading topic %s: %s (repeats of this error are logged every 30 s)",
                        self.topic, error.str())

    def _apply(self, records: list[Message], reached: dict[int, int],
               completed: list[asyncio.Future[None]] | None) -> None:
        if records and self._on_records is not None:
            self._on_records(records)
            self._applied.update(reached)
            if self._waiters:
                self._waiters = [w for w in self._waiters if not self._satisfies(w)]
        for future in completed or ():
            if not future.done():
                future.set_result(None)

    def _satisfies(self, waiter: _Waiter) -> bool:
        if waiter.future.done():
            return True
        if all(self._applied.get(p, 0) >= offset for p, offset in waiter.targets.items()):
            waiter.future.set_result(None)
            return True
        return False

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until every record written to the topic before this call has been applied."""
        if self._closed or self._loop is None or self._consumer is None:
            raise StoreClosedError("the Kafka log is not running")
        future: asyncio.Future[None] = self._loop.create_future()
        self._barrier_requests.append(future)
        await asyncio.wait_for(future, timeout)

    async def read_own_writes(self, timeout: float | None = None) -> None:
        """Wait until every write acknowledged so far has been read back."""
        await self.wait_applied({p: offset + 1 for p, offset in self._written.items()}, timeout)

    async def wait_applied(self, targets: Mapping[int, int], timeout: float | None = None) -> None:
        """Wait until the reader has applied every record below ``targets[partition]``."""
        if self._closed or self._loop is None:
            raise StoreClosedError("the Kafka log is not running")
        waiter = _Waiter(dict(targets), self._loop.create_future())
        if not self._satisfies(waiter):
            self._waiters.append(waiter)
            await asyncio.wait_for(waiter.future, timeout)


def _write_failed(key: bytes | None, error: KafkaError) -> WriteFailedError:
    text = key.decode(errors="replace") if key is not None else ""
    return WriteFailedError(text, error.code(), error.name(), error.str())


def _unreachable(bootstrap_servers: str, error: KafkaException) -> KafkaUnavailableError:
    return KafkaUnavailableError(f"cannot reach Kafka at {bootstrap_servers}: {error.args[0].str()}")


async def topic_exists(bootstrap_servers: str, client_configs: Mapping[str, str], topic: str, timeout: float) -> bool:
    """Whether the cluster has the topic (a Metadata request that never creates it)."""
    # Without allow.auto.create.topics=false, a Metadata request for a missing topic may create it.
    logging_settings = client_logging(bootstrap_servers)
    admin = AdminClient({**client_configs, "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False,
                         **logging_settings})
    try:
        metadata = await asyncio.to_thread(admin.list_topics, topic, timeout)
    except KafkaException as e:
        admin.poll(0)  # serves the client's log lines: the last one says why (e.g. "Connection refused")
        reason = logging_settings["logger"].last_problem or e.args[0].str()
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap_servers} within {timeout:g} s ({reason})") from None
    found = metadata.topics.get(topic)
    return found is not None and found.error is None


async def ensure_topic(
    bootstrap_servers: str,
    client_configs: Mapping[str, str],
    topic: str,
    partitions: int,
    replication_factor: int,
    topic_configs: Mapping[str, str],
    timeout: float,
    compacted: bool = True,
    role: str = "status topic",
) -> None:
    """Create the topic if missing; refuse one whose cleanup policy would lose data.

    The status topic (``compacted``) follows Connect: a topic that exists with any cleanup policy but
    exactly ``compact`` would lose statuses, so it is an error. An append-only topic (history, dead
    letters) must not be compacted, or all but the last event per key go. A broker that cannot
    describe configs is trusted, with a warning.
    """
    wanted = "compact" if compacted else "delete"
    admin = AdminClient({**client_configs, "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False,
                         **client_logging(bootstrap_servers)})
    if not await topic_exists(bootstrap_servers, client_configs, topic, timeout):
        new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                             config={**topic_configs, "cleanup.policy": wanted})
        future = admin.create_topics([new_topic], request_timeout=timeout)[topic]
        try:
            await asyncio.wrap_future(future)
            log.info("Created %s %s (%d partitions, replication factor %d, cleanup.policy=%s)",
                     role, topic, partitions, replication_factor, wanted)
            return
        except KafkaException as e:
            error = e.args[0]
            if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicSetupError(
                    f"{role} {topic!r} does not exist and could not be created: {error.str()}. "
                    f"Create it with cleanup.policy={wanted}, or grant this client CreateTopics."
                ) from None
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = await asyncio.wrap_future(admin.describe_configs([resource], request_timeout=timeout)[resource])
    except KafkaException as e:
        # Expected of an embedded broker (it has no DescribeConfigs); worth a warning from a real cluster.
        log.log(logging.DEBUG if is_embedded(bootstrap_servers) else logging.WARNING,
                "Cannot describe the configs of %s %s (%s); assuming cleanup.policy=%s", role, topic, e.args[0].str(),
                wanted)
        return
    # A broker may leave out keys still at their defaults; Kafka's default policy is "delete".
    entry = entries.get("cleanup.policy")
    policy = entry.value if entry is not None else "delete"
    if compacted and policy != "compact":
        raise TopicSetupError(
            f"{role} {topic!r} has cleanup.policy={policy}, but it must be exactly 'compact' or "
            f"statuses are lost. Fix: kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
            f"--add-config cleanup.policy=compact (or set status.storage.topic to another topic)."
        )
    if not compacted and "compact" in policy:
        raise TopicSetupError(
            f"{role} {topic!r} has cleanup.policy={policy}, but it must not be compacted: compaction keeps only "
            f"the last record per key and the events before it are lost. Use a topic with cleanup.policy=delete."
        )
