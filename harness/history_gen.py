"""Synthetic status history for bench/spark_history.py: Parquet files in the raw-record schema.

    .venv/bin/python -m bench.history_gen OUT_DIR --events 1000000 [--seed 7] [--quick]

writes OUT_DIR/history/part-NNNNN.parquet (N history events, about 1M per file) and
OUT_DIR/status/part-00000.parquet (a matching status topic: a few records per key). Columns are
the export format's: topic, partition, offset, timestamp (ms), key, value (UTF-8 text, null for a
tombstone). ``produce`` puts them into a broker's topics, each record at its generated partition and
offset with its timestamp.

Why this shape: the analytics are per key, ordered in time, so what costs is the number of keys,
the events per key and the share of keys that change state often. The generator keeps about 150
events per key at every size (the key count grows with N), so that a larger N means more of the
same fleet rather than longer histories of the same keys.

- Connectors with 1 to 8 tasks each, and a few topic keys per connector (KIP-558 active topics).
- Each connector or task follows a Markov chain over Connect's states (RUNNING most of the time,
  FAILED episodes that recover through RESTARTING or a rebalance, pauses, deletes and re-creations);
  the generation grows at each rebalance (UNASSIGNED then RUNNING). 1 % of the keys flap: they switch
  between RUNNING and FAILED every ~30 s instead of every ~10 min.
- About one status write in three also has an ``outcome`` event (written, failed, superseded, with
  attempts, the last Kafka error and the latency), timed at the status time plus its latency.
- Half the FAILED status events of connectors and tasks are followed by a ``restart`` event of the sidecar's
  auto-restart (status_store/act/events.py: mostly ``restarted``, some ``rebalancing``, ``unreachable``,
  ``refused``, ``not-found``), answered 50 ms to 5 s later, its ``failed_at`` up to 100 ms after the FAILED.
- A few records per 10,000 are garbled (not JSON, truncated, empty, null, unknown event or state),
  and a few carry an unknown extra field (which must be ignored).

The time line is cut into windows of about 1M events; each window is one file, generated from the
state each key had at the end of the previous one, so 30M events never sit in memory at once.
Offsets grow in time order within each partition, as the service's writes would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HISTORY_TOPIC = "connect-status-history"
STATUS_TOPIC = "connect-status"
PARTITIONS = 12
EVENTS_PER_KEY = 150
EVENTS_PER_FILE = 1_000_000
# A history small enough to generate and analyse in a second or two (--quick).
QUICK_EVENTS = 20_000
START_MS = 1_763_700_000_000
NORMAL_GAP_MS = 600_000
FLAPPER_GAP_MS = 30_000
FLAPPER_SHARE = 0.01
OUTCOME_SHARE = 0.3
RESTART_SHARE = 0.5
GARBLED_SHARE = 0.0005
EXTRA_FIELD_SHARE = 0.01
SIDECARS = ("host-a", "host-b", "host-c")
WORKERS = tuple(f"10.0.0.{i}:8083" for i in range(1, 11))
TRACE = "org.apache.kafka.connect.errors.ConnectException: boom\\n\\tat Task.poll(Task.java:42)\\n"

SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()),
    ("key", pa.string()), ("value", pa.string()),
])

# States, by index; DESTROYED is a delete (a tombstone in the status topic).
STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED")
UNASSIGNED, RUNNING, PAUSED, FAILED, DESTROYED, RESTARTING, STOPPED = range(len(STATES))
# Transition probabilities from each state (rows) to the next (columns), for connectors and tasks.
_NORMAL = np.array([
    # UNA   RUN   PAU   FAI   DES   RES   STO
    [0.00, 0.90, 0.00, 0.06, 0.04, 0.00, 0.00],  # UNASSIGNED
    [0.10, 0.62, 0.05, 0.15, 0.02, 0.03, 0.03],  # RUNNING
    [0.05, 0.80, 0.05, 0.00, 0.10, 0.00, 0.00],  # PAUSED
    [0.20, 0.25, 0.00, 0.10, 0.05, 0.40, 0.00],  # FAILED
    [0.50, 0.50, 0.00, 0.00, 0.00, 0.00, 0.00],  # DESTROYED (re-created)
    [0.00, 0.75, 0.00, 0.25, 0.00, 0.00, 0.00],  # RESTARTING
    [0.00, 0.90, 0.00, 0.00, 0.10, 0.00, 0.00],  # STOPPED
])
_FLAPPER = np.zeros_like(_NORMAL)
_FLAPPER[:, RUNNING] = 1.0
_FLAPPER[RUNNING] = [0.0, 0.05, 0.0, 0.95, 0.0, 0.0, 0.0]
_NORMAL_CUM = _NORMAL.cumsum(axis=1)
_FLAPPER_CUM = _FLAPPER.cumsum(axis=1)

KIND_CONNECTOR, KIND_TASK, KIND_TOPIC = 0, 1, 2
RESULTS = ("written", "failed", "superseded")
REASONS = ("written", "retries exhausted", "a newer write")
ERRORS = ("REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "MSG_SIZE_TOO_LARGE")
# The sidecar's restart results (status_store.act.plan.Result) and how often each comes.
RESTART_RESULTS = ("restarted", "rebalancing", "unreachable", "refused", "not-found")
RESTART_ODDS = (0.8, 0.08, 0.08, 0.02, 0.02)
GARBLED = ("not json", "", None, '{"event":"status","time":', '{"event":"restart","time":1}', "[1,2,3]")


@dataclass
class Fleet:
    """Every key and the state it is in at the current point of the time line."""

    key: np.ndarray  # object array of key strings
    kind: np.ndarray  # int8: KIND_*
    prefix: pa.Array  # the JSON fields naming the key: ',"key":...,"task":N' (and the topic)
    topic_name: list[str | None]
    connector_name: list[str]
    flapper: np.ndarray  # bool
    partition: np.ndarray  # int32
    clock: np.ndarray  # int64: time of the key's last event
    state: np.ndarray  # int8: current state
    generation: np.ndarray  # int64
    worker: np.ndarray  # int8: index in WORKERS


def make_fleet(n_events: int, rng: np.random.Generator) -> Fleet:
    """Connectors, their tasks and topics, about EVENTS_PER_KEY events per key."""
    wanted = max(60, n_events // EVENTS_PER_KEY)
    keys: list[str] = []
    kinds: list[int] = []
    prefixes: list[str] = []
    topics: list[str | None] = []
    connectors: list[str] = []
    c = 0
    while len(keys) < wanted:
        name = f"{'sink' if c % 3 else 'source'}-{c}"
        entries: list[tuple[int, str, str, str | None]] = [(KIND_CONNECTOR, f"status-connector-{name}", "null", None)]
        entries += [(KIND_TASK, f"status-task-{name}-{t}", str(t), None) for t in range(int(rng.integers(1, 9)))]
        if c % 4 == 0:
            entries += [(KIND_TOPIC, f"status-topic-orders-{c}-{i}:connector-{name}", "null", f"orders-{c}-{i}")
                        for i in range(2)]
        for kind_code, key, task, topic in entries:
            keys.append(key)
            kinds.append(kind_code)
            connectors.append(name)
            topics.append(topic)
            kind_name = ("connector", "task", "topic")[kind_code]
            topic_field = f',"topic":"{topic}"' if topic is not None else ""
            prefixes.append(f'","key":"{key}","kind":"{kind_name}","connector":"{name}","task":{task}{topic_field}')
        c += 1
    n = len(keys)
    kind = np.array(kinds, dtype=np.int8)
    flapper = (rng.random(n) < FLAPPER_SHARE) & (kind != KIND_TOPIC)
    if not flapper.any():
        flapper[np.flatnonzero(kind == KIND_TASK)[0]] = True  # small inputs too have one flapping key
    return Fleet(
        key=np.array(keys, dtype=object), kind=kind, prefix=pa.array(prefixes),
        topic_name=topics, connector_name=connectors, flapper=flapper,
        partition=(np.arange(n, dtype=np.int32) * 7919) % PARTITIONS,
        clock=START_MS - rng.integers(0, NORMAL_GAP_MS, n, dtype=np.int64),
        state=np.full(n, RUNNING, dtype=np.int8), generation=rng.integers(0, 5, n, dtype=np.int64),
        worker=rng.integers(0, len(WORKERS), n, dtype=np.int8),
    )


@dataclass
class Steps:
    """Status events of one window, one row per event (columns as arrays)."""

    key: np.ndarray
    time: np.ndarray
    state: np.ndarray
    generation: np.ndarray
    worker: np.ndarray


def _walk(fleet: Fleet, idx: np.ndarray, gap_ms: int, width: int, end_ms: int, cum: np.ndarray,
          rng: np.random.Generator) -> Steps:
    """Advance the keys ``idx`` by up to ``width`` status events each, keeping those before ``end_ms``."""
    out_key, out_time, out_state, out_gen, out_worker = [], [], [], [], []
    clock, state = fleet.clock[idx].copy(), fleet.state[idx].copy()
    gen, worker = fleet.generation[idx].copy(), fleet.worker[idx].copy()
    topic = fleet.kind[idx] == KIND_TOPIC
    for _ in range(width):
        nxt = clock + rng.exponential(gap_ms, len(idx)).astype(np.int64) + 1
        live = nxt < end_ms
        if not live.any():
            break
        u = rng.random(len(idx))
        new = (u[:, None] > cum[state]).sum(axis=1).astype(np.int8)
        # Topic keys are put (state "RUNNING" stands for a put here) or deleted.
        new = np.where(topic, np.where(u < 0.9, RUNNING, DESTROYED), new).astype(np.int8)
        rebalance = (state == UNASSIGNED) & (new == RUNNING)
        gen = np.where(live & rebalance, gen + 1, gen)
        worker = np.where(live & rebalance, rng.integers(0, len(WORKERS), len(idx)), worker).astype(np.int8)
        state = np.where(live, new, state).astype(np.int8)
        clock = np.where(live, nxt, clock)
        out_key.append(idx[live])
        out_time.append(nxt[live])
        out_state.append(new[live])
        out_gen.append(gen[live])
        out_worker.append(worker[live])
    fleet.clock[idx], fleet.state[idx], fleet.generation[idx], fleet.worker[idx] = clock, state, gen, worker
    cat = np.concatenate
    if not out_key:
        empty = np.zeros(0, dtype=np.int64)
        return Steps(empty, empty, empty.astype(np.int8), empty, empty.astype(np.int8))
    return Steps(cat(out_key), cat(out_time), cat(out_state), cat(out_gen), cat(out_worker))


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _pick(options: tuple[str, ...], idx: np.ndarray) -> pa.Array:
    return pa.array(options).take(pa.array(idx))


def _json(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def history_values(fleet: Fleet, steps: Steps, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(key index, event time, JSON value) of the status events of ``steps``, their outcomes and restarts."""
    n = len(steps.key)
    topic = fleet.kind[steps.key] == KIND_TOPIC
    deleted = steps.state == DESTROYED
    state_json = _pick((*(f'"{s}"' for s in STATES), "null"),
                       np.where(topic & ~deleted, len(STATES), steps.state))
    worker_json = pc.if_else(pa.array(deleted | topic), "null",
                             _pick(tuple(f'"{w}"' for w in WORKERS), steps.worker))
    gen_json = pc.if_else(pa.array(deleted | topic), "null", _text(steps.generation))
    trace_json = pc.if_else(pa.array(steps.state == FAILED), f'"{TRACE}"', "null")
    sidecar = _pick(SIDECARS, steps.key % len(SIDECARS))
    prefix = fleet.prefix.take(pa.array(steps.key))
    extra = pc.if_else(pa.array(rng.random(n) < EXTRA_FIELD_SHARE), ',"schema_version":2', "")
    status = _json('{"event":"status","time":', _text(steps.time), ',"sidecar":"', sidecar, prefix,
                   ',"state":', state_json, ',"worker_id":', worker_json, ',"generation":', gen_json,
                   ',"trace":', trace_json, extra, "}")

    has = rng.random(n) < OUTCOME_SHARE
    o = np.flatnonzero(has)
    result = np.searchsorted([0.9, 0.94], rng.random(len(o)), side="right")
    attempts = np.where(result == 0, 1 + rng.geometric(0.7, len(o)) - 1,
                        np.where(result == 1, 6, rng.integers(0, 3, len(o))))
    error = np.where(result == 1, rng.integers(0, len(ERRORS), len(o)), rng.integers(0, len(ERRORS) - 1, len(o)))
    no_error = (result != 1) & (attempts <= 1)
    latency = np.where(attempts <= 1, rng.integers(2, 20, len(o)),
                       300 * (2 ** np.minimum(attempts, 6)) + rng.integers(0, 300, len(o)))
    outcome = _json('{"event":"outcome","time":', _text(steps.time[o] + latency), ',"sidecar":"', sidecar.take(o),
                    prefix.take(o), ',"state":', state_json.take(o), ',"result":"', _pick(RESULTS, result),
                    '","attempts":', _text(attempts), ',"error":',
                    pc.if_else(pa.array(no_error), "null", _pick(tuple(f'"{e}"' for e in ERRORS), error)),
                    ',"reason":"', _pick(REASONS, result), '","latency_ms":', _text(latency), "}")

    r = np.flatnonzero((steps.state == FAILED) & ~topic & (rng.random(n) < RESTART_SHARE))
    failed_at = steps.time[r] + rng.integers(0, 100, len(r))
    answered = failed_at + rng.integers(50, 5000, len(r))
    result = rng.choice(len(RESTART_RESULTS), len(r), p=RESTART_ODDS)
    restart = _json('{"event":"restart","time":', _text(answered), ',"sidecar":"', sidecar.take(r), prefix.take(r),
                    ',"worker_id":', worker_json.take(r), ',"attempt":', _text(rng.integers(1, 4, len(r))),
                    ',"reason":"org.apache.kafka.connect.errors.ConnectException: boom","result":"',
                    _pick(RESTART_RESULTS, result), '","http_status":',
                    _pick(("204", "409", "null", "400", "404"), result), ',"error":null,"failed_at":',
                    _text(failed_at), "}")
    keys = np.concatenate([steps.key, steps.key[o], steps.key[r]])
    times = np.concatenate([steps.time, steps.time[o] + latency, answered])
    values = pa.concat_arrays([status, outcome, restart])
    garbled = np.flatnonzero(rng.random(len(keys)) < GARBLED_SHARE)
    if len(garbled):
        mask = np.zeros(len(keys), dtype=bool)
        mask[garbled] = True
        replacement = pa.array(GARBLED, pa.string()).take(pa.array(np.arange(len(keys)) % len(GARBLED)))
        values = pc.if_else(pa.array(mask), replacement, values)
    return keys, times, values


