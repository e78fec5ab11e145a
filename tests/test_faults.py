"""The fault suite (issue 6): outages, a killed sidecar, a killed broker, leader moves with fatal and
retriable errors, a slow broker. Every scenario streams many updates per key, injects its fault, lets
the stores recover, and ends with the same checks (``faults_support.check``): the counters add up, no
latest status is lost under park with a spool, and under drop every loss is a counted failure.

Each wait is bounded; the brokers listen on 127.0.0.1 only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from status_store.librdkafka import MockCluster

from .conftest import Broker, StoreFactory
from .faults_support import check, settle, stream, stream_until_written, subjects

KEYS = range(1000)
# Keys whose last update is submitted during the fault: under drop they are the ones that can be lost.
TAIL = range(300)
AFTER_TAIL = range(300, 1000)


@pytest.mark.parametrize(("outage", "interval"), [(2.0, 0.25), (30.0, 1.0)], ids=["2s", "30s"])
async def test_a_broker_outage_during_a_stream_loses_no_latest_status(
        mock_cluster: MockCluster, store_factory: StoreFactory, tmp_path: Path, outage: float,
        interval: float) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    async with subjects(store_factory, broker.bootstrap_servers, [broker.new_topic(), broker.new_topic()],
                        tmp_path) as fleet:
        await stream(fleet, KEYS, range(3), 0.2)
        mock_cluster.broker_down(-1)
        # The tail keys get their last value as the outage begins: it fails (drop) or parks (park) before
        # the brokers come back. A key that keeps changing never exhausts its retries: each value is a
        # new update with its own retries.
        rounds = int(outage / interval)
        await stream(fleet, KEYS, [3], interval)
        await stream(fleet, AFTER_TAIL, range(4, 3 + rounds), interval)
        mock_cluster.broker_up(-1)
        after = await stream_until_written(fleet, AFTER_TAIL, 3 + rounds, 0.2)
        await stream(fleet, AFTER_TAIL, range(after, after + 2), 0.2)
        await settle(fleet)
        park, drop = fleet
        assert park.store.exhausted.parked > 0  # the outage outlasted the retries: parking was exercised
        assert check(park) == {}
        lost = check(drop)
        assert lost, "the outage outlasted the retries: under drop, tail keys lose their latest value"
