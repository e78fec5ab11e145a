"""Each key's writes: the retry engine's taking and settling half. It moves what the keys' slots (``key_slots``) hold
(the update in flight, the one waiting and when it goes next, the value that may still land): it takes a write,
settles each attempt, retries it or lines its key up in its held partition (``partition_gate``), and hands the key's
next attempt to ``key_sends``, the sending half. An update's time bound is its submission time plus the policy's bound.

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
"""

from __future__ import annotations

import logging

from ..errors import ErrorKind, StoreClosedError, WriteFailedError, classify, may_have_landed
from .backoff import RetryMode
from .commands import Attempt
from .delivery import Delivery
from .holds import Slot
from .key_sends import KeySends
from .key_slots import KeySlots
from .ledger import Ledger
from .partition_gate import GateTimer, PartitionGate
from .scheduler import Scheduler
from .timing import RetryTiming
from .updates import Result, RetryPolicy, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")


class KeyWrites:
    """Takes the keys' writes and settles their attempts; ``KeySends`` sends what goes next."""

    def __init__(self, policy: RetryPolicy, slots: KeySlots, scheduler: Scheduler[StatusUpdate | GateTimer],
                 gate: PartitionGate, ledger: Ledger, timing: RetryTiming, sends: KeySends) -> None:
        self.policy = policy
        self._slots = slots
        self._scheduler = scheduler
        self._gate = gate
        self._ledger = ledger
        self._timing = timing
        self._sends = sends

    # ----------------------------------------------------------------------------- taking writes

    def supersede(self, update: StatusUpdate, reason: str) -> None:
        """Take an update that is not to be sent after all: settled as superseded at once."""
        self._ledger.admit(update, self._scheduler.now())
        self._sends.finish(update, Result.SUPERSEDED, reason)

    def submit(self, update: StatusUpdate) -> None:
        """Take an update: sent now, or waiting behind the key's write in flight or for its partition's release."""
        self._ledger.admit(update, self._scheduler.now())
        slot = self._slots.slot(update)
        if slot.parked is not None:
            self._sends.unpark(slot, "a newer write for the key was submitted")
        replaced = slot.waiting
        if replaced is not None:
            # The newer value takes the waiting one's place: in time, in its partition's line, or behind the
            # key's write in flight.
            self._sends.finish(replaced, Result.SUPERSEDED, "a newer write for the key was submitted")
            slot.wait(update)
            if slot.due is not None:
                self._sends.schedule(slot, update, slot.due)
            elif slot.queued and (deadline := self._sends.deadline(update)) is not None:
                self._scheduler.push(deadline, update.number, update)
            return
        if slot.inflight is not None:
            slot.wait(update)
        elif self._gate.holds_new(slot.partition):
            slot.wait(update)
            self._sends.enqueue(slot)
        else:
            self._sends.attempt(slot, update)

    # ----------------------------------------------------------------------------- settling

    def not_sent(self, attempt: Attempt, error: StoreClosedError) -> None:
        """The producer refused an attempt's record (it is closed): the update fails, the attempt counted; a probe
        that did not go is followed by the next at once, and the key moves on."""
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
        self._sends.finish(update, Result.FAILED, f"not sent: {error}")
        self._gate.settled(partition, update.number, False)
        self._sends.advance(slot)

    def settled(self, attempt: Attempt, delivery: Delivery | None, error: WriteFailedError | None) -> None:
        """An attempt settled: written, or failed (then retried, held, or failed for good). ``attempt.replay``: the
        attempt sent the key's unsure value (``Slot.unsure``), not the update's."""
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
                self._sends.finish(update, Result.WRITTEN, "written", delivery)
            if partition is not None and partition.held:
                self._sends.drive(self._gate.written(partition))
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
        self._sends.advance(slot)

    def _replayed(self, slot: Slot, update: StatusUpdate) -> None:
        """The key's unsure value is acknowledged: the update goes next with its own value (as its own first attempt
        if it had none), unless a newer one waits behind it."""
        if self._ledger.settled(update):
            return
        if slot.waiting is not None:
            self._sends.finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
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
            self._sends.finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            update = newer
        deadline = self._sends.deadline(update)
        if holding:
            if deadline is not None and self._scheduler.now() >= deadline:
                slot.wait(None)
                self._sends.finish_timed_out(update)
                return
            slot.wait(update)
            self._sends.enqueue(slot, first=probe)
        elif deadline is not None and due > deadline:
            slot.wait(None)
            self._sends.finish(update, Result.FAILED, f"the next attempt would pass the {self.policy.timeout:g} s "
                                                      "bound of status.storage.retry.timeout.ms")
        elif fatal:
            slot.wait(update)  # sent (or lined up) by _advance, after the settling
        else:
            self._sends.schedule(slot, update, due)

    def _after_failure(self, slot: Slot, update: StatusUpdate, error: WriteFailedError, kind: ErrorKind,
                       probe: bool) -> None:
        partition = slot.partition
        if kind is ErrorKind.FATAL:
            # Failed for good, even with a newer value held: that one is sent next (_advance). A fatal error
            # says nothing about the partition: a probe that met one is followed by the next at once.
            self._sends.finish(update, Result.FAILED, f"{error.name} is not retriable")
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
            self._sends.finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            if holding:
                self._sends.enqueue(slot, first=probe)
            else:
                self._sends.schedule(slot, newer, self._timing.due(slot, newer, kind))
            return
        reason = update.abandoned(True)
        if reason is not None:
            self._sends.finish(update, Result.SUPERSEDED, reason)
            return
        if update.attempts > self.policy.max_retries:
            self._sends.finish(update, Result.FAILED, f"no retries left after {update.attempts} attempt(s)")
            return
        deadline = self._sends.deadline(update)
        if holding:
            if deadline is not None and self._scheduler.now() >= deadline:
                self._sends.finish_timed_out(update)
                return
            slot.wait(update)
            self._sends.enqueue(slot, first=probe)
            return
        due = self._timing.due(slot, update, kind)
        if deadline is not None and due > deadline:
            self._sends.finish(update, Result.FAILED,
                               f"the next attempt would pass the {self.policy.timeout:g} s bound of "
                               "status.storage.retry.timeout.ms")
            return
        self._sends.schedule(slot, update, due)
