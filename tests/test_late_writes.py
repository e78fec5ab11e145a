"""The watch table of given-up writes (status_store/kafka/late_writes.py), without Kafka: which delivery errors are
watched, the bounds on number and age, and what a late landing comes to. Records are confluent_kafka's own
``Message`` objects, as the reader hands them over; the clock and the timer are the test's, so no test waits."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message

from status_store.connect.record_limit import ATTEMPT_HEADER_BYTES
from status_store.kafka.late_writes import ATTEMPT_HEADER, POSSIBLY_PERSISTED, Attempts, LateWrites

KEY = b"status-task-c-0"
RUNNING = b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":3}'
PAUSED = b'{"state":"PAUSED","trace":null,"worker_id":"w1:8083","generation":4}'
TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT)


class Bed:
    """A ``LateWrites`` with the test's clock, the test's timer and the sends it made, in order."""

    def __init__(self, landed: int = -1, max_watches: int = 100, watch_age_s: float = 60.0) -> None:
        self.now = 0.0
        self.sent: list[tuple[bytes, bytes | None, Callable[[bool], None]]] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.late = LateWrites("status", lambda key, value, done: self.sent.append((key, value, done)),
                               lambda delay, callback: self.timers.append((delay, callback)), lambda _: landed,
                               clock=lambda: self.now, max_watches=max_watches, watch_age_s=watch_age_s)

    def read(self, offset: int, value: bytes | None, attempt: bytes | None = None, key: bytes = KEY) -> None:
        headers = [(ATTEMPT_HEADER, attempt)] if attempt is not None else None
        self.late.read([Message(topic="status", partition=0, offset=offset, key=key, value=value, headers=headers)])


def test_every_attempt_id_is_new_and_short() -> None:
    attempts = Attempts()
    ids = {attempts.next() for _ in range(1000)}
    assert len(ids) == 1000
    assert {len(attempt) for attempt in ids} == {16}
    assert attempts.next()[:8] != Attempts().next()[:8]


def test_the_record_limit_leaves_room_for_the_attempt_header() -> None:
    # Record headers on the wire (Kafka's record format v2): the count, then each name's and value's length (varints:
    # one byte below 64) before their bytes. A record cut to fit the limit exactly must still fit with its header.
    name, value = ATTEMPT_HEADER.encode(), Attempts().next()
    assert len(name) < 64
    assert len(value) < 64
    assert 1 + 1 + len(name) + 1 + len(value) == ATTEMPT_HEADER_BYTES


@pytest.mark.parametrize("code", sorted(POSSIBLY_PERSISTED))
def test_an_error_after_which_the_request_may_land_is_watched(code: int) -> None:
    bed = Bed()
    bed.late.given_up(KafkaError(code), 0, KEY, RUNNING, b"a1")
    assert bed.late.watched == 1


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT_QUEUE, KafkaError.NOT_ENOUGH_REPLICAS,
                                  KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                  KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._PURGE_QUEUE])
def test_an_error_of_a_record_never_appended_is_not_watched(code: int) -> None:
    bed = Bed()
    bed.late.given_up(KafkaError(code), 0, KEY, RUNNING, b"a1")
    assert bed.late.watched == 0


def test_a_record_never_placed_on_a_partition_is_not_watched() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, -1, KEY, RUNNING, b"a1")
    assert bed.late.watched == 0


def test_the_oldest_watch_is_dropped_past_the_bound_and_counted() -> None:
    bed = Bed(max_watches=2)
    for attempt in (b"a1", b"a2", b"a3"):
        bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, attempt)
    assert (bed.late.watched, bed.late.dropped) == (2, 1)
    # a1's watch is gone: its late landing is not looked at; a2's still is.
    bed.read(5, PAUSED)
    bed.read(6, RUNNING, b"a1")
    assert bed.sent == []
    bed.read(7, PAUSED)
    bed.read(8, RUNNING, b"a2")
    assert [(key, value) for key, value, _ in bed.sent] == [(KEY, PAUSED)]


def test_a_watch_ends_at_its_age() -> None:
    bed = Bed(watch_age_s=60.0)
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.now = 60.0
    bed.read(5, None)
    assert bed.late.watched == 0
    bed.read(6, RUNNING, b"a1")
    assert (bed.sent, bed.late.undone, bed.late.left) == ([], 0, 0)


def test_a_late_landing_over_a_newer_record_writes_that_record_again() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(5, None)  # the leader's tombstone
    bed.read(6, RUNNING, b"a1")
    assert [(key, value) for key, value, _ in bed.sent] == [(KEY, None)]
    assert (bed.late.undone, bed.late.left, bed.late.watched) == (1, 0, 0)


def test_a_late_landing_over_nothing_read_since_the_give_up_or_over_its_equal_is_left() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(6, RUNNING, b"a1")
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a2")
    bed.read(7, RUNNING)
    bed.read(8, RUNNING, b"a2")
    assert (bed.sent, bed.late.undone, bed.late.left) == ([], 0, 2)


def test_a_record_that_landed_before_the_give_up_is_not_newer() -> None:
    """The reader may read a record after the give-up that landed before it (it lagged, or was cut off too): below
    the highest offset known at the give-up, it is not taken for a newer record."""
    bed = Bed(landed=5)
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(5, PAUSED)
    bed.read(6, RUNNING, b"a1")
    assert (bed.sent, bed.late.left) == ([], 1)


def test_records_of_other_keys_and_other_attempts_do_not_end_a_watch() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(5, PAUSED, key=b"status-task-c-1")
    bed.read(6, RUNNING, b"other")
    assert bed.late.watched == 1
    bed.read(7, RUNNING, b"a1")
    assert (bed.late.left, bed.late.watched) == (1, 0)


def test_a_failed_undo_is_sent_again_only_while_the_late_record_is_its_keys_last() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(5, None)
    bed.read(6, RUNNING, b"a1")
    _, _, done = bed.sent[0]
    done(False)
    delay, again = bed.timers.pop()
    assert delay > 0
    again()
    assert len(bed.sent) == 2
    # A record of the key read over the late one: the undo is not needed any more.
    bed.read(7, PAUSED)
    bed.sent[1][2](False)
    assert (len(bed.sent), bed.timers) == (2, [])


def test_a_written_undo_ends_and_a_stop_ends_every_undo() -> None:
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.read(5, None)
    bed.read(6, RUNNING, b"a1")
    bed.sent[0][2](True)
    assert bed.timers == []
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a2")
    bed.read(8, None)
    bed.read(9, RUNNING, b"a2")
    bed.sent[1][2](False)
    bed.late.stop()
    bed.timers.pop()[1]()
    assert len(bed.sent) == 2


def test_a_late_landing_is_no_newer_record_for_another_late_landing_of_its_key() -> None:
    """Two given-up attempts of a key land late after the leader's tombstone: both are undone to the tombstone, the
    second not to the first's late value."""
    bed = Bed()
    bed.late.given_up(TIMED_OUT, 0, KEY, RUNNING, b"a1")
    bed.late.given_up(TIMED_OUT, 0, KEY, PAUSED, b"a2")
    bed.read(5, None)
    bed.read(6, RUNNING, b"a1")
    bed.read(7, PAUSED, b"a2")
    assert [(key, value) for key, value, _ in bed.sent] == [(KEY, None), (KEY, None)]
    assert bed.late.undone == 2
