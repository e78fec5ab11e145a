"""After the last retry (park, dead-letter, drop) and the history topic, on real brokers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from harness.tansu import TansuBroker
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus
from status_store.durable.spool import Spool
from status_store.errors import TopicSetupError
from status_store.retry.updates import Result

from .conftest import Broker, StoreFactory
from .helpers import WAIT, eventually, last_values, read_raw

INVALID_RECORD = KafkaError.INVALID_RECORD
# One quick retry; an attempt fails after 300 ms while the brokers are down.
QUICK = {"status.storage.retry.max.retries": "1", "status.storage.retry.delivery.timeout.ms": "300",
         "status.storage.retry.initial.backoff.ms": "50", "status.storage.retry.max.backoff.ms": "100",
         "sidecar.shutdown.timeout.ms": "1000"}


def counts(registry: CollectorRegistry) -> dict[str, float]:
    """The KIP counters summed over kinds, and the store's own counters, from the registry."""
    totals: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                totals[sample.name] = totals.get(sample.name, 0) + sample.value
            elif sample.name == "status_parked_updates":
                totals[sample.name] = sample.value
    return totals


def assert_counters_add_up(registry: CollectorRegistry) -> None:
    c = counts(registry)
    settled = (c.get("status_update_success_total", 0) + c.get("status_update_failure_total", 0)
               + c.get("status_update_superseded_total", 0))
    assert settled == c["status_update_submitted_total"], c


async def fail_outage(mock_cluster: FaultyCluster, store: Any, keys: int) -> dict[bytes, bytes]:
    """Write ``keys`` task statuses while the brokers are down, until all of them failed for good."""
    mock_cluster.broker_down(-1)
    latest = {}
    updates = []
    for i in range(keys):
        updates.append(store.put(TaskStatus(TaskId("c", i), State.FAILED, "w:1", 1, "boom")))
        latest[f"status-task-c-{i}".encode()] = encode_status(State.FAILED, "w:1", 1, "boom")
    for update in updates:
        assert (await update.result(WAIT)).result is Result.FAILED
    return latest


@pytest.mark.parametrize("spooled", [False, True])
async def test_park_keeps_the_latest_value_and_sends_it_when_kafka_is_back(
        mock_cluster: FaultyCluster, store_factory: StoreFactory, tmp_path: Path, spooled: bool) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    registry = CollectorRegistry()
    spool = {"status.storage.spool.path": str(tmp_path / "spool.db")} if spooled else {}
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **QUICK, **spool) as store:
        latest = await fail_outage(mock_cluster, store, 10)
        # Each key is parked, or out as its partition's probe (parked updates are probed like an outage).
        assert len(store.queue.parked()) + store.queue.unsettled == 10
        # A probe that runs out of retries too is parked (and counted) again.
        assert counts(registry)["status_update_parked_total"] >= 10
        assert counts(registry)["status_update_failure_total"] >= 10  # still counted as failures
        if spooled:
            assert store.spool is not None
            assert len(store.spool) == 10  # on disk: a kill now would lose nothing
        mock_cluster.broker_up(-1)
        # No other write comes: the probe (every max(1 s, max.backoff)) finds Kafka back, the rest follow.
        await eventually(lambda: not store.queue.parked() and store.queue.unsettled == 0, 3 * WAIT)
        await store.read_your_writes(WAIT)
        values = last_values(store)
        assert {key: values.get(key) for key in latest} == latest
        assert counts(registry)["status_parked_updates"] == 0
        assert_counters_add_up(registry)
    if spooled:
        assert len(Spool(tmp_path / "spool.db")) == 0


async def test_a_successful_write_releases_parked_updates_at_once(mock_cluster: FaultyCluster,
                                                                  store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    # A probe only every 60 s: the release below can only come from the successful write.
    slow_probe = {**QUICK, "status.storage.retry.max.backoff.ms": "60000"}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **slow_probe) as store:
        latest = await fail_outage(mock_cluster, store, 5)
        mock_cluster.broker_up(-1)
        assert (await store.put(ConnectorStatus("other", State.RUNNING, "w:1", 1)).result(WAIT)).ok
        await eventually(lambda: not store.queue.parked() and store.queue.unsettled == 0)
        values = last_values(store)
        assert {key: values.get(key) for key in latest} == latest


async def test_a_newer_write_replaces_a_parked_value(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                                                     tmp_path: Path) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    spool = tmp_path / "spool.db"
    async with store_factory(mock_cluster.bootstrap_servers, topic,
                             **{**QUICK, "status.storage.spool.path": str(spool),
                                "status.storage.retry.max.backoff.ms": "60000"}) as store:
        await fail_outage(mock_cluster, store, 1)
        mock_cluster.broker_up(-1)
        newer = TaskStatus(TaskId("c", 0), State.RUNNING, "w:1", 1)
        store.put(newer)
        assert not store.queue.parked()  # the newer value took the parked one's place at once
        # Written once the client has reconnected (if its first attempts come too soon, it is parked in turn).
        await eventually(lambda: not store.queue.parked() and store.queue.unsettled == 0, 3 * WAIT)
        await store.read_your_writes(WAIT)
        assert store.cache.get_task(TaskId("c", 0)) == newer
        assert last_values(store)[b"status-task-c-0"] == encode_status(State.RUNNING, "w:1", 1, None)
    assert len(Spool(spool)) == 0


async def test_fatal_errors_are_never_parked(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    async with store_factory(mock_cluster.bootstrap_servers, topic, **QUICK) as store:
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, INVALID_RECORD)
        outcome = await store.put(ConnectorStatus("c", State.RUNNING, "w:1", 1)).result(WAIT)
        assert outcome.result is Result.FAILED
        assert outcome.error is not None
        assert outcome.error.name == "INVALID_RECORD"
        assert not store.queue.parked()
        assert store.exhausted.parked == 0


