"""What a caller of the retry queue holds: the ``StatusUpdate`` handle, its ``Outcome``, and the listener and
policy types (pure: no Kafka, no scheduler, no event loop: the future a handle's caller awaits is the queue's)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from ..errors import WriteFailedError
from .backoff import Backoff, RetryMode
from .budget import RetryBudget
from .delivery import Delivery

# The partition of a key (Kafka's partitioner).
Route = Callable[[str], int]
# Asked before each send of an update (True: a retry): a reason not to send it any more, or None.
Abandon = Callable[[bool], str | None]


class UpdateKind(enum.StrEnum):
    """What an update writes: a status record of the status topic, or an event of an append-only topic."""

    CONNECTOR = "connector"
    TASK = "task"
    TOPIC = "topic"
    HISTORY = "history"
    DEAD_LETTER = "dead-letter"


STATUS_KINDS = (UpdateKind.CONNECTOR, UpdateKind.TASK, UpdateKind.TOPIC)


class Result(enum.StrEnum):
    """How an update ended."""

    WRITTEN = "written"
    FAILED = "failed"
    SUPERSEDED = "superseded"


class Outcome(NamedTuple):
    """The end of one status update. Immutable; a named tuple rather than a frozen dataclass because one is made
    per write, and a frozen dataclass's constructor costs three times as much (a call per field)."""

    key: str
    result: Result
    attempts: int
    reason: str
    delivery: Delivery | None = None
    error: WriteFailedError | None = None
    # Failed only because the store stopped first: not settled in Kafka's eyes either way.
    stopped: bool = False
    # Failed, and parked when it settled (``RetryQueue.park_after_last_retry``): its value waits in its partition.
    parked: bool = False

    @property
    def ok(self) -> bool:
        """True when this value is durable in Kafka."""
        return self.result is Result.WRITTEN


class Settled(Protocol):
    """The outcome of one update to await: a future of the queue's event loop (``asyncio.Future`` is one), done once
    the update settles. Never cancel it: others may wait on it too."""

    def done(self) -> bool:
        """True once it has the outcome."""
        ...

    def set_result(self, result: Outcome, /) -> None:
        """Give it the outcome (the handle does, as the queue settles the update)."""
        ...

    def __await__(self) -> Generator[Any, None, Outcome]:
        """Wait for the outcome."""
        ...


class Waits(Protocol):
    """How a handle's caller waits for its outcome on the event loop (retry/queue.py's, set as it is loaded): a new
    future, and a bounded wait on one."""

    def future(self) -> Settled:
        """A future of the running event loop, not done yet."""
        ...

    async def within(self, settled: Settled, timeout: float | None) -> Outcome:
        """Wait for ``settled`` at most ``timeout`` seconds (None: no bound), never cancelling it."""
        ...


