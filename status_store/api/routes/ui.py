"""``GET /ui``: the fleet at a glance in a browser, and ``GET /fleet``, what the page reads first.

The page (``status_store/api/ui/``: one HTML file, one script, one style sheet, nothing fetched from anywhere
else) lists every connector and task, not RUNNING first, and follows ``GET /events`` for every change. It only
reads. Its Content-Security-Policy lets it run its own script and nothing else, and the script puts every name,
worker id and trace into the page as text: a connector named ``<img src=x onerror=...>`` is shown, never run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from ...act.actions import Actions
from ...act.marks import NO_FIELDS, NO_MARKS, FleetMarks
from ...connect.cache import FleetObject, FleetView
from ...connect.codec import json_string
from ...connect.configs import ConnectorConfigs
from ...connect.model import TaskId
from ...fleet.event import trace_excerpt
from ...fleet.events import StatusEvents
from ...fleet.text import MAX_SHOWN_CHARS, may_be_cut, shown
from ..deps import ConfigsDep, StoreDep
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ConnectorState, ErrorBody, Fleet, TaskState
from ..shared_answers import Render
from .connectors import shared_answer, state, task_state, type_of

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
    return ConnectJSONResponse(task_state(task, task_status))


@router.get("/fleet", response_model=Fleet, responses={503: {"model": ErrorBody, "description": (
    "As many answers about the whole fleet as allowed are being built: Retry-After says when to try again.")}})
async def fleet(request: Request, store: StoreDep, configs: ConfigsDep) -> Response:
    """Every connector (with a status, or configured) and its tasks: state, worker, since when (the Kafka
    timestamp of the record that changed the state), the first line of a trace; and where ``GET /events`` stood
    when this was read, so that a client drops the events it already holds. Built off the event loop and shared by
    the clients asking meanwhile (``shared_answers``)."""
    hub: StatusEvents | None = request.app.state.events
    class_types, heartbeat_ms = store.config.connector_types, store.config.events_heartbeat_ms
    actions: Actions | None = request.app.state.actions

    def prepare() -> Render:
        # The position first, then the view: the answer holds everything up to the position (see FleetView).
        position = hub.position if hub is not None else {}
        view = store.cache.view()
        marks = actions.marks() if actions is not None else NO_MARKS
        return lambda: fleet_text(view, class_types, configs, position, heartbeat_ms, marks)

    return await shared_answer(request, "fleet", None, store, configs, prepare,
                               (lambda: actions.version) if actions is not None else (lambda: 0))


def fleet_text(view: FleetView, class_types: Mapping[str, str], configs: ConnectorConfigs | None,
               position: dict[int, int], heartbeat_ms: int, marks: FleetMarks = NO_MARKS) -> Iterator[str]:
    """``GET /fleet``'s answer in pieces of JSON text (strings as Connect's JSON writes them; names and worker ids as
    every view of the fleet shows them, ``text.shown``), with what the sidecar's actions add (``marks``: each
    connector's health word, a status's worker gone since when and its restarts, the workers). Reads ``view``,
    ``configs`` and ``marks`` only (on a thread)."""
    configured = set(configs.connectors()) if configs is not None else set()
    event_id = json_string(",".join(f"{p}:{o}" for p, o in position.items())) if position else "null"
    positions = ",".join(f'"{p}":{o}' for p, o in position.items())
    yield f'{{"id":{event_id},"position":{{{positions}}},"heartbeat_ms":{heartbeat_ms:d},"connectors":['
    workers: dict[str | None, str] = {}
    separator = ""
    for name in sorted({*configured, *view.names()}):
        connector, tasks = view.connector_object(name), view.task_objects(name)
        if connector is None and not tasks and name not in configured:
            continue  # an entry for a write not read back yet
        connector_type = type_of(view, class_types, configs, name)
        head = (f'{separator}{{"name":{json_string(shown(name))},"type":{json_string(connector_type)},'
                f'"configured":{"true" if name in configured else "false"},')
        task_texts = ",".join([f'{{"id":{task.task},{_status_fields(task, workers, marks)}}}' for task in tasks])
        status = _status_fields(connector, workers, marks) if connector is not None else _NO_STATUS
        word = marks.health(connector.value if connector is not None else None, [task.value for task in tasks])
        yield f'{head}{status},"health":{"null" if word is None else json_string(word.value)},"tasks":[{task_texts}]}}'
        separator = ","
    named = [worker for worker in workers if worker is not None]
    yield f'],"workers":{json.dumps(marks.workers(named), allow_nan=False)}}}'


_NO_STATUS = f'"state":null,"worker_id":null,"since":null,"trace":null,{NO_FIELDS}'


def _status_fields(item: FleetObject, workers: dict[str | None, str], marks: FleetMarks) -> str:
    """A status's fields in ``GET /fleet``: state, worker (its JSON text kept in ``workers``: a fleet has few), since
    when, a trace's first line, and what the actions add (``FleetMarks.fields``)."""
    value = item.value
    worker_id = value.worker_id
    worker = workers.get(worker_id)
    if worker is None:
        worker = workers[worker_id] = "null" if worker_id is None else json_string(shown(worker_id))
    trace = trace_excerpt(value.trace)
    return (f'"state":"{value.state.value}","worker_id":{worker},"since":{item.changed_at!r},'
            f'"trace":{"null" if trace is None else json_string(trace)},{marks.fields(item)}')
