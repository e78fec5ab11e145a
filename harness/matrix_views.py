"""Where the fault matrix looks for a key's status, and how it judges what it finds against the workload's oracle
(``matrix_workload.Workload.expected``):

- the status topic's last record per key (``topic_tail.TopicTail``: a consumer tailing the topic from its start);
- Connect's own REST API, each running worker's (``GET /connectors/{c}/status``: what its store read);
- the sidecar's REST API, each sidecar's (the pod only; the same route, from what the sidecar read).

A key is **lost** where one of them has no status for it while the workload's steps left it one, and **stale** where
one of them shows another state than the steps left it in (a status where none is due included; ``is_right``).
``LatencyWatch`` times each timed step until every running worker's REST API shows it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .matrix_workload import GONE, Step, is_right, shown_by
from .real_connect import Answer

# How often the watch asks each worker while a timed step is not shown everywhere.
WATCH_INTERVAL_S = 0.25
# A view's answer: each key's state (None: no status), or None when the view did not answer.
Found = dict[str, str | None] | None
Ask = Callable[[str, str], Answer]


def rest_found(ask: Ask, connectors: Iterable[str]) -> Found:
    """Each key of these connectors as a REST API serving Connect's status routes shows it; None when it does not
    answer (an error, a refused connection)."""
    found: dict[str, str | None] = {}
    for name in connectors:
        try:
            answer = ask("GET", f"/connectors/{name}/status")
        except OSError:
            return None
        if answer.status == 404:
            found.update(GONE.by_key(name))
        elif answer.status == 200:
            found.update(shown_by(answer.json(), name))
        else:
            return None
    return found


def shows(ask: Ask, step: Step) -> bool:
    """Whether a REST API shows a step's outcome for its connector."""
    found = rest_found(ask, [step.connector])
    return found is not None and all(is_right(key, due, found[key])
                                     for key, due in step.shown.by_key(step.connector).items())


@dataclass
class Verdict:
    """One look at every view of a side: the keys lost and stale (with what each view showed), the views that did
    not answer."""

    lost: dict[str, list[str]] = field(default_factory=dict)
    stale: dict[str, list[str]] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return not (self.lost or self.stale or self.unanswered)


def judge(expected: Mapping[str, str | None], views: Mapping[str, Found]) -> Verdict:
    """Each key against the oracle in every view: lost where a view has no status that is due, stale where a view
    shows another state (a key both is counted lost)."""
    verdict = Verdict()
    for view, found in views.items():
        if found is None:
            verdict.unanswered.append(view)
            continue
        for key, state in expected.items():
            seen = found.get(key)
            if is_right(key, state, seen):
                continue
            where = f"{view}: {seen or 'none'}"
            if seen is None:
                verdict.lost.setdefault(key, []).append(where)
            else:
                verdict.stale.setdefault(key, []).append(where)
    for key in verdict.lost:
        verdict.stale.pop(key, None)
    return verdict


class LatencyWatch:
    """Times each timed step, from its call until every worker ``asks`` reaches shows it, on a thread of its own
    until ``stop()``; a step not shown by then has no time (None)."""

    def __init__(self, asks: Callable[[], list[Ask]]) -> None:
        self._asks = asks
        self._lock = threading.Lock()
        self._waiting: list[tuple[Step, float]] = []
        self.times: dict[str, float | None] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency-watch", daemon=True)
        self._thread.start()

    def called(self, step: Step, at: float) -> None:
        """A timed step was called at ``at`` (monotonic)."""
        with self._lock:
            self._waiting.append((step, at))
            self.times[step.role] = None

    def _run(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            with self._lock:
                waiting = list(self._waiting)
            for step, at in waiting:
                asks = self._asks()
                if asks and all(shows(ask, step) for ask in asks):
                    with self._lock:
                        self._waiting.remove((step, at))
                        self.times[step.role] = time.monotonic() - at

    def stop(self) -> dict[str, float | None]:
        """Each timed step's seconds until shown everywhere (None: not shown)."""
        self._stopping.set()
        self._thread.join(30)
        with self._lock:
            return dict(self.times)
