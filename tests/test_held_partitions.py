"""Partition mode on the mock cluster: a failing partition is held behind one probe at a time, released in
batches when a write gets through, and every rule of the retry engine still holds."""

from __future__ import annotations

import asyncio
import logging
import re
import resource
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from confluent_kafka import KafkaError, murmur2
from prometheus_client import CollectorRegistry

from harness.faulty_cluster import FaultyCluster
from status_store.api import create_app
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus, connector_key
from status_store.durable.spool import Spool
from status_store.errors import RecordTooLargeError, WriteRejectedError
from status_store.retry.updates import Outcome, Result, RetryListener, StatusUpdate
from status_store.store import StatusStore

from .conftest import StoreFactory
from .helpers import eventually, eventually_awaited, last_values, write_raw

WAIT = 20.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
# Far more errors than any test sends requests: every Produce request fails until they are cleared.
OUTAGE = [NOT_ENOUGH_REPLICAS] * 100_000
FAST = {
    "status.storage.retry.initial.backoff.ms": "100",
    "status.storage.retry.max.backoff.ms": "400",
    "status.storage.retry.probe.max.backoff.ms": "200",
    "status.storage.retry.delivery.timeout.ms": "500",
    "status.storage.retry.max.retries": "1000",
    "sidecar.shutdown.timeout.ms": "3000",
}


@dataclass
class Held:
    """A store in partition mode on its own topic of the mock cluster, with its metrics."""

    cluster: FaultyCluster
    store: StatusStore
    registry: CollectorRegistry
    topic: str

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.registry.get_sample_value(name, labels or {}) or 0.0


def topic_with(cluster: FaultyCluster, partitions: int, leaders: dict[int, int] | None = None) -> str:
    name = f"held-{id(cluster)}-{partitions}-{len(leaders or {})}-{asyncio.get_running_loop().time():.6f}"
    cluster.create_topic(name, partitions, 1)
    for partition, broker in (leaders or {}).items():
        cluster.set_leader(name, partition, broker)
    return name


HeldFactory = Callable[..., AbstractAsyncContextManager[Held]]


@pytest.fixture
def held_factory(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> HeldFactory:
    @asynccontextmanager
    async def make(partitions: int = 5, leaders: dict[int, int] | None = None,
                   **settings: str) -> AsyncIterator[Held]:
        registry = CollectorRegistry()
        topic = topic_with(mock_cluster, partitions, leaders)
        merged = {**FAST, "status.storage.partitions": str(partitions), **settings}
        async with store_factory(mock_cluster.bootstrap_servers, topic, (), lambda: 0.5, registry=registry,
                                 **merged) as store:
            yield Held(mock_cluster, store, registry, topic)

    return make


def connector(name: str, generation: int = 1, state: State = State.RUNNING, worker: str = "w1:8083") -> ConnectorStatus:
    return ConnectorStatus(name, state, worker, generation)


def names_on(partition: int, partitions: int, count: int, prefix: str = "c") -> list[str]:
    """Connector names whose status keys Java's partitioner puts on ``partition``."""
    found, i = [], 0
    while len(found) < count:
        name = f"{prefix}{i}"
        if murmur2(connector_key(name).encode(), partitions) == partition:
            found.append(name)
        i += 1
    return found


async def test_a_held_partition_sends_only_its_probe(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1) as held:
        store, queue = held.store, held.store.queue
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        updates = [store.put(connector(f"c{i}")) for i in range(100)]
        await eventually(lambda: queue.held_partitions == [0])
        first_attempts = queue.attempts_total
        await eventually(lambda: queue.probes_total >= 3)
        # Held: nothing but probes went out since, one at a time (100 keys wait, each sent once so far at most).
        assert queue.attempts_total - first_attempts <= queue.probes_total + 1
        assert all(u.attempts <= 1 for u in updates[1:] if u.outcome is None and u is not updates[0])
        assert held.sample("status_partitions_held") == 1
        assert held.sample("status_retry_probes_total") >= 3
        # New writes to the held partition wait too: they are not sent.
        sent_before = queue.attempts_total - queue.probes_total
        later = [store.put(connector(f"late{i}")) for i in range(20)]
        assert queue.attempts_total - queue.probes_total == sent_before
        assert all(u.attempts == 0 for u in later)
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates + later)), WAIT)
        assert all(o.ok for o in outcomes)
        assert queue.held_partitions == []
        assert held.sample("status_partitions_held") == 0


