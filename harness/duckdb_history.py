"""The status analytics without Spark: a plain consumer into pyarrow, then DuckDB SQL. The outside baseline of
bench/spark_kafka.py, and the differential oracle of the Spark analytics' history outputs.

    .venv/bin/python -m bench.duckdb_history --bootstrap-servers HOST:PORT --history-topic T --out DIR
    .venv/bin/python -m bench.duckdb_history --quick     # a small generated history, from Parquet files

reads both topics from the beginning to their end (one confluent-kafka consumer per topic, every partition
assigned, records gathered into Arrow arrays), or exported Parquet files of them, and writes what
``status-store analyze`` writes, one Parquet file per output:

- ``latest``: the store's own cache (``status_store.connect.cache.StatusCache``, where Connect's read rules live), fed
  the status topic in the order the Spark analytics take it to be read (as harness/pandas_history.py does);
- every history output (time in each state, FAILED episodes with their worker, first trace line and restarts, MTTR
  with exact percentiles, flapping, retry outcomes, restarts, time to recovery with and without a restart) in DuckDB
  SQL over the Arrow table, written from the
  definitions in docs/analytics.md, independently of the Spark code: the window that finds each episode's
  end looks forward (``rows between current row and unbounded following``, cheap in DuckDB), where Spark's
  one sort finds it looking back.

DuckDB is a test and benchmark dependency only (the test extra): the product's engine is Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness import pandas_history
from harness.history_compare import COMPARED, ENTITY
from harness.pandas_history import Results
from status_store.kafka.reading import read_to_end

DEFAULT_FLAP_TRANSITIONS = 5
DEFAULT_FLAP_WINDOW_MS = 600_000
# What the oracle compares: every column of every output but the approximate latency percentiles.
ORACLE: dict[str, list[str]] = {
    **COMPARED,
    "episodes": ["date", *ENTITY, "failed_ms", "recovered_ms", "time_to_recovery_ms", "worker_id", "failure",
                 "restarts"],
    "mttr": [*COMPARED["mttr"], "ttr_p50_ms", "ttr_p90_ms", "ttr_p99_ms"],
    "restarts": ["date", *ENTITY, "result", "restarts", "max_attempt", "first_ms", "last_ms"],
    "recovery": ["kind", "restarted", *COMPARED["mttr"][3:], "ttr_p50_ms", "ttr_p90_ms", "ttr_p99_ms"],
}
RAW = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.string()),
                 ("value", pa.binary())])
STATES = ", ".join(f"'{s}'" for s in pandas_history.STATES)
# The history's events, decoded and checked (docs/analytics.md: "Garbled"), with the record's position.
EVENTS_SQL = f"""
with parsed as (
    select partition, "offset", try(decode(value)) as text from raw
), decoded as (
    select partition, "offset", text,
        coalesce(case when json_valid(text) then json_type(text) = 'OBJECT' end, false) as object
    from parsed
), fields as (
    select partition, "offset", object,
        case when object then json_extract_string(text, '$.event') end as event,
        case when object then json_extract_string(text, '$.time') end as time_text,
        case when object then json_extract_string(text, '$.key') end as key,
        case when object then json_extract_string(text, '$.kind') end as kind,
        case when object then json_extract_string(text, '$.connector') end as connector,
        case when object then try_cast(json_extract_string(text, '$.task') as bigint) end as task,
        case when object then json_extract_string(text, '$.state') end as state,
        case when object then json_extract_string(text, '$.worker_id') end as worker_id,
        case when object then json_extract_string(text, '$.trace') end as trace,
        case when object then json_extract_string(text, '$.result') end as result,
        case when object then try_cast(json_extract_string(text, '$.attempts') as bigint) end as attempts,
        case when object then json_extract_string(text, '$.error') end as error,
        case when object then try_cast(json_extract_string(text, '$.latency_ms') as bigint) end as latency_ms,
        case when object then try_cast(json_extract_string(text, '$.attempt') as bigint) end as attempt,
        case when object then try_cast(json_extract_string(text, '$.failed_at') as bigint) end as failed_at
    from decoded
)
select partition, "offset", event, cast(time_text as bigint) as time, key, kind, connector,
    case when kind = 'task' then task end as task, state, worker_id, trace, result, attempts, error, latency_ms,
    attempt, coalesce(failed_at, cast(time_text as bigint)) as anchor,
    coalesce(object and regexp_full_match(time_text, '-?[0-9]{{1,18}}')
        and kind in ('connector', 'task', 'topic') and key is not null and connector is not null
        and (kind <> 'task' or task is not null)
        and ((event = 'status' and (state in ({STATES}) or (kind = 'topic' and state is null)))
             or (event = 'outcome' and result in ('written', 'failed', 'superseded') and coalesce(attempts, 0) >= 0)
             or (event = 'restart' and kind in ('connector', 'task')
                 and result in ('restarted', 'rebalancing', 'unreachable', 'refused', 'not-found', 'unauthorized',
                                'tls-failed')
                 and coalesce(attempt, 1) >= 1)),
        false) as valid
