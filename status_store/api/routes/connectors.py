"""Connectors: Connect's read endpoints (statuses; configurations from Connect's config topic when one is
configured) and the sidecar's status write endpoints."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query, Request, Response

from ...connect.cache import StatusReads
from ...connect.codec import ConnectJSON, json_scalar, json_string
from ...connect.configs import ConnectorConfigs, connector_type
from ...connect.failures import failure_json
from ...connect.model import ConnectorStatus, PluginVersion, State, Status, TaskId, TaskStatus, status_key
from ...retry.updates import StatusUpdate
from ...store import StatusStore
from ..deps import (
    ConfigsDep,
    StoreDep,
    TaskDep,
    TaskToReadDep,
    WaitDep,
    answer,
    checked_name,
    direct_write_arguments,
    task_number,
)
from ..responses import ApiError, ConnectJSONResponse, connect_json
from ..routing import ConnectRoute, authenticate, reads_configurations, served_directly
from ..schemas import (
    ConnectorExpansions,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorStatusBody,
    ErrorBody,
    StatusBody,
    TaskInfo,
    TaskState,
    WriteResponse,
)
from ..shared_answers import Prepare, Render, SharedAnswerResponse, SharedAnswers, TooManyBuilds, accepts_gzip

# Routes are tried in the order they are declared here: the status routes (the hot writes among them) first.
router = APIRouter(tags=["connectors"], route_class=ConnectRoute)


def _error(description: str, **extra: Any) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description, **extra}


NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _error("No such status, or a path that addresses no resource")}
NOT_CONFIGURED: dict[int | str, dict[str, Any]] = {
    404: _error("The connector has no configuration in Connect's config topic (always so when config.storage.topic "
                "is unset): Connect's `Connector {name} not found`")}
CONFIG_READ: dict[int | str, dict[str, Any]] = {
    401: _error("Configurations may hold credentials: with sidecar.rest.token set, the bearer token is missing or "
                "wrong")}
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


class Shown(Protocol):
    """What a status shows in Connect's answers: a status, or a value as read."""

    @property
    def state(self) -> State: ...

    @property
    def worker_id(self) -> str | None: ...

    @property
    def trace(self) -> str | None: ...

    @property
    def version(self) -> PluginVersion: ...


def state(status: Shown, failure: bool = False) -> ConnectJSON:
    """A status in Connect 4.x's shape (``ConnectorStateInfo.AbstractState``), as Connect's JSON text: state,
    worker_id, version (KIP-891: null when the status has none, left out when it is ``undefined``, PluginDesc's word
    for a plugin without one), and trace only when there is one. Written directly (a fleet's answer has a million).
    ``failure``: with status-store's own ``failure`` field (``?expand=failure``: why a FAILED one failed, else null)."""
    text = f'{{"state":"{status.state.value}","worker_id":{json_scalar(status.worker_id)}'
    version = status.version
    if version != UNDEFINED_VERSION:
        text += ',"version":' + (json_string(version) if isinstance(version, str) else "null")
    if status.trace:
        text += ',"trace":' + json_string(status.trace)
    if failure:
        text += ',"failure":' + (failure_json(status.trace) if status.state is State.FAILED else "null")
    return ConnectJSON(text + "}")


# What Connect calls a plugin's version when the plugin has none: its REST answers leave such a version out.
UNDEFINED_VERSION = "undefined"


def task_state(task: int, status: Shown, failure: bool = False) -> ConnectJSON:
    """A task's status in Connect's shape (``failure``: with status-store's ``failure`` field)."""
    return ConnectJSON(f'{{"id":{task:d},' + state(status, failure)[1:])


def type_of(reads: StatusReads, class_types: Mapping[str, str], configs: ConnectorConfigs | None, name: str) -> str:
    """The connector's type: from its configuration and the type settings (``class_types``), or what its status writer
    said."""
    config = configs.connector_config(name) if configs is not None else None
    return connector_type(config, class_types, reads.connector_type(name))


def connector_state_info(reads: StatusReads, class_types: Mapping[str, str], configs: ConnectorConfigs | None,
                         name: str, failures: bool = False) -> ConnectJSON | None:
    """Connect's ``ConnectorStateInfo`` (every stored state shown, DESTROYED too, as Connect shows it) as its JSON
    text; None when the connector has no status. ``failures``: each status with status-store's ``failure`` field."""
    status = reads.connector_value(name)
    if status is None:
        return None
    tasks = ",".join([task_state(task, value, failures) for task, value in reads.task_values(name)])
    return ConnectJSON(f'{{"name":{json_string(name)},"connector":{state(status, failures)},"tasks":[{tasks}],'
                       f'"type":{json_string(type_of(reads, class_types, configs, name))}}}')


