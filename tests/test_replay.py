"""A spooled update replayed at start is a retry: Connect's rules decide it, and it never overwrites what
another writer wrote after it was accepted (compare-and-set on what the store had read of its key)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, status_key
from status_store.durable.replay import conflict, tokens
from status_store.durable.spool import Spool
from status_store.retry.delivery import Delivery
from status_store.retry.updates import Outcome, Result, StatusUpdate, UpdateKind

from .conftest import Broker, StoreFactory
from .helpers import last_values

WAIT = 20.0
QUICK = {"status.storage.retry.delivery.timeout.ms": "300", "status.storage.retry.initial.backoff.ms": "100",
         "status.storage.retry.max.backoff.ms": "200", "sidecar.shutdown.timeout.ms": "300"}
GEN5 = b'{"state":"RUNNING","trace":null,"worker_id":"w2:8083","generation":5}'


def gen1_failed(name: str = "c") -> ConnectorStatus:
    return ConnectorStatus(name, State.FAILED, "w1:8083", 1, "boom")


async def accept_during_outage(mock_cluster: FaultyCluster, store_factory: StoreFactory, topic: str, spool: Path,
                               *statuses: ConnectorStatus | TaskStatus) -> None:
    """A sidecar accepts these while the brokers are down and stops before they are written (the spool keeps
    them), as a sidecar killed during an outage would."""
    async with store_factory(mock_cluster.bootstrap_servers, topic,
                             **{**QUICK, "status.storage.spool.path": str(spool)}) as store:
        await store.read_to_end(WAIT)
        mock_cluster.broker_down(-1)
        for status in statuses:
            store.put(status)
    mock_cluster.broker_up(-1)
    with Spool(spool) as kept:
        assert len(kept) == len({status_key(s) for s in statuses})


def produce(mock_cluster: FaultyCluster, topic: str, *records: tuple[bytes, bytes | None]) -> None:
    """Records another writer produces while the sidecar is down (Java's partitioning, as a worker's)."""
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "partitioner": "murmur2_random"})
    for key, value in records:
        producer.produce(topic, value, key)
    assert producer.flush(WAIT) == 0


async def restart(mock_cluster: FaultyCluster, store_factory: StoreFactory, topic: str, spool: Path,
                  registry: CollectorRegistry) -> dict[bytes | None, bytes | None]:
    """Start the sidecar again on its spool; the topic's last value per key once every replay settled."""
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry,
                             **{**QUICK, "status.storage.spool.path": str(spool)}) as store:
        await store.flush(WAIT)
        await store.read_your_writes(WAIT)
        return last_values(store)


def superseded(registry: CollectorRegistry, kind: str = "connector") -> float:
    return registry.get_sample_value("status_update_superseded_total", {"kind": kind}) or 0.0


async def test_a_replay_never_overwrites_another_workers_newer_status(mock_cluster: FaultyCluster,
                                                                      store_factory: StoreFactory,
                                                                      tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    await accept_during_outage(mock_cluster, store_factory, topic, spool, gen1_failed())
    # While the sidecar is down, another worker's generation-5 RUNNING lands after the gen-1 FAILED was accepted.
    produce(mock_cluster, topic, (b"status-connector-c", GEN5))
    registry = CollectorRegistry()
    values = await restart(mock_cluster, store_factory, topic, spool, registry)
    assert values[b"status-connector-c"] == GEN5
    assert superseded(registry) == 1
    with Spool(spool) as kept:
        assert len(kept) == 0


async def test_a_replay_does_not_revive_a_key_deleted_meanwhile(mock_cluster: FaultyCluster,
                                                                store_factory: StoreFactory, tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    task = TaskStatus(TaskId("c", 0), State.FAILED, "w1:8083", 1, "boom")
    await accept_during_outage(mock_cluster, store_factory, topic, spool, gen1_failed("d"), task)
    # The connectors are deleted while the sidecar is down: a tombstone for "d", and for "c" (its tasks with it).
    produce(mock_cluster, topic, (b"status-connector-d", None), (b"status-connector-c", None))
    registry = CollectorRegistry()
    values = await restart(mock_cluster, store_factory, topic, spool, registry)
    assert values[b"status-connector-d"] is None
    assert b"status-task-c-0" not in values
    assert superseded(registry, "connector") == 1
    assert superseded(registry, "task") == 1


async def test_a_replay_writes_what_no_one_else_wrote_over(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                                                          tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    spooled = tmp_path / "spool.db"
    # The key has a record before the outage (our own, written and read back): the replay stands on it.
    async with store_factory(mock_cluster.bootstrap_servers, topic,
                             **{**QUICK, "status.storage.spool.path": str(spooled)}) as store:
        assert (await store.put(ConnectorStatus("c", State.RUNNING, "w1:8083", 1)).result(WAIT)).ok
        assert (await store.put(ConnectorStatus("e", State.RUNNING, "w1:8083", 1)).result(WAIT)).ok
    await accept_during_outage(mock_cluster, store_factory, topic, spool, gen1_failed("c"), gen1_failed("new"))
    registry = CollectorRegistry()
    values = await restart(mock_cluster, store_factory, topic, spool, registry)
    expected = encode_status(State.FAILED, "w1:8083", 1, "boom")
    assert values[b"status-connector-c"] == expected
    assert values[b"status-connector-new"] == expected
    assert superseded(registry) == 0


async def test_a_replay_writes_over_its_own_earlier_write_that_landed_unacknowledged(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    running = ConnectorStatus("c", State.RUNNING, "w1:8083", 1)
    # RUNNING goes out (and waits in the client while the brokers are down), FAILED waits behind it; the
    # sidecar stops before either is acknowledged.
    await accept_during_outage(mock_cluster, store_factory, topic, spool, running, gen1_failed())
    # The RUNNING write had reached the broker after all (no acknowledgement came back): our own record.
    produce(mock_cluster, topic, (b"status-connector-c", encode_status(State.RUNNING, "w1:8083", 1, None)))
    registry = CollectorRegistry()
    values = await restart(mock_cluster, store_factory, topic, spool, registry)
    assert values[b"status-connector-c"] == encode_status(State.FAILED, "w1:8083", 1, "boom")
    assert superseded(registry) == 0


def test_a_value_waiting_behind_our_acknowledged_write_stands_on_that_write(tmp_path: Path) -> None:
    """A key's values a, b, c: a acknowledged, b sent but never landed, c waiting when the sidecar is killed. The
    topic's last record of the key is our own a: replaying c overwrites nothing another writer wrote."""
    key = "status-connector-c"
    a, b, c = (encode_status(State.RUNNING, "w1:8083", generation, None) for generation in (1, 2, 3))
    cache = StatusCache()
    path = tmp_path / "spool.db"

    async def accept() -> None:
        spool = Spool(path, tokens=tokens(cache))
        first, second, third = (StatusUpdate(key, value, UpdateKind.CONNECTOR) for value in (a, b, c))
        for number, update in enumerate((first, second), start=1):
            update.number = number
            spool.on_submitted(update)
        first.attempts = second.attempts = 1  # a went out, and b after it
        spool.settled(first, Outcome(key, Result.WRITTEN, 1, "written", Delivery(0, 5)))
        cache.note_written(key, 5)
        third.number = 3
        spool.on_submitted(third)
        spool.close()  # killed: b and c are unsettled

    asyncio.run(accept())
    cache.apply([StatusRecord(key.encode(), a, 0, 5)])  # the next start reads the topic: a is its last record
    spool = Spool(path)
    [item] = spool.pending()
    spool.close()
    assert item.value == c
    assert conflict(item, cache) is None
