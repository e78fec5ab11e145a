"""The status analytics in pandas, in one process: the baseline of bench/spark_history.py.

    .venv/bin/python -m bench.pandas_history DATA_DIR OUT_DIR
    .venv/bin/python -m bench.pandas_history --quick     # a small generated history, outputs in a temporary directory

reads DATA_DIR/status/*.parquet and DATA_DIR/history/*.parquet (the raw-record schema written by
harness/history_gen.py or an export), computes what ``status_store.analytics`` computes in Spark, and
writes one Parquet file per result to OUT_DIR. It is what a careful pandas user would write: every
step vectorised, the whole history in one DataFrame.

- JSON values are parsed by pyarrow's JSON reader (C++), all rows of a file in one call: a
  per-row ``json.loads`` would be the bottleneck and is no fair baseline. A value that is not one
  JSON object is found by a cheap check first; a block the reader rejects (a wrong type, two
  objects on a line) is split in halves until the bad rows are found, so one garbled value costs
  a few extra parses, never a wrong row.
- Strings become categoricals as soon as they are parsed; only the fields the analytics use are kept.
- The latest statuses come from the store's own cache (``status_store.connect.cache.StatusCache``, where
  Connect's read rules live), fed the status topic in the order the Spark analytics take it to be
  read: the rules exist once in Python. The status topic is compacted and small beside the history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from status_store.connect.cache import StatusCache, StatusRecord
from status_store.connect.model import ConnectorKey, TaskKey, TopicKey, connector_key, parse_key, task_key, topic_key

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED")
KINDS = ("connector", "task", "topic")
RESULTS = ("written", "failed", "superseded")
# The sidecar's restarts are read (not garbled) but this baseline computes none of their outputs (DuckDB's does).
RESTART_RESULTS = ("restarted", "rebalancing", "unreachable", "refused", "not-found", "unauthorized", "tls-failed")
DEFAULT_FLAP_TRANSITIONS = 5
DEFAULT_FLAP_WINDOW_MS = 600_000
DAY_MS = 86_400_000
LONG_MIN = -(2**63)

HISTORY_FIELDS = pa.schema([
    ("event", pa.string()), ("time", pa.int64()), ("key", pa.string()), ("kind", pa.string()),
    ("connector", pa.string()), ("task", pa.int64()), ("topic", pa.string()), ("state", pa.string()),
    ("result", pa.string()), ("attempts", pa.int64()), ("error", pa.string()), ("latency_ms", pa.int64()),
    ("attempt", pa.int64()),
])


# ------------------------------------------------------------------------------------------ JSON parsing

def _text(values: pa.Array) -> pa.Array:
    """Values as UTF-8 text; binary values with undecodable bytes replaced (the export's rule)."""
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return values
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:
        # Rare (only invalid UTF-8 gets here): decode each value with replacement.
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values.to_pylist()],
                        pa.string())


