"""Virtual time for an asyncio program with no real I/O: an event loop whose clock jumps to its next timer instead
of sleeping, so minutes of simulated time take seconds and every run with the same seed gives the same figures.

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        runner.run(simulate())

The loop's clock starts at 0 and moves only when nothing is ready to run, by exactly the wait the loop asked its
selector for (its earliest timer); a loop that would wait for nothing (no timer set, nothing ready) raises instead of
hanging. Only what never waits on a socket or a thread can run on it: a simulation of a broker that answers on timers
(bench/fleet.py), not a real client.
"""

from __future__ import annotations

import asyncio
import selectors


class _JumpingSelector(selectors.DefaultSelector):
    """Instead of waiting ``timeout`` seconds for I/O (there is none), move the loop's clock on by it."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("the simulation waits for nothing that can happen (no timer is set)")
        self._loop.virtual_now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose clock only moves when nothing is ready to run."""

    def __init__(self) -> None:
        self.virtual_now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.virtual_now
