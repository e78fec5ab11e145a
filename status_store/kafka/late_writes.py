"""Writes the sidecar gave up that land late, found and undone.

Kafka cannot cancel a produce request in flight, and the status topic's producer is not idempotent (Connect's
settings). A write whose delivery failed with an error after which its request may still reach the broker (a
message or request timeout, a broken connection: librdkafka's "possibly persisted") was reported not written, yet
can be appended later, however late: a network that holds bytes rather than refusing them (a partition that drops
packets while the kernel retransmits the socket's buffer, a TCP-terminating proxy) delivers it when it heals. By
then whoever believed the report (the agent took the write back, the worker wrote the key through Connect, the
leader deleted the connector) may have written the key anew, and the late record lands over that newer record.

The rule here: a write the sidecar reported not written leaves no trace over a record of its key read after it was
given up. Every record the producer sends names its attempt in one header (``ATTEMPT_HEADER``: this process's id
and a sequence); a given-up attempt is watched (``LateWrites.given_up``); the reader shows the watches every record
of a watched key (``LateWrites.read``: nothing is looked at while no key is watched). When the watched attempt's own
record is read after a record of its key that differs from it, that earlier record is written again, exactly (a
tombstone if it was one): the late record is undone. Anything read after the give-up was written by someone who
could believe the given-up write was not made, so it is newer in intent.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, Message

log = logging.getLogger(__name__)

# The header naming a record's attempt: 8 bytes of this process's id, then 8 bytes of its sequence, big-endian.
ATTEMPT_HEADER = "status-store-attempt"

# Delivery errors after which librdkafka marks a record "possibly persisted" (its rd_kafka_err_action and Produce
# error handling): the request was sent, and no answer says whether the broker appended it. A record never sent
# fails otherwise (_TIMED_OUT_QUEUE, a refusal) and cannot land. _MSG_TIMED_OUT is given to records timed out in
# flight and to records that never left the partition's queue alike (librdkafka keeps the difference in a status the
# Python client does not show): both are watched, and a watch of a record that was never sent ends by its age.
POSSIBLY_PERSISTED = frozenset({
    KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._SSL,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError._PURGE_INFLIGHT,
    KafkaError._BAD_MSG,
})

# How long an undo that failed waits before it is sent again (while the late record is still its key's last).
UNDO_RETRY_S = 1.0

# Sends one record as the store's producer does (key, value, then the completion: whether it was written).
Send = Callable[[bytes, bytes | None, Callable[[bool], None]], None]
# Runs a callable after a delay, on the event loop.
Later = Callable[[float, Callable[[], None]], object]
# The highest offset of a partition known now to hold a record (the producer's acknowledged writes, the reader's
# position); -1 if none.
Landed = Callable[[int], int]


class Attempts:
    """The attempt ids of this process: its random id, then a sequence."""

    __slots__ = ("_next", "_prefix")

    def __init__(self) -> None:
        self._prefix = os.urandom(8)
        self._next = 0

    def next(self) -> bytes:
        """A new attempt id, never given before by this process."""
        self._next += 1
        return self._prefix + self._next.to_bytes(8, "big")


class _Unread:
    """Nothing read of the watched key since its watch began."""


_NOTHING = _Unread()


class _Watch:
    """One given-up attempt: its record and what was last read of its key since it was given up."""

    __slots__ = ("attempt", "floor", "given_up_at", "key", "last", "partition", "value")

    def __init__(self, key: bytes, value: bytes | None, partition: int, attempt: bytes, now: float,
                 floor: int) -> None:
        self.key, self.value, self.partition, self.attempt, self.given_up_at = key, value, partition, attempt, now
        # Records of the key at or below this offset landed before the give-up: none is newer than the attempt.
        self.floor = floor
        self.last: bytes | _Unread | None = _NOTHING


class _Undo:
    """An undo under way: the record to write again, until it is written or its key's late record is read over."""

    __slots__ = ("key", "overtaken", "started", "value")

    def __init__(self, key: bytes, value: bytes | None, now: float) -> None:
        self.key, self.value, self.started = key, value, now
        self.overtaken = False


