"""The fault suite: outages, a killed sidecar, a killed broker, leader moves with fatal and
retriable errors, a slow broker. Every scenario streams many updates per key, injects its fault, lets
the stores recover, and ends with the same checks (``faults_support.check``): the counters add up, no
latest status is lost under park with a spool, and under drop every loss is a counted failure.

Each wait is bounded; the brokers listen on 127.0.0.1 only. The two tests at the end cover store bugs
this suite found (both fixed): a running store whose broker lost the status topic (Tansu's memory storage
after a restart, or a deleted topic) neither created it again nor read its writes once it was created
again.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config
from harness.tansu import TansuBroker
from status_store.durable.spool import Spool

from .conftest import PARTITIONS, Broker, StoreFactory, running_tansu
from .faults_support import (
    PARK_SPOOL,
    QUICK,
    Subject,
    batch_item,
    check,
    record,
    settle,
    stream,
    stream_until_written,
    subjects,
    task_status,
)
from .helpers import eventually_awaited, last_values
from .test_exhausted import counts

NOT_LEADER_OR_FOLLOWER = KafkaError.NOT_LEADER_FOR_PARTITION
REQUEST_TIMED_OUT = KafkaError.REQUEST_TIMED_OUT
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
FENCED_LEADER_EPOCH = KafkaError.FENCED_LEADER_EPOCH
# A one-shot fatal error (TOPIC_AUTHORIZATION_FAILED would stick to the topic inside librdkafka).
INVALID_RECORD = KafkaError.INVALID_RECORD
# Leader changes the store retries at once (KIP-951; librdkafka re-sends NOT_LEADER_OR_FOLLOWER itself),
# plain retriable errors, and a fatal one.
MIXED_ERRORS = (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, INVALID_RECORD)

WAIT = 30.0
SHUTDOWN_MS = 1000
# What closing the Kafka clients after the shutdown timeout may add, as docs/operations.md states it.
CLOSE_S = 5.0
# What the interpreter's exit may add to the stop's bound (it ends after the stop: threads, clients' destructors).
EXIT_MARGIN_S = 1.0
KEYS = range(1000)
# Keys 0-299 (the tail) get their last value as the fault begins: under drop they are the ones that can
# lose it. The others keep getting values through the fault and after it.
AFTER_TAIL = range(300, 1000)


@pytest.mark.parametrize(("outage", "interval"), [(2.0, 0.25), (30.0, 1.0)], ids=["2s", "30s"])
async def test_a_broker_outage_during_a_stream_loses_no_latest_status(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path, outage: float,
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
    assert len(Spool(tmp_path / "park-spool.db")) == 0  # every parked update was released and written


async def test_leader_moves_and_fatal_errors_mixed_with_retriable_ones(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    topics = [broker.new_topic(), broker.new_topic()]
    rng = random.Random(6)
    async with subjects(store_factory, broker.bootstrap_servers, topics, tmp_path) as fleet:
        await stream(fleet, KEYS, range(3), 0.1)
        for round_ in range(3, 23):
            for topic in topics:
                mock_cluster.set_leader(topic, rng.randrange(5), rng.choice(mock_cluster.broker_ids))
            mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *rng.choices(MIXED_ERRORS, k=4))
            await stream(fleet, KEYS if round_ == 3 else AFTER_TAIL, [round_], 0.1)
        mock_cluster.clear_request_errors(FaultyCluster.PRODUCE)
        await stream(fleet, AFTER_TAIL, range(23, 25), 0.1)
        await settle(fleet)
        for subject in fleet:
            check(subject)
    # The faults reached the stores (the pushed errors go to whichever store's Produce request comes next).
    assert sum(subject.outcomes.failed("INVALID_RECORD") for subject in fleet) > 0
    assert sum(subject.outcomes.retried["FENCED_LEADER_EPOCH"] for subject in fleet) > 0
    assert sum(subject.outcomes.retried["NOT_ENOUGH_REPLICAS"] for subject in fleet) > 0


async def test_a_slow_broker_under_load_loses_no_latest_status(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    async with subjects(store_factory, broker.bootstrap_servers, [broker.new_topic(), broker.new_topic()],
                        tmp_path, settings={"status.storage.retry.delivery.timeout.ms": "1000"}) as fleet:
        await stream(fleet, KEYS, range(3), 0.1)
        mock_cluster.set_rtt(-1, 200)  # slow, but inside the 1 s bound of an attempt
        await stream(fleet, KEYS, range(3, 13), 0.1)
        mock_cluster.set_rtt(-1, 3000)  # a spike: attempts time out, their partitions are held
        await stream(fleet, KEYS, [13], 0.25)
        await stream(fleet, AFTER_TAIL, range(14, 22), 0.25)
        mock_cluster.set_rtt(-1, 0)
        after = await stream_until_written(fleet, AFTER_TAIL, 22, 0.1)
        await stream(fleet, AFTER_TAIL, range(after, after + 2), 0.1)
        await settle(fleet)
        for subject in fleet:
            check(subject)
            # The spike reached the store: a write timed out and held its partition, which probes until it takes
            # writes again. (A timed-out write itself is not always retried: a newer value of its key often
            # replaces it first.)
            assert subject.store.queue.probes_total > 0


async def test_a_sidecar_killed_during_an_outage_and_restarted_with_its_spool_loses_nothing_it_accepted(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    # The broker lives in this process and survives the sidecar; "down" keeps its records.
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.partitions": PARTITIONS, "status.storage.spool.path": spool,
        "sidecar.startup.timeout.ms": 20000, **QUICK})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    accepted: dict[bytes, bytes] = {}

    async def post(http: httpx.AsyncClient, keys: range, round_: int, wait: bool = False) -> None:
        statuses = [task_status(key, round_) for key in keys]
        response = await http.post("/statuses", params={"wait": "true"} if wait else {},
                                   json={"updates": [batch_item(status) for status in statuses]})
        assert response.status_code == (200 if wait else 202), response.text
        accepted.update(record(status) for status in statuses)

    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            await post(http, KEYS, 0, wait=True)
            await post(http, KEYS, 1)
            mock_cluster.broker_down(-1)
            await post(http, KEYS, 2)
            for round_ in range(3, 6):
                await asyncio.sleep(0.3)  # rounds spread over the outage: the traffic under the fault
                await post(http, AFTER_TAIL, round_)
            assert_accounted(await scrape(http))  # what is not settled yet is pending: nothing unaccounted
        service.process.kill()  # SIGKILL: no flush, no goodbye
        await asyncio.to_thread(service.process.wait, WAIT)
        kept = Spool(spool)
        assert len(kept) == len(KEYS)  # every key had an update that was not durable when the sidecar died
        kept.close()
        mock_cluster.broker_up(-1)
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            assert any(f"Replaying {len(KEYS)} status update(s)" in line for line in service.seen)
            async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                assert_accounted(await settled(http))
    assert len(Spool(spool)) == 0
    async with store_factory(mock_cluster.bootstrap_servers, topic) as reader:
        values = last_values(reader)
    lost = [key for key, value in accepted.items() if values.get(key) != value]
    assert not lost, f"{len(lost)} accepted latest value(s) lost, e.g. {lost[0]!r}"


async def test_sigterm_during_an_outage_exits_within_its_bound_and_the_next_start_replays_what_was_pending(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.partitions": PARTITIONS, "status.storage.spool.path": spool,
        "status.storage.retry.delivery.timeout.ms": 300, "sidecar.shutdown.timeout.ms": SHUTDOWN_MS})
    port = free_port()
    statuses = [task_status(key, 1) for key in range(300)]
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            mock_cluster.broker_down(-1)
            response = await http.post("/statuses", json={"updates": [batch_item(status) for status in statuses]})
            assert response.status_code == 202
            # Writes failed and their partitions are held; the failures started a check that the status topic
            # still exists, a Metadata request that waits for brokers that are gone.
            loop = asyncio.get_running_loop()
            await eventually_awaited(lambda: scrape(http), lambda totals: totals.get("status_partitions_held", 0) > 0,
                                     WAIT)
        started = loop.time()
        service.process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(service.process.wait, WAIT)
        stopped_after = loop.time() - started
        # The documented bound: the shutdown timeout, then at most CLOSE_S for closing the Kafka clients.
        assert stopped_after < SHUTDOWN_MS / 1000 + CLOSE_S, f"exited {stopped_after:.1f} s after SIGTERM"
        await asyncio.to_thread(service.wait_for, "the spool keeps them: the next start replays them")
        assert code == 0  # nothing is lost: the spool has every update that was pending
        kept = Spool(spool)
        assert len(kept) == len(statuses)
        kept.close()
        mock_cluster.broker_up(-1)
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            assert any(f"Replaying {len(statuses)} status update(s)" in line for line in service.seen)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
                await settled(http)
    async with store_factory(mock_cluster.bootstrap_servers, topic) as reader:
        values = last_values(reader)
    assert all(values.get(key) == value for key, value in map(record, statuses))


async def test_the_whole_stop_keeps_to_the_shutdown_bound_with_writes_waiting_and_held(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    """SIGTERM with 3,000 updates held, the brokers down and a ?wait=true write waiting: the process exits within
    sidecar.shutdown.timeout.ms of the signal, plus a margin for the interpreter's exit (it used to wait for the
    waiting write's own timeout first, then the whole bound again)."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    bound_s = 3.0
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.partitions": PARTITIONS, "status.storage.spool.path": tmp_path / "spool.db",
        "status.storage.retry.delivery.timeout.ms": 300, "sidecar.shutdown.timeout.ms": int(bound_s * 1000)})
    port = free_port()
    with Service("--config", str(config), "--port", str(port)) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            mock_cluster.broker_down(-1)
            batch = {"updates": [batch_item(task_status(key, 1)) for key in range(3000)]}
            assert (await http.post("/statuses", json=batch)).status_code == 202
            loop = asyncio.get_running_loop()
            await eventually_awaited(lambda: scrape(http), lambda totals: totals.get("status_partitions_held", 0) > 0,
                                     WAIT)
            waiting = asyncio.ensure_future(http.put("/connectors/w/status", params={"wait": "true",
                                                                                     "timeout_ms": "60000"},
                                                     json={"state": "RUNNING", "worker_id": "w:1", "generation": 1}))
            await eventually_held(http)
            started = loop.time()
            service.process.send_signal(signal.SIGTERM)
            answered = await waiting
            code = await asyncio.to_thread(service.process.wait, WAIT)
            stopped_after = loop.time() - started
        assert answered.status_code == 503  # answered at once: the store is stopping
        assert code == 0  # the spool keeps what was pending
        assert stopped_after < bound_s + EXIT_MARGIN_S, f"exited {stopped_after:.1f} s after SIGTERM"


