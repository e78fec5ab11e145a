"""A stock Connect worker's status writes, handed over by its agent (``status_store.agents``; agent/PROTOCOL.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError

from ...agents import EXPIRED, FORGOTTEN_REASON, LEASE_ENDING_MS, AgentSession, AgentSessions, Pending
from ...connect.model import (
    INT32_MAX,
    INT32_MIN,
    UNVERSIONED,
    ConnectorStatus,
    State,
    Status,
    TaskId,
    TaskStatus,
    TopicStatus,
    status_key,
    topic_key,
)
from ...errors import RecordTooLargeError
from ...retry.updates import StatusUpdate
from ...store import StatusStore
from ..deps import StoreDep, common_write
from ..responses import ApiError, ConnectJSONResponse, connect_json
from ..routing import ConnectRoute, served_directly
from ..schemas import Text

router = APIRouter(tags=["agent"], route_class=ConnectRoute)

MAX_UPDATES = 10_000
# The longest an answer waits for the session's outcomes (``wait_ms``), well inside the agent's read timeout.
MAX_WAIT_MS = 1_000
# An answer with more items than this is encoded off the event loop (a thread), not holding every other request.
OFF_LOOP_ITEMS = 200
Seq = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
JavaInt = Annotated[StrictInt, Field(ge=INT32_MIN, le=INT32_MAX)]


async def get_agents(request: Request) -> AgentSessions:
    """The agent sessions of this app."""
    agents: AgentSessions = request.app.state.agents
    return agents


AgentsDep = Annotated[AgentSessions, Depends(get_agents)]


class _Item(BaseModel):
    # The agent may send fields a later protocol adds: they are ignored.
    model_config = ConfigDict(extra="ignore")

    seq: Seq


class AgentStatus(_Item):
    """A connector's or task's status, as the worker's ``KafkaStatusBackingStore`` was asked to write it."""

    kind: Literal["connector", "task"]
    connector: Text
    task: JavaInt | None = None
    state: State
    trace: Text | None = None
    worker_id: Text | None = None
    generation: JavaInt
    version: Text | None = Field(default=None, description="KIP-891's plugin version: present (even null) for a "
                                                           "Connect 4.1+ status, absent for a 3.x one")
    safe: bool = False


class AgentTopic(_Item):
    """A topic a connector's task used (``put(TopicStatus)``)."""

    kind: Literal["topic"]
    connector: Text
    topic: Text
    task: JavaInt
    discoverTimestamp: StrictInt


class AgentTopicDeletion(_Item):
    """``deleteTopic(connector, topic)``."""

    kind: Literal["delete_topic"]
    connector: Text
    topic: Text


AgentItem = Annotated[AgentStatus | AgentTopic | AgentTopicDeletion, Field(discriminator="kind")]
_ITEM: TypeAdapter[AgentItem] = TypeAdapter(AgentItem)


class AgentRequest(BaseModel):
    """One request of an agent session: its new updates (maybe none: a poll), and what it has taken in."""

    model_config = ConfigDict(extra="ignore")

    agent: Annotated[Text, Field(min_length=1, max_length=200)]
    worker_id: Text | None = None
    instance: Annotated[Text | None, Field(description=(
        "The sidecar instance the agent hands its writes to (GET /): another instance takes nothing of the request "
        "(409), so a write meant for an instance that may still be writing its session is not taken by its "
        "successor"))] = None
    ack: Annotated[StrictInt, Field(ge=0)] = 0
    lease_ms: Annotated[StrictInt, Field(ge=1, le=3_600_000)] = 10_000
    sent_at_ms: StrictInt | None = None
    final: bool = False
    wait_ms: Annotated[StrictInt, Field(ge=0, le=MAX_WAIT_MS, description=(
        "Answer once every pending write of the session has its outcome, or after this many ms (0: at once)"))] = 0
    updates: Annotated[list[dict[str, Any]], Field(max_length=MAX_UPDATES)] = []


class AgentAnswer(BaseModel):
    """Each update judged alone, the outcomes of earlier ones not yet acknowledged, and (when any) the pending writes
    whose last attempt waited out the write bound without Kafka's answer."""

    instance: str
    accepted: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    timed_out: list[int] | None = None