async def test_a_partial_outage_holds_only_the_down_brokers_partitions(held_factory: HeldFactory) -> None:
    leaders = {0: 1, 1: 2, 2: 3, 3: 1, 4: 2}
    async with held_factory(partitions=5, leaders=leaders) as held:
        store = held.store
        down = [p for p, broker in leaders.items() if broker == 2]
        held.cluster.broker_down(2)
        on_down = [store.put(connector(name)) for p in down for name in names_on(p, 5, 3, f"down{p}-")]
        await eventually(lambda: store.queue.held_partitions == down)
        # While broker 2 is down, writes to the other partitions go through at once, never held.
        healthy = [store.put(connector(name)) for p in leaders if p not in down
                   for name in names_on(p, 5, 5, f"up{p}-")]
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in healthy)), WAIT)
        assert all(o.ok and o.attempts == 1 for o in outcomes)
        assert store.queue.held_partitions == down
        assert not any(u.done() for u in on_down)
        held.cluster.broker_up(2)
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in on_down)), WAIT)
        assert all(o.ok for o in outcomes)
        await eventually(lambda: store.queue.held_partitions == [])


async def test_a_release_goes_out_in_batches_doubling_while_writes_succeed(
        held_factory: HeldFactory, caplog: pytest.LogCaptureFixture) -> None:
    async with held_factory(partitions=1) as held:
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        updates = [held.store.put(connector(f"c{i}")) for i in range(200)]
        await eventually(lambda: held.store.queue.probes_total >= 1)
        with caplog.at_level(logging.DEBUG, logger="status_store.retry.queue"):
            held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
            await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates)), WAIT)
        batches = [int(m.group(1)) for m in re.finditer(r"Released a batch of (\d+) update", caplog.text)]
        # Slow start: a first small batch, then twice as many after each batch that all succeeded.
        assert batches[:5] == [2, 4, 8, 16, 32]
        assert sum(batches) >= 199 - held.store.queue.probes_total


async def test_held_updates_keep_coalescing_and_connects_abandonment_rules(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1) as held:
        store = held.store
        await store.put(ConnectorStatus("gone", State.RUNNING, "w1:8083", 1)).result(WAIT)
        await store.read_your_writes(WAIT)
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        first = store.put(connector("c", state=State.RUNNING))
        await eventually(lambda: store.queue.held_partitions == [0])
        second = store.put(connector("c", state=State.PAUSED))
        third = store.put(connector("c", state=State.FAILED))
        assert second.outcome is not None
        assert second.outcome.result is Result.SUPERSEDED
        doomed = store.put_safe(ConnectorStatus("gone", State.UNASSIGNED, "w1:8083", 1))
        assert doomed is not None
        # Another worker deletes "gone" while its update waits in the held partition (read from the topic once
        # the partition takes writes again: the other writer's record is ahead in the partition).
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        write_raw(store, (b"status-connector-gone", None))
        outcomes = await asyncio.wait_for(asyncio.gather(first.result(), third.result(), doomed.result()), WAIT)
        assert outcomes[1].ok
        assert outcomes[0].result in (Result.SUPERSEDED, Result.WRITTEN)
        await store.read_your_writes(WAIT)
        values = last_values(store)
        assert values[b"status-connector-c"] == b'{"state":"FAILED","trace":null,"worker_id":"w1:8083","generation":1}'


