"""The retry queue's state of keys and partitions, each class with the small steps that change it: a key's
slot, a held partition with its line of waiting keys, its writes in flight and its probe, the cluster-wide probe,
and the release's rate. Pure: no clock, no scheduling, no sending (``partition_gate`` moves the partitions and
the release; ``key_writes`` and ``key_sends`` the slots, ``key_slots`` their parked updates)."""

from __future__ import annotations

import collections

from .updates import ReleasePace, StatusUpdate

# Released partitions send their waiting updates at a rate the whole queue shares (the cluster's capacity is
# what they share), in batches at most a pace (``ReleasePace.pace_s``) apart, like TCP's congestion control:
# ``ReleasePace.first`` updates per pace at first, twice the rate after each batch that all succeeded (slow start)
# until one fails; from then on RELEASE_GROWTH times the rate after a success and half after a failure. A failure
# halves the rate and a success grows it by less, so senders sharing a cluster settle where about one batch in
# six fails (0.17 * log 2 = 0.83 * log 1.15), not one in two. Below one update per the probes' longest
# interval the partitions are stalled behind probes again. A batch goes when the one before has settled.
RELEASE_GROWTH = 1.15


class Slot:
    """The updates of one key: at most one in flight, one waiting (and when it goes next) and one parked, the key's
    value that may still land (and its copies sent since), and the key's failure streak (per-update mode: the backoff
    follows the key, so a key that keeps changing is not retried any faster)."""

    __slots__ = ("_resends", "_streak", "_unsure", "due", "inflight", "key", "parked", "partition", "waiting")

    def __init__(self, key: str, partition: Partition | None) -> None:
        # The key it is coalesced under (the record's key, or a key of its own where updates are not coalesced).
        self.key = key
        self.inflight: StatusUpdate | None = None
        self.waiting: StatusUpdate | None = None
        # When the waiting update goes next (loop time); None while it waits behind the key's write in flight, or in
        # its partition's line. A newer value that replaces the waiting one takes over its place in time.
        self.due: float | None = None
        self.parked: StatusUpdate | None = None
        self.partition = partition
        self._streak = 0
        # The key's last update whose write may still reach the broker (``errors.may_have_landed``): its value goes
        # again, before any other value of the key, until one copy is acknowledged; else a copy the network held
        # could land after a newer value. Each copy is that value's attempt, counted here, never a newer update's.
        self._unsure: StatusUpdate | None = None
        self._resends = 0

    def went(self, update: StatusUpdate) -> None:
        """An attempt made for this update is in flight (its own value, or a copy of the key's unsure one)."""
        self.inflight = update

    def came_back(self, update: StatusUpdate) -> None:
        """The attempt made for this update settled, or was never sent (the producer refused it)."""
        if self.inflight is update:
            self.inflight = None

    def wait(self, update: StatusUpdate | None) -> None:
        """This update waits (None: none does); the time it goes, if one is set, stays: a newer value takes over the
        waiting one's place in time."""
        self.waiting = update

    def wait_until(self, update: StatusUpdate, due: float) -> None:
        """This update waits, and goes at ``due``."""
        self.due = due
        self.waiting = update

    def take(self) -> None:
        """The waiting update goes now: nothing waits, and no time is set."""
        self.waiting = None
        self.due = None

    @property
    def queued(self) -> bool:
        """In its partition's line of keys waiting for the release."""
        partition = self.partition
        return partition is not None and partition.line.get(self.key) is self

    @property
    def streak(self) -> int:
        """The key's attempts that failed in a row (a retry the budget refused counts as one)."""
        return self._streak

    def failed(self) -> None:
        """An attempt of the key failed, or its retry was refused: its next backoff is one step longer."""
        self._streak += 1

    def written(self) -> None:
        """An attempt of the key was written: its backoff starts over."""
        self._streak = 0

    @property
    def unsure(self) -> StatusUpdate | None:
        """The key's update whose write may still land, if any (its value goes again before any other)."""
        return self._unsure

    @property
    def resends(self) -> int:
        """Copies of the unsure value sent since its write failed."""
        return self._resends

    def may_land(self, update: StatusUpdate) -> None:
        """The update's own write failed and may still land: its value goes again before any other of the key."""
        self._unsure, self._resends = update, 0

    def resent(self) -> None:
        """A copy of the unsure value went."""
        self._resends += 1

    def sure(self) -> None:
        """No value of the key may still land (one was acknowledged), or the unsure one is given up."""
        self._unsure, self._resends = None, 0

    def park(self, update: StatusUpdate) -> None:
        """Keep a failed update here until its partition takes writes again (``key_slots``)."""
        self.parked = update

    def unpark(self) -> StatusUpdate:
        """The parked update leaves (returned)."""
        parked = self.parked
        assert parked is not None
        self.parked = None
        return parked

    def empty(self) -> bool:
        """Nothing in flight, waiting or parked."""
        return self.inflight is None and self.waiting is None and self.parked is None


