"""A short human report: Markdown with PNG charts, from the small aggregated results only.

Everything here is collected to the driver after Spark has aggregated it (a few rows per state,
kind or top-N connector), so the report costs little whatever the input's size.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and executors

import matplotlib.pyplot as plt
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .analysis import Analysis
from .records import ReadProblem

TOP = 10


def write_report(analysis: Analysis, directory: Path, warnings: Sequence[ReadProblem] = ()) -> Path:
    """Write ``report.md`` and its charts into ``directory``; returns the Markdown file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    counters = analysis.counters()
    lines = ["# Kafka Connect status report", "",
             f"As of {_time(analysis.as_of_ms)}. Flapping: more than {analysis.flap_transitions} transitions "
             f"within {analysis.flap_window_ms / 1000:g} s.", "", "## Input", "",
             _table(["counter", "value"], sorted(counters.items())), ""]
    if warnings:
        lines += ["Warnings:", "", *[f"- {warning}" for warning in warnings], ""]

    latest = _rows(analysis.latest.groupBy("kind", "state").count().orderBy("kind", "state"))
    lines += ["## Latest statuses", "", _table(["kind", "state", "count"], latest), ""]
    task_states = [(r[1] or "(topic)", r[2]) for r in latest if r[0] in ("task", "connector")]
    if task_states:
        lines += [_bar_chart(directory, "latest_states.png", "Connectors and tasks by latest state", task_states), ""]

    durations = analysis.state_durations
    per_state = _rows(durations.groupBy("state").agg(F.sum("duration_ms").alias("ms")).orderBy(F.desc("ms")))
    lines += ["## Time in each state", ""]
    if per_state:
        lines += [_bar_chart(directory, "time_in_state.png", "Hours in each state (all connectors and tasks)",
                             [(state, ms / 3_600_000) for state, ms in per_state]), ""]
    failed_most = _rows(durations.filter(F.col("state") == "FAILED")
                        .groupBy("kind", "connector", "task").agg(F.sum("duration_ms").alias("ms"))
                        .orderBy(F.desc("ms"), "connector", "task").limit(TOP))
    lines += [f"Longest time FAILED (top {TOP}):", "",
              _table(["kind", "connector", "task", "FAILED"], [(*r[:3], _duration(r[3])) for r in failed_most]), ""]

    mttr = _rows(analysis.mttr.select("kind", "connector", "task", "failed_episodes", "recovered", "unrecovered",
                                      "mttr_ms").orderBy(F.desc("failed_episodes"), "connector", "task").limit(TOP))
    overall = analysis.episodes.agg(F.count(F.lit(1)), F.count("recovered_ms"), F.avg("time_to_recovery_ms")).first()
    lines += ["## FAILED episodes and time to recovery", ""]
    if overall is not None and overall[0]:
        lines += [f"{overall[0]} episodes, {overall[1]} recovered, {overall[0] - overall[1]} not (yet) recovered; "
                  f"mean time to recovery {_duration(overall[2])}.", ""]
    lines += [_table(["kind", "connector", "task", "episodes", "recovered", "unrecovered", "MTTR"],
                     [(*r[:6], _duration(r[6])) for r in mttr]), ""]

    flapping = _rows(analysis.flapping.groupBy("kind", "connector", "task")
                     .agg(F.max("max_transitions_in_window").alias("most"), F.min("first_flapping_ms"))
                     .orderBy(F.desc("most"), "connector", "task").limit(TOP))
    lines += ["## Flapping", "", _table(["kind", "connector", "task", "most transitions in a window", "first"],
                                        [(*r[:4], _time(r[4])) for r in flapping]), ""]

    outcomes = _rows(analysis.retry_outcomes.groupBy("kind", "result").agg(
        F.sum("count").alias("n"), (F.sum(F.col("mean_attempts") * F.col("count")) / F.sum("count")),
        F.max("max_attempts"), F.max("latency_p99_ms")).orderBy("kind", "result"))
    lines += ["## Retry outcomes", "",
              _table(["kind", "result", "count", "mean attempts", "max attempts", "worst daily p99 latency (ms)"],
                     [(*r[:3], f"{r[3]:.2f}" if r[3] is not None else "", *r[4:]) for r in outcomes]), ""]
    if outcomes:
        lines += [_bar_chart(directory, "retry_outcomes.png", "Write outcomes by kind and result",
                             [(f"{r[0]} {r[1]}", r[2]) for r in outcomes]), ""]
    report = directory / "report.md"
    report.write_text("\n".join(lines))
    return report


def _rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in frame.collect()]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return "(none)"
    cells = [[("" if v is None else str(v)).replace("|", "\\|") for v in row] for row in rows]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      *["| " + " | ".join(row) + " |" for row in cells]])


def _bar_chart(directory: Path, name: str, title: str, bars: Sequence[tuple[str, float]]) -> str:
    figure, axes = plt.subplots(figsize=(7, 0.4 * len(bars) + 1.2))
    try:
        axes.barh([label for label, _ in bars], [value for _, value in bars])
        axes.invert_yaxis()
        axes.set_title(title)
        figure.tight_layout()
        figure.savefig(directory / name, dpi=100)
    finally:
        plt.close(figure)
    return f"![{title}]({name})"


def _time(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "(no history events)"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