async def test_a_newer_status_lands_after_its_keys_timed_out_one_whatever_another_writer_writes(
        held_factory: HeldFactory) -> None:
    """A task's RUNNING (generation 10) times out (the broker answers too late), its PAUSED (generation 11) follows,
    and another worker writes generation 12 meanwhile (a rebalance). The copies of RUNNING that go first, in case the
    timed-out one still lands, are not PAUSED's attempts: once the broker answers again PAUSED is written, and the
    topic ends with it."""
    async with held_factory(partitions=1) as held:
        store, cluster = held.store, held.cluster
        cluster.set_rtt(-1, 2000)  # every attempt outlives its 500 ms bound
        store.put(TaskStatus(TaskId("c", 0), State.RUNNING, "w1:8083", 10))
        await eventually(lambda: store.queue.held_partitions == [0])
        paused = TaskStatus(TaskId("c", 0), State.PAUSED, "w1:8083", 11)
        update = store.put(paused)
        store.put(ConnectorStatus("other", State.RUNNING, "w2:8083", 12))
        await eventually(lambda: store.queue.probes_total >= 2 or update.done())
        cluster.set_rtt(-1, 0)
        outcome = await update.result(WAIT)
        assert outcome.result is Result.WRITTEN, outcome
        await store.read_your_writes(WAIT)
        assert store.cache.get_task(TaskId("c", 0)) == paused
        assert last_values(store)[b"status-task-c-0"] == (
            b'{"state":"PAUSED","trace":null,"worker_id":"w1:8083","generation":11}')


async def test_a_retry_is_abandoned_when_its_own_writers_generation_moved_never_another_writers(
        held_factory: HeldFactory) -> None:
    """Connect abandons a status write's retry once its store's generation moved (a rebalance): one store per worker,
    moved by that worker's writes. Here a writer is an agent's session, or the worker a status names."""
    async with held_factory(partitions=1) as held:
        store, cluster = held.store, held.cluster
        cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        kept = store.put(connector("kept", 10, worker="w1:8083"))
        session = store.put(connector("session", 10, worker="w3:8083"), writer="agent-1")
        dropped = store.put(connector("dropped", 10, worker="w4:8083"))
        await eventually(lambda: store.queue.held_partitions == [0])
        # Other writers move their own generations: another worker, and another session of w3's worker.
        store.put(connector("rebalanced", 12, worker="w2:8083"))
        store.put(connector("restarted", 12, worker="w3:8083"), writer="agent-2")
        # w4 itself moves on: its pending retry goes no more, as Connect's store of w4 would drop it.
        store.put(connector("moved", 11, worker="w4:8083"))
        cluster.clear_request_errors(FaultyCluster.PRODUCE)
        outcomes = await asyncio.wait_for(asyncio.gather(kept.result(), session.result(), dropped.result()), WAIT)
        assert [o.result for o in outcomes] == [Result.WRITTEN, Result.WRITTEN, Result.SUPERSEDED], outcomes
        assert "generation moved from 10 to 11" in outcomes[2].reason


async def test_an_agent_sessions_retry_is_judged_by_its_own_generation(held_factory: HeldFactory) -> None:
    """Each agent session is one worker's store (a new one at each start of the worker's): its pending retry goes
    whatever another session writes, even one of a worker with the same id."""
    async with held_factory(partitions=1) as held:
        store, cluster = held.store, held.cluster
        app = create_app(store)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            async def post(agent: str, name: str, generation: int) -> None:
                update = {"seq": 1, "kind": "connector", "connector": name, "state": "RUNNING", "trace": None,
                          "worker_id": "w1:8083", "generation": generation}
                response = await http.post("/agent/statuses", json={"agent": agent, "worker_id": "w1:8083",
                                                                    "lease_ms": 60_000, "updates": [update]})
                assert response.json()["accepted"] == [{"seq": 1, "result": "pending"}]

            cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
            await post("agent-1", "kept", 10)
            await eventually(lambda: store.queue.held_partitions == [0])
            await post("agent-2", "restarted", 12)
            cluster.clear_request_errors(FaultyCluster.PRODUCE)
            await asyncio.wait_for(store.flush(), WAIT)
        assert last_values(store)[b"status-connector-kept"] == (
            b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":10}')


async def test_max_retries_counts_only_attempts_sent_and_still_ends_an_update(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1, **{"status.storage.retry.max.retries": "2",
                                             "status.storage.retry.exhausted.action": "drop"}) as held:
        store = held.store
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        updates = [store.put(connector(f"c{i}")) for i in range(10)]
        # The probes take the oldest update, three attempts each (two retries), then the next one.
        await eventually(lambda: sum(1 for u in updates if u.done()) >= 2)
        done = [u for u in updates if u.done()]
        assert all(u.outcome is not None and u.outcome.result is Result.FAILED and u.outcome.attempts == 3
                   for u in done)
        waiting = [u for u in updates if not u.done()]
        assert waiting
        assert all(u.attempts <= 3 for u in waiting)
        # Attempts sent: each update's first one, and the probes.
        assert store.queue.attempts_total == len(updates) + store.queue.probes_total
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        await asyncio.wait_for(asyncio.gather(*(u.result() for u in waiting)), WAIT)


async def test_the_time_bound_counts_the_time_an_update_is_held(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1, **{"status.storage.retry.timeout.ms": "700",
                                             "status.storage.retry.exhausted.action": "drop"}) as held:
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        updates = [held.store.put(connector(f"c{i}")) for i in range(20)]
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates)), WAIT)
        assert all(o.result is Result.FAILED for o in outcomes)
        assert all("status.storage.retry.timeout.ms" in o.reason for o in outcomes)
        # Most never went out again: held, not retried, until the bound ended them.
        assert sum(1 for o in outcomes if o.attempts == 1) >= 15
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)


