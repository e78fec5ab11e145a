"""The Connect workers' REST APIs as the sidecar calls them (auto-restart's checks and restarts): one HTTP client, each
request bounded in time, each answer read whole within a bound and told as a ``Reply`` (never an exception).

A worker's answer is checked, not believed: ``Reply.json`` is None for a body that is not JSON, or too large.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import httpx

# The most read of one answer: a connector's status with a thousand tasks and their traces fits many times.
MAX_ANSWER_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Reply:
    """How a request went: the HTTP status and the body as JSON (None: not JSON, or too large), or, without an answer
    (``status`` None), the error in one line."""

    status: int | None
    json: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return self.status is not None and 200 <= self.status < 300


class WorkerRest:
    """An HTTP client of the workers' REST APIs (``start`` before use, ``stop`` after)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    def start(self) -> None:
        """Open the client."""
        # Each request is logged once, by the caller, with why it was sent: not again by httpx.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        self._client = httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False)

    async def stop(self) -> None:
        """Close the client (requests in flight are let go by their callers)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def get(self, url: str) -> Reply:
        """A GET; its answer read as JSON."""
        return await self._request("GET", url)

    async def post(self, url: str) -> Reply:
        """A POST without a body."""
        return await self._request("POST", url)

    async def _request(self, method: str, url: str) -> Reply:
        assert self._client is not None, "WorkerRest.start() first"
        try:
            async with self._client.stream(method, url) as answer:
                body = bytearray()
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        return Reply(answer.status_code, None, f"an answer larger than {MAX_ANSWER_BYTES} bytes")
                return Reply(answer.status_code, _json(bytes(body)))
        except httpx.HTTPError as e:
            return Reply(None, None, f"{type(e).__name__}: {e}"[:300])


def _json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None
