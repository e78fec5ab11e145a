"""The retry engine keeps no clock and sets no timer: every event hands it its time, it says when it next wants to be
woken (``WakeAt``) and fires what is due only when handed ``due``. Its timers are one heap: the retries, probes and
release batches, and the windows of its summary lines (the failures', the held partitions'). A stop holds back
every timer set before it until a new one is set. On a time the test moves itself, with plain lists: no event loop,
no clock, no Kafka; the views read between events (``/retries``, the metrics) on the queue's clock."""

from __future__ import annotations

import logging

import pytest

from status_store.errors import WriteFailedError
from status_store.retry.backoff import RetryMode
from status_store.retry.commands import WakeAt
from status_store.retry.delivery import Delivery
from status_store.retry.engine import Engine
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import Result, RetryPolicy, StatusUpdate, UpdateKind

from .test_partition_gate import BACKOFF, OUTAGE, FakeClock, ScriptedKafka
from .test_retry_commands import Parts, partition_of, parts


def held(p: Parts) -> StatusUpdate:
    """Partition 1 written to (so not every partition is stalled), then a write to partition 0 fails retriably:
    partition 0 is held; returns that write's update, waiting for the partition's probe."""
    p.put("a1", "x")
    p.settle(p.taken()[0], Delivery(1, 1))
    update = p.put("a0", "v")
    p.settle(p.taken()[0], None, WriteFailedError("a0", 1, OUTAGE, "scripted"))
    assert p.taken() == []
    return update


def test_the_engine_asks_to_be_woken_at_its_earliest_timer_and_fires_nothing_before() -> None:
    p = parts()
    held(p)
    wake = p.engine.wake()
    assert wake is not None
    assert wake.at == pytest.approx(1000.1)  # the probe's time: 100 ms, no jitter
    # Woken early (a timer set for a time since passed by nothing): nothing fires, and it asks again.
    assert p.engine.due(wake.at - 0.01) == wake
    assert p.taken() == []
    after = p.engine.due(wake.at)
    assert p.sends() == [(b"a0", b"v")]
    # The probe is in flight: what is left is the held partition's summary line, a minute after the hold.
    assert after == WakeAt(1060.0)


def test_a_stop_holds_back_the_timers_set_before_it_until_a_new_one_is_set() -> None:
    p = parts(timeout=10.0)
    held(p)
    waiting = p.put("b0", "w")  # behind a0 in the held partition's line; its time bound ends at 1010
    p.advance(0.1)
    probe = p.taken()
    assert [(s.key, s.value) for s in probe] == [(b"a0", b"v")]
    p.engine.stop(p.now)
    assert p.taken() == []  # the partition's probe is out: the stop sends none of its own
    # Past b0's bound: its timer is held back (only the summary line's window still closes).
    p.advance(20.0)
    assert p.outcome(waiting) is None
    # The probe fails: the partition's next probe is a new timer, and every timer due fires again, b0's bound first.
    p.settle(probe[0], None, WriteFailedError("a0", 1, OUTAGE, "scripted"))
    p.advance(0.0)
    assert (outcome := p.outcome(waiting)) is not None
    assert (outcome.result, outcome.reason) == (
        Result.FAILED, "the 10 s bound of status.storage.retry.timeout.ms passed")


def test_failures_after_the_first_are_summed_up_when_the_window_closes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "status_store.retry.queue")
    p = parts()
    for key in ("k0", "k1", "k2"):
        p.put(key, "v")
    first, *others = p.taken()
    p.settle(first, None, WriteFailedError("k0", 1, "INVALID_RECORD", "scripted"))
    assert [r.getMessage()[:31] for r in caplog.records] == ["Status update of k0 to the stat"]
    p.advance(30.0)
    for send in others:
        p.settle(send, None, WriteFailedError(send.key.decode(), 1, "INVALID_RECORD", "scripted"))
    assert len(caplog.records) == 1
    assert p.engine.wake() == WakeAt(1060.0)
    p.advance(30.0)
    assert caplog.records[-1].getMessage() == (
        "2 more status update(s) to the status topic failed in the last 60 s, e.g. k1, k2")