class Raising(RetryListener):
    """A listener that raises at every event (a spool whose disk is gone, a buggy plug-in)."""

    def on_submitted(self, update: StatusUpdate) -> None:
        raise RuntimeError("listener broken")

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        raise OSError("listener broken too")


async def test_a_raising_listener_never_stops_a_key(mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    registry = CollectorRegistry()
    topic = topic_with(mock_cluster, 1)
    async with store_factory(mock_cluster.bootstrap_servers, topic, [Raising()], registry=registry, **FAST) as store:
        for state in (State.RUNNING, State.PAUSED, State.FAILED):
            outcome = await store.put(connector("c", state=state)).result(WAIT)
            assert outcome.ok
        assert store.queue.unsettled == 0
        assert registry.get_sample_value("status_retry_queue_pending") == 0
        assert registry.get_sample_value("status_listener_errors_total", {"listener": "Raising"}) == 6
        await store.read_your_writes(WAIT)
        assert store.cache.get_connector("c") == connector("c", state=State.FAILED)


async def test_the_pending_bound_refuses_new_keys_and_changes_nothing(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1, **{"status.storage.retry.max.pending": "5"}) as held:
        store = held.store
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        accepted = [store.put(connector(f"c{i}")) for i in range(5)]
        generation = store.generation_of(None, connector("c5"))
        with pytest.raises(WriteRejectedError) as refused:
            store.put(connector("c5", generation=9))
        assert refused.value.retry_after_s >= 1
        assert "status.storage.retry.max.pending" in str(refused.value)
        assert store.generation_of(None, connector("c5")) == generation == 1  # a refused write changes nothing
        with pytest.raises(WriteRejectedError):
            store.put_safe(TaskStatus(TaskId("c0", 0), State.RUNNING, "w1:8083", 1))
        assert store.cache.get_task(TaskId("c0", 0)) is None
        # A newer value of a key that waits replaces it: no room needed.
        await eventually(lambda: store.queue.held_partitions == [0])
        replacing = store.put(connector("c4", state=State.PAUSED))
        assert held.sample("status_update_rejected_total", {"reason": "queue_full"}) == 2
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in [*accepted[:4], replacing])), WAIT)
        assert all(o.ok for o in outcomes)


async def test_at_the_pending_bound_a_newer_value_of_a_key_in_flight_is_accepted(
        mock_cluster: FaultyCluster, store_factory: StoreFactory) -> None:
    """The bound counts keys: a write behind its key's write in flight adds no key (and a later one replaces it)."""
    topic = topic_with(mock_cluster, 1)
    settings = {**FAST, "status.storage.retry.max.pending": "2", "status.storage.retry.delivery.timeout.ms": "30000"}
    async with store_factory(mock_cluster.bootstrap_servers, topic, **settings) as store:
        mock_cluster.broker_down(-1)  # the writes stay in flight
        first = [store.put(connector(name)) for name in ("c0", "c1")]
        behind = store.put(connector("c0", state=State.PAUSED))
        replacing = store.put(connector("c0", state=State.FAILED))
        with pytest.raises(WriteRejectedError):
            store.put(connector("c2"))
        mock_cluster.broker_up(-1)
        outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in [*first, behind, replacing])), WAIT)
        assert [o.result for o in outcomes] == [Result.WRITTEN, Result.WRITTEN, Result.SUPERSEDED, Result.WRITTEN]
        await store.read_your_writes(WAIT)
        assert store.cache.get_connector("c0") == connector("c0", state=State.FAILED)


