"""Reads one whole topic: a group-less, tailing reader with barriers.

The reader assigns every partition (no consumer group), reads from the beginning and keeps tailing,
handing records to the event loop in batches. ``read_to_end`` is a barrier that does not trust
ListOffsets (wrong on some brokers): it re-assigns every partition at the reader's own position, which
makes the next Fetch report the partition's high watermark, and waits until the reader has reached it on
every partition (librdkafka's partition-EOF event). The watermark comes from a Fetch issued after the
barrier began, so every record written before the call is read. ``wait_applied`` waits for given
offsets (a writer's own acknowledged writes) to be applied.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message, TopicPartition

from ..connect.cache import StatusRecord
from ..connect.model import new_tuple
from ..errors import StoreClosedError
from .reading import Consumed, consumed
from .settings import POLL_INTERVAL_S, consumer_settings, topic_partitions

log = logging.getLogger(__name__)

CONSUME_BATCH = 5000
# A read error of one kind is logged at most this often.
_ERROR_LOG_INTERVAL_S = 30.0

Barrier = asyncio.Future[None]


class _Waiter:
    """A caller waiting until the reader has applied records up to some offsets."""

    __slots__ = ("future", "targets")

    def __init__(self, targets: dict[int, int], future: asyncio.Future[None]) -> None:
        self.targets, self.future = targets, future


class _Rounds:
    """The reader thread's state: the barriers of the round under way, which partitions have reported their
    end since it began, where each partition has been read to, and whether the assignment (or the whole client)
    must be renewed."""

    def __init__(self, partitions: Sequence[int], first: Barrier) -> None:
        self.partitions = partitions
        self.barriers: list[Barrier] | None = [first]
        self.at_end: set[int] = set()
        self.positions: dict[int, int] = {}
        self.reassign = False
        self.renew_client = False

    def begin(self, requests: collections.deque[Barrier]) -> None:
        """Take the barrier requests waiting, if no round is under way."""
        if self.barriers is None and requests:
            self.barriers = []
            while requests:
                self.barriers.append(requests.popleft())
            # Re-assigning restarts fetching, so the partitions report their end again.
            self.reassign = True

    def restart(self, partition: int) -> None:
        """Read a partition again from its beginning (its log started over), with a new client: the topic was
        created again, and librdkafka keeps the old topic's leader epochs (its issue #4898), so a client from before
        may fetch the new topic's partitions in vain for good."""
        self.positions.pop(partition, None)
        self.reassign = self.renew_client = True

    def assignment(self, topic: str) -> list[TopicPartition] | None:
        """The assignment to renew, once, or None."""
        if not self.reassign:
            return None
        self.at_end, self.reassign = set(), False
        return [TopicPartition(topic, p, self.positions.get(p, OFFSET_BEGINNING)) for p in self.partitions]

    def completed(self) -> list[Barrier] | None:
        """The round's barriers once every partition has reported its end; the round is over then."""
        if self.barriers is not None and self.at_end.issuperset(self.partitions):
            barriers, self.barriers = self.barriers, None
            return barriers
        return None


