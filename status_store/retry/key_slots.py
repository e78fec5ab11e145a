"""The retry queue's slot table: which updates each key has now, its parked updates, and the views of what waits.

- **Per-key coalescing.** A key has at most one write in flight, one waiting and one parked (``holds.Slot``);
  ``key_writes`` keeps it so. (Off for append-only topics, where every update is an event of its own: each has
  a slot of its own, under its number.)
- **Parking.** A parked update is a failed one kept in its key's slot until its partition takes writes again; the
  table owns which slots hold one (``park``, ``unpark``), so their count is never kept in step by hand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .holds import Slot
from .partition_gate import PartitionGate
from .updates import Route, StatusUpdate


class KeySlots:
    """The slots of the keys with an update in flight, waiting or parked, each in its partition (with a route)."""

    def __init__(self, coalesce: bool, route: Route | None, gate: PartitionGate) -> None:
        self._coalesce = coalesce
        self._route = route
        self._gate = gate
        self._slots: dict[str, Slot] = {}
        # The slots holding a parked update, by slot key.
        self._parked: dict[str, Slot] = {}

    @property
    def routed(self) -> bool:
        """Whether keys have partitions here."""
        return self._route is not None

    def key_of(self, update: StatusUpdate) -> str:
        """The key a numbered update is coalesced under: its record's key, or (not coalescing) one of its own."""
        return update.key if self._coalesce else f"#{update.number}"

    def slot(self, update: StatusUpdate) -> Slot:
        """A numbered update's slot (made, in its partition, if the key has none)."""
        key = self.key_of(update)
        slot = self._slots.get(key)
        if slot is None:
            partition = self._gate.partition(self._route(update.key)) if self._route is not None else None
            slot = self._slots[key] = Slot(key, partition)
        return slot

    def find(self, update: StatusUpdate) -> Slot | None:
        """The update's key's slot, if it has one."""
        return self._slots.get(self.key_of(update))

    def forget(self, slot: Slot) -> None:
        """Drop the slot of a key with nothing in flight, waiting, parked or in line."""
        if self._slots.get(slot.key) is slot:
            del self._slots[slot.key]

    def keep_parked(self) -> None:
        """The queue is closed: keep only the keys with a parked update."""
        self._slots = dict(self._parked)

    @property
    def pending_keys(self) -> int:
        """Keys with an update in flight, waiting or parked (an idle key's slot is forgotten at once)."""
        return len(self._slots)

    def growth(self, keys: Sequence[str]) -> int:
        """How many keys with pending updates writes of these keys would add: each key that has none now, once
        (a write of a key that has one waits behind it, or replaces its waiting or parked value)."""
        if not self._coalesce:
            return len(keys)
        slots = self._slots
        return sum(1 for key in set(keys) if key not in slots)

    # ----------------------------------------------------------------------------- parking

    def park(self, slot: Slot, update: StatusUpdate) -> None:
        """Keep a failed update in its key's slot (the gate lines the key up in its held partition)."""
        slot.park(update)
        self._parked[slot.key] = slot

    def unpark(self, slot: Slot) -> StatusUpdate:
        """The parked update of the key leaves the slot (returned)."""
        parked = slot.unpark()
        del self._parked[slot.key]
        return parked

    @property
    def parked_count(self) -> int:
        """How many updates are parked now."""
        return len(self._parked)

    def is_parked(self, update: StatusUpdate) -> bool:
        """Whether this update is parked now."""
        slot = self._slots.get(self.key_of(update))
        return slot is not None and slot.parked is update

    # ----------------------------------------------------------------------------- what waits

    def waiting(self) -> Iterator[StatusUpdate]:
        """Updates waiting for their next attempt (on a timer, or in a held partition's line)."""
        for slot in self._slots.values():
            waiting = slot.waiting
            if waiting is not None and (slot.due is not None or slot.queued):
                yield waiting

    def waits_in_line(self, update: StatusUpdate) -> bool:
        """Whether a waiting update waits in its held partition's line (not on a timer of its own)."""
        slot = self._slots.get(self.key_of(update))
        return slot is None or slot.waiting is not update or slot.due is None

    def on_timers(self) -> list[Slot]:
        """The keys whose waiting update waits on a timer of its own (none in flight)."""
        return [slot for slot in self._slots.values()
                if slot.waiting is not None and slot.due is not None and slot.inflight is None]

    def next_attempt(self, update: StatusUpdate, now: float) -> float:
        """When a waiting update may go next: its timer, or its partition's next probe (else ``now``)."""
        slot = self._slots.get(self.key_of(update))
        if slot is not None and slot.waiting is update and slot.due is not None:
            return slot.due
        probe = self._gate.next_probe(slot.partition) if slot is not None and slot.partition is not None else None
        return probe if probe is not None else now