def connector_info(reads: StatusReads, class_types: Mapping[str, str], configs: ConnectorConfigs | None,
                   name: str) -> dict[str, Any] | None:
    """Connect's ``ConnectorInfo``; None when the connector has no configuration (always without a config topic)."""
    config = configs.connector_config(name) if configs is not None else None
    if configs is None or config is None:
        return None
    tasks = [{"connector": name, "task": task} for task in configs.tasks(name)]
    return {"name": name, "config": config, "tasks": tasks, "type": type_of(reads, class_types, configs, name)}


# What ?expand= may ask; any other value asks nothing. ``failure`` (status-store's own) adds to ``status`` why each
# FAILED status failed.
EXPANSIONS = ("status", "info")
FAILURE_EXPANSION = "failure"


def expanded(reads: StatusReads, class_types: Mapping[str, str], configs: ConnectorConfigs | None,
             expand: tuple[str, ...], failures: bool = False) -> Iterator[str]:
    """``GET /connectors?expand=...``'s answer, in pieces of JSON text: each connector (configured, else with a status)
    and what ``expand`` (of ``EXPANSIONS``, each once, in the order asked) asks of it, as Connect builds it:
    ``status``, ``info`` (null without a configuration); a connector is left out when ``status`` is asked and it has
    none. ``failures``: its statuses with status-store's ``failure`` field. Reads ``reads`` and ``configs`` only (a
    view, on a thread)."""
    names = configs.connectors() if configs is not None else reads.connectors()
    yield "{"
    separator = ""
    for name in names:
        found = []
        for expansion in expand:
            if expansion == "status":
                status = connector_state_info(reads, class_types, configs, name, failures)
                if status is None:
                    break
                found.append('"status":' + status)
            else:
                found.append('"info":' + connect_json(connector_info(reads, class_types, configs, name)))
        else:
            yield f'{separator}{json_string(name)}:{{{",".join(found)}}}'
            separator = ","
    yield "}"


def not_found(name: str) -> ApiError:
    """Connect's answer for a connector without a configuration."""
    return ApiError(404, f"Connector {name} not found")


FailureExpansion = Annotated[list[str] | None, Query(
    description="`failure` (status-store's own, outside Connect's shapes): each status with a `failure` field, why a "
                "FAILED one failed (class, family, cause, action; docs/operations.md), null for the others. Any "
                "other value is ignored, as Connect ignores this parameter.")]


@router.get("/connectors/{name}/status", response_model=ConnectorStateInfo, responses=NOT_FOUND)
async def connector_status(name: str, store: StoreDep, configs: ConfigsDep,
                           expand: FailureExpansion = None) -> ConnectJSONResponse:
    """The connector's status and its tasks', as Connect answers it (``?expand=failure``: with why each FAILED one
    failed)."""
    failures = expand is not None and FAILURE_EXPANSION in expand
    info = connector_state_info(store.cache, store.config.connector_types, configs, name, failures)
    if info is None:
        raise ApiError(404, f"No status found for connector {name}")
    return ConnectJSONResponse(info)


@router.get("/connectors/{name}/tasks/{task}/status", response_model=TaskState, responses=NOT_FOUND)
async def task_status(name: str, task: TaskToReadDep, store: StoreDep,
                      expand: FailureExpansion = None) -> ConnectJSONResponse:
    """One task's status, as Connect answers it (``?expand=failure``: with why it failed)."""
    status = store.cache.get_task(TaskId(name, task))
    if status is None:
        raise ApiError(404, f"No status found for task {name}-{task}")
    return ConnectJSONResponse(task_state(task, status, expand is not None and FAILURE_EXPANSION in expand))


def submit(store: StatusStore, status: Status, safe: bool, connector_type: str | None = None) -> StatusUpdate | None:
    """put, or put_safe (None when Connect's rules drop it). A connector's type hint is kept only once its
    write is accepted: a refused write changes nothing."""
    update = store.put_safe(status) if safe else store.put(status)
    if update is not None and connector_type is not None and isinstance(status, ConnectorStatus):
        store.cache.set_connector_type(status.connector, connector_type)
    return update


