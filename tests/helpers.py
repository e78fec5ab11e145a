"""Plain confluent-kafka clients for checking what is really in a topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from confluent_kafka import Producer

from status_store.kafka.reading import read_to_end
from status_store.store import StatusStore

WAIT = 15.0
T = TypeVar("T")


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


def eventually_value(probe: Callable[[], T], accept: Callable[[T], bool], timeout: float = WAIT,
                     interval: float = 0.2, what: str = "the answer",
                     pause: Callable[[float], object] = time.sleep) -> T:
    """``eventually`` for a test's own thread (no event loop): ask ``probe()`` again, bounded, until
    ``accept`` takes its answer; returns that answer, or fails naming ``what`` and the last answer. ``pause``
    waits between the asks (a browser page's own wait, which keeps handling the page's events meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if accept(value):
            return value
        assert time.monotonic() < deadline, f"{what} still {value!r} after {timeout:g} s"
        pause(interval)


async def eventually_awaited(probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], timeout: float = WAIT,
                             interval: float = 0.05, what: str = "the answer") -> T:
    """``eventually_value`` for an answer that is awaited (a scrape, a request): ask again, bounded, until
    ``accept`` takes it; returns that answer, or fails naming ``what`` and the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value):
            return value
        assert time.monotonic() < deadline, f"{what} still {value!r} after {timeout:g} s"
        await asyncio.sleep(interval)
