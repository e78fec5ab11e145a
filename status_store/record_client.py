"""``status-store history NAME``: a connector's record (``GET /connectors/{name}/history``) for a person: over the last
hour, day and week, its own status's and each task's availability, failures, restarts and time to recovery, then its
latest events. Every text from the service is escaped and every read bounded, as ``status`` and ``watch`` do
(``client.py``)."""

from __future__ import annotations

import sys
import time
import urllib.parse
from typing import Any, TextIO

from .client import TIMEOUT_S, MalformedAnswer, Tls, fetch, field
from .logs import escape_text

EVENTS_SHOWN = 20


def show_history(base_url: str, name: str, out: TextIO = sys.stdout, tls: Tls | None = None,
                 timeout_s: float = TIMEOUT_S) -> int:
    """Print the connector's record; 0 when shown (SystemExit with one line on a failure, or past ``timeout_s``)."""
    url = (f"{base_url.rstrip('/')}/connectors/{urllib.parse.quote(name, safe='')}/history?"
           + urllib.parse.urlencode({"limit": EVENTS_SHOWN}))
    answer = fetch(url, time.monotonic() + timeout_s, tls)
    try:
        table: list[tuple[str, ...]] = [("WINDOW", "WHAT", "AVAILABILITY", "FAILURES", "RECOVERED", "RESTARTS",
                                         "RECOVERY WITH RESTART", "WITHOUT")]
        windows = field(answer, "windows", dict, "the history")
        for window, found in windows.items():
            rows = [("connector", field(found, "connector", (dict, type(None)), "a window")),
                    ("tasks together", field(found, "all_tasks", (dict, type(None)), "a window"))]
            rows += [(f"task {n}", figures) for n, figures in sorted(field(found, "tasks", dict, "a window").items(),
                                                                      key=lambda item: int(item[0]))]
            table += [(escape_text(window), what, *_cells(figures)) for what, figures in rows if figures is not None]
        events = field(answer, "events", list, "the history")
    except (MalformedAnswer, ValueError) as e:
        raise SystemExit(f"status-store: {url} answered something else than a history: {escape_text(str(e))}") from None
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)
    if events:
        print(f"\nLatest events (newest first, {len(events)} at most {EVENTS_SHOWN}):", file=out)
        for event in events:
            print(_event_line(event), file=out)
    return 0


def _cells(figures: dict[str, Any]) -> tuple[str, ...]:
    availability = figures.get("availability")
    restarts = figures.get("restarts") or {}
    return (f"{availability * 100:.2f} %" if isinstance(availability, int | float) else "-",
            str(figures.get("failures", "-")), str(figures.get("recovered", "-")),
            ", ".join(f"{escape_text(str(k))} {v}" for k, v in sorted(restarts.items())) or "-",
            _recovery(figures.get("recovery_with_restart")), _recovery(figures.get("recovery_without_restart")))


def _recovery(found: object) -> str:
    if not isinstance(found, dict) or not found.get("episodes"):
        return "-"
    mean = found.get("mean_ms")
    return f"{found['episodes']} in {mean / 1000:.1f} s mean" if isinstance(mean, int | float) else "-"


def _event_line(event: object) -> str:
    if not isinstance(event, dict):
        return "  (not an event)"
    stamp = event.get("time")
    try:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp / 1000)) if isinstance(stamp, int) else "-"
    except (OverflowError, OSError, ValueError):
        when = "-"
    what = "connector" if event.get("kind") == "connector" else f"task {escape_text(str(event.get('task')))}"
    if "restart" in event:
        return f"  {when}  {what}  restart by the sidecar: {escape_text(str(event['restart']))}"
    return f"  {when}  {what}  {escape_text(str(event.get('state')))}"
