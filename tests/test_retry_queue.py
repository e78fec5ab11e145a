"""The retry engine against the mock cluster's fault injection (KIP-1278, KIP-951)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator

import pytest
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry, generate_latest

from harness.faulty_cluster import FaultyCluster
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus
from status_store.retry.updates import Result
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually, last_values, write_raw

WAIT = 20.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
# librdkafka itself re-sends after NOT_LEADER_OR_FOLLOWER and LEADER_NOT_AVAILABLE (it refreshes metadata and
# re-routes, even with retries=0); FENCED_LEADER_EPOCH reaches the store.
FENCED_LEADER_EPOCH = KafkaError.FENCED_LEADER_EPOCH
TOPIC_AUTHORIZATION_FAILED = KafkaError.TOPIC_AUTHORIZATION_FAILED
INVALID_RECORD = KafkaError.INVALID_RECORD
# asyncio may run a timer up to its clock resolution early; a loaded machine may run it late.
TIMER_SLACK = 0.005
LATE_SLACK = 1.0
FAST = {
    "status.storage.retry.initial.backoff.ms": "100",
    "status.storage.retry.max.backoff.ms": "400",
    "status.storage.retry.jitter.factor": "0.25",
    "status.storage.retry.delivery.timeout.ms": "400",
    "sidecar.shutdown.timeout.ms": "3000",
}


class Faulty:
    """A store on the mock cluster, with its metrics and the cluster's control API."""

    def __init__(self, cluster: FaultyCluster, store: StatusStore, registry: CollectorRegistry) -> None:
        self.cluster, self.store, self.registry = cluster, store, registry

    def count(self, name: str, kind: str) -> float:
        value = self.registry.get_sample_value(f"{name}_total", {"kind": kind})
        return value or 0.0


@pytest.fixture
async def faulty(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                 request: pytest.FixtureRequest) -> AsyncIterator[Faulty]:
    settings = {**FAST, **getattr(request, "param", {})}
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    # A pinned random source: every backoff is exactly initial * 2^n * (1 + 0.25 * 0.5).
    async with store_factory(mock_cluster.bootstrap_servers, topic, (), lambda: 0.5, registry=registry,
                             **settings) as store:
        yield Faulty(mock_cluster, store, registry)


def connector(name: str, generation: int = 1, state: State = State.RUNNING) -> ConnectorStatus:
    return ConnectorStatus(name, state, "w1:8083", generation)


def produce_times(cluster: FaultyCluster) -> list[float]:
    return [r.timestamp_us / 1e6 for r in cluster.requests(FaultyCluster.PRODUCE)]


async def test_a_transient_failure_ends_in_success_with_the_right_retry_count(faulty: Faulty) -> None:
    faulty.cluster.start_tracking()
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS)
    outcome = await faulty.store.put(connector("c")).result(WAIT)
    assert (outcome.result, outcome.attempts) == (Result.WRITTEN, 3)
    assert faulty.count("status_update_retry", "connector") == 2
    assert faulty.count("status_update_success", "connector") == 1
    assert faulty.count("status_update_failure", "connector") == 0
    # The gaps between Produce requests fall inside KIP-1278's bounds: [capped, capped * (1 + 0.25)] for
    # capped = 100 ms, then 200 ms. Retry times may be aligned down to a 100 ms tick, never below capped.
    times = produce_times(faulty.cluster)
    assert len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] >= 0.1 - TIMER_SLACK
    assert gaps[1] >= 0.2 - TIMER_SLACK
    # The upper bounds, with room for a busy machine's scheduling delays (not a performance claim).
    assert gaps[0] <= 0.125 + LATE_SLACK
    assert gaps[1] <= 0.25 + LATE_SLACK


async def test_fatal_errors_are_not_retried(faulty: Faulty) -> None:
    faulty.cluster.start_tracking()
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, TOPIC_AUTHORIZATION_FAILED)
    outcome = await faulty.store.put(TaskStatus(TaskId("c", 0), State.RUNNING, "w:1", 1)).result(WAIT)
    assert (outcome.result, outcome.attempts) == (Result.FAILED, 1)
    assert outcome.error is not None
    assert outcome.error.name == "TOPIC_AUTHORIZATION_FAILED"
    assert len(produce_times(faulty.cluster)) == 1
    assert faulty.count("status_update_retry", "task") == 0
    assert faulty.count("status_update_failure", "task") == 1


async def test_failures_not_yet_summed_up_are_logged_when_the_store_stops(faulty: Faulty,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    # Refused for good, the updates are dropped (never parked: a retry cannot help). Only the first is logged at once;
    # the others used to wait for a summary line a minute later, which a stopping sidecar never logged: they were lost
    # without a line (the stop's own line names only what the stop cut short).
    caplog.set_level(logging.ERROR, "status_store.retry.queue")
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, *[TOPIC_AUTHORIZATION_FAILED] * 3)
    updates = [faulty.store.put(TaskStatus(TaskId("c", task), State.RUNNING, "w:1", 1)) for task in range(3)]
    for update in updates:
        outcome = await update.result(WAIT)
        assert outcome.result is Result.FAILED
        assert outcome.error is not None
        assert outcome.error.name == "TOPIC_AUTHORIZATION_FAILED"
    assert await faulty.store.stop() == []
    said = [record.getMessage() for record in caplog.records if record.name == "status_store.retry.queue"]
    assert [line.split(" to the ")[0][:31] for line in said] == ["Status update of status-task-c-",
                                                                "2 more status update(s)"], said
    named = [said[0].split()[3], *said[1].split("e.g. ")[1].split(", ")]
    assert sorted(named) == ["status-task-c-0", "status-task-c-1", "status-task-c-2"], said