from fields
"""


def _day(ms: str) -> str:
    return f"(date '1970-01-01' + cast(floor({ms} / 86400000) as integer))"


# Status events of connectors and tasks up to as-of, each with its position, the previous state and next time.
TIMELINE_SQL = """
select kind, connector, task, state, time, worker_id, trace,
    row_number() over entity as seq, lag(state) over entity as previous_state, lead(time) over entity as next_time
from events
where valid and event = 'status' and kind in ('connector', 'task') and time <= $as_of
window entity as (partition by kind, connector, task order by time, partition, "offset")
"""
STATE_DURATIONS_SQL = f"""
with intervals as (
    select kind, connector, task, state, time as start, coalesce(next_time, $as_of) as "end" from timeline
    where coalesce(next_time, $as_of) > time and state <> 'DESTROYED'
), split as (
    select *, unnest(generate_series(cast(floor(start / 86400000) as bigint),
                                     cast(floor(("end" - 1) / 86400000) as bigint))) as day from intervals
)
select {_day("day * 86400000")} as date, kind, connector, task, state,
    sum(least("end", (day + 1) * 86400000) - greatest(start, day * 86400000)) as duration_ms
from split group by all
"""
EPISODES_SQL = f"""
with marked as (
    select *,
        max(case when state = 'FAILED' then seq end) over before as last_failed,
        max(case when state in ('RUNNING', 'DESTROYED') then seq end) over before as last_end,
        min(case when state in ('RUNNING', 'DESTROYED') then seq end) over after as next_end
    from timeline
    window before as (partition by kind, connector, task order by seq rows between unbounded preceding and 1 preceding),
           after as (partition by kind, connector, task order by seq rows between current row and unbounded following)
), spans as (
    select {_day("e.time")} as date, e.kind, e.connector, e.task, e.time as failed_ms,
        case when x.state = 'RUNNING' then x.time end as recovered_ms,
        case when x.state = 'RUNNING' then x.time - e.time end as time_to_recovery_ms,
        e.worker_id, nullif(trim(regexp_extract(e.trace, '^([^\\r\\n]*)', 1)), '') as failure, x.time as ended_ms
    from marked e left join timeline x
        on x.kind = e.kind and x.connector = e.connector and x.task is not distinct from e.task and x.seq = e.next_end
    where e.state = 'FAILED' and (e.last_failed is null or e.last_end > e.last_failed)
)
-- The restarts sent while the episode was open: anchored (failed_at) from its FAILED to the event that ended it.
select s.* exclude (ended_ms), count(r.anchor) as restarts
from spans s left join events r
    on r.valid and r.event = 'restart' and r.time <= $as_of and r.kind = s.kind and r.connector = s.connector
    and r.task is not distinct from s.task and r.anchor >= s.failed_ms
    and (s.ended_ms is null or r.anchor <= s.ended_ms)
group by all
"""
MTTR_COLUMNS = """count(*) as failed_episodes, count(recovered_ms) as recovered,
    count(*) - count(recovered_ms) as unrecovered, avg(time_to_recovery_ms) as mttr_ms,
    max(failed_ms) as last_failed_ms,
    quantile_cont(time_to_recovery_ms, 0.5) as ttr_p50_ms, quantile_cont(time_to_recovery_ms, 0.9) as ttr_p90_ms,
    quantile_cont(time_to_recovery_ms, 0.99) as ttr_p99_ms"""
MTTR_SQL = f"select kind, connector, task, {MTTR_COLUMNS} from episodes group by all"
RECOVERY_SQL = f"select kind, restarts > 0 as restarted, {MTTR_COLUMNS} from episodes group by all"
RESTARTS_SQL = f"""
select {_day("time")} as date, kind, connector, task, result, count(*) as restarts, max(attempt) as max_attempt,
    min(time) as first_ms, max(time) as last_ms
