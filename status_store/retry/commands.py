"""What the retry engine asks of the layer that does its I/O (pure: no clock, no event loop, no Kafka).

The engine decides and records; the queue (``queue.RetryQueue``) does: after each event it hands the engine (a
submission, a timer, a delivery report, a park, a partition writable again, a stop), each given the time it came, it
takes the commands the event left and carries them out, in order (the records to send), hands back what came of them
as new events (``engine.Engine.settled`` and ``not_sent``), and keeps its one loop timer at the time the engine
asks to be woken (``WakeAt``, handed back as ``Engine.due``). It applies the outcomes (``Settle``) and tells the
listeners (``Notify``) after the step, in the order the step decided them, before it sends the step's records: the
order of effects the queue had when the listeners were called inside the step (docs/design/retry-engine.md).
"""

from __future__ import annotations

from typing import NamedTuple

from .holds import Slot
from .updates import Outcome, StatusUpdate


class Attempt:
    """One attempt in flight, as the engine knows it: the key's slot, the update it is made for, and whether it
    sends the key's older value that may still land (``replay``) rather than the update's own. Opaque to the queue,
    which hands it back with the attempt's delivery report."""

    __slots__ = ("replay", "slot", "update")

    def __init__(self, slot: Slot, update: StatusUpdate, replay: bool) -> None:
        self.slot, self.update, self.replay = slot, update, replay


class Send(NamedTuple):
    """Hand this record to Kafka; its delivery report (or the producer's refusal) goes back to the engine with
    ``attempt``."""

    key: bytes
    value: bytes | None
    attempt: Attempt


class WakeAt(NamedTuple):
    """Hand the engine ``due`` at ``at`` (the queue's clock), or at once if that time has passed: one timer, moved
    only earlier (a wake-up with nothing due costs one look at the heap)."""

    at: float


class Settle(NamedTuple):
    """Give the update its outcome (``StatusUpdate.settle``: its handle's future), tell the listeners
    (``on_finished``), and release the flushes waiting for it. The engine has settled it already: it is no longer
    unsettled in its eyes."""

    update: StatusUpdate
    outcome: Outcome


class Notify(NamedTuple):
    """Tell the listeners of an event other than an outcome: ``on_submitted``, ``on_retry`` or ``on_unparked``, with
    its arguments."""

    event: str
    args: tuple[object, ...]


# What the ledger leaves for the queue to apply after a step, in order.
Effect = Settle | Notify
