"""The retry budget: the bucket's arithmetic (pure), and the retry queue holding retries back on the mock cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry, generate_latest

from harness.faulty_cluster import FaultyCluster
from status_store.connect.model import ConnectorStatus, State
from status_store.retry.budget import BudgetSettings, RetryBudget
from status_store.retry.updates import STATUS_KINDS as KINDS
from status_store.retry.updates import Result
from status_store.store import StatusStore

from .conftest import Broker, StoreFactory
from .helpers import eventually, last_values

WAIT = 30.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
# Far more errors than any test sends requests: "down" until cleared.
OUTAGE = [NOT_ENOUGH_REPLICAS] * 100_000
# The retry budget applies to per-update retries (held partitions send one probe at a time instead).
FAST = {
    "status.storage.retry.mode": "per-update",
    "status.storage.retry.initial.backoff.ms": "100",
    "status.storage.retry.max.backoff.ms": "400",
    "status.storage.retry.delivery.timeout.ms": "2000",
    "status.storage.retry.max.retries": "1000",
    "status.storage.retry.budget.max.tokens": "4",
    "status.storage.retry.budget.token.ratio": "0.5",
    "status.storage.retry.budget.min.retries.per.second": "5",
    "sidecar.shutdown.timeout.ms": "3000",
}


# ----------------------------------------------------------------------------- the bucket (pure)


def budget(max_tokens: float = 10, token_ratio: float = 0.1, min_retries_per_s: float = 1.0) -> RetryBudget:
    return RetryBudget(BudgetSettings(max_tokens, token_ratio, min_retries_per_s))


def test_the_bucket_starts_full_failures_take_one_and_successes_add_the_ratio_up_to_the_cap() -> None:
    b = budget()
    assert b.tokens == 10
    b.settled(retry=False, written=False)
    b.settled(retry=False, written=False)
    assert b.tokens == 8
    b.settled(retry=False, written=True)
    assert b.tokens == pytest.approx(8.1)
    for _ in range(30):
        b.settled(retry=False, written=True)
    assert b.tokens == 10
    for _ in range(30):
        b.settled(retry=False, written=False)
    assert b.tokens == 0


def test_a_fatal_error_or_an_attempt_never_sent_leaves_the_bucket_as_it_was() -> None:
    b = budget()
    b.settled(retry=False, written=None)
    assert b.tokens == 10


def test_retries_go_only_while_more_than_half_the_bucket_is_left() -> None:
    b = budget(max_tokens=10)
    for _ in range(4):
        b.settled(retry=False, written=False)
    assert b.tokens == 6
    assert b.admit()
    assert b.admit()  # admitting takes nothing: outcomes do
    b.settled(retry=False, written=False)
    assert b.tokens == 5
    assert not b.admit()
    b.settled(retry=False, written=True)
    assert b.admit()


def test_the_floor_hands_out_places_in_line_at_its_rate_first_come_first_served() -> None:
    b = budget(min_retries_per_s=2)
    assert [b.floor_slot(now=10.0) for _ in range(3)] == [10.0, 10.5, 11.0]
    assert b.floor_slot(now=10.2) == 11.5  # later callers queue behind earlier ones
    assert b.floor_slot(now=100.0) == 100.0  # an idle floor serves at once (places are never in the past)


def test_retries_in_flight_count_as_failed_until_they_settle() -> None:
    b = budget(max_tokens=10)
    for _ in range(5):
        assert b.admit()
        b.sent(retry=True)
    assert b.retries_in_flight == 5
    assert not b.admit()  # 10 tokens, 5 at stake: not above half
    b.settled(retry=True, written=True)
    assert (b.tokens, b.retries_in_flight) == (10, 4)
    assert b.admit()
    b.settled(retry=True, written=False)
    b.settled(retry=True, written=False)
    assert (b.tokens, b.retries_in_flight) == (8, 2)
    assert b.admit()  # 8 - 2 = 6
    b.sent(retry=True)
    assert not b.admit()  # 8 - 3 = 5
    b.sent(retry=False)  # first attempts are never at stake
    assert b.retries_in_flight == 3


def test_a_budget_needs_positive_settings() -> None:
    assert not BudgetSettings().enabled
    with pytest.raises(ValueError, match="max_tokens > 0"):
        RetryBudget(BudgetSettings(0))
    with pytest.raises(ValueError, match="must be > 0"):
        RetryBudget(BudgetSettings(10, 0.0, 1.0))


# ----------------------------------------------------------------------------- the retry queue on the mock cluster


class Budgeted:
    """A store with a retry budget on the mock cluster, its metrics and the cluster's control API."""

    def __init__(self, cluster: FaultyCluster, store: StatusStore, registry: CollectorRegistry) -> None:
        self.cluster, self.store, self.registry = cluster, store, registry

    def total(self, name: str) -> float:
        return sum(self.registry.get_sample_value(f"{name}_total", {"kind": k}) or 0.0 for k in KINDS)

    def sample(self, name: str) -> float | None:
        return self.registry.get_sample_value(name)


