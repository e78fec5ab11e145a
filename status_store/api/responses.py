"""Connect's JSON: compact, in Connect's field order, strings escaped as Jackson escapes them; and
Connect's error body, ``{"error_code": ..., "message": ...}``, for every error the API answers."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from ..codec import json_string


def connect_json(value: Any) -> str:
    """JSON text as Connect (Jackson) writes it: compact, insertion order, Jackson's string escapes."""
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_string(str(k))}:{connect_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(connect_json(v) for v in value) + "]"
    return json.dumps(value, allow_nan=False)


class ConnectJSONResponse(Response):
    """A JSON response rendered with ``connect_json``."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return connect_json(content).encode()


class ApiError(Exception):
    """An error the API answers with Connect's error body."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> ConnectJSONResponse:
    """Connect's error body."""
    return ConnectJSONResponse({"error_code": status, "message": message}, status_code=status, headers=headers)


async def api_error_handler(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return error_response(error.status, error.message, error.headers)


async def http_error_handler(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    message = error.detail if isinstance(error.detail, str) else str(error.detail)
    return error_response(error.status_code, message, getattr(error, "headers", None))


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


async def unexpected_error_handler(request: Request, error: Exception) -> Response:
    return error_response(500, f"Internal error: {type(error).__name__}")
