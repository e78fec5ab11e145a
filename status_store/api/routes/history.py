"""``GET /connectors/{name}/history``: the record of a connector and its tasks (act/record.py): over the last hour,
day and week, the time in each state, the availability, the failures and the sidecar's restarts, the time to recovery
with and without a restart; and its events, newest first, a page at a time. A route of status-store's own (Connect has
none), read from the history topic (``status.storage.history.topic``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from ...act.actions import Actions
from ...act.record import Figures, merged
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ConnectorHistory, ErrorBody

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/connectors/{name}/history", response_model=ConnectorHistory, responses={
    404: {"model": ErrorBody, "description": "No history of the connector is kept, or the history topic is not read "
                                             "(status.storage.history.topic unset)"}})
async def connector_history(request: Request, name: str, limit: Annotated[int, Query(
        ge=1, le=1000, description="Events per page, newest first.")] = 100, before: Annotated[int | None, Query(
        description="The page of events before this time (ms since the epoch): the next_before of the page before.")]
        = None) -> ConnectJSONResponse:
    """The connector's record over the last hour, day and week (``windows``: its own, each task's, its tasks
    together), and a page of its events (state changes and the sidecar's restarts), newest first."""
    actions: Actions | None = request.app.state.actions
    record = actions.record if actions is not None else None
    if actions is None or record is None:
        raise ApiError(404, "No history is read: status.storage.history.topic is not set")
    timelines = list(record.connector(name))
    if not timelines:
        raise ApiError(404, f"No history found for connector {name}")
    as_of = round(actions.now() * 1000)
    windows: dict[str, Any] = {}
    for window, figures in record.windows(name, as_of).items():
        own = next((f for entity, f in figures.items() if entity[0] == "connector"), None)
        tasks = {str(entity[2]): f for entity, f in figures.items() if entity[0] == "task"}
        together = merged((entity, f) for entity, f in figures.items() if entity[0] == "task")
        windows[window] = {"connector": _fields(own), "tasks": {n: f.fields() for n, f in tasks.items()},
                           "all_tasks": _fields(together)}
    events, next_before = record.events(name, before, limit)
    return ConnectJSONResponse({"name": name, "as_of": as_of, "history_topic": actions.config.history_topic,
                                "windows": windows, "events": events, "next_before": next_before})


def _fields(figures: Figures | None) -> dict[str, Any] | None:
    return figures.fields() if figures is not None else None
