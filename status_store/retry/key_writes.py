"""Each key's writes: the retry queue's per-key engine. It moves what the keys' slots (``key_slots``) hold (the
update in flight, the one waiting and when it goes next, the value that may still land): it takes a write, sends
an attempt, settles it, retries it or lines its key up in its held partition (``partition_gate``), and moves the
key on to its next write. An update's time bound is its submission time plus the policy's bound.

- **Per-key coalescing** (the slots: ``key_slots``). A newer write for the key supersedes the waiting
  one (counted as superseded, not failed), and is held until the write in flight settles, so an older
  value is never written after a newer one.
- **Per-update retries** (``RetryMode.PER_UPDATE``): each key backs off on its own clock, at the time
  ``timing`` gives; a newer value takes over the waiting retry's place in time.
- **Bounded retries** (KIP-1278): at most ``max_retries`` retries, counted in attempts actually sent
  (an update waiting behind a probe has not been retried), and, optionally, a total time bound per
  update, held time included (in the spirit of KIP-572).
- **Error classes** from ``errors.classify``: fatal errors are not retried and say nothing about an
  outage; a leader change is retried once at once (KIP-951), later retries back off.
- **A write that may still land goes again first** (``errors.may_have_landed``: it timed out): the key's next
  attempts re-send its value until a copy is acknowledged, so a copy the network held lands before the newer one.
  Such a re-send is the older value's attempt, never the newer update's: it uses none of the newer update's retries,
  the newer update's first send after it is its first attempt (Connect's rules judge it as one), and the newer
  update is never settled because of its older value. The older value's re-sends are bounded like any value's
  retries (``max_retries``); after that, or a fatal error, the key gives it up and the newer value goes.
- **Abandonment** (Connect's rules): before each send the owner of the update may abandon it
  (key deleted, generation changed, a safe write no longer safe).
"""

from __future__ import annotations

import logging

from ..errors import ErrorKind, StoreClosedError, WriteFailedError, classify, may_have_landed
from .backoff import RetryMode
from .commands import Attempt, Send, WakeAt
from .delivery import Delivery
from .holds import Slot
from .key_slots import KeySlots
from .ledger import Ledger
from .partition_gate import GateTimer, PartitionGate
from .scheduler import Scheduler
from .timing import RetryTiming
from .updates import Result, RetryPolicy, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")


