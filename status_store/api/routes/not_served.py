"""Kafka Connect's routes that status-store does not serve: they change connectors, or belong to a worker. They
answer 501 with Connect's error body, saying so and where to go, so that a client can tell "not served here" from
Connect's 404 for a connector that does not exist (a bare 404 here was read as one). Not in the OpenAPI document:
it lists what status-store serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute

from ..responses import ApiError

router = APIRouter(include_in_schema=False, route_class=APIRoute)

# (methods, path, what Connect's route does) of every route a Connect worker serves and status-store does not
# (besides those whose resource status-store serves with other methods: they answer 405 with Allow).
CONNECT_ROUTES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("PUT",), "/connectors/{name}/pause", "pauses a connector"),
    (("PUT",), "/connectors/{name}/resume", "resumes a connector"),
    (("PUT",), "/connectors/{name}/stop", "stops a connector"),
    (("POST",), "/connectors/{name}/restart", "restarts a connector"),
    (("POST",), "/connectors/{name}/tasks/{task}/restart", "restarts a task"),
    (("GET", "PATCH", "DELETE"), "/connectors/{name}/offsets", "reads or changes a connector's offsets"),
    (("PUT",), "/connectors/{name}/fence", "fences a connector's tasks (between workers)"),
    (("GET",), "/connector-plugins", "lists a worker's plugins"),
    (("GET",), "/connector-plugins/{plugin}/config", "describes a plugin's configuration"),
    (("PUT",), "/connector-plugins/{plugin}/config/validate", "validates a connector configuration"),
    (("GET",), "/admin/loggers", "lists a worker's log levels"),
    (("GET", "PUT"), "/admin/loggers/{logger}", "reads or sets a log level"),
)


def _not_served(does: str) -> Callable[[Request], Awaitable[None]]:
    async def not_served(request: Request) -> None:
        raise ApiError(501, f"status-store does not serve {request.method} {request.url.path}: it is a Kafka Connect "
                            f"worker's route (it {does}), and status-store only serves statuses and reads "
                            "configurations. Send it to a Connect worker's REST API (port 8083 by default)")
    return not_served


for _methods, _path, _does in CONNECT_ROUTES:
    # OPTIONS too: the middleware answers it for served paths only, and these answer that they are not served.
    router.add_api_route(_path, _not_served(_does), methods=[*_methods, "OPTIONS"], status_code=501)
