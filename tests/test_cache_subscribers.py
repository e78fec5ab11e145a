"""A subscriber of the status cache that raises (the events hub and auto-restart subscribe in production) must not
break reading back: the reader's batch is applied whole, the read barriers move on, and the fault is logged once
per cause and counted (as the retry queue's listeners are)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from status_store.connect.cache import StatusRecord
from status_store.connect.model import ConnectorStatus, Key, State

from .conftest import Broker, StoreFactory

WAIT = 15.0


class Faulty:
    """A subscriber that raises on every record."""

    def applied(self, record: StatusRecord, key: Key) -> None:
        raise RuntimeError("boom")


async def test_a_subscriber_that_raises_leaves_read_your_writes_and_the_other_subscribers_whole(
        broker: Broker, store_factory: StoreFactory, caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    async with store_factory(broker.bootstrap_servers, broker.new_topic(), registry=registry) as store:
        told: list[bytes | None] = []
        store.cache.subscribe(Faulty().applied)
        store.cache.subscribe(lambda record, key: told.append(record.key))
        for number in range(3):
            store.put(ConnectorStatus(f"c{number}", State.RUNNING, "w1:8083", 1))
        with caplog.at_level(logging.ERROR, logger="status_store.connect.cache"):
            await store.read_your_writes(WAIT)
        assert store.cache.connectors() == ["c0", "c1", "c2"]
        assert sorted(told) == [b"status-connector-c0", b"status-connector-c1", b"status-connector-c2"]
        assert registry.get_sample_value("status_listener_errors_total", {"listener": "cache:Faulty"}) == 3
        lines = [r for r in caplog.records if "subscriber of the status cache (Faulty)" in r.getMessage()]
        assert len(lines) == 1
