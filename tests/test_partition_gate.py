"""The outage state machine (``partition_gate``) on a clock of the test's own, with each write's outcome scripted
by the test: no event loop, no Kafka, and every step of an outage checked as it happens. The same machine against
a broker is tests/test_held_partitions.py; against real brokers, tests/test_real_faults.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest

from status_store.errors import WriteFailedError
from status_store.retry.backoff import AdditiveJitter, RetryMode
from status_store.retry.delivery import Delivery, DoneCallback
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import ReleasePace, Result, RetryListener, RetryPolicy, StatusUpdate, UpdateKind

# No jitter: every backoff is exactly 100 ms * 2^n, at most 800 ms.
BACKOFF = AdditiveJitter(100, 800, 2.0, 0.0)
OUTAGE = "NOT_ENOUGH_REPLICAS"


class FakeTimer:
    """A callback on the fake clock."""

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self._when, self.callback, self.cancelled = when, callback, False

    def when(self) -> float:
        return self._when

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Time moves only when the test says; due callbacks run in time order as it does."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._timers: list[FakeTimer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object], /) -> FakeTimer:
        timer = FakeTimer(when, callback)
        self._timers.append(timer)
        return timer

    def next_due(self) -> float | None:
        """When the next callback is due, if any."""
        return min((t.when() for t in self._timers if not t.cancelled), default=None)

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``, running each callback due on the way at its time."""
        end = self.now + seconds
        for _ in range(10_000):
            due = [t for t in self._timers if not t.cancelled and t.when() <= end]
            if not due:
                break
            timer = min(due, key=FakeTimer.when)
            self._timers.remove(timer)
            self.now = max(self.now, timer.when())
            timer.callback()
        else:
            raise AssertionError("the callbacks kept scheduling more callbacks")
        self.now = end


@dataclasses.dataclass
class Sent:
    key: str
    value: bytes | None
    at: float
    done: DoneCallback


class ScriptedKafka:
    """The queue's ``send``: records each write; the test settles each one as it likes."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[Sent] = []
        self.unsettled: list[Sent] = []
        self._offset = 0

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        sent = Sent(key.decode(), value, self.clock.now, done)
        self.sent.append(sent)
        self.unsettled.append(sent)

    def write(self, sent: Sent) -> None:
        self.unsettled.remove(sent)
        self._offset += 1
        sent.done(Delivery(int(sent.key[-1]), self._offset), None)

    def fail(self, sent: Sent, error: str = OUTAGE) -> None:
        self.unsettled.remove(sent)
        sent.done(None, WriteFailedError(sent.key, 1, error, "scripted"))

    def write_all(self) -> list[Sent]:
        """Settle every write out now as written; returns them."""
        batch = list(self.unsettled)
        for sent in batch:
            self.write(sent)
        return batch

    def only_unsettled(self) -> Sent:
        assert len(self.unsettled) == 1, self.unsettled
        return self.unsettled[0]


class Parker(RetryListener):
    """Notes the parked updates that leave the queue (the queue parks each update that failed for good, as
    ``AfterLastRetry`` asks it to with exhausted.action=park)."""

    def __init__(self) -> None:
        self.unparked: list[tuple[StatusUpdate, StatusUpdate | None, str]] = []

    def on_unparked(self, update: StatusUpdate, again: StatusUpdate | None, reason: str) -> None:
        self.unparked.append((update, again, reason))


@dataclasses.dataclass
class Gate:
    clock: FakeClock
    kafka: ScriptedKafka
    queue: RetryQueue
    parker: Parker

    def put(self, key: str, value: str = "v") -> StatusUpdate:
        return self.queue.submit(StatusUpdate(key, value.encode(), UpdateKind.CONNECTOR))

    def hold(self, *keys: str) -> list[StatusUpdate]:
        """Write these keys and fail each write: their partitions are held."""
        updates = [self.put(key) for key in keys]
        for sent in list(self.kafka.unsettled):
            self.kafka.fail(sent)
        return updates

    def probe_until_through(self, failures: int, error: str = OUTAGE) -> list[bytes | None]:
        """Fail the next ``failures`` probes (each within a second) with ``error``, then let one through; the values
        they carried."""
        values = []
        for n in range(failures + 1):
            self.clock.advance(1.0)
            probe = self.kafka.only_unsettled()
            values.append(probe.value)
            if n < failures:
                self.kafka.fail(probe, error)
            else:
                self.kafka.write(probe)
        return values


def gate(max_retries: int = 100) -> Gate:
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    parker = Parker()
    # A key's partition is its last character.
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, max_retries, mode=RetryMode.PARTITION), [parker],
                       route=lambda key: int(key[-1]), clock=clock)
    queue.park_after_last_retry()
    return Gate(clock, kafka, queue, parker)


def partition_0_held(max_retries: int = 100) -> tuple[Gate, StatusUpdate]:
    """A queue that has written to partition 1 (so partition 0 is not the only one it knows) and whose write of
    key a0 failed: partition 0 is held. Returns the queue and a0's update."""
    g = gate(max_retries)
    g.put("a1")
    g.kafka.write_all()
    return g, g.hold("a0")[0]