async def agent_arguments(request: Request) -> dict[str, Any] | None:
    """``agent_statuses``' arguments for a common write (``common_write``: no query parameters, a body that
    validates), read without FastAPI's handler (``served_directly``); None for any other request, which FastAPI's
    handler reads and answers."""
    common = await common_write(request, AgentRequest)
    if common is None:
        return None
    store, body = common
    return {"body": body, "store": store, "agents": request.app.state.agents}


@router.post("/agent/statuses", response_model=AgentAnswer)
@served_directly(agent_arguments)
async def agent_statuses(body: AgentRequest, store: StoreDep, agents: AgentsDep) -> Response:
    """An agent's updates, each judged alone as the worker's own store would (a refused one refuses no other);
    503 (nothing taken) when the store cannot take them now, 409 (nothing taken) when meant for another instance."""
    if body.instance is not None and body.instance != agents.instance:
        raise ApiError(409, f"This is sidecar instance {agents.instance}, not {body.instance}: nothing of the request "
                            "was taken")
    session = agents.session(body.agent)
    session.renew(body.lease_ms, body.sent_at_ms)
    if body.worker_id is not None:
        session.worker_id = body.worker_id
    items = [_parse(raw) for raw in body.updates]
    fresh = {item.seq for item in items if isinstance(item, _Item) and item.seq > session.last_seq}
    # The store's refusals for the whole request first (a full queue, an unwritable spool): nothing is taken.
    store.check_room([key for item in items if isinstance(item, _Item) and item.seq in fresh
                      and (key := _key(item)) is not None])
    accepted = [_accept(store, session, item) for item in items]
    # Counted once: an update sent again after a lost answer is not taken again.
    agents.taken.update(answer["result"] for item, answer in zip(items, accepted, strict=True)
                        if not isinstance(item, _Item) or item.seq in fresh)
    # A final request that arrives after its own lease (held on its way, or by a sidecar that hung) hands nothing
    # over: its agent, finding no answer, has left through the fence and writes those keys through Connect.
    if body.final and not session.final and session.lease() is None:
        session.final = True
        if store.spool is not None:
            # Not the writes of a term that ended: those are the agent's, never sent by this sidecar again.
            for pending in session.pending.values():
                if not pending.term.ended:
                    store.spool.adopt(pending.update)
    session.acknowledge(body.ack)
    if body.lease_ms == LEASE_ENDING_MS and not session.final:
        # The agent leaves: nothing of the session is sent again; what is in flight gets wait_ms to settle, and the keys
        # with nothing in flight then are the agent's at once (``AgentSession.end_lease``).
        await session.end_lease(lambda: _idle(store), body.wait_ms / 1000)
    elif body.wait_ms:
        await session.settling(body.wait_ms / 1000)
    agents.collect(session)
    answer: dict[str, Any] = {"instance": agents.instance, "accepted": accepted, "outcomes": session.outcomes()}
    if timed_out := session.timed_out():
        answer["timed_out"] = timed_out
    if len(accepted) + len(answer["outcomes"]) <= OFF_LOOP_ITEMS:
        return ConnectJSONResponse(answer)
    # Its items are dictionaries no one changes once made: the thread reads them as they are.
    return Response(await asyncio.to_thread(lambda: connect_json(answer).encode()), media_type="application/json")


class AgentWake(BaseModel):
    """An agent's word that it took a write (``seq``) while a request of its session was on its way."""

    model_config = ConfigDict(extra="ignore")

    agent: Annotated[Text, Field(min_length=1, max_length=200)]
    instance: Annotated[Text | None, Field(description="The sidecar instance the agent writes to (GET /): another "
                                                       "instance answers 409")] = None
    seq: Seq


class AgentWoken(BaseModel):
    """Whether the session's answers wait for outcomes no longer, until it takes the write named."""

    woken: bool


async def wake_arguments(request: Request) -> dict[str, Any] | None:
    """``agent_wake``'s arguments for a body that validates, read without FastAPI's handler; None otherwise."""
    try:
        body = AgentWake.model_validate_json(await request.body())
    except ValidationError:
        return None
    return {"body": body, "agents": request.app.state.agents}


