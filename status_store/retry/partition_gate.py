"""The partition gate: the retry queue's outage state machine. It owns the partitions' holds (``holds.Partition``),
the cluster-wide probe (``holds.ClusterProbe``) and the ramped release (``holds.Release``), and moves them; it knows
nothing of Kafka, and of keys only their place in a partition's line.

- **An outage is one event, not thousands** (``RetryMode.PARTITION``, the default). When a write to a
  partition fails with a retriable error, the partition is *held*: its updates stop retrying one by
  one and wait, in order, while one *probe* at a time (the oldest waiting update, at its key's latest
  value, or first one that may still land: ``key_sends``) goes out on the probe schedule (KIP-1278's
  backoff, capped at ``probe_backoff``'s maximum), counted from one probe's send to the next's: a probe that waited
  out its delivery bound in the producer's queue (the brokers away) is followed by the next at once, so that one is
  queued whenever the brokers come back, and goes as soon as the producer reaches one.
  When a probe or any other write to the partition succeeds, the waiting updates are *released* at
  once, in batches at a rate the whole queue shares, ramped like TCP's slow start: a first small rate,
  doubled after each batch that all succeeded, then grown more slowly, halved after a batch with a failure;
  below one write per the probes' longest interval the partition is held behind probes again
  (``holds.Release``). Partitions whose writes succeed are never touched, so a partial outage
  (one broker down) holds only the partitions that broker leads. What circuit breakers with half-open
  probes do for a host (Envoy, Finagle), this does for a partition, with Kafka's own partitioning.
- **The cluster's probe.** While every partition the queue writes to is stalled behind probes, the trouble is
  the cluster's: one probe at a time goes for all of them, each partition in turn, and one that gets through
  probes every other stalled partition at once.
- **Parking.** After the last retry an owner may *park* an update: its key's value waits in its partition, held
  like an outage, and is submitted again when the partition takes writes: the partition's probes are the parked
  updates' probes too.

What goes out of a line is sent by the gate's owner: a step of the gate that may send returns its ``Exits``, which
hand the owner each key as it leaves a line and take back the update now in flight for it (None when none went: its
owner abandoned it, or its bound passed), so the gate decides the next key on what came of the last, with no callback
into its owner.
"""

from __future__ import annotations

import logging
from collections.abc import Generator

from .backoff import Backoff, RetryMode
from .holds import ClusterProbe, Partition, Release, Slot
from .scheduler import LogWindow, Scheduler
from .updates import ReleasePace, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")

# While a partition is held, a summary line is logged this often.
SUMMARY_INTERVAL_S = 60.0

# The keys a step of the gate takes out of partitions' lines, one at a time: the owner sends each key's update (its
# waiting one, or its parked one submitted again) outside the retry budget, and hands back the update when it is in
# flight now, else None. A step that may send returns one; its owner drives it to its end (``key_sends.drive``).
Exits = Generator[Slot, StatusUpdate | None, None]
# What the gate puts on the scheduler: a partition's probe, the cluster's probe, the next release batch.
GateTimer = Partition | ClusterProbe | Release


