"""The retry engine without I/O: one state machine for every attempt of every write, driven by events that each
carry their time, leaving commands for the layer that does the I/O (``queue.RetryQueue``), the way h11 sits under an
HTTP client.

- **Events**: ``submit``, ``supersede``, ``settled`` (an attempt's delivery report), ``not_sent`` (the producer
  refused its record), ``due`` (the time it asked to be woken at came), ``park``, ``writable_again``, ``stop`` and
  ``close``, each given ``now``.
- **Commands**, taken after each event, in order: the outcomes and the listeners' events (``take_effects``:
  ``commands.Settle``, ``commands.Notify``), the records to send (``take_sends``: ``commands.Send``), and when to hand
  it ``due`` next (``wake``: ``commands.WakeAt``).
- **Views** read between events, for ``/retries`` and the metrics.

Its parts are private to it (nothing outside ``retry/`` imports them): the keys' slots (``key_slots``), their writes
taken and settled (``key_writes``) and sent (``key_sends``), the retry timing (``timing``), the partitions' holds,
probes and release (``partition_gate``, its state in ``holds``), the outcomes (``ledger``) and the timer heap
(``scheduler``). No part calls back into the queue: the gate hands the keys that leave a line back to the sending
half (``partition_gate.Exits``), which sends them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..errors import StoreClosedError, WriteFailedError
from .backoff import Backoff
from .commands import Attempt, Effect, Send, WakeAt
from .delivery import Delivery
from .key_sends import KeySends
from .key_slots import KeySlots
from .key_writes import KeyWrites
from .ledger import Ledger
from .partition_gate import GateTimer, PartitionGate
from .scheduler import Scheduler
from .timing import RetryTiming
from .updates import Result, RetryPolicy, Route, StatusUpdate


class Engine:
    """Every write's attempts, retries, holds, probes, release and outcome, decided without a clock or I/O."""

    def __init__(self, policy: RetryPolicy, route: Route | None = None, name: str = "status",
                 coalesce: bool = True) -> None:
        """``route``: the partition of a key (none: every key on its own, no partitions held or parked in).
        ``coalesce``: a newer write of a key replaces its waiting one."""
        self.policy = policy
        scheduler: Scheduler[StatusUpdate | GateTimer] = Scheduler()
        self._scheduler = scheduler
        self._ledger = Ledger(name, scheduler)
        self._gate = PartitionGate(name, scheduler, policy.mode, policy.probe_backoff or policy.backoff,
                                   policy.release)
        self._slots = KeySlots(coalesce, route, self._gate)
        self._timing = RetryTiming(policy, scheduler)
        self._sends = KeySends(policy, self._slots, scheduler, self._gate, self._ledger, self._timing)
        self._keys = KeyWrites(policy, self._slots, scheduler, self._gate, self._ledger, self._timing, self._sends)

    # ----------------------------------------------------------------------------- events

    def submit(self, update: StatusUpdate, now: float) -> None:
        """Take an update: sent now, or waiting behind the key's write in flight or for its partition's release."""
        self._scheduler.at(now)
        self._keys.submit(update)

    def supersede(self, update: StatusUpdate, reason: str, now: float) -> None:
        """Take an update that is not to be sent after all: settled as superseded at once."""
        self._scheduler.at(now)
        self._keys.supersede(update, reason)

    def settled(self, attempt: Attempt, delivery: Delivery | None, error: WriteFailedError | None,
                now: float) -> None:
        """An attempt's delivery report: written, or failed (then retried, held, or failed for good)."""
        self._scheduler.at(now)
        self._keys.settled(attempt, delivery, error)

    def not_sent(self, attempt: Attempt, error: StoreClosedError, now: float) -> None:
        """The producer refused an attempt's record (it is closed): its update fails, and the key moves on."""
        self._scheduler.at(now)
        self._keys.not_sent(attempt, error)

    def due(self, now: float) -> WakeAt | None:
        """The time the engine asked to be woken at came: every timer due by ``now`` fires in time order (one set for
        ``now`` on the way too), then every summary window closed by then; returns when to wake it next."""
        scheduler = self._scheduler
        scheduler.at(now)
        while (timer := scheduler.pop(now)) is not None:
            due, item = timer
            if isinstance(item, StatusUpdate):
                self._sends.fire(due, item)
            else:
                self._sends.drive(self._gate.fire(due, item))
        while (closed := scheduler.pop_window(now)) is not None:
            self._gate.window_closed(*closed)
            self._ledger.window_closed(*closed)
        return self.wake()

    def writable_again(self, partition: int, now: float) -> bool:
        """The cluster says this partition can take writes again: a held one is probed now. False when it was not
        waiting for a probe."""
        self._scheduler.at(now)
        return self._gate.writable_again(partition)

    def park_after_last_retry(self) -> None:
        """From now on, park an update that fails for good with a retriable error (not because the engine stopped) as
        it settles, when it can be (``park``); its outcome says so (``Outcome.parked``)."""
        self._sends.park_after_last_retry()

    def park(self, update: StatusUpdate, now: float) -> bool:
        """Keep a failed update's value in its partition, held like an outage, until the partition takes writes
        again. False when the key has a newer value already, or keys have no partitions here."""
        self._scheduler.at(now)
        if not self._sends.parkable(update):
            return False
        self._sends.park(update)
        return True

    def stop(self, now: float) -> None:
        """Stopping: no timer fires until a new one is set, no summary lines of held partitions; each update waiting on
        a timer goes now, once, outside the budget, and each stalled partition sends one probe (if it gets through,
        the release sends the rest)."""
        scheduler = self._scheduler
        scheduler.at(now)
        scheduler.pause()
        self._gate.stop_summary()
        for slot in self._slots.on_timers():
            # One last attempt each, bounded by the number of keys: the budget would only turn these into failures.
            assert slot.waiting is not None
            self._sends.send_now(slot, slot.waiting, budgeted=False)
        self._sends.drive(self._gate.probe_stalled())

    def close(self, now: float, reason: str) -> list[StatusUpdate]:
        """Stopped: no timer fires any more, every update without an outcome fails for ``reason`` (returned), only the
        parked updates are kept, and the failures summed up so far are logged now (the summary lines' windows still
        close: a failure after this one is logged at once)."""
        self._scheduler.at(now)
        self._scheduler.close()
        lost = self._ledger.unsettled_updates()
        for update in lost:
            self._ledger.finish(update, Result.FAILED, reason, stopped=True)
        self._slots.keep_parked()
        self._ledger.close()
        return lost

    # ----------------------------------------------------------------------------- commands

    def take_effects(self) -> list[Effect]:
        """The outcomes and the listeners' events decided since the last call, in order."""
        return self._ledger.take_effects()

    def take_sends(self) -> list[Send]:
        """The records to hand to Kafka, in order, since the last call; each one's delivery report goes back as
        ``settled``, a refusal as ``not_sent``."""
        return self._sends.take_sends()

    def wake(self) -> WakeAt | None:
        """When the engine next wants ``due``: its earliest timer (held back from a stop until the next one is set) or
        summary line; None when nothing waits."""
        at = self._scheduler.wake()
        return None if at is None else WakeAt(at)

    # ----------------------------------------------------------------------------- views

    @property
    def attempts_total(self) -> int:
        """Attempts sent so far (retries and probes included)."""
        return self._sends.attempts_total

    @property
    def throttled_total(self) -> int:
        """Retries the budget refused (each delayed by a backoff step, none dropped)."""
        return self._timing.throttled_total

    @property
    def probes_total(self) -> int:
        """Probes sent to held partitions."""
        return self._gate.probes_total

    @property
    def probe_backoff(self) -> Backoff:
        """The held partitions' probe schedule."""
        return self._gate.probe_backoff

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet."""
        return self._ledger.unsettled

    def mark(self) -> int:
        """The number the next update gets: every update before it is settled once ``oldest_unsettled`` reaches it."""
        return self._ledger.mark()

    def oldest_unsettled(self) -> int | None:
        """The number of the oldest update without an outcome (None when none)."""
        return self._ledger.oldest_unsettled()

    def oldest_unsettled_age(self, now: float) -> float:
        """Seconds since the oldest update without an outcome was submitted (0 when none)."""
        return self._ledger.oldest_unsettled_age(now)

    @property
    def pending_keys(self) -> int:
        """Keys with an update in flight, waiting or parked."""
        return self._slots.pending_keys

    def growth(self, keys: Sequence[str]) -> int:
        """How many keys with pending updates writes of these keys would add."""
        return self._slots.growth(keys)

    @property
    def held_partitions(self) -> list[int]:
        """The partitions held now."""
        return self._gate.held_partitions

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, by partition, oldest first."""
        return self._gate.parked()

    def is_parked(self, update: StatusUpdate) -> bool:
        """Whether this update is parked now."""
        return self._slots.is_parked(update)

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return self._slots.parked_count

    def waiting(self) -> Iterator[StatusUpdate]:
        """Updates waiting for their next attempt (on a timer, or in a held partition's line)."""
        return self._slots.waiting()

    def next_attempt(self, update: StatusUpdate, now: float) -> float:
        """When a waiting update may go next: its timer, or its partition's next probe (else ``now``)."""
        return self._slots.next_attempt(update, now)

    def waits_in_line(self, update: StatusUpdate) -> bool:
        """Whether a waiting update waits in its held partition's line (not on a timer of its own)."""
        return self._slots.waits_in_line(update)
