"""The largest record the producer and the topic take, and status values made to fit it (pure).

A FAILED status with a long trace is worth more written with the trace's head than refused: the trace is
cut, with a note of how much, so that the record fits ``message.max.bytes`` (and the topic's
``max.message.bytes``); a record that cannot fit even so is refused with ``RecordTooLargeError``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..errors import RecordTooLargeError
from . import codec
from .model import Status, status_key

log = logging.getLogger(__name__)

# librdkafka's default message.max.bytes, and what a record adds to its key and value on the wire at most.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
RECORD_OVERHEAD_BYTES = 64
# The header every record the sidecar writes carries (kafka/late_writes.py's ``ATTEMPT_HEADER``): the headers' count,
# the name's length and its 20 bytes, the value's length and its 16 bytes (tests/test_late_writes.py holds the two
# together).
ATTEMPT_HEADER_BYTES = 1 + 1 + 20 + 1 + 16


class RecordLimit:
    """Encodes status values within a record size limit (key + value, in bytes)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    @classmethod
    def of(cls, client_configs: Mapping[str, str], topic_configs: Mapping[str, str]) -> RecordLimit:
        """The limit of a producer (``message.max.bytes``) writing to a topic (``max.message.bytes`` when set),
        less what a record adds on the wire (the sidecar's attempt header included)."""
        producer = client_configs.get("message.max.bytes", "").strip()
        limit = int(producer) if producer.isdigit() else DEFAULT_MAX_MESSAGE_BYTES
        topic = topic_configs.get("max.message.bytes", "").strip()
        if topic.isdigit():
            limit = min(limit, int(topic))
        return cls(limit - RECORD_OVERHEAD_BYTES - ATTEMPT_HEADER_BYTES)

    def check(self, key: str, value: bytes | None) -> None:
        """Raise ``RecordTooLargeError`` if the record is over the limit."""
        size = len(key.encode()) + (len(value) if value is not None else 0)
        if size > self.max_bytes:
            raise RecordTooLargeError(key, size, self.max_bytes)

    def check_status(self, status: Status) -> None:
        """Raise ``RecordTooLargeError`` if this status could not be written even with its trace cut (a batch
        checks every item before it submits any)."""
        key = status_key(status)
        # Escaping at most sextuples a character's bytes: most statuses are clearly small enough.
        text = len(key) + len(status.version if isinstance(status.version, str) else "")
        if status.worker_id is not None and 6 * (text + len(status.worker_id)) + 128 <= self.max_bytes:
            return
        self.encode(key, status)

    def encode(self, key: str, status: Status) -> bytes | None:
        """The record value (None: a tombstone), its trace cut so that the record fits."""
        value = codec.encode_status(status.state, status.worker_id, status.generation, status.trace, status.version)
        if value is None:
            return value
        key_size = len(key.encode())
        if key_size + len(value) <= self.max_bytes:
            return value
        if not status.trace:
            raise RecordTooLargeError(key, key_size + len(value), self.max_bytes)
        trace = status.trace
        room = self.max_bytes - key_size - (len(value) - len(codec.json_string(trace).encode()))
        low, high = 0, len(trace)
        while low < high:  # the longest head of the trace whose note and escaped text fit
            middle = (low + high + 1) // 2
            if len(codec.json_string(cut(trace, middle)).encode()) <= room:
                low = middle
            else:
                high = middle - 1
        log.warning("The trace of %s is cut to %d of %d characters: the whole record would exceed the producer's "
                    "limit of %d bytes (message.max.bytes)", key, low, len(trace), self.max_bytes)
        value = codec.encode_status(status.state, status.worker_id, status.generation, cut(trace, low),
                                    status.version)
        self.check(key, value)
        return value


def cut(trace: str, length: int) -> str:
    """A trace's head with a note of what was cut."""
    return f"{trace[:length]}\n\t... {len(trace) - length} more characters cut by status-store (record size limit)"