def _read_lines(texts: pa.Array, schema: pa.Schema) -> pa.Table | None:
    """One JSON object per text, read in one call; None when the reader rejects the block."""
    lines = pc.binary_join_element_wise(texts, pa.scalar("\n"), "")
    joined = pa.concat_arrays([lines]) if isinstance(lines, pa.Array) else lines.combine_chunks()
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset:joined.offset + len(joined) + 1]
    data = joined.buffers()[2][offsets[0]:offsets[-1]]
    try:
        table = pj.read_json(pa.BufferReader(data), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid:
        return None
    return table if table.num_rows == len(texts) else None


def _parse_block(texts: pa.Array, schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """Parsed rows and a mask of the texts that parsed, splitting rejected blocks in halves."""
    table = _read_lines(texts, schema)
    if table is not None:
        return table, np.ones(len(texts), dtype=bool)
    if len(texts) == 1:
        return schema.empty_table(), np.zeros(1, dtype=bool)
    half = len(texts) // 2
    left, left_ok = _parse_block(texts.slice(0, half), schema)
    right, right_ok = _parse_block(texts.slice(half), schema)
    return pa.concat_tables([left, right]), np.concatenate([left_ok, right_ok])


def parse_objects(values: pa.Array, schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """Each value parsed as a JSON object with ``schema`` (other fields ignored); rows of nulls and
    False in the mask where a value is null or not one JSON object of those types."""
    texts = _text(values)
    # A compact JSON object starts with '{' and ends with '}'; a raw line break would split the line.
    candidate = pc.and_(pc.and_(pc.starts_with(texts, "{"), pc.ends_with(texts, "}")),
                        pc.invert(pc.match_substring_regex(texts, "[\r\n]")))
    candidates = np.flatnonzero(candidate.fill_null(False).to_numpy(zero_copy_only=False))
    parsed, ok = (_parse_block(texts.take(pa.array(candidates)), schema) if len(candidates)
                  else (schema.empty_table(), np.zeros(0, dtype=bool)))
    good = candidates[ok]
    position = np.full(len(texts), -1, dtype=np.int64)
    position[good] = np.arange(len(good))
    mask = np.zeros(len(texts), dtype=bool)
    mask[good] = True
    return parsed.take(pa.array(position, mask=~mask)), mask


# ------------------------------------------------------------------------------------------ inputs

def _categorical(table: pa.Table) -> pa.Table:
    """String columns dictionary-encoded (pandas categoricals): keys and states repeat a lot."""
    return pa.table({name: pc.dictionary_encode(col) if pa.types.is_string(col.type) else col
                     for name, col in zip(table.column_names, table.columns, strict=True)})


def read_history(paths: list[Path]) -> tuple[pd.DataFrame, int]:
    """Valid history events (one row each, with the record's partition and offset) and the garbled count."""
    tables, garbled = [], 0
    for path in paths:
        raw = pq.read_table(path, columns=["partition", "offset", "value"])
        parsed, ok = parse_objects(raw.column("value").combine_chunks(), HISTORY_FIELDS)
        valid = pa.array(ok) if len(ok) else pa.array([], pa.bool_())
        event, kind, state = parsed.column("event"), parsed.column("kind"), parsed.column("state")
        status = pc.equal(event, "status")
        shape = pc.and_kleene(pc.is_in(event, pa.array(["status", "outcome", "restart"])),
                              pc.is_in(kind, pa.array(KINDS)))
        shape = pc.and_kleene(shape, pc.and_(pc.is_valid(parsed.column("time")), pc.is_valid(parsed.column("key"))))
        shape = pc.and_kleene(shape, pc.is_valid(parsed.column("connector")))
        shape = pc.and_kleene(shape, pc.or_kleene(pc.not_equal(kind, "task"), pc.is_valid(parsed.column("task"))))
        good_state = pc.or_kleene(pc.is_in(state, pa.array(STATES)),
                                  pc.and_kleene(pc.equal(kind, "topic"), pc.is_null(state)))
        good_outcome = pc.and_kleene(pc.is_in(parsed.column("result"), pa.array(RESULTS)),
                                     pc.greater_equal(parsed.column("attempts").fill_null(0), 0))
        good_restart = pc.and_kleene(
            pc.and_kleene(pc.is_in(kind, pa.array(["connector", "task"])),
                          pc.is_in(parsed.column("result"), pa.array(RESTART_RESULTS))),
            pc.greater_equal(parsed.column("attempt").fill_null(1), 1))
        shape = pc.and_kleene(shape, pc.if_else(status, good_state,
                                                pc.if_else(pc.equal(event, "outcome"), good_outcome, good_restart)))
        keep = pc.and_(valid, shape.fill_null(False))
        garbled += len(ok) - pc.sum(keep).as_py() if len(ok) else 0
        table = parsed.append_column("partition", raw.column("partition")).append_column(
            "offset", raw.column("offset"))
        tables.append(_categorical(table.filter(keep)))
    merged = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
    return merged.to_pandas(), garbled


def read_status(paths: list[Path]) -> pd.DataFrame:
    """Status-topic records as they are: partition, offset, timestamp, key (text), value (bytes, None: tombstone)."""
    columns = ["partition", "offset", "timestamp", "key", "value"]
    table = pa.concat_tables([pq.read_table(p, columns=columns) for p in paths], promote_options="permissive")
    records: pd.DataFrame = table.set_column(4, "value", table.column("value").cast(pa.binary())).to_pandas()
    return records


# ------------------------------------------------------------------------------------------ analytics

@dataclass
class Results:
    """The analytics' outputs, one DataFrame each, named and shaped as status_store.analytics names them."""

    latest: pd.DataFrame
    state_durations: pd.DataFrame
    episodes: pd.DataFrame
    mttr: pd.DataFrame
    flapping: pd.DataFrame
    retry_outcomes: pd.DataFrame
    garbled: pd.DataFrame
    #: The sidecar's restarts and time to recovery with and without one (DuckDB's baseline only).
    restarts: pd.DataFrame | None = None
    recovery: pd.DataFrame | None = None

    def present(self) -> dict[str, pd.DataFrame]:
        """The results computed, by name."""
        return {f.name: frame for f in fields(self) if (frame := getattr(self, f.name)) is not None}

    def write(self, out_dir: Path) -> None:
        """One Parquet file per result."""
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, frame in self.present().items():
            frame.to_parquet(out_dir / f"{name}.parquet", index=False)


ENTITY = ["kind", "connector", "task"]


def _day(ms: pd.Series) -> pd.Series:
    """The UTC day number of an epoch-milliseconds time."""
    return ms // DAY_MS


def status_cache(status: pd.DataFrame) -> StatusCache:
    """The store's cache after reading the status topic in the analytics' read order: each partition in
    offset order, partitions interleaved by arrival (the newest timestamp of the partition up to the record),
    at equal arrival the lower partition first."""
    ordered = status.sort_values(["partition", "offset"], kind="stable")
    arrival = ordered["timestamp"].fillna(LONG_MIN).groupby(ordered["partition"]).cummax()
    ordered = ordered.assign(arrival=arrival).sort_values(["arrival", "partition", "offset"], kind="stable")
    cache = StatusCache()
    # The store logs every record it discards; here they are counted (Results.garbled), not logged.
    cache_log = logging.getLogger("status_store.connect.cache")
    level = cache_log.level
    cache_log.setLevel(logging.ERROR)
    try:
        cache.apply(StatusRecord(None if key is None else key.encode(), value, int(partition), int(offset))
                    for key, value, partition, offset in zip(ordered["key"], ordered["value"], ordered["partition"],
                                                             ordered["offset"], strict=True))
    finally:
        cache_log.setLevel(level)
    return cache


def latest_status(cache: StatusCache, keys: pd.Series) -> pd.DataFrame:
    """One row per connector, task and topic status the cache holds, under the key Connect writes for it."""
    connectors = {parsed.connector for parsed in map(parse_key, keys.dropna().unique())
                  if isinstance(parsed, ConnectorKey | TaskKey | TopicKey)}
    rows: list[tuple[object, ...]] = []
    for name in sorted(connectors):
        found = cache.get_connector(name)
        if found is not None:
            rows.append((connector_key(name), "connector", name, None, None, found.state.value, found.worker_id,
                         found.generation))
        rows += [(task_key(t.id), "task", name, t.id.task, None, t.state.value, t.worker_id, t.generation)
                 for t in cache.get_all_tasks(name)]
        rows += [(topic_key(name, topic), "topic", name, None, topic, None, None, None)
                 for topic in cache.topic_names(name)]
    out = pd.DataFrame(rows, columns=["key", "kind", "connector", "task", "topic", "state", "worker_id", "generation"])
    out = out.astype({"task": "Int64", "generation": "Int64"})
    return out.sort_values("key").reset_index(drop=True)


def _status_events(history: pd.DataFrame, as_of_ms: int) -> pd.DataFrame:
    """Status events of connectors and tasks up to as_of_ms, in order, with the previous state and next time."""
    ev = history[(history["event"] == "status") & history["kind"].isin(["connector", "task"])
                 & (history["time"] <= as_of_ms)]
    ev = ev[["kind", "connector", "task", "state", "time", "partition", "offset"]].copy()
    ev["task"] = ev["task"].fillna(-1).astype(np.int64)  # a groupable stand-in for "no task" (connectors)
    for col in ("kind", "connector", "state"):
        ev[col] = ev[col].cat.remove_unused_categories()
    ev = ev.sort_values([*ENTITY, "time", "partition", "offset"], kind="stable").reset_index(drop=True)
    ev["entity"] = ev.groupby(ENTITY, observed=True, sort=False).ngroup()
    by_entity = ev.groupby("entity", sort=False)
    ev["previous_state"] = by_entity["state"].shift(1)
    ev["next_time"] = by_entity["time"].shift(-1)
    return ev


def _entity(frame: pd.DataFrame) -> pd.DataFrame:
    """Back to the output's columns: task null for connectors, the UTC date instead of the day number."""
    frame["task"] = frame["task"].where(frame["task"] >= 0).astype("Int64")
    if "day" in frame.columns:
        frame.insert(0, "date", (pd.Timestamp(0) + pd.to_timedelta(frame.pop("day"), unit="D")).dt.date)
    return frame


def state_durations(ev: pd.DataFrame, as_of_ms: int) -> pd.DataFrame:
    """Milliseconds in each state per connector/task and UTC day (an interval is split at midnight)."""
    end = ev["next_time"].fillna(as_of_ms).astype(np.int64)
    iv = ev[[*ENTITY, "state"]].assign(start=ev["time"], end=end)
    # After a deletion the connector or task does not exist: that time is in no state.
    iv = iv[(iv["end"] > iv["start"]) & (iv["state"] != "DESTROYED")]
    first, last = _day(iv["start"]), _day(iv["end"] - 1)
    repeat = (last - first + 1).to_numpy()
    split = iv.loc[iv.index.repeat(repeat)]
    step = np.arange(len(split)) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    day = np.repeat(first.to_numpy(), repeat) + step
    overlap = (np.minimum(split["end"].to_numpy(), (day + 1) * DAY_MS)
               - np.maximum(split["start"].to_numpy(), day * DAY_MS))
    split = split.assign(day=day, duration_ms=overlap)
    out = split.groupby(["day", *ENTITY, "state"], observed=True)["duration_ms"].sum().reset_index()
    return _entity(out)


def failed_episodes(ev: pd.DataFrame) -> pd.DataFrame:
    """FAILED episodes: from an entry into FAILED to the next RUNNING (recovered) or DESTROYED (not recovered);
    a FAILED again before either belongs to the same episode."""
    by_entity = ev["entity"]
    ends = ev["state"].isin(["RUNNING", "DESTROYED"])
    seq = pd.Series(np.arange(len(ev)), index=ev.index)
    # The next end at or after each event: its time, and whether it is a recovery.
    end_time = ev["time"].where(ends).groupby(by_entity, sort=False).bfill()
    end_running = (ev["state"] == "RUNNING").astype(float).where(ends).groupby(by_entity, sort=False).bfill()
    # The last FAILED and the last end strictly before each event.
    last_failed = seq.where(ev["state"] == "FAILED").groupby(by_entity, sort=False).ffill().groupby(
        by_entity, sort=False).shift(1)
    last_end = seq.where(ends).groupby(by_entity, sort=False).ffill().groupby(by_entity, sort=False).shift(1)
    entry = (ev["state"] == "FAILED") & (last_failed.isna() | (last_end > last_failed))
    recovered = end_time.where(end_running == 1.0)
    episodes = ev.loc[entry, ENTITY].assign(failed_ms=ev["time"][entry], recovered_ms=recovered[entry])
    episodes["time_to_recovery_ms"] = episodes["recovered_ms"] - episodes["failed_ms"]
    episodes["day"] = _day(episodes["failed_ms"])
    return _entity(episodes.reset_index(drop=True))


def mean_time_to_recovery(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per connector/task: FAILED episodes, how many recovered, and the mean time to recovery of those."""
    out = episodes.assign(task=episodes["task"].fillna(-1)).groupby(ENTITY, observed=True).agg(
        failed_episodes=("failed_ms", "size"), recovered=("recovered_ms", "count"),
        mttr_ms=("time_to_recovery_ms", "mean"), last_failed_ms=("failed_ms", "max")).reset_index()
    out["unrecovered"] = out["failed_episodes"] - out["recovered"]
    return _entity(out)


def flapping(ev: pd.DataFrame, transitions: int, window_ms: int) -> pd.DataFrame:
    """Connectors and tasks with more than ``transitions`` state changes inside a ``window_ms`` window, per day."""
    moves = ev[ev["previous_state"].notna() & (ev["state"] != ev["previous_state"])]
    entity = moves["entity"].to_numpy(np.int64)
    times = moves["time"].to_numpy(np.int64)
    # One sorted axis for (entity, time): a move's count is the moves of its entity in (t - window, t].
    low = int(times.min()) if len(times) else 0
    span = int(times.max()) - low + window_ms + 1 if len(times) else 1
    axis = entity * span + (times - low)
    in_window = np.searchsorted(axis, axis, side="right") - np.searchsorted(axis, axis - window_ms, side="right")
    flagged = moves.assign(in_window=in_window)[in_window > transitions]
    out = flagged.assign(day=_day(flagged["time"])).groupby(["day", *ENTITY], observed=True).agg(
        max_transitions_in_window=("in_window", "max"), flapping_transitions=("time", "size"),
        first_flapping_ms=("time", "min"), last_flapping_ms=("time", "max")).reset_index()
    return _entity(out)


def retry_outcomes(history: pd.DataFrame, as_of_ms: int) -> pd.DataFrame:
    """How writes ended in the retry queue, per UTC day, kind and result."""
    outcomes = history[(history["event"] == "outcome") & (history["time"] <= as_of_ms)]
    outcomes = outcomes.assign(day=_day(outcomes["time"]))
    out = outcomes.groupby(["day", "kind", "result"], observed=True).agg(
        count=("time", "size"), mean_attempts=("attempts", "mean"), max_attempts=("attempts", "max"),
        with_error=("error", "count"), latency_p50_ms=("latency_ms", "median"),
        latency_p95_ms=("latency_ms", lambda s: s.quantile(0.95)),
        latency_p99_ms=("latency_ms", lambda s: s.quantile(0.99)))
    out = out.reset_index()
    out.insert(0, "date", (pd.Timestamp(0) + pd.to_timedelta(out.pop("day"), unit="D")).dt.date)
    return out


def analyze(data_dir: Path, *, as_of_ms: int | None = None, flap_transitions: int = DEFAULT_FLAP_TRANSITIONS,
            flap_window_ms: int = DEFAULT_FLAP_WINDOW_MS) -> Results:
    """Every analytic over DATA_DIR/status and DATA_DIR/history."""
    status = read_status(sorted((data_dir / "status").glob("*.parquet")))
    cache = status_cache(status)
    history, garbled = read_history(sorted((data_dir / "history").glob("*.parquet")))
    # By default the analysis is as of the newest valid event.
    as_of = int(history["time"].max()) if as_of_ms is None else as_of_ms
    ev = _status_events(history, as_of)
    episodes = failed_episodes(ev)
    return Results(
        latest=latest_status(cache, status["key"]), state_durations=state_durations(ev, as_of), episodes=episodes,
        mttr=mean_time_to_recovery(episodes), flapping=flapping(ev, flap_transitions, flap_window_ms),
        retry_outcomes=retry_outcomes(history, as_of),
        garbled=pd.DataFrame({"input": ["status", "history"], "garbled": [cache.stats.garbled_values, garbled]}),
    )
