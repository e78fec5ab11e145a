"""Connect's JSON: compact, in Connect's field order, strings escaped as Jackson escapes them; and
Connect's error body, ``{"error_code": ..., "message": ...}``, for every error the API answers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import Send

from ..connect.codec import ConnectJSON, json_scalar, json_string
from ..errors import RecordTooLargeError, WriteRejectedError


def connect_json(value: Any) -> str:
    """JSON text as Connect (Jackson) writes it: compact, insertion order, Jackson's string escapes. A
    ``ConnectJSON`` is put in as it is (a part of an answer made many times over, such as one write's result in a
    batch's answer, or a configuration value that is not a string, rendered once)."""
    if isinstance(value, str):
        return value if isinstance(value, ConnectJSON) else json_string(value)
    if isinstance(value, dict):
        return "{" + ",".join([json_string(str(k)) + ":" + connect_json(v) for k, v in value.items()]) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join([connect_json(v) for v in value]) + "]"
    return json_scalar(value)


class ConnectJSONResponse(Response):
    """A JSON response rendered with ``connect_json``."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return connect_json(content).encode()


class ApiError(HTTPException):
    """An error the API answers with Connect's error body, ``message`` as it is.

    An ``HTTPException``, so that FastAPI passes it on when it is raised while the request body is
    read (the body limits), instead of turning it into a 400.
    """

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, headers)
        self.message = message


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> ConnectJSONResponse:
    """Connect's error body."""
    return ConnectJSONResponse({"error_code": status, "message": message}, status_code=status, headers=headers)


async def send_error(send: Send, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
    """Connect's error body, sent by an ASGI middleware (outside FastAPI's exception handlers)."""
    response = error_response(status, message, headers)
    await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


async def http_error_handler(request: Request, error: Exception) -> Response:
    """Our own errors with their message; the router's (no route, wrong method) with the message Connect's
    JAX-RS server gives, e.g. ``HTTP 404 Not Found``."""
    assert isinstance(error, HTTPException)
    if isinstance(error, ApiError):
        return error_response(error.status_code, error.message, error.headers)
    phrase = HTTPStatus(error.status_code).phrase
    return error_response(error.status_code, f"HTTP {error.status_code} {phrase}", error.headers)


async def validation_error_handler(request: Request, error: Exception) -> Response:
    """400 for a body that is not JSON, 422 for one that does not fit the schema; the message says where."""
    assert isinstance(error, RequestValidationError)
    problems = list(error.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        return error_response(400, "The request body is not valid JSON")
    parts = []
    for problem in problems[:5]:
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        parts.append(f"{where}: {problem.get('msg', 'invalid')}" if where else str(problem.get("msg", "invalid")))
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return error_response(422, "Invalid request: " + "; ".join(parts) + more)


async def write_rejected_handler(request: Request, error: Exception) -> Response:
    """503 with ``Retry-After`` (whole seconds, rounded up): too many updates are pending; nothing was accepted."""
    assert isinstance(error, WriteRejectedError)
    seconds = max(1, math.ceil(error.retry_after_s))
    return error_response(503, f"Not accepted, try again in {seconds} s: {error.reason}",
                          {"Retry-After": str(seconds)})


async def record_too_large_handler(request: Request, error: Exception) -> Response:
    """413: the status record could never be written; nothing was accepted."""
    assert isinstance(error, RecordTooLargeError)
    return error_response(413, f"Not accepted: {error}")


async def store_closed_handler(request: Request, error: Exception) -> Response:
    """503: the store is stopping (or stopped) and takes no more writes."""
    return error_response(503, "The status store is not running")


async def unexpected_error_handler(request: Request, error: Exception) -> Response:
    return error_response(500, f"Internal error: {type(error).__name__}")
