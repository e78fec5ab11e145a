"""Updates waiting for their next attempt, and updates parked after their last one, a page at a time."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request

from ...retry.updates import StatusUpdate
from ..deps import StoreDep
from ..responses import ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ParkedUpdate, PendingRetry

router = APIRouter(tags=["operations"], route_class=ConnectRoute)
T = TypeVar("T")
DEFAULT_PAGE = 100
MAX_PAGE = 1000
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"Items per page (at most {MAX_PAGE}).")]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1, description="Items to skip.")]
PAGED = ("A page of the list: `X-Total-Count` says how many there are in all, and a `Link` header with "
         '`rel="next"` gives the next page while there is one.')


def _page(request: Request, items: list[dict[str, Any]], total: int, limit: int, offset: int) -> ConnectJSONResponse:
    headers = {"X-Total-Count": str(total)}
    if offset + limit < total:
        headers["Link"] = f'<{request.url.path}?limit={limit}&offset={offset + limit}>; rel="next"'
    return ConnectJSONResponse(items, headers=headers)


def _window(items: Iterable[T], key: Callable[[T], float], limit: int, offset: int) -> list[T]:
    """Items ``offset`` to ``offset + limit`` in the order of ``key``, without sorting them all."""
    return heapq.nsmallest(offset + limit, items, key=key)[offset:]


def _last_error(update: StatusUpdate) -> str | None:
    return str(update.last_error) if update.last_error is not None else None


@router.get("/retries", response_model=list[PendingRetry], description=PAGED)
async def pending_retries(request: Request, store: StoreDep, limit: Limit = DEFAULT_PAGE,
                          offset: Offset = 0) -> ConnectJSONResponse:
    """Updates waiting for their next attempt, soonest first: key, attempts so far, when the next attempt may
    go, whether the update waits in a held partition, the last error."""
    queue = store.queue
    now = asyncio.get_running_loop().time()
    waiting = queue.waiting_retries_unsorted()
    page = _window(waiting, queue.next_attempt, limit, offset)
    return _page(request, [
        {"key": u.key, "kind": u.kind, "attempts": u.attempts,
         "next_attempt_in_seconds": round(max(0.0, queue.next_attempt(u) - now), 3),
         "held": queue.waits_in_line(u), "last_error": _last_error(u)}
        for u in page
    ], len(waiting), limit, offset)


@router.get("/retries/parked", response_model=list[ParkedUpdate], description=PAGED)
async def parked_updates(request: Request, store: StoreDep, limit: Limit = DEFAULT_PAGE,
                         offset: Offset = 0) -> ConnectJSONResponse:
    """Updates that ran out of retries and are parked until their partition takes writes again, oldest first in
    each partition."""
    parked = store.queue.parked()
    return _page(request, [
        {"key": u.key, "kind": u.kind, "attempts": u.attempts, "last_error": _last_error(u)}
        for u in parked[offset:offset + limit]
    ], len(parked), limit, offset)
