"""The report an operator reads first: one self-contained HTML file (and the same in Markdown with PNG charts),
built from the outputs the run has just staged, not by analysing the input again.

It opens with what is broken now (every FAILED connector and task: since when, on which worker, the first
line of its trace), then failures per worker, the most frequent failure messages, failures and recoveries
over time, time to recovery per connector (p50/p90/p99), the most flapping connectors and tasks, the latest
states, time in each state and the retry outcomes. Only small aggregates reach the driver (a few rows per
connector, worker or hour), so the report costs little whatever the input's size.

The HTML file needs nothing else: its charts are inline SVG, it has no script, and its Content-Security-Policy
forbids scripts and every load from the network. Every text that comes from the data (connector names,
worker ids, traces) is escaped, so a name holding HTML is shown as text.
"""

from __future__ import annotations

import datetime
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and executors

import matplotlib.pyplot as plt
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .analysis import Analysis, first_line
from .records import ReadProblem

TOP = 10
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
# More hours than this between the first and the last failure: failures are counted per day instead.
MAX_HOURLY_BUCKETS = 72
FAILURE_COLOR = "#c62828"
RECOVERY_COLOR = "#2e7d32"
BAR_COLOR = "#1f77b4"
# Scripts, frames, fonts, images from anywhere: none. Inline styles only.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.broken { border: 2px solid #c62828; padding: 0 1em 1em; background: #fff5f5; }
.ok { border: 2px solid #2e7d32; padding: 0.5em 1em; background: #f3fbf3; }
code, .trace { font-family: ui-monospace, monospace; font-size: 0.9em; white-space: pre-wrap; }
svg { max-width: 100%; height: auto; }
"""


@dataclass
class Table:
    """A table of the report: its header and rows (cells as text; numbers right-aligned in HTML)."""

    header: list[str]
    rows: list[list[Any]]
    #: Columns holding numbers.
    numeric: set[int] = field(default_factory=set)


@dataclass
class Chart:
    """A chart, as a PNG file beside the Markdown and as inline SVG in the HTML."""

    name: str
    title: str
    svg: str


@dataclass
class Section:
    """A heading, what it says in words, its tables and charts."""

    title: str
    text: list[str] = field(default_factory=list)
    #: Tables, charts and paragraphs after the text, in order.
    parts: list[Table | Chart | str] = field(default_factory=list)
    css_class: str = ""


def write_report(analysis: Analysis, outputs: str, directory: Path, warnings: Sequence[ReadProblem] = ()) -> Path:
    """Write ``report.html`` (self-contained) and ``report.md`` with its PNG charts into ``directory`` from the
    analysis's outputs as written under ``outputs`` (the run's staging directory); returns the HTML file."""
    directory.mkdir(parents=True, exist_ok=True)
    frames = {name: frame.sparkSession.read.schema(frame.schema).parquet(f"{outputs.rstrip('/')}/{name}")
              for name, frame in analysis.outputs().items()}
    summary = analysis.summary()
    as_of = summary.get("as_of_ms")
    intro = [f"As of {_time(as_of)}. Flapping: more than {summary['flap_transitions']} transitions within "
             f"{summary['flap_window_ms'] / 1000:g} s."]
    sections = [
        _broken_now(frames["latest"], frames["episodes"]),
        _per_worker(directory, frames["latest"], frames["episodes"]),
        _failure_messages(frames["episodes"]),
        _over_time(directory, frames["episodes"]),
        _time_to_recovery(frames["episodes"], frames["mttr"]),
        _flapping(frames["flapping"], frames["latest"]),
        _latest(directory, frames["latest"]),
        _time_in_state(directory, frames["state_durations"]),
        _retry_outcomes(directory, frames["retry_outcomes"]),
        _input(summary.get("counters", {}), warnings),
    ]
    (directory / "report.md").write_text(_markdown(intro, sections), encoding="utf-8")
    report = directory / "report.html"
    report.write_text(_html(intro, sections), encoding="utf-8")
    return report


# ------------------------------------------------------------------------------------------ sections


def _broken_now(latest: DataFrame, episodes: DataFrame) -> Section:
    """Every connector and task FAILED now: since when (the start of its open episode, else its record's time),
    on which worker, the first line of its trace."""
    entity = ["kind", "connector", "task"]
    open_since = (episodes.filter(F.col("recovered_ms").isNull()).groupBy(*entity)
                  .agg(F.max("failed_ms").alias("since")))
    failed = (latest.filter(F.col("state") == "FAILED")
              .join(open_since, [latest[c].eqNullSafe(open_since[c]) for c in entity], "left")
              .select(*[latest[c] for c in entity], F.coalesce("since", "timestamp").alias("since"), "worker_id",
                      first_line(F.col("trace")).alias("failure"))
              .orderBy("since", "connector", "task"))
    rows = _rows(failed)
    section = Section("Broken now", css_class="broken" if rows else "ok")
    if not rows:
        section.text.append("No connector or task is FAILED.")
        return section
    connectors = sum(1 for r in rows if r[0] == "connector")
    section.text.append(f"{connectors} connector(s) and {len(rows) - connectors} task(s) are FAILED, longest first.")
    section.parts.append(Table(["kind", "connector", "task", "FAILED since", "worker", "first line of the trace"],
                               [[r[0], r[1], r[2], _time(r[3]), r[4], r[5]] for r in rows]))
    return section


def _per_worker(directory: Path, latest: DataFrame, episodes: DataFrame) -> Section:
    """FAILED episodes per worker (the worker of the FAILED that opened each), and what is FAILED on it now."""
    worker = F.coalesce(F.col("worker_id"), F.lit("(unknown)")).alias("worker")
    past = episodes.groupBy(worker).agg(F.count(F.lit(1)).alias("episodes"),
                                        F.count_if(F.col("recovered_ms").isNull()).alias("unrecovered"),
                                        F.count_distinct("connector").alias("connectors"))
    now = latest.filter(F.col("state") == "FAILED").groupBy(worker).agg(F.count(F.lit(1)).alias("failed_now"))
    counts = ["failed_now", "episodes", "unrecovered", "connectors"]
    rows = _rows(past.join(now, "worker", "full")
                 .select("worker", *[F.coalesce(c, F.lit(0)).alias(c) for c in counts])
                 .orderBy(F.desc("failed_now"), F.desc("episodes"), "worker"))
    section = Section("Failures per worker")
    if not rows:
        section.text.append("(none)")
        return section
    section.parts.append(Table(["worker", "FAILED now", "FAILED episodes", "not recovered", "connectors"], rows,
                               {1, 2, 3, 4}))
    section.parts.append(_bar_chart(directory, "failures_per_worker.png", "FAILED episodes per worker",
                                    [(str(r[0]), r[2]) for r in rows[:TOP * 2]], FAILURE_COLOR))
    return section


def normalised_message(failure: Any) -> Any:
    """A failure message with what varies between occurrences (numbers, hexadecimal ids) replaced, so that the
    same failure counts once."""
    hex_ids = F.regexp_replace(failure, r"\b(0x)?[0-9a-fA-F]{8,}(-[0-9a-fA-F]{4,})*\b", "<id>")
    return F.regexp_replace(hex_ids, r"\d+", "<n>")


def _failure_messages(episodes: DataFrame) -> Section:
    """The most frequent first lines of the traces that opened FAILED episodes, normalised."""
    message = F.coalesce(normalised_message(F.col("failure")), F.lit("(no trace)")).alias("message")
    rows = _rows(episodes.groupBy(message).agg(
        F.count(F.lit(1)).alias("episodes"), F.count_distinct(F.struct("kind", "connector", "task")).alias("tasks"),
        F.max("failed_ms").alias("last")).orderBy(F.desc("episodes"), "message").limit(TOP))
    section = Section("Top failure messages")
    section.text.append(f"The first line of the trace of the FAILED that opened each episode; numbers shown as "
                        f"<n>, ids as <id> (top {TOP}).")
    section.parts.append(Table(["message", "episodes", "connectors and tasks", "last"],
                               [[r[0], r[1], r[2], _time(r[3])] for r in rows], {1, 2}))
    return section


def _over_time(directory: Path, episodes: DataFrame) -> Section:
    """Episodes opened (failures) and ended by a RUNNING (recoveries) per hour, or per day over long spans."""
    span = episodes.agg(F.min("failed_ms"), F.max(F.greatest("failed_ms", "recovered_ms"))).first()
    section = Section("Failures and recoveries over time")
    if span is None or span[0] is None:
        section.text.append("(no FAILED episode)")
        return section
    bucket_ms = HOUR_MS if (span[1] - span[0]) // HOUR_MS < MAX_HOURLY_BUCKETS else DAY_MS
    unit = "hour" if bucket_ms == HOUR_MS else "day"
    events = episodes.select(F.col("failed_ms").alias("at"), F.lit(1).alias("failed"), F.lit(0).alias("recovered"))
    events = events.unionByName(episodes.filter(F.col("recovered_ms").isNotNull()).select(
        F.col("recovered_ms").alias("at"), F.lit(0).alias("failed"), F.lit(1).alias("recovered")))
    rows = _rows(events.groupBy((F.floor(F.col("at") / bucket_ms) * bucket_ms).alias("bucket"))
                 .agg(F.sum("failed"), F.sum("recovered")).orderBy("bucket"))
    section.text.append(f"FAILED episodes begun and recovered per {unit} (UTC).")
    section.parts.append(_time_chart(directory, "failures_over_time.png", f"Failures and recoveries per {unit}",
                                     rows, bucket_ms))
    section.parts.append(Table([unit, "failures", "recoveries"], [[_time(r[0]), r[1], r[2]] for r in rows[-48:]],
                               {1, 2}))
    if len(rows) > 48:
        section.text.append(f"The table shows the last 48 {unit}s of {len(rows)}.")
    return section


def _time_to_recovery(episodes: DataFrame, mttr: DataFrame) -> Section:
    """Time to recovery per connector (its tasks and itself): p50, p90, p99 and the mean; then per task."""
    quantiles = F.percentile("time_to_recovery_ms", F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99)))
    per_connector = _rows(episodes.groupBy("connector").agg(
        F.count(F.lit(1)).alias("episodes"), F.count("recovered_ms").alias("recovered"), quantiles.alias("q"),
        F.avg("time_to_recovery_ms")).orderBy(F.desc_nulls_last(F.col("q")[1]), "connector").limit(TOP * 2))
    section = Section("Time to recovery")
    section.text.append("Per connector (its own episodes and its tasks'), slowest p90 first. Percentiles say more "
                        "than the mean, which a few long outages dominate.")
    section.parts.append(Table(["connector", "episodes", "recovered", "p50", "p90", "p99", "mean"],
                               [[r[0], r[1], r[2], *[_duration(q) for q in (r[3] or [None] * 3)], _duration(r[4])]
                                for r in per_connector], {1, 2, 3, 4, 5, 6}))
    per_task = _rows(mttr.select("kind", "connector", "task", "failed_episodes", "recovered", "unrecovered",
                                 "mttr_ms", "ttr_p50_ms", "ttr_p90_ms", "ttr_p99_ms")
                     .orderBy(F.desc("failed_episodes"), "connector", "task").limit(TOP))
    overall = episodes.agg(F.count(F.lit(1)), F.count("recovered_ms"), F.avg("time_to_recovery_ms"),
                           F.percentile("time_to_recovery_ms", 0.5)).first()
    if overall is not None and overall[0]:
        section.text.append(f"{overall[0]} episodes, {overall[1]} recovered, {overall[0] - overall[1]} not (yet) "
                            f"recovered; time to recovery p50 {_duration(overall[3])}, mean {_duration(overall[2])}.")
    section.parts.append(f"FAILED episodes per connector or task (top {TOP}):")
    section.parts.append(Table(["kind", "connector", "task", "episodes", "recovered", "unrecovered", "MTTR", "p50",
                                "p90", "p99"],
                               [[*r[:6], *[_duration(v) for v in r[6:]]] for r in per_task], set(range(3, 10))))
    return section


def _flapping(flapping: DataFrame, latest: DataFrame) -> Section:
    """The connectors and tasks that flapped most, with their last transition and their state now."""
    entity = ["kind", "connector", "task"]
    most = flapping.groupBy(*entity).agg(
        F.max("max_transitions_in_window").alias("most"), F.sum("flapping_transitions").alias("transitions"),
        F.max("last_flapping_ms").alias("last"))
    rows = _rows(most.join(latest.select(*entity, "state"), [most[c].eqNullSafe(latest[c]) for c in entity], "left")
                 .select(*[most[c] for c in entity], "most", "transitions", "last", "state")
                 .orderBy(F.desc("most"), F.desc("transitions"), "connector", "task").limit(TOP))
    section = Section("Flapping")
    section.text.append(f"The connectors and tasks with the most transitions in a window (top {TOP}).")
    section.parts.append(Table(["kind", "connector", "task", "most transitions in a window", "flapping transitions",
                                "last flapping transition", "state now"],
                               [[*r[:5], _time(r[5]), r[6]] for r in rows], {3, 4}))
    return section


def _latest(directory: Path, latest: DataFrame) -> Section:
    rows = _rows(latest.groupBy("kind", "state").count().orderBy("kind", "state"))
    section = Section("Latest statuses", parts=[Table(["kind", "state", "count"], rows, {2})])
    states = [(r[1] or "(topic)", r[2]) for r in rows if r[0] in ("task", "connector")]
    if states:
        section.parts.append(_bar_chart(directory, "latest_states.png", "Connectors and tasks by latest state",
                                        states))
    return section


def _time_in_state(directory: Path, durations: DataFrame) -> Section:
    section = Section("Time in each state")
    per_state = _rows(durations.groupBy("state").agg(F.sum("duration_ms").alias("ms")).orderBy(F.desc("ms")))
    if per_state:
        section.parts.append(_bar_chart(directory, "time_in_state.png", "Hours in each state (all connectors and "
                                        "tasks)", [(state, ms / 3_600_000) for state, ms in per_state]))
    failed_most = _rows(durations.filter(F.col("state") == "FAILED")
                        .groupBy("kind", "connector", "task").agg(F.sum("duration_ms").alias("ms"))
                        .orderBy(F.desc("ms"), "connector", "task").limit(TOP))
    section.text.append(f"Longest time FAILED (top {TOP}):")
    section.parts.append(Table(["kind", "connector", "task", "FAILED"], [[*r[:3], _duration(r[3])]
                                                                         for r in failed_most]))
    return section


def _retry_outcomes(directory: Path, outcomes: DataFrame) -> Section:
    rows = _rows(outcomes.groupBy("kind", "result").agg(
        F.sum("count").alias("n"), (F.sum(F.col("mean_attempts") * F.col("count")) / F.sum("count")),
        F.max("max_attempts"), F.max("latency_p99_ms")).orderBy("kind", "result"))
    section = Section("Retry outcomes", parts=[Table(
        ["kind", "result", "count", "mean attempts", "max attempts", "worst daily p99 latency (ms)"],
        [[*r[:3], f"{r[3]:.2f}" if r[3] is not None else "", *r[4:]] for r in rows], {2, 3, 4, 5})])
    if rows:
        section.parts.append(_bar_chart(directory, "retry_outcomes.png", "Write outcomes by kind and result",
                                        [(f"{r[0]} {r[1]}", r[2]) for r in rows]))
    return section


def _input(counters: Mapping[str, int], warnings: Sequence[ReadProblem]) -> Section:
    section = Section("Input", parts=[Table(["counter", "value"], [list(item) for item in sorted(counters.items())],
                                            {1})])
    if warnings:
        section.text.append("Warnings: " + "; ".join(str(warning) for warning in warnings))
    return section


# ------------------------------------------------------------------------------------------ charts


def _bar_chart(directory: Path, name: str, title: str, bars: Sequence[tuple[str, float]],
               color: str = BAR_COLOR) -> Chart:
    figure, axes = plt.subplots(figsize=(7, 0.4 * len(bars) + 1.2))
    axes.barh([label for label, _ in bars], [value for _, value in bars], color=color)
    axes.invert_yaxis()
    axes.set_title(title)
    return _save(directory, name, title, figure)


def _time_chart(directory: Path, name: str, title: str, rows: Sequence[Sequence[Any]], bucket_ms: int) -> Chart:
    figure, axes = plt.subplots(figsize=(9, 3.2))
    # Matplotlib's dates are days since the epoch.
    days = [r[0] / DAY_MS for r in rows]
    width = bucket_ms * 0.4 / DAY_MS
    axes.bar(days, [r[1] for r in rows], width=width, align="edge", color=FAILURE_COLOR, label="failures")
    axes.bar([d + width for d in days], [r[2] for r in rows], width=width, align="edge", color=RECOVERY_COLOR,
             label="recoveries")
    axes.xaxis_date(tz=datetime.UTC)
    axes.legend()
    axes.set_title(title)
    figure.autofmt_xdate()
    return _save(directory, name, title, figure)


def _save(directory: Path, name: str, title: str, figure: Any) -> Chart:
    """The figure as a PNG file in ``directory`` and as SVG text (no date in it: a report is a function of the
    outputs)."""
    try:
        figure.tight_layout()
        figure.savefig(directory / name, dpi=100, metadata={"Software": None})
        svg = io.StringIO()
        with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
            figure.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    finally:
        plt.close(figure)
    text = svg.getvalue()
    return Chart(name, title, text[text.index("<svg"):])


# ------------------------------------------------------------------------------------------ rendering


def _markdown(intro: Sequence[str], sections: Sequence[Section]) -> str:
    lines = ["# Kafka Connect status report", "", *intro, ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        lines += [line for text in section.text for line in (_md_text(text), "")]
        for part in section.parts:
            if isinstance(part, str):
                lines += [_md_text(part), ""]
            else:
                lines += [_md_table(part) if isinstance(part, Table) else f"![{part.title}]({part.name})", ""]
    return "\n".join(lines)


def _md_text(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _md_table(table: Table) -> str:
    if not table.rows:
        return "(none)"
    cells = [[_md_text(_cell(v)).replace("|", "\\|") for v in row] for row in table.rows]
    return "\n".join(["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header),
                      *["| " + " | ".join(row) + " |" for row in cells]])


def _html(intro: Sequence[str], sections: Sequence[Section]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
           "<title>Kafka Connect status report</title>", f"<style>{_STYLE}</style></head><body>",
           "<h1>Kafka Connect status report</h1>", *[f"<p>{html.escape(text)}</p>" for text in intro]]
    for section in sections:
        out.append(f'<section class="{section.css_class}"><h2>{html.escape(section.title)}</h2>')
        out += [f"<p>{html.escape(text)}</p>" for text in section.text]
        for part in section.parts:
            if isinstance(part, str):
                out.append(f"<p>{html.escape(part)}</p>")
            else:
                out.append(_html_table(part) if isinstance(part, Table) else
                           f'<figure aria-label="{html.escape(part.title)}">{part.svg}</figure>')
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_table(table: Table) -> str:
    if not table.rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{html.escape(_cell(v))}</td>' if i in table.numeric else f"<td>{html.escape(_cell(v))}</td>"
        for i, v in enumerate(row)) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _rows(frame: DataFrame) -> list[list[Any]]:
    return [list(row) for row in frame.collect()]


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


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
