"""Each key's next attempt: the retry engine's sending half. It decides a key's next record (a ``commands.Send`` in
the outbox), its retry timer, its place in its held partition's line, its parking, and an update's outcome; the keys
that leave a partition's line (``partition_gate``'s ``Exits``) are sent here. ``key_writes`` takes the writes and
settles the attempts, and calls it.

- **Abandonment** (Connect's rules): before each send the owner of the update may abandon it (key deleted,
  generation changed, a safe write no longer safe).
- **A write that may still land goes again first** (``Slot.unsure``): the key's next attempt sends its older value
  while one may still land; such a copy is the older value's attempt, never the newer update's.
- **The retry budget** (per-update retries): a retry it refuses waits (``RetryTiming.refused``); the keys that leave
  a line (probes, release batches) and a stop's last attempts go outside it.
- **Parking** after the last retry, when the owner asks it (``park_after_last_retry``): an update that fails for good
  with a retriable error is parked as it settles, inside the step.
"""

from __future__ import annotations

import logging

from ..errors import ErrorKind, classify
from .commands import Attempt, Send
from .delivery import Delivery
from .holds import Slot
from .key_slots import KeySlots
from .ledger import Ledger
from .partition_gate import Exits, GateTimer, PartitionGate
from .scheduler import Scheduler
from .timing import RetryTiming
from .updates import Result, RetryPolicy, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")


