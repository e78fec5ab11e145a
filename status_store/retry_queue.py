"""The retry queue: one scheduler on the event loop for every status write and its retries.

Why not a sleeping coroutine per retry (tenacity, Connect's immediate resend)? One timer heap costs
a few hundred bytes per pending update, and it can see every update of a key, and of a partition, at once:

- **Per-key coalescing.** A key has at most one write in flight and at most one waiting. A newer
  write for the key supersedes the waiting one (counted as superseded, not failed), and is held
  until the write in flight settles, so an older value is never written after a newer one. (Off for
  append-only topics, where every update is an event of its own.)
- **An outage is one event, not thousands** (``RetryMode.PARTITION``, the default). When a write to a
  partition fails with a retriable error, the partition is *held*: its updates stop retrying one by
  one and wait, in order, while one *probe* at a time (the oldest waiting update, at its key's latest
  value) goes out on the probe schedule (KIP-1278's backoff, capped at ``probe_backoff``'s maximum).
  When a probe or any other write to the partition succeeds, the waiting updates are *released* at
  once, ramped like TCP's slow start: a first small window of writes in flight, one more per write
  that succeeds (so it doubles per round trip), halved on a failure; a failure with a window of one
  holds the partition again. Partitions whose writes succeed are never touched, so a partial outage
  (one broker down) holds only the partitions that broker leads. What circuit breakers with half-open
  probes do for a host (Envoy, Finagle), this does for a partition, with Kafka's own partitioning.
- **Per-update retries** (``RetryMode.PER_UPDATE``, the engine before partitions were held): each key
  backs off on its own clock (``backoff.py``); a newer value takes over the waiting retry's place in
  time. Retry times move to a 100 ms tick where the policy's bounds allow, so retries of many keys
  share Produce requests. An optional retry budget (``budget.py``) holds retries back while most
  attempts fail.
- **Bounded retries** (KIP-1278): at most ``max_retries`` retries, counted in attempts actually sent
  (an update waiting behind a probe has not been retried), and, optionally, a total time bound per
  update, held time included (in the spirit of KIP-572).
- **Error classes** from ``errors.classify``: fatal errors are not retried and say nothing about an
  outage; a leader change is retried once at once (KIP-951), later retries back off.
- **Abandonment** (Connect's rules): before each send the owner of the update may abandon it
  (key deleted, generation changed, a safe write no longer safe).
- **After the last retry** an owner may *park* an update (``park``): its key's value waits in its
  partition, held like an outage, and is submitted again when the partition takes writes: the
  partition's probes are the parked updates' probes too.
- **Never blocks the caller.** ``submit`` returns at once; ``StatusUpdate.result()`` awaits the outcome
  (``updates.py``: the handle and the types a caller sees; ``holds.py``: the state of keys and partitions).
  With ``max_pending`` set, a write that would grow the queue past it is refused (``WriteRejectedError``).
- **A listener never breaks the queue.** An exception in a listener is logged once per cause, counted
  in ``listener_errors``, and the update settles and its key moves on as if nothing happened.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Iterator, Sequence

from .backoff import Backoff, RetryMode
from .delivery import Delivery, Send
from .errors import ErrorKind, StoreClosedError, WriteFailedError, WriteRejectedError, classify
from .holds import ClusterProbe, Partition, Release, Slot
from .model import new_tuple
from .updates import Outcome, Result, RetryListener, RetryPolicy, Route, StatusUpdate

log = logging.getLogger(__name__)

# Retry and probe times are moved to this tick where the backoff policy's bounds allow it (see _aligned).
RETRY_TICK_S = 0.1
# While a partition is held, a summary line is logged this often.
SUMMARY_INTERVAL_S = 60.0
class RetryQueue:
    """Schedules every attempt of every status write on one event loop."""

    def __init__(self, send: Send, policy: RetryPolicy, listeners: Sequence[RetryListener] = (),
                 route: Route | None = None, name: str = "status", coalesce: bool = True) -> None:
        """``route``: the partition of a key (Kafka's partitioner). Without it every key is on its own:
        partitions are neither held nor parked in (parking needs a route). ``coalesce``: a newer write of a key
        replaces its waiting one (status topics); False where every update is written (append-only topics)."""
        self._send = send
        self._coalesce = coalesce
        self.policy = policy
        # Per event, the listeners' handlers, found once; a handler inherited from RetryListener does nothing
        # and is left out (every write passes through on_submitted and on_finished).
        self._handlers = {event: _handlers(listeners, event) for event in _EVENTS}
        self._route = route
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: dict[str, Slot] = {}
        self._partitions: dict[int, Partition] = {}
        self._heap: list[tuple[float, int, StatusUpdate | Partition | ClusterProbe | Release]] = []
        self._cluster = ClusterProbe()
        self._release_batches = Release()
        self._stalled = 0
        self._timer: asyncio.TimerHandle | None = None
        self._numbers = itertools.count(1)
        # Unsettled updates by number, and a pointer that only moves forward to the oldest of them
        # (a dict's first key is slow to find after many removals from its front).
        self._unsettled: dict[int, StatusUpdate] = {}
        self._oldest = 1
        self._parked = 0
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self._flush_check_scheduled = False
        self.attempts_total = 0
        # Retries the budget refused (each delayed by a backoff step, none dropped).
        self.throttled_total = 0
        self.probes_total = 0
        # Writes refused because max_pending updates were pending.
        self.rejected_total = 0
        # Exceptions raised by listeners, by listener class name.
        self.listener_errors: collections.Counter[str] = collections.Counter()
        self._logged_causes: set[tuple[str, str]] = set()
        self._failures = _FailureLog(name)
        self._summary: asyncio.TimerHandle | None = None
        # Stopping: no new submissions. Closed: nothing is sent any more.
        self._stopped = False
        self._closed = False

    # ----------------------------------------------------------------------------- submitting

    def check_room(self, keys: Sequence[str]) -> None:
        """Raise ``WriteRejectedError`` if writes of these keys, in order, would grow the queue past ``max_pending``.
        A write that replaces its key's waiting or parked value takes no room (nor do a key's later writes in
        ``keys``, which replace its earlier one); one behind the key's write in flight takes one place."""
        limit = self.policy.max_pending
        if limit is None:
            return
        free = limit - len(self._unsettled) - self._parked
        if len(keys) <= free or self._growth(keys) <= free:
            return
        self.rejected_total += 1
        raise WriteRejectedError(f"{limit} status updates are pending (status.storage.retry.max.pending): "
                                 "Kafka is not taking writes as fast as they come; try again later",
                                 max(1.0, self._probe_backoff.longest(0)))

    def _growth(self, keys: Sequence[str]) -> int:
        """How many unsettled updates writes of these keys would add."""
        if not self._coalesce:
            return len(keys)
        growth = 0
        for key, writes in collections.Counter(keys).items():
            slot = self._slots.get(key)
            if slot is None:
                partition = self._partitions.get(self._route(key)) if self._route is not None else None
            elif slot.waiting is not None or slot.parked is not None:
                continue  # replaced
            else:
                partition = slot.partition
            if (slot is not None and slot.inflight is not None) or self._holds_new(partition):
                growth += 1  # waits (behind the key's write in flight, or in the held partition's line)
            else:
                growth += min(writes, 2)  # goes out, and a second write waits behind it
        return growth

    def supersede(self, update: StatusUpdate, reason: str) -> StatusUpdate:
        """Take an update that is not to be sent after all (a replayed update that the topic made obsolete): it
        is settled as superseded and reported to the listeners like any other."""
        self._register(update, asyncio.get_running_loop().time())
        self._finish(update, Result.SUPERSEDED, reason)
        return update

    def submit(self, update: StatusUpdate, room_checked: bool = False) -> StatusUpdate:
        """Take an update; it is sent now, or waits behind the key's write in flight or for its partition's
        release. Never blocks; raises ``WriteRejectedError`` when the queue is full (see ``check_room``;
        ``room_checked``: the caller has just asked ``check_room`` for this write itself)."""
        if self._stopped:
            raise StoreClosedError("the store is stopped")
        if not room_checked:
            self.check_room((update.key,))
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._register(update, loop.time())
        slot = self._slot(update)
        if slot.parked is not None:
            self._unpark(slot, None, "a newer write for the key was submitted")
        replaced = slot.waiting
        if replaced is not None:
            # The newer value takes the waiting one's place: in time, in its partition's line, or behind the
            # key's write in flight.
            self._finish(replaced, Result.SUPERSEDED, "a newer write for the key was submitted")
            slot.waiting = update
            if replaced._due is not None:
                self._schedule(slot, update, replaced._due)
            elif slot.queued and update._deadline is not None:
                self._push(update._deadline, update.number, update)
            return update
        if slot.inflight is not None:
            update._due = None
            slot.waiting = update
        elif self._holds_new(slot.partition):
            slot.waiting = update
            self._enqueue(slot)
        else:
            self._attempt(slot, update)
        return update

    def _register(self, update: StatusUpdate, now: float) -> None:
        update.number = next(self._numbers)
        update.submitted_at = now
        # Coalescing: one slot per key. Otherwise (append-only topics) every update has a slot of its own.
        update._slot_key = update.key if self._coalesce else f"#{update.number}"
        if self.policy.timeout is not None:
            update._deadline = now + self.policy.timeout
        self._unsettled[update.number] = update
        self._notify("on_submitted", update)

    def _slot(self, update: StatusUpdate) -> Slot:
        key = update._slot_key
        slot = self._slots.get(key)
        if slot is None:
            partition = None
            if self._route is not None:
                number = self._route(update.key)
                partition = self._partitions.get(number)
                if partition is None:
                    partition = self._partitions[number] = Partition(number)
            slot = self._slots[key] = Slot(key, partition)
        return slot

    def _holds_new(self, partition: Partition | None) -> bool:
        """Whether a new write of an idle key of this partition waits for it instead of going now."""
        return partition is not None and partition.held and self.policy.mode is RetryMode.PARTITION

    def _attempt(self, slot: Slot, update: StatusUpdate) -> None:
        slot.inflight = update
        update.attempts += 1
        self.attempts_total += 1
        update._due = None
        if slot.partition is not None:
            slot.partition.inflight += 1
        budget = self.policy.budget
        if budget is not None:
            budget.sent(update.attempts > 1)
        try:
            self._send(update.key.encode(), update.value, _Attempt(self, slot, update))
        except StoreClosedError as e:
            if budget is not None:
                budget.settled(update.attempts > 1, None)
            slot.inflight = None
            if slot.partition is not None:
                slot.partition.inflight -= 1
            self._finish(update, Result.FAILED, f"not sent: {e}")

    # ----------------------------------------------------------------------------- settling

    def _settled(self, slot: Slot, update: StatusUpdate, delivery: Delivery | None,
                 error: WriteFailedError | None) -> None:
        if slot.inflight is update:
            slot.inflight = None
        partition = slot.partition
        probe = False
        if partition is not None:
            partition.inflight -= 1
            probe = partition.probe is update
            if probe:
                partition.probe = None
                failed = error is not None and classify(error) is not ErrorKind.FATAL
                if self._cluster.probe is update:
                    self._cluster.probe = None
                    self._cluster.streak = self._cluster.streak + 1 if failed else 0
                elif failed:
                    partition.streak += 1  # the next probe backs off one step further
        budget = self.policy.budget
        if budget is not None:
            written = True if error is None else (None if classify(error) is ErrorKind.FATAL else False)
            budget.settled(update.attempts > 1, written)
        if error is None:
            slot.streak = 0
            self._finish(update, Result.WRITTEN, "written", delivery)
            if partition is not None and partition.held:
                partition.written += 1
                self._release(partition)
        elif update.outcome is None:
            update.last_error = error
            self._after_failure(slot, update, error, probe)
        if probe and partition is not None:
            self._arm_probe(partition)
        release = self._release_batches
        if update.number in release.inflight:
            release.inflight.discard(update.number)
            if error is not None and classify(error) is not ErrorKind.FATAL:
                release.failed = True
            if not release.inflight:
                self._batch_settled()
        elif partition is not None and partition.releasing and not partition.line and partition.inflight == 0:
            self._open(partition)  # the last write from before the hold settled after the line had gone out
        self._advance(slot)

    def _after_failure(self, slot: Slot, update: StatusUpdate, error: WriteFailedError, probe: bool) -> None:
        kind = classify(error)
        partition = slot.partition
        if kind is ErrorKind.FATAL:
            # Failed for good, even with a newer value held: that one is sent next (_advance). A fatal error
            # says nothing about the partition: a probe that met one is followed by the next at once.
            self._finish(update, Result.FAILED, f"{error.name} is not retriable")
            if probe and partition is not None:
                self._probe_now(partition)
            return
        leader_retry = kind is ErrorKind.LEADER_CHANGE and not update._leader_retried
        # A failed probe waits in its partition's line in either mode: one probe path for outages and parking.
        holding = partition is not None and not leader_retry and (self.policy.mode is RetryMode.PARTITION or probe)
        if holding:
            assert partition is not None
            self._hold(partition, error.name)
        else:
            slot.streak += 1
        newer = slot.waiting
        if newer is not None:
            # A newer value was held behind this attempt: it replaces this one (in the partition's line, or
            # after the key's backoff).
            self._finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            if holding:
                self._enqueue(slot, first=probe)
            else:
                self._schedule(slot, newer, self._due(slot, newer, kind))
            return
        reason = update._abandon(True) if update._abandon is not None else None
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            return
        if update.attempts > self.policy.max_retries:
            self._finish(update, Result.FAILED, f"no retries left after {update.attempts} attempt(s)")
            return
        if holding:
            if update._deadline is not None and self._now() >= update._deadline:
                self._finish_timed_out(update)
                return
            slot.waiting = update
            self._enqueue(slot, first=probe)
            return
        due = self._due(slot, update, kind)
        if update._deadline is not None and due > update._deadline:
            self._finish(update, Result.FAILED,
                         f"the next attempt would pass the {self.policy.timeout:g} s bound of "
                         "status.storage.retry.timeout.ms")
            return
        self._schedule(slot, update, due)

    def _due(self, slot: Slot, update: StatusUpdate, kind: ErrorKind) -> float:
        """When the key may be tried again after its latest failure (per-update retries)."""
        if kind is ErrorKind.LEADER_CHANGE and not update._leader_retried:
            # KIP-951: the new leader is known or about to be; waiting would only add latency.
            update._leader_retried = True
            return self._now()
        return self._aligned(self.policy.backoff, slot.streak - 1)

    def _aligned(self, backoff: Backoff, retry: int) -> float:
        """A backoff's delay from now, moved to a common tick where the policy's bounds allow it, so that the
        retries and probes of many keys and partitions leave together (and share Produce requests)."""
        now = self._now()
        due = now + backoff.delay(retry)
        earlier = math.floor(due / RETRY_TICK_S) * RETRY_TICK_S
        if earlier >= now + backoff.shortest(retry):
            return earlier
        later = earlier + RETRY_TICK_S
        return later if later <= now + backoff.longest(retry) else due

    def _now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    def _schedule(self, slot: Slot, update: StatusUpdate, due: float) -> None:
        if update._deadline is not None:
            # An update not yet tried gets its one attempt at its bound at the latest.
            due = min(due, update._deadline)
        update._due = due
        slot.waiting = update
        self._push(due, update.number, update)

    def _push(self, due: float, number: int, item: StatusUpdate | Partition | ClusterProbe | Release) -> None:
        heapq.heappush(self._heap, (due, number, item))
        self._arm()

    def _advance(self, slot: Slot) -> None:
        """Send (or line up) an update held behind the key's write once it has settled; forget idle keys."""
        if self._closed:
            return
        waiting = slot.waiting
        if slot.inflight is None and waiting is not None and waiting._due is None and not slot.queued:
            if self._holds_new(slot.partition):
                self._enqueue(slot)
            else:
                self._send_now(slot, waiting)
        if slot.empty() and not slot.queued and self._slots.get(slot.key) is slot:
            del self._slots[slot.key]

    def _finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None,
                stopped: bool = False) -> None:
        if update.outcome is not None:
            return
        outcome = new_tuple(Outcome, (update.key, result, update.attempts, reason, delivery, update.last_error,
                                       stopped))
        update.settle(outcome)
        self._unsettled.pop(update.number, None)
        if result is Result.FAILED and not stopped:
            self._failures.note(update, reason)
        self._notify("on_finished", update, outcome)
        if self._flushes and not self._flush_check_scheduled:
            # Once per turn of the event loop, not per outcome: a burst's delivery reports settle together.
            self._flush_check_scheduled = True
            asyncio.get_running_loop().call_soon(self._release_flushes)

    def _finish_timed_out(self, update: StatusUpdate) -> None:
        self._finish(update, Result.FAILED, f"the {self.policy.timeout:g} s bound of "
                                            "status.storage.retry.timeout.ms passed")

    def _notify(self, event: str, *args: object) -> None:
        """Call every listener; one that raises is logged (once per cause) and counted, never propagated."""
        for listener, handler in self._handlers[event]:
            try:
                handler(*args)
            except Exception as e:
                name = type(listener).__name__
                self.listener_errors[name] += 1
                cause = (name, type(e).__name__)
                if cause not in self._logged_causes:
                    self._logged_causes.add(cause)
                    log.exception("The %s listener of the %s retry queue raised in %s (logged once per cause, "
                                  "counted in status_listener_errors_total); the queue goes on", name, self.name,
                                  event)

    # ----------------------------------------------------------------------------- partitions: hold, probe, release

    @property
    def _probe_backoff(self) -> Backoff:
        return self.policy.probe_backoff or self.policy.backoff

    def _hold(self, partition: Partition, error: str) -> None:
        """A write failed with a retriable error: hold the partition (releasing, it goes on releasing: the release
        batch the write was in counts as failed)."""
        if not partition.held:
            self._start_hold(partition, error)
        partition.failures += 1
        self._arm_probe(partition)

    def _start_hold(self, partition: Partition, error: str) -> None:
        partition.held_at = self._now()
        partition.streak = 0
        partition.error = error
        partition.failures = partition.probes = partition.written = 0
        self._stalled += 1
        log.warning("Partition %d of the %s topic is held: %s. Its updates wait, in order, while one probe at a "
                    "time tests it (per-key lines at DEBUG)", partition.number, self.name, error)
        self._arm_summary()

    def _all_stalled(self) -> bool:
        return self._stalled == len(self._partitions)

    def _arm_probe(self, partition: Partition) -> None:
        """Schedule the stalled partition's next probe: its own, or, while every partition is stalled, the
        cluster's."""
        if not partition.stalled or partition.probe is not None:
            return
        if self._all_stalled():
            cluster = self._cluster
            if cluster.probe is None and cluster.due is None:
                # Not moved to a tick: there is one probe to send, and a fleet's sidecars come back spread out.
                cluster.due = self._now() + self._probe_backoff.delay(cluster.streak)
                self._push(cluster.due, 0, cluster)
        elif partition.probe_due is None:
            partition.probe_due = self._aligned(self._probe_backoff, partition.streak)
            self._push(partition.probe_due, -partition.number - 1, partition)

    def _probe_now(self, partition: Partition) -> None:
        if partition.stalled and partition.probe is None:
            partition.probe_due = self._now()
            self._push(partition.probe_due, -partition.number - 1, partition)

    def _fire_probe(self, partition: Partition) -> None:
        partition.probe_due = None
        if self._all_stalled():
            self._arm_probe(partition)  # the cluster's probe goes for it
        else:
            self._send_probe(partition)

    def _fire_cluster_probe(self) -> None:
        self._cluster.due = None
        stalled = [p for p in self._partitions.values() if p.stalled and p.probe is None]
        if not self._all_stalled():
            for partition in stalled:
                self._arm_probe(partition)
            return
        # The stalled partition probed longest ago goes (a line of parked updates too).
        for partition in sorted(stalled, key=lambda p: p.probed_at):
            self._send_probe(partition)
            if partition.probe is not None:
                self._cluster.probe = partition.probe
                return

    def _send_probe(self, partition: Partition) -> None:
        """Send the oldest waiting update of a stalled partition, at its key's latest value."""
        partition.probed_at = self._now()
        while partition.stalled and partition.probe is None and partition.line:
            key = next(iter(partition.line))
            slot = self._dequeue(partition, key)
            update = self._take(slot)
            if update is not None and self._send_now(slot, update, budgeted=False):
                partition.probe = update
                partition.probes += 1
                self.probes_total += 1
        if not partition.line and partition.probe is None and partition.stalled:
            self._open(partition)

    def _release(self, partition: Partition) -> None:
        """A write to a stalled partition succeeded: its line goes out in the queue's release batches. If every
        partition was stalled (the cluster's trouble), probe each other one at once: a write that got through
        says the cluster may take writes again."""
        if not partition.stalled:
            return
        cluster_wide = self._all_stalled()
        partition.releasing = True
        self._stalled -= 1
        partition.probe_due = None
        if cluster_wide:
            self._cluster.streak = 0
            for other in self._partitions.values():
                if other.stalled and other.probe is None:
                    self._probe_now(other)
        if self._release_batches.idle:
            self._send_batch()

    def _releasing(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.releasing]

    def _send_batch(self) -> None:
        """Send the next release batch: what the rate allows in one interval, taken in turn from the releasing
        partitions."""
        release = self._release_batches
        release.due = None
        release.failed = False
        release.started = self._now()
        size = release.size
        partitions = [p for p in self._releasing() if p.line]
        while partitions and len(release.inflight) < size:
            for partition in list(partitions):
                if not partition.line or not partition.releasing:
                    partitions.remove(partition)
                    continue
                key = next(iter(partition.line))
                slot = self._dequeue(partition, key)
                update = self._take(slot)
                if update is not None and self._send_now(slot, update, budgeted=False):
                    release.inflight.add(update.number)
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
        release = self._release_batches
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
        floor = 1 / self._probe_backoff.longest(0)
        if release.rate < floor:
            # The cluster takes less than one write per probe interval: back behind probes, and when one gets
            # through the release goes on from this rate, not from a new slow start (TCP keeps its threshold).
            release.rate = floor
            for partition in waiting:
                self._stall(partition)
            return
        release.due = max(self._now(), release.started + release.interval)
        self._push(release.due, 0, release)

    def _stall(self, partition: Partition) -> None:
        """Even one write per the probes' longest interval fails: the partition waits behind probes again."""
        partition.releasing = False
        self._stalled += 1
        partition.streak += 1
        self._arm_probe(partition)

    def _open(self, partition: Partition) -> None:
        held_at = partition.held_at
        if partition.stalled:
            self._stalled -= 1
        partition.held_at = None
        partition.releasing = False
        partition.streak = 0
        partition.probe_due = None
        if held_at is not None:
            log.info("Partition %d of the %s topic is released after %.1f s: %d probe(s), %d failed attempt(s), "
                     "%d update(s) written since the hold began", partition.number, self.name,
                     self._now() - held_at, partition.probes, partition.failures, partition.written)

    def _enqueue(self, slot: Slot, first: bool = False) -> None:
        """Line the key up in its held partition (``first``: at the front, as the probe it was)."""
        partition = slot.partition
        assert partition is not None
        if not slot.queued:
            slot.queued = True
            partition.line[slot.key] = slot
            if first:
                partition.line.move_to_end(slot.key, last=False)
            waiting = slot.waiting
            if waiting is not None and waiting._deadline is not None:
                self._push(waiting._deadline, waiting.number, waiting)
        if not partition.releasing:
            self._arm_probe(partition)
        elif self._release_batches.idle:
            self._send_batch()

    def _dequeue(self, partition: Partition, key: str) -> Slot:
        slot = partition.line.pop(key)
        slot.queued = False
        return slot

    def _take(self, slot: Slot) -> StatusUpdate | None:
        """The update a dequeued key sends: its waiting one, or its parked one submitted again."""
        if slot.waiting is not None:
            return slot.waiting
        if slot.parked is not None:
            return self._unpark(slot, self._now(), "")
        self._advance(slot)
        return None

    # ----------------------------------------------------------------------------- parking

    def park(self, update: StatusUpdate) -> bool:
        """Keep a failed update's value in its partition, held like an outage, until the partition takes writes
        again; then it is submitted again (unless its owner abandons it then). False when the key has a newer
        value already, or keys have no partitions here."""
        slot = self._slots.get(update._slot_key)
        if self._route is None or self._closed or (slot is not None and not slot.empty()):
            return False
        slot = self._slot(update)
        slot.parked = update
        self._parked += 1
        partition = slot.partition
        assert partition is not None
        if not partition.held:
            error = update.last_error.name if update.last_error is not None else "no error"
            self._start_hold(partition, f"an update ran out of retries ({error}) and is parked")
        self._enqueue(slot)
        return True

    def _unpark(self, slot: Slot, now: float | None, reason: str) -> StatusUpdate | None:
        """The parked update leaves: ``now`` given, submitted again (returned) unless its owner abandons it;
        else dropped for ``reason``."""
        parked = slot.parked
        assert parked is not None
        slot.parked = None
        self._parked -= 1
        again = None
        if now is not None:
            abandoned = parked._abandon(True) if parked._abandon is not None else None
            if abandoned is None:
                again = parked.again()
                self._register(again, now)
                slot.waiting = again
            else:
                reason = abandoned
                log.debug("Not sending the parked update of %s again: %s", parked.key, reason)
        self._notify("on_unparked", parked, again, reason)
        return again

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, by partition, oldest first."""
        return [slot.parked for partition in self._partitions.values() for slot in partition.line.values()
                if slot.parked is not None]

    def is_parked(self, update: StatusUpdate) -> bool:
        """Whether this update is parked now."""
        slot = self._slots.get(update._slot_key)
        return slot is not None and slot.parked is update

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return self._parked

    # ----------------------------------------------------------------------------- the timer

    def _arm(self) -> None:
        if not self._heap or self._loop is None or self._closed:
            return
        due = self._heap[0][0]
        if self._timer is not None:
            if self._timer.when() <= due:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._closed:
            return
        now = self._now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, item = heapq.heappop(heap)
            if isinstance(item, Partition):
                if item.probe_due == due:
                    self._fire_probe(item)
                continue
            if isinstance(item, Release):
                if item.due == due:
                    self._send_batch()
                continue
            if isinstance(item, ClusterProbe):
                if item.due == due:
                    self._fire_cluster_probe()
                continue
            slot = self._slots.get(item._slot_key)
            # Entries of superseded, rescheduled or sent updates are left in the heap and skipped here.
            if slot is None or slot.waiting is not item:
                continue
            if item._due == due:
                self._send_now(slot, item)
            elif slot.queued and item._deadline is not None and due >= item._deadline:
                partition = slot.partition
                assert partition is not None
                self._dequeue(partition, slot.key)
                slot.waiting = None
                self._finish_timed_out(item)
                self._advance(slot)
        self._arm()

    def _send_now(self, slot: Slot, update: StatusUpdate, budgeted: bool = True) -> bool:
        """Send a waiting update now, unless its owner abandons it (Connect's rules: on a retry, the key
        deleted or the generation moved on; always, a safe write no longer safe), its bound has passed,
        or (``budgeted``) the retry budget holds the retry back. True when it was sent."""
        slot.waiting = None
        retry = update.attempts > 0
        reason = update._abandon(retry) if update._abandon is not None else None
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            self._advance(slot)
            return False
        if update._deadline is not None and self._now() > update._deadline:
            self._finish_timed_out(update)
            self._advance(slot)
            return False
        if retry and budgeted and not self._admitted(slot, update):
            return False
        if retry:
            self._notify("on_retry", update)
        self._attempt(slot, update)
        return slot.inflight is update

    def _admitted(self, slot: Slot, update: StatusUpdate) -> bool:
        """Ask the budget. A refused retry takes a place in the floor's line (once) and waits for the key's
        next backoff step or its place, whichever comes first, at least until the next tick, without
        using up one of its retries. Its time bound still ends it, as a failure."""
        budget = self.policy.budget
        if budget is None:
            return True
        now = self._now()
        if (update._floor_slot is not None and now >= update._floor_slot) or budget.admit():
            update._floor_slot = None
            return True
        self.throttled_total += 1
        if update._floor_slot is None:
            update._floor_slot = budget.floor_slot(now)
        # The key backs off as if the retry had failed, but keeps its retries: a refusal costs the
        # broker nothing, and a key refused again and again is reconsidered about once per max backoff.
        slot.streak += 1
        # Never sooner than the next tick (full jitter may draw no wait at all).
        next_tick = (math.floor(now / RETRY_TICK_S) + 1) * RETRY_TICK_S
        due = max(min(self._due(slot, update, ErrorKind.RETRIABLE), update._floor_slot), next_tick)
        if update._deadline is not None and due > update._deadline:
            self._finish(update, Result.FAILED,
                         f"held back by the retry budget until the next attempt would pass the "
                         f"{self.policy.timeout:g} s bound of status.storage.retry.timeout.ms")
            self._advance(slot)
        else:
            self._schedule(slot, update, due)
        return False

    # ----------------------------------------------------------------------------- logging an outage

    def _arm_summary(self) -> None:
        if self._summary is None and self._loop is not None and not self._closed:
            self._summary = self._loop.call_later(SUMMARY_INTERVAL_S, self._log_summary)

    def _log_summary(self) -> None:
        self._summary = None
        held = [p for p in self._partitions.values() if p.held]
        if not held or self._closed:
            return
        longest = self._now() - min(p.held_at or 0.0 for p in held)
        waiting = sum(len(p.line) for p in held)
        log.warning("%d partition(s) of the %s topic held, the longest for %.0f s: %d key(s) waiting, %d parked, "
                    "%d probe(s) sent so far", len(held), self.name, longest, waiting, self._parked,
                    sum(p.probes for p in held))
        self._arm_summary()

    # ----------------------------------------------------------------------------- observing

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet (in flight, held, or waiting for a retry)."""
        return len(self._unsettled)

    @property
    def held_partitions(self) -> list[int]:
        """The partitions held now."""
        return sorted(p.number for p in self._partitions.values() if p.held)

    def waiting_retries(self) -> list[StatusUpdate]:
        """Updates waiting for their next attempt (on a timer, or in a held partition's line), soonest first."""
        return sorted(self._waiting(), key=self.next_attempt)

    def waiting_retries_unsorted(self) -> list[StatusUpdate]:
        """The same, in no order (cheaper where only a few are needed in order)."""
        return list(self._waiting())

    def next_attempt(self, update: StatusUpdate) -> float:
        """When a waiting update may go next (loop time): its timer, or its partition's next probe; for the
        keys behind the first of a held partition's line, that is when they may go at the earliest."""
        if update._due is not None:
            return update._due
        slot = self._slots.get(update._slot_key)
        partition = slot.partition if slot is not None else None
        if partition is not None and partition.probe_due is not None:
            return partition.probe_due
        if partition is not None and partition.stalled and self._cluster.due is not None:
            return self._cluster.due  # every partition is stalled: the cluster's probe goes next
        return self._now()

    def waits_in_line(self, update: StatusUpdate) -> bool:
        """Whether a waiting update waits in its held partition's line (not on a timer of its own)."""
        return update._due is None

    @property
    def waiting_count(self) -> int:
        """How many updates wait for their next attempt (no sorting: cheap enough for every scrape)."""
        return sum(1 for _ in self._waiting())

    def _waiting(self) -> Iterator[StatusUpdate]:
        for slot in self._slots.values():
            waiting = slot.waiting
            if waiting is not None and (waiting._due is not None or slot.queued):
                yield waiting

    def oldest_unsettled_age(self) -> float:
        """Seconds since the oldest update without an outcome was submitted (0 when none)."""
        number = self._oldest_unsettled()
        if number is None or self._loop is None:
            return 0.0
        return self._loop.time() - self._unsettled[number].submitted_at

    def _oldest_unsettled(self) -> int | None:
        if not self._unsettled:
            return None
        while self._oldest not in self._unsettled:
            self._oldest += 1
        return self._oldest

    # ----------------------------------------------------------------------------- flush and stop

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every update submitted before this call has an outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._flushes.append((next(self._numbers), future))
        self._release_flushes()
        await asyncio.wait_for(future, timeout)

    def _release_flushes(self) -> None:
        self._flush_check_scheduled = False
        if not self._flushes:
            return
        oldest = self._oldest_unsettled()
        if oldest is not None and oldest < self._flushes[0][0]:
            return  # the earliest flush (marks only grow) still waits: so do the others
        waiting = []
        for mark, future in self._flushes:
            if oldest is None or oldest >= mark:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((mark, future))
        self._flushes = waiting

    async def stop(self, timeout: float) -> list[StatusUpdate]:
        """Send what waits for a retry once more (a held partition: its probe), wait at most ``timeout`` s for
        every outcome, then fail what is left. Returns the updates that failed because the store stopped;
        never waits longer. Parked updates stay parked (``parked()``)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
        for slot in list(self._slots.values()):
            waiting = slot.waiting
            if waiting is not None and waiting._due is not None and slot.inflight is None:
                # One last attempt each, bounded by the number of keys: the budget would only turn
                # these into failures.
                self._send_now(slot, waiting, budgeted=False)
        for partition in self._partitions.values():
            if partition.stalled and partition.probe is None and partition.line:
                # One probe each: if it gets through, the release sends the rest within the bound.
                self._send_probe(partition)
        self._stopped = True
        with contextlib.suppress(TimeoutError):
            await self.flush(timeout)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        lost = list(self._unsettled.values())
        for update in lost:
            self._finish(update, Result.FAILED, "the store stopped before Kafka acknowledged the write", stopped=True)
        self._heap.clear()
        self._slots = {key: slot for key, slot in self._slots.items() if slot.parked is not None}
        return lost


_EVENTS = ("on_submitted", "on_retry", "on_finished", "on_unparked")


def _handlers(listeners: Sequence[RetryListener], event: str) -> list[tuple[RetryListener, Callable[..., None]]]:
    """The listeners' handlers of one event: none for a listener without the method (written against an older
    RetryListener) or with RetryListener's own, which does nothing."""
    handlers = []
    for listener in listeners:
        handler = getattr(listener, event, None)
        if handler is not None and getattr(type(listener), event, None) is not getattr(RetryListener, event):
            handlers.append((listener, handler))
    return handlers


