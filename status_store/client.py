"""``status-store status`` and ``status-store watch``: a person's view of a running service's statuses, as a
table, and of their changes as they are read (``GET /events``), one line each."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

TIMEOUT_S = 10.0
# ``watch`` gives up when nothing, not even a heartbeat (every 15 s by default), came for this long.
WATCH_IDLE_S = 60.0


def fetch(url: str) -> Any:
    """GET a JSON document; raise SystemExit with a clear message on any failure."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        raise SystemExit(f"status-store: {error_message(e)} (HTTP {e.code})") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise SystemExit(f"status-store: cannot reach {url}: {reason}") from None


def error_message(error: urllib.error.HTTPError) -> str:
    """The message of Connect's error body, else the HTTP reason."""
    try:
        return str(json.load(error).get("message", error.reason))
    except (ValueError, AttributeError):
        return str(error.reason)


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


def watch(base_url: str, connector: str | None, out: TextIO = sys.stdout) -> int:
    """Print each status change as the service reads it, one line each, until the stream ends or fails.

    A client dropped for falling behind reconnects with the id of the last event printed, so no change is
    missed or printed twice. 0 when the service ended the stream (it is stopping); SystemExit on a failure.
    """
    url = f"{base_url.rstrip('/')}/events"
    if connector is not None:
        url += "?" + urllib.parse.urlencode({"connector": connector})
    last_id: str | None = None
    while True:
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=WATCH_IDLE_S) as stream:
                for event_id, name, data in server_sent_events(stream):
                    if name == "error":
                        print(f"status-store: {data.get('message')}", file=sys.stderr)
                        break
                    last_id = event_id or last_id
                    print(change_line(name, data), file=out, flush=True)
                else:
                    raise SystemExit(f"status-store: {url} ended the stream")
        except urllib.error.HTTPError as e:
            raise SystemExit(f"status-store: {error_message(e)} (HTTP {e.code})") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise SystemExit(f"status-store: cannot read {url}: {reason}") from None
        if "dropped" not in str(data.get("message")):
            return 0


def server_sent_events(lines: Iterable[bytes]) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    """(id, event type, JSON data) of each event of a text/event-stream; comment lines are skipped."""
    fields: dict[str, str] = {}
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if "data" in fields:
                yield fields.get("id"), fields.get("event", "message"), json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def change_line(name: str, data: dict[str, Any]) -> str:
    """One change for a person: when, what, and its new status."""
    timestamp = data.get("timestamp")
    when = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp)) if timestamp is not None
            else "-" * 20)
    kind = data["kind"]
    what = {"connector": f"connector {data['connector']}", "task": f"task {data['connector']}/{data.get('task')}",
            "topic": f"topic {data.get('topic')} of {data['connector']}"}[kind]
    if name == "deleted":
        return f"{when}  {what}  deleted"
    if kind == "topic":
        return f"{when}  {what}  used by task {data.get('task')}"
    worker = data.get("worker_id") if data.get("worker_id") is not None else "-"
    trace = f"  {data['trace']}" if data.get("trace") else ""
    return f"{when}  {what}  {data['state']}  worker {worker}  generation {data['generation']}{trace}"