@pytest.fixture
async def budgeted(mock_cluster: FaultyCluster, store_factory: StoreFactory,
                   request: pytest.FixtureRequest) -> AsyncIterator[Budgeted]:
    settings = {**FAST, **getattr(request, "param", {})}
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    # A pinned random source: every backoff is exactly initial * 2^n * (1 + 0.25 * 0.5).
    async with store_factory(mock_cluster.bootstrap_servers, topic, (), lambda: 0.5, registry=registry,
                             **settings) as store:
        yield Budgeted(mock_cluster, store, registry)


def connector(name: str, state: State = State.RUNNING) -> ConnectorStatus:
    return ConnectorStatus(name, state, "w1:8083", 1)


async def test_refused_retries_are_counted_and_delayed_and_every_latest_value_is_written(budgeted: Budgeted) -> None:
    store, cluster = budgeted.store, budgeted.cluster
    cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
    latest = {}
    for i in range(20):
        latest[i] = store.put(connector(f"c{i}"))
    for i in range(5):  # newer values of five keys supersede the first ones
        latest[i] = store.put(connector(f"c{i}", State.PAUSED))
    await eventually(lambda: store.queue.throttled_total >= 40)
    retries_in_outage = budgeted.total("status_update_retry")
    cluster.clear_request_errors(FaultyCluster.PRODUCE)
    await store.flush(WAIT)
    assert all(u.outcome is not None and u.outcome.result is Result.WRITTEN for u in latest.values())
    assert budgeted.total("status_update_success") == 20
    assert budgeted.total("status_update_failure") == 0
    assert budgeted.total("status_update_superseded") == 5
    assert (budgeted.total("status_update_success") + budgeted.total("status_update_failure")
            + budgeted.total("status_update_superseded")) == budgeted.total("status_update_submitted") == 25
    # Held back, not dropped: 40 refusals, yet far fewer retries than refusals went out during the outage.
    assert retries_in_outage < store.queue.throttled_total
    values = last_values(store)
    for i, update in latest.items():
        assert values[f"status-connector-c{i}".encode()] == update.value
    text = generate_latest(budgeted.registry).decode()
    assert f"status_update_retry_throttled_total {float(store.queue.throttled_total)}" in text
    assert "status_retry_budget_tokens " in text


async def test_every_key_keeps_being_retried_through_a_long_outage(budgeted: Budgeted) -> None:
    store = budgeted.store
    budgeted.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
    updates = [store.put(connector(f"c{i}")) for i in range(10)]
    # The bucket is empty after the first failures; the floor (5 retries/s) still reaches every key, again and again,
    # although their backoffs are all alike (a pinned random source).
    await eventually(lambda: all(u.attempts >= 3 for u in updates), WAIT)
    assert store.queue.throttled_total > 0
    assert not any(u.done() for u in updates)
    budgeted.cluster.clear_request_errors(FaultyCluster.PRODUCE)
    await store.flush(WAIT)
    assert all(u.outcome is not None and u.outcome.ok for u in updates)


# Dropped after the last retry: parked updates would be probed (and fail, and be counted) again.
@pytest.mark.parametrize("budgeted", [{"status.storage.retry.max.retries": "1",
                                       "status.storage.retry.budget.min.retries.per.second": "2",
                                       "status.storage.retry.exhausted.action": "drop"}], indirect=True)
async def test_a_refusal_does_not_use_up_a_retry_and_the_retry_limit_still_ends_the_update(budgeted: Budgeted) -> None:
    store = budgeted.store
    budgeted.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
    updates = [store.put(connector(f"c{i}")) for i in range(6)]
    outcomes = [await u.result(WAIT) for u in updates]
    assert store.queue.throttled_total > 0
    # Each got its one retry, however often the budget held it back first.
    assert all(o.result is Result.FAILED and o.attempts == 2 for o in outcomes)
    assert all("no retries left" in o.reason for o in outcomes)
    assert budgeted.total("status_update_failure") == 6
    assert budgeted.total("status_update_retry") == 6


@pytest.mark.parametrize("budgeted", [{"status.storage.retry.timeout.ms": "1500",
                                       "status.storage.retry.budget.min.retries.per.second": "0.001"}], indirect=True)
async def test_the_time_bound_ends_an_update_the_budget_holds_back_as_a_counted_failure(budgeted: Budgeted) -> None:
    store = budgeted.store
    budgeted.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
    updates = [store.put(connector(f"c{i}")) for i in range(5)]
    outcomes = [await u.result(WAIT) for u in updates]
    assert all(o.result is Result.FAILED for o in outcomes)
    assert all("status.storage.retry.timeout.ms" in o.reason for o in outcomes)
    assert any("held back by the retry budget" in o.reason for o in outcomes)
    assert budgeted.total("status_update_failure") == 5


async def test_without_a_budget_nothing_is_throttled_and_the_counter_reads_zero(
        mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    registry = CollectorRegistry()
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    settings = {k: v for k, v in FAST.items() if ".budget." not in k}
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry, **settings) as store:
        mock_cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * 3)
        assert (await store.put(connector("c")).result(WAIT)).ok
        assert store.queue.policy.budget is None
        assert store.queue.throttled_total == 0
        text = generate_latest(registry).decode()
    assert "status_update_retry_throttled_total 0.0" in text
    assert "status_retry_budget_tokens" not in text