class TopicReader:
    """A reader of one whole topic; records reach ``on_records`` on the event loop."""

    def __init__(self, topic: str, bootstrap_servers: str, client_configs: Mapping[str, str],
                 on_records: Callable[[Sequence[Message]], None]) -> None:
        self.topic = topic
        self._bootstrap = bootstrap_servers
        self._settings = consumer_settings(bootstrap_servers, client_configs)
        self._on_records = on_records
        self.cluster_id: str | None = None
        self.partitions: tuple[int, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._applied: dict[int, int] = {}
        self._waiters: list[_Waiter] = []
        # Barrier requests, taken by the reader thread in rounds.
        self._barrier_requests: collections.deque[Barrier] = collections.deque()
        # Partitions whose log started over, to be read again from their beginning (taken by the reader).
        self._restarts: collections.deque[int] = collections.deque()
        self._error_logged_at: dict[int, float] = {}
        self._closed = False

    async def start(self, timeout: float) -> None:
        """Connect, find the partitions, and read the topic to its end; bounded by ``timeout``."""
        self._loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        consumer = Consumer(self._settings)
        try:
            self.cluster_id, self.partitions = await topic_partitions(consumer, self.topic, self._bootstrap, timeout)
        except BaseException:
            await asyncio.to_thread(consumer.close)
            raise
        self._consumer = consumer
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions])
        first_round: Barrier = self._loop.create_future()
        self._thread = threading.Thread(target=self._read, args=(_Rounds(self.partitions, first_round),),
                                        name="status-store-reader", daemon=True)
        self._thread.start()
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await first_round
        except TimeoutError:
            await self.stop()
            raise TimeoutError(f"could not read topic {self.topic!r} to its end within {timeout:g} s "
                               f"(brokers {self._bootstrap})") from None

    async def stop(self) -> None:
        """Stop reading and close; waiters and barriers fail with ``StoreClosedError``."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await asyncio.to_thread(consumer.close)
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(StoreClosedError("the store stopped"))
        self._waiters.clear()
        while self._barrier_requests:
            request = self._barrier_requests.popleft()
            if not request.done():
                request.set_exception(StoreClosedError("the store stopped"))

    def restart(self, partition: int) -> None:
        """Read a partition again from its beginning: its log started over (on the event loop)."""
        self._applied[partition] = 0
        self._restarts.append(partition)

    async def read_to_end(self, timeout: float | None = None) -> None:
        """Wait until every record written to the topic before this call has been applied."""
        if self._closed or self._loop is None or self._consumer is None:
            raise StoreClosedError(f"the reader of {self.topic} is not running")
        future: Barrier = self._loop.create_future()
        self._barrier_requests.append(future)
        async with asyncio.timeout(timeout):
            await future

    def applied_to(self, partition: int) -> int:
        """The offset below which every record of ``partition`` has been applied."""
        return self._applied.get(partition, 0)

    async def wait_applied(self, targets: Mapping[int, int], timeout: float | None = None) -> None:
        """Wait until the reader has applied every record below ``targets[partition]``."""
        if self._closed or self._loop is None:
            raise StoreClosedError(f"the reader of {self.topic} is not running")
        waiter = _Waiter(dict(targets), self._loop.create_future())
        if not self._satisfies(waiter):
            self._waiters.append(waiter)
            async with asyncio.timeout(timeout):
                await waiter.future

    # ----------------------------------------------------------------------------- the reader thread

    def _read(self, rounds: _Rounds) -> None:
        consumer, loop = self._consumer, self._loop
        assert consumer is not None
        assert loop is not None
        assignment = [TopicPartition(self.topic, p) for p in self.partitions]
        while not self._stopping.is_set():
            try:
                rounds.begin(self._barrier_requests)
                while self._restarts:
                    rounds.restart(self._restarts.popleft())
                if rounds.renew_client:
                    rounds.renew_client = False
                    consumer = self._renew(consumer)
                renewed = rounds.assignment(self.topic)
                if renewed is not None:
                    consumer.assign(renewed)
                # consume(n, timeout) returns once it has n records or the timeout passed: a record that arrived
                # early in the interval would wait for its end. poll() returns with the first, then what is queued.
                first = consumer.poll(POLL_INTERVAL_S)
                messages = [] if first is None else [first, *consumer.consume(CONSUME_BATCH - 1, 0)]
                records = [message for message in messages if message.error() is None]
                if len(records) < len(messages):
                    self._note_events(messages, rounds.at_end)
                reached: dict[int, int] = {}
                if records:
                    # librdkafka tracks what consume() has returned: one call instead of a look at each record.
                    reached = {tp.partition: tp.offset for tp in consumer.position(assignment) if tp.offset >= 0}
                    rounds.positions.update(reached)
                completed = rounds.completed()
                if records or completed:
                    try:
                        loop.call_soon_threadsafe(self._apply, records, reached, completed)
                    except RuntimeError:
                        return
            except Exception:
                # A bug or a client error must not silently end the reader: log it, then read again from
                # the last records handed over, so nothing consumed but not applied is skipped.
                log.exception("The reader hit an error on topic %s; reading again in 1 s", self.topic)
                rounds.reassign = True
                self._stopping.wait(1.0)

    def _renew(self, consumer: Consumer) -> Consumer:
        """A new client in the place of ``consumer``, which is closed (the caller assigns the new one)."""
        log.info("Reading topic %s with a new client: its log started over", self.topic)
        renewed = Consumer(self._settings)
        self._consumer = renewed
        try:
            consumer.close()
        except Exception:  # the new one reads on whatever became of the old one
            log.exception("Closing the reader's previous client of %s failed", self.topic)
        return renewed

    def _note_events(self, messages: list[Message], at_end: set[int]) -> None:
        for message in messages:
            error = message.error()
            if error is None:
                continue
            if consumed(error) is Consumed.END:
                at_end.add(message.partition() or 0)
            else:  # a tailing reader never gives up: what it meets is logged, and it reads again
                self._log_read_error(error)

    def _log_read_error(self, error: KafkaError) -> None:
        now = time.monotonic()
        if now - self._error_logged_at.get(error.code(), -_ERROR_LOG_INTERVAL_S) >= _ERROR_LOG_INTERVAL_S:
            self._error_logged_at[error.code()] = now
            log.warning("Reading topic %s: %s (repeats of this error are logged every %.0f s)",
                        self.topic, error.str(), _ERROR_LOG_INTERVAL_S)

    # ----------------------------------------------------------------------------- on the event loop

    def _apply(self, records: list[Message], reached: dict[int, int], completed: list[Barrier] | None) -> None:
        if records:
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


def status_records(records: Sequence[Message]) -> Iterator[StatusRecord]:
    """Records as the status cache takes them; a Kafka timestamp in seconds (none when the broker gave none)."""
    for record in records:
        kind, millis = record.timestamp()
        timestamp = millis / 1000 if kind != TIMESTAMP_NOT_AVAILABLE else None
        yield new_tuple(StatusRecord, (record.key(), record.value(), record.partition() or 0, record.offset() or 0,
                                       timestamp))
