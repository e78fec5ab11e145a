"""Plain confluent-kafka clients for checking what is really in a topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

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


def read_raw(store: StatusStore) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the topic as (partition, key, value), read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": store.bootstrap_servers, "group.id": "raw-reader",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(store.config.topic, p, OFFSET_BEGINNING) for p in store.partitions])
    records, at_end, deadline = [], set(), time.monotonic() + WAIT
    try:
        while at_end != set(store.partitions) and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.1):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                elif error is None:
                    records.append((message.partition(), message.key(), message.value()))
    finally:
        consumer.close()
    assert at_end == set(store.partitions), "did not reach the end of the topic in time"
    return records


def last_values(store: StatusStore) -> dict[bytes | None, bytes | None]:
    """The last value of each key in the topic (records of a key share a partition, in order)."""
    return {key: value for _, key, value in read_raw(store)}


async def eventually(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait, bounded, until ``condition()`` holds (for states that no event announces)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.01)