async def test_drop_loses_the_update_but_counts_it(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    registry = CollectorRegistry()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **QUICK,
                             **{"status.storage.retry.exhausted.action": "drop"}) as store:
        await fail_outage(mock_cluster, store, 3)
        mock_cluster.broker_up(-1)
        assert not store.queue.parked()
        assert counts(registry)["status_update_failure_total"] == 3
        assert_counters_add_up(registry)


async def test_dead_letter_records_the_update_its_error_and_attempts(mock_cluster: FaultyCluster,
                                                                      store_factory: StoreFactory) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    topic, dead = broker.new_topic(), broker.new_topic(1)
    registry = CollectorRegistry()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **QUICK,
                             **{"status.storage.retry.exhausted.action": "dead-letter",
                                "status.storage.retry.dead.letter.topic": dead,
                                "sidecar.name": "sidecar-a"}) as store:
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, INVALID_RECORD)
        status = TaskStatus(TaskId("sink", 3), State.FAILED, "w:1", 2, "stack trace")
        assert (await store.put(status).result(WAIT)).result is Result.FAILED
        await eventually(lambda: store.exhausted.dead_lettered == 1)
        records = read_raw(store, dead)
        assert [key for _, key, _ in records] == [b"status-task-sink-3"]
        letter = json.loads(records[0][2] or b"")
        assert letter["value"] == encode_status(State.FAILED, "w:1", 2, "stack trace").decode()
        assert (letter["error"], letter["attempts"], letter["sidecar"]) == ("INVALID_RECORD", 1, "sidecar-a")
        assert (letter["kind"], letter["connector"], letter["task"]) == ("task", "sink", 3)
        assert counts(registry)["status_update_dead_lettered_total"] == 1


async def test_history_records_every_status_change_and_outcome(broker: Broker, store_factory: StoreFactory) -> None:
    topic, history = broker.new_topic(), broker.new_topic(3)
    async with store_factory(broker.bootstrap_servers, topic, **{"status.storage.history.topic": history,
                                                                 "sidecar.name": "sidecar-a"}) as store:
        updates = [store.put(TaskStatus(TaskId("sink", 0), state, "w:1", 4, None))
                   for state in (State.RUNNING, State.FAILED, State.RUNNING)]
        updates += store.delete_connector("sink")
        await store.flush(WAIT)
        await eventually(lambda: store.event_logs[0].pending == 0)
        events = [json.loads(value or b"") for _, _, value in read_raw(store, history)]
    statuses = [e for e in events if e["event"] == "status"]
    outcomes = [e for e in events if e["event"] == "outcome"]
    assert len(statuses) == len(outcomes) == len(updates)
    task_states = [e["state"] for e in statuses if e["key"] == "status-task-sink-0"]
    assert task_states == ["RUNNING", "FAILED", "RUNNING", "DESTROYED"]  # a key's events keep their order
    first = next(e for e in statuses if e["key"] == "status-task-sink-0")
    assert {k: first[k] for k in ("kind", "connector", "task", "worker_id", "generation", "sidecar")} == {
        "kind": "task", "connector": "sink", "task": 0, "worker_id": "w:1", "generation": 4, "sidecar": "sidecar-a"}
    by_result: dict[str, int] = {}
    for event in outcomes:
        by_result[event["result"]] = by_result.get(event["result"], 0) + 1
        assert event["attempts"] >= (1 if event["result"] == "written" else 0)
    assert sum(by_result.values()) == len(updates)
    assert by_result.get("written", 0) >= 2  # the last value of each key is written


async def test_history_events_of_a_status_with_a_lone_surrogate_keep_it_escaped(broker: Broker,
                                                                               store_factory: StoreFactory) -> None:
    # A status read from a value with "\ud800" (Connect reads one) and written again: its events are JSON too.
    topic, history = broker.new_topic(), broker.new_topic(1)
    async with store_factory(broker.bootstrap_servers, topic, **{"status.storage.history.topic": history}) as store:
        update = store.put(ConnectorStatus("c", State.FAILED, "w\udc00", 1, "boom \ud800"))
        assert (await update.result(WAIT)).ok
        await eventually(lambda: store.event_logs[0].pending == 0)
        values = [value for _, _, value in read_raw(store, history)]
    assert len(values) == 2
    status = json.loads(values[0] or b"")
    assert (status["trace"], status["worker_id"]) == ("boom \ud800", "w\udc00")
    assert b"\\ud800" in (values[0] or b"")


async def test_an_unreachable_history_topic_never_holds_status_writes(mock_cluster: FaultyCluster,
                                                                       store_factory: StoreFactory) -> None:
    broker = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster)
    topic, history = broker.new_topic(), broker.new_topic(1)
    async with store_factory(mock_cluster.bootstrap_servers, topic, **QUICK,
                             **{"status.storage.history.topic": history,
                                "status.storage.history.max.pending": "5"}) as store:
        mock_cluster.broker_down(-1)
        for i in range(20):
            store.put(ConnectorStatus(f"c{i}", State.RUNNING, "w:1", 1))  # never blocks
        events = store.event_logs[0]
        assert events.pending <= 5
        assert events.dropped > 0
        mock_cluster.broker_up(-1)


async def test_a_compacted_history_topic_is_refused(tansu: TansuBroker, store_factory: StoreFactory) -> None:
    history = "history-compacted"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap_servers})
    future = admin.create_topics([NewTopic(history, 1, 1, config={"cleanup.policy": "compact"})])[history]
    future.result(WAIT)
    with pytest.raises(TopicSetupError, match="must not be compacted"):
        async with store_factory(tansu.bootstrap_servers, "status-for-history",
                                 **{"status.storage.history.topic": history}):
            pass
