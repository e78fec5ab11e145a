"""The spool (``status.storage.spool.path``): its state, and the acknowledgement of accepted writes a start found
lost (``GET /ready`` says ``degraded`` until then)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ...durable.spool import Spool
from ...durable.spool_tally import SpoolLoss
from ...store import StatusStore
from ..deps import StoreDep
from ..responses import ApiError
from ..routing import ConnectRoute
from ..schemas import ErrorBody

router = APIRouter(tags=["operations"], route_class=ConnectRoute)


class SpoolLossBody(BaseModel):
    """Accepted writes a start did not find in the spool."""

    detected_at: str = Field(description="When the start found them missing (UTC)")
    lost_at_least: int = Field(description="Accepted writes lost for sure")
    lost_at_most: int | None = Field(description="Accepted writes that may be lost (null: not known)")
    expected_rows: int | None = Field(description="Rows the spool held at its last commit, by its tally")
    found_rows: int = Field(description="Rows the start found")
    expected_high: int | None = Field(description="The highest write number the spool had taken, by its tally")
    found_high: int = Field(description="The highest write number the start found in the file")
    reason: str
    description: str


class SpoolState(BaseModel):
    """``GET /spool``."""

    path: str
    writable: bool
    failure: str | None = Field(description="Why the spool cannot be written (null while it can)")
    rows: int = Field(description="Updates the spool holds on disk")
    unwritten_changes: int = Field(description="Changes kept in memory until a commit writes them")
    losses: list[SpoolLossBody] = Field(description="Accepted writes found lost at a start, not yet acknowledged")


def _spool(store: StatusStore) -> Spool:
    if store.spool is None:
        raise ApiError(404, "No spool is configured (status.storage.spool.path)")
    return store.spool


def _body(loss: SpoolLoss) -> SpoolLossBody:
    return SpoolLossBody(detected_at=loss.detected_at, lost_at_least=loss.at_least, lost_at_most=loss.at_most,
                         expected_rows=loss.expected_rows, found_rows=loss.found_rows,
                         expected_high=loss.expected_high, found_high=loss.found_high, reason=loss.reason,
                         description=loss.describe())


@router.get("/spool", response_model=SpoolState, responses={404: {"model": ErrorBody}})
async def spool_state(store: StoreDep) -> SpoolState:
    """The spool's state: whether it takes writes, what it holds, and accepted writes a start found lost."""
    spool = _spool(store)
    return SpoolState(path=str(spool.path), writable=spool.writable, failure=spool.failure, rows=spool.rows,
                      unwritten_changes=spool.unwritten_changes, losses=[_body(loss) for loss in spool.losses])


@router.delete("/spool/loss", response_model=list[SpoolLossBody], responses={
    401: {"model": ErrorBody}, 404: {"model": ErrorBody, "description": "No spool, or no loss to acknowledge"}})
async def acknowledge_spool_loss(store: StoreDep) -> list[SpoolLossBody]:
    """Acknowledge the accepted writes a start found lost (an operator has handled them): they are no longer
    reported, and ``GET /ready`` says ``ready`` again. Needs the bearer token when one is configured. Answers what was
    acknowledged."""
    acknowledged = _spool(store).acknowledge_losses()
    if not acknowledged:
        raise ApiError(404, "The spool has no lost writes to acknowledge")
    return [_body(loss) for loss in acknowledged]
