"""``GET /events``: status changes as Server-Sent Events, as they are read from the status topic."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.types import Message, Receive, Scope, Send

from ...fleet.event import EventIdTooOld
from ...fleet.events import StatusEvents, Subscription, TooManySubscribers
from ..responses import ApiError
from ..routing import ConnectRoute
from ..schemas import ErrorBody

router = APIRouter(tags=["operations"], route_class=ConnectRoute)

HEARTBEAT = b": heartbeat\n\n"
EVENT_STREAM = "text/event-stream"
# Seconds a client refused for the subscriber bound is told to wait.
RETRY_AFTER_S = 10

DESCRIPTION = """Each status record read from the status topic, as Server-Sent Events (`text/event-stream`):

- `event: status`: a connector's, task's or topic's status was written; `data` is JSON with `kind`
  (`connector`, `task`, `topic`), `connector`, `task` or `topic`, `state`, `worker_id`, `generation`, `trace`
  (its first line), or for a topic `task` and `discover_timestamp`; and `partition`, `offset`, `timestamp`;
- `event: deleted`: a tombstone (the same fields, without the status);
- `event: error`: the stream ends: this client fell too far behind and was dropped, its stream reached its time
  bound (`sidecar.events.stream.max.ms`), or another client took its place at the subscriber bound (then its
  message asks to reconnect with the id of the last event received); or the server stops.

Each event's `id` says how far the stream has come (for each partition, the offset of the last record
read: `0:12,1:40`): reconnect with it in `Last-Event-ID` to get every event after it, none twice. An id
older than the events kept is answered 410: read the statuses anew (`GET /connectors?expand=status`) and
subscribe without one. A comment line is sent when nothing else was for `sidecar.events.heartbeat.ms`."""


@router.get("/events", response_class=Response, description=DESCRIPTION, responses={
    200: {"content": {EVENT_STREAM: {"schema": {"type": "string"}}}, "description": "The stream of events."},
    400: {"model": ErrorBody, "description": "A malformed Last-Event-ID: empty, not partition:offset,... in ASCII "
                                            "digits, a partition named twice, or a partition or offset this stream "
                                            "has not read (an id of another topic, or of this one before it was "
                                            "deleted and made again): read the current statuses and subscribe "
                                            "without one."},
    410: {"model": ErrorBody, "description": "A Last-Event-ID older than the events kept."},
    503: {"model": ErrorBody, "description": "As many clients as allowed are subscribed "
                                             "(sidecar.events.subscribers.max), none long enough to give its place: "
                                             "try again after Retry-After."}})
async def events(request: Request, connector: Annotated[str | None, Query(
                     description="Only this connector's events (its own, its tasks' and its topics').")] = None,
                 last_event_id: Annotated[str | None, Header(
                     description="The id of the last event received: the stream resumes after it.")] = None,
                 ) -> Response:
    """Status changes as they are read, from now or after ``Last-Event-ID``."""
    hub: StatusEvents | None = request.app.state.events
    if hub is None:
        raise ApiError(503, "The status store is not running")
    if last_event_id is not None and not last_event_id:
        # A header sent empty (or blank: the server strips it) would otherwise read as none, from now.
        raise ApiError(400, "Invalid Last-Event-ID: empty (leave the header out to subscribe from now)")
    try:
        subscription = hub.subscribe(connector, last_event_id)
    except ValueError as e:
        raise ApiError(400, f"Invalid Last-Event-ID: {e}") from None
    except EventIdTooOld as e:
        raise ApiError(410, f"Cannot resume after Last-Event-ID: {e}. Read the current statuses "
                            "(GET /connectors?expand=status) and subscribe without Last-Event-ID.") from None
    except TooManySubscribers as e:
        # The connection goes with the answer: the client comes back later on a new one.
        raise ApiError(503, f"Not subscribed, try again in {RETRY_AFTER_S} s: {e}",
                       {"Retry-After": str(RETRY_AFTER_S), "Connection": "close"}) from None
    return EventStream(hub, subscription, request.app.state.events_heartbeat_s)


def error_frame(message: str) -> bytes:
    return f"event: error\ndata: {json.dumps({'message': message})}\n\n".encode()


# What ends a stream: the client going away, the subscription ending.
Stops = tuple["asyncio.Future[Any]", ...]
# How long the last event (the error that ends a stream) may take to send before the connection is closed.
FAREWELL_S = 1.0


class EventStream(Response):
    """The response of one subscriber: its backlog, then live events, heartbeats between, until it ends.

    Every send races the end of the subscription: a client that does not read (the send waits for room in
    the connection's buffer) is let go as soon as the hub drops it, and the event loop never waits for it.
    """

    media_type = EVENT_STREAM

    def __init__(self, hub: StatusEvents, subscription: Subscription, heartbeat_s: float) -> None:
        # The connection ends with the stream: a client reconnects anew, it never sends a next request on it.
        super().__init__(media_type=EVENT_STREAM, headers={"cache-control": "no-cache", "x-accel-buffering": "no",
                                                           "connection": "close"})
        # A stream has no length: the body is sent in chunks.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._hub = hub
        self._subscription = subscription
        self._heartbeat_s = heartbeat_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub, subscription = self._hub, self._subscription
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(receive))
        # A client gone ends its subscription: the wait for its next events ends at once.
        gone.add_done_callback(lambda _: hub.unsubscribe(subscription))
        ended: asyncio.Future[Any] = asyncio.ensure_future(subscription.ended.wait())
        stops: Stops = (gone, ended)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            # A first line at once, so that the client knows it is subscribed.
            if not await _send(send, b": subscribed\n\n", stops):
                return
            while (chunk := await hub.next_chunk(subscription, self._heartbeat_s)) is not None:
                if not await _send(send, chunk or HEARTBEAT, stops):
                    break
            if gone.done():
                return
            if await _send(send, error_frame(subscription.reason.value), (gone,), FAREWELL_S):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()
            ended.cancel()
            hub.unsubscribe(subscription)


async def _send(send: Send, body: bytes, stops: Stops, timeout: float | None = None) -> bool:
    """Send a chunk of the body; False when a stop came first or the time ran out (the send is let go)."""
    if any(stop.done() for stop in stops):
        return False
    chunk = {"type": "http.response.body", "body": body, "more_body": True}
    sending: asyncio.Future[Any] = asyncio.ensure_future(send(chunk))
    await asyncio.wait({sending, *stops}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if sending.done():
        sending.result()
        return True
    sending.cancel()
    return False


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return
