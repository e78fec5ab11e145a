"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from ..store import StatusStore


def get_store(request: Request) -> StatusStore:
    """The running store of this app."""
    store: StatusStore | None = request.app.state.store
    if store is None:
        raise HTTPException(status_code=503, detail="the status store is not running")
    return store


StoreDep = Annotated[StatusStore, Depends(get_store)]
