"""The retry engine's timers: one heap for every retry, probe and release batch, the windows of its summary lines,
the time of the event being handled, and the tick retries and probes are moved to where their backoff's bounds
allow.

Why one heap and not a sleeping coroutine per retry (tenacity, Connect's immediate resend)? One heap costs a few
hundred bytes per pending update, and its owner sees every update of a key, and of a partition, at once.

It has no clock and arms no timer: every event handed to the engine carries its time (``Ticks.at``), the engine pops
what is due at that time (``pop``) and says when it next wants to be woken (``wake``); the queue keeps the one loop
timer. It knows nothing of Kafka, keys or partitions: it holds ``(due, order, item)`` entries and hands them back in
time order (``order`` breaks ties). An entry is never taken out early: the owner skips one that no longer stands
(superseded, rescheduled or sent) when it comes due, which is cheaper than finding it in the heap.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Generic, Protocol, TypeVar

from .backoff import Backoff

# Retry and probe times are moved to this tick where the backoff policy's bounds allow it (see ``aligned``).
RETRY_TICK_S = 0.1

Item = TypeVar("Item")


class Ticks:
    """The time of the event being handled (every event gives it: the engine's parts read it here, never a clock),
    and the tick that retries and probes are moved to."""

    def __init__(self) -> None:
        self._now = 0.0

    def at(self, now: float) -> None:
        """An event came at ``now`` (the queue's clock): the engine's parts see this time until the next event."""
        self._now = now

    def now(self) -> float:
        """The time of the event being handled."""
        return self._now

    def aligned(self, backoff: Backoff, retry: int) -> float:
        """A backoff's delay from now, moved to a common tick where the policy's bounds allow it, so that the
        retries and probes of many keys and partitions leave together (and share Produce requests)."""
        now = self._now
        due = now + backoff.delay(retry)
        earlier = math.floor(due / RETRY_TICK_S) * RETRY_TICK_S
        if earlier >= now + backoff.shortest(retry):
            return earlier
        later = earlier + RETRY_TICK_S
        return later if later <= now + backoff.longest(retry) else due

    @staticmethod
    def next_tick(now: float) -> float:
        """The first tick after ``now``."""
        return (math.floor(now / RETRY_TICK_S) + 1) * RETRY_TICK_S


class LogWindow:
    """The window of a summary line (the ledger's failures, the gate's held partitions) on the scheduler: its owner
    keeps when the window closes and logs then; an entry whose time its owner no longer keeps is skipped."""

    __slots__ = ()


class Windows(Protocol):
    """What an owner of a summary line needs of the scheduler."""

    def now(self) -> float:
        """The time of the event being handled."""
        ...

    def open_window(self, closes: float, window: LogWindow) -> None:
        """Hand ``window`` back when ``closes`` comes."""
        ...


class Scheduler(Ticks, Generic[Item]):
    """The timer heap: items due at clock times, each handed back (``pop``) once its time has come, and the summary
    lines' windows beside them. ``pause`` (the queue stops) holds the items back until the next push; closed, it
    hands back no item more (the windows still close: the last summary line is still logged)."""

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[float, int, Item]] = []
        self._windows: list[tuple[float, int, LogWindow]] = []
        self._window_order = itertools.count()
        self.paused = False
        self.closed = False

    def push(self, due: float, order: int, item: Item) -> None:
        """Hand ``item`` back at ``due`` (after the items due earlier, and those due then of lower ``order``); ends a
        pause (the earliest item is due again, whenever it was pushed)."""
        if self.closed:
            return
        heapq.heappush(self._heap, (due, order, item))
        self.paused = False

    def open_window(self, closes: float, window: LogWindow) -> None:
        """Hand ``window`` back (``pop_window``) when ``closes`` comes; paused or closed, still."""
        heapq.heappush(self._windows, (closes, next(self._window_order), window))

    def pause(self) -> None:
        """Hand no item back until the next push (which makes the earliest item due again)."""
        self.paused = True

    def close(self) -> None:
        """Hand no item back any more, and forget every item."""
        self.closed = True
        self._heap.clear()

    def wake(self) -> float | None:
        """When the next item or window is due (None when none is, or the items are paused and no window is open)."""
        heap, windows = self._heap, self._windows
        due = heap[0][0] if heap and not self.paused else None
        if windows and (due is None or windows[0][0] < due):
            return windows[0][0]
        return due

    def pop(self, now: float) -> tuple[float, Item] | None:
        """The earliest item due at ``now`` (not paused), with the time it was pushed for; None when none is."""
        heap = self._heap
        if self.paused or not heap or heap[0][0] > now:
            return None
        due, _, item = heapq.heappop(heap)
        return due, item

    def pop_window(self, now: float) -> tuple[float, LogWindow] | None:
        """The earliest window closed at ``now``, with the time it was opened to close at; None when none is."""
        windows = self._windows
        if not windows or windows[0][0] > now:
            return None
        closes, _, window = heapq.heappop(windows)
        return closes, window