def from_send(now: float, due: float, went: float | None) -> float:
    """A probe's next time, ``due`` being its backoff from ``now``, counted instead from when the probe that has just
    failed went (``went``; None: none failed, ``due`` as it is), and never before ``now``."""
    return due if went is None else max(now, due - (now - went))


class Partition:
    """One partition's hold: the keys waiting for it, oldest first, and its probe.

    Held partitions are *stalled* (waiting for a probe to get through) or *releasing* (their line goes out in
    the queue's release batches)."""

    __slots__ = ("_failed_probe_went", "_inflight", "error", "failures", "held_at", "line", "number", "probe",
                 "probe_due", "probed_at", "probes", "releasing", "streak", "written")

    def __init__(self, number: int) -> None:
        self.number = number
        # Loop time the hold began; None while the partition takes writes.
        self.held_at: float | None = None
        self.releasing = False
        self.line: collections.OrderedDict[str, Slot] = collections.OrderedDict()
        self.probe: StatusUpdate | None = None
        self.probe_due: float | None = None
        self.probed_at = 0.0
        # Failed probes since the hold began: the probe schedule's retry count.
        self.streak = 0
        # When the probe that has just failed went (None: no probe failed since the next one was scheduled).
        self._failed_probe_went: float | None = None
        self._inflight = 0
        # For the log line at the release.
        self.error = ""
        self.failures = self.probes = self.written = 0

    @property
    def held(self) -> bool:
        """Held: stalled or releasing."""
        return self.held_at is not None

    @property
    def stalled(self) -> bool:
        """Held, and waiting for a probe to get through."""
        return self.held_at is not None and not self.releasing

    @property
    def inflight(self) -> int:
        """Writes to the partition in flight now."""
        return self._inflight

    def sent(self) -> None:
        """A write to the partition went out."""
        self._inflight += 1

    def returned(self) -> None:
        """A write to the partition came back (settled, or was never sent after all)."""
        self._inflight -= 1

    def failed_write(self) -> None:
        """A write to the held partition failed with a retriable error (counted for the release's log line)."""
        self.failures += 1

    def wrote(self) -> None:
        """A write to the held partition got through (counted for the release's log line)."""
        self.written += 1

    def schedule_probe(self, due: float | None) -> None:
        """The partition's next probe goes at ``due`` (None: none is scheduled)."""
        self.probe_due = due

    def probing(self, now: float) -> None:
        """A probe of the partition is being sent at ``now``."""
        self.probed_at = now

    def probe_went(self, update: StatusUpdate) -> None:
        """This update went as the partition's probe."""
        self.probe = update
        self.probes += 1

    def probe_back(self) -> None:
        """The partition's probe settled."""
        self.probe = None

    def probe_not_sent(self) -> None:
        """The producer refused the partition's probe: no probe went."""
        self.probe = None
        self.probes -= 1

    def hold(self, now: float, error: str) -> None:
        """A hold begins at ``now``, for ``error``: stalled, its probe schedule and its counts from the start."""
        self.held_at = now
        self.streak = 0
        self._failed_probe_went = None
        self.error = error
        self.failures = self.probes = self.written = 0

    def probe_failed(self) -> None:
        """The partition's own probe failed: the next backs off one step further, counted from when this one went."""
        self.streak += 1
        self._failed_probe_went = self.probed_at

    def next_probe(self, now: float, due: float) -> float:
        """When the next probe goes, ``due`` being its backoff's delay from ``now``: that delay counts from when the
        probe that has just failed went, not from its failure (one probe per interval, from send to send: a probe that
        waited in the producer's queue until its delivery bound, the brokers away, has waited that long already, and the
        next one waits there in its place at once, so that a write is queued whenever the brokers come back), never
        before ``now``."""
        went, self._failed_probe_went = self._failed_probe_went, None
        return from_send(now, due, went)

    def release(self) -> None:
        """A write got through: its line goes out in the queue's release batches."""
        self.releasing = True
        self.probe_due = None
        self._failed_probe_went = None

    def stall(self) -> None:
        """Even one write per the probes' longest interval fails: back behind probes, one step further apart."""
        self.releasing = False
        self.streak += 1

    def open(self) -> float | None:
        """The hold ends (the partition takes writes directly again); returns when it began."""
        held_at = self.held_at
        self.held_at = None
        self.releasing = False
        self.streak = 0
        self.probe_due = None
        self._failed_probe_went = None
        return held_at

    def line_up(self, slot: Slot, first: bool = False) -> bool:
        """Line a key up (``first``: at the front, as the probe it was); False when it is in line already."""
        if self.line.get(slot.key) is slot:
            return False
        self.line[slot.key] = slot
        if first:
            self.line.move_to_end(slot.key, last=False)
        return True

    def leave_line(self, key: str | None = None) -> Slot:
        """Take a key out of the line: this one, or (None) the first."""
        return self.line.pop(next(iter(self.line)) if key is None else key)