from events where valid and event = 'restart' and time <= $as_of group by all
"""
FLAPPING_SQL = f"""
with moves as (
    select kind, connector, task, time,
        count(*) over (partition by kind, connector, task order by time
                       range between $window - 1 preceding and current row) as in_window
    from timeline where previous_state is not null and previous_state <> state
)
select {_day("time")} as date, kind, connector, task, max(in_window) as max_transitions_in_window,
    count(*) as flapping_transitions, min(time) as first_flapping_ms, max(time) as last_flapping_ms
from moves where in_window > $transitions group by all
"""
RETRY_OUTCOMES_SQL = f"""
select {_day("time")} as date, kind, result, count(*) as count, avg(attempts) as mean_attempts,
    max(attempts) as max_attempts, count(error) as with_error, quantile_cont(latency_ms, 0.5) as latency_p50_ms,
    quantile_cont(latency_ms, 0.95) as latency_p95_ms, quantile_cont(latency_ms, 0.99) as latency_p99_ms
from events where valid and event = 'outcome' and time <= $as_of group by all
"""


def read_topic(config: dict[str, Any], topic: str, timeout_s: float = 600.0) -> pa.Table:
    """Every record of a topic, from its beginning to the end it has when the read begins, as an Arrow table (built
    in batches, so that the Python objects of at most one batch are alive at once)."""
    columns: dict[str, list[Any]] = {name: [] for name in RAW.names}
    batches: list[pa.RecordBatch] = []
    settings = {"group.id": "duckdb-history", "fetch.max.bytes": 64 << 20, "queued.max.messages.kbytes": 256 << 10,
                **config}
    for batch in read_to_end(settings, topic, timeout_s, 10_000):
        for message in batch:
            columns["partition"].append(message.partition())
            columns["offset"].append(message.offset())
            columns["timestamp"].append(message.timestamp()[1])
            key = message.key()
            columns["key"].append(None if key is None else key.decode("utf-8", "replace"))
            columns["value"].append(message.value())
        if len(columns["offset"]) >= 200_000:
            batches.append(pa.RecordBatch.from_pydict(columns, schema=RAW))
            columns = {name: [] for name in RAW.names}
    batches.append(pa.RecordBatch.from_pydict(columns, schema=RAW))
    return pa.Table.from_batches(batches, schema=RAW)


def analyze(status: pa.Table, history: pa.Table, *, as_of_ms: int | None = None,
            flap_transitions: int = DEFAULT_FLAP_TRANSITIONS,
            flap_window_ms: int = DEFAULT_FLAP_WINDOW_MS) -> Results:
    """Every output over the two topics' raw records (partition, offset, timestamp, key, value)."""
    status_frame = status.select(["partition", "offset", "timestamp", "key", "value"]).to_pandas()
    cache = pandas_history.status_cache(status_frame)
    con = duckdb.connect()
    con.register("raw", history.select(["partition", "offset", "value"]))
    con.execute(f"create temp table events as {EVENTS_SQL}")
    newest, garbled = con.execute("select max(time) filter (where valid), count(*) filter (where not valid) "
                                  "from events").fetchone() or (None, 0)
    as_of = newest if as_of_ms is None else as_of_ms
    parameters = {"as_of": as_of}
    con.execute(f"create temp table timeline as {TIMELINE_SQL}", parameters)
    con.execute(f"create temp table episodes as {EPISODES_SQL}", parameters)

    def query(sql: str, **extra: int) -> pd.DataFrame:
        used = {name: value for name, value in {**parameters, **extra}.items() if f"${name}" in sql}
        frame = con.execute(sql, used).df()
        if "date" in frame.columns:  # as Spark gives it: a date, not a timestamp
            frame["date"] = pd.to_datetime(frame["date"]).dt.date
        return frame

    return Results(
        latest=pandas_history.latest_status(cache, status_frame["key"]),
        state_durations=query(STATE_DURATIONS_SQL), episodes=query("select * from episodes"), mttr=query(MTTR_SQL),
        flapping=query(FLAPPING_SQL, window=flap_window_ms, transitions=flap_transitions),
        retry_outcomes=query(RETRY_OUTCOMES_SQL), restarts=query(RESTARTS_SQL), recovery=query(RECOVERY_SQL),
        garbled=pd.DataFrame({"input": ["status", "history"], "garbled": [cache.stats.garbled_values, garbled]}),
    )


def read_files(directory: Path) -> pa.Table:
    """Exported records (harness/history_gen.py's Parquet files) of one topic."""
    table = pa.concat_tables([pq.read_table(path) for path in sorted(directory.glob("*.parquet"))])
    return table.select(RAW.names).cast(RAW)
