"""The status analytics in pandas, in one process: the baseline of bench/spark_history.py.

    .venv/bin/python bench/pandas_history.py DATA_DIR OUT_DIR

reads DATA_DIR/status/*.parquet and DATA_DIR/history/*.parquet (the raw-record schema written by
bench/history_gen.py or an export), computes what ``status_store.analytics`` computes in Spark, and
writes one Parquet file per result to OUT_DIR. It is what a careful pandas user would write: every
step vectorised, the whole history in one DataFrame.

- JSON values are parsed by pyarrow's JSON reader (C++), all rows of a file in one call: a
  per-row ``json.loads`` would be the bottleneck and is no fair baseline. A value that is not one
  JSON object is found by a cheap check first; a block the reader rejects (a wrong type, two
  objects on a line) is split in halves until the bad rows are found, so one garbled value costs
  a few extra parses, never a wrong row.
- Strings become categoricals as soon as they are parsed; only the fields the analytics use are kept.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED")
KINDS = ("connector", "task", "topic")
RESULTS = ("written", "failed", "superseded")
DEFAULT_FLAP_TRANSITIONS = 5
DEFAULT_FLAP_WINDOW_MS = 600_000

HISTORY_FIELDS = pa.schema([
    ("event", pa.string()), ("time", pa.int64()), ("key", pa.string()), ("kind", pa.string()),
    ("connector", pa.string()), ("task", pa.int64()), ("topic", pa.string()), ("state", pa.string()),
    ("result", pa.string()), ("attempts", pa.int64()), ("error", pa.string()), ("latency_ms", pa.int64()),
])
STATUS_FIELDS = pa.schema([
    ("state", pa.string()), ("trace", pa.string()), ("worker_id", pa.string()), ("generation", pa.int64()),
    ("topic", pa.struct([("name", pa.string()), ("connector", pa.string()), ("task", pa.int64()),
                         ("discoverTimestamp", pa.int64())])),
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
        shape = pc.and_kleene(pc.is_in(event, pa.array(["status", "outcome"])), pc.is_in(kind, pa.array(KINDS)))
        shape = pc.and_kleene(shape, pc.and_(pc.is_valid(parsed.column("time")), pc.is_valid(parsed.column("key"))))
        shape = pc.and_kleene(shape, pc.is_valid(parsed.column("connector")))
        shape = pc.and_kleene(shape, pc.or_kleene(pc.not_equal(kind, "task"), pc.is_valid(parsed.column("task"))))
        good_state = pc.or_kleene(pc.is_in(state, pa.array(STATES)),
                                  pc.and_kleene(pc.equal(kind, "topic"), pc.is_null(state)))
        good_outcome = pc.and_kleene(pc.is_in(parsed.column("result"), pa.array(RESULTS)),
                                     pc.greater_equal(parsed.column("attempts"), 0))
        shape = pc.and_kleene(shape, pc.if_else(status, good_state, good_outcome))
        keep = pc.and_(valid, shape.fill_null(False))
        garbled += len(ok) - pc.sum(keep).as_py() if len(ok) else 0
        table = parsed.append_column("partition", raw.column("partition")).append_column(
            "offset", raw.column("offset"))
        tables.append(_categorical(table.filter(keep)))
    merged = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
    return merged.to_pandas(), garbled


def read_status(paths: list[Path]) -> pd.DataFrame:
    """Status-topic records: the key parsed with Connect's rules, the value parsed, validity flags."""
    raw = pa.concat_tables([pq.read_table(p, columns=["partition", "offset", "timestamp", "key", "value"])
                            for p in paths])
    values = raw.column("value").combine_chunks()
    parsed, ok = parse_objects(values, STATUS_FIELDS)
    df = raw.drop_columns(["value"]).to_pandas()
    df["tombstone"] = values.is_null().to_numpy(zero_copy_only=False)
    for name in ("state", "worker_id", "generation"):
        df[name] = parsed.column(name).to_pandas()
    topic = parsed.column("topic").combine_chunks()
    df["topic_ok"] = ok & np.asarray(pc.and_(
        pc.and_(pc.is_valid(topic.field("name")), pc.is_valid(topic.field("connector"))),
        pc.and_(pc.is_valid(topic.field("task")), pc.is_valid(topic.field("discoverTimestamp")))
    ).fill_null(False).to_numpy(zero_copy_only=False))
    df["status_ok"] = (ok & df["state"].isin(STATES).to_numpy() & df["worker_id"].notna().to_numpy()
                       & df["generation"].notna().to_numpy())
    key = df["key"].astype("string")
    connector = key.str.extract(r"^status-connector-(.+)$", expand=False)
    task = key.str.extract(r"^status-task-(.+)-(\d{1,9})$")
    topic_key = key.str.extract(r"^status-topic-([^:]+):.{10}(.+)$")
    df["kind"] = np.select([connector.notna(), task[0].notna(), topic_key[0].notna()], list(KINDS), None)
    df["connector"] = connector.fillna(task[0]).fillna(topic_key[1])
    df["task"] = pd.to_numeric(task[1]).astype("Int64")
    df["topic"] = topic_key[0]
    return df


