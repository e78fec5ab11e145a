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

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

# Connect's default status.storage.partitions, which the tests' and benchmarks' status topics take.
PARTITIONS = 5


# How often the tail compares what it read of each partition with the partition's end, and how long a partition may
# stay behind its end without a record read before the tail takes its consumer for stalled and starts another.
CHECK_S = 1.0
STALL_S = 5.0


class TopicTail:
    """Each key's last record and when it was read, and how many records of each key were read.

    librdkafka's consumer, assigned its partitions (no group), can stop fetching a partition for good after the broker
    restarts while its records go on arriving (reported as confluentinc/librdkafka#5153 and #4492): in the fault matrix
    a side's tail read nothing more after a broker stop, and every key of the next rows was "lost" in its topic view
    while the topic held them. So the tail checks each partition's fetch position (``CHECK_S``), and one that has not
    moved for ``STALL_S`` while behind the partition's end gets a new consumer from the offsets read so far; each such
    restart is said in ``stalls`` (the partition, its fetch state in the consumer's last statistics, how far behind)."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int = PARTITIONS,
                 keep_records: bool = False) -> None:
        self._bootstrap_servers, self._topic, self._partitions = bootstrap_servers, topic, partitions
        # The next offset to read per partition (None: from the beginning); the consumer's fetch position at the last
        # check, and since when it has not moved.
        self._next: dict[int, int | None] = dict.fromkeys(range(partitions))
        self._position: dict[int, int] = {}
        self._moved = dict.fromkeys(range(partitions), time.monotonic())
        self._fetch_state: dict[int, str] = {}
        self.stalls: list[str] = []
        self._consumer = self._new_consumer()
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, bytes | None]] = {}
        self._arrivals: collections.Counter[str] = collections.Counter()
        # Every record read, in order (``keep_records``: the fault matrix's ``--keep``), else none.
        self._records: list[tuple[float, str, bytes | None]] | None = [] if keep_records else None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)
        self._thread.start()

    def _new_consumer(self) -> Consumer:
        """A consumer of every partition from the next offset the tail has not read."""
        consumer = Consumer({"bootstrap.servers": self._bootstrap_servers, "group.id": f"tail-{uuid.uuid4()}",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 10, "log_level": 2,
                             "statistics.interval.ms": 1000, "stats_cb": self._statistics})
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING if offset is None else offset)
                         for p, offset in self._next.items()])
        return consumer

    def _statistics(self, text: str) -> None:
        """Each partition's fetch state, from the consumer's statistics (librdkafka's STATISTICS.md)."""
        partitions = json.loads(text).get("topics", {}).get(self._topic, {}).get("partitions", {})
        self._fetch_state = {int(p): str(found.get("fetch_state")) for p, found in partitions.items() if int(p) >= 0}

    def _check(self, now: float) -> None:
        """A partition whose fetch position has not moved for ``STALL_S`` while behind its end: the consumer is
        replaced (``stalls``). Each partition's end is asked at most once per ``STALL_S``."""
        positions = self._consumer.position([TopicPartition(self._topic, p) for p in self._next])
        behind = []
        for found in positions:
            partition, position = found.partition, found.offset
            if position != self._position.get(partition):
                self._position[partition] = position
                self._moved[partition] = now
                continue
            if now - self._moved[partition] < STALL_S:
                continue
            self._moved[partition] = now
            try:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(self._topic, partition),
                                                                 timeout=CHECK_S, cached=False)
            except KafkaException:
                continue  # the broker away: nothing to compare with
            if high > max(position, low):
                behind.append(f"partition {partition} at {position} of {high} "
                              f"({self._fetch_state.get(partition, 'no statistics')})")
        if behind:
            self.stalls.append(f"{self._topic}: fetch position unmoved for {STALL_S:g} s while behind the end: "
                               f"{'; '.join(behind)}; a new consumer reads on")
            self._consumer.close()
            self._consumer = self._new_consumer()
            self._position = {}

    def _run(self) -> None:
        checked = time.monotonic()
        while not self._stopping.is_set():
            if (now := time.monotonic()) - checked >= CHECK_S:
                checked = now
                self._check(now)
            for message in self._consumer.consume(500, 0.1):
                if message.error() is None:
                    partition, offset = message.partition(), message.offset()
                    if partition is not None and offset is not None:
                        self._next[partition] = offset + 1
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
