"""The record of each connector and task, live (pure: no event loop, no Kafka): from the history topic's events, what
an operator asks while it happens: over the last hour, day and week, the time in each state, the availability (the
share of that time RUNNING), the failures and how they ended, the sidecar's restarts and how they went, and the time
to recovery with and without a restart.

Every figure is what ``status-store analyze`` computes on the same history (docs/analytics.md, "What is computed,
exactly"; tests/analytics/test_record.py compares them), over a window ``[start, as_of]`` instead of whole UTC days:

- the events are the valid ``status`` events of connectors and tasks and the valid ``restart`` events (analyze's
  rules: an integer ``time``, a known kind, state and result), ordered by time, then partition and offset;
- **time in each state**: each status event's state lasts until the next one's time (the last until ``as_of``), cut
  to the window; the time after a deletion (``DESTROYED``) is in no state;
- **failures**: FAILED episodes, from an entry into FAILED to the next RUNNING (recovered) or DESTROYED (not
  recovered), a FAILED again before either being the same episode; counted in the window where they began;
- **restarts**: the restart events whose time is in the window, by result; an episode's restarts are those anchored in
  it (``failed_at``, else ``time``, at or after the FAILED that opened it and at or before the event that closed it);
- **time to recovery**: the recovered episodes that began in the window, with at least one restart in them and with
  none.

**Kept compact.** Each connector's and task's events are kept for ``retention_ms`` (a week, the longest window): a
repeated state is folded into the one before it (it changes no figure), older events into the state they leave (and
whether a FAILED episode was open then), and at most ``max_events`` per connector or task (a state that flaps every
second folds its oldest events the same way: its windows then begin later, which ``Figures.start`` says).
An event that comes out of time order for its key is put in its place, as analyze sorts it; a repeated state folded
before it came is not brought back (a key written by two writers whose clocks disagree).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..connect.model import State

HOUR_MS, DAY_MS, WEEK_MS = 3_600_000, 86_400_000, 604_800_000
WINDOWS = {"1h": HOUR_MS, "1d": DAY_MS, "7d": WEEK_MS}
MAX_EVENTS = 10_000
STATES = frozenset(state.value for state in State)
# How a restart request went (status_store/act/plan.py's results that the history topic holds).
RESTART_RESULTS = ("restarted", "rebalancing", "unreachable", "refused", "not-found", "unauthorized", "tls-failed")
_TIME = re.compile(r"-?[0-9]{1,18}")
_ENDS = (State.RUNNING.value, State.DESTROYED.value)
# (kind, connector, task): task None for a connector's own.
Entity = tuple[str, str, int | None]


@dataclass(frozen=True, slots=True, order=True)
class StatusEvent:
    """A status event of the history topic, where it was read (its order: time, partition, offset)."""

    time: int
    partition: int
    offset: int
    state: str


@dataclass(frozen=True, slots=True, order=True)
class RestartEvent:
    """A restart event: when it was answered, its anchor (when the sidecar read the FAILED it answers), its result."""

    time: int
    anchor: int
    result: str


@dataclass(frozen=True, slots=True)
class Recovery:
    """Recovered episodes: how many, and their mean time to recovery (None without one)."""

    count: int
    mean_ms: float | None


@dataclass(frozen=True, slots=True)
class Figures:
    """One connector's or task's record over ``[start, as_of]``."""

    start: int
    as_of: int
    durations_ms: Mapping[str, int]
    failures: int
    recovered: int
    unrecovered: int
    restarts: Mapping[str, int]
    with_restart: Recovery
    without_restart: Recovery

    @property
    def availability(self) -> float | None:
        """The share of the time in a state that was RUNNING (None: no time in any state)."""
        total = sum(self.durations_ms.values())
        return self.durations_ms.get(State.RUNNING.value, 0) / total if total else None

    def fields(self) -> dict[str, Any]:
        """As ``GET /connectors/{name}/history`` shows them."""
        return {"start": self.start, "as_of": self.as_of, "durations_ms": dict(self.durations_ms),
                "availability": self.availability, "failures": self.failures, "recovered": self.recovered,
                "unrecovered": self.unrecovered, "restarts": dict(self.restarts),
                "recovery_with_restart": {"episodes": self.with_restart.count, "mean_ms": self.with_restart.mean_ms},
                "recovery_without_restart": {"episodes": self.without_restart.count,
                                             "mean_ms": self.without_restart.mean_ms}}


@dataclass(slots=True)
class Timeline:
    """One connector's or task's kept events: its status events (sorted), the state and episode carried from before
    them (``carried``: the last state folded, ``carried_open``: whether a FAILED episode was open then), and its
    restart events (sorted)."""

    events: list[StatusEvent] = field(default_factory=list)
    carried: StatusEvent | None = None
    carried_open: bool = False
    restarts: list[RestartEvent] = field(default_factory=list)

    def add(self, event: StatusEvent) -> None:
        """A status event read: in its place; a repeat of the state before it folded into it."""
        events = self.events
        if not events or event > events[-1]:
            if (events[-1].state if events else self.carried.state if self.carried else None) != event.state:
                events.append(event)
            return
        if self.carried is not None and event <= self.carried:
            return  # before what is folded: its figures are gone already
        bisect.insort(events, event)

    def fold(self, before_ms: int, max_events: int) -> None:
        """Fold the status events before ``before_ms`` (all but ``max_events`` at most) into the carried state, and
        drop the restarts before it."""
        events = self.events
        cut = bisect.bisect_left(events, StatusEvent(before_ms, -1, -1, ""))
        cut = max(cut, len(events) - max_events)
        if cut > 0:
            open_ = self.carried_open
            for event in events[:cut]:
                if event.state == State.FAILED.value:
                    open_ = True
                elif event.state in _ENDS:
                    open_ = False
            self.carried, self.carried_open = events[cut - 1], open_
            del events[:cut]
        drop = bisect.bisect_left(self.restarts, RestartEvent(min(before_ms, self._first_kept()), -2**63, ""))
        del self.restarts[:drop]

    def _first_kept(self) -> int:
        return self.events[0].time if self.events else 2**63 - 1

    def figures(self, start: int, as_of: int) -> Figures:
        """The record over ``[start, as_of]`` (see the module's docstring)."""
        begin = max(start, self.carried.time if self.carried is not None else start)
        durations: Counter[str] = Counter()
        episodes: list[tuple[int, int | None, int | None]] = []  # (failed, recovered, ended)
        opened: int | None = None
        is_open = self.carried_open
        sequence = ([self.carried] if self.carried is not None else []) + self.events
        for index, event in enumerate(sequence):
            if event.time > as_of:
                break
            following = sequence[index + 1].time if index + 1 < len(sequence) else None
            end = as_of if following is None or following > as_of else following
            if event.state != State.DESTROYED.value:
                overlap = min(end, as_of) - max(event.time, begin)
                if overlap > 0:
                    durations[event.state] += overlap
            if index == 0 and event is self.carried:
                continue  # its episode's opening is before what is kept
            if event.state == State.FAILED.value and not is_open:
                is_open, opened = True, event.time
            elif event.state in _ENDS and is_open:
                if opened is not None:
                    episodes.append((opened, event.time if event.state == State.RUNNING.value else None,
                                     event.time))
                is_open, opened = False, None
        if is_open and opened is not None:
            episodes.append((opened, None, None))
        restarts = [r for r in self.restarts if r.time <= as_of]
        counted = [e for e in episodes if begin <= e[0] <= as_of]
        with_restart: list[int] = []
        without_restart: list[int] = []
        for failed, recovered, ended in counted:
            if recovered is None:
                continue
            inside = any(r.anchor >= failed and (ended is None or r.anchor <= ended) for r in restarts)
            (with_restart if inside else without_restart).append(recovered - failed)
        by_result = Counter(r.result for r in restarts if r.time >= start)
        recovered_count = sum(1 for e in counted if e[1] is not None)
        return Figures(begin, as_of, dict(durations), len(counted), recovered_count, len(counted) - recovered_count,
                       dict(by_result), _recovery(with_restart), _recovery(without_restart))


def _recovery(times: list[int]) -> Recovery:
    return Recovery(len(times), sum(times) / len(times) if times else None)


class Record:
    """Every connector's and task's timeline, fed the history topic's records as they are read (``apply``)."""

    def __init__(self, retention_ms: int | None = WEEK_MS, max_events: int = MAX_EVENTS) -> None:
        """``retention_ms``: how long events are kept (None: for ever, as a whole analysis reads them)."""
        self.retention_ms = retention_ms
        self.max_events = max_events
        self.timelines: dict[Entity, Timeline] = {}
        self.newest = 0
        # Records applied: a view made before one is out of date.
        self.changes = 0

    def apply(self, value: bytes | None, partition: int, offset: int) -> None:
        """One record of the history topic."""
        parsed = parse_event(value)
        if parsed is None:
            return
        entity, event = parsed
        self.changes += 1
        timeline = self.timelines.get(entity)
        if timeline is None:
            timeline = self.timelines[entity] = Timeline()
        if isinstance(event, RestartEvent):
            bisect.insort(timeline.restarts, event)
            self.newest = max(self.newest, event.time)
        else:
            timeline.add(StatusEvent(event[0], partition, offset, event[1]))
            self.newest = max(self.newest, event[0])
        if len(timeline.events) > 2 * self.max_events:
            timeline.fold(-2**63, self.max_events)

    def fold(self, now_ms: int) -> None:
        """Fold what is older than the retention (at most ``max_events`` kept per connector or task)."""
        if self.retention_ms is None:
            return
        for timeline in self.timelines.values():
            timeline.fold(now_ms - self.retention_ms, self.max_events)

    def connector(self, name: str) -> Iterator[tuple[Entity, Timeline]]:
        """The connector's own timeline and its tasks', the connector's first, then tasks by number."""
        found = [(entity, t) for entity, t in self.timelines.items() if entity[1] == name and entity[0] != "topic"]
        yield from sorted(found, key=lambda item: (item[0][0] != "connector", item[0][2] or 0))

    def connectors(self) -> list[str]:
        """The connectors with a timeline, by name."""
        return sorted({entity[1] for entity in self.timelines})

    def windows(self, name: str, as_of: int, windows: Mapping[str, int] = WINDOWS
                ) -> dict[str, dict[Entity, Figures]]:
        """The connector's and its tasks' figures over each window ending at ``as_of``."""
        timelines = list(self.connector(name))
        return {label: {entity: timeline.figures(as_of - length, as_of) for entity, timeline in timelines}
                for label, length in windows.items()}

    def events(self, name: str, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """The connector's kept events (state changes and restarts), newest first, before ``before`` (a time, ms;
        None: the newest), at most ``limit``; and the time to ask before for the next page (None: no more)."""
        found: list[tuple[int, dict[str, Any]]] = []
        for (kind, _, task), timeline in self.connector(name):
            for event in timeline.events:
                found.append((event.time, {"time": event.time, "kind": kind, "task": task, "state": event.state}))
            for restart in timeline.restarts:
                found.append((restart.time, {"time": restart.time, "kind": kind, "task": task,
                                             "restart": restart.result, "failed_at": restart.anchor}))
        found = [item for item in found if before is None or item[0] < before]
        found.sort(key=lambda item: item[0], reverse=True)
        page = [event for _, event in found[:limit]]
        more = len(found) > limit
        return page, (found[limit - 1][0] if more and limit > 0 else None)


def parse_event(value: bytes | None) -> tuple[Entity, RestartEvent | tuple[int, str]] | None:
    """A history record's connector or task and its status event (time, state) or restart event, by analyze's
    rules (docs/analytics.md, "Inputs"); None for anything else (an outcome, a topic's event, a garbled record)."""
    if value is None:
        return None
    try:
        event = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    time = _time(event.get("time"))
    kind, connector, task = event.get("kind"), event.get("connector"), event.get("task")
    if (time is None or kind not in ("connector", "task") or not isinstance(connector, str)
            or not isinstance(event.get("key"), str) or (kind == "task" and not _integer(task))):
        return None
    entity: Entity = (kind, connector, task if kind == "task" else None)
    if event.get("event") == "status":
        state = event.get("state")
        return (entity, (time, state)) if state in STATES else None
    if event.get("event") == "restart":
        attempt = event.get("attempt")
        # An attempt that is not an integer reads as none (analyze's JSON schema), one below 1 is garbled.
        if event.get("result") not in RESTART_RESULTS or (isinstance(attempt, int) and not isinstance(attempt, bool)
                                                         and attempt < 1):
            return None
        failed_at = event.get("failed_at")
        anchor = failed_at if isinstance(failed_at, int) and not isinstance(failed_at, bool) else time
        return entity, RestartEvent(time, anchor, event["result"])
    return None


def _time(value: object) -> int | None:
    text = str(value) if _integer(value) else value if isinstance(value, str) else None
    return int(text) if text is not None and _TIME.fullmatch(text) else None


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def merged(items: Iterable[tuple[Entity, Figures]]) -> Figures | None:
    """Several tasks' figures as one (their times, failures and restarts added; None for none)."""
    items = list(items)
    if not items:
        return None
    durations: Counter[str] = Counter()
    restarts: Counter[str] = Counter()
    with_times: list[tuple[int, float]] = []
    without_times: list[tuple[int, float]] = []
    for _, f in items:
        durations.update(f.durations_ms)
        restarts.update(f.restarts)
        if f.with_restart.count:
            with_times.append((f.with_restart.count, f.with_restart.mean_ms or 0.0))
        if f.without_restart.count:
            without_times.append((f.without_restart.count, f.without_restart.mean_ms or 0.0))

    def pooled(parts: list[tuple[int, float]]) -> Recovery:
        count = sum(n for n, _ in parts)
        return Recovery(count, sum(n * m for n, m in parts) / count if count else None)

    first = items[0][1]
    return Figures(min(f.start for _, f in items), first.as_of, dict(durations), sum(f.failures for _, f in items),
                   sum(f.recovered for _, f in items), sum(f.unrecovered for _, f in items), dict(restarts),
                   pooled(with_times), pooled(without_times))