def test_a_retriable_failure_holds_its_partition_and_only_that_one() -> None:
    g, a = partition_0_held()
    assert g.queue.held_partitions == [0]
    assert not a.done()
    assert g.queue.waits_in_line(a)
    # A new write of a held partition waits in its line; one of a partition that takes writes goes at once.
    waiting = g.put("b0")
    assert g.kafka.unsettled == []
    assert g.queue.waits_in_line(waiting)
    g.put("c1")
    assert [s.key for s in g.kafka.unsettled] == ["c1"]
    assert g.queue.unsettled == 3


def test_one_probe_at_a_time_the_oldest_waiting_update() -> None:
    g, _ = partition_0_held()
    g.put("b0")
    g.put("c0")
    g.clock.advance(0.05)
    assert g.kafka.unsettled == []
    assert g.queue.probes_total == 0
    g.clock.advance(0.1)
    probe = g.kafka.only_unsettled()
    assert probe.key == "a0"
    assert g.queue.probes_total == 1
    # However long the probe takes, nothing else of the partition goes meanwhile.
    g.clock.advance(30)
    assert g.kafka.only_unsettled() is probe
    assert g.queue.probes_total == 1


def next_probe(g: Gate) -> Sent:
    """Move time on to the moment the next probe goes (callback by callback); the probe."""
    for _ in range(100):
        if g.kafka.unsettled:
            return g.kafka.only_unsettled()
        due = g.clock.next_due()
        assert due is not None, "no probe is scheduled"
        g.clock.advance(max(0.0, due - g.clock.now))
    raise AssertionError("no probe went")


def test_a_failed_probe_backs_off_one_step_further_each_time() -> None:
    g, _ = partition_0_held()
    waits = []
    for _ in range(5):
        failed_at = g.clock.now  # the hold began, or the last probe failed (as soon as it went)
        probe = next_probe(g)
        waits.append(round(probe.at - failed_at, 2))
        g.kafka.fail(probe)
    # The probe schedule: 100 ms after the hold, then twice as long after each failed probe, at most 800 ms.
    assert waits == [0.1, 0.2, 0.4, 0.8, 0.8]
    assert g.queue.held_partitions == [0]
    assert g.queue.probes_total == 5


@pytest.mark.parametrize("out_s", [0.05, 0.3, 3.0])
def test_a_probes_backoff_counts_from_when_it_went_so_one_is_queued_whenever_the_brokers_come_back(
        out_s: float) -> None:
    # The brokers away: a probe waits in the producer's queue until its delivery bound and fails then, having waited
    # that long already. The next goes its backoff (200 ms) after the failed one went, at once if that has passed: so
    # a probe is in the producer's queue almost all the time, and goes as soon as the producer reaches a broker again.
    g, _ = partition_0_held()
    first = next_probe(g)
    g.clock.advance(out_s)
    g.kafka.fail(first)
    second = next_probe(g)
    assert round(second.at - first.at, 3) == max(0.2, out_s)
    # Probes that fail as they go still back off a whole step each: one probe per interval, never more.
    g.kafka.fail(second)
    third = next_probe(g)
    assert round(third.at - second.at, 3) == 0.4


@pytest.mark.parametrize("out_s", [0.05, 3.0])
def test_the_clusters_probe_backoff_counts_from_when_it_went(out_s: float) -> None:
    g = gate()
    g.hold("a0", "b1")
    first = next_probe(g)
    g.clock.advance(out_s)
    g.kafka.fail(first)
    second = next_probe(g)
    assert round(second.at - first.at, 3) == max(0.2, out_s)


