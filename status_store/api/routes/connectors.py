"""Connector and task statuses: Connect's read endpoints and the sidecar's write endpoints."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...model import ConnectorStatus, State, Status, TaskId, TaskStatus, status_key
from ...retry_queue import StatusUpdate
from ...store import StatusStore
from ..deps import StoreDep, TaskDep, WaitDep, answer, checked_name
from ..responses import ApiError, ConnectJSONResponse
from ..routing import ConnectRoute
from ..schemas import ConnectorStateInfo, ConnectorStatusBody, ErrorBody, StatusBody, TaskState, WriteResponse

router = APIRouter(tags=["connectors"], route_class=ConnectRoute)


def _error(description: str, **extra: Any) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description, **extra}


NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _error("No such status, or a path that addresses no resource")}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("The body is not JSON, or a name is not one Connect accepts"),
    401: _error("The bearer token is missing or wrong (checked before the body is read)"),
    404: _error("The path addresses no resource (e.g. a task number that is not canonical decimal)"),
    408: _error("The body did not arrive in time"),
    409: _error("put_safe: Connect's rules keep another worker's newer status"),
    413: _error("The body, or the status record it makes, is too large; nothing was accepted"),
    415: _error("The body is not application/json"),
    422: _error("The body does not fit the schema (including text that is not valid Unicode)"),
    503: _error("Too many updates are pending (Retry-After says when to try again; nothing was accepted), "
                "the store is not running, or with ?wait=true Kafka refused the write",
                headers={"Retry-After": {"description": "Seconds to wait before trying again, when too many "
                                                        "updates are pending", "schema": {"type": "integer"}}}),
    504: _error("With ?wait=true: not durable within timeout_ms (the write is still being retried)"),
}


def state(status: Status) -> dict[str, Any]:
    """A status in Connect's shape: state, worker_id, and trace only when there is one."""
    body: dict[str, Any] = {"state": status.state.value, "worker_id": status.worker_id}
    if status.trace:
        body["trace"] = status.trace
    return body


def task_state(status: TaskStatus) -> dict[str, Any]:
    """A task status in Connect's shape."""
    return {"id": status.id.task, **state(status)}


def connector_state_info(store: StatusStore, name: str) -> dict[str, Any] | None:
    """Connect's ``ConnectorStateInfo``; None when the connector has no visible status."""
    status = store.get_connector(name)
    if status is None or status.state is State.DESTROYED:
        return None
    tasks = [task_state(t) for t in store.get_all_tasks(name) if t.state is not State.DESTROYED]
    return {"name": name, "connector": state(status), "tasks": tasks, "type": store.connector_type(name)}


@router.get("/connectors", response_model=list[str] | dict[str, dict[str, ConnectorStateInfo]])
async def list_connectors(store: StoreDep, expand: Annotated[list[str], Query()] = []) -> ConnectJSONResponse:  # noqa: B006
    """Connectors with a status; ``?expand=status`` adds each one's status (other expansions are ignored)."""
    names = store.connectors()
    if "status" not in expand:
        return ConnectJSONResponse(names)
    expanded = {}
    for name in names:
        info = connector_state_info(store, name)
        if info is not None:
            expanded[name] = {"status": info}
    return ConnectJSONResponse(expanded)


@router.get("/connectors/{name}/status", response_model=ConnectorStateInfo, responses=NOT_FOUND)
async def connector_status(name: str, store: StoreDep) -> ConnectJSONResponse:
    """The connector's status and its tasks', as Connect answers it."""
    info = connector_state_info(store, checked_name(name))
    if info is None:
        raise ApiError(404, f"No status found for connector {name}")
    return ConnectJSONResponse(info)


@router.get("/connectors/{name}/tasks/{task}/status", response_model=TaskState, responses=NOT_FOUND)
async def task_status(name: str, task: TaskDep, store: StoreDep) -> ConnectJSONResponse:
    """One task's status, as Connect answers it."""
    status = store.get_task(TaskId(checked_name(name), task))
    if status is None or status.state is State.DESTROYED:
        raise ApiError(404, f"No status found for task {name}-{task}")
    return ConnectJSONResponse(task_state(status))


def submit(store: StatusStore, status: Status, safe: bool, connector_type: str | None = None) -> StatusUpdate | None:
    """put, or put_safe (None when Connect's rules drop it). A connector's type hint is kept only once its
    write is accepted: a refused write changes nothing."""
    update = store.put_safe(status) if safe else store.put(status)
    if update is not None and connector_type is not None and isinstance(status, ConnectorStatus):
        store.set_connector_type(status.connector, connector_type)
    return update


def submit_one(store: StatusStore, status: Status, safe: bool, connector_type: str | None = None) -> StatusUpdate:
    """``submit`` for a single write: a put_safe that Connect's rules drop is a 409."""
    update = submit(store, status, safe, connector_type)
    if update is None:
        raise ApiError(409, f"Not written: {status_key(status)} has a newer status from another worker "
                            "(put_safe writes only over its own worker's or an older generation's status)")
    return update


@router.put("/connectors/{name}/status", status_code=202, response_model=WriteResponse, responses=WRITE_ERRORS)
async def put_connector_status(name: str, body: ConnectorStatusBody, store: StoreDep, params: WaitDep,
                               safe: bool = False) -> ConnectJSONResponse:
    """Write a connector's status (``?safe=true``: Connect's put_safe). 202 at once, or wait with ``?wait=true``."""
    status = ConnectorStatus(checked_name(name), body.state, body.worker_id, body.generation, body.trace)
    return await answer(store, [submit_one(store, status, safe, body.type)], params)


@router.put("/connectors/{name}/tasks/{task}/status", status_code=202, response_model=WriteResponse,
            responses=WRITE_ERRORS)
async def put_task_status(name: str, task: TaskDep, body: StatusBody, store: StoreDep, params: WaitDep,
                          safe: bool = False) -> ConnectJSONResponse:
    """Write a task's status (``?safe=true``: Connect's put_safe). 202 at once, or wait with ``?wait=true``."""
    if body.state is State.STOPPED:
        raise ApiError(422, "STOPPED is a connector state; a task cannot be STOPPED")
    status = TaskStatus(TaskId(checked_name(name), task), body.state, body.worker_id, body.generation, body.trace)
    return await answer(store, [submit_one(store, status, safe)], params)


@router.delete("/connectors/{name}", status_code=202, response_model=WriteResponse, responses=WRITE_ERRORS)
async def delete_connector(name: str, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Delete a connector's statuses: tombstones for its tasks, then for the connector."""
    return await answer(store, store.delete_connector(checked_name(name)), params)