class PartitionGate:
    """Which partitions take writes: holds, probes (a partition's and the cluster's), the release's ramp, and
    parked updates' place in the lines."""

    def __init__(self, name: str, scheduler: Scheduler[StatusUpdate | GateTimer], mode: RetryMode,
                 probe_backoff: Backoff, pace: ReleasePace) -> None:
        self.name = name
        self._mode = mode
        self.probe_backoff = probe_backoff
        self._scheduler = scheduler
        self._partitions: dict[int, Partition] = {}
        self._cluster = ClusterProbe()
        self._release = Release(pace)
        self.probes_total = 0
        # The summary line's window on the scheduler, and when it closes (None: no line is due).
        self._summary = LogWindow()
        self._summary_due: float | None = None

    # ----------------------------------------------------------------------------- partitions and views

    def partition(self, number: int) -> Partition:
        """The partition of this number (created on first use)."""
        partition = self._partitions.get(number)
        if partition is None:
            partition = self._partitions[number] = Partition(number)
            self._arm_stalled()  # (the queue's partitions are no longer all stalled)
        return partition

    def find(self, number: int) -> Partition | None:
        """The partition of this number, if a key of it was ever written."""
        return self._partitions.get(number)

    def holds_new(self, partition: Partition | None) -> bool:
        """Whether a new write of an idle key of this partition waits for it instead of going now (per-update
        mode: only probes and parked updates wait)."""
        return partition is not None and partition.held and self._mode is RetryMode.PARTITION

    @property
    def held_partitions(self) -> list[int]:
        """The partitions held now."""
        return sorted(p.number for p in self._partitions.values() if p.held)

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, by partition, oldest first."""
        return [slot.parked for partition in self._partitions.values() for slot in partition.line.values()
                if slot.parked is not None]

    def next_probe(self, partition: Partition) -> float | None:
        """When the partition's next probe goes, if one is scheduled (its own, or the cluster's)."""
        if partition.probe_due is not None:
            return partition.probe_due
        if partition.stalled and self._cluster.due is not None:
            return self._cluster.due  # every partition is stalled: the cluster's probe goes next
        return None

    # ----------------------------------------------------------------------------- hold and probe

    def hold(self, partition: Partition, error: str) -> None:
        """A write failed with a retriable error: hold the partition (releasing, it goes on releasing: the release
        batch the write was in counts as failed)."""
        if not partition.held:
            self._start_hold(partition, error)
        partition.failed_write()
        self.arm_probe(partition)

    def _start_hold(self, partition: Partition, error: str) -> None:
        partition.hold(self._scheduler.now(), error)
        log.warning("Partition %d of the %s topic is held: %s. Its updates wait, in order, while one probe at a "
                    "time tests it (per-key lines at DEBUG)", partition.number, self.name, error)
        self._arm_summary()

    def _all_stalled(self) -> bool:
        """Every partition the queue writes to is stalled: the trouble is the cluster's."""
        return all(partition.stalled for partition in self._partitions.values())

    def lined_up(self, partition: Partition) -> Exits:
        """A key was lined up in the held partition: probe it, or (releasing) send it with the next batch."""
        if not partition.releasing:
            self.arm_probe(partition)
        elif self._release.idle:
            yield from self._send_batch()

    def arm_probe(self, partition: Partition) -> None:
        """Schedule the stalled partition's next probe: its own, or, while every partition is stalled, the
        cluster's."""
        if not partition.stalled or partition.probe is not None:
            return
        if self._all_stalled():
            cluster = self._cluster
            if cluster.probe is None and cluster.due is None:
                # Not moved to a tick: there is one probe to send, and a fleet's sidecars come back spread out.
                due = cluster.next_probe(self._scheduler.now(), self.probe_backoff.delay(cluster.streak))
                cluster.schedule(due)
                self._scheduler.push(due, 0, cluster)
        elif partition.probe_due is None:
            delay = self._scheduler.aligned(self.probe_backoff, partition.streak)
            due = partition.next_probe(self._scheduler.now(), delay)
            partition.schedule_probe(due)
            self._scheduler.push(due, -partition.number - 1, partition)

    def _arm_stalled(self) -> None:
        """Every partition is no longer stalled: the cluster's probe stood for the stalled ones, which now each need a
        probe of their own (else one would wait for a write of its own to be probed, however long Kafka has been
        back). Called where a partition stops being stalled other than by a write that got through (``_release_line``
        probes the others at once then)."""
        for partition in self._partitions.values():
            if partition.stalled and partition.probe is None:
                self.arm_probe(partition)

    def probe_now(self, partition: Partition) -> None:
        """Probe the stalled partition at once (its last probe proved nothing either way)."""
        if partition.stalled and partition.probe is None:
            now = self._scheduler.now()
            partition.schedule_probe(now)
            self._scheduler.push(now, -partition.number - 1, partition)

    def writable_again(self, number: int) -> bool:
        """The cluster says the partition can take writes again (its in-sync replicas are back, a leader is known):
        probe it now rather than on its schedule; while every partition is stalled, the cluster's probe goes now.
        False when there was nothing to do (the partition is not stalled, or a probe is out)."""
        partition = self._partitions.get(number)
        if partition is None or not partition.stalled or partition.probe is not None:
            return False
        if not self._all_stalled():
            if partition.probe_due is not None and partition.probe_due <= self._scheduler.now():
                return False
            self.probe_now(partition)
            return True
        cluster = self._cluster
        if cluster.probe is not None or (cluster.due is not None and cluster.due <= self._scheduler.now()):
            return False
        now = self._scheduler.now()
        cluster.schedule(now)
        self._scheduler.push(now, 0, cluster)
        return True

    def probe_stalled(self) -> Exits:
        """One probe for each stalled partition with a line and no probe out (the queue stops: if one gets
        through, the release sends the rest within the stop's bound)."""
        for partition in self._partitions.values():
            if partition.stalled and partition.probe is None and partition.line:
                yield from self._send_probe(partition)

    def fire(self, due: float, item: GateTimer) -> Exits:
        """One of the gate's timers came due (skipped when it was moved or dropped since)."""
        if isinstance(item, Partition):
            if item.probe_due == due:
                yield from self._fire_probe(item)
        elif isinstance(item, Release):
            if item.due == due:
                yield from self._send_batch()
        elif item.due == due:
            yield from self._fire_cluster_probe()

    def _fire_probe(self, partition: Partition) -> Exits:
        partition.schedule_probe(None)
        if self._all_stalled():
            self.arm_probe(partition)  # the cluster's probe goes for it
        else:
            yield from self._send_probe(partition)

    def _fire_cluster_probe(self) -> Exits:
        self._cluster.schedule(None)
        stalled = [p for p in self._partitions.values() if p.stalled and p.probe is None]
        if not self._all_stalled():
            for partition in stalled:
                self.arm_probe(partition)
            return
        # The stalled partition probed longest ago goes (a line of parked updates too).
        for partition in sorted(stalled, key=lambda p: p.probed_at):
            yield from self._send_probe(partition)
            if partition.probe is not None:
                self._cluster.went(partition.probe, self._scheduler.now())
                return

    def _send_probe(self, partition: Partition) -> Exits:
        """Send the oldest waiting update of a stalled partition, at its key's latest value."""
        partition.probing(self._scheduler.now())
        while partition.stalled and partition.probe is None and partition.line:
            update = yield partition.leave_line()
            if update is not None:
                partition.probe_went(update)
                self.probes_total += 1
        if not partition.line and partition.probe is None and partition.stalled:
            self._open(partition)

    # ----------------------------------------------------------------------------- settling

    def probe_settled(self, partition: Partition, update: StatusUpdate, failed: bool) -> None:
        """The partition's probe settled (``failed``: with a retriable error)."""
        partition.probe_back()
        if self._cluster.probe is update:
            self._cluster.settled(failed)
        elif failed:
            partition.probe_failed()  # the next probe backs off one step further

    def probe_not_sent(self, partition: Partition, update: StatusUpdate) -> None:
        """The producer refused the partition's probe (it is closed): no probe went, and the next goes at once."""
        partition.probe_not_sent()
        self.probes_total -= 1
        if self._cluster.probe is update:
            self._cluster.not_sent()
        self.probe_now(partition)

    def written(self, partition: Partition) -> Exits:
        """A write to the held partition succeeded: if it is stalled, its line goes out."""
        partition.wrote()
        yield from self._release_line(partition)

    def settled(self, partition: Partition | None, number: int, failed: bool) -> None:
        """An update settled after the key's bookkeeping: count it in its release batch, or open its releasing
        partition if that was the last write from before the hold."""
        release = self._release
        if number in release.inflight:  # (every write passes here: no call to ask the release)
            if release.settle(number, failed):
                self._batch_settled()
        elif partition is not None and partition.releasing and not partition.line and partition.inflight == 0:
            self._open(partition)  # the last write from before the hold settled after the line had gone out

    # ----------------------------------------------------------------------------- the ramped release

    def _release_line(self, partition: Partition) -> Exits:
        """A write to a stalled partition succeeded: its line goes out in the queue's release batches. If every
        partition was stalled (the cluster's trouble), probe each other one at once: a write that got through
        says the cluster may take writes again."""
        if not partition.stalled:
            return
        cluster_wide = self._all_stalled()
        partition.release()
        if cluster_wide:
            self._cluster.got_through()
            for other in self._partitions.values():
                if other.stalled and other.probe is None:
                    self.probe_now(other)
        if self._release.idle:
            yield from self._send_batch()

    def _releasing(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.releasing]

    def _send_batch(self) -> Exits:
        """Send the next release batch: what the rate allows in one interval, taken in turn from the releasing
        partitions."""
        release = self._release
        release.begin(self._scheduler.now())
        size = release.size
        partitions = [p for p in self._releasing() if p.line]
        while partitions and len(release.inflight) < size:
            for partition in list(partitions):
                if not partition.line or not partition.releasing:
                    partitions.remove(partition)
                    continue
                update = yield partition.leave_line()
                if update is not None:
                    release.sent(update.number)
                    if len(release.inflight) >= size:
                        break
        if release.inflight:
            log.debug("Released a batch of %d update(s) to the %s topic (rate %.0f/s)", len(release.inflight),
                      self.name, release.rate)
        else:
            self._batch_settled()

    def _batch_settled(self) -> None:
        """The release batch has settled: adjust the rate, open the partitions whose lines are empty, and send
        the next batch when the rate allows; below one update per the probes' longest interval, stall the
        releasing partitions behind probes again."""
        release = self._release
        if release.due is not None:
            return
        release.adjust()
        for partition in self._releasing():
            if not partition.line and partition.inflight == 0:
                self._open(partition)
        waiting = [p for p in self._releasing() if p.line]
        if not waiting:
            release.restart()
            return
        floor = 1 / self.probe_backoff.longest(0)
        if release.rate < floor:
            # The cluster takes less than one write per probe interval: back behind probes, and when one gets
            # through the release goes on from this rate, not from a new slow start (TCP keeps its threshold).
            release.floor(floor)
            for partition in waiting:
                self._stall(partition)
            return
        self._scheduler.push(release.next_batch(self._scheduler.now()), 0, release)

    def _stall(self, partition: Partition) -> None:
        """Even one write per the probes' longest interval fails: the partition waits behind probes again."""
        partition.stall()
        self.arm_probe(partition)

    def _open(self, partition: Partition) -> None:
        held_at = partition.open()
        self._arm_stalled()
        if held_at is not None:
            log.info("Partition %d of the %s topic is released after %.1f s: %d probe(s), %d failed attempt(s), "
                     "%d update(s) written since the hold began", partition.number, self.name,
                     self._scheduler.now() - held_at, partition.probes, partition.failures, partition.written)

    # ----------------------------------------------------------------------------- parking

    def park(self, slot: Slot, update: StatusUpdate) -> Exits:
        """A failed update was parked in its key's slot (``key_slots``): the key waits in the partition's line, held
        like an outage."""
        partition = slot.partition
        assert partition is not None
        if not partition.held:
            error = update.last_error.name if update.last_error is not None else "no error"
            self._start_hold(partition, f"an update ran out of retries ({error}) and is parked")
        partition.line_up(slot)
        yield from self.lined_up(partition)

    # ----------------------------------------------------------------------------- logging an outage

    def stop_summary(self) -> None:
        """No more summary lines (until a partition is held again)."""
        self._summary_due = None

    def _arm_summary(self) -> None:
        if self._summary_due is None and not self._scheduler.closed:
            self._summary_due = self._scheduler.now() + SUMMARY_INTERVAL_S
            self._scheduler.open_window(self._summary_due, self._summary)

    def window_closed(self, closes: float, window: LogWindow) -> None:
        """A summary line's window closed: if it is the gate's, the held partitions are summed up in one line (and
        the next window opens while any is held)."""
        if window is not self._summary or closes != self._summary_due:
            return
        self._summary_due = None
        held = [p for p in self._partitions.values() if p.held]
        if not held or self._scheduler.closed:
            return
        longest = self._scheduler.now() - min(p.held_at or 0.0 for p in held)
        waiting = sum(len(p.line) for p in held)
        parked = sum(1 for p in held for slot in p.line.values() if slot.parked is not None)
        log.warning("%d partition(s) of the %s topic held, the longest for %.0f s: %d key(s) waiting, %d parked, "
                    "%d probe(s) sent so far", len(held), self.name, longest, waiting, parked,
                    sum(p.probes for p in held))
        self._arm_summary()
