"""The Kafka clients: topic bootstrap (created compacted, a policy that would lose data refused), failure
reporting, bounded stop, barriers."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, murmur2
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.java_process import wait_until
from harness.kafka_proxy import PRODUCE, Fault, is_answered
from harness.real_kafka import KafkaCluster
from harness.tansu import TansuBroker
from status_store.connect.model import ConnectorStatus, State
from status_store.errors import KafkaUnavailableError, TopicSetupError
from status_store.kafka import reader as kafka_reader
from status_store.kafka.partition_watch import PartitionWatch
from status_store.kafka.producer import TopicProducer
from status_store.kafka.settings import consumer_settings, producer_settings
from status_store.kafka.topics import ensure_topic
from status_store.retry.delivery import Delivery
from status_store.retry.updates import Result

from .conftest import PARTITIONS, Broker, StoreFactory

WAIT = 15.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})


def describe(bootstrap: str, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)  # must outlive its futures
    entries = client.describe_configs([resource])[resource].result(WAIT)
    return {name: entry.value for name, entry in entries.items()}


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    client = admin(bootstrap)  # must outlive its futures
    client.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(WAIT)


async def test_bootstrap_creates_a_compacted_topic_with_passed_configs(tansu: TansuBroker) -> None:
    topic = f"status-{uuid.uuid4().hex[:8]}"
    await ensure_topic(tansu.bootstrap_servers, {}, topic, 3, 1, {"min.compaction.lag.ms": "100"}, WAIT)
    assert describe(tansu.bootstrap_servers, topic) == {"cleanup.policy": "compact", "min.compaction.lag.ms": "100"}
    metadata = admin(tansu.bootstrap_servers).list_topics(topic, WAIT)
    assert len(metadata.topics[topic].partitions) == 3
    # Idempotent: an existing compacted topic is accepted as it is.
    await ensure_topic(tansu.bootstrap_servers, {}, topic, 3, 1, {}, WAIT)


@pytest.mark.parametrize(("config", "policy"), [({"cleanup.policy": "delete"}, "delete"),
                                                ({"cleanup.policy": "compact,delete"}, "compact,delete"),
                                                ({}, "delete")])
async def test_bootstrap_refuses_a_topic_that_is_not_only_compacted(tansu: TansuBroker, config: dict[str, str],
                                                                    policy: str) -> None:
    topic = f"status-{uuid.uuid4().hex[:8]}"
    create(tansu.bootstrap_servers, topic, config)
    with pytest.raises(TopicSetupError, match=f"'{topic}' has cleanup.policy={policy}") as caught:
        await ensure_topic(tansu.bootstrap_servers, {}, topic, 5, 1, {}, WAIT)
    assert "--add-config cleanup.policy=compact" in str(caught.value)


async def test_a_store_does_not_start_on_a_delete_policy_topic(tansu: TansuBroker,
                                                               store_factory: StoreFactory) -> None:
    topic = f"status-{uuid.uuid4().hex[:8]}"
    create(tansu.bootstrap_servers, topic, {"cleanup.policy": "delete"})
    with pytest.raises(TopicSetupError, match="cleanup.policy=delete"):
        async with store_factory(tansu.bootstrap_servers, topic):
            pass


async def test_bootstrap_carries_on_where_configs_cannot_be_described(mock_cluster: FaultyCluster,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    mock_cluster.create_topic("connect-status", 5, 3)
    with caplog.at_level(logging.DEBUG):  # expected of an embedded broker: DEBUG (tests/test_client_log.py)
        await ensure_topic(mock_cluster.bootstrap_servers, {}, "connect-status", 5, 3, {}, WAIT)
    assert "Cannot describe the configs of status topic connect-status" in caplog.text


async def test_bootstrap_reports_a_topic_it_cannot_create(mock_cluster: FaultyCluster) -> None:
    with pytest.raises(TopicSetupError, match="does not exist and could not be created"):
        await ensure_topic(mock_cluster.bootstrap_servers, {}, "missing", 5, 3, {}, WAIT)


async def test_unreachable_brokers_fail_fast_with_a_clear_error() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    with pytest.raises(KafkaUnavailableError, match=f"cannot reach Kafka at {bootstrap}"):
        await ensure_topic(bootstrap, {}, "t", 5, 3, {}, 2.0)


async def test_a_failed_write_is_reported_with_its_error(mock_cluster: FaultyCluster,
                                                        store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    no_retries = {"status.storage.retry.max.retries": "0"}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **no_retries) as store:
        mock_cluster.start_tracking()
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS)
        outcome = await store.put(ConnectorStatus("c", State.RUNNING, "w:1", 1)).result(WAIT)
        assert (outcome.result, outcome.attempts, outcome.key) == (Result.FAILED, 1, "status-connector-c")
        assert outcome.error is not None
        assert (outcome.error.code, outcome.error.name) == (NOT_ENOUGH_REPLICAS, "NOT_ENOUGH_REPLICAS")
        assert len(mock_cluster.requests(FaultyCluster.PRODUCE)) == 1
        # The store goes on: the next write succeeds and is read back.
        assert (await store.put(ConnectorStatus("c", State.PAUSED, "w:1", 1)).result(WAIT)).ok
        await store.read_your_writes(WAIT)
        assert store.cache.get_connector("c") == ConnectorStatus("c", State.PAUSED, "w:1", 1)


async def test_the_late_write_watch_bounds_are_the_settings(mock_cluster: FaultyCluster,
                                                              store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, **{"sidecar.late.writes.watch.ms": "5000",
                                                                      "sidecar.late.writes.watches.max": "3"}) as store:
        assert (store.late_writes.watch_age_s, store.late_writes.max_watches) == (5.0, 3)
    async with store_factory(mock_cluster.bootstrap_servers, topic) as store:
        assert (store.late_writes.watch_age_s, store.late_writes.max_watches) == (960.0, 10000)


async def test_stop_is_bounded_while_every_broker_is_down(mock_cluster: FaultyCluster,
                                                          store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, **{"sidecar.shutdown.timeout.ms": "500"}) as store:
        mock_cluster.broker_down(-1)
        updates = [store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1)) for i in range(50)]
        lost = await asyncio.wait_for(store.stop(), WAIT)
    assert sorted(u.key for u in lost) == sorted(u.key for u in updates)
    assert all(u.outcome is not None and u.outcome.result is Result.FAILED for u in updates)


async def test_read_to_end_sees_records_written_in_many_batches(broker: Broker, store_factory: StoreFactory) -> None:
    # Tansu's ListOffsets counts batches, not records: a barrier trusting it would stop early.
    topic = broker.new_topic()
    async with store_factory(broker.bootstrap_servers, topic) as store:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random",
                             "linger.ms": 0})
        for i in range(500):
            producer.produce(topic, b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":%d}' % i,
                             b"status-task-c-%d" % i)
            if i % 50 == 0:
                producer.flush(WAIT)
        assert producer.flush(WAIT) == 0
        await store.read_to_end(WAIT)
        assert len(store.cache.get_all_tasks("c")) == 500


async def test_writes_beyond_the_client_queue_are_kept_in_order(broker: Broker, store_factory: StoreFactory) -> None:
    # librdkafka's queue holds 10 records here; the rest wait in the log's backlog, in order.
    async with store_factory(broker.bootstrap_servers, broker.new_topic(),
                             **{"sidecar.kafka.queue.buffering.max.messages": "10"}) as store:
        updates = [store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1)) for i in range(600)]
        await store.flush(WAIT)
        outcomes = [u.outcome for u in updates]
        assert all(o is not None and o.ok and o.delivery is not None for o in outcomes)
        by_partition: dict[int, list[int]] = {}
        for outcome in outcomes:
            assert outcome is not None
            assert outcome.delivery is not None
            by_partition.setdefault(outcome.delivery.partition, []).append(outcome.delivery.offset)
        assert all(offsets == sorted(offsets) for offsets in by_partition.values())
        await store.read_your_writes(WAIT)
        assert len(store.cache.connectors()) == 600


class FlakyConsumer(Consumer):
    """The real consumer, with one injected failure of consume()."""

    failures = 1

    def consume(self, *args: Any, **kwargs: Any) -> list[Message]:
        if FlakyConsumer.failures:
            FlakyConsumer.failures -= 1
            raise RuntimeError("injected consume failure")
        return super().consume(*args, **kwargs)


async def test_the_reader_survives_an_error_and_skips_nothing(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(kafka_reader, "Consumer", FlakyConsumer)
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic) as store:
        for i in range(50):
            store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1))
        await store.read_your_writes(WAIT)
        assert len(store.cache.connectors()) == 50
    assert "reader hit an error" in caplog.text


async def test_a_write_is_read_back_when_it_arrives_not_when_the_readers_poll_ends(
        broker: Broker, store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader waits this long for records when there are none (so a stop is seen within it). A reader that asked
    # for a whole batch within it held every record until it ended: each ?wait=true write took the rest of the
    # interval (100 ms at the default), where the log had it read back within milliseconds.
    monkeypatch.setattr(kafka_reader, "POLL_INTERVAL_S", 4.5)
    async with store_factory(broker.bootstrap_servers, broker.new_topic()) as store:
        # Each write lands at some point of an interval; held until its end, one in three would be seen within 1.5 s,
        # and all six one run in 700.
        for i in range(6):
            update = store.put(ConnectorStatus("c", State.RUNNING if i % 2 else State.PAUSED, "w:1", 1))
            await store.wait_visible([update], 1.5)


def test_the_clients_send_each_write_at_once_as_connects_do() -> None:
    # Java's client sets TCP_NODELAY on every broker connection; librdkafka leaves Nagle's algorithm on, so a small
    # Produce or Fetch could wait for the delayed ACK of the request before it. And a write is sent without lingering
    # for a batch (one request in flight batches the rest behind it). Both stay overridable (sidecar.kafka.*).
    producer = producer_settings("127.0.0.1:9092", {})
    reader = consumer_settings("127.0.0.1:9092", {})
    assert (producer["socket.nagle.disable"], producer["linger.ms"]) == ("true", "0")
    assert reader["socket.nagle.disable"] == "true"
    assert producer_settings("127.0.0.1:9092", {"linger.ms": "20", "socket.nagle.disable": "false"})[
        "linger.ms"] == "20"
    Producer(producer)  # librdkafka takes them
    Consumer(reader)


def test_a_timed_proxy_notes_each_answer_and_the_requests_sent_behind_another_on_their_connection(
        kafka_cluster: KafkaCluster) -> None:
    # bench.connect_outage reads the brokers' answers to each worker's status writes so: librdkafka sends two
    # partitions of a leader in two requests, and the broker reads the second once it has answered the first.
    topic = f"timed-{uuid.uuid4().hex[:8]}"
    client_admin = admin(kafka_cluster.bootstrap_servers)  # must outlive its futures
    client_admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(WAIT)
    wait_until(lambda: all(found.leader >= 0 for found in client_admin.list_topics(
        topic, timeout=WAIT).topics[topic].partitions.values()), WAIT, "every partition led")
    by_leader: dict[int, list[int]] = {}
    for partition, found in client_admin.list_topics(topic, timeout=WAIT).topics[topic].partitions.items():
        by_leader.setdefault(found.leader, []).append(partition)
    leader, (first, second, *_) = next((leader, found) for leader, found in by_leader.items() if len(found) > 1)
    proxy = kafka_cluster.broker(leader).proxy
    assert proxy is not None
    client = f"timed-{uuid.uuid4().hex[:8]}"
    proxy.timed = True
    try:
        producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "client.id": client,
                             "acks": "all", "linger.ms": 0, "max.in.flight.requests.per.connection": 5})
        producer.produce(topic, b"up", partition=first)  # the connection is up, answered alone
        assert producer.flush(WAIT) == 0
        since = time.monotonic()
        # Both requests wait in the proxy until it lets them through, one right after the other.
        proxy.set_fault(Fault.BLACKHOLE)
        producer.produce(topic, b"a", partition=first)
        producer.produce(topic, b"b", partition=second)
        producer.poll(1.0)  # librdkafka sends both meanwhile (no linger)
        proxy.set_fault(Fault.NONE)
        assert producer.flush(WAIT) == 0
    finally:
        proxy.set_fault(Fault.NONE)
        proxy.timed = False
    answers = proxy.answers(PRODUCE, [client], since)
    assert [answer.behind for answer in answers] == [False, True]
    assert all(answer.answered >= answer.sent >= since for answer in answers)
    assert proxy.answers(PRODUCE, [client])[0].behind is False  # the first write's, before
    assert proxy.answers(PRODUCE, ["another client"]) == []


@pytest.mark.parametrize(("version", "acks", "answered"), [(7, 0, False), (7, -1, True), (9, 0, False), (9, 1, True),
                                                           (11, -1, True)])
def test_a_produce_request_with_acks_0_is_not_awaited_by_a_timed_proxy(version: int, acks: int,
                                                                       answered: bool) -> None:
    # Kafka's Produce request: the header (API key, version, correlation id, client id; from version 9 its tagged
    # fields), then the transactional id (from version 9 a compact nullable string) and acks.
    client = b"c"
    header = struct.pack(">hhih", PRODUCE, version, 7, len(client)) + client
    if version >= 9:
        body = header + b"\x01\x00\x00" + b"\x00" + struct.pack(">h", acks)  # an empty tagged field; no id
    else:
        body = header + struct.pack(">h", -1) + struct.pack(">h", acks)
    assert is_answered(PRODUCE, version, body, len(header)) is answered
    assert is_answered(PRODUCE, version, body[:len(header) + 1], len(header)) is True  # cut short: awaited
    assert is_answered(3, 12, header, len(header)) is True  # not a Produce request


async def test_a_write_goes_out_while_another_partitions_write_to_its_leader_is_unanswered_and_keys_keep_order(
        kafka_cluster: KafkaCluster, store_factory: StoreFactory) -> None:
    # librdkafka puts one partition in each ProduceRequest. With one request in flight per connection (Connect's
    # max.in.flight.requests.per.connection=1), a write to a second partition of the same leader waited for the first
    # one's answer (an acks=all round trip) before it was sent; Java's client (a stock worker's) sends both partitions'
    # records in one request. More in flight must not reorder a key's writes: a newer write of the unanswered key
    # waits until the older one settles, and lands after it.
    topic = f"partitions-{uuid.uuid4().hex[:8]}"
    # Attempts outlast the wait below: none fails meanwhile (which would free the connection).
    async with store_factory(kafka_cluster.bootstrap_servers, topic,
                             **{"status.storage.retry.delivery.timeout.ms": "60000"}) as store:
        names = {murmur2(f"status-connector-c{i}".encode(), PARTITIONS): f"c{i}" for i in range(200)}
        assert len(names) == PARTITIONS
        # Five partitions on three brokers: two share a leader.
        by_leader: dict[int, list[int]] = {}
        for partition, found in admin(kafka_cluster.bootstrap_servers).list_topics(
                topic, timeout=WAIT).topics[topic].partitions.items():
            by_leader.setdefault(found.leader, []).append(partition)
        leader, (first, second, *_) = next((leader, found) for leader, found in by_leader.items() if len(found) > 1)
        for name in names.values():  # every connection is up
            await store.put(ConnectorStatus(name, State.RUNNING, "w:1", 1)).result(WAIT)
        proxy = kafka_cluster.broker(leader).proxy
        assert proxy is not None
        # The leader takes what is sent and answers nothing until the end of the check.
        proxy.set_fault(Fault.UNANSWERED)
        try:
            before = proxy.requests(PRODUCE)
            older = store.put(ConnectorStatus(names[first], State.PAUSED, "w:1", 1))
            other = store.put(ConnectorStatus(names[second], State.PAUSED, "w:1", 1))
            newer = store.put(ConnectorStatus(names[first], State.FAILED, "w:1", 1))
            await asyncio.to_thread(wait_until, lambda: proxy.requests(PRODUCE) - before >= 2, WAIT,
                                    "both partitions' writes on their way while the first is unanswered")
        finally:
            proxy.set_fault(Fault.NONE)
        outcomes = [await write.result(WAIT) for write in (older, other, newer)]
        assert [outcome.delivery.partition for outcome in outcomes if outcome.delivery is not None] == [
            first, second, first]
        # The unanswered key's newer write went after its older one settled, and landed after it.
        assert outcomes[0].delivery is not None
        assert outcomes[2].delivery is not None
        assert outcomes[2].delivery.offset > outcomes[0].delivery.offset
        await store.read_your_writes(WAIT)
        connector = store.cache.get_connector(names[first])
        assert connector is not None
        assert connector.state is State.FAILED


async def test_a_renewed_producer_s_unanswered_writes_settle_through_it_and_the_stop_waits_for_them(
        kafka_cluster: KafkaCluster) -> None:
    """``TopicProducer.renew`` (the topic was created again): a write unanswered when the producer is renewed gets its
    outcome from the producer that sent it, later writes go through the new one meanwhile, and the store's stop flushes,
    and settles, what a renewed producer still holds."""
    topic = f"renew-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, PARTITIONS, 3)
    leaders = {n: p.leader for n, p in kafka_cluster.partitions(topic).items()}
    keys = {murmur2(f"k{i}".encode(), PARTITIONS): f"k{i}".encode() for i in range(200)}
    held = 0
    other = next(p for p in keys if leaders[p] != leaders[held])
    proxy = kafka_cluster.broker(leaders[held]).proxy
    assert proxy is not None
    loop = asyncio.get_running_loop()
    producer = TopicProducer(topic, kafka_cluster.bootstrap_servers, {}, delivery_timeout_ms=60000)

    def send(partition: int) -> asyncio.Future[tuple[Delivery | None, Exception | None]]:
        outcome: asyncio.Future[tuple[Delivery | None, Exception | None]] = loop.create_future()
        producer.send(keys[partition], b"v", lambda delivery, error: outcome.set_result((delivery, error)))
        return outcome

    async def unanswered() -> asyncio.Future[tuple[Delivery | None, Exception | None]]:
        before = proxy.requests(PRODUCE)
        outcome = send(held)
        await asyncio.to_thread(wait_until, lambda: proxy.requests(PRODUCE) > before, WAIT, "the write sent")
        return outcome

    await producer.start(WAIT)
    try:
        for partition in keys:  # every connection up
            assert (await asyncio.wait_for(send(partition), WAIT))[1] is None
        proxy.set_fault(Fault.UNANSWERED)
        older = await unanswered()
        producer.renew("a test")
        assert (await asyncio.wait_for(send(other), WAIT))[1] is None  # through the new producer meanwhile
        assert not older.done()
        proxy.set_fault(Fault.NONE)
        delivery, error = await asyncio.wait_for(older, WAIT)
        assert error is None
        assert delivery is not None
        assert delivery.partition == held
        assert (await asyncio.wait_for(send(held), WAIT))[1] is None  # the new producer's connection to the leader up
        proxy.set_fault(Fault.UNANSWERED)
        last = await unanswered()
        producer.renew("a test")
    finally:
        pending = await producer.stop(1.0)
        proxy.set_fault(Fault.NONE)
    assert pending == 1
    delivery, error = await asyncio.wait_for(last, WAIT)
    assert delivery is None
    assert error is not None


async def test_a_producer_failing_writes_the_cluster_says_it_could_take_is_renewed(
        kafka_cluster: KafkaCluster, store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A librdkafka producer stuck on stale leaders, made as librdkafka's issue #4898 makes one (the topic created again
    after its leaders moved), with the topic's id left unread so that nothing but the partitions' state tells: once the
    cluster has said for two delivery timeouts that a held partition can take writes, the store writes through a new
    producer, and every write lands."""
    async def unread(_: PartitionWatch) -> None:
        return None

    monkeypatch.setattr(PartitionWatch, "_check_topic_id", unread)
    topic = f"stuck-{uuid.uuid4().hex[:8]}"
    names = list({murmur2(f"status-connector-c{i}".encode(), PARTITIONS): f"c{i}" for i in range(200)}.values())
    settings = {"status.storage.replication.factor": "3", "status.storage.retry.delivery.timeout.ms": "3000",
                "status.storage.retry.max.retries": "1000", "status.storage.retry.timeout.ms": "600000"}
    async with store_factory(kafka_cluster.bootstrap_servers, topic, **settings) as store:

        async def write_all(state: State) -> list[Result]:
            outcomes = await asyncio.gather(*(store.put(ConnectorStatus(name, state, "w:1", 1)).result(60)
                                              for name in names))
            return [outcome.result for outcome in outcomes]

        # Every leader moves, and moves back, while the store writes: its producer holds leader epochs above 0.
        for node in kafka_cluster.brokers:
            await asyncio.to_thread(kafka_cluster.stop_broker, node.node_id)
            assert await write_all(State.PAUSED) == [Result.WRITTEN] * PARTITIONS
            await asyncio.to_thread(kafka_cluster.start_broker, node.node_id)
            await asyncio.to_thread(kafka_cluster.wait_in_sync, [topic])
            assert await write_all(State.RUNNING) == [Result.WRITTEN] * PARTITIONS
        client = admin(kafka_cluster.bootstrap_servers)
        client.delete_topics([topic], operation_timeout=30)[topic].result(60)
        await asyncio.to_thread(wait_until, lambda: topic not in client.list_topics(timeout=5).topics, 60,
                                "the topic gone")
        await asyncio.to_thread(kafka_cluster.create_topic, topic, PARTITIONS, 3, {"cleanup.policy": "compact"})
        await asyncio.to_thread(kafka_cluster.wait_in_sync, [topic])
        assert await write_all(State.FAILED) == [Result.WRITTEN] * PARTITIONS
        assert "while the cluster says they can take writes" in caplog.text  # through a new producer
        await store.read_your_writes(WAIT)
        read = [store.cache.get_connector(name) for name in names]
        assert [None if status is None else status.state for status in read] == [State.FAILED] * PARTITIONS