class KeyWrites:
    """Every attempt of the keys' updates, moved through their slots; the gate decides when a held partition's keys
    go."""

    def __init__(self, policy: RetryPolicy, slots: KeySlots, scheduler: Scheduler[StatusUpdate | GateTimer],
                 gate: PartitionGate, ledger: Ledger, timing: RetryTiming) -> None:
        self.policy = policy
        self._slots = slots
        self._scheduler = scheduler
        self._gate = gate
        self._ledger = ledger
        self._timing = timing
        self.attempts_total = 0
        # Whether an update that fails for good (not fatally) is parked in its partition (``park_after_last_retry``).
        self._park_exhausted = False
        # The records decided since the queue last took them (``take_sends``), in the order they are to go.
        self._outbox: list[Send] = []

    def take_sends(self) -> list[Send]:
        """The records to hand to Kafka, in order, since the last call (each attempt is in flight already in the
        keys' and partitions' eyes); the queue sends them and hands back each one's delivery report (``settled``)
        or the producer's refusal (``not_sent``)."""
        sends, self._outbox = self._outbox, []
        return sends

    # ----------------------------------------------------------------------------- taking writes

    def supersede(self, update: StatusUpdate, reason: str, now: float) -> None:
        """Take an update that is not to be sent after all: settled as superseded at once."""
        self._scheduler.at(now)
        self._ledger.admit(update, now)
        self._finish(update, Result.SUPERSEDED, reason)

    def submit(self, update: StatusUpdate, now: float) -> None:
        """Take an update: sent now, or waiting behind the key's write in flight or for its partition's release."""
        self._scheduler.at(now)
        self._ledger.admit(update, now)
        slot = self._slots.slot(update)
        if slot.parked is not None:
            self._unpark(slot, None, "a newer write for the key was submitted")
        replaced = slot.waiting
        if replaced is not None:
            # The newer value takes the waiting one's place: in time, in its partition's line, or behind the
            # key's write in flight.
            self._finish(replaced, Result.SUPERSEDED, "a newer write for the key was submitted")
            slot.wait(update)
            if slot.due is not None:
                self._schedule(slot, update, slot.due)
            elif slot.queued and (deadline := self._deadline(update)) is not None:
                self._scheduler.push(deadline, update.number, update)
            return
        if slot.inflight is not None:
            slot.wait(update)
        elif self._gate.holds_new(slot.partition):
            slot.wait(update)
            self._enqueue(slot)
        else:
            self._attempt(slot, update)

    def _deadline(self, update: StatusUpdate) -> float | None:
        """When the update's time bound (``status.storage.retry.timeout.ms``) passes; None without one."""
        timeout = self.policy.timeout
        return None if timeout is None else update.submitted_at + timeout

    def _finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None) -> None:
        """Settle the update (its handle and the listeners hear of it after the step); nothing of it is kept, unless
        it failed for good and is parked (``park_after_last_retry``), at once, before the step goes on."""
        self._timing.forget(update)
        park = result is Result.FAILED and self._parks(update)
        self._ledger.finish(update, result, reason, delivery, parked=park)
        if park:
            self._park(update)

    def _attempt(self, slot: Slot, update: StatusUpdate) -> None:
        """Send the key's next attempt on the update's behalf (a ``Send`` in the outbox): the key's value that may
        still land (``Slot.unsure``), which is no attempt of the update's, else the update's own."""
        slot.went(update)
        older = _older(slot, update)
        if older is None:
            update.attempted()
        else:
            slot.resent()
        self.attempts_total += 1
        if slot.partition is not None:
            slot.partition.sent()
        retry = older is not None or update.attempts > 1
        budget = self.policy.budget
        if budget is not None:
            budget.sent(retry)
        self._outbox.append(Send(update.key.encode(), update.value if older is None else older.value,
                                 Attempt(slot, update, older is not None)))

    # ----------------------------------------------------------------------------- settling

    def not_sent(self, attempt: Attempt, error: StoreClosedError, now: float) -> None:
        """The producer refused an attempt's record (it is closed): the update fails, the attempt counted; a probe
        that did not go is followed by the next at once, and the key moves on."""
        self._scheduler.at(now)
        slot, update = attempt.slot, attempt.update
        budget = self.policy.budget
        if budget is not None:
            budget.settled(attempt.replay or update.attempts > 1, None)
        slot.came_back(update)
        partition = slot.partition
        if partition is not None:
            partition.returned()
            if partition.probe is update:
                self._gate.probe_not_sent(partition, update)
        self._finish(update, Result.FAILED, f"not sent: {error}")
        self._gate.settled(partition, update.number, False)
        self._advance(slot)

    def settled(self, attempt: Attempt, delivery: Delivery | None, error: WriteFailedError | None,
                now: float) -> None:
        """An attempt settled: written, or failed (then retried, held, or failed for good). ``attempt.replay``: the
        attempt sent the key's unsure value (``Slot.unsure``), not the update's."""
        self._scheduler.at(now)
        slot, update, replay = attempt.slot, attempt.update, attempt.replay
        slot.came_back(update)
        if error is None:
            slot.sure()
        elif not replay and may_have_landed(error):
            slot.may_land(update)
        # A retriable failure: evidence about the partition (a fatal one says nothing either way).
        kind = classify(error) if error is not None else None
        failed = kind is not None and kind is not ErrorKind.FATAL
        partition = slot.partition
        probe = False
        if partition is not None:
            partition.returned()
            probe = partition.probe is update
            if probe:
                self._gate.probe_settled(partition, update, failed)
        budget = self.policy.budget
        if budget is not None:
            budget.settled(replay or update.attempts > 1, True if error is None else (False if failed else None))
        if error is None:
            slot.written()
            if replay:
                self._replayed(slot, update)
            else:
                self._finish(update, Result.WRITTEN, "written", delivery)
            if partition is not None and partition.held:
                self._gate.written(partition)
        elif not self._ledger.settled(update):
            assert kind is not None
            if replay:
                self._replay_failed(slot, update, error, kind, probe)
            else:
                update.failed_with(error)
                self._after_failure(slot, update, error, kind, probe)
        if probe and partition is not None:
            self._gate.arm_probe(partition)
        self._gate.settled(partition, update.number, failed)
        self._advance(slot)

    def _replayed(self, slot: Slot, update: StatusUpdate) -> None:
        """The key's unsure value is acknowledged: the update goes next with its own value (as its own first attempt
        if it had none), unless a newer one waits behind it."""
        if self._ledger.settled(update):
            return
        if slot.waiting is not None:
            self._finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
        else:
            slot.wait(update)  # (no timer: the slot's time was cleared when it went)

    def _replay_failed(self, slot: Slot, update: StatusUpdate, error: WriteFailedError, kind: ErrorKind,
                       probe: bool) -> None:
        """A copy of the key's unsure value failed: the key's failure, not the update's, which keeps its attempts and
        waits for the key's next one (the next copy, or its own value once the older one is given up)."""
        partition = slot.partition
        fatal = kind is ErrorKind.FATAL
        if fatal or slot.resends >= self.policy.max_retries:
            # The broker refused the copy, or the older value is out of retries: it is given up as any value that
            # failed for good (a copy the network still holds could land after the newer one: "Known limits").
            log.debug("Gave up re-sending the value of %s that may still land (%s, after %d copies): its newer value "
                      "goes now", update.key, error.name, slot.resends)
            slot.sure()
        # A retriable failure is evidence about the partition; a fatal one says nothing: a probe is followed at once.
        holding = partition is not None and (self.policy.mode is RetryMode.PARTITION or probe)
        due = self._scheduler.now()
        if fatal:
            holding = holding and partition is not None and partition.held
            if probe and partition is not None:
                self._gate.probe_now(partition)
        elif holding:
            assert partition is not None
            self._gate.hold(partition, error.name)
        else:
            slot.failed()
            due = self._timing.due(slot, update, ErrorKind.RETRIABLE)
        newer = slot.waiting
        if newer is not None:
            self._finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            update = newer
        deadline = self._deadline(update)
        if holding:
            if deadline is not None and self._scheduler.now() >= deadline:
                slot.wait(None)
                self._finish_timed_out(update)
                return
            slot.wait(update)
            self._enqueue(slot, first=probe)
        elif deadline is not None and due > deadline:
            slot.wait(None)
            self._finish(update, Result.FAILED, f"the next attempt would pass the {self.policy.timeout:g} s bound of "
                                                "status.storage.retry.timeout.ms")
        elif fatal:
            slot.wait(update)  # sent (or lined up) by _advance, after the settling
        else:
            self._schedule(slot, update, due)

    def _after_failure(self, slot: Slot, update: StatusUpdate, error: WriteFailedError, kind: ErrorKind,
                       probe: bool) -> None:
        partition = slot.partition
        if kind is ErrorKind.FATAL:
            # Failed for good, even with a newer value held: that one is sent next (_advance). A fatal error
            # says nothing about the partition: a probe that met one is followed by the next at once.
            self._finish(update, Result.FAILED, f"{error.name} is not retriable")
            if probe and partition is not None:
                self._gate.probe_now(partition)
            return
        leader_retry = kind is ErrorKind.LEADER_CHANGE and self._timing.leader_retry_left(update)
        # A failed probe waits in its partition's line in either mode: one probe path for outages and parking.
        holding = partition is not None and not leader_retry and (self.policy.mode is RetryMode.PARTITION or probe)
        if holding:
            assert partition is not None
            self._gate.hold(partition, error.name)
        else:
            slot.failed()
        newer = slot.waiting
        if newer is not None:
            # A newer value was held behind this attempt: it replaces this one (in the partition's line, or
            # after the key's backoff).
            self._finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            if holding:
                self._enqueue(slot, first=probe)
            else:
                self._schedule(slot, newer, self._timing.due(slot, newer, kind))
            return
        reason = update.abandoned(True)
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            return
        if update.attempts > self.policy.max_retries:
            self._finish(update, Result.FAILED, f"no retries left after {update.attempts} attempt(s)")
            return
        deadline = self._deadline(update)
        if holding:
            if deadline is not None and self._scheduler.now() >= deadline:
                self._finish_timed_out(update)
                return
            slot.wait(update)
            self._enqueue(slot, first=probe)
            return
        due = self._timing.due(slot, update, kind)
        if deadline is not None and due > deadline:
            self._finish(update, Result.FAILED,
                                f"the next attempt would pass the {self.policy.timeout:g} s bound of "
                                "status.storage.retry.timeout.ms")
            return
        self._schedule(slot, update, due)

    def _schedule(self, slot: Slot, update: StatusUpdate, due: float) -> None:
        deadline = self._deadline(update)
        if deadline is not None:
            # An update not yet tried gets its one attempt at its bound at the latest.
            due = min(due, deadline)
        slot.wait_until(update, due)
        self._scheduler.push(due, update.number, update)

    def _advance(self, slot: Slot) -> None:
        """Send (or line up) an update held behind the key's write once it has settled; forget idle keys."""
        if self._scheduler.closed:
            return
        waiting = slot.waiting
        if slot.inflight is None and waiting is not None and slot.due is None and not slot.queued:
            if self._gate.holds_new(slot.partition):
                self._enqueue(slot)
            else:
                self._send_now(slot, waiting)
        if slot.empty() and not slot.queued:
            self._slots.forget(slot)

    def _finish_timed_out(self, update: StatusUpdate) -> None:
        self._finish(update, Result.FAILED, f"the {self.policy.timeout:g} s bound of status.storage.retry.timeout.ms "
                                            "passed")

    # ----------------------------------------------------------------------------- sending what waits

    def due(self, now: float) -> WakeAt | None:
        """The time the engine asked to be woken at came: every timer due by ``now`` fires in time order (one set for
        ``now`` on the way too), then every summary window closed by then; returns when to wake it next."""
        scheduler = self._scheduler
        scheduler.at(now)
        while (timer := scheduler.pop(now)) is not None:
            due, item = timer
            if isinstance(item, StatusUpdate):
                self._fire(due, item)
            else:
                self._gate.fire(due, item)
        while (closed := scheduler.pop_window(now)) is not None:
            self._gate.window_closed(*closed)
            self._ledger.window_closed(*closed)
        return self.wake()

    def wake(self) -> WakeAt | None:
        """When the engine next wants ``due``: its earliest timer (held back from a stop until the next one is set) or
        summary line; None when nothing waits."""
        at = self._scheduler.wake()
        return None if at is None else WakeAt(at)

    def writable_again(self, number: int, now: float) -> bool:
        """The cluster says this partition can take writes again: a held one is probed now (``RetryQueue``)."""
        self._scheduler.at(now)
        return self._gate.writable_again(number)

    def _fire(self, due: float, update: StatusUpdate) -> None:
        """An update's time came: its next attempt, or (waiting in a held partition's line) its bound."""
        slot = self._slots.find(update)
        # Entries of superseded, rescheduled or sent updates are left in the heap and skipped here.
        if slot is None or slot.waiting is not update:
            return
        if slot.due == due:
            self._send_now(slot, update)
        elif slot.queued and (deadline := self._deadline(update)) is not None and due >= deadline:
            partition = slot.partition
            assert partition is not None
            partition.leave_line(slot.key)
            slot.wait(None)
            self._finish_timed_out(update)
            self._advance(slot)

    def send_from_line(self, slot: Slot) -> StatusUpdate | None:
        """Send the update of a key the gate took out of its partition's line: its waiting one, or its parked one
        submitted again, outside the retry budget. The update when it is in flight now, else None."""
        update = slot.waiting
        if update is None:
            if slot.parked is None:
                self._advance(slot)
                return None
            update = self._unpark(slot, self._scheduler.now(), "")
            if update is None:
                return None
        return update if self._send_now(slot, update, budgeted=False) else None

    def _send_now(self, slot: Slot, update: StatusUpdate, budgeted: bool = True) -> bool:
        """Send a waiting update now, unless its owner abandons it (Connect's rules: on a retry, the key
        deleted or the generation moved on; always, a safe write no longer safe), its bound has passed,
        or (``budgeted``) the retry budget holds the retry back. True when it was sent (its record in the outbox)."""
        slot.take()
        # Connect's rules judge the update's own attempts: a copy of the key's older value sent before it is none.
        retry = update.attempts > 0
        reason = update.abandoned(retry)
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            self._advance(slot)
            return False
        deadline = self._deadline(update)
        if deadline is not None and self._scheduler.now() > deadline:
            self._finish_timed_out(update)
            self._advance(slot)
            return False
        older = _older(slot, update)
        if (retry or older is not None) and budgeted and not self._admitted(slot, update):
            return False
        if older is not None or retry:
            # The listeners count a retry of the value that goes: the older one's copy, or the update's own.
            self._ledger.notify("on_retry", older or update)
        self._attempt(slot, update)
        return slot.inflight is update

    def _admitted(self, slot: Slot, update: StatusUpdate) -> bool:
        """Whether the retry budget lets the retry go now; a refused retry waits (``RetryTiming.refused``), and its
        time bound still ends it, as a failure."""
        due = self._timing.refused(slot, update)
        if due is None:
            return True
        deadline = self._deadline(update)
        if deadline is not None and due > deadline:
            self._finish(update, Result.FAILED,
                                f"held back by the retry budget until the next attempt would pass the "
                                f"{self.policy.timeout:g} s bound of status.storage.retry.timeout.ms")
            self._advance(slot)
        else:
            self._schedule(slot, update, due)
        return False

    def _enqueue(self, slot: Slot, first: bool = False) -> None:
        """Line the key up in its held partition (``first``: at the front, as the probe it was)."""
        partition = slot.partition
        assert partition is not None
        if partition.line_up(slot, first):
            waiting = slot.waiting
            deadline = self._deadline(waiting) if waiting is not None else None
            if waiting is not None and deadline is not None:
                self._scheduler.push(deadline, waiting.number, waiting)
        self._gate.lined_up(partition)

    # ----------------------------------------------------------------------------- parking

    def park_after_last_retry(self) -> None:
        """From now on, an update that fails for good with a retriable error (not because the queue stopped) is parked
        as it settles, when it can be (``park``)."""
        self._park_exhausted = True

    def park(self, update: StatusUpdate, now: float) -> bool:
        """Park a failed update in its partition (see ``RetryQueue.park``); False when the key has a newer value
        already, or keys have no partitions here."""
        self._scheduler.at(now)
        if not self._parkable(update):
            return False
        self._park(update)
        return True

    def _parks(self, update: StatusUpdate) -> bool:
        """Whether an update failing for good now is parked: parking after the last retry is on, its last error is
        retriable (a fatal one would fail again), and it can be parked."""
        error = update.last_error
        return (self._park_exhausted and error is not None and classify(error) is not ErrorKind.FATAL
                and self._parkable(update))

    def _parkable(self, update: StatusUpdate) -> bool:
        """Whether the update can be parked: keys have partitions here, the queue has not closed, and the key has
        nothing newer (in flight, waiting or parked)."""
        slot = self._slots.find(update)
        return self._slots.routed and not self._scheduler.closed and (slot is None or slot.empty())

    def _park(self, update: StatusUpdate) -> None:
        slot = self._slots.slot(update)
        self._slots.park(slot, update)
        self._gate.park(slot, update)

    def _unpark(self, slot: Slot, now: float | None, reason: str) -> StatusUpdate | None:
        """The parked update leaves: ``now`` given, submitted again (returned) unless its owner abandons it;
        else dropped for ``reason``."""
        parked = self._slots.unpark(slot)
        again = None
        if now is not None:
            abandoned = parked.abandoned(parked.attempts > 0)
            if abandoned is None:
                again = parked.again()
                self._ledger.admit(again, now)
                slot.wait(again)
            else:
                reason = abandoned
                log.debug("Not sending the parked update of %s again: %s", parked.key, reason)
        self._ledger.notify("on_unparked", parked, again, reason)
        return again

    # ----------------------------------------------------------------------------- stopping

    def stop(self, now: float) -> None:
        """The queue stops: no timer fires until a new one is set, no summary lines of held partitions; each update
        waiting on a timer goes now, once, outside the budget, and each stalled partition sends one probe (if it gets
        through, the release sends the rest within the stop's bound)."""
        scheduler = self._scheduler
        scheduler.at(now)
        scheduler.pause()
        self._gate.stop_summary()
        for slot in self._slots.on_timers():
            # One last attempt each, bounded by the number of keys: the budget would only turn
            # these into failures.
            assert slot.waiting is not None
            self._send_now(slot, slot.waiting, budgeted=False)
        self._gate.probe_stalled()

    def close(self) -> None:
        """The queue has stopped: no timer fires any more (the summary lines' windows still close)."""
        self._scheduler.close()


def _older(slot: Slot, update: StatusUpdate) -> StatusUpdate | None:
    """The key's older update whose value goes before this update's own (it may still land), if any."""
    unsure = slot.unsure
    return unsure if unsure is not None and unsure.value != update.value else None

