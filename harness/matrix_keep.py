"""What a fault matrix row's verdict saw, kept for the run (``bench.fault_matrix --keep DIR``): one JSON file a row,
beside the beds' own folders (each worker's and the broker's logs), and what each of the pod's sidecars printed during
the row (``<row>-sidecar-<n>.log``), so that a side that lost keys can be read after the run.

The file holds when the row began and its fault ended (wall clock, to match the logs' times), every look of the
verdict whose verdict differs from the look before (its time after the fault's end, and per side the keys lost and
stale with what each view showed, and the views that did not answer), the last look, and every record of the row's
keys each side's status topic held, in the order read (time after the fault's end, key, state; null for a tombstone).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .matrix_views import Verdict
from .service import Service
from .topic_tail import TopicTail

# How many lines of each sidecar's output earlier rows wrote (by the service's id; the service kept, so that an id is
# not taken again by another while it counts).
_written: dict[int, tuple[Service, int]] = {}


def wall(monotonic: float) -> float:
    """A monotonic time as wall-clock seconds (the logs' clock)."""
    return time.time() - (time.monotonic() - monotonic)


def seen(verdict: Verdict) -> dict[str, Any]:
    return {"lost": verdict.lost, "stale": verdict.stale, "unanswered": verdict.unanswered}


class RowKeep:
    """One row's looks and records, written by ``write`` into a folder."""

    def __init__(self, fault: str, prefix: str, began: float) -> None:
        self.fault, self.prefix, self.began = fault, prefix, began
        self.fault_end: float | None = None
        self.looks: list[dict[str, Any]] = []
        self._last: dict[str, Any] | None = None
        self._final: dict[str, Any] | None = None
        self.records: dict[str, list[tuple[float | None, str, str | None]]] = {}

    def look(self, at: float, verdicts: Mapping[str, Verdict]) -> None:
        """A look of the verdict at ``at`` (monotonic): kept when it differs from the look before."""
        sides = {name: seen(verdict) for name, verdict in verdicts.items()}
        entry = {"after_fault_end_s": self._after(at), "wall": wall(at), "sides": sides}
        self._final = entry
        if sides != self._last:
            self.looks.append(entry)
            self._last = sides

    def topic(self, side: str, tail: TopicTail | None, keys: Iterable[str]) -> None:
        """Every record of ``keys`` the side's topic held, in the order read."""
        if tail is None:
            return
        self.records[side] = [(self._after(read), key, state(value)) for read, key, value in tail.records(keys)]

    def sidecar_output(self, folder: Path, index: int, service: Service | None) -> None:
        """What the pod's sidecar ``index`` printed since the last row wrote it (its logs), in its own file."""
        if service is None:
            return
        lines = service.output()
        start = _written.get(id(service), (None, 0))
        begin = start[1] if start[0] is service else 0
        _written[id(service)] = (service, len(lines))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self._stem()}-sidecar-{index}.log").write_text("".join(lines[begin:]))

    def _stem(self) -> str:
        return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.prefix)}-{self.fault}"

    def _after(self, at: float) -> float | None:
        return None if self.fault_end is None else round(at - self.fault_end, 3)

    def write(self, folder: Path) -> Path:
        """The row's file in ``folder`` (made if missing): ``<prefix>-<fault>.json``."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self._stem()}.json"
        path.write_text(json.dumps({
            "fault": self.fault, "prefix": self.prefix, "began_wall": wall(self.began),
            "fault_end_wall": None if self.fault_end is None else wall(self.fault_end),
            "looks": self.looks, "last_look": self._final,
            "records": {side: [list(record) for record in records] for side, records in self.records.items()},
        }, indent=1))
        return path


def state(value: bytes | None) -> str | None:
    """A record's state (None: a tombstone); a value that is not a status is kept as its text."""
    if value is None:
        return None
    try:
        found = json.loads(value)
    except ValueError:
        return value.decode(errors="replace")
    return str(found.get("state")) if isinstance(found, dict) else value.decode(errors="replace")