async def test_at_the_pending_bound_writes_that_only_replace_waiting_updates_are_accepted(
        held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1, **{"status.storage.retry.max.pending": "4"}) as held:
        store, queue = held.store, held.store.queue
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        # c0 is the oldest: the held partition's probe is always its write. c1's three updates wait in the line.
        store.put(connector("c0"))
        await eventually(lambda: queue.held_partitions == [0])
        for status in (connector("c1"), TaskStatus(TaskId("c1", 0), State.RUNNING, "w1:8083", 1)):
            store.put(status)
        store.put_topic(TopicStatus("orders", "c1", 0, 1))
        await eventually(lambda: queue.waiting_count >= 3)
        with pytest.raises(WriteRejectedError):
            store.put(connector("c2"))
        app = create_app(store)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            # Each replaces a waiting update of its key (twice over in the batch): the queue does not grow.
            batch = {"updates": [{"kind": "connector", "connector": "c1", "state": "PAUSED", "worker_id": "w1:8083",
                                  "generation": 1},
                                 {"kind": "task", "connector": "c1", "task": 0, "state": "FAILED",
                                  "worker_id": "w1:8083", "generation": 1},
                                 {"kind": "connector", "connector": "c1", "state": "FAILED", "worker_id": "w1:8083",
                                  "generation": 1}]}
            assert (await http.post("/statuses", json=batch)).status_code == 202
            # Tombstones for c1's task and c1: each replaces a waiting update too.
            assert (await http.delete("/connectors/c1/status")).status_code == 202
            assert (await http.delete("/connectors/c1/topics/orders")).status_code == 202
            assert (await http.put("/connectors/c2/status", json={"state": "RUNNING", "worker_id": "w1:8083",
                                                                   "generation": 1})).status_code == 503
        assert queue.unsettled == 4
        assert held.sample("status_update_rejected_total", {"reason": "queue_full"}) == 2
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        await asyncio.wait_for(store.flush(), WAIT)
        values = last_values(store)
        assert [values[key] for key in (b"status-connector-c1", b"status-task-c1-0",
                                        b"status-topic-orders:connector-c1")] == [None, None, None]


