"""The report an operator reads first: one self-contained HTML file (and the same in Markdown with SVG charts),
built from the outputs the run has just staged, not by analysing the input again.

It opens with what is broken now (every FAILED connector and task: since when, on which worker, the first
line of its trace), then failures per worker, the most frequent failure messages, failures and recoveries
over time, time to recovery per connector (p50/p90/p99), the most flapping connectors and tasks, the latest
states, time in each state and the retry outcomes. Only small aggregates reach the driver (a few rows per
connector, worker or hour), so the report costs little whatever the input's size: the outputs, small
(aggregates, or a row per connector, task or episode), are read once, without a Spark job when local.

The sections are built in ``report_sections`` and rendered in ``report_render``. The HTML file needs nothing
else: its charts are inline SVG (drawn by ``charts``), it has no script, and its
Content-Security-Policy forbids scripts and every load from the network. Every text that comes from the data
(connector names, worker ids, traces) is escaped, so a name holding HTML is shown as text.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from .analysis import Analysis
from .records import ReadProblem
from .report_render import html_page, markdown, utc_time
from .report_sections import Row, report_sections

#: The outputs dated by the events (the others are snapshots of the as-of date).
DATED = ("state_durations", "episodes", "flapping", "retry_outcomes", "restarts")


def write_report(analysis: Analysis, outputs: str, directory: Path, warnings: Sequence[ReadProblem] = (),
                 committed: str | None = None, from_ms: int | None = None) -> Path:
    """Write ``report.html`` (self-contained) and ``report.md`` with its SVG charts into ``directory`` from the
    analysis's outputs as written under ``outputs`` (the run's staging directory); returns the HTML file.

    ``committed``: the output directory, whose days (from ``from_ms`` on) the staged outputs do not hold complete the
    dated outputs (an incremental run stages the days its new records touch)."""
    directory.mkdir(parents=True, exist_ok=True)
    frames = {name: read_output(frame, f"{outputs.rstrip('/')}/{name}",
                                f"{committed.rstrip('/')}/{name}" if committed and name in DATED else None, from_ms)
              for name, frame in analysis.outputs().items()}
    summary = analysis.summary()
    intro = [f"As of {utc_time(summary['as_of_ms'])}. Flapping: more than {summary['flap_transitions']} transitions "
             f"within {summary['flap_window_ms'] / 1000:g} s."]
    sections = report_sections(directory, frames, summary["counters"], warnings)
    (directory / "report.md").write_text(markdown(intro, sections), encoding="utf-8")
    report = directory / "report.html"
    report.write_text(html_page(intro, sections), encoding="utf-8")
    return report


def read_output(frame: DataFrame, path: str, earlier: str | None = None, from_ms: int | None = None) -> list[Row]:
    """The rows of an output as written (small: aggregates, or one row per connector, task or episode), and those of
    ``earlier`` (the same output as committed) of the other days from ``from_ms`` on. A local one is read with
    pyarrow, without a Spark job; any other through Spark."""
    if "://" in path or (earlier is not None and "://" in earlier):
        spark = frame.sparkSession
        found = spark.read.schema(frame.schema).parquet(path)
        if earlier is not None:
            dates = [row[0] for row in found.select("date").distinct().collect()]
            older = spark.read.schema(frame.schema).parquet(earlier).filter(~F.col("date").isin(dates))
            if from_ms is not None:
                older = older.filter(F.col("date") >= _day(from_ms))
            found = found.unionByName(older)
        return [row.asDict() for row in found.collect()]
    schema = to_arrow_schema(frame.schema)
    partitioning = ds.partitioning(pa.schema([schema.field("date")]), flavor="hive")
    def rows_of(where: str) -> list[Row]:
        found: list[Row] = ds.dataset(where, schema=schema, format="parquet",
                                      partitioning=partitioning).to_table().to_pylist()
        return found

    rows = rows_of(path)
    if earlier is not None and Path(earlier).exists():
        staged_dates = {row["date"] for row in rows}
        first = _day(from_ms) if from_ms is not None else datetime.date.min
        rows += [row for row in rows_of(earlier) if row["date"] not in staged_dates and row["date"] >= first]
    return rows


def _day(epoch_ms: int) -> datetime.date:
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).date()
