"""Differential test: the latest statuses from StatusCache (Python) and from the analytics (Spark SQL) agree.

Hypothesis generates status topics a busy cluster could leave: connectors, tasks and topics of a few
connectors (some with '-' or ':' in their names), rebalances (UNASSIGNED from older generations),
tombstones, garbled values, keys Connect cannot parse, spread over several partitions, with timestamps
that mostly grow (producers' clocks differ: now and then one goes back). The analytics read the
partitions interleaved by timestamp (a record arrives at the newest timestamp of its partition up to it,
ties in partition and offset order); the cache is fed the records in that order. Both must end with the
same statuses and the same counts of discarded records.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from status_store.analytics.analysis import analyze
from status_store.analytics.records import RAW_SCHEMA
from status_store.connect import codec
from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import ConnectorKey, State, TaskKey, TopicKey, TopicStatus, parse_key

CONNECTORS = ["a", "a-b", "é:1"]
TOPICS = ["t1", "t-2"]
WORKERS = ["w1:8083", "w2:8083"]
# Generations near each other (the stale UNASSIGNED filter compares them) and at the edges of Java's int.
GENERATIONS = [0, 1, 2, 3, -1, 2**31 - 1, 2**32 + 2]
TRACES = [None, "boom\n\tat X.y(X.java:1)", "é中\u2028", "\U0001f600"]
GARBLED_STATUSES = [
    b"", b"not json", b"[1]", b"null", b"\xff\xfe{}", b'{"state":"RUNNING","generation":NaN}',
    b'{"state":"BOGUS","trace":null,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1.5}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":"1"}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w"}',
    b'{"state":"RUNNING","trace":7,"worker_id":"w","generation":1}',
    b'{"topic":{"name":"t1","connector":"a","task":0,"discoverTimestamp":1}}',
]
ODD_BUT_VALID_STATUSES = [
    b'{"state":"FAILED","trace":"boom","worker_id":"w9","generation":4} trailing',
    b'{"extra":[1,2],"state":"PAUSED","trace":null,"worker_id":"w8","generation":2}',
    b' {"state":"UNASSIGNED","worker_id":"w7","generation":3}',
    b'{"state":"FAILED","trace":"\\uD83D\\uDE00 \\u00e9","worker_id":"w\\u0041","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":null,"generation":1}',
]
# Topic values Connect skips, and odd ones it reads (its TopicStatus takes any strings and any task).
ODD_TOPIC_VALUES = [
    b"", b"{}", b'{"topic":"t1"}', b'{"topic":{"name":"t1","connector":"a","task":"0","discoverTimestamp":1}}',
    b'{"topic":{"name":"t1","connector":"a","task":-1,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t1:x","connector":"a","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"","connector":"a","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t1","connector":"","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t1","connector":"a","task":0,"discoverTimestamp":1.5}}',
    b'{"topic":{"name":"t1","connector":"a","task":0}}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}',
]
# Keys Connect discards, and keys it reads in a way one might not expect (Java's split and parseInt).
ODD_KEYS = [
    None, "bogus-key", "status-connector-", "status-task-a", "status-task-a-x", "status-task--0",
    "status-task-a--1", "status-task-a-+1", "status-task-a-01", "status-task-a-1-", "status-task-a-2147483648",
    "status-topic-:connector-a", "status-topic-nocolon", "status-topic-t1:connector-", "status-topic-t1:",
    "status-topic-t1:xxxxxxxxxxa", "status-task-a-\u0661",
]

Record = tuple[str | None, bytes | None]
# A record as written: its partition, its timestamp, its key and value.
Written = tuple[int, int, Record]


def status_value(state: State, worker: str, generation: int, trace: str | None) -> bytes | None:
    return codec.encode_status(state, worker, generation, trace)


connectors = st.sampled_from(CONNECTORS)
task_keys = st.builds(lambda c, n: f"status-task-{c}-{n}", connectors, st.integers(0, 2))
connector_keys = st.builds(lambda c: f"status-connector-{c}", connectors)
topic_keys = st.builds(lambda t, c: f"status-topic-{t}:connector-{c}", st.sampled_from(TOPICS), connectors)
statuses = st.builds(status_value, st.sampled_from(State), st.sampled_from(WORKERS), st.sampled_from(GENERATIONS),
                     st.sampled_from(TRACES))
# Rebalances: RUNNING and UNASSIGNED of nearby generations, so stale UNASSIGNED records are common.
rebalances = st.builds(status_value, st.sampled_from([State.RUNNING, State.UNASSIGNED]),
                       st.sampled_from(WORKERS), st.integers(0, 3), st.none())
garbage = st.one_of(st.none(), st.sampled_from(GARBLED_STATUSES), st.sampled_from(ODD_BUT_VALID_STATUSES))
topic_values = st.one_of(
    st.builds(lambda t, c, task, at: codec.encode_topic_status(TopicStatus(t, c, task, at)), st.sampled_from(TOPICS),
              connectors, st.integers(0, 3), st.sampled_from([0, 1700000000000, -1, 2**63 - 1])),
    st.none(), st.sampled_from(ODD_TOPIC_VALUES))
# Mostly task statuses (rebalances above all, so stale UNASSIGNED records are common); now and then a
# connector deleted, garbage, or a key Connect reads oddly.
records = st.one_of(
    *[st.tuples(task_keys, rebalances)] * 4, *[st.tuples(task_keys, statuses)] * 2, st.tuples(task_keys, garbage),
    *[st.tuples(connector_keys, statuses)] * 2, st.tuples(connector_keys, garbage),
    *[st.tuples(topic_keys, topic_values)] * 2,
    st.tuples(st.sampled_from(ODD_KEYS), st.one_of(statuses, garbage)),
)


@st.composite
def topics(draw: st.DrawFn) -> list[Written]:
    """Records in the order they were written; a key always goes to the same partition."""
    history = draw(st.lists(records, min_size=50, max_size=400))
    partitions = draw(st.integers(1, 3))
    keys = sorted({key or "" for key, _ in history})
    placed = dict(zip(keys, draw(st.lists(st.integers(0, partitions - 1), min_size=len(keys),
                                          max_size=len(keys))), strict=True))
    steps = draw(st.lists(st.sampled_from([1, 1, 1, 0, 2, -1, -3]), min_size=len(history), max_size=len(history)))
    written, clock = [], 1_763_780_000_000
    for step, (key, value) in zip(steps, history, strict=True):
        clock += step * 1000
        written.append((placed[key or ""], clock, (key, value)))
    return written


def read_order(written: list[Written]) -> list[tuple[StatusRecord, int]]:
    """The records with their offsets and timestamps, in the order the analytics take them to be read."""
    offsets: dict[int, int] = {}
    newest: dict[int, int] = {}
    placed = []
    for partition, timestamp, (key, value) in written:
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        arrival = newest[partition] = max(newest.get(partition, timestamp), timestamp)
        record = StatusRecord(key.encode() if key is not None else None, value, partition, offset)
        placed.append(((arrival, partition, offset), record, timestamp))
    return [(record, timestamp) for _, record, timestamp in sorted(placed, key=lambda item: item[0])]


def cache_view(cache: StatusCache, names: set[str]) -> set[tuple[Any, ...]]:
    """Everything the cache holds for these connectors (topic statuses under the topic their key names)."""
    view: set[tuple[Any, ...]] = set()
    for connector in names:
        found = cache.get_connector(connector)
        if found is not None:
            view.add(("connector", connector, None, found.state.value, found.worker_id, found.generation,
                      found.trace))
        for task in cache.get_all_tasks(connector):
            view.add(("task", connector, task.id.task, task.state.value, task.worker_id, task.generation, task.trace))
        for topic in cache.topic_names(connector):
            view.add(("topic", connector, topic, cache.get_topic(connector, topic)))
    return view


def spark_view(rows: list[Any]) -> set[tuple[Any, ...]]:
    """The analytics' latest rows as ``cache_view`` shows the cache."""
    view: set[tuple[Any, ...]] = set()
    for row in rows:
        if row.kind == "topic":
            view.add(("topic", row.connector, row.topic, codec.decode_topic_status(row.value.encode())))
        else:
            view.add((row.kind, row.connector, row.task, row.state, row.worker_id, row.generation, row.trace))
    return view