def _table(topic: str, fleet: Fleet, keys: np.ndarray, times: np.ndarray, values: pa.Array,
           next_offset: np.ndarray) -> pa.Table:
    """Records in time order, offsets growing per partition from ``next_offset`` (updated)."""
    partition = fleet.partition[keys]
    order = np.lexsort((times, partition))
    partition, keys, times = partition[order], keys[order], times[order]
    starts = np.searchsorted(partition, np.arange(PARTITIONS))
    counts = np.bincount(partition, minlength=PARTITIONS)
    offsets = np.arange(len(order), dtype=np.int64) - starts[partition] + next_offset[partition]
    next_offset += counts
    by_time = np.argsort(times, kind="stable")
    return pa.table([
        pa.array(np.full(len(order), topic, dtype=object)).cast(pa.string()).take(by_time),
        pa.array(partition[by_time]), pa.array(offsets[by_time]), pa.array(times[by_time]),
        pa.array(fleet.key[keys[by_time]], pa.string()), values.take(pa.array(order[by_time])),
    ], schema=SCHEMA)


def generate(out_dir: Path, n_events: int, seed: int = 7) -> None:
    """Write ``n_events`` history records and the matching status topic under ``out_dir``."""
    rng = np.random.default_rng(seed)
    fleet = make_fleet(n_events, rng)
    (out_dir / "history").mkdir(parents=True, exist_ok=True)
    (out_dir / "status").mkdir(parents=True, exist_ok=True)
    normal, flappers = np.flatnonzero(~fleet.flapper), np.flatnonzero(fleet.flapper)
    # Events per ms of the whole fleet: status events (plus outcomes) of normal keys and flappers.
    rate = (len(normal) / NORMAL_GAP_MS + len(flappers) / FLAPPER_GAP_MS) * (1 + OUTCOME_SHARE)
    window_ms = int(min(EVENTS_PER_FILE, n_events) / rate) + 1
    next_offset = np.zeros(PARTITIONS, dtype=np.int64)
    written, part, start = 0, 0, START_MS
    while written < n_events:
        end = start + window_ms
        steps = [
            _walk(fleet, group, gap, math.ceil(window_ms / gap * 3) + 10, end, cum, rng)
            for group, gap, cum in ((normal, NORMAL_GAP_MS, _NORMAL_CUM), (flappers, FLAPPER_GAP_MS, _FLAPPER_CUM))
        ]
        merged = Steps(*(np.concatenate([getattr(s, f) for s in steps]) for f in Steps.__dataclass_fields__))
        keys, times, values = history_values(fleet, merged, rng)
        keep = np.argsort(times, kind="stable")[: n_events - written]
        table = _table(HISTORY_TOPIC, fleet, keys[keep], times[keep], values.take(pa.array(keep)), next_offset)
        pq.write_table(table, out_dir / "history" / f"part-{part:05d}.parquet", compression="snappy")
        written += len(keep)
        part += 1
        start = end
    pq.write_table(status_topic(fleet, rng), out_dir / "status" / "part-00000.parquet", compression="snappy")