def test_a_probe_that_gets_through_releases_the_line_in_batches_that_double() -> None:
    g, _ = partition_0_held()
    waiting = [g.put(f"k{i}-0") for i in range(40)]
    g.clock.advance(0.2)
    g.kafka.write(g.kafka.only_unsettled())
    batches = []
    for _ in range(10):
        if not g.kafka.unsettled:
            break
        batches.append(len(g.kafka.write_all()))
        g.clock.advance(0.025)  # the release's pace
    # Slow start: a first small batch, twice as large after each batch that all got through (the probe, then 40).
    assert batches == [ReleasePace().first, 4, 8, 16, 10]
    assert all(u.outcome is not None and u.outcome.result is Result.WRITTEN for u in waiting)
    assert g.queue.held_partitions == []
    assert g.queue.unsettled == 0
    # The partition takes writes directly again.
    g.put("z0")
    assert [s.key for s in g.kafka.unsettled] == ["z0"]


def test_a_failure_in_a_release_batch_halves_the_rate() -> None:
    g, _ = partition_0_held()
    for i in range(40):
        g.put(f"k{i}-0")
    g.clock.advance(0.2)
    g.kafka.write(g.kafka.only_unsettled())
    assert len(g.kafka.write_all()) == 2
    g.clock.advance(0.025)
    first, *rest = list(g.kafka.unsettled)
    assert len(rest) == 3
    g.kafka.fail(first)
    for sent in rest:
        g.kafka.write(sent)
    g.clock.advance(0.025)
    # 4 per pace interval halved: 2, and the failed key goes to the back of the line, not lost.
    assert len(g.kafka.unsettled) == 2
    assert g.queue.held_partitions == [0]


def test_while_every_partition_is_held_one_probe_goes_for_the_cluster() -> None:
    g = gate()
    g.hold("a0", "a1", "a2")
    assert g.queue.held_partitions == [0, 1, 2]
    probed = []
    for _ in range(3):
        g.clock.advance(2.0)
        probe = g.kafka.only_unsettled()  # one for the whole cluster, not one per partition
        probed.append(probe.key)
        g.kafka.fail(probe)
    # Each partition in turn, the one probed longest ago first.
    assert sorted(probed) == ["a0", "a1", "a2"]
    g.clock.advance(2.0)
    g.kafka.write(g.kafka.only_unsettled())
    # A probe that got through says the cluster may take writes: every other partition is probed at once.
    g.clock.advance(0)
    assert len(g.kafka.unsettled) == 2
    g.kafka.write_all()
    g.clock.advance(0)
    assert g.queue.held_partitions == []
    assert g.queue.unsettled == 0


def test_a_parked_update_waits_in_its_partition_and_its_probe_submits_it_again() -> None:
    g, exhausted = partition_0_held(max_retries=0)
    assert exhausted.outcome is not None
    assert exhausted.outcome.result is Result.FAILED
    assert g.queue.parked() == [exhausted]
    assert g.queue.parked_count == 1
    assert g.queue.held_partitions == [0]
    g.clock.advance(0.2)
    probe = g.kafka.only_unsettled()
    assert (probe.key, probe.value) == ("a0", exhausted.value)
    ((parked, again, _),) = g.parker.unparked
    assert parked is exhausted
    assert again is not None
    g.kafka.write(probe)
    assert again.outcome is not None
    assert again.outcome.result is Result.WRITTEN
    assert g.queue.parked_count == 0
    assert g.queue.held_partitions == []


def test_a_newer_write_replaces_a_parked_value() -> None:
    g, _ = partition_0_held(max_retries=0)
    newer = g.put("a0", "newer")
    assert g.queue.parked_count == 0
    assert g.parker.unparked[0][1] is None
    g.clock.advance(0.2)
    assert (g.kafka.only_unsettled().value, newer.done()) == (b"newer", False)


