"""``GET /fleet/health``: each connector's health word (docs/operations.md), for ``status-store status`` and scripts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from ...act.actions import Actions
from ...act.marks import FleetMarks
from ...connect.cache import FleetView
from ...connect.codec import json_string
from ...fleet.text import shown
from ..deps import StoreDep
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ErrorBody
from ..shared_answers import Render
from .connectors import shared_answer

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/fleet/health", response_model=dict[str, str | None], responses={404: {"model": ErrorBody}, 503: {
    "model": ErrorBody, "description": "As many answers about the whole fleet as allowed are being built: "
                                       "Retry-After says when to try again."}})
async def fleet_health(request: Request, store: StoreDep, connector: Annotated[str | None, Query(
        description="One connector; none: every connector with a status.")] = None) -> Response:
    """Connectors' health words, by name: HEALTHY, DEGRADED, UNHEALTHY, PAUSED or STOPPED (tasks on a worker gone from
    the Connect group count as not running); null for a connector with tasks' statuses only. Every connector's is
    built off the event loop and shared, as ``GET /fleet`` is, its names cut as ``GET /fleet`` cuts them."""
    actions: Actions | None = request.app.state.actions
    if actions is None:
        raise ApiError(503, "The status store is not running")
    if connector is not None:
        if store.cache.get_connector(connector) is None and not store.cache.task_numbers(connector):
            raise ApiError(404, f"No status found for connector {connector}")
        word = actions.health_of(connector)
        return ConnectJSONResponse({connector: word.value if word is not None else None})

    def prepare() -> Render:
        view, marks = store.cache.view(), actions.marks(restarts=False)
        return lambda: health_text(view, marks)

    # Only a change of the group's workers or of their health changes a health word beside the statuses (restarts do
    # not).
    return await shared_answer(request, "health", None, store, None, prepare,
                               lambda: actions.workers_version)


def health_text(view: FleetView, marks: FleetMarks) -> Iterator[str]:
    """``GET /fleet/health``'s answer in pieces of JSON text, by name as every view of the fleet shows it (cut to a
    bound, ``text.shown``: a name may be as long as a record; on a thread)."""
    yield "{"
    separator = ""
    for name, word in marks.healths(view):
        yield f'{separator}{json_string(shown(name))}:{"null" if word is None else json_string(word.value)}'
        separator = ","
    yield "}"
