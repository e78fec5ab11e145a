"""When a key may be tried again after a failure, outside a held partition (per-update retries). It owns which
updates have used their leader-change retry, and the places in the retry budget's floor.

- **Per-update retries** (``RetryMode.PER_UPDATE``, the engine before partitions were held): each key
  backs off on its own clock (``backoff.py``); a newer value takes over the waiting retry's place in
  time. Retry times move to a 100 ms tick where the policy's bounds allow (``scheduler.py``), so retries
  of many keys share Produce requests. An optional retry budget (``budget.py``) holds retries back while
  most attempts fail.
- **A leader change** is retried once at once (KIP-951), later retries back off.
"""

from __future__ import annotations

from ..errors import ErrorKind
from .holds import Slot
from .scheduler import Ticks
from .updates import RetryPolicy, StatusUpdate


class RetryTiming:
    """The time of a key's next retry: its backoff step on the tick, at once after a leader change, or later
    when the retry budget refuses it."""

    def __init__(self, policy: RetryPolicy, ticks: Ticks) -> None:
        self._policy = policy
        self._ticks = ticks
        # Retries the budget refused (each delayed by a backoff step, none dropped).
        self.throttled_total = 0
        # By update number: the updates whose one retry at once after a leader change is used up, and the place in
        # the retry budget's floor of a retry held back (when it may go whatever the bucket holds).
        self._leader_retried: set[int] = set()
        self._floor: dict[int, float] = {}

    def leader_retry_left(self, update: StatusUpdate) -> bool:
        """Whether the update's one retry at once after a leader change is not used up yet."""
        return update.number not in self._leader_retried

    def forget(self, update: StatusUpdate) -> None:
        """The update has settled: nothing of it is kept."""
        if self._leader_retried:
            self._leader_retried.discard(update.number)
        if self._floor:
            self._floor.pop(update.number, None)

    def due(self, slot: Slot, update: StatusUpdate, kind: ErrorKind) -> float:
        """When the key may be tried again after its latest failure."""
        if kind is ErrorKind.LEADER_CHANGE and update.number not in self._leader_retried:
            # KIP-951: the new leader is known or about to be; waiting would only add latency.
            self._leader_retried.add(update.number)
            return self._ticks.now()
        return self._ticks.aligned(self._policy.backoff, slot.streak - 1)

    def refused(self, slot: Slot, update: StatusUpdate) -> float | None:
        """Ask the budget whether a retry may go now: None if it may, else when it may try again. A refused retry
        takes a place in the floor's line (once) and waits for the key's next backoff step or its place, whichever
        comes first, at least until the next tick, without using up one of its retries."""
        budget = self._policy.budget
        if budget is None:
            return None
        now = self._ticks.now()
        floor = self._floor.get(update.number)
        if (floor is not None and now >= floor) or budget.admit():
            self._floor.pop(update.number, None)
            return None
        self.throttled_total += 1
        if floor is None:
            floor = self._floor[update.number] = budget.floor_slot(now)
        # The key backs off as if the retry had failed, but keeps its retries: a refusal costs the
        # broker nothing, and a key refused again and again is reconsidered about once per max backoff.
        slot.failed()
        # Never sooner than the next tick (full jitter may draw no wait at all).
        return max(min(self.due(slot, update, ErrorKind.RETRIABLE), floor), self._ticks.next_tick(now))
