"""Plain confluent-kafka clients for checking what is really in a topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from confluent_kafka import Producer

from status_store.kafka.reading import read_to_end
from status_store.store import StatusStore

WAIT = 15.0


def raw_producer(store: StatusStore) -> Producer:
    """A plain client writing the way a Connect worker does (Java partitioning)."""
    return Producer({"bootstrap.servers": store.bootstrap_servers, "partitioner": "murmur2_random"})


def write_raw(store: StatusStore, *records: tuple[bytes | None, bytes | None]) -> None:
    producer = raw_producer(store)
    for key, value in records:
        producer.produce(store.config.topic, value, key)
    assert producer.flush(WAIT) == 0


def read_raw(store: StatusStore, topic: str | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the status topic (or another topic) as (partition, key, value), read with a plain
    consumer."""
    return [(m.partition() or 0, m.key(), m.value())
            for batch in read_to_end({"bootstrap.servers": store.bootstrap_servers}, topic or store.config.topic, WAIT)
            for m in batch]


def last_values(store: StatusStore) -> dict[bytes | None, bytes | None]:
    """The last value of each key in the topic (records of a key share a partition, in order)."""
    return {key: value for _, key, value in read_raw(store)}


async def eventually(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait, bounded, until ``condition()`` holds (for states that no event announces)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.01)


