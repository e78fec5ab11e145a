"""The cluster's word that a held partition can take writes again sends its probe at once (``kafka.partition_watch``),
on Apache Kafka's brokers: with one of three brokers stopped, a status topic whose ``min.insync.replicas`` is raised
to 3 refuses every write (NOT_ENOUGH_REPLICAS) until the setting comes back down, as bench/connect_outage.py makes
its outage; the held partition's next probe is far away. (A broker caps ``min.insync.replicas`` at a partition's
replicas, so one broker cannot make the outage.)"""

from __future__ import annotations

import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from harness.java_process import wait_until
from harness.real_kafka import KafkaCluster
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State
from status_store.retry.updates import Result

from .conftest import StoreFactory
from .helpers import eventually

WAIT = 30.0
# The held partition's probes 20 s apart: a recovery noticed sooner is the watch's.
SLOW_PROBES = {"status.storage.retry.initial.backoff.ms": "20000", "status.storage.retry.max.backoff.ms": "20000",
               "status.storage.retry.probe.max.backoff.ms": "20000", "status.storage.retry.jitter.factor": "0",
               "status.storage.retry.max.retries": "1000", "status.storage.partitions": "1"}


def set_min_in_sync(kafka: KafkaCluster, topic: str, value: int) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def refused_for_replicas(producer: Producer, topic: str) -> bool:
    """Whether the partition's leader refuses a write for too few replicas in sync (it has applied the raised
    ``min.insync.replicas``; a write that comes before it does is written). The probe is a status of its own."""
    errors: list[KafkaError | None] = []
    producer.produce(topic, encode_status(State.RUNNING, "probe:8083", 1, None), b"status-connector-probe",
                     on_delivery=lambda error, _: errors.append(error))
    producer.flush(15)
    return bool(errors) and errors[0] is not None and errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS


async def test_a_held_partition_is_probed_as_soon_as_the_cluster_can_take_its_writes(
        kafka_cluster: KafkaCluster, store_factory: StoreFactory) -> None:
    kafka = kafka_cluster
    topic = f"watch-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"})
    kafka.stop_broker(3)
    try:
        wait_until(lambda: len(kafka.partitions(topic)[0].isrs) == 2, WAIT, "broker 3 out of the ISR")
        async with store_factory(kafka.bootstrap_servers, topic, **SLOW_PROBES) as store:
            set_min_in_sync(kafka, topic, 3)
            # At load the leader applies the setting later than the change returns: a status written before it does
            # is written, and nothing is held (a whole-suite run at load 30).
            probe = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all",
                              "message.send.max.retries": 0, "message.timeout.ms": 10_000, "log_level": 0})
            wait_until(lambda: refused_for_replicas(probe, topic), WAIT, "min.insync.replicas=3 applied by the leader")
            update = store.put(ConnectorStatus("c", State.RUNNING, "w:8083", 1))
            await eventually(lambda: store.queue.held_partitions == [0], WAIT)
            # The watch has read the partition as it is during the outage: the change it then reads is the recovery.
            await eventually(lambda: 0 in store._watch._last, WAIT)
            probes = store.queue.probes_total
            set_min_in_sync(kafka, topic, 2)
            outcome = await update.result(10.0)
            assert outcome.result is Result.WRITTEN
            # Probes sent as the watch read the change (up to 3, the first may come before the leader applied it),
            # long before the schedule's next one (20 s).
            assert store.queue.probes_total <= probes + 3
            assert store.partition_signals >= 1
    finally:
        kafka.start_broker(3)
        kafka.wait_in_sync([topic, "__consumer_offsets"])
