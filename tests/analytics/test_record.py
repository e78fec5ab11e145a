"""The live record (``act/record.py``, what ``GET /connectors/{name}/history`` serves) equals what ``status-store
analyze`` computes on the same history: a generated one (harness/history_gen.py: status events with deletions and
re-creations, FAILED episodes, flapping keys, the sidecar's restarts of every result, garbled records), its times
stretched fourfold so that it spans days, over the whole input and over windows that begin at a UTC midnight
(analyze's outputs are per day): time in each state, failures (recovered or not), restarts by result, time to recovery
with and without a restart, for every connector and task."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from harness.history_gen import START_MS
from status_store.act.record import DAY_MS, Entity, Figures, Record
from status_store.analytics.analysis import Analysis, analyze

from .conftest import GeneratedHistories

EVENTS, SEED, STRETCH = 20_000, 11, 4


def stretched(value: str | None) -> str | None:
    """A history value with its times (``time``, ``failed_at``) STRETCH times as far from the generator's start; a
    value that is not a JSON object with an integer time is left as it is (garbled stays garbled)."""
    try:
        event = json.loads(value) if value is not None else None
    except ValueError:
        return value
    if not isinstance(event, dict):
        return value
    for name in ("time", "failed_at"):
        found = event.get(name)
        if isinstance(found, int) and not isinstance(found, bool):
            event[name] = START_MS + (found - START_MS) * STRETCH
    return json.dumps(event)


@pytest.fixture(scope="module")
def data(generated_histories: GeneratedHistories, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated history with its times stretched (and its status topic as generated)."""
    source = generated_histories.data(EVENTS, SEED)
    target = tmp_path_factory.mktemp("stretched")
    shutil.copytree(source / "status", target / "status")
    (target / "history").mkdir()
    for part in sorted((source / "history").glob("*.parquet")):
        table = pq.read_table(part)
        values = pa.array([stretched(v) for v in table.column("value").to_pylist()], pa.string())
        times = pa.array([START_MS + (t - START_MS) * STRETCH for t in table.column("timestamp").to_pylist()],
                         pa.int64())
        table = table.set_column(table.schema.get_field_index("value"), "value", values)
        table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", times)
        pq.write_table(table, target / "history" / part.name)
    return target


@pytest.fixture(scope="module")
def record(data: Path) -> Record:
    """The record fed every history record, in each partition's order, as the sidecar's tail reads them."""
    found = Record(retention_ms=None)
    table = pq.read_table(data / "history")
    rows = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                      table.column("value").to_pylist(), strict=True), key=lambda r: (r[0], r[1]))
    for partition, offset, value in rows:
        found.apply(value.encode("utf-8") if isinstance(value, str) else value, partition, offset)
    return found


@pytest.fixture(scope="module")
def analysis(spark: SparkSession, data: Path) -> Iterator[Analysis]:
    made = analyze(spark.read.parquet(str(data / "status")), spark.read.parquet(str(data / "history")))
    yield made
    made.unpersist()


def entity(row: dict[str, Any]) -> Entity:
    task = row["task"]
    none = task is None or (isinstance(task, float) and math.isnan(task))
    return row["kind"], row["connector"], None if none else int(task)


def spark_rows(analysis: Analysis) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    assert analysis.as_of_ms is not None
    return analysis.as_of_ms, {name: [row.asDict() for row in getattr(analysis, name).collect()]
                               for name in ("state_durations", "episodes", "restarts")}


def expected(rows: dict[str, list[dict[str, Any]]], since_day: int | None) -> dict[Entity, dict[str, Any]]:
    """Analyze's figures per connector and task, from the dates ``since_day`` on (days since the epoch; None: all)."""
    def kept(row: dict[str, Any]) -> bool:
        return since_day is None or row["date"].toordinal() - 719163 >= since_day

    found: dict[Entity, dict[str, Any]] = defaultdict(lambda: {
        "durations": Counter(), "failures": 0, "recovered": 0, "restarts": Counter(), "with": [], "without": []})
    for row in filter(kept, rows["state_durations"]):
        found[entity(row)]["durations"][row["state"]] += row["duration_ms"]
    for row in filter(kept, rows["episodes"]):
        figures = found[entity(row)]
        figures["failures"] += 1
        if row["recovered_ms"] is not None:
            figures["recovered"] += 1
            figures["with" if row["restarts"] > 0 else "without"].append(row["time_to_recovery_ms"])
    for row in filter(kept, rows["restarts"]):
        found[entity(row)]["restarts"][row["result"]] += row["restarts"]
    return found


def mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def assert_equal(mine: Figures, theirs: dict[str, Any], what: str) -> None:
    durations = {s: d for s, d in theirs["durations"].items() if d}
    assert {s: d for s, d in mine.durations_ms.items() if d} == durations, what
    assert (mine.failures, mine.recovered) == (theirs["failures"], theirs["recovered"]), what
    assert dict(mine.restarts) == dict(+theirs["restarts"]), what
    assert mine.with_restart.count == len(theirs["with"]), what
    assert mine.without_restart.count == len(theirs["without"]), what
    for ours, values in ((mine.with_restart.mean_ms, theirs["with"]),
                         (mine.without_restart.mean_ms, theirs["without"])):
        if values:
            assert ours == pytest.approx(mean(values)), what
        else:
            assert ours is None, what


def test_the_record_equals_analyze_over_the_whole_history_and_over_windows_from_a_midnight(
        record: Record, analysis: Analysis) -> None:
    as_of, rows = spark_rows(analysis)
    first = min(min(t.events[0].time for t in record.timelines.values() if t.events),
                min((t.restarts[0].time for t in record.timelines.values() if t.restarts), default=as_of))
    last_day = as_of // DAY_MS
    starts: dict[int | None, int] = {None: first}
    starts.update({day: day * DAY_MS for day in range(last_day - 2, last_day + 1) if day * DAY_MS > first})
    assert len(starts) >= 3, f"the history spans too few days: {first} to {as_of}"
    compared = Counter[str]()
    for since_day, start in starts.items():
        theirs = expected(rows, since_day)
        for key, timeline in record.timelines.items():
            mine = timeline.figures(start, as_of)
            assert_equal(mine, theirs[key], f"{key} from {start}")
            compared["entities"] += 1
            compared["failures"] += mine.failures
            compared["restarts"] += sum(mine.restarts.values())
            compared["with_restart"] += mine.with_restart.count
        # Nothing analyze counts that the record does not hold.
        assert set(theirs) <= set(record.timelines), since_day
    assert compared["failures"] > 100
    assert compared["restarts"] > 50
    assert compared["with_restart"] > 10