@pytest.mark.timeout(240)  # above the sum of its bounds: the start's 20 s, WAIT, 3 * WAIT and the stop's 3 s
@pytest.mark.parametrize("mode", ["partition", "per-update"])
async def test_a_ten_thousand_key_outage_writes_a_bounded_number_of_log_lines(
        held_factory: HeldFactory, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    settings = {"status.storage.retry.mode": mode, "status.storage.retry.max.retries": "0",
                "status.storage.retry.exhausted.action": "drop", "status.storage.retry.max.pending": "20000"}
    async with held_factory(partitions=5, **settings) as held:
        with caplog.at_level(logging.INFO, logger="status_store"):
            held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
            updates = [held.store.put(TaskStatus(TaskId("c", i), State.FAILED, "w1:8083", 1)) for i in range(10_000)]
            await eventually(lambda: held.store.queue.probes_total >= 10 or all(u.done() for u in updates), WAIT)
            held.cluster.clear_request_errors(FaultyCluster.PRODUCE)

            async def left() -> tuple[int, list[int], int]:
                queue = held.store.queue
                return sum(not u.done() for u in updates), queue.held_partitions, queue.probes_total

            await eventually_awaited(left, lambda now: now[0] == 0, 3 * WAIT, interval=0.2,
                                     what="(updates not ended, partitions held, probes sent)")
            await asyncio.gather(*(u.result() for u in updates))
        lines = [r for r in caplog.records if r.name.startswith("status_store")]
        # One line per partition held and released, the first failure and a summary: never one per key.
        assert len(lines) <= 30, "\n".join(r.getMessage()[:120] for r in lines[:40])


async def test_task_keys_go_to_their_java_partition(held_factory: HeldFactory) -> None:
    """Java's partitioner puts status-task-my-conn-12 on partition 2 of 5: Kafka stores it there, and a failed
    write of it holds that partition and no other."""
    async with held_factory(partitions=5) as held:
        task = TaskStatus(TaskId("my-conn", 12), State.RUNNING, "w1:8083", 1)
        outcome = await held.store.put(task).result(WAIT)
        assert outcome.delivery is not None
        assert outcome.delivery.partition == 2
        held.cluster.push_request_errors(FaultyCluster.PRODUCE, *OUTAGE)
        update = held.store.put(TaskStatus(TaskId("my-conn", 12), State.PAUSED, "w1:8083", 1))
        await eventually(lambda: held.store.queue.held_partitions == [2])
        held.cluster.clear_request_errors(FaultyCluster.PRODUCE)
        assert (await update.result(WAIT)).ok


async def test_a_trace_too_large_for_a_record_is_cut_so_the_failed_status_is_written(
        held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1) as held:
        trace = "java.lang.RuntimeException: boom\n" + "\tat a.very.deep.Frame(Frame.java:1)\n" * 40_000
        outcome = await held.store.put(ConnectorStatus("c", State.FAILED, "w1:8083", 1, trace)).result(WAIT)
        assert outcome.ok
        await held.store.read_your_writes(WAIT)
        written = held.store.cache.get_connector("c")
        assert written is not None
        assert written.state is State.FAILED
        assert written.trace is not None
        assert written.trace.startswith(trace[:10_000])
        assert written.trace.endswith("more characters cut by status-store (record size limit)")
        assert len(last_values(held.store)[b"status-connector-c"] or b"") <= 1_000_000


async def test_a_record_that_cannot_fit_is_refused_before_it_changes_anything(held_factory: HeldFactory) -> None:
    async with held_factory(partitions=1, **{"sidecar.kafka.message.max.bytes": "2000"}) as held:
        status = ConnectorStatus("c", State.RUNNING, "w" * 3000, 7)
        with pytest.raises(RecordTooLargeError) as refused:
            held.store.put(status)
        assert refused.value.limit < 2000
        assert held.store.generation_of(None, status) is None
        assert held.store.queue.unsettled == 0


async def test_a_spool_that_cannot_be_written_never_stops_the_queue(mock_cluster: FaultyCluster,
                                                                     store_factory: StoreFactory,
                                                                     tmp_path: Path) -> None:
    spool = tmp_path / "spool.db"
    topic = topic_with(mock_cluster, 1)
    registry = CollectorRegistry()
    async with store_factory(mock_cluster.bootstrap_servers, topic, registry=registry,
                             **{**FAST, "status.storage.spool.path": str(spool)}) as store:
        # The spool cannot be written for a while: this process's file-size limit at 0 (EFBIG, SQLite's "disk I/O
        # error"). Another process cannot lock a spool in use: the spool holds SQLite's exclusive lock.
        limits = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, limits[1]))
        try:
            updates = [store.put(connector("c", state=state)) for state in (State.RUNNING, State.PAUSED)]
            assert not store.commit_spool()  # refused at once, not after seconds; the changes wait in memory
            # Until the spool can be written, new writes are refused: what they hold could not be made durable.
            with pytest.raises(WriteRejectedError, match="disk I/O error"):
                store.put(connector("c", state=State.FAILED))
            outcomes = await asyncio.wait_for(asyncio.gather(*(u.result() for u in updates)), WAIT)
            assert [o.result for o in outcomes] == [Result.WRITTEN, Result.WRITTEN]
            assert registry.get_sample_value("status_listener_errors_total", {"listener": "Spool"}) is None
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        await eventually(store.commit_spool)
        updates.append(store.put(connector("c", state=State.FAILED)))
        assert (await updates[-1].result(WAIT)).ok
        assert store.queue.unsettled == 0
    assert len(Spool(spool)) == 0
