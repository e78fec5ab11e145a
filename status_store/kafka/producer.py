"""Writes to one topic: librdkafka's producer with Connect's settings, delivery reports on the event loop.

``send`` never blocks and never calls into librdkafka: the records of one event-loop turn wait, in order, in
an outbox that the end of the turn hands to the producer in one tight loop (a burst of writes, a batch
request or a spool replay, reaches librdkafka without the loop's other work between the produce calls).
A background thread serves delivery reports and hands them to the event loop in batches (one
``call_soon_threadsafe`` per batch). Records librdkafka's queue has no room for stay in the outbox, in
order, until delivery reports free room.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Message, Producer, murmur2

from ..connect.model import new_tuple
from ..errors import StoreClosedError, WriteFailedError
from ..retry.delivery import Delivery, DoneCallback
from .late_writes import ATTEMPT_HEADER, Attempts
from .settings import DEFAULT_DELIVERY_TIMEOUT_MS, POLL_INTERVAL_S, producer_settings, topic_partitions

log = logging.getLogger(__name__)

# (completion callback, error, partition, offset, the failed record: key, value, attempt id, and the generation of the
# librdkafka producer that sent it) of one delivery report.
_ReportTuple = tuple[DoneCallback, KafkaError | None, int, int, bytes | None, bytes | None, bytes | None, int]
# Told of a delivery that failed, on the event loop: (error, partition, key, value, attempt id).
GivenUp = Callable[[KafkaError, int, bytes | None, bytes | None, bytes | None], None]


class TopicProducer:
    """The producer of one topic; ``send`` hands a record over and never blocks."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str],
                 delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
                 on_restart: Callable[[int], None] | None = None, attempts: Attempts | None = None) -> None:
        """``on_restart(partition)``: a partition acknowledged an offset below an earlier one (its log started
        over: the topic was deleted and created again). ``attempts``: the ids each record names in its
        ``ATTEMPT_HEADER`` (late_writes.py); ``on_given_up`` (set before the start, or None) is told of each
        delivery that failed."""
        self.topic = topic
        self._bootstrap = bootstrap_servers
        self._settings = producer_settings(bootstrap_servers, client_configs, delivery_timeout_ms)
        self._on_restart = on_restart
        self._attempts = attempts if attempts is not None else Attempts()
        self.on_given_up: GivenUp | None = None
        self.cluster_id: str | None = None
        self.partitions: tuple[int, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        # Producers renewed away, with their threads serving their last delivery reports: each closes its producer
        # and leaves the list once it has none left (under the lock), or the store's stop takes them (``_closed``).
        self._retired: list[tuple[Producer, threading.Thread]] = []
        self._retired_lock = threading.Lock()
        # Renewals so far: the generation of the producer sending now (a delivery report names its producer's).
        self._generation = 0
        self._stopping = threading.Event()
        # Delivery reports, filled by the producer thread and drained on the loop.
        self._reports: collections.deque[_ReportTuple] = collections.deque()
        self._drain_scheduled = False
        # Records not handed to librdkafka yet, in order, each with its completion callback: sent at the end of
        # the loop's turn, or as room frees up. A record's callback travels with it (outbox, librdkafka, delivery
        # report) and runs once: from its delivery report, or here when it never reached librdkafka.
        self._outbox: collections.deque[tuple[bytes, bytes | None, DoneCallback]] = collections.deque()
        self._outbox_scheduled = False
        # The highest offset acknowledged per partition.
        self._written: dict[int, int] = {}
        self._closed = False

    def partition_of(self, key: str) -> int:
        """The partition of a key, as Java's default partitioner (and so Connect) places it (the topic's partitions
        are known once started)."""
        return murmur2(key.encode(), len(self.partitions))

    async def start(self, timeout: float) -> None:
        """Connect and find the topic's partitions; bounded by ``timeout``."""
        self._loop = asyncio.get_running_loop()
        self._producer = Producer(self._settings)
        try:
            self.cluster_id, self.partitions = await topic_partitions(self._producer, self.topic, self._bootstrap,
                                                                      timeout)
        except BaseException:
            self._producer = None
            raise
        self._thread = threading.Thread(target=self._serve_deliveries, args=(self._producer, self._generation),
                                        name="status-store-producer", daemon=True)
        self._thread.start()

    def renew(self, reason: str, log_started_over: bool = False) -> None:
        """Send from now on through a new librdkafka producer, the one before being stuck (``reason``): the topic was
        created again, and librdkafka keeps the old topic's leader epochs (its issue #4898), so the producer from
        before may time out every write to a partition of the new topic for good; or it keeps a stale leader for
        another reason. The old one's writes end as they would have (written, or failed after their delivery timeout:
        the retry queue sends them again), its thread serving their reports until then. ``log_started_over``: the
        offsets acknowledged so far belong to a log that is gone (the topic was created again)."""
        if self._closed or self._producer is None or self._thread is None:
            return
        log.info("Writing to %s with a new producer: %s", self.topic, reason)
        renewed = Producer(self._settings)
        with self._retired_lock:
            self._retired.append((self._producer, self._thread))
        self._producer = renewed
        self._generation += 1
        if log_started_over:
            self._written.clear()
        self._thread = threading.Thread(target=self._serve_deliveries, args=(renewed, self._generation),
                                        name="status-store-producer", daemon=True)
        self._thread.start()
        if self._outbox and not self._outbox_scheduled and self._loop is not None:
            # Records waiting for room in the old producer's queue go to the new one now.
            self._outbox_scheduled = True
            self._loop.call_soon(self._send_outbox)

    async def stop(self, timeout: float) -> int:
        """Flush pending writes for at most ``timeout`` seconds, then close.

        Returns how many writes were still pending and failed; it never waits longer than the bound.
        """
        if self._closed:
            return 0
        with self._retired_lock:  # the renewed producers not closed yet are this stop's
            self._closed = True
            retired = list(self._retired)
        pending = 0
        self._send_outbox()  # what this turn submitted goes out before the flush
        producers = [producer for producer, _ in retired]
        if self._producer is not None:
            producers.append(self._producer)
        for producer, left in zip(producers, await asyncio.gather(
                *(asyncio.to_thread(producer.flush, timeout) for producer in producers)), strict=True):
            if left:
                pending += left
                # Their owner's queue has given them their outcome already and says what becomes of them (a spool
                # may keep them): one line, the owner's, not a second one here that says otherwise.
                log.debug("%d write(s) to %s still in the producer's queue after %.1f s: purged", left, self.topic,
                          timeout)
                producer.purge()
                await asyncio.to_thread(producer.poll, 0)
        for key, _, done in self._outbox:
            pending += 1
            done(None, WriteFailedError(key.decode(errors="replace"), KafkaError._DESTROY, "_DESTROY",
                                        "the store stopped before this write was sent"))
        self._outbox.clear()
        self._stopping.set()
        threads = [thread for _, thread in retired]
        if self._thread is not None:
            threads.append(self._thread)
        for thread in threads:
            await asyncio.to_thread(thread.join, 5)
        self._retired = []
        self._drain_reports()
        self._producer = None
        return pending

    def written_targets(self) -> dict[int, int]:
        """Per partition, the offset below which every write acknowledged so far lies."""
        return {partition: offset + 1 for partition, offset in self._written.items()}

    def written_to(self, partition: int) -> int:
        """The offset below which every write to ``partition`` acknowledged so far lies."""
        return self._written.get(partition, -1) + 1

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        """Hand one record to the producer (at the end of this turn of the event loop); never blocks. ``done``
        runs on the event loop when Kafka has acknowledged the record (with where it is) or failed it (with
        the error)."""
        if self._closed or self._producer is None:
            raise StoreClosedError(f"the producer of {self.topic} is not running")
        self._outbox.append((key, value, done))
        if not self._outbox_scheduled:
            assert self._loop is not None
            self._outbox_scheduled = True
            self._loop.call_soon(self._send_outbox)

    def send_written(self, key: bytes, value: bytes | None, written: Callable[[bool], None]) -> None:
        """``send``, told only whether the record was written (False too when the producer has stopped)."""
        try:
            self.send(key, value, lambda _, error: written(error is None))
        except StoreClosedError:
            written(False)

    def _send_outbox(self) -> None:
        """Produce the outbox's records in order, in one tight loop, until librdkafka's queue is full."""
        self._outbox_scheduled = False
        producer, outbox, topic, reports = self._producer, self._outbox, self.topic, self._reports
        if producer is None:
            return
        produce, attempt, generation = producer.produce, self._attempts.next, self._generation
        while outbox:
            key, value, done = outbox[0]
            attempt_id = attempt()
            try:
                produce(topic, value, key, on_delivery=_Report(reports, done, attempt_id, generation),
                        headers=[(ATTEMPT_HEADER, attempt_id)])
            except BufferError:
                if len(producer) != 0:
                    return  # full for now: the rest waits for delivery reports to free room
                # The queue is empty and the record still does not fit: it never will.
                done(None, WriteFailedError(key.decode(errors="replace"), KafkaError.MSG_SIZE_TOO_LARGE,
                                            "MSG_SIZE_TOO_LARGE", "larger than the producer's whole queue"))
            except KafkaException as e:
                done(None, _write_failed(key, e.args[0]))
            outbox.popleft()

    def _serve_deliveries(self, producer: Producer, generation: int) -> None:
        """Serve ``producer``'s delivery reports until the stop, or, once it was renewed, until it has none left;
        then close it, unless the stop has taken it."""
        while not self._stopping.is_set() and (generation == self._generation or len(producer) > 0):
            try:
                producer.poll(POLL_INTERVAL_S)
                self._schedule_drain()
            except Exception:
                log.exception("Serving delivery reports of %s hit an error; retrying in 1 s", self.topic)
                self._stopping.wait(1.0)
        with self._retired_lock:
            if self._closed or generation == self._generation:
                return
            self._retired = [entry for entry in self._retired if entry[0] is not producer]
        try:
            producer.close()
        except Exception:
            log.exception("Closing a renewed producer of %s failed", self.topic)

    def _schedule_drain(self) -> None:
        if self._reports and not self._drain_scheduled and self._loop is not None:
            self._drain_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain_reports)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                self._drain_scheduled = False

    def _drain_reports(self) -> None:
        self._drain_scheduled = False
        reports, written, current = self._reports, self._written, self._generation
        given_up = self.on_given_up
        while reports:
            done, error, partition, offset, key, value, attempt, generation = reports.popleft()
            if error is not None:
                if given_up is not None:
                    given_up(error, partition, key, value, attempt)
                done(None, _write_failed(key, error))
                continue
            last = written.get(partition, -1)
            if generation != current:
                # A renewed producer's: its offsets and the new one's interleave in no order (each producer's own
                # are in order).
                written[partition] = max(last, offset)
            else:
                written[partition] = offset
                if offset < last:
                    # Offsets went back: the partition's log started over (the topic was deleted and created
                    # again). What was read belongs to the old log; the reader reads the new one anew.
                    log.error("Partition %d of %s acknowledged offset %d after %d: the topic was created again; "
                              "reading it anew", partition, self.topic, offset, last)
                    if self._on_restart is not None:
                        self._on_restart(partition)
            done(new_tuple(Delivery, (partition, offset)), None)
        self._send_outbox()


class _Report:
    """The delivery callback of one record: runs on whichever thread polled the producer, so it only hands the
    report over (never touches a future). One small object per record in flight, not a partial of a bound method."""

    __slots__ = ("attempt", "done", "generation", "reports")

    def __init__(self, reports: collections.deque[_ReportTuple], done: DoneCallback, attempt: bytes,
                 generation: int) -> None:
        self.reports, self.done, self.attempt, self.generation = reports, done, attempt, generation

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.reports.append((self.done, None, message.partition() or 0, message.offset() or 0, None, None, None,
                                 self.generation))
        else:  # a record never placed on a partition says -1: it was never sent
            partition = message.partition()
            self.reports.append((self.done, error, -1 if partition is None else partition, -1, message.key(),
                                 message.value(), self.attempt, self.generation))


def _write_failed(key: bytes | None, error: KafkaError) -> WriteFailedError:
    text = key.decode(errors="replace") if key is not None else ""
    return WriteFailedError(text, error.code(), error.name(), error.str())