class ClusterProbe:
    """While every partition the queue writes to is stalled, the trouble is the cluster's, not a partition's:
    one probe at a time goes for all of them, each stalled partition in turn, on one schedule."""

    __slots__ = ("_failed_went", "_went", "due", "probe", "streak")

    def __init__(self) -> None:
        self.due: float | None = None
        self.probe: StatusUpdate | None = None
        self.streak = 0
        # When the probe out went, and when the one that has just failed went (None: none failed since).
        self._went = 0.0
        self._failed_went: float | None = None

    def schedule(self, due: float | None) -> None:
        """The cluster's next probe goes at ``due`` (None: none is scheduled)."""
        self.due = due

    def not_sent(self) -> None:
        """The producer refused the cluster's probe: no probe is out."""
        self.probe = None

    def got_through(self) -> None:
        """A write got through while every partition was stalled: the probes' schedule starts over."""
        self.streak = 0

    def went(self, probe: StatusUpdate, now: float) -> None:
        """The cluster's probe went at ``now``."""
        self.probe, self._went = probe, now

    def settled(self, failed: bool) -> None:
        """The cluster's probe settled: the next one backs off one step further after a failure, else starts over."""
        self.probe = None
        self.streak = self.streak + 1 if failed else 0
        self._failed_went = self._went if failed else None

    def next_probe(self, now: float, delay: float) -> float:
        """When the next probe goes, ``delay`` being its backoff: counted from when the one that has just failed went,
        as a partition's (``Partition.next_probe``), never before ``now``."""
        went, self._failed_went = self._failed_went, None
        return from_send(now, now + delay, went)


class Release:
    """The queue's release batches: the rate (updates per second), the updates of the batch in flight."""

    __slots__ = ("_first_rate", "_pace_s", "due", "failed", "inflight", "rate", "slow_start", "started")

    def __init__(self, pace: ReleasePace) -> None:
        self._pace_s = pace.pace_s
        self._first_rate = pace.first / pace.pace_s
        self.rate = self._first_rate
        self.slow_start = True
        self.due: float | None = None
        self.inflight: set[int] = set()
        self.failed = False
        self.started = 0.0

    @property
    def idle(self) -> bool:
        """No batch in flight or due."""
        return self.due is None and not self.inflight

    def begin(self, now: float) -> None:
        """A batch starts going out at ``now``."""
        self.due = None
        self.failed = False
        self.started = now

    def sent(self, number: int) -> None:
        """This update went in the batch."""
        self.inflight.add(number)

    def floor(self, rate: float) -> None:
        """The rate fell below ``rate``, the least the release goes on at (the partitions stall behind probes): it goes
        on from there when a probe gets through."""
        self.rate = rate

    def next_batch(self, now: float) -> float:
        """The batch in flight settled at ``now``: the next goes one interval after its start, at the earliest now
        (returned)."""
        self.due = max(now, self.started + self.interval)
        return self.due

    def settle(self, number: int, failed: bool) -> bool:
        """An update of the batch settled (``failed``: with a retriable error); True when the whole batch has."""
        self.inflight.discard(number)
        if failed:
            self.failed = True
        return not self.inflight

    @property
    def size(self) -> int:
        """Updates in the next batch: what the rate allows in one pace interval, at least one."""
        return max(1, round(self.rate * self._pace_s))

    @property
    def interval(self) -> float:
        """Time from one batch's start to the next's at the current rate."""
        return max(self._pace_s, 1 / self.rate)

    def adjust(self) -> None:
        """The batch in flight has settled: halve the rate after a failure, double it in slow start, else grow
        it by RELEASE_GROWTH per pace interval of time (at a low rate batches are far apart)."""
        if self.failed:
            self.slow_start = False
            self.rate /= 2
        elif self.slow_start:
            self.rate *= 2
        else:
            self.rate *= min(2.0, RELEASE_GROWTH ** (self.interval / self._pace_s))

    def restart(self) -> None:
        """Everything released: the next outage's release starts afresh."""
        self.rate, self.slow_start = self._first_rate, True
