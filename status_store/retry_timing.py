"""When a key may be tried again after a failure, outside a held partition (per-update retries). It owns each
update's leader-change retry and its place in the retry budget's floor.

- **Per-update retries** (``RetryMode.PER_UPDATE``, the engine before partitions were held): each key
  backs off on its own clock (``backoff.py``); a newer value takes over the waiting retry's place in
  time. Retry times move to a 100 ms tick where the policy's bounds allow (``scheduler.py``), so retries
  of many keys share Produce requests. An optional retry budget (``budget.py``) holds retries back while
  most attempts fail.
- **A leader change** is retried once at once (KIP-951), later retries back off.
"""

from __future__ import annotations

from .errors import ErrorKind
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

    @staticmethod
    def leader_retry_left(update: StatusUpdate) -> bool:
        """Whether the update's one retry at once after a leader change is not used up yet."""
        return not update._leader_retried

    def due(self, slot: Slot, update: StatusUpdate, kind: ErrorKind) -> float:
        """When the key may be tried again after its latest failure."""
        if kind is ErrorKind.LEADER_CHANGE and not update._leader_retried:
            # KIP-951: the new leader is known or about to be; waiting would only add latency.
            update._leader_retried = True
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
        if (update._floor_slot is not None and now >= update._floor_slot) or budget.admit():
            update._floor_slot = None
            return None
        self.throttled_total += 1
        if update._floor_slot is None:
            update._floor_slot = budget.floor_slot(now)
        # The key backs off as if the retry had failed, but keeps its retries: a refusal costs the
        # broker nothing, and a key refused again and again is reconsidered about once per max backoff.
        slot.streak += 1
        # Never sooner than the next tick (full jitter may draw no wait at all).
        return max(min(self.due(slot, update, ErrorKind.RETRIABLE), update._floor_slot),
                   self._ticks.next_tick(now))