async def eventually_held(http: httpx.AsyncClient) -> None:
    """Until the service has taken the write just sent (one more update pending); bounded."""
    await eventually_awaited(lambda: scrape(http), lambda totals: totals.get("status_retry_queue_pending", 0) >= 3001,
                             WAIT)


async def scrape(http: httpx.AsyncClient) -> dict[str, float]:
    """The service's metrics, summed over labels (one scrape is one consistent view: it runs on the loop)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families((await http.get("/metrics")).text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


async def settled(http: httpx.AsyncClient, timeout: float = 60.0) -> dict[str, float]:
    """The service's metrics once nothing is pending or parked; bounded."""
    return await eventually_awaited(
        lambda: scrape(http),
        lambda totals: totals["status_retry_queue_pending"] == 0 and totals["status_parked_updates"] == 0,
        timeout, 0.2)


def assert_accounted(totals: dict[str, float]) -> None:
    """Every submitted update is written, failed, superseded or still pending."""
    outcomes = sum(totals[f"status_update_{name}_total"] for name in ("success", "failure", "superseded"))
    assert totals["status_update_submitted_total"] == outcomes + totals["status_retry_queue_pending"], totals


# Tansu writes through a separate process: fewer keys keep the scenario short (the tail: keys 0-99).
TANSU_KEYS = range(300)
TANSU_AFTER_TAIL = range(100, 300)