def _status_value(state: int, generation: int, worker: int) -> str | None:
    if state == DESTROYED:
        return None
    trace = f'"{TRACE}"' if state == FAILED else "null"
    return f'{{"state":"{STATES[state]}","trace":{trace},"worker_id":"{WORKERS[worker]}","generation":{generation}}}'


def status_topic(fleet: Fleet, rng: np.random.Generator) -> pa.Table:
    """The status topic as Connect left it: an older record and the final one per key, plus noise.

    The noise exercises the read rules: a stale UNASSIGNED (same generation as a final RUNNING:
    ignored), a newer UNASSIGNED (generation + 1: applied), a garbled value (skipped), and the
    tombstones of deleted connectors (which also delete their tasks).
    """
    keys: list[int] = []
    times: list[int] = []
    values: list[str | None] = []
    for k in range(len(fleet.key)):  # one pass over the keys (not the events): at most ~200k
        end = int(fleet.clock[k])
        state, gen, worker = int(fleet.state[k]), int(fleet.generation[k]), int(fleet.worker[k])
        if fleet.kind[k] == KIND_TOPIC:
            topic, conn = fleet.topic_name[k], fleet.connector_name[k]
            put = (f'{{"topic":{{"name":"{topic}","connector":"{conn}","task":0,'
                   f'"discoverTimestamp":{START_MS}}}}}')
            keys += [k, k]
            times += [end - 1000, end]
            values += [put, None if state == DESTROYED else put]
            continue
        keys += [k, k]
        times += [end - 60_000, end]
        values += [_status_value(int(rng.choice([RUNNING, FAILED, UNASSIGNED])), max(gen - 1, 0), worker),
                   _status_value(state, gen, worker)]
        u = rng.random()
        if fleet.kind[k] == KIND_TASK and state == RUNNING and u < 0.05:
            keys.append(k)
            times.append(end + 1)
            values.append(_status_value(UNASSIGNED, gen - (u < 0.025), worker))
            continue
        if fleet.kind[k] == KIND_TASK and state == RUNNING and u < 0.1:
            keys.append(k)
            times.append(end + 1)
            values.append(_status_value(UNASSIGNED, gen + 1, worker))
            continue
        if u > 0.99:
            keys.append(k)
            times.append(end + 1)
            values.append('{"state":"RUNNING","trace":null,"worker_id":"w","generation":"x"}')
    return _table(STATUS_TOPIC, fleet, np.array(keys), np.array(times, dtype=np.int64),
                  pa.array(values, pa.string()), np.zeros(PARTITIONS, dtype=np.int64))


