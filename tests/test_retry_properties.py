"""Properties of the retry engine under random interleavings of writes, failures and recoveries."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
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
from status_store.errors import ErrorKind, WriteFailedError, classify
from status_store.retry.backoff import AdditiveJitter, RetryMode
from status_store.retry.delivery import Delivery, DoneCallback
from status_store.retry.queue import RetryQueue
from status_store.retry.updates import Outcome, Result, RetryListener, RetryPolicy, StatusUpdate, UpdateKind
from status_store.store import StatusStore

from .helpers import last_values
from .test_partition_gate import FakeClock

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
# A put by one of several writers (the worker its status names), which may move that writer's generation first.
writer_puts = st.tuples(st.just("put"), st.integers(0, 3), st.sampled_from(STATES), st.integers(0, 2), st.booleans())
# Produce requests refused (the write did not land) or timed out at the broker (it may have landed).
REQUEST_TIMED_OUT = KafkaError.REQUEST_TIMED_OUT
faults = st.one_of(
    st.tuples(st.just("errors"), st.integers(1, 3)),
    st.tuples(st.just("timeouts"), st.integers(1, 3)),
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
@given(st.lists(st.one_of(writer_puts, faults), min_size=1, max_size=30))
def test_after_recovery_each_key_holds_its_last_put(ops: list[tuple[Any, ...]]) -> None:
    """Puts of several writers through errors and time-outs, brokers down and up: each key ends with its last put,
    unless Connect's rule dropped that put's retry because its own writer's generation moved since."""
    cluster = FaultyCluster(brokers=1)
    generations = [1, 1, 1]
    last: dict[bytes, tuple[StatusUpdate, ConnectorStatus, int]] = {}

    async def body(store: StatusStore) -> None:
        updates = []
        for op in ops:
            if op[0] == "put":
                _, key, state, writer, moves = op
                generations[writer] += moves
                status = ConnectorStatus(f"c{key}", state, f"w{writer}:8083", generations[writer])
                updates.append(store.put(status))
                last[f"status-connector-c{key}".encode()] = (updates[-1], status, writer)
            elif op[0] == "errors":
                cluster.push_request_errors(FaultyCluster.PRODUCE, *[NOT_ENOUGH_REPLICAS] * op[1])
            elif op[0] == "timeouts":
                cluster.push_request_errors(FaultyCluster.PRODUCE, *[REQUEST_TIMED_OUT] * op[1])
            elif op[0] == "down":
                cluster.broker_down(-1)
            elif op[0] == "up":
                cluster.broker_up(-1)
            else:  # a pause the program drew: time between its steps is what the property is about
                await asyncio.sleep(op[1] / 1000)
        cluster.broker_up(-1)
        await store.flush(WAIT)
        assert all(u.outcome is not None and u.outcome.result is not Result.FAILED for u in updates)
        values = last_values(store)
        for key, (update, status, writer) in last.items():
            assert update.outcome is not None
            if update.outcome.result is Result.WRITTEN:
                assert values[key] == encode_status(status.state, status.worker_id, status.generation, None)
            else:
                assert "generation moved" in update.outcome.reason, update.outcome
                assert generations[writer] != status.generation, (update.outcome, generations)

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
                elif op[0] == "timeouts":
                    cluster.push_request_errors(FaultyCluster.PRODUCE, *[REQUEST_TIMED_OUT] * op[1])
                elif op[0] == "down":
                    cluster.broker_down(-1)
                elif op[0] == "up":
                    cluster.broker_up(-1)
                else:  # a pause the program drew: time between its steps is what the property is about
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


# ----------------------------------------------------------------------------- the engine alone, step by step

# What becomes of one write: acknowledged; refused with a retriable error; timed out, and lost, or held by the network
# and delivered (landing in the topic) just before the next write of its partition that gets through (a network
# delivers a connection's requests in order); refused with a fatal error. (Also: refused by a broker that no longer
# leads the partition.)
DELIVERIES = ("written", "retriable", "timed-out-lost", "timed-out-held", "fatal")
DELIVERY_ERRORS = {"retriable": "NOT_ENOUGH_REPLICAS", "timed-out-lost": "_MSG_TIMED_OUT",
                   "timed-out-held": "_MSG_TIMED_OUT", "fatal": "TOPIC_AUTHORIZATION_FAILED",
                   "leader": "NOT_LEADER_OR_FOLLOWER"}