def submit_one(store: StatusStore, status: Status, safe: bool, connector_type: str | None = None) -> StatusUpdate:
    """``submit`` for a single write: a put_safe that Connect's rules drop is a 409."""
    update = submit(store, status, safe, connector_type)
    if update is None:
        raise ApiError(409, f"Not written: {status_key(status)} has a newer status from another worker "
                            "(put_safe writes only over its own worker's or an older generation's status)")
    return update


async def connector_write_arguments(request: Request) -> dict[str, Any] | None:
    """``put_connector_status``'s arguments for a common write (see ``direct_write_arguments``)."""
    arguments = await direct_write_arguments(request, "body", ConnectorStatusBody)
    if arguments is not None:
        arguments["name"] = request.path_params["name"]
    return arguments


async def task_write_arguments(request: Request) -> dict[str, Any] | None:
    """``put_task_status``'s arguments for a common write (see ``direct_write_arguments``)."""
    arguments = await direct_write_arguments(request, "body", StatusBody)
    if arguments is not None:
        arguments["name"] = request.path_params["name"]
        arguments["task"] = await task_number(request.path_params["task"])
    return arguments


@router.put("/connectors/{name}/status", status_code=202, response_model=WriteResponse, responses=WRITE_ERRORS)
@served_directly(connector_write_arguments)
async def put_connector_status(name: str, body: ConnectorStatusBody, store: StoreDep, params: WaitDep,
                               safe: bool = False) -> ConnectJSONResponse:
    """Write a connector's status (``?safe=true``: Connect's put_safe). 202 at once, or wait with ``?wait=true``."""
    status = ConnectorStatus(checked_name(name), body.state, body.worker_id, body.generation, body.trace,
                             body.plugin_version())
    return await answer(store, [submit_one(store, status, safe, body.type)], params)


@router.put("/connectors/{name}/tasks/{task}/status", status_code=202, response_model=WriteResponse,
            responses=WRITE_ERRORS)
@served_directly(task_write_arguments)
async def put_task_status(name: str, task: TaskDep, body: StatusBody, store: StoreDep, params: WaitDep,
                          safe: bool = False) -> ConnectJSONResponse:
    """Write a task's status (``?safe=true``: Connect's put_safe). 202 at once, or wait with ``?wait=true``."""
    if body.state is State.STOPPED:
        raise ApiError(422, "STOPPED is a connector state; a task cannot be STOPPED")
    status = TaskStatus(TaskId(checked_name(name), task), body.state, body.worker_id, body.generation, body.trace,
                        body.plugin_version())
    return await answer(store, [submit_one(store, status, safe)], params)


@router.get("/connectors", response_model=list[str] | dict[str, ConnectorExpansions],
            responses={**CONFIG_READ, 503: _error("With `expand`: as many answers about the whole fleet as allowed "
                                                  "are being built (Retry-After says when to try again)")})
async def list_connectors(request: Request, store: StoreDep, configs: ConfigsDep,
                          expand: Annotated[list[str] | None, Query(
        description="Any number of times: `status`, `info`; any other value (an empty one too) is ignored. "
                    "With `expand` present the answer is a map of connector to expansions, without it a list. "
                    "`info` holds configurations: it needs the bearer token when one is set. `failure` "
                    "(status-store's own) adds to each status of `status` why a FAILED one failed.")]
        = None) -> Response:
    """The connectors, sorted: Connect's configured connectors when the config topic is configured, otherwise the
    connectors with a status. With ``expand`` present (even empty), a map of each to its expansions, built off the
    event loop and shared by the clients asking meanwhile (``shared_answers``)."""
    if expand is not None and "info" in expand:
        authenticate(request)
    if expand is None:
        return ConnectJSONResponse(configs.connectors() if configs is not None else store.cache.connectors())
    asked = tuple(dict.fromkeys(e for e in expand if e in EXPANSIONS))
    failures = FAILURE_EXPANSION in expand and "status" in asked
    class_types = store.config.connector_types

    def prepare() -> Render:
        view = store.cache.view()
        return lambda: expanded(view, class_types, configs, asked, failures)

    kind = "expand=" + ",".join(asked) + (",failure" if failures else "")
    return await shared_answer(request, kind, (asked, failures), store, configs, prepare)


