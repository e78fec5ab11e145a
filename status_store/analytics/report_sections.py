"""The report's sections: what is broken now, failures per worker, the top failure messages, failures and recoveries
over time, time to recovery, restarts, flapping, the latest states, time in each state, retry outcomes and the input,
each from the small rows of the outputs (a few per connector, worker or hour) and drawn with ``charts``."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .charts import bar_chart, time_chart
from .history import MTTR_PERCENTILES, RESTART_RESULTS
from .records import ReadProblem
from .report_render import Chart, Section, Table, duration_text, utc_time

TOP = 10
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
# More hours than this between the first and the last failure: failures are counted per day instead.
MAX_HOURLY_BUCKETS = 72
FAILURE_COLOR = "#c62828"
RECOVERY_COLOR = "#2e7d32"
BAR_COLOR = "#1f77b4"
#: The time-to-recovery columns of the ``mttr`` and ``recovery`` outputs, as the tables show them.
TTR_COLUMNS = ("mttr_ms", "ttr_p50_ms", "ttr_p90_ms", "ttr_p99_ms")

Row = dict[str, Any]
Entity = tuple[str, str, int | None]


def report_sections(directory: Path, frames: Mapping[str, list[Row]], counters: Mapping[str, int],
                    warnings: Sequence[ReadProblem]) -> list[Section]:
    """The report's sections, in the order an operator reads them, from the outputs' rows (``frames``: by output
    name); charts are written into ``directory``."""
    latest, episodes = frames["latest"], frames["episodes"]
    return [
        _broken_now(latest, episodes),
        _per_worker(directory, latest, episodes),
        _failure_messages(episodes),
        _over_time(directory, episodes),
        _time_to_recovery(episodes, frames["mttr"]),
        _restarts(frames["restarts"], frames["recovery"]),
        _flapping(frames["flapping"], latest),
        _latest(directory, latest),
        _time_in_state(directory, frames["state_durations"]),
        _retry_outcomes(directory, frames["retry_outcomes"]),
        _input(counters, warnings),
    ]


def _entity(row: Row) -> Entity:
    return row["kind"], row["connector"], row["task"]


def _order(value: Any) -> tuple[bool, Any]:
    """A sort key that puts None first and compares the rest."""
    return value is not None, value


def _broken_now(latest: list[Row], episodes: list[Row]) -> Section:
    """Every connector and task FAILED now: since when (the start of its open episode, else its record's time),
    on which worker, the first line of its trace."""
    open_since: dict[Entity, int] = {}
    for e in episodes:
        if e["recovered_ms"] is None:
            open_since[_entity(e)] = max(open_since.get(_entity(e), e["failed_ms"]), e["failed_ms"])
    rows = [[r["kind"], r["connector"], r["task"], open_since.get(_entity(r), r["timestamp"]), r["worker_id"],
             first_line_of(r["trace"])] for r in latest if r["state"] == "FAILED"]
    rows.sort(key=lambda r: (_order(r[3]), r[1], _order(r[2])))
    section = Section("Broken now", css_class="broken" if rows else "ok")
    if not rows:
        section.text.append("No connector or task is FAILED.")
        return section
    connectors = sum(1 for r in rows if r[0] == "connector")
    section.text.append(f"{connectors} connector(s) and {len(rows) - connectors} task(s) are FAILED, longest first.")
    section.parts.append(Table(["kind", "connector", "task", "FAILED since", "worker", "first line of the trace"],
                               [[*r[:3], utc_time(r[3]), *r[4:]] for r in rows]))
    return section


def _per_worker(directory: Path, latest: list[Row], episodes: list[Row]) -> Section:
    """FAILED episodes per worker (the worker of the FAILED that opened each), and what is FAILED on it now."""
    counts: dict[str, list[Any]] = {}

    def of(worker: str | None) -> list[Any]:
        return counts.setdefault(worker or "(unknown)", [0, 0, 0, set()])

    for r in latest:
        if r["state"] == "FAILED":
            of(r["worker_id"])[0] += 1
    for e in episodes:
        found = of(e["worker_id"])
        found[1] += 1
        found[2] += e["recovered_ms"] is None
        found[3].add(e["connector"])
    rows = sorted(([worker, now, past, open_, len(connectors)] for worker, (now, past, open_, connectors)
                   in counts.items()), key=lambda r: (-r[1], -r[2], r[0]))
    section = Section("Failures per worker")
    if not rows:
        section.text.append("(none)")
        return section
    section.parts.append(Table(["worker", "FAILED now", "FAILED episodes", "not recovered", "connectors"], rows,
                               {1, 2, 3, 4}))
    section.parts.append(_bar_chart(directory, "failures_per_worker.svg", "FAILED episodes per worker",
                                    [(str(r[0]), r[2]) for r in rows[:TOP * 2]], FAILURE_COLOR))
    return section


def first_line_of(trace: str | None) -> str | None:
    """The first line of a trace (Java's exception and message), trimmed: ``history.first_line`` in Python."""
    line = re.split(r"[\r\n]", trace, maxsplit=1)[0].strip(" ") if trace is not None else ""
    return line or None


def normalised_message(failure: str) -> str:
    """A failure message with what varies between occurrences (numbers, hexadecimal ids) replaced, so that the
    same failure counts once."""
    return re.sub(r"\d+", "<n>", re.sub(r"\b(0x)?[0-9a-fA-F]{8,}(-[0-9a-fA-F]{4,})*\b", "<id>", failure))


def _failure_messages(episodes: list[Row]) -> Section:
    """The most frequent first lines of the traces that opened FAILED episodes, normalised."""
    found: dict[str, list[Any]] = {}
    for e in episodes:
        message = normalised_message(e["failure"]) if e["failure"] is not None else "(no trace)"
        counts = found.setdefault(message, [0, set(), e["failed_ms"]])
        counts[0] += 1
        counts[1].add(_entity(e))
        counts[2] = max(counts[2], e["failed_ms"])
    rows = sorted(([message, n, len(entities), utc_time(last)] for message, (n, entities, last) in found.items()),
                  key=lambda r: (-r[1], r[0]))[:TOP]
    section = Section("Top failure messages")
    section.text.append(f"The first line of the trace of the FAILED that opened each episode; numbers shown as "
                        f"<n>, ids as <id> (top {TOP}).")
    section.parts.append(Table(["message", "episodes", "connectors and tasks", "last"], rows, {1, 2}))
    return section


def _over_time(directory: Path, episodes: list[Row]) -> Section:
    """Episodes opened (failures) and ended by a RUNNING (recoveries) per hour, or per day over long spans."""
    section = Section("Failures and recoveries over time")
    if not episodes:
        section.text.append("(no FAILED episode)")
        return section
    times = [e["failed_ms"] for e in episodes] + [e["recovered_ms"] for e in episodes if e["recovered_ms"] is not None]
    bucket_ms = HOUR_MS if (max(times) - min(times)) // HOUR_MS < MAX_HOURLY_BUCKETS else DAY_MS
    unit = "hour" if bucket_ms == HOUR_MS else "day"
    buckets: dict[int, list[int]] = {}
    for e in episodes:
        buckets.setdefault(e["failed_ms"] // bucket_ms * bucket_ms, [0, 0])[0] += 1
        if e["recovered_ms"] is not None:
            buckets.setdefault(e["recovered_ms"] // bucket_ms * bucket_ms, [0, 0])[1] += 1
    rows = [[bucket, *counts] for bucket, counts in sorted(buckets.items())]
    section.text.append(f"FAILED episodes begun and recovered per {unit} (UTC).")
    section.parts.append(_time_chart(directory, "failures_over_time.svg", f"Failures and recoveries per {unit}",
                                     rows, bucket_ms))
    section.parts.append(Table([unit, "failures", "recoveries"], [[utc_time(r[0]), r[1], r[2]] for r in rows[-48:]],
                               {1, 2}))
    if len(rows) > 48:
        section.text.append(f"The table shows the last 48 {unit}s of {len(rows)}.")
    return section


def _percentiles(values: Sequence[float]) -> list[float | None]:
    """p50, p90, p99 exact, interpolated as Spark's ``percentile`` does (``history.mttr``); None for no values."""
    ordered = sorted(values)
    return [percentile(ordered, q) if ordered else None for q in MTTR_PERCENTILES]


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` percentile of sorted values, between the two closest ranks (Spark's formula, term for term)."""
    position = (len(ordered) - 1) * q
    lower, higher = math.floor(position), math.ceil(position)
    if lower == higher or ordered[lower] == ordered[higher]:
        return float(ordered[lower])
    return (higher - position) * ordered[lower] + (position - lower) * ordered[higher]


def _time_to_recovery(episodes: list[Row], mttr: list[Row]) -> Section:
    """Time to recovery per connector (its tasks and itself): p50, p90, p99 and the mean; then per task."""
    per_connector: dict[str, list[Any]] = {}
    for e in episodes:
        found = per_connector.setdefault(e["connector"], [0, []])
        found[0] += 1
        if e["time_to_recovery_ms"] is not None:
            found[1].append(e["time_to_recovery_ms"])
    rows = [[name, n, len(ttr), *_percentiles(ttr), sum(ttr) / len(ttr) if ttr else None]
            for name, (n, ttr) in per_connector.items()]
    rows.sort(key=lambda r: (r[4] is None, -(r[4] or 0), r[0]))
    section = Section("Time to recovery")
    section.text.append("Per connector (its own episodes and its tasks'), slowest p90 first. Percentiles say more "
                        "than the mean, which a few long outages dominate.")
    section.parts.append(Table(["connector", "episodes", "recovered", "p50", "p90", "p99", "mean"],
                               [[*r[:3], *[duration_text(v) for v in r[3:]]] for r in rows[:TOP * 2]],
                               {1, 2, 3, 4, 5, 6}))
    recovered = [e["time_to_recovery_ms"] for e in episodes if e["time_to_recovery_ms"] is not None]
    if episodes:
        mean = sum(recovered) / len(recovered) if recovered else None
        section.text.append(f"{len(episodes)} episodes, {len(recovered)} recovered, {len(episodes) - len(recovered)} "
                            f"not (yet) recovered; time to recovery p50 {duration_text(_percentiles(recovered)[0])}, "
                            f"mean {duration_text(mean)}.")
    per_task = sorted(mttr, key=lambda r: (-r["failed_episodes"], r["connector"], _order(r["task"])))[:TOP]
    section.parts.append(f"FAILED episodes per connector or task (top {TOP}):")
    section.parts.append(Table(["kind", "connector", "task", "episodes", "recovered", "unrecovered", "MTTR", "p50",
                                "p90", "p99"],
                               [[r["kind"], r["connector"], r["task"], r["failed_episodes"], r["recovered"],
                                 r["unrecovered"], *[duration_text(r[c]) for c in TTR_COLUMNS]] for r in per_task],
                               set(range(3, 10))))
    return section


def _restarts(restarts: list[Row], recovery: list[Row]) -> Section:
    """The sidecar's restarts per connector and task, by result, most first; then time to recovery of the episodes
    with a restart in them against those without."""
    per_entity: dict[Entity, Counter[str]] = {}
    last: dict[Entity, int] = {}
    for r in restarts:
        entity = _entity(r)
        per_entity.setdefault(entity, Counter())[r["result"]] += r["restarts"]
        last[entity] = max(last.get(entity, r["last_ms"]), r["last_ms"])
    ranked = sorted(per_entity.items(), key=lambda item: (-item[1].total(), item[0][1], _order(item[0][2])))
    section = Section("Restarts")
    total = sum(counts.total() for counts in per_entity.values())
    section.text.append(f"The sidecar's auto-restart sent {total} restart requests; connectors and tasks restarted: "
                        f"{len(per_entity)}. Most first (top {TOP}):")
    section.parts.append(Table(["kind", "connector", "task", "restarts", *RESTART_RESULTS, "last"],
                               [[*entity, counts.total(), *[counts[result] for result in RESTART_RESULTS],
                                 utc_time(last[entity])] for entity, counts in ranked[:TOP]],
                               set(range(3, 4 + len(RESTART_RESULTS)))))
    section.parts.append("Time to recovery of the FAILED episodes with a restart of the sidecar in them, and without:")
    rows = sorted(recovery, key=lambda r: (r["kind"], not r["restarted"]))
    section.parts.append(Table(["kind", "restarted", "episodes", "recovered", "unrecovered", "MTTR", "p50", "p90",
                                "p99"],
                               [[r["kind"], "yes" if r["restarted"] else "no", r["failed_episodes"], r["recovered"],
                                 r["unrecovered"], *[duration_text(r[c]) for c in TTR_COLUMNS]] for r in rows],
                               set(range(2, 9))))
    return section


def _flapping(flapping: list[Row], latest: list[Row]) -> Section:
    """The connectors and tasks that flapped most, with their last transition and their state now."""
    most: dict[Entity, list[int]] = {}
    for r in flapping:
        found = most.setdefault(_entity(r), [0, 0, r["last_flapping_ms"]])
        found[0] = max(found[0], r["max_transitions_in_window"])
        found[1] += r["flapping_transitions"]
        found[2] = max(found[2], r["last_flapping_ms"])
    state = {_entity(r): r["state"] for r in latest}
    ranked = sorted(most.items(), key=lambda item: (-item[1][0], -item[1][1], item[0][1], _order(item[0][2])))
    rows = [[*entity, *counts[:2], utc_time(counts[2]), state.get(entity)] for entity, counts in ranked[:TOP]]
    section = Section("Flapping")
    section.text.append(f"The connectors and tasks with the most transitions in a window (top {TOP}).")
    section.parts.append(Table(["kind", "connector", "task", "most transitions in a window", "flapping transitions",
                                "last flapping transition", "state now"], rows, {3, 4}))
    return section


def _latest(directory: Path, latest: list[Row]) -> Section:
    counts = Counter((r["kind"], r["state"]) for r in latest)
    rows = [[kind, state, n] for (kind, state), n in sorted(counts.items(), key=lambda item: (item[0][0],
                                                                                            _order(item[0][1])))]
    section = Section("Latest statuses", parts=[Table(["kind", "state", "count"], rows, {2})])
    states = [(r[1] or "(topic)", r[2]) for r in rows if r[0] in ("task", "connector")]
    if states:
        section.parts.append(_bar_chart(directory, "latest_states.svg", "Connectors and tasks by latest state",
                                        states))
    return section


def _time_in_state(directory: Path, durations: list[Row]) -> Section:
    section = Section("Time in each state")
    per_state: Counter[str] = Counter()
    failed: Counter[Entity] = Counter()
    for r in durations:
        per_state[r["state"]] += r["duration_ms"]
        if r["state"] == "FAILED":
            failed[_entity(r)] += r["duration_ms"]
    if per_state:
        section.parts.append(_bar_chart(directory, "time_in_state.svg", "Hours in each state (all connectors and "
                                        "tasks)", [(state, ms / HOUR_MS) for state, ms in
                                                   sorted(per_state.items(), key=lambda item: (-item[1], item[0]))]))
    failed_most = sorted(failed.items(), key=lambda item: (-item[1], item[0][1], _order(item[0][2])))[:TOP]
    section.text.append(f"Longest time FAILED (top {TOP}):")
    section.parts.append(Table(["kind", "connector", "task", "FAILED"], [[*entity, duration_text(ms)]
                                                                         for entity, ms in failed_most]))
    return section


def _retry_outcomes(directory: Path, outcomes: list[Row]) -> Section:
    found: dict[tuple[str, str], list[Any]] = {}
    for r in outcomes:
        counts = found.setdefault((r["kind"], r["result"]), [0, 0.0, None, None])
        counts[0] += r["count"]
        counts[1] += (r["mean_attempts"] or 0) * r["count"]
        counts[2] = max(counts[2] or 0, r["max_attempts"]) if r["max_attempts"] is not None else counts[2]
        counts[3] = max(counts[3] or 0, r["latency_p99_ms"]) if r["latency_p99_ms"] is not None else counts[3]
    rows = [[kind, result, n, f"{attempts / n:.2f}", most, p99]
            for (kind, result), (n, attempts, most, p99) in sorted(found.items())]
    section = Section("Retry outcomes", parts=[Table(
        ["kind", "result", "count", "mean attempts", "max attempts", "worst daily p99 latency (ms)"], rows,
        {2, 3, 4, 5})])
    if rows:
        section.parts.append(_bar_chart(directory, "retry_outcomes.svg", "Write outcomes by kind and result",
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
    return _save(directory, name, title, bar_chart(title, bars, color))


def _time_chart(directory: Path, name: str, title: str, rows: Sequence[Sequence[Any]], bucket_ms: int) -> Chart:
    series = [(int(r[0]), int(r[1]), int(r[2])) for r in rows]
    return _save(directory, name, title, time_chart(title, series, bucket_ms, (FAILURE_COLOR, RECOVERY_COLOR),
                                                    ("failures", "recoveries")))


def _save(directory: Path, name: str, title: str, svg: str) -> Chart:
    """The chart as a file beside the Markdown report, and for the HTML one."""
    (directory / name).write_text(svg + "\n", encoding="utf-8")
    return Chart(name, title, svg)
