"""Dependencies shared by the routers: the store, path names and task numbers, waiting for outcomes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Query, Request
from pydantic import BaseModel, ValidationError

from ..connect.codec import ConnectJSON, json_string
from ..connect.configs import ConnectorConfigs
from ..connect.model import INT32_MAX, INT32_MIN
from ..fleet.config_topic import ConfigTopic
from ..retry.updates import Result, StatusUpdate
from ..store import SPOOL_RETRY_AFTER_S, StatusStore
from .responses import ApiError, ConnectJSONResponse, connect_json

Body = TypeVar("Body", bound=BaseModel)

# Longest wait a ?wait=true request may ask for.
MAX_WAIT_MS = 120_000


# Dependencies are async: FastAPI runs a plain function in a thread pool, a costly hop per request.
async def get_store(request: Request) -> StatusStore:
    """The running store of this app."""
    store: StatusStore | None = request.app.state.store
    if store is None:
        raise ApiError(503, "The status store is not running")
    return store


StoreDep = Annotated[StatusStore, Depends(get_store)]


async def get_config_topic(request: Request) -> ConfigTopic | None:
    """Connect's config topic, when one is configured."""
    config_topic: ConfigTopic | None = request.app.state.config_topic
    return config_topic


async def get_configs(request: Request) -> ConnectorConfigs | None:
    """What Connect's config topic holds, when one is configured."""
    config_topic: ConfigTopic | None = request.app.state.config_topic
    return config_topic.configs if config_topic is not None else None


ConfigTopicDep = Annotated[ConfigTopic | None, Depends(get_config_topic)]
ConfigsDep = Annotated[ConnectorConfigs | None, Depends(get_configs)]


# Unicode's control characters (category Cc): C0, DEL and C1; the category is closed by Unicode's stability policy.
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")


def checked_name(name: str, what: str = "connector") -> str:
    """A connector name to write: refused when blank or with control characters (Connect refuses to create such
    a connector), longer than 1024 characters (a bound of ours on what one request may make a key of), or with a
    ``/`` (it could not be addressed in a path: the paths refuse an encoded one, so the batch refuses it too).
    Reads serve any name, as Connect does."""
    if not name or not name.strip():
        raise ApiError(400, f"The {what} name must not be empty")
    if _CONTROL_CHARACTER.search(name) is not None:
        raise ApiError(400, f"The {what} name must not contain control characters")
    if len(name) > 1024:
        raise ApiError(400, f"The {what} name is longer than 1024 characters")
    if "/" in name:
        raise ApiError(400, f"The {what} name must not contain '/': it could not be addressed in a path")
    return name


# A task number in a path: canonical decimal, so that one key has one path ("01", "+1", "1.0", " 1" and
# "1_0" address nothing).
_TASK_NUMBER = re.compile(r"0|[1-9][0-9]{0,9}")


async def task_number(task: Annotated[str, Path(
        description="The task number: a decimal integer from 0 to 2147483647 without sign, spaces or leading "
                    "zeros. Anything else addresses no task (404).",
        json_schema_extra={"pattern": f"^({_TASK_NUMBER.pattern})$"})]) -> int:
    """The task number of the path; anything but a canonical one is Connect's 404 for a path that matches
    no resource."""
    if _TASK_NUMBER.fullmatch(task) is None or int(task) > INT32_MAX:
        raise ApiError(404, "HTTP 404 Not Found")
    return int(task)


TaskDep = Annotated[int, Depends(task_number)]

# A negative task number: Java's Integer.valueOf takes it, and Connect answers that the task has no status.
_NEGATIVE_TASK_NUMBER = re.compile(r"-[1-9][0-9]{0,9}")


async def task_number_to_read(task: Annotated[str, Path(
        description="The task number: a decimal integer from 0 to 2147483647 without sign, spaces or leading "
                    "zeros (a negative one is a task without status, as on Connect). Anything else addresses no "
                    "task (404).",
        json_schema_extra={"pattern": "^(0|-?[1-9][0-9]{0,9})$"})]) -> int:
    """The task number of a read path: as ``task_number``, and a negative one (canonical), which addresses a task
    that never has a status: Connect reads it (``Integer.valueOf``) and answers 404 ``No status found for task
    c--1``."""
    if _NEGATIVE_TASK_NUMBER.fullmatch(task) is not None and int(task) >= INT32_MIN:
        return int(task)
    return await task_number(task)


TaskToReadDep = Annotated[int, Depends(task_number_to_read)]


