"""The HTTP API while the service starts and a topic it needs does not exist yet (``StartGate``): a sidecar started
before its Connect worker waits for the worker to create Connect's topics, and says so, instead of exiting (in a pod
both start at once, and Kubernetes would back a container that exits off for ever longer).

Until the gate opens: ``GET /health`` answers 200 (the process is up: a liveness probe must not restart it for
waiting), ``GET /ready`` answers 503 with what the start waits for, and every other request 503 with the same words
(a worker's agent then stays on Connect's own path and asks again). Once the store has read its topics, the gate
opens and the API answers as always.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from ..logs import RateLimit
from .responses import ConnectJSONResponse, error_response

log = logging.getLogger(__name__)

# While a wait lasts, it is logged again this often.
WAIT_LOG_INTERVAL_S = 60.0


class StartGate:
    """An ASGI app: ``app`` once ``open()`` is called; until then the starting answers above."""

    def __init__(self, app: FastAPI, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        # The HTTP server's configuration reads the app's state (the connections it closes are counted there).
        self.state = app.state
        # Set when the start first has to wait for something: the service then serves these answers meanwhile.
        self.waited = asyncio.Event()
        self._clock = clock
        self._open = False
        self._waiting_for: str | None = None
        self._since = 0.0
        self._still = RateLimit(WAIT_LOG_INTERVAL_S, clock)

    def waiting(self, what: str) -> None:
        """The start waits for ``what`` (said again before each new look): logged when it begins, then once a
        minute while it lasts."""
        now = self._clock()
        if what != self._waiting_for:
            self._waiting_for, self._since = what, now
            self._still = RateLimit(WAIT_LOG_INTERVAL_S, self._clock)
            self._still.take()
            log.warning("Waiting for %s; GET /ready answers 503 until then", what)
        else:
            self._still.log(log, logging.WARNING, "Still waiting for %s, for %.0f s", what, now - self._since)
        self.waited.set()

    def done_waiting(self) -> None:
        """What was waited for is there: the start goes on (reading the topics)."""
        if self._waiting_for is not None:
            log.info("Done waiting for %s, after %.0f s", self._waiting_for, self._clock() - self._since)
        self._waiting_for = None

    def open(self) -> None:
        """The service has started: the API answers from now on."""
        self._open = True

    def reason(self) -> str:
        """What the start is doing, in words."""
        if self._waiting_for is None:
            return "status-store is starting: reading its topics to their end"
        return (f"status-store is starting: waiting for {self._waiting_for}, for "
                f"{self._clock() - self._since:.0f} s")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._open or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"].rstrip("/") or "/"
        response: Any
        if path == "/health":
            response = ConnectJSONResponse({"status": "healthy", "message": f"{self.reason()} (GET /ready answers "
                                                                             "503 until it has started)"})
        elif path == "/ready":
            response = error_response(503, f"Not ready: {self.reason()}")
        else:
            response = error_response(503, self.reason(), {"Retry-After": "1"})
        await response(scope, receive, send)