def test_a_parked_value_that_may_still_land_goes_again_before_a_newer_one() -> None:
    """An update that runs out of retries on a timeout (its write may still land) is parked as it settles, before the
    step goes on: its key's slot stays, and with it that the value may land. A newer value replaces the parked one, and
    goes after a copy of the older value is acknowledged, as after any timeout (a park after the step found the key's
    slot dropped, and the newer value went first: the older copy could land after it)."""
    g = gate(max_retries=0)
    g.put("a1")
    g.kafka.write_all()
    older = g.put("a0", "v1")
    g.kafka.fail(g.kafka.only_unsettled(), "_MSG_TIMED_OUT")
    assert older.outcome is not None
    assert (older.outcome.result, older.outcome.parked) == (Result.FAILED, True)
    assert g.queue.parked() == [older]
    newer = g.put("a0", "v2")
    g.clock.advance(1.0)
    copy = g.kafka.only_unsettled()
    assert copy.value == b"v1"
    g.kafka.write(copy)
    assert not newer.done()
    last = g.kafka.only_unsettled()
    assert last.value == b"v2"
    g.kafka.write(last)
    assert newer.outcome is not None
    assert newer.outcome.result is Result.WRITTEN


@pytest.mark.parametrize("in_flight", [False, True], ids=["held", "in-flight"])
def test_a_newer_write_supersedes_a_held_older_one_and_no_older_value_goes_after_it(in_flight: bool) -> None:
    g = gate()
    g.put("a1")
    g.kafka.write_all()
    older = g.put("a0", "v1")
    if not in_flight:
        g.kafka.fail(g.kafka.only_unsettled())
    newer = g.put("a0", "v2")  # behind the write in flight, or in the held partition's line
    if in_flight:
        assert not older.done()
        g.kafka.fail(g.kafka.only_unsettled())
    assert older.outcome is not None
    assert older.outcome.result is Result.SUPERSEDED
    assert g.queue.held_partitions == [0]
    assert g.probe_until_through(3) == [b"v2"] * 4
    assert newer.outcome is not None
    assert newer.outcome.result is Result.WRITTEN
    values = [s.value for s in g.kafka.sent if s.key == "a0"]
    assert values == [b"v1", b"v2", b"v2", b"v2", b"v2"]


@pytest.mark.parametrize("newer_first", [False, True], ids=["newer-later", "newer-before-the-timeout"])
def test_after_a_write_timed_out_its_value_goes_again_before_a_newer_one(newer_first: bool) -> None:
    """A write that timed out may still reach the broker (the network may hold the request and deliver it
    later, on a connection the client has closed). A newer value of the key sent meanwhile could land first and
    be overwritten by it: so the timed-out value goes again (here: as the partition's probe) until it is
    acknowledged, and only then the newer one."""
    g = gate()
    g.put("a1")
    g.kafka.write_all()
    older = g.put("a0", "v1")
    newer = g.put("a0", "v2") if newer_first else None
    g.kafka.fail(g.kafka.only_unsettled(), "_MSG_TIMED_OUT")
    if newer is None:
        newer = g.put("a0", "v2")
    assert older.outcome is not None
    assert older.outcome.result is Result.SUPERSEDED
    assert g.queue.held_partitions == [0]
    # The probes carry the value that may still be on its way, however often they time out too.
    assert g.probe_until_through(2, "_MSG_TIMED_OUT") == [b"v1"] * 3
    # Acknowledged: now the newer value, which is what the key ends with.
    g.clock.advance(0.1)
    g.kafka.write(g.kafka.only_unsettled())
    assert newer.outcome is not None
    assert newer.outcome.result is Result.WRITTEN
    assert [s.value for s in g.kafka.sent if s.key == "a0"] == [b"v1", b"v1", b"v1", b"v1", b"v2"]
    assert g.queue.held_partitions == []
    assert g.queue.unsettled == 0
    # A failure that says the write did not land (the broker answered) asks for no such repeat.
    g.put("b0", "w1")
    g.kafka.fail(g.kafka.only_unsettled())
    g.put("b0", "w2")
    g.clock.advance(1.0)
    assert g.kafka.only_unsettled().value == b"w2"


def test_after_a_write_timed_out_in_per_update_mode_its_value_goes_again_first() -> None:
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 100, mode=RetryMode.PER_UPDATE), [], clock=clock)
    queue.submit(StatusUpdate("a0", b"v1", UpdateKind.CONNECTOR))
    newer = queue.submit(StatusUpdate("a0", b"v2", UpdateKind.CONNECTOR))
    kafka.fail(kafka.only_unsettled(), "_TRANSPORT")
    clock.advance(1.0)
    replay = kafka.only_unsettled()
    assert replay.value == b"v1"
    kafka.write(replay)
    assert not newer.done()
    clock.advance(0)
    kafka.write(kafka.only_unsettled())
    assert newer.outcome is not None
    assert newer.outcome.result is Result.WRITTEN
    assert [s.value for s in kafka.sent] == [b"v1", b"v1", b"v2"]


