"""Topics a connector uses (KIP-558): Connect's read and reset endpoints, and the sidecar's writes."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response

from ...model import TopicStatus
from ..deps import StoreDep, WaitDep, WriterDep, answer, checked_name, checked_topic
from ..responses import ConnectJSONResponse
from ..schemas import TopicStatusBody, WriteResponse
from .connectors import WRITE_ERRORS

router = APIRouter(tags=["topics"])


@router.get("/connectors/{name}/topics", response_model=dict[str, dict[str, list[str]]])
async def connector_topics(name: str, store: StoreDep) -> ConnectJSONResponse:
    """The topics the connector has used; an unknown connector has none."""
    topics = [status.topic for status in store.get_all_topics(checked_name(name))]
    return ConnectJSONResponse({name: {"topics": topics}})


@router.put("/connectors/{name}/topics/reset", status_code=202, response_class=Response,
            responses=WRITE_ERRORS, dependencies=[WriterDep])
async def reset_connector_topics(name: str, store: StoreDep) -> Response:
    """Forget every topic the connector has used (tombstones); 202 with an empty body, as Connect answers."""
    store.reset_topics(checked_name(name))
    return Response(status_code=202)


@router.put("/connectors/{name}/topics/{topic}", status_code=202, response_model=WriteResponse,
            responses=WRITE_ERRORS, dependencies=[WriterDep])
async def put_topic(name: str, topic: str, body: TopicStatusBody, store: StoreDep,
                    params: WaitDep) -> ConnectJSONResponse:
    """Record that a connector's task uses a topic (``discoverTimestamp`` defaults to now, in ms)."""
    timestamp = body.discoverTimestamp if body.discoverTimestamp is not None else int(time.time() * 1000)
    status = TopicStatus(checked_topic(topic), checked_name(name), body.task, timestamp)
    return await answer(store, [store.put_topic(status)], params)


@router.delete("/connectors/{name}/topics/{topic}", status_code=202, response_model=WriteResponse,
               responses=WRITE_ERRORS, dependencies=[WriterDep])
async def delete_topic(name: str, topic: str, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Forget that a connector uses a topic (a tombstone)."""
    return await answer(store, [store.delete_topic(checked_name(name), checked_topic(topic))], params)
