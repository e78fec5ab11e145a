"""A write the sidecar gave up that lands late, against a real broker: the whole store undoes it.

The agent's fence (agent/PROTOCOL.md, rule 3) assumes the sidecar's writes "land within the write bound or never". A
network that holds bytes rather than refusing them (a black hole: a partition that drops packets, a proxy that
buffers them) breaks it: the sidecar's producer gives the write up at its bound and reports it failed, its request
stays in the network, and when the network heals the broker appends it, after whatever the worker wrote of the key
through its own path meanwhile. This is how the fault matrix's kafka-cut-20s-black-holed row left a deleted
connector's task RUNNING in the topic: the sidecar's attempt at the task's RUNNING, held by the cut, landed at the
heal over the leader's tombstone, written through Connect after the agent's fence.

Kafka cannot cancel a request in flight, so the store watches the attempt it gave up (status_store/kafka/
late_writes.py) and, when its record is read back after a newer record of its key, writes that newer record again.
One broker for the module, its sidecars' listener behind the fault matrix bed's proxy (the workers reach the broker
directly); each test its own topic and store. The module takes about 40 s.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client import CollectorRegistry

from harness.java_process import kafka_line
from harness.kafka_proxy import Fault
from harness.real_kafka import KafkaCluster
from harness.worker_pods import SIDECARS
from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, TaskStatus, task_key
from status_store.retry.updates import Result
from status_store.store import StatusStore

from .conftest import StoreFactory
from .helpers import eventually, eventually_value

pytestmark = pytest.mark.timeout(300)

TASK = TaskId("deleted", 1)
KEY = task_key(TASK).encode()
BEFORE = TaskStatus(TASK, State.UNASSIGNED, "worker-1:8083", 2)
RUNNING = TaskStatus(TASK, State.RUNNING, "worker-1:8083", 3)
# The sidecar's write bound (status.storage.retry.delivery.timeout.ms), short so that the test is quick.
WRITE_BOUND_MS = 1000
# Waits for the broker and the reader: bounded well above what they take on a loaded machine.
WAIT_S = 30.0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One broker with a listener for the sidecars alone behind a proxy (the matrix bed's), as in the fault matrix:
    the sidecars can be cut off while the workers reach the broker."""
    workdir: Path = tmp_path_factory.mktemp("late-write")
    with KafkaCluster(kafka_line("kafka-4"), workdir, client_listeners=[SIDECARS]) as cluster:
        yield cluster


def values(kafka: KafkaCluster, topic: str) -> list[bytes | None]:
    """The values of ``KEY``'s records in the topic, in order (None: a tombstone)."""
    return [value for key, value in kafka.records(topic) if key == KEY]


def worker_writes(kafka: KafkaCluster, topic: str, value: bytes | None) -> None:
    """A record of ``KEY`` written through the worker's own path (its producer, not cut off)."""
    # Placed as Java's partitioner (and so Connect) places it.
    worker = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all", "partitioner": "murmur2_random"})
    worker.produce(topic, key=KEY, value=value)
    assert worker.flush(WAIT_S) == 0


class _Lease:
    """The agent's lease of its write: it ends once the write's first attempt has failed (the agent takes it back),
    so that the store does not send it again."""

    def __init__(self) -> None:
        self.sent = 0

    def __call__(self) -> str | None:
        self.sent += 1
        return None if self.sent == 1 else "the lease ended"


async def give_up_under_a_black_hole(kafka: KafkaCluster, store: StatusStore) -> None:
    """RUNNING written by the store while its listener is black-holed: given up at the write bound, its request held
    in the network (the proxy) until ``heal``."""
    written = store.put(BEFORE)
    async with asyncio.timeout(WAIT_S):
        assert (await written.result()).result is Result.WRITTEN
    for proxy in kafka.listener_proxies(SIDECARS):
        proxy.set_fault(Fault.BLACKHOLE)
    update = store.put(RUNNING, _Lease())
    async with asyncio.timeout(WAIT_S):
        outcome = await update.result()
    # Not written, its lease ended after its delivery failed: the agent takes it back.
    assert outcome.result is not Result.WRITTEN, f"the black-holed write: {outcome}"
    assert outcome.error is not None, f"the black-holed write: {outcome}"
    assert store.late_writes.watched == 1