def test_the_signal_that_a_partition_can_take_writes_again_probes_it_at_once() -> None:
    g, _ = partition_0_held()
    g.clock.advance(0.15)
    g.kafka.fail(g.kafka.only_unsettled())  # the first probe fails: the next is 200 ms away
    assert g.kafka.unsettled == []
    assert g.queue.writable_again(0)
    g.clock.advance(0.0)
    probe = g.kafka.only_unsettled()
    assert probe.key == "a0"
    # While a probe is out the signal changes nothing; for a partition that is not held, nothing either.
    assert not g.queue.writable_again(0)
    assert not g.queue.writable_again(1)
    g.kafka.write(probe)
    assert g.queue.held_partitions == []


def test_while_every_partition_is_held_the_signal_sends_the_clusters_probe_at_once() -> None:
    g = gate()
    g.hold("a0", "b1")
    g.clock.advance(0.15)
    g.kafka.fail(g.kafka.only_unsettled())  # the cluster's probe fails: the next is further away
    assert g.kafka.unsettled == []
    assert g.queue.writable_again(1)
    g.clock.advance(0.0)
    assert len(g.kafka.unsettled) == 1
    g.kafka.write(g.kafka.only_unsettled())
    g.clock.advance(0.1)
    g.kafka.write_all()
    g.clock.advance(0.1)
    assert g.queue.held_partitions == []


def retries_dropped(retry: bool) -> str | None:
    """An owner's rule that drops every retry and no first attempt (Connect's once its writer's generation moved)."""
    return "the writer's generation moved" if retry else None


def test_a_value_that_may_still_land_goes_again_as_its_own_attempt_never_the_newer_ones() -> None:
    """The key's older value, re-sent because its write timed out, is no attempt of the newer update: however often
    it fails, the newer update keeps its retries, and its first send after it is its first attempt, which an owner
    that drops retries (Connect's rule once its writer's generation moved) does not drop."""
    g = gate(max_retries=3)
    g.put("a1")
    g.kafka.write_all()
    older = g.put("a0", "v1")
    g.kafka.fail(g.kafka.only_unsettled(), "_MSG_TIMED_OUT")
    newer = g.queue.submit(StatusUpdate("a0", b"v2", UpdateKind.CONNECTOR, retries_dropped))
    assert older.outcome is not None
    assert older.outcome.result is Result.SUPERSEDED
    # Two copies of v1 fail, the third is acknowledged: none of them is an attempt of the newer update.
    assert g.probe_until_through(2, "_MSG_TIMED_OUT") == [b"v1"] * 3
    assert newer.outcome is None
    g.clock.advance(0.1)
    own = g.kafka.only_unsettled()
    assert own.value == b"v2"
    g.kafka.write(own)
    assert newer.outcome is not None
    assert (newer.outcome.result, newer.outcome.attempts) == (Result.WRITTEN, 1)
    assert g.queue.unsettled == 0


def test_an_older_values_copies_are_bounded_by_its_own_retries_then_the_newer_value_goes() -> None:
    g = gate(max_retries=1)
    g.put("a1")
    g.kafka.write_all()
    g.put("a0", "v1")
    g.kafka.fail(g.kafka.only_unsettled(), "_MSG_TIMED_OUT")
    newer = g.put("a0", "v2")
    # One copy of v1 (its one retry) fails: then it is given up, and v2 probes on its own.
    assert g.probe_until_through(1) == [b"v1", b"v2"]
    assert newer.outcome is not None
    assert (newer.outcome.result, newer.outcome.attempts) == (Result.WRITTEN, 1)


@pytest.mark.parametrize("mode", [RetryMode.PARTITION, RetryMode.PER_UPDATE], ids=["partition", "per-update"])
def test_a_re_sent_older_value_that_fails_for_good_lets_the_newer_one_go(mode: RetryMode) -> None:
    """A copy of the older value refused with a fatal error cannot be sent again: the newer value goes next, as its
    first attempt; it is neither failed nor superseded for its older value's sake."""
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 3, mode=mode), [], route=lambda key: int(key[-1]),
                       clock=clock)
    queue.submit(StatusUpdate("a0", b"v1", UpdateKind.CONNECTOR))
    newer = queue.submit(StatusUpdate("a0", b"v2", UpdateKind.CONNECTOR, retries_dropped))
    kafka.fail(kafka.only_unsettled(), "_MSG_TIMED_OUT")
    clock.advance(1.0)
    replay = kafka.only_unsettled()
    assert replay.value == b"v1"
    kafka.fail(replay, "TOPIC_AUTHORIZATION_FAILED")
    assert newer.outcome is None
    clock.advance(1.0)
    own = kafka.only_unsettled()
    assert own.value == b"v2"
    kafka.write(own)
    assert newer.outcome is not None
    assert (newer.outcome.result, newer.outcome.attempts) == (Result.WRITTEN, 1)


