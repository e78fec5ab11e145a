"""The fault suite (issue 6): outages, a killed sidecar, a killed broker, leader moves with fatal and
retriable errors, a slow broker. Every scenario streams many updates per key, injects its fault, lets
the stores recover, and ends with the same checks (``faults_support.check``): the counters add up, no
latest status is lost under park with a spool, and under drop every loss is a counted failure.

Each wait is bounded; the brokers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from status_store.librdkafka import MockCluster

from .conftest import Broker, StoreFactory
from .faults_support import check, settle, stream, stream_until_written, subjects
from .test_exhausted import counts

NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
# A one-shot fatal error (TOPIC_AUTHORIZATION_FAILED would stick to the topic inside librdkafka).
INVALID_RECORD = 87
# Leader changes the store retries at once (KIP-951; librdkafka re-sends NOT_LEADER_OR_FOLLOWER itself),
# plain retriable errors, and a fatal one.
MIXED_ERRORS = (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, INVALID_RECORD)

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


async def test_leader_moves_and_fatal_errors_mixed_with_retriable_ones(
        mock_cluster: MockCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    topics = [broker.new_topic(), broker.new_topic()]
    rng = random.Random(6)
    async with subjects(store_factory, broker.bootstrap_servers, topics, tmp_path) as fleet:
        await stream(fleet, KEYS, range(3), 0.1)
        for round_ in range(3, 23):
            for topic in topics:
                mock_cluster.set_leader(topic, rng.randrange(5), rng.choice(mock_cluster.broker_ids))
            mock_cluster.push_request_errors(MockCluster.PRODUCE, *rng.choices(MIXED_ERRORS, k=4))
            await stream(fleet, KEYS if round_ == 3 else AFTER_TAIL, [round_], 0.1)
        mock_cluster.clear_request_errors(MockCluster.PRODUCE)
        await stream(fleet, AFTER_TAIL, range(23, 25), 0.1)
        await settle(fleet)
        for subject in fleet:
            check(subject)
    # The faults reached the stores (the pushed errors go to whichever store's Produce request comes next).
    assert sum(subject.outcomes.failed("INVALID_RECORD") for subject in fleet) > 0
    assert sum(subject.outcomes.retried["FENCED_LEADER_EPOCH"] for subject in fleet) > 0
    assert sum(subject.outcomes.retried["NOT_ENOUGH_REPLICAS"] for subject in fleet) > 0


async def test_a_slow_broker_under_load_loses_no_latest_status(
        mock_cluster: MockCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    async with subjects(store_factory, broker.bootstrap_servers, [broker.new_topic(), broker.new_topic()],
                        tmp_path, **{"status.storage.retry.delivery.timeout.ms": "1000"}) as fleet:
        await stream(fleet, KEYS, range(3), 0.1)
        mock_cluster.set_rtt(-1, 200)  # slow, but inside the 1 s bound of an attempt
        await stream(fleet, KEYS, range(3, 13), 0.1)
        mock_cluster.set_rtt(-1, 3000)  # a spike: attempts time out and are retried
        await stream(fleet, KEYS, [13], 0.25)
        await stream(fleet, AFTER_TAIL, range(14, 22), 0.25)
        mock_cluster.set_rtt(-1, 0)
        after = await stream_until_written(fleet, AFTER_TAIL, 22, 0.1)
        await stream(fleet, AFTER_TAIL, range(after, after + 2), 0.1)
        await settle(fleet)
        for subject in fleet:
            check(subject)
            assert counts(subject.metrics)["status_update_retry_total"] > 0