def heal(kafka: KafkaCluster) -> None:
    """The network heals: held bytes go on to the broker."""
    for proxy in kafka.listener_proxies(SIDECARS):
        proxy.set_fault(Fault.NONE)


async def landed(kafka: KafkaCluster, topic: str, count: int) -> list[bytes | None]:
    """``KEY``'s values once it has at least ``count`` records."""
    return await asyncio.to_thread(eventually_value, lambda: values(kafka, topic), lambda found: len(found) >= count,
                                   WAIT_S, 0.2, f"{count} records of {KEY!r} in {topic}")


async def test_a_write_given_up_under_a_black_hole_that_lands_over_the_leaders_tombstone_is_undone(
        kafka: KafkaCluster, store_factory: StoreFactory) -> None:
    topic = f"late-{uuid.uuid4().hex[:8]}"
    registry = CollectorRegistry()
    async with store_factory(kafka.bootstrap(SIDECARS), topic, registry=registry, **{
            "status.storage.retry.delivery.timeout.ms": str(WRITE_BOUND_MS)}) as store:
        try:
            await give_up_under_a_black_hole(kafka, store)
            # The sidecar said it could not write: the agent's fence passes, and the leader deletes the connector
            # through Connect (the workers are not cut off).
            worker_writes(kafka, topic, None)
        finally:
            heal(kafka)
        # The request the sidecar's producer gave up goes on to the broker, over the tombstone; the store reads the
        # tombstone, then its own late record, and writes the tombstone again.
        found = await landed(kafka, topic, 4)
        assert found == [encode_status(BEFORE.state, BEFORE.worker_id, 2, None), None,
                         encode_status(RUNNING.state, RUNNING.worker_id, 3, None), None]
        assert (store.late_writes.undone, store.late_writes.left, store.late_writes.watched) == (1, 0, 0)
        await store.read_to_end(WAIT_S)
        assert store.cache.get_task(TASK) is None
        assert registry.get_sample_value("status_late_writes_total", {"outcome": "undone"}) == 1
        assert registry.get_sample_value("status_late_write_watches") == 0


async def test_a_late_landing_with_nothing_of_its_key_read_since_the_give_up_is_left(
        kafka: KafkaCluster, store_factory: StoreFactory) -> None:
    topic = f"late-{uuid.uuid4().hex[:8]}"
    async with store_factory(kafka.bootstrap(SIDECARS), topic, **{
            "status.storage.retry.delivery.timeout.ms": str(WRITE_BOUND_MS)}) as store:
        try:
            await give_up_under_a_black_hole(kafka, store)
        finally:
            heal(kafka)
        running = encode_status(RUNNING.state, RUNNING.worker_id, 3, None)
        assert await landed(kafka, topic, 2) == [encode_status(BEFORE.state, BEFORE.worker_id, 2, None), running]
        await eventually(lambda: store.late_writes.left == 1, WAIT_S)
        await store.read_to_end(WAIT_S)
        assert values(kafka, topic)[-1] == running
        assert store.late_writes.undone == 0


async def test_a_late_landing_over_a_record_equal_to_it_is_left(
        kafka: KafkaCluster, store_factory: StoreFactory) -> None:
    topic = f"late-{uuid.uuid4().hex[:8]}"
    running = encode_status(RUNNING.state, RUNNING.worker_id, 3, None)
    async with store_factory(kafka.bootstrap(SIDECARS), topic, **{
            "status.storage.retry.delivery.timeout.ms": str(WRITE_BOUND_MS)}) as store:
        try:
            await give_up_under_a_black_hole(kafka, store)
            # The agent took the write back and wrote it through Connect: the same record.
            worker_writes(kafka, topic, running)
        finally:
            heal(kafka)
        assert (await landed(kafka, topic, 3))[1:] == [running, running]
        await eventually(lambda: store.late_writes.left == 1, WAIT_S)
        await store.read_to_end(WAIT_S)
        assert len(values(kafka, topic)) == 3
        assert store.late_writes.undone == 0