class _Attempt:
    """The completion callback of one attempt: one small object per write in flight (a partial of a bound method
    would be three, and every object a pending write holds is traversed by each full garbage collection)."""

    __slots__ = ("queue", "slot", "update")

    def __init__(self, queue: RetryQueue, slot: Slot, update: StatusUpdate) -> None:
        self.queue, self.slot, self.update = queue, slot, update

    def __call__(self, delivery: Delivery | None, error: WriteFailedError | None) -> None:
        self.queue._settled(self.slot, self.update, delivery, error)


class _FailureLog:
    """Failed updates, logged without flooding: the first of a burst at once at ERROR, then at most one line per
    interval with how many more failed and a few of their keys; every one at DEBUG."""

    def __init__(self, name: str, interval: float = SUMMARY_INTERVAL_S) -> None:
        self._name = name
        self._interval = interval
        self._window: asyncio.TimerHandle | None = None
        self._count = 0
        self._keys: list[str] = []

    def note(self, update: StatusUpdate, reason: str) -> None:
        log.debug("Status update of %s failed after %d attempt(s): %s; last error: %s",
                  update.key, update.attempts, reason, update.last_error)
        if self._window is None:
            log.error("Status update of %s to the %s topic failed after %d attempt(s): %s; last error: %s. Further "
                      "failures are summed up in one line per %.0f s", update.key, self._name, update.attempts,
                      reason, update.last_error, self._interval)
            self._window = asyncio.get_running_loop().call_later(self._interval, self._close)
            return
        self._count += 1
        if len(self._keys) < 5:
            self._keys.append(update.key)

    def _close(self) -> None:
        if not self._count:
            self._window = None
            return
        log.error("%d more status update(s) to the %s topic failed in the last %.0f s, e.g. %s", self._count,
                  self._name, self._interval, ", ".join(self._keys))
        self._count, self._keys = 0, []
        self._window = asyncio.get_running_loop().call_later(self._interval, self._close)