def test_failures_summed_up_when_the_engine_closes_are_logged_then(caplog: pytest.LogCaptureFixture) -> None:
    # A failure after the first of its window used to wait for the window's end (a minute) to be logged; a stopping
    # sidecar ends first, and an update dropped after its last retry (or refused for good) was then lost without a
    # line: neither in the stop's own line, which names only what the stop cut short, nor in any other.
    caplog.set_level(logging.ERROR, "status_store.retry.queue")
    p = parts()
    for key in ("k0", "k1", "k2", "k3"):
        p.put(key, "v")
    first, *others = p.taken()
    p.settle(first, None, WriteFailedError("k0", 1, "INVALID_RECORD", "scripted"))
    p.advance(12.0)
    p.engine.stop(p.now)
    for send in others[:2]:
        p.settle(send, None, WriteFailedError(send.key.decode(), 1, "INVALID_RECORD", "scripted"))
    assert len(caplog.records) == 1
    p.advance(0.5)
    assert [update.key for update in p.engine.close(p.now, "the store stopped")] == ["k3"]
    assert caplog.records[-1].getMessage() == (
        "2 more status update(s) to the status topic failed in the last 12.5 s, e.g. k1, k2")
    # Nothing is left to sum up at the window's end, and the next failure is logged at once.
    p.advance(60.0)
    assert len(caplog.records) == 2
    # The next window closes with nothing failed in it: no line, and no window left open.
    p.advance(60.0)
    assert len(caplog.records) == 2
    assert p.engine.wake() is None


def test_a_held_partition_is_summed_up_once_a_minute_until_it_is_released(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "status_store.retry.queue")
    p = parts()
    held(p)
    p.advance(60.0)
    summaries = [r.getMessage() for r in caplog.records if "held, the longest" in r.getMessage()]
    assert summaries == ["1 partition(s) of the status topic held, the longest for 60 s: 0 key(s) waiting, 0 parked, "
                         "1 probe(s) sent so far"]
    # Released: the probe in flight is written; the next window closes without a line, and none opens after it.
    p.settle(p.taken()[-1], Delivery(0, 2))
    assert p.engine.wake() == WakeAt(1120.0)
    p.advance(60.0)
    assert sum("held, the longest" in r.getMessage() for r in caplog.records) == 1
    assert p.engine.wake() is None


def test_the_views_read_between_events_take_the_queues_clock() -> None:
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 100), route=partition_of, clock=clock)
    queue.submit(StatusUpdate("a1", b"x", UpdateKind.CONNECTOR))
    kafka.write_all()
    a0 = queue.submit(StatusUpdate("a0", b"v", UpdateKind.CONNECTOR))
    kafka.fail(kafka.only_unsettled())
    clock.advance(0.1)  # the probe (a0) goes
    b0 = queue.submit(StatusUpdate("b0", b"w", UpdateKind.CONNECTOR))  # in line behind it: the last event
    clock.advance(2.0)
    assert [s.key for s in kafka.unsettled] == ["a0"]
    # Two seconds after the last event: the views say so (not the time of the event the engine last saw).
    assert queue.oldest_unsettled_age() == pytest.approx(2.1)
    assert queue.waiting_retries() == [b0]
    assert queue.next_attempt(b0) == pytest.approx(1002.1)  # no probe scheduled (one is out): it may go now
    assert a0.outcome is None



@pytest.mark.parametrize("stop_lasts", [2.8, 10.0, 60.0, 600.0])
def test_a_slow_stop_names_every_update_it_leaves_unwritten_whatever_settles_during_it(stop_lasts: float) -> None:
    # The sidecar's stop with every broker down (tests/test_stop_bound.py), as slow as one likes: the attempts in
    # flight at the stop time out during it, their partitions are held, their probes go and fail until they run out
    # of retries and are parked. Whenever the engine closes, every update is either without an outcome (returned by
    # the close: the stop's line names it) or parked (named by the stop's line too, or kept by the spool): none
    # settles otherwise, so none is lost without a line.
    p = Parts(Engine(RetryPolicy(BACKOFF, 5, None, mode=RetryMode.PARTITION), partition_of))
    p.engine.park_after_last_retry()
    updates = [p.put(f"k{key}", "v") for key in range(50)]
    sends = p.taken()
    assert len(sends) == 50
    p.engine.stop(p.now)
    assert p.taken() == []
    end = p.now + stop_lasts
    p.advance(min(2.8, stop_lasts))  # the attempts in flight time out
    for _ in range(100_000):
        for send in sends:
            p.settle(send, None, WriteFailedError(send.key.decode(), 1, "_MSG_TIMED_OUT", "scripted"))
        sends = p.taken()
        if p.now >= end:
            break
        p.advance(min(0.1, end - p.now))
        sends += p.taken()
    lost, parked = p.engine.close(p.now, "the store stopped"), p.engine.parked()
    # Each key once: its update (or, a parked one sent again by a probe, the update that sends it again) cut short by
    # the stop, or parked.
    assert sorted(u.key for u in [*lost, *parked]) == sorted(u.key for u in updates)
    assert all((o := p.outcome(u)) is not None and o.result is Result.FAILED and (o.stopped or o.parked)
               for u in [*updates, *lost])
    if stop_lasts >= 60.0:
        assert parked  # the long stops do run some out of retries
