"""Topics a connector uses (KIP-558): Connect's read and reset endpoints, and the sidecar's writes.

``reset`` is a legal Kafka topic name, so ``PUT /connectors/{name}/topics/reset`` is both Connect's
reset and the write of the topic named ``reset``. The body tells them apart: without a body (as
Connect's clients send it) it is the reset; with one it records the topic ``reset``, exactly as
``PUT /connectors/{name}/topics/{topic}`` does, and a body that is not a valid topic status is
refused (400/422), never ignored.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ...connect.model import TopicStatus
from ...store import StatusStore
from ..deps import StoreDep, WaitDep, answer, checked_name, checked_topic
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ErrorBody, TopicStatusBody, WriteResponse
from .connectors import WRITE_ERRORS

router = APIRouter(tags=["topics"], route_class=ConnectRoute)

RESET = "reset"
TRACKING_DISABLED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "topic.tracking.enable=false: Connect's `Topic tracking is disabled.`"}}


def check_tracking(store: StatusStore, reset: bool = False) -> None:
    """Connect's 403 when topic tracking is off (``topic.tracking.enable=false``), or when a reset is asked and
    resets are off (``topic.tracking.allow.reset=false``), in Connect's order."""
    if not store.config.topic_tracking:
        raise ApiError(403, "Topic tracking is disabled.")
    if reset and not store.config.topic_tracking_reset:
        raise ApiError(403, "Topic tracking reset is disabled.")


@router.get("/connectors/{name}/topics", response_model=dict[str, dict[str, list[str]]], responses=TRACKING_DISABLED)
async def connector_topics(name: str, store: StoreDep) -> ConnectJSONResponse:
    """The topics the connector has used; an unknown connector has none."""
    check_tracking(store)
    # The names the values hold, each once: Connect collects them in a set (records other writers left may
    # repeat a name under different keys).
    topics = list(dict.fromkeys(status.topic for status in store.cache.get_all_topics(name)))
    return ConnectJSONResponse({name: {"topics": topics}})


async def write_topic(store: StoreDep, name: str, topic: str, body: TopicStatusBody,
                      params: WaitDep) -> ConnectJSONResponse:
    """Record that a connector's task uses a topic."""
    check_tracking(store)
    timestamp = body.discoverTimestamp if body.discoverTimestamp is not None else int(time.time() * 1000)
    status = TopicStatus(checked_topic(topic), checked_name(name), body.task, timestamp)
    return await answer(store, [store.put_topic(status)], params)


@router.put(
    "/connectors/{name}/topics/reset", status_code=202, response_class=Response, responses={
        **WRITE_ERRORS,
        403: {"model": ErrorBody, "description": "topic.tracking.enable=false (Connect's `Topic tracking is "
                                                 "disabled.`), or, for the reset, topic.tracking.allow.reset=false "
                                                 "(Connect's `Topic tracking reset is disabled.`)"},
        202: {"description": "Without a body: the reset is accepted, with an empty body as Connect answers. With a "
                             "body: the write of the topic named `reset` is accepted (a WriteResponse)."},
        200: {"description": "With ?wait=true: every update is durable.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WriteResponse"}}}},
    },
    openapi_extra={"requestBody": {
        "required": False,
        "description": "Absent for Connect's reset. Present: the status of the topic named `reset`.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TopicStatusBody"}}},
    }},
)
async def reset_connector_topics(name: str, request: Request, store: StoreDep, params: WaitDep) -> Response:
    """Without a body, Connect's reset: forget every topic the connector has used (tombstones), 202 with an
    empty body (``?wait=true``: 200 with the results once durable). With a body, the write of the topic
    named ``reset``, as ``PUT /connectors/{name}/topics/{topic}``."""
    raw = await request.body()
    if raw:
        try:
            body = TopicStatusBody.model_validate_json(raw)
        except ValidationError as e:
            raise RequestValidationError(e.errors(include_url=False)) from None
        return await write_topic(store, name, RESET, body, params)
    check_tracking(store, reset=True)
    accepted = await answer(store, store.reset_topics(checked_name(name)), params)
    return accepted if params.wait else Response(status_code=202)


@router.put("/connectors/{name}/topics/{topic}", status_code=202, response_model=WriteResponse,
            responses={**WRITE_ERRORS, **TRACKING_DISABLED})
async def put_topic(name: str, topic: str, body: TopicStatusBody, store: StoreDep,
                    params: WaitDep) -> ConnectJSONResponse:
    """Record that a connector's task uses a topic (``discoverTimestamp`` defaults to now, in ms). For the
    topic named ``reset`` this route is ``PUT /connectors/{name}/topics/reset`` with a body."""
    return await write_topic(store, name, topic, body, params)


@router.delete("/connectors/{name}/topics/{topic}", status_code=202, response_model=WriteResponse,
               responses={**WRITE_ERRORS, **TRACKING_DISABLED})
async def delete_topic(name: str, topic: str, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Forget that a connector uses a topic (a tombstone)."""
    check_tracking(store)
    return await answer(store, [store.delete_topic(checked_name(name), checked_topic(topic))], params)
