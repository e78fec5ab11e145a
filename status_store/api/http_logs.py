"""The log lines any HTTP client can cause at will, each let through at most once per ``LIMIT_LOG_INTERVAL_S``:
asyncio's error when ``accept()`` fails (out of file descriptors), which it logs with a traceback up to a whole
burst's accepts per loop turn, and uvicorn's warning per malformed request. The server's own bounds
(``http_server``) log their shedding and stalls at the same pace."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..logs import RateLimit

log = logging.getLogger(__name__)

# A line about a limit that clients can reach at will is logged at most once per this long.
LIMIT_LOG_INTERVAL_S = 10.0
# asyncio's message (selector_events.py) when accept() fails for lack of file descriptors or memory.
_ACCEPT_ERROR = "socket.accept() out of system resource"


@contextlib.contextmanager
def client_log_limits(loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """While in effect, the log lines any client can cause at will are let through at most once per
    ``LIMIT_LOG_INTERVAL_S`` each: asyncio's accept() failure (without its traceback; other loop errors go
    to the handler that was there before), and uvicorn's warnings about a request (``Invalid HTTP request
    received.``, an unsupported upgrade), one line per request otherwise."""
    accept_limit = RateLimit(LIMIT_LOG_INTERVAL_S, clock)
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _ACCEPT_ERROR:
            accept_limit.log(log, logging.ERROR, "Cannot accept HTTP connections: %s (asyncio retries in 1 s)",
                             context.get("exception"))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    warnings = _RateLimitedWarnings(clock)
    uvicorn_log = logging.getLogger("uvicorn.error")
    loop.set_exception_handler(handle)
    uvicorn_log.addFilter(warnings)
    try:
        yield
    finally:
        uvicorn_log.removeFilter(warnings)
        loop.set_exception_handler(previous)


class _RateLimitedWarnings(logging.Filter):
    """Each warning (by its message text) at most once per ``LIMIT_LOG_INTERVAL_S``; uvicorn's warnings
    are fixed texts, so there are few."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self._clock = clock
        self._limits: dict[str, RateLimit] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        key = str(record.msg)
        limit = self._limits.get(key)
        if limit is None:
            limit = self._limits[key] = RateLimit(LIMIT_LOG_INTERVAL_S, self._clock)
        held = limit.take()
        if held:
            record.msg, record.args = f"{record.getMessage()} (and {held} more like it since the last one logged)", ()
        return held is not None