def checked_topic(topic: str) -> str:
    """A Kafka topic name from the path."""
    if not topic or len(topic) > 249 or topic in {".", ".."} or any(
            not (c.isascii() and (c.isalnum() or c in "._-")) for c in topic):
        raise ApiError(400, f"{topic!r} is not a legal Kafka topic name")
    return topic


@dataclass(frozen=True, slots=True)
class WaitParams:
    """``?wait=true`` waits for the durable outcome, at most ``timeout`` seconds."""

    wait: bool
    timeout: float


async def wait_params(
    wait: Annotated[bool, Query(description="Wait for the durable outcome instead of answering 202.")] = False,
    timeout_ms: Annotated[int, Query(ge=1000, le=MAX_WAIT_MS, description="Bound on the wait, from 1 s to 120 s.")]
    = 30000,
) -> WaitParams:
    """The wait parameters of a write request."""
    return WaitParams(wait, timeout_ms / 1000)


WaitDep = Annotated[WaitParams, Depends(wait_params)]


async def common_write(request: Request, body_type: type[Body]) -> tuple[StatusStore, Body] | None:
    """The running store and the body of a common write: no query parameters and a body that validates as
    ``body_type``, parsed and validated from its bytes in one pydantic call. None for any other request: FastAPI's
    handler then reads it (and answers a body that does not validate, a store that is not running, as it does)."""
    store: StatusStore | None = request.app.state.store
    if store is None or request.scope["query_string"]:
        return None
    try:
        return store, body_type.model_validate_json(await request.body())
    except ValidationError:
        return None


async def direct_write_arguments(request: Request, body_name: str,
                                 body_type: type[BaseModel]) -> dict[str, Any] | None:
    """A write endpoint's ``store`` and ``params`` arguments and its body argument ``body_name``, for a common write
    (``common_write``; the wait parameters' defaults), or None."""
    common = await common_write(request, body_type)
    if common is None:
        return None
    store, body = common
    return {"store": store, "params": await wait_params(), body_name: body}


# Each result as a JSON string, written once.
_RESULTS = {result: json_string(result.value) for result in Result}


def _result(update: StatusUpdate) -> ConnectJSON:
    """What happened to one write so far, rendered directly (a batch's answer has thousands): key, result,
    attempts, then partition and offset once delivered, and the reason when it was not written."""
    outcome = update.outcome
    key = json_string(update.key)
    if outcome is None:
        return ConnectJSON(f'{{"key":{key},"result":"pending","attempts":{update.attempts:d}}}')
    text = f'{{"key":{key},"result":{_RESULTS[outcome.result]},"attempts":{outcome.attempts:d}'
    if outcome.delivery is not None:
        text += f',"partition":{outcome.delivery.partition:d},"offset":{outcome.delivery.offset:d}'
    if not outcome.ok:
        text += f',"reason":{connect_json(outcome.reason)}'
    return ConnectJSON(text + "}")


async def answer(store: StatusStore, updates: Sequence[StatusUpdate], params: WaitParams) -> ConnectJSONResponse:
    """202 at once; or, with ``wait``, 200 once every update is durable (and visible in this service's
    reads) or superseded, 503 if one failed, 504 if the bound passed first."""
    # Accepted means spooled: the answer leaves only once the spool has the updates on disk. When it cannot write
    # them, the updates are taken all the same (they go to Kafka), but a 202 would promise what a crash could
    # break: without ?wait=true the answer says so (the next writes are refused until the spool takes writes).
    spooled = store.commit_spool()
    if not params.wait:
        if not spooled:
            assert store.spool is not None
            raise ApiError(503, f"The write was accepted but not durable: the spool ({store.spool.path}) cannot be "
                                f"written ({store.spool.failure}); it is being written to Kafka, and a crash before "
                                "that would lose it. Writes are refused until the spool can be written again.",
                           {"Retry-After": str(math.ceil(SPOOL_RETRY_AFTER_S))})
        return ConnectJSONResponse({"results": [_result(u) for u in updates]}, status_code=202)
    try:
        await store.wait_visible(updates, params.timeout)
    except TimeoutError:
        raise ApiError(504, f"The write was accepted but is not durable after {params.timeout:g} s; it is still "
                            "being retried (see GET /retries)") from None
    failed = [u for u in updates if u.outcome is not None and u.outcome.result is Result.FAILED]
    if failed:
        first = failed[0].outcome
        assert first is not None
        raise ApiError(503, f"Kafka did not accept the write of {first.key}: {first.reason}"
                            + (f" ({first.error})" if first.error is not None else ""))
    return ConnectJSONResponse({"results": [_result(u) for u in updates]}, status_code=200)
