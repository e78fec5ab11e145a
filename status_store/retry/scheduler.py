"""The retry queue's scheduler: one timer heap on a clock for every retry, probe and release batch, and the tick
they are moved to where their backoff's bounds allow.

Why one heap and not a sleeping coroutine per retry (tenacity, Connect's immediate resend)? One heap costs a few
hundred bytes per pending update, and its owner sees every update of a key, and of a partition, at once.

It knows nothing of Kafka, keys or partitions: it holds ``(due, order, item)`` entries and hands each item that
comes due to its owner's callback, in time order (``order`` breaks ties). An entry is never taken out early: the
owner skips one that no longer stands (superseded, rescheduled or sent) when it comes due, which is cheaper than
finding it in the heap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .backoff import Backoff

# Retry and probe times are moved to this tick where the backoff policy's bounds allow it (see ``aligned``).
RETRY_TICK_S = 0.1

Item = TypeVar("Item")


class Timer(Protocol):
    """A callback scheduled on a clock (``asyncio.TimerHandle`` is one)."""

    def when(self) -> float:
        """The clock time it is due."""
        ...

    def cancel(self) -> None:
        """Do not call it."""
        ...


class Clock(Protocol):
    """What the retry queue needs of the event loop (``asyncio.AbstractEventLoop`` is one; a test may drive a
    queue on a clock of its own, with no event loop)."""

    def time(self) -> float:
        """Now, in seconds (monotonic)."""
        ...

    def call_at(self, when: float, callback: Callable[[], object], /) -> Timer:
        """Call ``callback`` at ``when`` (clock time)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], object], /) -> Timer:
        """Call ``callback`` in ``delay`` seconds."""
        ...


class Ticks:
    """The clock (None until ``start`` gives one: the event loop of the first submission), and the tick that
    retries and probes are moved to."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock

    def start(self, clock: Clock) -> Clock:
        """Run on this clock from now on (once); returns it."""
        self.clock = clock
        return clock

    def now(self) -> float:
        """The clock's time (the clock has started)."""
        assert self.clock is not None
        return self.clock.time()

    def aligned(self, backoff: Backoff, retry: int) -> float:
        """A backoff's delay from now, moved to a common tick where the policy's bounds allow it, so that the
        retries and probes of many keys and partitions leave together (and share Produce requests)."""
        now = self.now()
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


class Scheduler(Ticks, Generic[Item]):
    """The timer heap on the clock: items due at clock times, one timer armed for the earliest, each handed to
    ``fire`` with the time it was pushed for once that time has come. Closed, it fires nothing more."""

    def __init__(self, fire: Callable[[float, Item], None], clock: Clock | None = None) -> None:
        super().__init__(clock)
        self._fire_item = fire
        self._heap: list[tuple[float, int, Item]] = []
        self._timer: Timer | None = None
        self.closed = False

    def push(self, due: float, order: int, item: Item) -> None:
        """Hand ``item`` to ``fire`` at ``due`` (after the items due earlier, and those due then of lower
        ``order``)."""
        heapq.heappush(self._heap, (due, order, item))
        self._arm()

    def pause(self) -> None:
        """Cancel the armed timer; the next push arms it again (for the earliest item)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Fire nothing more, and forget every item."""
        self.closed = True
        self.pause()
        self._heap.clear()

    def _arm(self) -> None:
        if not self._heap or self.clock is None or self.closed:
            return
        due = self._heap[0][0]
        if self._timer is not None:
            if self._timer.when() <= due:
                return
            self._timer.cancel()
        self._timer = self.clock.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.closed:
            return
        now = self.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, item = heapq.heappop(heap)
            self._fire_item(due, item)
        self._arm()
