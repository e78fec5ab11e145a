"""Updates waiting for their next attempt, and updates parked after their last one."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from ..deps import StoreDep
from ..responses import ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ParkedUpdate, PendingRetry

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


@router.get("/retries", response_model=list[PendingRetry])
async def pending_retries(store: StoreDep) -> ConnectJSONResponse:
    """Updates waiting for a retry, soonest first: key, attempts so far, next attempt, last error."""
    now = asyncio.get_running_loop().time()
    return ConnectJSONResponse([
        {"key": u.key, "kind": u.kind, "attempts": u.attempts,
         "next_attempt_in_seconds": round(max(0.0, (u.due or now) - now), 3),
         "last_error": str(u.last_error) if u.last_error is not None else None}
        for u in store.queue.waiting_retries()
    ])


@router.get("/retries/parked", response_model=list[ParkedUpdate])
async def parked_updates(store: StoreDep) -> ConnectJSONResponse:
    """Updates that ran out of retries and are parked until Kafka takes writes again, oldest first."""
    return ConnectJSONResponse([
        {"key": u.key, "kind": u.kind, "attempts": u.attempts,
         "last_error": str(u.last_error) if u.last_error is not None else None}
        for u in store.parked()
    ])