def connectors_named(history: list[Written]) -> set[str]:
    names = set()
    for _, _, (key, _) in history:
        parsed = parse_key(key) if key is not None else None
        if isinstance(parsed, ConnectorKey | TaskKey | TopicKey):
            names.add(parsed.connector)
    return names


# Each example is one Spark job of a few seconds: few examples, each a long history. No shrinking (it would
# run Spark hundreds of times); a failure shows the whole history and the statuses that differ.
@pytest.mark.timeout(600)
@settings(max_examples=6, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(history=topics())
def test_the_cache_and_the_analytics_agree_on_the_latest_statuses(spark: SparkSession,
                                                                 history: list[Written]) -> None:
    read = read_order(history)
    rows = [("status", record.partition, record.offset, timestamp,
             record.key.decode() if record.key is not None else None, record.value) for record, timestamp in read]
    cache = StatusCache()
    cache.apply(record for record, _ in read)
    analysis = analyze(spark.createDataFrame(rows, RAW_SCHEMA), spark.createDataFrame([], RAW_SCHEMA))
    latest = analysis.latest.collect()
    theirs, ours = spark_view(latest), cache_view(cache, connectors_named(history))
    assert theirs == ours, f"only in Spark: {theirs - ours}; only in the cache: {ours - theirs}"
    assert len(latest) == len(theirs)  # one row per connector, task and topic status
    counters = analysis.counters()
    assert (counters["invalid_keys"], counters["garbled_values"], counters["stale_unassigned"]) == (
        cache.stats.invalid_keys, cache.stats.garbled_values, cache.stats.stale_unassigned)
    analysis.unpersist()