# A key's partition is its last character.
KEYS = ("a0", "b1", "c0")
GENERATION_MOVED = "its writer's generation moved"


@dataclasses.dataclass
class Write:
    """One send of a value, and the update whose value it is."""

    key: str
    value: bytes
    owner: StatusUpdate
    # Sent while its owner had no outcome yet (else: a copy of an older value that may still land).
    own: bool
    done: DoneCallback
    delivery: str | None = None


class Topic:
    """The queue's ``send`` and a partitioned log: each write settled as the test says, each value that lands kept."""

    def __init__(self) -> None:
        self.owners: dict[bytes, StatusUpdate] = {}
        self.unsettled: list[Write] = []
        self.sent: list[Write] = []
        self.landed: list[tuple[str, bytes]] = []
        self._held: dict[int, list[tuple[str, bytes]]] = collections.defaultdict(list)

    def send(self, key: bytes, value: bytes | None, done: DoneCallback) -> None:
        assert value is not None
        owner = self.owners[value]
        assert all(w.key != key.decode() for w in self.unsettled), "two writes of a key in flight at once"
        write = Write(key.decode(), value, owner, owner.outcome is None, done)
        self.sent.append(write)
        self.unsettled.append(write)

    def settle(self, index: int, delivery: str) -> None:
        write = self.unsettled.pop(index % len(self.unsettled))
        write.delivery = delivery
        partition = int(write.key[-1])
        if delivery == "written":
            self.landed += self._held.pop(partition, [])
            self.landed.append((write.key, write.value))
            write.done(Delivery(partition, len(self.landed)), None)
            return
        if delivery == "timed-out-held":
            self._held[partition].append((write.key, write.value))
        write.done(None, WriteFailedError(write.key, 1, DELIVERY_ERRORS[delivery], "scripted"))

    def take_every_write(self, queue: RetryQueue, clock: FakeClock) -> None:
        """Kafka takes every write from now on: each one sent is written, the clock moving a second at a time, until
        the queue has settled everything and holds no partition (bounded)."""
        for _ in range(600):
            if queue.unsettled == 0 and not self.unsettled and not queue.held_partitions:
                return
            while self.unsettled:
                self.settle(0, "written")
            clock.advance(1.0)

    def own_sends(self, update: StatusUpdate) -> list[Write]:
        """The sends of the update's own value while it had no outcome (its attempts), in order."""
        return [w for w in self.sent if w.owner is update and w.own]

    def last_landed(self, key: str) -> bytes | None:
        return next((value for k, value in reversed(self.landed) if k == key), None)


class Rules:
    """Connect's rule per writer: a retry is abandoned once its writer's generation moved since it was written."""

    def __init__(self, generations: dict[int, int], writer: int) -> None:
        self.generations, self.writer, self.generation = generations, writer, generations[writer]

    def __call__(self, retry: bool) -> str | None:
        return GENERATION_MOVED if retry and self.generations[self.writer] != self.generation else None


class Outcomes(RetryListener):
    def __init__(self) -> None:
        self.finished: list[tuple[StatusUpdate, Outcome]] = []

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        self.finished.append((update, outcome))


engine_steps = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, len(KEYS) - 1), st.integers(0, 1), st.booleans()),
    st.tuples(st.just("settle"), st.integers(0, 7), st.sampled_from(DELIVERIES)),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.15, 0.5, 1.0])),
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(engine_steps, max_size=40), st.sampled_from([RetryMode.PARTITION, RetryMode.PER_UPDATE]),
       st.sampled_from([1, 100]))