PER_UPDATE = {"status.storage.retry.mode": "per-update"}


# An initial backoff of a second: the retry at once must stand apart from the backoff on a busy machine too (at
# 100 ms, a load of 18 once made the retry at once take 124 ms, the backoff 118).
SECOND = {"status.storage.retry.initial.backoff.ms": "1000", "status.storage.retry.max.backoff.ms": "4000"}


@pytest.mark.parametrize(("faulty", "backoff"), [({**PER_UPDATE, **SECOND}, 2.0),
                                                 ({"status.storage.retry.mode": "partition", **SECOND}, 1.0)],
                         indirect=["faulty"])
async def test_a_leader_change_is_retried_at_once_then_backs_off(faulty: Faulty, backoff: float) -> None:
    faulty.cluster.start_tracking()
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH)
    outcome = await faulty.store.put(connector("c")).result(WAIT)
    assert (outcome.result, outcome.attempts) == (Result.WRITTEN, 3)
    gaps = [b - a for a, b in itertools.pairwise(produce_times(faulty.cluster))]
    # The first retry waits for no backoff (KIP-951); the second backs off: per update, the key's retry 1
    # (2 s); in partition mode, the partition is held and its first probe waits the initial backoff (1 s).
    assert gaps[1] >= backoff - TIMER_SLACK
    assert gaps[0] < gaps[1]


# Dropped once exhausted, not parked: a parked value is sent again from its partition's line when the line lets a probe
# through, a retry counted each, and whether one goes before the count below is the producers' timing.
@pytest.mark.parametrize("faulty", [{"status.storage.retry.max.retries": "2", **PER_UPDATE,
                                     "status.storage.retry.exhausted.action": "drop"}], indirect=True)
async def test_an_outage_longer_than_the_retry_window_fails_each_update_once(faulty: Faulty) -> None:
    faulty.cluster.broker_down(-1)
    updates = [faulty.store.put(connector(f"c{i}")) for i in range(20)]
    outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates)), WAIT)
    assert all(o.result is Result.FAILED and o.attempts == 3 for o in outcomes)
    assert all(o.error is not None and o.error.name == "_MSG_TIMED_OUT" for o in outcomes)
    assert faulty.count("status_update_failure", "connector") == 20
    assert faulty.count("status_update_retry", "connector") == 40
    assert faulty.count("status_update_success", "connector") == 0
    # After the outage the store works again.
    faulty.cluster.broker_up(-1)
    assert (await faulty.store.put(connector("after")).result(WAIT)).ok


@pytest.mark.parametrize("faulty", [{"status.storage.retry.timeout.ms": "500",
                                     "status.storage.retry.max.retries": "100"}], indirect=True)
async def test_the_total_time_bound_ends_retries(faulty: Faulty) -> None:
    faulty.cluster.broker_down(-1)
    started = time.monotonic()
    outcome = await faulty.store.put(connector("c")).result(WAIT)
    assert outcome.result is Result.FAILED
    assert "status.storage.retry.timeout.ms" in outcome.reason
    assert time.monotonic() - started < WAIT


async def test_a_newer_write_supersedes_a_pending_retry_and_is_never_overwritten(faulty: Faulty) -> None:
    faulty.cluster.broker_down(-1)
    first = faulty.store.put(connector("c", state=State.RUNNING))
    second = faulty.store.put(connector("c", state=State.PAUSED))
    third = faulty.store.put(connector("c", state=State.FAILED))
    # One write in flight, one waiting: the second was superseded by the third before it was sent.
    assert second.outcome is not None
    assert second.outcome.result is Result.SUPERSEDED
    await eventually(lambda: first.last_error is not None, WAIT)  # the first attempt times out: brokers are down
    faulty.cluster.broker_up(-1)
    outcomes = [await u.result(WAIT) for u in (first, third)]
    assert outcomes[1].result is Result.WRITTEN
    assert outcomes[0].result is Result.SUPERSEDED
    await faulty.store.read_your_writes(WAIT)
    assert faulty.store.cache.get_connector("c") == connector("c", state=State.FAILED)
    assert faulty.count("status_update_superseded", "connector") == 2


async def test_a_retry_is_abandoned_when_the_generation_changes(faulty: Faulty) -> None:
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS)
    old = faulty.store.put(connector("a", generation=1))
    await eventually(lambda: old.last_error is not None, WAIT)  # its first attempt failed: a retry waits
    faulty.store.put(connector("b", generation=2))
    outcome = await old.result(WAIT)
    assert outcome.result is Result.SUPERSEDED
    assert "generation" in outcome.reason


