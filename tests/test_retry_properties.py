"""Properties of the retry engine under random interleavings of writes, failures and recoveries."""

from __future__ import annotations

import asyncio
import random
import tempfile
from typing import Any

from confluent_kafka import KafkaError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.faulty_cluster import FaultyCluster
from status_store.config import build_config
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State
from status_store.retry.updates import Result
from status_store.store import StatusStore

from .helpers import last_values

WAIT = 30.0
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
RETRY = {
    "status.storage.retry.max.retries": "1000",
    "status.storage.retry.initial.backoff.ms": "20",
    "status.storage.retry.max.backoff.ms": "100",
    "status.storage.retry.delivery.timeout.ms": "300",
    "sidecar.shutdown.timeout.ms": "5000",
}
STATES = [State.RUNNING, State.PAUSED, State.FAILED, State.UNASSIGNED]

puts = st.tuples(st.just("put"), st.integers(0, 3), st.sampled_from(STATES))
faults = st.one_of(
    st.tuples(st.just("errors"), st.integers(1, 3)),
    st.tuples(st.just("down")),
    st.tuples(st.just("up")),
    st.tuples(st.just("sleep"), st.integers(0, 250)),
)


async def run_store(cluster: FaultyCluster, body: Any) -> None:
    cluster.create_topic("status", 3, 1)
    config = build_config({"bootstrap.servers": cluster.bootstrap_servers, "status.storage.topic": "status",
                           "status.storage.partitions": "3", **RETRY})
    store = StatusStore(config, cluster.bootstrap_servers, rng=random.Random(7).random)
    await store.start()
    try:
        await body(store)
    finally:
        await store.stop()


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(puts, faults), min_size=1, max_size=30))
def test_after_recovery_each_key_holds_its_last_put(ops: list[tuple[Any, ...]]) -> None:
    cluster = FaultyCluster(brokers=1)
    expected: dict[bytes, bytes | None] = {}

    async def body(store: StatusStore) -> None:
        updates = []
        for op in ops:
            if op[0] == "put":
                status = ConnectorStatus(f"c{op[1]}", op[2], "w1:8083", 1)
                updates.append(store.put(status))
                expected[f"status-connector-c{op[1]}".encode()] = encode_status(status.state, "w1:8083", 1, None)
            elif op[0] == "errors":
                cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * op[1])
            elif op[0] == "down":
                cluster.broker_down(-1)
            elif op[0] == "up":
                cluster.broker_up(-1)
            else:
                await asyncio.sleep(op[1] / 1000)
        cluster.broker_up(-1)
        await store.flush(WAIT)
        assert all(u.outcome is not None and u.outcome.result is not Result.FAILED for u in updates)
        assert last_values(store) == expected

    try:
        asyncio.run(run_store(cluster, body))
    finally:
        cluster.close()


safe_writes = st.tuples(st.sampled_from(["put", "put_safe"]), st.integers(0, 2), st.sampled_from(["w1", "w2"]),
                        st.integers(0, 3), st.sampled_from(STATES), st.integers(0, 2))


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(safe_writes, min_size=1, max_size=15))
def test_safe_writes_follow_connects_rules_through_failures(ops: list[tuple[Any, ...]]) -> None:
    cluster = FaultyCluster(brokers=1)
    model: dict[str, ConnectorStatus] = {}

    async def body(store: StatusStore) -> None:
        for method, key, worker, generation, state, errors in ops:
            if errors:
                cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * errors)
            status = ConnectorStatus(f"c{key}", state, f"{worker}:8083", generation)
            cached = model.get(status.connector)
            allowed = (method == "put" or cached is None or cached.worker_id == status.worker_id
                       or cached.generation <= generation)
            update = getattr(store, method)(status)
            assert (update is not None) == allowed
            if update is not None:
                assert (await update.result(WAIT)).ok
                model[status.connector] = status
            await store.read_your_writes(WAIT)
        for name, status in model.items():
            assert store.cache.get_connector(name) == status
        topic = last_values(store)
        assert {k.decode(): v for k, v in topic.items() if k is not None} == {
            f"status-connector-{name}": encode_status(s.state, s.worker_id, s.generation, None)
            for name, s in model.items()
        }

    try:
        asyncio.run(run_store(cluster, body))
    finally:
        cluster.close()


restarts = st.tuples(st.just("restart"))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(puts, faults, restarts), min_size=1, max_size=25))
def test_through_restarts_with_a_spool_each_key_ends_with_its_last_put(ops: list[tuple[Any, ...]]) -> None:
    cluster = FaultyCluster(brokers=1)
    cluster.create_topic("status", 3, 1)
    expected: dict[bytes, bytes | None] = {}

    async def body(spool: str) -> None:
        config = build_config({"bootstrap.servers": cluster.bootstrap_servers, "status.storage.topic": "status",
                               "status.storage.partitions": "3", "status.storage.spool.path": spool,
                               **RETRY, "sidecar.shutdown.timeout.ms": "300"})
        store = StatusStore(config, cluster.bootstrap_servers, rng=random.Random(7).random)
        await store.start()
        try:
            for op in ops:
                if op[0] == "put":
                    status = ConnectorStatus(f"c{op[1]}", op[2], "w1:8083", 1)
                    store.put(status)
                    expected[f"status-connector-c{op[1]}".encode()] = encode_status(status.state, "w1:8083", 1, None)
                elif op[0] == "restart":
                    # A restart, maybe during an outage: what was not durable stays in the spool and is replayed.
                    await store.stop()
                    cluster.broker_up(-1)
                    store = StatusStore(config, cluster.bootstrap_servers, rng=random.Random(7).random)
                    await store.start()
                elif op[0] == "errors":
                    cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * op[1])
                elif op[0] == "down":
                    cluster.broker_down(-1)
                elif op[0] == "up":
                    cluster.broker_up(-1)
                else:
                    await asyncio.sleep(op[1] / 1000)
            cluster.broker_up(-1)
            await store.flush(WAIT)
            await store.read_your_writes(WAIT)
            assert {k: v for k, v in last_values(store).items() if k in expected} == expected
        finally:
            await store.stop()

    try:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(body(f"{directory}/spool.db"))
    finally:
        cluster.close()
