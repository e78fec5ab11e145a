"""What the agent's fence (agent/PROTOCOL.md, rule 3) assumes of the sidecar's writes, against a real broker: that a
write the sidecar started "lands within its write bound or never". A network that holds bytes rather than refusing
them (a black hole: a partition that drops packets, a switch that buffers them) breaks it: the sidecar's producer
gives the write up at its bound and reports it failed, its request stays in the network, and when the network heals
the broker appends it, after whatever the worker wrote of the key through its own path meanwhile.

This is how the fault matrix's kafka-cut-20s-black-holed row left a deleted connector's task RUNNING in the topic:
the sidecar's attempt at the task's RUNNING, held by the cut, landed at the heal over the leader's tombstone, which
the workers (not cut off) had written through Connect after the agent's fence, well within the 20 s cut.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.java_process import kafka_line
from harness.kafka_proxy import Fault
from harness.real_kafka import KafkaCluster
from harness.worker_pods import SIDECARS
from status_store.errors import WriteFailedError
from status_store.kafka.producer import TopicProducer
from status_store.retry.delivery import Delivery

from .helpers import eventually_value

pytestmark = pytest.mark.timeout(300)

KEY = b"status-task-deleted-1"
RUNNING = b'{"state":"RUNNING","trace":null,"worker_id":"worker-1","generation":3}'
BEFORE = b'{"state":"UNASSIGNED","trace":null,"worker_id":"worker-1","generation":2}'
# The sidecar's write bound (status.storage.retry.delivery.timeout.ms), short so that the test is quick.
WRITE_BOUND_MS = 1000


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One broker with a listener for the sidecars alone behind a proxy (the matrix bed's), as in the fault matrix:
    the sidecars can be cut off while the workers reach the broker."""
    workdir: Path = tmp_path_factory.mktemp("late-write")
    with KafkaCluster(kafka_line("kafka-4"), workdir, client_listeners=[SIDECARS]) as cluster:
        yield cluster


async def outcome(producer: TopicProducer, value: bytes | None) -> WriteFailedError | None:
    """Send a record of ``KEY`` through the sidecar's producer; its error once settled (None: acknowledged)."""
    settled: asyncio.Future[WriteFailedError | None] = asyncio.get_running_loop().create_future()

    def done(_: Delivery | None, error: WriteFailedError | None) -> None:
        settled.set_result(error)

    producer.send(KEY, value, done)
    # librdkafka settles every record within its message timeout (the write bound): bounded well above it.
    async with asyncio.timeout(30):
        return await settled


def last_value(kafka: KafkaCluster, topic: str) -> bytes | None:
    """The value of ``KEY``'s last record in the topic, as Connect's read side keeps it (None: a tombstone)."""
    values = [value for key, value in kafka.records(topic) if key == KEY]
    assert values, f"no record of {KEY!r} in {topic}"
    return values[-1]


async def test_a_write_the_sidecar_gave_up_under_a_black_hole_lands_at_the_heal_over_a_newer_record(
        kafka: KafkaCluster) -> None:
    topic = f"late-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=1)
    proxies = kafka.listener_proxies(SIDECARS)
    sidecar = TopicProducer(topic, kafka.bootstrap(SIDECARS), {}, delivery_timeout_ms=WRITE_BOUND_MS)
    await sidecar.start(30)
    try:
        # Before the cut: the sidecar's producer knows the partition's leader and holds its connection.
        assert await outcome(sidecar, BEFORE) is None
        for proxy in proxies:
            proxy.set_fault(Fault.BLACKHOLE)
        failed = await outcome(sidecar, RUNNING)
        assert failed is not None, "a write to a black-holed broker was acknowledged"
        # The sidecar said it could not write: the agent's fence passes, and the worker (not cut off) writes the key
        # through its own path: here the leader's tombstone of a deleted connector's task.
        worker = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
        worker.produce(topic, key=KEY, value=None)
        assert worker.flush(30) == 0
        assert last_value(kafka, topic) is None
        for proxy in proxies:
            proxy.set_fault(Fault.NONE)
        # The network heals: the request the sidecar's producer gave up goes on to the broker, which appends it.
        landed = await asyncio.to_thread(eventually_value, lambda: last_value(kafka, topic), lambda v: v is not None,
                                         30.0, 0.2, "the key's last value after the heal")
        assert landed == RUNNING
    finally:
        for proxy in proxies:
            proxy.set_fault(Fault.NONE)
        await sidecar.stop(5)