# ------------------------------------------------------------------------------------------ analytics

@dataclass
class Results:
    """The analytics' outputs, one DataFrame each, as status_store.analytics computes them."""

    latest: pd.DataFrame
    state_durations: pd.DataFrame
    episodes: pd.DataFrame
    mttr: pd.DataFrame
    flapping: pd.DataFrame
    retry_outcomes: pd.DataFrame
    garbled: pd.DataFrame

    def write(self, out_dir: Path) -> None:
        """One Parquet file per result."""
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in fields(self):
            getattr(self, f.name).to_parquet(out_dir / f"{f.name}.parquet", index=False)


def latest_status(df: pd.DataFrame) -> pd.DataFrame:
    """The status each key has after reading the whole topic with the store's read rules."""
    df = df[df["kind"].notna()]
    value_ok = np.where(df["kind"] == "topic", df["topic_ok"], df["status_ok"])
    df = df[df["tombstone"] | value_ok].sort_values(["key", "partition", "offset"], kind="stable")
    # Stale UNASSIGNED (tasks): ignored when the value it would replace is RUNNING at a generation >= its
    # own. Ignored records change nothing, so the value an UNASSIGNED meets is the last other record
    # (or tombstone) before it, unless an earlier UNASSIGNED since then was applied (a larger generation).
    unassigned = (df["kind"] == "task") & (df["state"] == "UNASSIGNED") & ~df["tombstone"]
    anchor = (~unassigned).astype(np.int64).groupby(df["key"], observed=True).cumsum()
    group = [df["key"], anchor]
    anchor_running = (df["state"].where(~unassigned).where(~df["tombstone"]) == "RUNNING").groupby(
        group, observed=True).transform("first")
    anchor_gen = df["generation"].where(~unassigned).groupby(group, observed=True).transform("first")
    seen_gen = df["generation"].where(unassigned).groupby(group, observed=True).cummax()
    stale = unassigned & anchor_running & (seen_gen <= anchor_gen)
    last = df[~stale.fillna(False)].groupby("key", observed=True).tail(1)
    # A connector tombstone also deletes its tasks (records of them written before it).
    dropped = df[df["tombstone"] & (df["kind"] == "connector")].groupby("connector")["timestamp"].max()
    dropped_at = last["connector"].map(dropped)
    gone = last["tombstone"] | ((last["kind"] == "task") & (dropped_at > last["timestamp"]))
    out = last[~gone][["key", "kind", "connector", "task", "topic", "state", "worker_id", "generation"]]
    out.loc[out["kind"] == "topic", ["state", "worker_id", "generation"]] = None
    return out.sort_values("key").reset_index(drop=True)


def _status_events(history: pd.DataFrame, as_of_ms: int) -> pd.DataFrame:
    ev = history[(history["event"] == "status") & history["kind"].isin(["connector", "task"])
                 & (history["time"] <= as_of_ms)]
    ev = ev[["key", "kind", "connector", "task", "state", "time", "partition", "offset"]]
    ev = ev.sort_values(["key", "time", "partition", "offset"], kind="stable").reset_index(drop=True)
    ev["key"] = ev["key"].cat.remove_unused_categories()
    return ev


def state_durations(ev: pd.DataFrame, as_of_ms: int) -> pd.DataFrame:
    """Per key and state: the time spent in it (until the key's next status event, or as_of_ms)."""
    following = ev.groupby("key", observed=True)["time"].shift(-1).fillna(as_of_ms).astype(np.int64)
    ev = ev.assign(duration_ms=following - ev["time"])
    ev = ev[ev["state"] != "DESTROYED"]
    out = ev.groupby(["key", "state"], observed=True).agg(
        kind=("kind", "first"), connector=("connector", "first"), task=("task", "first"),
        duration_ms=("duration_ms", "sum"))
    return out.reset_index()[["key", "kind", "connector", "task", "state", "duration_ms"]]