def test_the_engine_never_drops_a_newer_value_for_an_older_one(steps: list[tuple[Any, ...]], mode: RetryMode,
                                                                max_retries: int) -> None:
    """Submits of several keys by several writers, each write settled as written, failed (retriable or fatal) or timed
    out (lost, or landing late), in any order, the clock moving between: once Kafka takes every write, each key's
    newest value is the last in the topic, unless its own attempts ended it (a fatal error, its retries used up) or
    Connect's rule dropped its retry (its own writer's generation moved); an update's attempts are its own sends; and
    no update is superseded but by a newer value of its key."""
    clock = FakeClock()
    topic = Topic()
    outcomes = Outcomes()
    queue = RetryQueue(topic.send, RetryPolicy(AdditiveJitter(100, 800, 2.0, 0.0), max_retries, mode=mode),
                       [outcomes], route=lambda key: int(key[-1]), clock=clock)
    generations = {0: 1, 1: 1}
    submitted: dict[str, list[StatusUpdate]] = collections.defaultdict(list)
    counter = itertools.count()
    for step in steps:
        if step[0] == "submit":
            _, key_index, writer, moves = step
            if moves:
                generations[writer] += 1
            key, value = KEYS[key_index], f"{KEYS[key_index]}:{next(counter)}".encode()
            update = StatusUpdate(key, value, UpdateKind.CONNECTOR, Rules(generations, writer))
            topic.owners[value] = update
            submitted[key].append(queue.submit(update))
        elif step[0] == "settle" and topic.unsettled:
            topic.settle(step[1], step[2])
        elif step[0] == "advance":
            clock.advance(step[1])
    topic.take_every_write(queue, clock)
    assert queue.unsettled == 0
    for update, outcome in outcomes.finished:
        own = topic.own_sends(update)
        assert outcome.attempts == len(own), (update, outcome)
        if outcome.result is Result.SUPERSEDED:
            if outcome.reason == GENERATION_MOVED:
                # A retry of its own value was what the rule dropped (never a first attempt after an older copy).
                assert own, (update, outcome)
            else:
                assert outcome.reason == "a newer write for the key was submitted", outcome
                assert submitted[update.key][-1] is not update, (update, outcome)
        elif outcome.result is Result.FAILED:
            # Its own attempts ended it: its last one met a fatal error, or it had no retries left.
            assert outcome.error is not None, outcome
            assert own, (update, outcome)
            fatal = classify(outcome.error) is ErrorKind.FATAL
            assert (fatal and own[-1].delivery == "fatal") or len(own) == max_retries + 1, (update, outcome)
    for key, updates in submitted.items():
        newest = updates[-1]
        assert newest.outcome is not None
        if newest.outcome.result is Result.WRITTEN:
            assert topic.last_landed(key) == newest.value, (key, topic.landed)


# Keys over five partitions (a key's partition is its last character), and what a write may meet at a held partition.
HELD_KEYS = tuple(f"{name}{partition}" for name in "abc" for partition in range(5))
HOLD_DELIVERIES = (*DELIVERIES, "leader")

held_steps = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, len(HELD_KEYS) - 1)),
    st.tuples(st.just("settle"), st.integers(0, 30), st.sampled_from(HOLD_DELIVERIES)),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.05, 0.2, 1.0, 3.0, 10.0])),
    st.tuples(st.just("writable"), st.integers(0, 4)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(held_steps, max_size=120), st.sampled_from([0, 1, 3]), st.booleans(), st.sampled_from([None, 5.0]))
def test_once_kafka_takes_every_write_no_partition_stays_held(steps: list[tuple[Any, ...]], max_retries: int,
                                                              park: bool, timeout: float | None) -> None:
    """Writes to five partitions, settled in any order as written or failed (refused, timed out, a leader's move, a
    fatal error), the clock moving and the cluster saying a partition takes writes again between: once Kafka takes
    every write, every held partition is released and every update settled, parked ones included (their partition
    took writes again). A hold that nothing probes any more would stay for good: what the real-fault tests would
    see as a partition held long after the brokers came back."""
    clock = FakeClock()
    topic = Topic()
    backoff = AdditiveJitter(100, 1000, 2.0, 0.0)
    queue = RetryQueue(topic.send, RetryPolicy(backoff, max_retries, timeout=timeout, probe_backoff=backoff), [],
                       route=lambda key: int(key[-1]), clock=clock)
    if park:
        queue.park_after_last_retry()
    counter = itertools.count()
    for step in steps:
        if step[0] == "submit":
            key = HELD_KEYS[step[1]]
            value = f"{key}:{next(counter)}".encode()
            update = topic.owners[value] = StatusUpdate(key, value, UpdateKind.CONNECTOR, lambda retry: None)
            queue.submit(update)
        elif step[0] == "settle" and topic.unsettled:
            topic.settle(step[1], step[2])
        elif step[0] == "advance":
            clock.advance(step[1])
        elif step[0] == "writable":
            queue.writable_again(step[1])
    topic.take_every_write(queue, clock)
    assert queue.held_partitions == [], (queue.held_partitions, queue.unsettled, queue.parked_count)
    assert queue.unsettled == 0, queue.unsettled
    assert queue.parked_count == 0, queue.parked_count
