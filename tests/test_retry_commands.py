"""The retry engine sends nothing itself: it decides a record to send (``commands.Send``) and records the attempt as in
flight; the queue hands the records to the producer after each event, and each delivery report, or the producer's
refusal, back to the engine. On a clock of the test's own, with plain lists: no event loop, no Kafka."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from status_store.errors import StoreClosedError, WriteFailedError
from status_store.retry.backoff import RetryMode
from status_store.retry.commands import Send, Settle
from status_store.retry.delivery import Delivery, DoneCallback
from status_store.retry.engine import Engine
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import Outcome, Result, RetryListener, RetryPolicy, StatusUpdate, UpdateKind

from .test_partition_gate import BACKOFF, FakeClock, ScriptedKafka, partition_0_held


def partition_of(key: str) -> int:
    """The test's partitioner: a key's last digit."""
    return int(key[-1])


@dataclasses.dataclass
class Parts:
    """The engine without the queue: the test hands it each event with its time (a number it moves itself) and takes
    the commands it leaves."""

    engine: Engine
    now: float = 1000.0
    # The outcomes the engine decided (its ``Settle`` effects), by update number.
    settled: dict[int, Outcome] = dataclasses.field(default_factory=dict)

    def outcome(self, update: StatusUpdate) -> Outcome | None:
        """The update's outcome, if the engine has decided one (the queue would have given it to the handle)."""
        for effect in self.engine.take_effects():
            if isinstance(effect, Settle):
                self.settled[effect.update.number] = effect.outcome
        return self.settled.get(update.number)

    def put(self, key: str, value: str) -> StatusUpdate:
        update = StatusUpdate(key, value.encode(), UpdateKind.CONNECTOR)
        self.engine.submit(update, self.now)
        return update

    def settle(self, send: Send, delivery: Delivery | None, error: WriteFailedError | None = None) -> None:
        """The record's delivery report, now."""
        self.engine.settled(send.attempt, delivery, error, self.now)

    def taken(self) -> list[Send]:
        """The records decided since the last call."""
        return self.engine.take_sends()

    def sends(self) -> list[tuple[bytes, bytes | None]]:
        """The same, as (key, value)."""
        return [(send.key, send.value) for send in self.taken()]

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``, handing the engine ``due`` at each time it asked to be woken on the way."""
        end = self.now + seconds
        wake = self.engine.wake()
        for _ in range(10_000):
            if wake is None or wake.at > end:
                break
            self.now = max(self.now, wake.at)
            wake = self.engine.due(self.now)
        else:
            raise AssertionError("the engine kept asking to be woken")
        self.now = end


def parts(timeout: float | None = None) -> Parts:
    """The engine on a partitioner by a key's last digit; ``timeout``: each update's time bound (seconds)."""
    return Parts(Engine(RetryPolicy(BACKOFF, 100, timeout, mode=RetryMode.PARTITION), partition_of))


def test_the_outbox_holds_each_record_once_in_the_order_decided() -> None:
    p = parts()
    first = p.put("k0", "v1")
    p.put("k1", "w1")
    newer = p.put("k0", "v2")  # behind k0's write in flight: no record yet
    sends = p.taken()
    assert [(s.key, s.value) for s in sends] == [(b"k0", b"v1"), (b"k1", b"w1")]
    assert p.taken() == []
    assert newer.attempts == 0
    # k0's report: written; its newer value is the next record (its first attempt).
    p.settle(sends[0], Delivery(0, 1), None)
    assert (outcome := p.outcome(first)) is not None
    assert outcome.result is Result.WRITTEN
    assert p.sends() == [(b"k0", b"v2")]
    assert newer.attempts == 1


def test_a_held_partitions_probe_is_a_record_decided_when_its_time_comes() -> None:
    p = parts()
    p.put("a1", "x")
    written = p.taken()
    p.settle(written[0], Delivery(1, 1), None)
    update = p.put("a0", "v")
    p.settle(p.taken()[0], None, WriteFailedError("a0", 1, "NOT_ENOUGH_REPLICAS", "scripted"))
    # Held: nothing to send until the probe's time (100 ms, no jitter), then the waiting value as the probe.
    assert p.taken() == []
    p.advance(0.05)
    assert p.taken() == []
    p.advance(0.1)
    probe = p.taken()
    assert [(s.key, s.value) for s in probe] == [(b"a0", b"v")]
    p.settle(probe[0], Delivery(0, 1), None)
    assert (outcome := p.outcome(update)) is not None
    assert outcome.result is Result.WRITTEN
    assert update.attempts == 2


class ClosingKafka(ScriptedKafka):
    """A producer that refuses the next ``refusals`` records as a closed producer does (``StoreClosedError``)."""

    def __init__(self, clock: FakeClock, refusals: int) -> None:
        super().__init__(clock)
        self.refusals = refusals

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise StoreClosedError("the producer of status is not running")
        super().send(key, value, done)


def test_a_record_the_producer_refuses_fails_its_update_and_the_key_moves_on() -> None:
    clock = FakeClock()
    kafka = ClosingKafka(clock, refusals=1)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 100), route=lambda key: int(key[-1]), clock=clock)
    refused = queue.submit(StatusUpdate("k0", b"v1", UpdateKind.CONNECTOR))
    assert refused.outcome is not None
    assert (refused.outcome.result, refused.outcome.attempts) == (Result.FAILED, 1)
    assert refused.outcome.reason == "not sent: the producer of status is not running"
    # Nothing of the refused write is left in flight: the key's next write goes at once.
    newer = queue.submit(StatusUpdate("k0", b"v2", UpdateKind.CONNECTOR))
    assert [(s.key, s.value) for s in kafka.unsettled] == [("k0", b"v2")]
    kafka.write_all()
    assert newer.outcome is not None
    assert newer.outcome.result is Result.WRITTEN
    assert queue.unsettled == 0
    assert queue.attempts_total == 2


def test_a_probe_the_producer_refuses_is_no_probe_and_the_next_goes_at_once() -> None:
    clock = FakeClock()
    kafka = ClosingKafka(clock, refusals=0)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 100), route=lambda key: int(key[-1]), clock=clock)
    queue.submit(StatusUpdate("a1", b"x", UpdateKind.CONNECTOR))
    kafka.write_all()
    a0 = queue.submit(StatusUpdate("a0", b"v", UpdateKind.CONNECTOR))
    kafka.fail(kafka.only_unsettled())
    b0 = queue.submit(StatusUpdate("b0", b"w", UpdateKind.CONNECTOR))
    assert queue.held_partitions == [0]
    assert kafka.unsettled == []
    # The producer closes as the probe (a0, the oldest in line) is due: 100 ms later, no jitter.
    kafka.refusals = 1
    clock.advance(0.1)
    assert a0.outcome is not None
    assert a0.outcome.reason == "not sent: the producer of status is not running"
    # The refused probe counts as none; b0 went as the probe at once, not a backoff step later.
    assert [s.key for s in kafka.unsettled] == ["b0"]
    assert kafka.unsettled[0].at == pytest.approx(1000.1)
    assert queue.probes_total == 1
    kafka.write_all()
    assert b0.outcome is not None
    assert b0.outcome.result is Result.WRITTEN
    assert queue.held_partitions == []


def test_the_listeners_hear_of_an_outcome_after_its_step_and_before_the_records_the_step_decided() -> None:
    """The engine's step settles an update and decides the key's next record; the queue then gives the outcome to the
    update's handle, tells the listeners, and only then hands the records to the producer (the order the queue kept
    when the listeners were called inside the step)."""
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    heard: list[tuple[Result, bool, list[bytes | None]]] = []

    class Listener(RetryListener):
        def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
            heard.append((outcome.result, update.done(), [s.value for s in kafka.unsettled]))

    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 100), [Listener()], route=partition_of, clock=clock)
    first = queue.submit(StatusUpdate("k0", b"v1", UpdateKind.CONNECTOR))
    queue.submit(StatusUpdate("k0", b"v2", UpdateKind.CONNECTOR))  # behind the write in flight
    kafka.write(kafka.only_unsettled())
    assert heard == [(Result.WRITTEN, True, [])]
    assert first.outcome is not None
    assert [s.value for s in kafka.unsettled] == [b"v2"]


async def test_a_handles_future_is_made_by_the_queue_module_when_its_caller_asks() -> None:
    """The handle has no event loop of its own (retry/updates.py imports no asyncio): retry/queue.py makes its future
    on the running loop when a caller first waits, done at once if it has settled; a wait that times out never cancels
    it; a parked update submitted again is waited for the same way."""
    g, exhausted = partition_0_held(max_retries=0)
    assert exhausted.settled().done()
    assert (await exhausted.result()).result is Result.FAILED
    g.clock.advance(0.2)
    ((_, again, _),) = g.parker.unparked
    assert again is not None
    settled = again.settled()
    assert isinstance(settled, asyncio.Future)
    assert settled is again.settled()
    with pytest.raises(TimeoutError):
        await again.result(0)
    assert not settled.cancelled()
    waiting = asyncio.ensure_future(again.result())
    g.kafka.write(g.kafka.only_unsettled())
    assert (await asyncio.wait_for(waiting, 10)).result is Result.WRITTEN
    assert settled.result() is again.outcome