def failed_episodes(ev: pd.DataFrame) -> pd.DataFrame:
    """FAILED episodes: from the first FAILED to the next RUNNING (recovered) or DESTROYED (deleted).

    The events between two RUNNING/DESTROYED events form a segment; its first FAILED opens an
    episode and the RUNNING/DESTROYED that ends the segment closes it (none: still open).
    """
    closing = ev["state"].isin(["RUNNING", "DESTROYED"])
    segment = closing.astype(np.int64).groupby(ev["key"], observed=True).cumsum()
    ev = ev.assign(segment=segment)
    starts = ev[ev["state"] == "FAILED"].drop_duplicates(["key", "segment"])
    ends = ev[closing][["key", "segment", "time", "state"]].rename(columns={"time": "end_ms", "state": "end_state"})
    ends["segment"] -= 1
    episodes = starts.merge(ends, on=["key", "segment"], how="left")
    episodes["recovered"] = episodes["end_state"] == "RUNNING"
    episodes["duration_ms"] = (episodes["end_ms"] - episodes["time"]).astype("Int64")
    episodes = episodes.rename(columns={"time": "start_ms"})
    return episodes[["key", "kind", "connector", "task", "start_ms", "end_ms", "recovered", "duration_ms"]]


def mean_time_to_recovery(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per key: FAILED episodes, how many recovered, and the mean time to recovery of those."""
    recovered = episodes["duration_ms"].where(episodes["recovered"])
    out = episodes.assign(recovered_ms=recovered).groupby("key", observed=True).agg(
        kind=("kind", "first"), connector=("connector", "first"), task=("task", "first"),
        episodes=("start_ms", "size"), recovered=("recovered", "sum"), mttr_ms=("recovered_ms", "mean"))
    return out.reset_index()


def flapping(ev: pd.DataFrame, transitions: int, window_ms: int) -> pd.DataFrame:
    """Keys with more than ``transitions`` state changes within some ``window_ms`` (a sliding window)."""
    previous = ev.groupby("key", observed=True)["state"].shift(1)
    changes = ev[previous.notna() & (ev["state"] != previous)]
    codes = changes["key"].cat.codes.to_numpy(np.int64)
    times = changes["time"].to_numpy(np.int64)
    # One sorted axis for (key, time): the number of a key's changes in (t - window, t] is a search away.
    span = int(times.max() - times.min()) + window_ms + 1 if len(times) else 1
    axis = codes * span + (times - (times.min() if len(times) else 0))
    in_window = np.arange(len(axis)) - np.searchsorted(axis, axis - window_ms, side="right") + 1
    changes = changes.assign(in_window=in_window)
    per_key = changes.groupby("key", observed=True).agg(
        kind=("kind", "first"), connector=("connector", "first"), task=("task", "first"),
        transitions=("time", "size"), max_in_window=("in_window", "max"))
    return per_key[per_key["max_in_window"] > transitions].reset_index()


def retry_outcomes(history: pd.DataFrame) -> pd.DataFrame:
    """Outcome events by kind and result: how many, attempts in all, mean and max latency."""
    out = history[history["event"] == "outcome"].groupby(["kind", "result"], observed=True).agg(
        outcomes=("time", "size"), attempts=("attempts", "sum"),
        mean_latency_ms=("latency_ms", "mean"), max_latency_ms=("latency_ms", "max"))
    return out.reset_index()


def analyze(data_dir: Path, *, as_of_ms: int | None = None, flap_transitions: int = DEFAULT_FLAP_TRANSITIONS,
            flap_window_ms: int = DEFAULT_FLAP_WINDOW_MS) -> Results:
    """Every analytic over DATA_DIR/status and DATA_DIR/history."""
    status = read_status(sorted((data_dir / "status").glob("*.parquet")))
    history, garbled = read_history(sorted((data_dir / "history").glob("*.parquet")))
    status_events = history[history["event"] == "status"]
    as_of = int(status_events["time"].max()) if as_of_ms is None else as_of_ms
    ev = _status_events(history, as_of)
    episodes = failed_episodes(ev)
    status_garbled = int((~status["tombstone"] & status["kind"].notna()
                          & ~np.where(status["kind"] == "topic", status["topic_ok"], status["status_ok"])).sum())
    return Results(
        latest=latest_status(status), state_durations=state_durations(ev, as_of), episodes=episodes,
        mttr=mean_time_to_recovery(episodes), flapping=flapping(ev, flap_transitions, flap_window_ms),
        retry_outcomes=retry_outcomes(history),
        garbled=pd.DataFrame({"input": ["status", "history"], "garbled": [status_garbled, garbled]}),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    began = time.perf_counter()
    analyze(args.data_dir).write(args.out_dir)
    print(f"pandas: {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
