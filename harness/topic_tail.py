"""A status topic read as it is written: every record's key and value with the time a consumer read it (a consumer
reads a record once every in-sync replica has it), on a thread of its own until ``stop()``. The fault matrix judges
the topic's last record per key by it (``found``); the outage benchmark times records and counts them."""

from __future__ import annotations

import collections
import json
import threading
import time
import uuid
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

# Connect's default status.storage.partitions, which the tests' and benchmarks' status topics take.
PARTITIONS = 5


class TopicTail:
    """Each key's last record and when it was read, and how many records of each key were read."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int = PARTITIONS,
                 keep_records: bool = False) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"tail-{uuid.uuid4()}",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 10, "log_level": 2})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, bytes | None]] = {}
        self._arrivals: collections.Counter[str] = collections.Counter()
        # Every record read, in order (``keep_records``: the fault matrix's ``--keep``), else none.
        self._records: list[tuple[float, str, bytes | None]] | None = [] if keep_records else None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            for message in self._consumer.consume(500, 0.1):
                if message.error() is None:
                    key = (message.key() or b"").decode()
                    with self._lock:
                        self._last[key] = (time.monotonic(), message.value())
                        self._arrivals[key] += 1
                        if self._records is not None:
                            self._records.append((self._last[key][0], key, message.value()))

    def last(self, key: str) -> tuple[float, bytes | None] | None:
        """When the key's last record so far was read (monotonic), and its value (None: a tombstone)."""
        with self._lock:
            return self._last.get(key)

    def found(self, keys: Iterable[str]) -> dict[str, str | None]:
        """Each key's state in its last record so far (None: no record, or a tombstone)."""
        with self._lock:
            last = {key: self._last.get(key) for key in keys}
        return {key: json.loads(record[1])["state"] if record is not None and record[1] else None
                for key, record in last.items()}

    def records(self, keys: Iterable[str]) -> list[tuple[float, str, bytes | None]]:
        """Every record of these keys read so far, in the order read: when (monotonic), its key and value (None: a
        tombstone). Empty unless the tail keeps its records (``keep_records``)."""
        wanted = set(keys)
        with self._lock:
            return [record for record in self._records or () if record[1] in wanted]

    def arrivals(self, keys: Iterable[str]) -> int:
        """Records of these keys read so far."""
        with self._lock:
            return sum(self._arrivals[key] for key in keys)

    def latest_arrival(self, keys: Iterable[str]) -> float:
        """When the last record of these keys was read (monotonic; 0 for none)."""
        with self._lock:
            return max((self._last[key][0] for key in keys if key in self._last), default=0.0)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(10)
        self._consumer.close()
