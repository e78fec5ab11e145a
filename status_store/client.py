"""``status-store status``: a person's view of a running service's statuses, as a table."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TextIO

TIMEOUT_S = 10.0


def fetch(url: str) -> Any:
    """GET a JSON document; raise SystemExit with a clear message on any failure."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        try:
            message = json.load(e).get("message", e.reason)
        except (ValueError, AttributeError):
            message = e.reason
        raise SystemExit(f"status-store: {message} (HTTP {e.code})") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise SystemExit(f"status-store: cannot reach {url}: {reason}") from None


def rows(info: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, state, worker, first line of the trace) for a connector and its tasks."""
    def first_line(state: dict[str, Any]) -> str:
        trace = state.get("trace") or ""
        return trace.splitlines()[0] if trace else ""

    def worker(state: dict[str, Any]) -> str:
        # null for a status its writer left without a worker id, as Connect shows it.
        return state["worker_id"] if state["worker_id"] is not None else "-"

    connector = info["connector"]
    found = [(f"{info['name']} ({info['type']})", connector["state"], worker(connector), first_line(connector))]
    for task in info["tasks"]:
        found.append((f"  task {task['id']}", task["state"], worker(task), first_line(task)))
    return found


def show_status(base_url: str, name: str | None, out: TextIO = sys.stdout) -> int:
    """Print one connector's statuses, or every connector's; 0 when shown."""
    base = base_url.rstrip("/")
    if name is not None:
        infos = [fetch(f"{base}/connectors/{urllib.parse.quote(name, safe='')}/status")]
    else:
        expanded = fetch(f"{base}/connectors?expand=status")
        infos = [expanded[key]["status"] for key in sorted(expanded)]
    table = [("CONNECTOR / TASK", "STATE", "WORKER", "TRACE")]
    for info in infos:
        table.extend(rows(info))
    if len(table) == 1:
        print("No connector has a status.", file=out)
        return 0
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3],
              file=out)
    return 0
