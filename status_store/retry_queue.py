"""The retry queue: one scheduler on the event loop for every status write and its retries.

Why not a sleeping coroutine per retry (tenacity, Connect's immediate resend)? One timer heap costs
a few hundred bytes per pending update, and it can see every update of a key at once:

- **Per-key coalescing.** A key has at most one write in flight and at most one waiting. A newer
  write for the key supersedes the waiting one (counted as superseded, not failed), and is held
  until the write in flight settles, so an older value is never written after a newer one. The
  backoff belongs to the key: a newer value takes over the waiting retry's place in time, so a
  key that keeps changing during an outage costs the broker no more attempts than a quiet one.
- **Bounded retries** (KIP-1278): backoff from a policy in ``backoff.py``, at most ``max_retries``
  retries and, optionally, a total time bound per update (in the spirit of KIP-572). Retry times
  move to a 100 ms tick where the policy's bounds allow, so retries of many keys share Produce
  requests.
- **Error classes** from ``errors.classify``: fatal errors are not retried; a leader change is
  retried once at once (KIP-951), later retries back off.
- **An optional retry budget** (``budget.py``): while most attempts fail, a retry that the budget
  refuses waits for the key's next backoff step, without using up one of its retries; refusals are
  counted in ``throttled_total``. First attempts are never refused.
- **Abandonment** (Connect's rules): before each retry the owner of the update may abandon it
  (key deleted, generation changed, a safe write no longer safe).
- **Never blocks the caller.** ``submit`` returns at once; ``StatusUpdate.result()`` awaits the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from .backoff import Backoff
from .budget import RetryBudget
from .errors import ErrorKind, StoreClosedError, WriteFailedError, classify
from .kafka_log import Delivery, DoneCallback

log = logging.getLogger(__name__)

# Retry times are moved to this tick where the backoff policy's bounds allow it (see RetryQueue._due).
RETRY_TICK_S = 0.1

# send(key, value, done): hand a record to Kafka; done(delivery, error) runs on the loop when it settles.
Send = Callable[[bytes, bytes | None, DoneCallback], None]


class Result(enum.StrEnum):
    """How an update ended."""

    WRITTEN = "written"
    FAILED = "failed"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of one status update."""

    key: str
    result: Result
    attempts: int
    reason: str
    delivery: Delivery | None = None
    error: WriteFailedError | None = None
    # Failed only because the store stopped first: not settled in Kafka's eyes either way.
    stopped: bool = False

    @property
    def ok(self) -> bool:
        """True when this value is durable in Kafka."""
        return self.result is Result.WRITTEN


class StatusUpdate:
    """One submitted write: its key and value, its attempts so far, and, once settled, its outcome."""

    __slots__ = ("_future", "abandon", "attempts", "deadline", "due", "floor_slot", "key", "kind", "last_error",
                 "leader_retried", "number", "outcome", "retries", "safe", "submitted_at", "value")

    def __init__(self, key: str, value: bytes | None, kind: str,
                 abandon: Callable[[bool], str | None] | None = None, safe: bool = False) -> None:
        self.key, self.value, self.kind, self.abandon, self.safe = key, value, kind, abandon, safe
        self.attempts = 0
        self.retries = 0
        self.leader_retried = False
        self.number = 0
        self.submitted_at = 0.0
        self.deadline: float | None = None
        # When the update waits: the loop time of its next attempt, or None while held behind a write in flight.
        self.due: float | None = None
        self.last_error: WriteFailedError | None = None
        # The retry budget's floor: when this retry, held back, may go whatever the bucket holds.
        self.floor_slot: float | None = None
        self.outcome: Outcome | None = None
        self._future: asyncio.Future[Outcome] | None = None

    def done(self) -> bool:
        """True once the update has an outcome."""
        return self.outcome is not None

    async def result(self, timeout: float | None = None) -> Outcome:
        """Wait for the outcome (it never raises for a failed write: see ``Outcome.result``)."""
        if self.outcome is not None:
            return self.outcome
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return await asyncio.wait_for(asyncio.shield(self._future), timeout)

    def _finish(self, outcome: Outcome) -> None:
        self.outcome = outcome
        if self._future is not None and not self._future.done():
            self._future.set_result(outcome)

    def __repr__(self) -> str:
        return f"StatusUpdate({self.key!r}, attempts={self.attempts}, outcome={self.outcome})"


