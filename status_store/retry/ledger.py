"""The retry queue's ledger: every update from its submission to its outcome. It owns the updates' numbers
(submission order), the unsettled ones (the oldest found fast) and the failure log; what the listeners and the
update's handle are to hear of it (the outcome, the events) it leaves as effects (``commands.Settle``, ``Notify``) that
the queue applies after the step, in order.

- **Failures are logged without flooding**: the first of a burst at once, then one line per interval, and the
  last one when the engine closes (a stopping process would end before the interval).
"""

from __future__ import annotations

import itertools
import logging

from ..connect.model import new_tuple
from .commands import Effect, Notify, Settle
from .delivery import Delivery
from .scheduler import LogWindow, Windows
from .updates import Outcome, Result, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")

# Failures after the first of a burst are summed up in one line this often.
FAILURE_SUMMARY_S = 60.0


class Ledger:
    """Numbers updates and settles them; what the listeners, the handles and the flushes are to hear of it waits in
    its effects for the queue (``take_effects``)."""

    def __init__(self, name: str, windows: Windows) -> None:
        self.name = name
        self._numbers = itertools.count(1)
        # Unsettled updates by number, and a pointer that only moves forward to the oldest of them
        # (a dict's first key is slow to find after many removals from its front).
        self._unsettled: dict[int, StatusUpdate] = {}
        self._oldest = 1
        self._failures = _FailureLog(name, windows)
        # The outcomes and events decided since the queue last took them, in order.
        self._effects: list[Effect] = []

    def take_effects(self) -> list[Effect]:
        """The outcomes and events to apply, in order, since the last call."""
        effects, self._effects = self._effects, []
        return effects

    def admit(self, update: StatusUpdate, now: float) -> None:
        """A new update: its number (submission order) and submission time; unsettled until ``finish``; the
        listeners hear of it."""
        update.admitted(next(self._numbers), now)
        self._unsettled[update.number] = update
        self._effects.append(Notify("on_submitted", (update,)))

    def mark(self) -> int:
        """A number after every update's so far (a flush waits until every update numbered before it is settled)."""
        return next(self._numbers)

    def finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None,
               stopped: bool = False, parked: bool = False) -> None:
        """Settle the update (once: later calls do nothing); its handle and the listeners hear of it after the step
        (``Settle``)."""
        if update.number not in self._unsettled:
            return
        outcome = new_tuple(Outcome, (update.key, result, update.attempts, reason, delivery, update.last_error,
                                       stopped, parked))
        del self._unsettled[update.number]
        if result is Result.FAILED and not stopped:
            self._failures.note(update, reason)
        self._effects.append(Settle(update, outcome))

    def settled(self, update: StatusUpdate) -> bool:
        """Whether the update has its outcome (in the engine's eyes: its handle hears of it after the step)."""
        return update.number not in self._unsettled

    def notify(self, event: str, *args: object) -> None:
        """The listeners are to hear of this event (after the step)."""
        self._effects.append(Notify(event, args))

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet."""
        return len(self._unsettled)

    def unsettled_updates(self) -> list[StatusUpdate]:
        """The updates without an outcome yet, oldest first."""
        return list(self._unsettled.values())

    def oldest_unsettled_age(self, now: float) -> float:
        """Seconds since the oldest update without an outcome was submitted, at ``now`` (0 when none)."""
        number = self.oldest_unsettled()
        if number is None:
            return 0.0
        return now - self._unsettled[number].submitted_at

    def window_closed(self, closes: float, window: LogWindow) -> None:
        """A summary line's window closed (the failure log's, if it is that one)."""
        self._failures.window_closed(closes, window)

    def close(self) -> None:
        """The engine closed: the failures summed up so far are logged now, not at their window's end (a stopping
        process ends first)."""
        self._failures.sum_up_now()

    def oldest_unsettled(self) -> int | None:
        """The number of the oldest update without an outcome (None when none)."""
        if not self._unsettled:
            return None
        while self._oldest not in self._unsettled:
            self._oldest += 1
        return self._oldest


class _FailureLog:
    """Failed updates, logged without flooding: the first of a burst at once at ERROR, then at most one line per
    interval with how many more failed and a few of their keys; every one at DEBUG."""

    def __init__(self, name: str, windows: Windows, interval: float = FAILURE_SUMMARY_S) -> None:
        self._name = name
        self._windows = windows
        self._interval = interval
        # The summary line's window on the scheduler, and when it closes (None: no burst is being summed up).
        self._window = LogWindow()
        self._closes: float | None = None
        self._count = 0
        self._keys: list[str] = []

    def note(self, update: StatusUpdate, reason: str) -> None:
        log.debug("Status update of %s failed after %d attempt(s): %s; last error: %s",
                  update.key, update.attempts, reason, update.last_error)
        if self._closes is None:
            log.error("Status update of %s to the %s topic failed after %d attempt(s): %s; last error: %s. Further "
                      "failures are summed up in one line per %.0f s", update.key, self._name, update.attempts,
                      reason, update.last_error, self._interval)
            self._open()
            return
        self._count += 1
        if len(self._keys) < 5:
            self._keys.append(update.key)

    def _open(self) -> None:
        self._closes = self._windows.now() + self._interval
        self._windows.open_window(self._closes, self._window)

    def window_closed(self, closes: float, window: LogWindow) -> None:
        """The window closed: the failures since its first are summed up in one line, and the next window opens;
        none failed, the next failure is logged at once again."""
        if window is not self._window or closes != self._closes:
            return
        if not self._count:
            self._closes = None
            return
        self._sum_up(self._interval)
        self._open()

    def sum_up_now(self) -> None:
        """The failures since the window's first are summed up in one line now; the next failure is logged at once
        again (the window's end logs nothing)."""
        if self._closes is None:
            return
        if self._count:
            self._sum_up(self._windows.now() - (self._closes - self._interval))
        self._closes = None

    def _sum_up(self, seconds: float) -> None:
        log.error("%d more status update(s) to the %s topic failed in the last %.3g s, e.g. %s", self._count,
                  self._name, seconds, ", ".join(self._keys))
        self._count, self._keys = 0, []
