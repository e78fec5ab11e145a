"""The history topic read into the record (``record.Record``): from the offsets of a week back
(``offsets_for_times``), then tailed for the life of the service, by a group-less consumer in a thread of its own
that hands batches to the event loop, a few at a time at most (it waits while the loop has not applied them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from ..kafka.settings import consumer_settings, topic_partitions
from ..logs import RateLimit
from .record import Record

log = logging.getLogger(__name__)

BATCH = 2000
# Batches handed to the loop and not applied yet, at most.
PENDING_BATCHES = 4
POLL_S = 0.5
JOIN_S = 10.0
# What is older than the retention is folded this often (a pass over every connector and task).
FOLD_INTERVAL_S = 60.0


class HistoryTail:
    """Reads the history topic ``topic`` into ``record`` (``start`` on the loop, ``stop`` when done)."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str], record: Record,
                 timeout_s: float, clock: Callable[[], float] = time.time) -> None:
        self.topic = topic
        self.record = record
        self.read = 0
        self._bootstrap, self._configs = bootstrap_servers, client_configs
        self._timeout_s, self._clock = timeout_s, clock
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._pending = threading.BoundedSemaphore(PENDING_BATCHES)
        self._errors = RateLimit(60.0)
        self._folded_at = float("-inf")

    async def start(self) -> None:
        """Assign every partition at the offsets of the retention's start, and read from there on."""
        consumer = self._consumer = Consumer({**consumer_settings(self._bootstrap, self._configs),
                                              "enable.partition.eof": False})
        _, partitions = await topic_partitions(consumer, self.topic, self._bootstrap, self._timeout_s)
        retention = self.record.retention_ms
        since = round(self._clock() * 1000) - retention if retention is not None else None
        assignment = [TopicPartition(self.topic, p, since if since is not None else OFFSET_BEGINNING)
                      for p in partitions]
        if since is not None:
            # A partition without a record since then answers -1 (its end): read from its end. A broker that cannot
            # say (no ListOffsets by time): every record is read, and the record keeps the retention's.
            try:
                assignment = await asyncio.to_thread(consumer.offsets_for_times, assignment, self._timeout_s)
            except KafkaException as e:
                log.warning("Cannot find the history topic %s's offsets of %d ms ago (%s): reading it whole for the "
                            "record", self.topic, retention, e)
                assignment = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions]
        consumer.assign(assignment)
        loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._read, args=(loop,), name=f"status-store-record-{self.topic}",
                                        daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Stop reading (within ``JOIN_S``) and close the consumer."""
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, JOIN_S)
        if self._consumer is not None and (self._thread is None or not self._thread.is_alive()):
            with contextlib.suppress(RuntimeError, KafkaException):
                await asyncio.to_thread(self._consumer.close)
        self._consumer = None

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stopping.is_set():
            if not self._pending.acquire(timeout=POLL_S):
                continue  # the loop has not applied the batches before: wait for it
            try:
                messages = consumer.consume(BATCH, POLL_S)
            except (RuntimeError, KafkaException) as e:
                self._pending.release()
                self._failed(str(e))
                continue
            batch = [m for m in messages if m.error() is None]
            for message in messages:
                error = message.error()
                if error is not None:
                    self._failed(error.str() if isinstance(error, KafkaError) else str(error))
            if not batch:
                self._pending.release()
                continue
            try:
                loop.call_soon_threadsafe(self._apply, batch)
            except RuntimeError:  # the loop is closed: the service is stopping
                return

    def _apply(self, batch: list[Message]) -> None:
        try:
            for message in batch:
                partition, offset = message.partition(), message.offset()
                self.record.apply(message.value(), partition if partition is not None else -1,
                                  offset if offset is not None else -1)
            self.read += len(batch)
            now = self._clock()
            if now - self._folded_at >= FOLD_INTERVAL_S:
                self._folded_at = now
                self.record.fold(round(now * 1000))
        finally:
            self._pending.release()

    def _failed(self, reason: str) -> None:
        self._errors.log(log, logging.WARNING, "Cannot read the history topic %s for the record: %s; reading on",
                         self.topic, reason)
