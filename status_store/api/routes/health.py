"""``GET /fleet/health``: each connector's health word (docs/operations.md), for ``status-store status`` and scripts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from ...act.actions import Actions
from ..deps import StoreDep
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ErrorBody

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/fleet/health", response_model=dict[str, str | None], responses={404: {"model": ErrorBody}})
async def fleet_health(request: Request, store: StoreDep, connector: Annotated[str | None, Query(
        description="One connector; none: every connector with a status.")] = None) -> ConnectJSONResponse:
    """Connectors' health words, by name: HEALTHY, DEGRADED, UNHEALTHY, PAUSED or STOPPED (tasks on a worker gone from
    the Connect group count as not running); null for a connector with tasks' statuses only."""
    actions: Actions | None = request.app.state.actions
    if actions is None:
        raise ApiError(503, "The status store is not running")
    if connector is not None:
        if store.cache.get_connector(connector) is None and not store.cache.task_numbers(connector):
            raise ApiError(404, f"No status found for connector {connector}")
        word = actions.health_of(connector)
        return ConnectJSONResponse({connector: word.value if word is not None else None})
    words = actions.healths(actions.statuses())
    return ConnectJSONResponse({name: word.value if word is not None else None for name, word in sorted(words.items())})
