"""Whether the spool takes writes: since when its commits fail and why, one log line when that starts and one when it
ends, and the next try after a growing wait (never a tight loop)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# A commit that could not be written (the database locked, a full disk) is tried again this much later, twice as
# late after each failure in a row, up to the most.
RETRY_COMMIT_S = 0.1
RETRY_COMMIT_MAX_S = 2.0


class SpoolHealth:
    """The state of one spool's commits: ``writable`` until one fails, then ``failure`` says why and the commit is
    tried again after ``retry_delay_s`` (doubling up to ``RETRY_COMMIT_MAX_S``) until one is written."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.retry_delay_s = RETRY_COMMIT_S
        # Since when commits fail, and why (None: the last commit was written).
        self._failing_since: float | None = None
        self.failure: str | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def writable(self) -> bool:
        """Whether the last commit was written (False from a failed one until one is written again)."""
        return self._failing_since is None

    def failed(self, reason: str, unwritten: int, retry: Callable[[], object]) -> bool:
        """A commit failed for ``reason`` with ``unwritten`` changes kept in memory: logged when commits start failing,
        and ``retry`` called later. False when no event loop runs to try again (the next change or the close will)."""
        self.failure = reason
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.error("Cannot write to the spool %s (%s): %d change(s) wait in memory and are tried again from every "
                      "%.1f s to every %.1f s; until one is written, new writes are refused (a crash now would lose "
                      "what they hold)", self._path, reason, unwritten, RETRY_COMMIT_S, RETRY_COMMIT_MAX_S)
        delay = self.retry_delay_s
        self.retry_delay_s = min(RETRY_COMMIT_MAX_S, delay * 2)
        with contextlib.suppress(RuntimeError):
            self._timer = asyncio.get_running_loop().call_later(delay, retry)
            return True
        return False

    def written(self) -> None:
        """A commit was written: the spool takes writes (logged when it did not)."""
        self.retry_delay_s = RETRY_COMMIT_S
        if self._failing_since is not None:
            log.warning("The spool %s takes writes again after %.1f s", self._path,
                        time.monotonic() - self._failing_since)
            self._failing_since = self.failure = None

    def cancel(self) -> None:
        """No try is due any more (a commit is under way, or the spool closed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
