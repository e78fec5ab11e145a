"""``GET /ui``: the fleet at a glance in a browser, and ``GET /fleet``, what the page reads first.

The page (``status_store/api/ui/``: one HTML file, one script, one style sheet, nothing fetched from anywhere
else) lists every connector and task, not RUNNING first, and follows ``GET /events`` for every change. It only
reads. Its Content-Security-Policy lets it run its own script and nothing else, and the script puts every name,
worker id and trace into the page as text: a connector named ``<img src=x onerror=...>`` is shown, never run.
"""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from ...connect.cache import FleetObject
from ...connect.model import TaskId
from ...fleet.event import trace_excerpt
from ...fleet.events import StatusEvents
from ...fleet.text import MAX_SHOWN_CHARS, may_be_cut, shown
from ..deps import ConfigsDep, StoreDep
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ConnectorState, ErrorBody, Fleet, TaskState
from .connectors import state, task_state, type_of

router = APIRouter(tags=["operations"], route_class=ConnectRoute)

UI_DIR = Path(__file__).parent.parent / "ui"
# The page's own script and sheet, its own API, nothing else: no inline script or style, no frame, no form.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ASSETS = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"}


@functools.cache
def asset(name: str) -> bytes:
    """A file of the page, read once."""
    return (UI_DIR / name).read_bytes()


def _page_file(name: str) -> Response:
    return Response(asset(name), media_type=ASSETS[name], headers=PAGE_HEADERS)


@router.get("/ui", response_class=Response, responses={200: {"content": {"text/html": {}}}})
async def ui() -> Response:
    """The status page: every connector and task, not RUNNING first, kept current from ``GET /events``."""
    return _page_file("index.html")


@router.get("/ui/app.js", response_class=Response, include_in_schema=False)
async def ui_script() -> Response:
    return _page_file("app.js")


@router.get("/ui/app.css", response_class=Response, include_in_schema=False)
async def ui_style() -> Response:
    return _page_file("app.css")


@router.get("/ui/icon.svg", response_class=Response, include_in_schema=False)
async def ui_icon() -> Response:
    return _page_file("icon.svg")


@router.get("/fleet/status", response_model=ConnectorState | TaskState, responses={404: {"model": ErrorBody}})
async def fleet_status(store: StoreDep, connector: Annotated[str, Query(
        description="The connector's name, whole or as GET /fleet shows it (cut past 256 characters).")],
                       task: Annotated[int | None, Query(ge=0, description="A task's number; none: the connector's "
                                                                           "own status.")] = None,
                       ) -> ConnectJSONResponse:
    """One connector's or task's status, its whole trace included (what the status page's "whole trace" shows), for
    any name the topic holds: Connect's paths cannot address a connector named ``..`` (the path is resolved before it
    is sent) or with a ``/`` (an encoded one is refused), a query parameter can."""
    name = connector
    if may_be_cut(name) and store.cache.get_connector(name) is None and not store.cache.task_numbers(name):
        name = next((whole for whole in store.cache.names() if len(whole) > MAX_SHOWN_CHARS and shown(whole) == name),
                    name)
    if task is None:
        status = store.cache.get_connector(name)
        if status is None:
            raise ApiError(404, f"No status found for connector {connector}")
        return ConnectJSONResponse(state(status))
    task_status = store.cache.get_task(TaskId(name, task))
    if task_status is None:
        raise ApiError(404, f"No status found for task {connector}-{task}")
    return ConnectJSONResponse(task_state(task_status))


@router.get("/fleet", response_model=Fleet)
async def fleet(request: Request, store: StoreDep, configs: ConfigsDep) -> Response:
    """Every connector (with a status, or configured) and its tasks: state, worker, since when (the Kafka
    timestamp of the record that changed the state), the first line of a trace; and where ``GET /events`` stood
    when this was read, so that a client drops the events it already holds."""
    hub: StatusEvents | None = request.app.state.events
    # One consistent view, taken in one go on the event loop (the statuses are immutable values); the answer,
    # megabytes for a fleet of thousands, is built and encoded on a thread, so the loop keeps serving.
    objects = list(store.cache.fleet())
    configured = configs.connectors() if configs is not None else []
    names = dict.fromkeys([*configured, *(item.connector for item in objects)])
    types = {name: type_of(store, configs, name) for name in names}
    position = hub.position if hub is not None else {}
    body = await asyncio.to_thread(fleet_json, objects, set(configured), types, position,
                                   store.config.events_heartbeat_ms)
    return Response(body, media_type="application/json")


def fleet_json(objects: list[FleetObject], configured: set[str], types: dict[str, str], position: dict[int, int],
               heartbeat_ms: int) -> bytes:
    """``GET /fleet``'s answer (JSON text as Python's encoder writes it, escapes in ASCII: valid for every
    string a status may hold, a lone surrogate included)."""
    statuses: dict[str, dict[str, Any]] = {}
    tasks: dict[str, list[tuple[int, dict[str, Any]]]] = {name: [] for name in types}
    for item in objects:
        value = item.value
        worker = value.worker_id
        status = {"state": value.state.value, "worker_id": worker and shown(worker), "since": item.changed_at,
                  "trace": trace_excerpt(value.trace)}
        if item.task is None:
            statuses[item.connector] = status
        else:
            tasks[item.connector].append((item.task, {"id": item.task, **status}))
    no_status = {"state": None, "worker_id": None, "since": None, "trace": None}
    answer = {
        "id": ",".join(f"{p}:{o}" for p, o in position.items()) or None,
        "position": {str(p): o for p, o in position.items()},
        "heartbeat_ms": heartbeat_ms,
        "connectors": [{"name": shown(name), "type": types[name], "configured": name in configured,
                        **statuses.get(name, no_status), "tasks": [task for _, task in sorted(tasks[name])]}
                       for name in sorted(types)],
    }
    return json.dumps(answer, separators=(",", ":"), allow_nan=False).encode()