async def test_put_returns_at_once_while_every_broker_is_down(faulty: Faulty) -> None:
    faulty.cluster.broker_down(-1)
    updates = [faulty.store.put(connector(f"c{i}")) for i in range(200)]
    # put never waits for Kafka: every call returned before Kafka answered any of them (no broker can), and
    # without giving the event loop a turn. (No timing: a pause of the machine is not a wait for Kafka.)
    assert not any(update.done() for update in updates)
    assert faulty.store.queue.unsettled == 200


async def test_the_kip_counters_have_their_exact_exposition_names(faulty: Faulty) -> None:
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS)
    await faulty.store.put(connector("c")).result(WAIT)
    text = generate_latest(faulty.registry).decode()
    for name in ("status_update_retry_total", "status_update_failure_total", "status_update_success_total",
                 "status_update_superseded_total"):
        assert f'{name}{{kind="connector"}}' in text
    assert "_total_total" not in text
    assert 'status_update_retry_total{kind="connector"} 1.0' in text
    assert "status_retry_queue_oldest_pending_age_seconds" in text
    assert "status_update_write_latency_seconds_bucket" in text


@pytest.mark.parametrize("faulty", [{"status.storage.retry.initial.backoff.ms": "60000",
                                     "status.storage.retry.max.backoff.ms": "60000"}], indirect=True)
async def test_stop_does_not_send_a_retry_that_connects_rules_abandon(faulty: Faulty) -> None:
    store = faulty.store
    await store.put(connector("c", generation=5)).result(WAIT)
    await store.read_your_writes(WAIT)
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, NOT_ENOUGH_REPLICAS)
    safe = store.put_safe(connector("c", generation=5, state=State.UNASSIGNED))
    assert safe is not None
    await eventually(lambda: bool(store.queue.waiting_retries()))
    # Another worker's newer status arrives while the safe write waits for its (long) retry.
    write_raw(store, (b"status-connector-c", b'{"state":"RUNNING","trace":null,"worker_id":"w2:8083","generation":6}'))
    await store.read_to_end(WAIT)
    assert await store.stop() == []
    assert safe.outcome is not None
    assert safe.outcome.result is Result.SUPERSEDED
    assert last_values(store)[b"status-connector-c"] == (
        b'{"state":"RUNNING","trace":null,"worker_id":"w2:8083","generation":6}')


@pytest.mark.parametrize("faulty", [{"sidecar.kafka.queue.buffering.max.kbytes": "4"}], indirect=True)
async def test_a_record_larger_than_the_client_queue_fails_instead_of_blocking_others(faulty: Faulty) -> None:
    big = faulty.store.put(ConnectorStatus("big", State.FAILED, "w:1", 1, "x" * 8000))
    small = faulty.store.put(connector("small"))
    outcome = await big.result(WAIT)
    assert (outcome.result, outcome.attempts) == (Result.FAILED, 1)
    assert outcome.error is not None
    assert outcome.error.name == "MSG_SIZE_TOO_LARGE"
    assert (await small.result(WAIT)).ok


async def test_a_fatal_error_fails_even_with_a_newer_value_held(faulty: Faulty) -> None:
    # INVALID_RECORD fails the one request (librdkafka keeps a topic authorization error for later writes too).
    faulty.cluster.push_request_errors(FaultyCluster.PRODUCE, INVALID_RECORD)
    first = faulty.store.put(connector("c", state=State.RUNNING))
    second = faulty.store.put(connector("c", state=State.PAUSED))
    assert (await first.result(WAIT)).result is Result.FAILED
    assert (await second.result(WAIT)).ok
    assert faulty.count("status_update_failure", "connector") == 1


# The write in flight lingers in the producer long enough for the test to write and read another worker's status
# meanwhile, on a loaded machine too (1.5 s was not, once, in a whole run of the suite).
@pytest.mark.parametrize("faulty", [{"sidecar.kafka.linger.ms": "5000",
                                     "status.storage.retry.delivery.timeout.ms": "15000"}], indirect=True)
async def test_a_held_safe_write_is_checked_again_before_it_is_sent(faulty: Faulty) -> None:
    store = faulty.store
    write_raw(store, (b"status-connector-c", b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":5}'))
    await store.read_to_end(WAIT)
    in_flight = store.put(connector("c", generation=5))  # lingers 5 s in the producer
    held = store.put_safe(connector("c", generation=5, state=State.FAILED))
    assert held is not None
    # Another worker's newer status is read while the safe write waits behind the one in flight.
    write_raw(store, (b"status-connector-c", b'{"state":"RUNNING","trace":null,"worker_id":"w2:8083","generation":6}'))
    await store.read_to_end(WAIT)
    assert not in_flight.done(), "the newer status was read only after the write in flight ended: no test"
    assert (await in_flight.result(WAIT)).ok
    outcome = await held.result(WAIT)
    assert outcome.result is Result.SUPERSEDED
    assert outcome.attempts == 0
    assert "another worker's newer status" in outcome.reason