class StatusUpdate:
    """One submitted write as its caller sees it: key, kind and value, attempts so far, and, once settled, its
    outcome (``result()`` waits for it)."""

    __slots__ = ("_abandon", "_future", "attempts", "key", "kind", "last_error", "number", "outcome", "safe",
                 "spooled", "submitted_at", "value")

    # How a caller waits for an outcome: futures of the running event loop, which retry/queue.py (the wing's one
    # asyncio layer) sets as it is loaded (``waited_on``); the package loads it with the store.
    _waits: ClassVar[Waits | None] = None

    @classmethod
    def waited_on(cls, waits: Waits) -> None:
        """Every handle's caller waits for its outcome with ``waits`` from now on (retry/queue.py's, set once)."""
        cls._waits = waits

    def __init__(self, key: str, value: bytes | None, kind: UpdateKind, abandon: Abandon | None = None,
                 safe: bool = False, spooled: bool = True) -> None:
        """``spooled``: the spool keeps it (when there is one); False for a write its writer holds itself until
        its outcome (a worker's agent sends it again to a restarted sidecar)."""
        self.key, self.value, self.kind, self.safe, self.spooled = key, value, kind, safe, spooled
        self.attempts = 0
        # The queue's sequence number (submission order), and the loop time of the submission.
        self.number = 0
        self.submitted_at = 0.0
        self.last_error: WriteFailedError | None = None
        self.outcome: Outcome | None = None
        # The future its caller awaits, made when first asked for (``_waits``: most writes are never awaited alone).
        self._future: Settled | None = None
        # The owner's check before each send (Connect's rules: ``abandoned``).
        self._abandon = abandon

    def admitted(self, number: int, now: float) -> None:
        """The queue took the update: its number (submission order) and the loop time of the submission."""
        self.number, self.submitted_at = number, now

    def attempted(self) -> None:
        """One more attempt of the update's own value went."""
        self.attempts += 1

    def failed_with(self, error: WriteFailedError) -> None:
        """An attempt of the update failed with ``error`` (its outcome's error, if it fails for good)."""
        self.last_error = error

    def done(self) -> bool:
        """True once the update has an outcome."""
        return self.outcome is not None

    async def result(self, timeout: float | None = None) -> Outcome:
        """Wait for the outcome (it never raises for a failed write: see ``Outcome.result``); TimeoutError after
        ``timeout`` seconds."""
        if self.outcome is not None:
            return self.outcome
        return await self._waiting().within(self.settled(), timeout)

    def settled(self) -> Settled:
        """A future done with the outcome (to wait on many with ``asyncio.wait``; never cancel it)."""
        if self._future is None:
            self._future = self._waiting().future()
            if self.outcome is not None:
                self._future.set_result(self.outcome)
        return self._future

    def _waiting(self) -> Waits:
        waits = self._waits
        if waits is None:
            raise RuntimeError("status_store.retry.queue is not loaded: nothing makes the future an outcome is "
                               "awaited on")
        return waits

    def settle(self, outcome: Outcome) -> None:
        """Give the update its outcome (the retry queue does, once, after the step that settled it)."""
        self.outcome = outcome
        if self._future is not None and not self._future.done():
            self._future.set_result(outcome)

    def abandoned(self, retry: bool) -> str | None:
        """The owner's reason not to send this update (now, or ``retry``: again) any more; None to send it."""
        return self._abandon(retry) if self._abandon is not None else None

    def again(self) -> StatusUpdate:
        """A new update of the same write (a parked update submitted again)."""
        return StatusUpdate(self.key, self.value, self.kind, self._abandon, self.safe, self.spooled)

    def __repr__(self) -> str:
        return f"StatusUpdate({self.key!r}, attempts={self.attempts}, outcome={self.outcome})"


class RetryListener(Protocol):
    """Receives the queue's events (metrics, history, the spool). A listener that raises is logged and
    counted, never allowed to stop the queue. A class that subclasses it keeps these do-nothing methods
    for the events it does not care about."""

    def on_submitted(self, update: StatusUpdate) -> None:
        """An update was submitted."""
        return None

    def on_retry(self, update: StatusUpdate) -> None:
        """An update is about to be sent again."""
        return None

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        """An update has its outcome."""
        return None

    def on_unparked(self, update: StatusUpdate, again: StatusUpdate | None, reason: str) -> None:
        """A parked update left the queue: submitted ``again``, or (None) dropped for ``reason``."""
        return None


class ReleasePace(NamedTuple):
    """How a released partition's line goes out (``holds.Release``): ``first`` updates per ``pace_s`` at first, then
    faster while batches succeed; a batch goes at most every ``pace_s``. The defaults are the service's; a benchmark
    may sweep them (bench/fleet.py ``--release``)."""

    first: int = 2
    pace_s: float = 0.025


# The service's release pace.
RELEASE_PACE = ReleasePace()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to retry: the mode, the backoff, the retry limit, the optional total time bound (seconds), the
    optional retry budget (per-update mode), the schedule of a held partition's probes (default: the
    backoff), the most updates that may be pending at once (None: no bound), and the pace of a released
    partition's line."""

    backoff: Backoff
    max_retries: int
    timeout: float | None = None
    budget: RetryBudget | None = None
    mode: RetryMode = RetryMode.PARTITION
    probe_backoff: Backoff | None = None
    max_pending: int | None = None
    release: ReleasePace = RELEASE_PACE
