"""What a write's producer tells its sender (pure): where Kafka stored the record, or why it did not."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .errors import WriteFailedError


class Delivery(NamedTuple):
    """Where Kafka stored a write (immutable; a named tuple: one is made per write, and it is cheaper to make than
    a frozen dataclass)."""

    partition: int
    offset: int


# Runs on the event loop when a write settles: (where it is, None) or (None, why it failed).
DoneCallback = Callable[[Delivery | None, WriteFailedError | None], None]
# send(key, value, done): hand a record to Kafka; never blocks.
Send = Callable[[bytes, bytes | None, DoneCallback], None]