class KeySends:
    """Sends the keys' next attempts, keeps their timers and lines, and settles their updates."""

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
        keys' and partitions' eyes)."""
        sends, self._outbox = self._outbox, []
        return sends

    def deadline(self, update: StatusUpdate) -> float | None:
        """When the update's time bound (``status.storage.retry.timeout.ms``) passes; None without one."""
        timeout = self.policy.timeout
        return None if timeout is None else update.submitted_at + timeout

    def finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None) -> None:
        """Settle the update (its handle and the listeners hear of it after the step); nothing of it is kept, unless
        it failed for good and is parked (``park_after_last_retry``), at once, before the step goes on."""
        self._timing.forget(update)
        park = result is Result.FAILED and self._parks(update)
        self._ledger.finish(update, result, reason, delivery, parked=park)
        if park:
            self.park(update)

    def finish_timed_out(self, update: StatusUpdate) -> None:
        self.finish(update, Result.FAILED, f"the {self.policy.timeout:g} s bound of status.storage.retry.timeout.ms "
                                           "passed")

    def attempt(self, slot: Slot, update: StatusUpdate) -> None:
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

    def schedule(self, slot: Slot, update: StatusUpdate, due: float) -> None:
        """The key's waiting update goes at ``due`` (at its bound at the latest)."""
        deadline = self.deadline(update)
        if deadline is not None:
            # An update not yet tried gets its one attempt at its bound at the latest.
            due = min(due, deadline)
        slot.wait_until(update, due)
        self._scheduler.push(due, update.number, update)

    def advance(self, slot: Slot) -> None:
        """Send (or line up) an update held behind the key's write once it has settled; forget idle keys."""
        if self._scheduler.closed:
            return
        waiting = slot.waiting
        if slot.inflight is None and waiting is not None and slot.due is None and not slot.queued:
            if self._gate.holds_new(slot.partition):
                self.enqueue(slot)
            else:
                self.send_now(slot, waiting)
        if slot.empty() and not slot.queued:
            self._slots.forget(slot)

    # ----------------------------------------------------------------------------- sending what waits

    def fire(self, due: float, update: StatusUpdate) -> None:
        """An update's time came: its next attempt, or (waiting in a held partition's line) its bound."""
        slot = self._slots.find(update)
        # Entries of superseded, rescheduled or sent updates are left in the heap and skipped here.
        if slot is None or slot.waiting is not update:
            return
        if slot.due == due:
            self.send_now(slot, update)
        elif slot.queued and (deadline := self.deadline(update)) is not None and due >= deadline:
            partition = slot.partition
            assert partition is not None
            partition.leave_line(slot.key)
            slot.wait(None)
            self.finish_timed_out(update)
            self.advance(slot)

    def drive(self, exits: Exits) -> None:
        """Send each key a step of the gate takes out of a line, handing the gate back what went, to the step's end."""
        slot = next(exits, None)
        while slot is not None:
            try:
                slot = exits.send(self._send_from_line(slot))
            except StopIteration:
                return

    def _send_from_line(self, slot: Slot) -> StatusUpdate | None:
        """Send the update of a key taken out of its partition's line: its waiting one, or its parked one submitted
        again, outside the retry budget. The update when it is in flight now, else None."""
        update = slot.waiting
        if update is None:
            if slot.parked is None:
                self.advance(slot)
                return None
            update = self._unpark(slot, self._scheduler.now(), "")
            if update is None:
                return None
        return update if self.send_now(slot, update, budgeted=False) else None

    def send_now(self, slot: Slot, update: StatusUpdate, budgeted: bool = True) -> bool:
        """Send a waiting update now, unless its owner abandons it (Connect's rules: on a retry, the key
        deleted or the generation moved on; always, a safe write no longer safe), its bound has passed,
        or (``budgeted``) the retry budget holds the retry back. True when it was sent (its record in the outbox)."""
        slot.take()
        # Connect's rules judge the update's own attempts: a copy of the key's older value sent before it is none.
        retry = update.attempts > 0
        reason = update.abandoned(retry)
        if reason is not None:
            self.finish(update, Result.SUPERSEDED, reason)
            self.advance(slot)
            return False
        deadline = self.deadline(update)
        if deadline is not None and self._scheduler.now() > deadline:
            self.finish_timed_out(update)
            self.advance(slot)
            return False
        older = _older(slot, update)
        if (retry or older is not None) and budgeted and not self._admitted(slot, update):
            return False
        if older is not None or retry:
            # The listeners count a retry of the value that goes: the older one's copy, or the update's own.
            self._ledger.notify("on_retry", older or update)
        self.attempt(slot, update)
        return slot.inflight is update

    def _admitted(self, slot: Slot, update: StatusUpdate) -> bool:
        """Whether the retry budget lets the retry go now; a refused retry waits (``RetryTiming.refused``), and its
        time bound still ends it, as a failure."""
        due = self._timing.refused(slot, update)
        if due is None:
            return True
        deadline = self.deadline(update)
        if deadline is not None and due > deadline:
            self.finish(update, Result.FAILED,
                        f"held back by the retry budget until the next attempt would pass the "
                        f"{self.policy.timeout:g} s bound of status.storage.retry.timeout.ms")
            self.advance(slot)
        else:
            self.schedule(slot, update, due)
        return False

    def enqueue(self, slot: Slot, first: bool = False) -> None:
        """Line the key up in its held partition (``first``: at the front, as the probe it was)."""
        partition = slot.partition
        assert partition is not None
        if partition.line_up(slot, first):
            waiting = slot.waiting
            deadline = self.deadline(waiting) if waiting is not None else None
            if waiting is not None and deadline is not None:
                self._scheduler.push(deadline, waiting.number, waiting)
        self.drive(self._gate.lined_up(partition))

    # ----------------------------------------------------------------------------- parking

    def park_after_last_retry(self) -> None:
        """From now on, an update that fails for good with a retriable error (not because the queue stopped) is parked
        as it settles, when it can be (``park``)."""
        self._park_exhausted = True

    def _parks(self, update: StatusUpdate) -> bool:
        """Whether an update failing for good now is parked: parking after the last retry is on, its last error is
        retriable (a fatal one would fail again), and it can be parked."""
        error = update.last_error
        return (self._park_exhausted and error is not None and classify(error) is not ErrorKind.FATAL
                and self.parkable(update))

    def parkable(self, update: StatusUpdate) -> bool:
        """Whether the update can be parked: keys have partitions here, the queue has not closed, and the key has
        nothing newer (in flight, waiting or parked)."""
        slot = self._slots.find(update)
        return self._slots.routed and not self._scheduler.closed and (slot is None or slot.empty())

    def park(self, update: StatusUpdate) -> None:
        """Park a failed update that can be parked (``parkable``) in its partition, held like an outage."""
        slot = self._slots.slot(update)
        self._slots.park(slot, update)
        self.drive(self._gate.park(slot, update))

    def unpark(self, slot: Slot, reason: str) -> None:
        """The key's parked update is dropped for ``reason`` (a newer write of the key came)."""
        self._unpark(slot, None, reason)

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


def _older(slot: Slot, update: StatusUpdate) -> StatusUpdate | None:
    """The key's older update whose value goes before this update's own (it may still land), if any."""
    unsure = slot.unsure
    return unsure if unsure is not None and unsure.value != update.value else None