def test_the_stops_last_attempt_sends_the_older_value_then_the_newer_as_its_first() -> None:
    """The stop's one last attempt of a key waiting on its backoff: the older value that may still land goes first,
    and once it is acknowledged the newer value goes as its first attempt, not dropped as a retry."""
    clock = FakeClock()
    kafka = ScriptedKafka(clock)
    queue = RetryQueue(kafka.send, RetryPolicy(BACKOFF, 3, mode=RetryMode.PER_UPDATE), [], clock=clock)
    queue.submit(StatusUpdate("a0", b"v1", UpdateKind.CONNECTOR))
    newer = queue.submit(StatusUpdate("a0", b"v2", UpdateKind.CONNECTOR, retries_dropped))
    kafka.fail(kafka.only_unsettled(), "_MSG_TIMED_OUT")

    async def stop() -> list[StatusUpdate]:
        stopping = asyncio.ensure_future(queue.stop(5.0))
        await asyncio.sleep(0)
        replay = kafka.only_unsettled()
        assert replay.value == b"v1"
        kafka.write(replay)
        assert newer.outcome is None
        own = kafka.only_unsettled()
        assert own.value == b"v2"
        kafka.write(own)
        return await stopping

    assert asyncio.run(stop()) == []
    assert newer.outcome is not None
    assert (newer.outcome.result, newer.outcome.attempts) == (Result.WRITTEN, 1)


class Lease:
    """An owner's rule that ends every send of its updates once the test ends it (an agent's lease ended)."""

    def __init__(self) -> None:
        self.ended = False

    def __call__(self, retry: bool) -> str | None:
        return "the agent's lease ended" if self.ended else None


def test_a_partition_whose_line_empties_under_the_clusters_probe_leaves_no_other_partition_unprobed() -> None:
    """While every partition is stalled one probe goes for all of them. When the one it picks opens without a write
    (its line's only update is abandoned: its lease ended), the probe goes to the next; the partitions after it are no
    longer all stalled, so the cluster's probe no longer stands for them: each is probed on its own schedule, and
    once Kafka takes writes every partition is released, without a write of its own."""
    g = gate()
    lease = Lease()
    g.queue.submit(StatusUpdate("a0", b"v", UpdateKind.CONNECTOR, lease))
    g.put("a1")
    g.put("a2")
    for sent in list(g.kafka.unsettled):
        g.kafka.fail(sent)
    assert g.queue.held_partitions == [0, 1, 2]
    lease.ended = True
    g.clock.advance(0.15)
    # The cluster's probe picked partition 0 first: nothing is left to write there, so it opened, and the probe went
    # to partition 1.
    probe = g.kafka.only_unsettled()
    assert (probe.key, g.queue.held_partitions) == ("a1", [1, 2])
    g.kafka.write(probe)  # Kafka takes writes again
    for _ in range(10):
        g.clock.advance(1.0)
        g.kafka.write_all()
    assert g.queue.held_partitions == []
    assert g.queue.unsettled == 0


def test_a_write_to_a_new_partition_leaves_no_stalled_partition_unprobed() -> None:
    """Every partition the queue knows is stalled and the cluster's probe is out; a key of a partition it never wrote
    to is written at once (Kafka is back): the partitions are no longer all stalled, and each is probed on its own."""
    g = gate()
    g.hold("a0", "a1")
    g.clock.advance(1.0)
    probe = g.kafka.only_unsettled()
    g.put("b2")
    g.kafka.write(next(s for s in g.kafka.unsettled if s.key == "b2"))
    g.kafka.write(probe)
    for _ in range(10):
        g.clock.advance(1.0)
        g.kafka.write_all()
    assert g.queue.held_partitions == []
    assert g.queue.unsettled == 0
