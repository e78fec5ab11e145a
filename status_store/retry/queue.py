"""The retry queue: one scheduler on the event loop for every status write and its retries.

``RetryQueue`` is the queue's only public face (submit, results, flush, stop, the read-only views of
``/retries`` and the metrics). It drives one ``engine.Engine``, the state machine without I/O that decides every
attempt, retry, hold, probe, release and outcome (its parts, each readable alone, are private to it: see
``engine.py``).

The queue is the one layer with a clock and an event loop: it hands the engine each event with its time, carries
out the commands the event left (``commands``: the outcomes and the listeners' events, then the records to send), and
keeps one loop timer at the time the engine asks to be woken. It holds the listeners and the flush barriers.

And the queue's own promises:

- **Never blocks the caller.** ``submit`` returns at once; ``StatusUpdate.result()`` awaits the outcome, on a
  future of the running event loop that this module makes for the handle (``updates.py``: the handle and the types a
  caller sees, without an event loop of their own).
  With ``max_pending`` set, a write of a new key past that many keys pending is refused (``WriteRejectedError``).
- **A listener never breaks the queue.** An exception in a listener is logged once per cause, counted
  in ``listener_errors``, and the update settles and its key moves on as if nothing happened.
- **A bounded stop.** ``stop`` sends what waits once more, waits at most its timeout, then fails the rest;
  parked updates stay parked.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ..errors import StoreClosedError, WriteFailedError, WriteRejectedError
from .commands import Attempt, Effect, Settle, WakeAt
from .delivery import Delivery, Send
from .engine import Engine
from .updates import Outcome, RetryListener, RetryPolicy, Route, Settled, StatusUpdate

log = logging.getLogger(__name__)

# The listeners' events.
EVENTS = ("on_submitted", "on_retry", "on_finished", "on_unparked")

# The queue's handling of one attempt's delivery report.
Report = Callable[[Attempt, Delivery | None, WriteFailedError | None], None]


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


class RetryQueue:
    """Schedules every attempt of every status write on one event loop."""

    def __init__(self, send: Send, policy: RetryPolicy, listeners: Sequence[RetryListener] = (),
                 route: Route | None = None, name: str = "status", coalesce: bool = True,
                 clock: Clock | None = None) -> None:
        """``route``: the partition of a key (Kafka's partitioner). Without it every key is on its own:
        partitions are neither held nor parked in (parking needs a route). ``coalesce``: a newer write of a key
        replaces its waiting one (status topics); False where every update is written (append-only topics).
        ``clock``: default, the running event loop of the first submission."""
        self.policy = policy
        self.name = name
        self._engine = Engine(policy, route, name, coalesce)
        self._listeners = _Listeners(name, listeners)
        # Flushes waiting, each with the number it waits for every update before to be settled (marks only grow).
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self._flush_check_scheduled = False
        self._clock = clock
        # The one loop timer: set for the time the engine asked to be woken at, moved only earlier.
        self._timer: Timer | None = None
        self._send = send
        # One bound method for every attempt's delivery report (not one per write).
        self._report = self._delivered
        # Writes refused because max_pending keys had updates pending.
        self.rejected_total = 0
        # Stopping: no new submissions.
        self._stopped = False

    def _started(self) -> Clock:
        """The clock, started on the running event loop by the first event that needs one."""
        if self._clock is None:
            self._clock = asyncio.get_running_loop()
        return self._clock

    def _woken(self) -> None:
        """The loop timer fired: the engine's timers due by now fire."""
        self._timer = None
        clock = self._started()
        self._carry_out(self._engine.due(clock.time()))

    def _carry_out(self, wake: WakeAt | None) -> None:
        """After an event: the outcomes it decided are given and the listeners told, then the records it decided go to
        Kafka, and the loop timer is set for when the engine next wants to be woken (if sooner than it is set for)."""
        self._apply(self._engine.take_effects())
        if self._send_out():
            wake = self._engine.wake()  # (a record refused is an event: it may have set a timer)
        if wake is None:
            return
        timer = self._timer
        if timer is not None:
            if timer.when() <= wake.at:
                return
            timer.cancel()
        self._timer = self._started().call_at(wake.at, self._woken)

    def _send_out(self) -> bool:
        """Hand the records the engine decided on to Kafka, in order; a record the producer refuses (it is closed)
        goes back to the engine, which fails its update and may decide the key's next (each round fails one
        update at least, so the rounds end). True when one was refused."""
        refused = False
        sends = self._engine.take_sends()
        while sends:
            for send in sends:
                try:
                    self._send(send.key, send.value, _Delivered(self._report, send.attempt))
                except StoreClosedError as e:
                    self._engine.not_sent(send.attempt, e, self._started().time())
                    self._apply(self._engine.take_effects())
                    refused = True
            sends = self._engine.take_sends()
        return refused

    def _apply(self, effects: list[Effect]) -> None:
        """Apply a step's outcomes and events, in the order it decided them: each outcome goes to the update's handle,
        then to the listeners, and the flushes it may end are checked once per turn of the event loop (a burst's
        delivery reports settle together)."""
        listeners = self._listeners
        for effect in effects:
            if isinstance(effect, Settle):
                update, outcome = effect
                update.settle(outcome)
                listeners.notify("on_finished", update, outcome)
                if self._flushes and not self._flush_check_scheduled:
                    self._flush_check_scheduled = True
                    asyncio.get_running_loop().call_soon(self._release_flushes)
            else:
                listeners.notify(effect.event, *effect.args)

    def _delivered(self, attempt: Attempt, delivery: Delivery | None, error: WriteFailedError | None) -> None:
        """An attempt's delivery report: the engine settles it, and what it decides next goes out."""
        self._engine.settled(attempt, delivery, error, self._started().time())
        self._carry_out(self._engine.wake())

    def subscribe(self, listener: RetryListener) -> None:
        """Tell ``listener`` of the queue's events from now on (after the listeners before it), each in its own
        ``try``: a listener that raises is logged and counted, never allowed to stop the queue."""
        self._listeners.subscribe(listener)

    # ----------------------------------------------------------------------------- submitting

    def check_room(self, keys: Sequence[str]) -> None:
        """Raise ``WriteRejectedError`` if writes of these keys would make more keys than ``max_pending`` have updates
        pending (in flight, waiting or parked). A write of a key that has one takes no room: it waits behind the key's
        write in flight (one at most: a later one replaces it) or replaces its waiting or parked value."""
        limit = self.policy.max_pending
        if limit is None:
            return
        free = limit - self._engine.pending_keys
        if len(keys) <= free or self._engine.growth(keys) <= free:
            return
        self.rejected_total += 1
        raise WriteRejectedError(f"status updates of {limit} keys are pending (status.storage.retry.max.pending): "
                                 "Kafka is not taking writes as fast as they come; try again later",
                                 max(1.0, self._engine.probe_backoff.longest(0)))

    def supersede(self, update: StatusUpdate, reason: str) -> StatusUpdate:
        """Take an update that is not to be sent after all (a replayed update that the topic made obsolete): it
        is settled as superseded and reported to the listeners like any other."""
        self._engine.supersede(update, reason, self._started().time())
        self._apply(self._engine.take_effects())
        return update

    def submit(self, update: StatusUpdate, room_checked: bool = False) -> StatusUpdate:
        """Take an update; it is sent now, or waits behind the key's write in flight or for its partition's
        release. Never blocks; raises ``WriteRejectedError`` when the queue is full (see ``check_room``;
        ``room_checked``: the caller has just asked ``check_room`` for this write itself)."""
        if self._stopped:
            raise StoreClosedError("the store is stopped")
        if not room_checked:
            self.check_room((update.key,))
        self._engine.submit(update, self._started().time())
        self._carry_out(self._engine.wake())
        return update

    def writable_again(self, partition: int) -> bool:
        """The cluster says this partition can take writes again (the signal a probe waits for: in-sync replicas back,
        a leader known): a held one is probed now, not at its next probe's time. False when it was not waiting for a
        probe."""
        again = self._engine.writable_again(partition, self._started().time())
        self._carry_out(self._engine.wake())
        return again

    def park_after_last_retry(self) -> None:
        """From now on, park an update that fails for good with a retriable error (not because the queue stopped) as
        it settles, when it can be (see ``park``): its outcome says so (``Outcome.parked``). The owner that parks after
        the last retry (``status.storage.retry.exhausted.action=park``) asks it once, before the first write."""
        self._engine.park_after_last_retry()

    def park(self, update: StatusUpdate) -> bool:
        """Keep a failed update's value in its partition, held like an outage, until the partition takes writes
        again; then it is submitted again (unless its owner abandons it then). False when the key has a newer
        value already, or keys have no partitions here."""
        parked = self._engine.park(update, self._started().time())
        self._carry_out(self._engine.wake())
        return parked

    # ----------------------------------------------------------------------------- observing

    @property
    def attempts_total(self) -> int:
        """Attempts sent so far (retries and probes included)."""
        return self._engine.attempts_total

    @property
    def throttled_total(self) -> int:
        """Retries the budget refused (each delayed by a backoff step, none dropped)."""
        return self._engine.throttled_total

    @property
    def probes_total(self) -> int:
        """Probes sent to held partitions."""
        return self._engine.probes_total

    @property
    def listener_errors(self) -> collections.Counter[str]:
        """Exceptions raised by listeners, by listener class name."""
        return self._listeners.errors

    @property
    def unsettled(self) -> int:
        """Updates without an outcome yet (in flight, held, or waiting for a retry)."""
        return self._engine.unsettled

    @property
    def held_partitions(self) -> list[int]:
        """The partitions held now."""
        return self._engine.held_partitions

    def parked(self) -> list[StatusUpdate]:
        """Updates parked after their last retry, by partition, oldest first."""
        return self._engine.parked()

    def is_parked(self, update: StatusUpdate) -> bool:
        """Whether this update is parked now."""
        return self._engine.is_parked(update)

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return self._engine.parked_count

    def waiting_retries(self) -> list[StatusUpdate]:
        """Updates waiting for their next attempt (on a timer, or in a held partition's line), soonest first."""
        return sorted(self._engine.waiting(), key=self.next_attempt)

    def waiting_retries_unsorted(self) -> list[StatusUpdate]:
        """The same, in no order (cheaper where only a few are needed in order)."""
        return list(self._engine.waiting())

    def next_attempt(self, update: StatusUpdate) -> float:
        """When a waiting update may go next (loop time): its timer, or its partition's next probe; for the
        keys behind the first of a held partition's line, that is when they may go at the earliest."""
        return self._engine.next_attempt(update, self._started().time())

    def waits_in_line(self, update: StatusUpdate) -> bool:
        """Whether a waiting update waits in its held partition's line (not on a timer of its own)."""
        return self._engine.waits_in_line(update)

    @property
    def waiting_count(self) -> int:
        """How many updates wait for their next attempt (no sorting: cheap enough for every scrape)."""
        return sum(1 for _ in self._engine.waiting())

    def oldest_unsettled_age(self) -> float:
        """Seconds since the oldest update without an outcome was submitted (0 when none)."""
        return 0.0 if self._clock is None else self._engine.oldest_unsettled_age(self._clock.time())

    # ----------------------------------------------------------------------------- flush and stop

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every update submitted before this call has an outcome."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flushes.append((self._engine.mark(), future))
        self._release_flushes()
        async with asyncio.timeout(timeout):
            await future

    def _release_flushes(self) -> None:
        self._flush_check_scheduled = False
        if not self._flushes:
            return
        oldest = self._engine.oldest_unsettled()
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

    async def stop(self, timeout: float) -> list[StatusUpdate]:
        """Send what waits for a retry once more (a held partition: its probe), wait at most ``timeout`` s for
        every outcome, then fail what is left. Returns the updates that failed because the store stopped;
        never waits longer. Parked updates stay parked (``parked()``)."""
        # No timer of the engine's fires while the stop waits, unless what the stop sends sets one again.
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._engine.stop(self._started().time())
        self._carry_out(self._engine.wake())
        self._stopped = True
        with contextlib.suppress(TimeoutError):
            await self.flush(timeout)
        lost = self._engine.close(self._started().time(), "the store stopped before Kafka acknowledged the write")
        self._apply(self._engine.take_effects())
        # The failures summed up so far were logged at the close; a window still open closes on the loop's timer.
        self._carry_out(self._engine.wake())
        return lost


class _LoopWaits:
    """How a handle's caller waits for its outcome (``updates.Waits``): on a future of the running event loop, made
    only when asked for (most writes are never awaited one by one)."""

    __slots__ = ()

    def future(self) -> asyncio.Future[Outcome]:
        """A new future of the running event loop."""
        return asyncio.get_running_loop().create_future()

    async def within(self, settled: Settled, timeout: float | None) -> Outcome:
        """Wait at most ``timeout`` seconds; a cancelled or timed-out wait leaves the future to its other waiters."""
        async with asyncio.timeout(timeout):
            return await asyncio.shield(settled)


# The one asyncio layer of the wing makes the futures every handle's caller awaits.
StatusUpdate.waited_on(_LoopWaits())


class _Delivered:
    """The producer's callback for one attempt: two small objects per write in flight, the engine's ``Attempt`` and
    this one (a partial of a bound method would make three of this one, and every object a pending write holds is
    traversed by each full garbage collection)."""

    __slots__ = ("attempt", "report")

    def __init__(self, report: Report, attempt: Attempt) -> None:
        self.report, self.attempt = report, attempt

    def __call__(self, delivery: Delivery | None, error: WriteFailedError | None) -> None:
        self.report(self.attempt, delivery, error)


class _Listeners:
    """The listeners' handlers, by event, each called in its own ``try``."""

    def __init__(self, name: str, listeners: Sequence[RetryListener]) -> None:
        self._name = name
        # Per event, the listeners' handlers, found once; a handler inherited from RetryListener does nothing
        # and is left out (every write passes through on_submitted and on_finished).
        self._handlers = {event: _handlers(listeners, event) for event in EVENTS}
        # Exceptions raised by listeners, by listener class name.
        self.errors: collections.Counter[str] = collections.Counter()
        self._logged_causes: set[tuple[str, str]] = set()

    def subscribe(self, listener: RetryListener) -> None:
        """Tell ``listener`` of every event from now on, after the listeners before it."""
        for event in EVENTS:
            self._handlers[event] += _handlers((listener,), event)

    def notify(self, event: str, *args: object) -> None:
        """Call every listener; one that raises is logged (once per cause) and counted, never propagated."""
        for listener, handler in self._handlers[event]:
            try:
                handler(*args)
            except Exception as e:
                name = type(listener).__name__
                self.errors[name] += 1
                cause = (name, type(e).__name__)
                if cause not in self._logged_causes:
                    self._logged_causes.add(cause)
                    log.exception("The %s listener of the %s retry queue raised in %s (logged once per cause, "
                                  "counted in status_listener_errors_total); the queue goes on", name, self._name,
                                  event)


def _handlers(listeners: Sequence[RetryListener], event: str) -> list[tuple[RetryListener, Callable[..., None]]]:
    """The listeners' handlers of one event: none for a listener without the method (written against an older
    RetryListener) or with RetryListener's own, which does nothing."""
    handlers = []
    for listener in listeners:
        handler = getattr(listener, event, None)
        if handler is not None and getattr(type(listener), event, None) is not getattr(RetryListener, event):
            handlers.append((listener, handler))
    return handlers