@pytest.fixture
def own_tansu() -> Iterator[TansuBroker]:
    """A Tansu process of this test alone (the session's broker must not be killed)."""
    with running_tansu() as broker:
        yield broker


async def kill_and_restart_mid_stream(fleet: list[Subject], tansu: TansuBroker, topics_again: list[str]) -> None:
    """Stream; SIGKILL the broker; stream on while it is gone; start it again on the same port (after the old
    process has exited: a restart before that crashes); create ``topics_again``; stream until Kafka takes
    writes again; settle."""
    await stream(fleet, TANSU_KEYS, range(3), 0.1)
    tansu.kill()
    await stream(fleet, TANSU_KEYS, [3], 0.25)
    await stream(fleet, TANSU_AFTER_TAIL, range(4, 8), 0.25)
    tansu.start()
    if topics_again:
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap_servers})
        created = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})
                                       for topic in topics_again])
        for future in created.values():
            await asyncio.wrap_future(future)
    after = await stream_until_written(fleet, TANSU_AFTER_TAIL, 8, 0.2, timeout=20.0)
    await stream(fleet, TANSU_AFTER_TAIL, range(after, after + 2), 0.2)
    await settle(fleet, 20.0)


async def test_a_broker_killed_and_restarted_with_its_topics_loses_no_latest_status(
        own_tansu: TansuBroker, store_factory: StoreFactory, tmp_path: Path) -> None:
    # Tansu's memory storage forgets everything on restart. A broker with durable storage keeps its topics:
    # the test creates them again as that broker would still have them. Their old records are gone, but
    # every key's latest value is submitted after the kill (the tail's while the broker is gone, parked or
    # failed), and those are what is checked.
    topics = ["status-killed-a", "status-killed-b"]
    async with subjects(store_factory, own_tansu.bootstrap_servers, topics, tmp_path) as fleet:
        await kill_and_restart_mid_stream(fleet, own_tansu, topics)
        for subject in fleet:
            check(subject)
            assert counts(subject.registry)["status_update_retry_total"] > 0  # the kill was felt


