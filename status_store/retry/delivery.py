"""What a write's producer tells its sender (pure): where Kafka stored the record, or why it did not."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from ..errors import WriteFailedError


class Delivery(NamedTuple):
    """Where Kafka stored a write (immutable; a named tuple: one is made per write, and it is cheaper to make than
    a frozen dataclass)."""

    partition: int
    offset: int


# Runs on the event loop when a write settles: (where it is, None) or (None, why it failed).
DoneCallback = Callable[[Delivery | None, WriteFailedError | None], None]
# send(key, value, done): hand a record to Kafka; never blocks.
Send = Callable[[bytes, bytes | None, DoneCallback], None]


def read_targets(deliveries: Iterable[Delivery | None]) -> dict[int, int]:
    """Per partition, the offset just past the last of these writes: where a reader has read them all."""
    targets: dict[int, int] = {}
    for delivery in deliveries:
        if delivery is not None:
            targets[delivery.partition] = max(targets.get(delivery.partition, 0), delivery.offset + 1)
    return targets