class RetryListener(Protocol):
    """Receives the queue's events (metrics, history); must be quick and must not raise. A class that
    subclasses it keeps these do-nothing methods for the events it does not care about."""

    def on_submitted(self, update: StatusUpdate) -> None:
        """An update was submitted."""
        return None

    def on_retry(self, update: StatusUpdate) -> None:
        """An update is about to be sent again."""
        return None

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        """An update has its outcome."""
        return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to retry: the backoff, the retry limit, the optional total time bound (seconds) and the
    optional retry budget shared by every key of the queue."""

    backoff: Backoff
    max_retries: int
    timeout: float | None = None
    budget: RetryBudget | None = None


class _Slot:
    """The updates of one key: at most one in flight and one waiting, and the key's failure streak.

    The backoff follows the key, not the update: a newer value that supersedes a waiting retry takes
    over its place in time, so a key that keeps changing during an outage is not retried any faster.
    """

    __slots__ = ("inflight", "streak", "waiting")

    def __init__(self) -> None:
        self.inflight: StatusUpdate | None = None
        self.waiting: StatusUpdate | None = None
        # Retriable failures of this key since its last success.
        self.streak = 0


class RetryQueue:
    """Schedules every attempt of every status write on one event loop."""

    def __init__(self, send: Send, policy: RetryPolicy, listeners: Sequence[RetryListener] = ()) -> None:
        self._send = send
        self.policy = policy
        self._listeners = tuple(listeners)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: dict[str, _Slot] = {}
        self._heap: list[tuple[float, int, StatusUpdate]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._numbers = itertools.count(1)
        # Unsettled updates by number, and a pointer that only moves forward to the oldest of them
        # (a dict's first key is slow to find after many removals from its front).
        self._unsettled: dict[int, StatusUpdate] = {}
        self._oldest = 1
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self.attempts_total = 0
        # Retries the budget refused (each delayed by a backoff step, none dropped).
        self.throttled_total = 0
        # Stopping: no new submissions. Closed: nothing is sent any more.
        self._stopped = False
        self._closed = False

    # ----------------------------------------------------------------------------- submitting

    def submit(self, update: StatusUpdate) -> StatusUpdate:
        """Take an update; it is sent now, or held behind the key's write in flight. Never blocks."""
        if self._stopped:
            raise StoreClosedError("the store is stopped")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        update.number = next(self._numbers)
        update.submitted_at = now = loop.time()
        if self.policy.timeout is not None:
            update.deadline = now + self.policy.timeout
        self._unsettled[update.number] = update
        for listener in self._listeners:
            listener.on_submitted(update)
        slot = self._slots.get(update.key)
        if slot is None:
            slot = self._slots[update.key] = _Slot()
        replaced = slot.waiting
        if replaced is not None:
            self._finish(replaced, Result.SUPERSEDED, "a newer write for the key was submitted")
        if replaced is not None and replaced.due is not None:
            self._schedule(slot, update, replaced.due)  # the newer value keeps the key's place in time
        elif slot.inflight is None:
            slot.waiting = None
            self._attempt(slot, update)
        else:
            update.due = None
            slot.waiting = update
        return update

    def _attempt(self, slot: _Slot, update: StatusUpdate) -> None:
        slot.inflight = update
        update.attempts += 1
        self.attempts_total += 1
        update.due = None
        budget = self.policy.budget
        if budget is not None:
            budget.sent(update.attempts > 1)
        try:
            self._send(update.key.encode(), update.value, functools.partial(self._settled, slot, update))
        except StoreClosedError as e:
            if budget is not None:
                budget.settled(update.attempts > 1, None)
            slot.inflight = None
            self._finish(update, Result.FAILED, f"not sent: {e}")

    # ----------------------------------------------------------------------------- settling

    def _settled(self, slot: _Slot, update: StatusUpdate, delivery: Delivery | None,
                 error: WriteFailedError | None) -> None:
        if slot.inflight is update:
            slot.inflight = None
        budget = self.policy.budget
        if budget is not None:
            written = True if error is None else (None if classify(error.code) is ErrorKind.FATAL else False)
            budget.settled(update.attempts > 1, written)
        if update.outcome is None:
            if error is None:
                slot.streak = 0
                self._finish(update, Result.WRITTEN, "written", delivery)
            else:
                update.last_error = error
                self._after_failure(slot, update, error)
        self._advance(slot, update.key)

    def _after_failure(self, slot: _Slot, update: StatusUpdate, error: WriteFailedError) -> None:
        kind = classify(error.code)
        if kind is ErrorKind.FATAL:
            # Failed for good, even with a newer value held: that one is sent next (_advance).
            self._finish(update, Result.FAILED, f"{error.name} is not retriable")
            return
        slot.streak += 1
        newer = slot.waiting
        if newer is not None:
            # A newer value was held behind this attempt: it replaces this one, after the key's backoff.
            self._finish(update, Result.SUPERSEDED, "a newer write for the key was submitted")
            self._schedule(slot, newer, self._due(slot, newer, kind))
            return
        reason = update.abandon(True) if update.abandon is not None else None
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            return
        if update.retries >= self.policy.max_retries:
            self._finish(update, Result.FAILED, f"no retries left after {update.attempts} attempt(s)")
            return
        due = self._due(slot, update, kind)
        if update.deadline is not None and due > update.deadline:
            self._finish(update, Result.FAILED,
                         f"the next attempt would pass the {self.policy.timeout:g} s bound of "
                         "status.storage.retry.timeout.ms")
            return
        update.retries += 1
        self._schedule(slot, update, due)

    def _due(self, slot: _Slot, update: StatusUpdate, kind: ErrorKind) -> float:
        """When the key may be tried again after its latest failure."""
        if kind is ErrorKind.LEADER_CHANGE and not update.leader_retried:
            # KIP-951: the new leader is known or about to be; waiting would only add latency.
            update.leader_retried = True
            return self._now()
        now, backoff, retry = self._now(), self.policy.backoff, slot.streak - 1
        due = now + backoff.delay(retry)
        # Retries of many keys leave together (and share Produce requests) when their times fall on a
        # common tick: the tick before or after the drawn time, if it is inside the policy's bounds.
        earlier = math.floor(due / RETRY_TICK_S) * RETRY_TICK_S
        if earlier >= now + backoff.shortest(retry):
            return earlier
        later = earlier + RETRY_TICK_S
        return later if later <= now + backoff.longest(retry) else due

    def _now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    def _schedule(self, slot: _Slot, update: StatusUpdate, due: float) -> None:
        if update.deadline is not None:
            # An update not yet tried gets its one attempt at its bound at the latest.
            due = min(due, update.deadline)
        update.due = due
        slot.waiting = update
        heapq.heappush(self._heap, (due, update.number, update))
        self._arm()

    def _advance(self, slot: _Slot, key: str) -> None:
        """Send a held update once the key has nothing in flight; forget idle keys."""
        if self._closed:
            return
        waiting = slot.waiting
        if slot.inflight is None and waiting is not None and waiting.due is None:
            self._send_now(slot, waiting)
        if slot.inflight is None and slot.waiting is None and self._slots.get(key) is slot:
            del self._slots[key]

    def _finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None,
                stopped: bool = False) -> None:
        if update.outcome is not None:
            return
        outcome = Outcome(update.key, result, update.attempts, reason, delivery, update.last_error, stopped)
        update._finish(outcome)
        self._unsettled.pop(update.number, None)
        if result is Result.FAILED:
            log.error("Status update of %s failed after %d attempt(s): %s; last error: %s",
                      update.key, update.attempts, reason, update.last_error)
        for listener in self._listeners:
            listener.on_finished(update, outcome)
        if self._flushes:
            self._release_flushes()

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
        assert self._loop is not None
        now = self._loop.time()
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, update = heapq.heappop(heap)
            slot = self._slots.get(update.key)
            # Entries of superseded or rescheduled updates are left in the heap and skipped here.
            if slot is None or slot.waiting is not update or update.due != due:
                continue
            self._send_now(slot, update)
        self._arm()

    def _send_now(self, slot: _Slot, update: StatusUpdate, budgeted: bool = True) -> None:
        """Send a waiting update now, unless its owner abandons it (Connect's rules: on a retry, the key
        deleted or the generation moved on; always, a safe write no longer safe), its bound has passed,
        or (``budgeted``) the retry budget holds the retry back."""
        slot.waiting = None
        retry = update.attempts > 0
        reason = update.abandon(retry) if update.abandon is not None else None
        if reason is not None:
            self._finish(update, Result.SUPERSEDED, reason)
            self._advance(slot, update.key)
        elif update.deadline is not None and self._now() > update.deadline:
            self._finish(update, Result.FAILED, f"the {self.policy.timeout:g} s bound of "
                                                "status.storage.retry.timeout.ms passed")
            self._advance(slot, update.key)
        elif retry and budgeted and not self._admitted(slot, update):
            return
        else:
            if retry:
                for listener in self._listeners:
                    listener.on_retry(update)
            self._attempt(slot, update)

    def _admitted(self, slot: _Slot, update: StatusUpdate) -> bool:
        """Ask the budget. A refused retry takes a place in the floor's line (once) and waits for the key's
        next backoff step or its place, whichever comes first, at least until the next tick, without
        using up one of its retries. Its time bound still ends it, as a failure."""
        budget = self.policy.budget
        if budget is None:
            return True
        now = self._now()
        if (update.floor_slot is not None and now >= update.floor_slot) or budget.admit():
            update.floor_slot = None
            return True
        self.throttled_total += 1
        if update.floor_slot is None:
            update.floor_slot = budget.floor_slot(now)
        # The key backs off as if the retry had failed, but keeps its retries: a refusal costs the
        # broker nothing, and a key refused again and again is reconsidered about once per max backoff.
        slot.streak += 1
        # Never sooner than the next tick (full jitter may draw no wait at all).
        next_tick = (math.floor(now / RETRY_TICK_S) + 1) * RETRY_TICK_S
        due = max(min(self._due(slot, update, ErrorKind.RETRIABLE), update.floor_slot), next_tick)
        if update.deadline is not None and due > update.deadline:
            self._finish(update, Result.FAILED,
                         f"held back by the retry budget until the next attempt would pass the "
                         f"{self.policy.timeout:g} s bound of status.storage.retry.timeout.ms")
            self._advance(slot, update.key)
        else:
            self._schedule(slot, update, due)
        return False

    # ----------------------------------------------------------------------------- observing

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet (in flight, held, or waiting for a retry)."""
        return len(self._unsettled)

    def waiting_retries(self) -> list[StatusUpdate]:
        """Updates waiting for their next attempt, soonest first."""
        return sorted(self._waiting(), key=lambda u: u.due or 0.0)

    @property
    def waiting_count(self) -> int:
        """How many updates wait for their next attempt (no sorting: cheap enough for every scrape)."""
        return sum(1 for _ in self._waiting())

    def _waiting(self) -> Iterator[StatusUpdate]:
        for slot in self._slots.values():
            if slot.waiting is not None and slot.waiting.due is not None:
                yield slot.waiting

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
        oldest = self._oldest_unsettled()
        waiting = []
        for mark, future in self._flushes:
            if oldest is None or oldest >= mark:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((mark, future))
        self._flushes = waiting

    async def stop(self, timeout: float) -> list[StatusUpdate]:
        """Send what waits for a retry once more, wait at most ``timeout`` s for every outcome, then fail
        what is left. Returns the updates that failed because the store stopped; never waits longer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for slot in list(self._slots.values()):
            waiting = slot.waiting
            if waiting is not None and waiting.due is not None and slot.inflight is None:
                # One last attempt each, bounded by the number of keys: the budget would only turn
                # these into failures.
                self._send_now(slot, waiting, budgeted=False)
        self._stopped = True
        with contextlib.suppress(TimeoutError):
            await self.flush(timeout)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        lost = list(self._unsettled.values())
        for update in lost:
            self._finish(update, Result.FAILED, "the store stopped before the write was durable", stopped=True)
        self._heap.clear()
        self._slots.clear()
        return lost