class LateWrites:
    """The given-up attempts watched, and the undoing of those that land late over a newer record of their key."""

    def __init__(self, topic: str, send: Send, later: Later, landed: Landed,
                 max_watches: int, watch_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        """``watch_age_s``: how long a given-up attempt is watched (sidecar.late.writes.watch.ms); ``max_watches``: the
        attempts watched at once at most, past which the oldest watch is dropped and counted
        (sidecar.late.writes.watches.max)."""
        self.topic = topic
        self._send, self._later, self._landed, self._clock = send, later, landed, clock
        self.max_watches, self.watch_age_s = max_watches, watch_age_s
        # Watches by key, and every watch oldest first (for the bounds).
        self._by_key: dict[bytes, list[_Watch]] = {}
        self._order: collections.deque[_Watch] = collections.deque()
        self._undoing: dict[bytes, _Undo] = {}
        self.undone = 0  # late landings written over again
        self.left = 0  # late landings over nothing newer read, or over a record equal to them
        self.dropped = 0  # watches dropped for the bound on their number

    @property
    def watched(self) -> int:
        """Attempts watched now."""
        return len(self._order)

    def stop(self) -> None:
        """The store stops: undos under way are not sent again (the watches go with the process)."""
        self._undoing.clear()

    def given_up(self, error: KafkaError, partition: int, key: bytes | None, value: bytes | None,
                 attempt: bytes | None) -> None:
        """A delivery failed: watch its attempt if its request may still reach the broker. ``partition`` < 0: the
        record was never placed on a partition, so never sent."""
        if key is None or attempt is None or partition < 0 or error.code() not in POSSIBLY_PERSISTED:
            return
        now = self._clock()
        self._expire(now)
        if len(self._order) >= self.max_watches:
            self._forget(self._order.popleft())
            self.dropped += 1
        watch = _Watch(key, value, partition, attempt, now, self._landed(partition))
        self._order.append(watch)
        self._by_key.setdefault(key, []).append(watch)

    def read(self, records: Sequence[Message]) -> None:
        """Records read back from the topic, in order (on the event loop). Costs one test while no key is watched."""
        if not self._by_key and not self._undoing:
            return
        self._expire(self._clock())
        by_key, undoing = self._by_key, self._undoing
        for record in records:
            key = record.key()
            if key is None or (key not in by_key and key not in undoing):
                continue
            undo = undoing.get(key)
            if undo is not None:
                undo.overtaken = True  # a record read over the late one: the undo is no longer needed
            watches = by_key.get(key)
            if watches:
                self._read_watched(record, key, watches)

    def _read_watched(self, record: Message, key: bytes, watches: list[_Watch]) -> None:
        attempt = attempt_of(record.headers())
        value, offset = record.value(), record.offset() or 0
        landing = next((watch for watch in watches if watch.attempt == attempt), None) if attempt else None
        if landing is None:
            for watch in watches:
                if offset > watch.floor:
                    watch.last = value
            return
        # A late landing is no newer record for the key's other watches: it was given up too.
        self._forget(landing)
        self._order.remove(landing)
        if isinstance(landing.last, _Unread) or landing.last == value:
            self.left += 1
            return
        self.undone += 1
        log.warning("A write of %r given up %.1f s ago landed late at %s/%d offset %d over a newer record of its key: "
                    "writing that record again", key.decode(errors="replace"), self._clock() - landing.given_up_at,
                    self.topic, record.partition() or 0, offset)
        self._undo(_Undo(key, landing.last, self._clock()))

    def _undo(self, undo: _Undo) -> None:
        self._undoing[undo.key] = undo

        def done(written: bool) -> None:
            if self._undoing.get(undo.key) is not undo:
                return
            if written or undo.overtaken or self._clock() - undo.started >= self.watch_age_s:
                del self._undoing[undo.key]
                return
            self._later(UNDO_RETRY_S, lambda: self._again(undo))

        self._send(undo.key, undo.value, done)

    def _again(self, undo: _Undo) -> None:
        if self._undoing.get(undo.key) is undo:
            if undo.overtaken:
                del self._undoing[undo.key]
            else:
                self._undo(undo)

    def _expire(self, now: float) -> None:
        order = self._order
        while order and now - order[0].given_up_at >= self.watch_age_s:
            self._forget(order.popleft())

    def _forget(self, watch: _Watch) -> None:
        watches = self._by_key.get(watch.key)
        if watches is not None:
            watches.remove(watch)
            if not watches:
                del self._by_key[watch.key]


def attempt_of(headers: list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None) -> bytes | None:
    """The attempt id a record's headers name (None: a record the sidecar did not write)."""
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for name, value in pairs:
        if name == ATTEMPT_HEADER:
            return value if isinstance(value, bytes) else None
    return None
