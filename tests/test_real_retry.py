"""The retry engine on Apache Kafka's brokers (``kafka_cluster``: three brokers, each behind a proxy that can hold
all traffic): Kafka away from the store, then back. A black-holed proxy holds every request and delivers it when it
heals, as a network that held it would: a write that timed out meanwhile may still land."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import murmur2

from harness.kafka_proxy import Fault
from harness.real_kafka import KafkaCluster
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, connector_key
from status_store.retry.updates import Result

from .conftest import StoreFactory
from .helpers import eventually

WAIT = 60.0
# One attempt's bound 2 s (not 10 s) and the probes at most 1 s apart: the outage is seen, and ends, in seconds.
FAST = {"status.storage.retry.delivery.timeout.ms": "2000", "status.storage.retry.max.retries": "1000",
        "status.storage.retry.initial.backoff.ms": "100", "status.storage.retry.probe.max.backoff.ms": "1000",
        "status.storage.partitions": "1"}


@contextmanager
def kafka_away(kafka: KafkaCluster) -> Iterator[None]:
    """Every broker unreachable from the clients (their proxies hold all traffic), until the block ends."""
    for proxy in kafka.proxies:
        proxy.set_fault(Fault.BLACKHOLE)
    try:
        yield
    finally:
        for proxy in kafka.proxies:
            proxy.set_fault(Fault.NONE)


async def test_a_newer_status_lands_after_kafka_comes_back_whatever_another_worker_wrote(
        kafka_cluster: KafkaCluster, store_factory: StoreFactory) -> None:
    """Kafka away from the store; a task's RUNNING (generation 10), then its PAUSED (generation 11); meanwhile
    another worker's status of generation 12 (a rebalance); Kafka back: the topic ends with PAUSED, written."""
    kafka = kafka_cluster
    topic = f"retry-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1, 3, {"cleanup.policy": "compact"})
    async with store_factory(kafka.bootstrap_servers, topic, **FAST) as store:
        task = TaskId("c", 0)
        assert (await store.put(TaskStatus(task, State.UNASSIGNED, "w1:8083", 9)).result(WAIT)).ok
        paused = TaskStatus(task, State.PAUSED, "w1:8083", 11)
        with kafka_away(kafka):
            store.put(TaskStatus(task, State.RUNNING, "w1:8083", 10))
            # Its write timed out: it may still land, so its copies go before anything newer of the key.
            await eventually(lambda: store.queue.held_partitions == [0], WAIT)
            update = store.put(paused)
            store.put(ConnectorStatus("other", State.RUNNING, "w2:8083", 12))
            probes = store.queue.probes_total
            await eventually(lambda: store.queue.probes_total >= probes + 1 or update.done(), WAIT)
        outcome = await update.result(WAIT)
        assert outcome.result is Result.WRITTEN, outcome
        await store.read_your_writes(WAIT)
        assert store.cache.get_task(task) == paused
    last = dict(kafka.records(topic))
    assert last[b"status-task-c-0"] == encode_status(State.PAUSED, "w1:8083", 11, None)


def on_partition(partition: int, partitions: int) -> str:
    """A connector whose status key Java's partitioner puts on ``partition``."""
    return next(name for name in (f"c{i}" for i in range(1000))
                if murmur2(connector_key(name).encode(), partitions) == partition)


class Lease:
    """A writer's lease (``store.Lease``) that the test ends."""

    def __init__(self) -> None:
        self.ended = False

    def __call__(self) -> str | None:
        return "the agent's lease ended" if self.ended else None


async def test_every_held_partition_is_released_once_kafka_is_back_without_a_write_of_its_own(
        kafka_cluster: KafkaCluster, store_factory: StoreFactory) -> None:
    """Kafka away from the store: every partition it writes to is held, one probe goes for them all. The update held
    in partition 0 is abandoned (its writer's lease ended), so the cluster's probe opens partition 0 and goes on to
    the next; once Kafka is back every partition is released within seconds, none waits for a write of its own."""
    kafka = kafka_cluster
    topic = f"retry-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 3, 3, {"cleanup.policy": "compact"})
    async with store_factory(kafka.bootstrap_servers, topic, **{**FAST, "status.storage.partitions": "3"}) as store:
        names = [on_partition(p, 3) for p in range(3)]
        for name in names:
            assert (await store.put(ConnectorStatus(name, State.UNASSIGNED, "w1:8083", 1)).result(WAIT)).ok
        lease = Lease()
        with kafka_away(kafka):
            leased = store.put(ConnectorStatus(names[0], State.RUNNING, "w1:8083", 1), lease)
            updates = [store.put(ConnectorStatus(name, State.RUNNING, "w1:8083", 1)) for name in names[1:]]
            await eventually(lambda: store.queue.held_partitions == [0, 1, 2], WAIT)
            # Two probes (each timed out) later, every partition's first probe of its own has gone to the cluster's.
            probes = store.queue.probes_total
            await eventually(lambda: store.queue.probes_total >= probes + 2, WAIT)
            lease.ended = True
            # The cluster's probe comes to partition 0 in its turn: nothing is left to write there, it opens.
            await eventually(lambda: store.queue.held_partitions == [1, 2], WAIT)
            assert leased.outcome is not None
            assert leased.outcome.result is Result.SUPERSEDED
        await eventually(lambda: store.queue.held_partitions == [], 20.0)
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates)), WAIT)
        assert all(o.ok for o in outcomes), outcomes
