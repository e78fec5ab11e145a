"""The retry queue's ledger: every update from its submission to its outcome. It owns the updates' numbers
(submission order), the unsettled ones (the oldest found fast), the listeners' handlers, the failure log and the
flush barriers.

- **A listener never breaks the queue.** An exception in a listener is logged once per cause, counted
  in ``listener_errors``, and the update settles and its key moves on as if nothing happened.
- **Failures are logged without flooding**: the first of a burst at once, then one line per interval.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from collections.abc import Callable, Sequence

from ..connect.model import new_tuple
from .delivery import Delivery
from .scheduler import LogWindow, Windows
from .updates import Outcome, Result, RetryListener, StatusUpdate

# The retry queue's parts all log under its name (what an operator's logging configuration names).
log = logging.getLogger("status_store.retry.queue")

# Failures after the first of a burst are summed up in one line this often.
FAILURE_SUMMARY_S = 60.0

EVENTS = ("on_submitted", "on_retry", "on_finished", "on_unparked")


class Ledger:
    """Numbers updates, settles them (telling the listeners), and releases the flushes waiting for them."""

    def __init__(self, name: str, listeners: Sequence[RetryListener], windows: Windows) -> None:
        self.name = name
        # Per event, the listeners' handlers, found once; a handler inherited from RetryListener does nothing
        # and is left out (every write passes through on_submitted and on_finished).
        self._handlers = {event: _handlers(listeners, event) for event in EVENTS}
        self._numbers = itertools.count(1)
        # Unsettled updates by number, and a pointer that only moves forward to the oldest of them
        # (a dict's first key is slow to find after many removals from its front).
        self._unsettled: dict[int, StatusUpdate] = {}
        self._oldest = 1
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self._flush_check_scheduled = False
        # Exceptions raised by listeners, by listener class name.
        self.listener_errors: collections.Counter[str] = collections.Counter()
        self._logged_causes: set[tuple[str, str]] = set()
        self._failures = _FailureLog(name, windows)

    def subscribe(self, listener: RetryListener) -> None:
        """Tell ``listener`` of every event from now on, after the listeners before it."""
        for event in EVENTS:
            self._handlers[event] += _handlers((listener,), event)

    def admit(self, update: StatusUpdate, now: float) -> None:
        """A new update: its number (submission order) and submission time; unsettled until ``finish``; the
        listeners hear of it."""
        update.number = next(self._numbers)
        update.submitted_at = now
        self._unsettled[update.number] = update
        self.notify("on_submitted", update)

    def finish(self, update: StatusUpdate, result: Result, reason: str, delivery: Delivery | None = None,
               stopped: bool = False) -> None:
        """Settle the update (once: later calls do nothing) and tell the listeners."""
        if update.outcome is not None:
            return
        outcome = new_tuple(Outcome, (update.key, result, update.attempts, reason, delivery, update.last_error,
                                       stopped))
        update.settle(outcome)
        self._unsettled.pop(update.number, None)
        if result is Result.FAILED and not stopped:
            self._failures.note(update, reason)
        self.notify("on_finished", update, outcome)
        if self._flushes and not self._flush_check_scheduled:
            # Once per turn of the event loop, not per outcome: a burst's delivery reports settle together.
            self._flush_check_scheduled = True
            asyncio.get_running_loop().call_soon(self._release_flushes)

    def notify(self, event: str, *args: object) -> None:
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

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet."""
        return len(self._unsettled)

    def unsettled_updates(self) -> list[StatusUpdate]:
        """The updates without an outcome yet, oldest first."""
        return list(self._unsettled.values())

    def oldest_unsettled_age(self, now: float) -> float:
        """Seconds since the oldest update without an outcome was submitted, at ``now`` (0 when none)."""
        number = self._oldest_unsettled()
        if number is None:
            return 0.0
        return now - self._unsettled[number].submitted_at

    def window_closed(self, closes: float, window: LogWindow) -> None:
        """A summary line's window closed (the failure log's, if it is that one)."""
        self._failures.window_closed(closes, window)

    def _oldest_unsettled(self) -> int | None:
        if not self._unsettled:
            return None
        while self._oldest not in self._unsettled:
            self._oldest += 1
        return self._oldest

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every update numbered before this call has an outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._flushes.append((next(self._numbers), future))
        self._release_flushes()
        async with asyncio.timeout(timeout):
            await future

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


def _handlers(listeners: Sequence[RetryListener], event: str) -> list[tuple[RetryListener, Callable[..., None]]]:
    """The listeners' handlers of one event: none for a listener without the method (written against an older
    RetryListener) or with RetryListener's own, which does nothing."""
    handlers = []
    for listener in listeners:
        handler = getattr(listener, event, None)
        if handler is not None and getattr(type(listener), event, None) is not getattr(RetryListener, event):
            handlers.append((listener, handler))
    return handlers


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
        log.error("%d more status update(s) to the %s topic failed in the last %.0f s, e.g. %s", self._count,
                  self._name, self._interval, ", ".join(self._keys))
        self._count, self._keys = 0, []
        self._open()
