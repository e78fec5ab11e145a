"""Many status updates in one request."""

from __future__ import annotations

import time

from fastapi import APIRouter

from ...model import ConnectorStatus, State, TaskId, TaskStatus, TopicStatus
from ...retry_queue import StatusUpdate
from ...store import StatusStore
from ..deps import StoreDep, WaitDep, WriterDep, answer, checked_name, checked_topic
from ..responses import ApiError, ConnectJSONResponse
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
from .connectors import WRITE_ERRORS

router = APIRouter(tags=["statuses"])


def check(item: BatchItem) -> None:
    """Refuse an item the API would refuse on its own endpoint."""
    checked_name(item.connector)
    if isinstance(item, TopicUpdate | TopicDeletion):
        checked_topic(item.topic)
    if isinstance(item, TaskUpdate) and item.state is State.STOPPED:
        raise ApiError(422, f"Task {item.connector}-{item.task}: a task cannot be STOPPED")


def apply(store: StatusStore, item: BatchItem, now_ms: int) -> list[StatusUpdate]:
    """Submit one checked item; a put_safe that Connect's rules drop submits nothing."""
    if isinstance(item, ConnectorUpdate):
        if item.type is not None:
            store.set_connector_type(item.connector, item.type)
        connector = ConnectorStatus(item.connector, item.state, item.worker_id, item.generation, item.trace)
        update = store.put_safe(connector) if item.safe else store.put(connector)
        return [update] if update is not None else []
    if isinstance(item, TaskUpdate):
        task = TaskStatus(TaskId(item.connector, item.task), item.state, item.worker_id, item.generation, item.trace)
        update = store.put_safe(task) if item.safe else store.put(task)
        return [update] if update is not None else []
    if isinstance(item, TopicUpdate):
        timestamp = item.discoverTimestamp if item.discoverTimestamp is not None else now_ms
        return [store.put_topic(TopicStatus(item.topic, item.connector, item.task, timestamp))]
    if isinstance(item, ConnectorDeletion):
        return store.delete_connector(item.connector)
    assert isinstance(item, TopicDeletion)
    return [store.delete_topic(item.connector, item.topic)]


@router.post("/statuses", status_code=202, response_model=WriteResponse, responses=WRITE_ERRORS,
             dependencies=[WriterDep])
async def post_statuses(batch: StatusBatch, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Submit many updates in order. Every item is checked before any is submitted, so a bad item
    rejects the whole batch. put_safe items that Connect's rules drop are left out of the results."""
    for item in batch.updates:
        check(item)
    now_ms = int(time.time() * 1000)
    updates = [update for item in batch.updates for update in apply(store, item, now_ms)]
    return await answer(store, updates, params)
