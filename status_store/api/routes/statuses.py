"""Many status updates in one request."""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

from fastapi import APIRouter

from ...connect.model import ConnectorStatus, State, Status, TaskId, TaskStatus, TopicStatus, status_key, topic_key
from ...retry.updates import StatusUpdate
from ...store import StatusStore
from ..deps import StoreDep, WaitDep, answer, checked_name, checked_topic, direct_write_arguments
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute, served_directly
from ..schemas import (
    BatchItem,
    ConnectorDeletion,
    ConnectorUpdate,
    StatusBatch,
    TaskUpdate,
    TopicDeletion,
    TopicUpdate,
    WriteResponse,
)
from .connectors import WRITE_ERRORS, submit
from .topics import TRACKING_DISABLED, check_tracking

router = APIRouter(tags=["statuses"], route_class=ConnectRoute)


class StatusWrite(NamedTuple):
    """A connector or task status to put (or put_safe), with the connector's type hint. A named tuple rather
    than a frozen dataclass: one is made per batch item, and a frozen dataclass costs three times as much."""

    status: Status
    safe: bool
    connector_type: str | None = None


class TopicRemoval(NamedTuple):
    """A topic status to delete."""

    connector: str
    topic: str


Write = StatusWrite | TopicStatus | TopicRemoval | str  # a str: the connector to delete


def build(item: BatchItem, now_ms: int) -> Write:
    """The write an item asks for, refused (4xx) as the item's own endpoint would refuse it."""
    # The commonest kinds first.
    if isinstance(item, TaskUpdate):
        if item.state is State.STOPPED:
            raise ApiError(422, f"Task {item.connector}-{item.task}: a task cannot be STOPPED")
        task = TaskStatus(TaskId(checked_name(item.connector), item.task), item.state, item.worker_id,
                          item.generation, item.trace, item.plugin_version())
        return StatusWrite(task, item.safe)
    if isinstance(item, ConnectorUpdate):
        connector = ConnectorStatus(checked_name(item.connector), item.state, item.worker_id, item.generation,
                                    item.trace, item.plugin_version())
        return StatusWrite(connector, item.safe, item.type)
    if isinstance(item, TopicUpdate):
        timestamp = item.discoverTimestamp if item.discoverTimestamp is not None else now_ms
        return TopicStatus(checked_topic(item.topic), checked_name(item.connector), item.task, timestamp)
    if isinstance(item, TopicDeletion):
        return TopicRemoval(checked_name(item.connector), checked_topic(item.topic))
    assert isinstance(item, ConnectorDeletion)
    return checked_name(item.connector)


def keys(store: StatusStore, write: Write) -> list[str]:
    """The keys a built write writes."""
    if isinstance(write, StatusWrite):
        return [status_key(write.status)]
    if isinstance(write, TopicStatus | TopicRemoval):
        return [topic_key(write.connector, write.topic)]
    return store.deletion_keys(write)


def apply(store: StatusStore, write: Write) -> list[StatusUpdate]:
    """Submit one built write; a put_safe that Connect's rules drop submits nothing."""
    if isinstance(write, StatusWrite):
        update = submit(store, write.status, write.safe, write.connector_type)
        return [update] if update is not None else []
    if isinstance(write, TopicStatus):
        return [store.put_topic(write)]
    if isinstance(write, TopicRemoval):
        return [store.delete_topic(write.connector, write.topic)]
    return store.delete_connector(write)


@router.post("/statuses", status_code=202, response_model=WriteResponse,
             responses={**WRITE_ERRORS, **TRACKING_DISABLED})
@served_directly(partial(direct_write_arguments, body_name="batch", body_type=StatusBatch))
async def post_statuses(batch: StatusBatch, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Submit many updates in order, all or nothing: every item is built and checked before any is
    submitted, so a bad item rejects the whole batch. put_safe items that Connect's rules drop are left
    out of the results."""
    now_ms = int(time.time() * 1000)
    writes = [build(item, now_ms) for item in batch.updates]
    if any(isinstance(write, TopicStatus | TopicRemoval) for write in writes):
        check_tracking(store)
    # The store's own refusals too, before anything is submitted: a record that cannot fit, a full queue.
    for write in writes:
        if isinstance(write, StatusWrite):
            store.record_limit.check_status(write.status)
    store.check_room([key for write in writes for key in keys(store, write)])
    updates = [update for write in writes for update in apply(store, write)]
    return await answer(store, updates, params)