@router.post("/agent/wake", response_model=AgentWoken)
@served_directly(wake_arguments)
async def agent_wake(body: AgentWake, agents: AgentsDep) -> Response:
    """The agent took a write (``seq``) while a request of its session was on its way, and holds it for the next
    request: the answer to that request, if it waits for outcomes (``wait_ms``), comes now, so that the write waits a
    round trip, not Kafka's acknowledgement of the writes before it. Nothing else changes: an unknown session, or a
    seq the session took already, is answered ``false``."""
    if body.instance is not None and body.instance != agents.instance:
        raise ApiError(409, f"This is sidecar instance {agents.instance}, not {body.instance}")
    session = agents.find(body.agent)
    return ConnectJSONResponse({"woken": session is not None and session.wake(body.seq)})


def _idle(store: StatusStore) -> Callable[[StatusUpdate], bool]:
    """Whether a write waits for its next attempt (on a timer, or in a held partition's line) or is parked now: no
    attempt of it is in flight."""
    queue = store.queue
    waiting = set(queue.waiting_retries_unsorted())
    return lambda update: update in waiting or queue.is_parked(update)


def _parse(raw: dict[str, Any]) -> _Item | dict[str, Any]:
    """An update, or the answer refusing it (it cannot be read)."""
    try:
        return _ITEM.validate_python(raw)
    except ValidationError as e:
        seq = raw.get("seq")
        if type(seq) is not int:
            raise ApiError(400, "Every update needs its seq (a positive integer)") from None
        problem = e.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        return {"seq": seq, "result": "refused", "error_code": 422, "reason": f"{where}: {problem['msg']}"}


def _status(item: AgentStatus) -> Status:
    version = item.version if "version" in item.model_fields_set else UNVERSIONED
    if item.kind == "connector":
        return ConnectorStatus(item.connector, item.state, item.worker_id, item.generation, item.trace, version)
    if item.task is None:
        raise ValueError("a task status needs its task number")
    return TaskStatus(TaskId(item.connector, item.task), item.state, item.worker_id, item.generation, item.trace,
                      version)


def _key(item: _Item) -> str | None:
    """The key an update writes; None for one that will be refused."""
    if isinstance(item, AgentStatus):
        try:
            return status_key(_status(item))
        except ValueError:
            return None
    assert isinstance(item, AgentTopic | AgentTopicDeletion)
    return topic_key(item.connector, item.topic)


def _accept(store: StatusStore, session: AgentSession, item: _Item | dict[str, Any]) -> dict[str, Any]:
    """Submit one update (once, whatever how often the agent sends it), and say what became of it."""
    if not isinstance(item, _Item):
        return item
    seq = item.seq
    if seq <= session.last_seq:
        # Sent again after an answer was lost: it was taken in already (its outcome, if dropped since, is unknown).
        if seq in session.pending:
            return {"seq": seq, "result": "pending"}
        return session.settled.get(seq, {"seq": seq, "result": EXPIRED, "reason": FORGOTTEN_REASON})
    session.last_seq = seq
    try:
        update = _submit(store, session, item)
    except RecordTooLargeError as e:
        return {"seq": seq, "result": "refused", "error_code": 413, "reason": str(e)}
    except ValueError as e:
        return {"seq": seq, "result": "refused", "error_code": 422, "reason": str(e)}
    if update is None:
        return {"seq": seq, "result": "dropped",
                "reason": "another worker's newer status is in the topic (put_safe, as Connect's store drops it)"}
    session.pending[seq] = Pending(update.key, update, session.term)
    return {"seq": seq, "result": "pending"}


def _submit(store: StatusStore, session: AgentSession, item: _Item) -> StatusUpdate | None:
    if isinstance(item, AgentStatus):
        status = _status(item)
        if item.kind == "task" and status.state is State.STOPPED:
            raise ValueError(f"task {status_key(status)}: a task cannot be STOPPED")
        if item.safe:
            return store.put_safe(status, session.term, writer=session.agent)
        return store.put(status, session.term, writer=session.agent)
    if isinstance(item, AgentTopic):
        return store.put_topic(TopicStatus(item.topic, item.connector, item.task, item.discoverTimestamp),
                               session.term)
    assert isinstance(item, AgentTopicDeletion)
    return store.delete_topic(item.connector, item.topic, session.term)