class LoadError(RuntimeError):
    """A generated topic is not in the broker as it was generated."""


def produce(bootstrap_servers: str, data: Path, topics: tuple[str, str],
            producer_config: Mapping[str, Any] | None = None, timeout_s: float = 600.0) -> None:
    """The generated status and history records (``data``'s ``status`` and ``history`` files) written into two
    topics (``topics``: status, history; created when missing), each record in its generated partition, at its
    generated offset, with its timestamp; ``LoadError`` when a record was not written or a partition does not end
    where the files say. Files that continue a loaded history (their offsets after the topics' ends) add to it.

    The topics keep every record whatever its timestamp (retention off: the generated ones are a year old, and a
    broker's default seven days delete them at its next retention check). The producer is idempotent: a new topic's
    first batches are refused while its partitions' leadership settles ("not leader for partition"), and a plain
    producer's retry of such a batch lands after a later batch of the same partition that was accepted meanwhile,
    which puts records at other offsets than generated (and so changes which record of a key is the last). Loads of
    the same files gave different ``latest`` counts that way (6,376 and 6,385 at 1M events).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    keep = {"retention.ms": "-1", "retention.bytes": "-1"}
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1, config=keep) for name in topics]).values():
        try:
            future.result(timeout_s)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failed.append(error)

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000, **(producer_config or {}),
                         "enable.idempotence": True})
    deadline = time.monotonic() + timeout_s
    ends: dict[tuple[str, int], int] = {}
    for name, directory in zip(topics, ("status", "history"), strict=True):
        for path in sorted((data / directory).glob("*.parquet")):
            for batch in pq.read_table(path).to_batches(50_000):
                for partition, offset, timestamp, key, value in zip(*(batch.column(c).to_pylist() for c in (
                        "partition", "offset", "timestamp", "key", "value")), strict=True):
                    ends[name, partition] = max(ends.get((name, partition), 0), offset + 1)
                    while True:
                        try:
                            producer.produce(name, None if value is None else value.encode(),
                                             None if key is None else key.encode(), partition=partition,
                                             timestamp=timestamp, on_delivery=delivered)
                            break
                        except BufferError:
                            if time.monotonic() > deadline:
                                raise LoadError(f"the broker took too little within {timeout_s:g} s") from None
                            producer.poll(0.1)
    if producer.flush(max(deadline - time.monotonic(), 1.0)) != 0 or failed:
        raise LoadError(f"{len(failed)} record(s) not written (first: {failed[0].str() if failed else 'timeout'})")
    _check_ends(bootstrap_servers, ends)


def _check_ends(bootstrap_servers: str, expected: Mapping[tuple[str, int], int]) -> None:
    """Every partition ends where the files say (offsets from 0 to their last, none lost or doubled), as the first
    Fetch answers say (the analytics' own planner: some brokers answer ListOffsets wrongly)."""
    from status_store.analytics.records import plan_topics

    topics = sorted({topic for topic, _ in expected})
    for plan in plan_topics({"bootstrap.servers": bootstrap_servers}, topics, max_records_per_range=1 << 62):
        starts = {r.partition: r.start for r in plan.ranges}
        for (topic, partition), end in sorted(expected.items()):
            if topic == plan.topic and (starts.get(partition, 0), plan.next_offsets.get(partition)) != (0, end):
                raise LoadError(f"{topic}/{partition} holds offsets {starts.get(partition)} to "
                                f"{plan.next_offsets.get(partition)}; the files end at {end}")