async def shared_answer(request: Request, kind: str, key: object, store: StatusStore,
                        configs: ConnectorConfigs | None, prepare: Prepare,
                        more_version: Callable[[], int] = lambda: 0) -> Response:
    """An answer about the whole fleet, at the version the cache (and config topic) has now or newer, as
    ``SharedAnswers`` builds and shares it; 503 with Retry-After past its bound on builds. ``more_version``: the
    version of anything else the answer shows, now (never decreasing, as the others)."""
    answers: SharedAnswers = request.app.state.shared_answers

    def version() -> int:
        return store.cache.version + (configs.version if configs is not None else 0) + more_version()

    try:
        built = await answers.get(kind, key, version, prepare)
    except TooManyBuilds as e:
        raise ApiError(503, f"Not answered, try again in {e.retry_after_s} s: {e}",
                       {"Retry-After": str(e.retry_after_s)}) from None
    return SharedAnswerResponse(built, accepts_gzip(request), answers.decompressing)


@router.get("/connectors/{name}", response_model=ConnectorInfo, responses={**NOT_CONFIGURED, **CONFIG_READ})
@reads_configurations
async def get_connector(name: str, store: StoreDep, configs: ConfigsDep) -> ConnectJSONResponse:
    """The connector's configuration, tasks and type, from Connect's config topic."""
    info = connector_info(store.cache, store.config.connector_types, configs, name)
    if info is None:
        raise not_found(name)
    return ConnectJSONResponse(info)


@router.get("/connectors/{name}/config", response_model=dict[str, str | None],
            responses={**NOT_CONFIGURED, **CONFIG_READ})
@reads_configurations
async def connector_config(name: str, configs: ConfigsDep) -> ConnectJSONResponse:
    """The connector's configuration as stored in Connect's config topic (``${...}`` placeholders unresolved)."""
    config = configs.connector_config(name) if configs is not None else None
    if config is None:
        raise not_found(name)
    return ConnectJSONResponse(config)


@router.get("/connectors/{name}/tasks", response_model=list[TaskInfo], responses={**NOT_CONFIGURED, **CONFIG_READ})
@reads_configurations
async def task_configs(name: str, configs: ConfigsDep) -> ConnectJSONResponse:
    """The connector's tasks with their committed configurations: as many as its last commit record says, none
    while that commit found task configurations missing (Connect lists the claimed count with null configurations,
    which a single record can make any size up to 2^31-1)."""
    if configs is None or not configs.contains(name):
        raise not_found(name)
    return ConnectJSONResponse([{"id": {"connector": name, "task": task}, "config": configs.task_config(name, task)}
                                for task in configs.tasks(name)])


@router.delete("/connectors/{name}/status", status_code=202, response_model=WriteResponse, responses=WRITE_ERRORS)
async def delete_connector_statuses(name: str, store: StoreDep, params: WaitDep) -> ConnectJSONResponse:
    """Delete a connector's statuses: tombstones for its known tasks, then for the connector. Written whether or
    not a status is known here (one written just before may not have been read back yet)."""
    return await answer(store, store.delete_connector(checked_name(name)), params)


@router.delete("/connectors/{name}", status_code=405, response_class=Response, responses={
    401: WRITE_ERRORS[401],
    404: _error("No configuration and no status of the connector: Connect's `Connector {name} not found`"),
    405: _error("status-store does not delete connectors: only a Connect worker can (use "
                "`DELETE /connectors/{name}/status` to delete statuses)", headers={
                    "Allow": {"description": "The methods the resource takes", "schema": {"type": "string"}}}),
})
async def delete_connector(name: str, store: StoreDep, configs: ConfigsDep) -> Response:
    """Connect's route deletes the connector (its configuration, after which its workers delete its statuses).
    status-store never writes Connect's config topic, so it refuses, and deletes nothing: 404 as Connect answers
    for a connector it knows nothing of, 405 otherwise."""
    known = ((configs is not None and configs.contains(name)) or store.cache.get_connector(name) is not None
             or bool(store.cache.get_all_tasks(name)))
    if not known:
        raise not_found(name)
    raise ApiError(405, f"status-store does not delete connectors: delete {name} through a Connect worker. "
                        f"DELETE /connectors/{name}/status deletes its statuses only", {"Allow": "GET, HEAD"})