async def test_a_running_store_writes_again_after_the_broker_restarted_without_its_topic(
        own_tansu: TansuBroker, store_factory: StoreFactory, tmp_path: Path) -> None:
    async with subjects(store_factory, own_tansu.bootstrap_servers, ["status-forgotten"], tmp_path,
                        policies=[PARK_SPOOL]) as fleet:
        await kill_and_restart_mid_stream(fleet, own_tansu, [])
        check(fleet[0])


async def test_a_running_store_reads_its_writes_after_the_broker_lost_its_topic_and_it_was_created_again(
        own_tansu: TansuBroker, store_factory: StoreFactory) -> None:
    topic = "status-reborn"
    async with store_factory(own_tansu.bootstrap_servers, topic) as store:
        for round_ in range(10):
            for key in range(20):
                store.put(task_status(key, round_))
        await store.read_your_writes(WAIT)
        own_tansu.kill()
        own_tansu.start()
        admin = AdminClient({"bootstrap.servers": own_tansu.bootstrap_servers})
        created = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})])
        await asyncio.wrap_future(created[topic])
        newer = task_status(0, 10)
        update = store.put(newer)
        assert (await update.result(WAIT)).ok
        await store.wait_visible([update], WAIT)
        assert store.cache.get_task(newer.id) == newer
