"""The Connect workers' REST APIs as the sidecar calls them (auto-restart's checks and restarts, the health checks):
one HTTP client, each request bounded in time, each answer read whole within a bound and told as a ``Reply`` (never
an exception).

Secured workers: their URLs over HTTPS, trusted through a CA file (``sidecar.workers.rest.ssl.ca.location``, PEM;
the system's trust store without it), and basic authentication (Connect's ``BasicAuthSecurityRestExtension``) from a
file (``sidecar.workers.rest.credentials.file``: ``user:password``, read again when it changes) or from a worker's URL
(``https://user:password@host:8443``). Two troubles are the worker's, not the network's, and are said as such, once:
a 401 or 403 (the credentials are missing or wrong) and a TLS handshake that fails (a certificate the CA does not
trust, an expired one, a worker that does not speak TLS there). Each pauses requests to that worker
(``TROUBLE_PAUSE_S``): a storm of requests would change nothing. A password is never logged: URLs are logged with it
masked (``config.act.redacted``).

A worker's answer is checked, not believed: ``Reply.json`` is None for a body that is not JSON, or too large.
"""

from __future__ import annotations

import enum
import json
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..config.act import redacted

log = logging.getLogger(__name__)

# The most read of one answer: a connector's status with a thousand tasks and their traces fits many times.
MAX_ANSWER_BYTES = 4 << 20
# A worker that refuses the credentials or fails the TLS handshake is not asked again before this; the line that says
# so again, while it lasts, at most this often.
TROUBLE_PAUSE_S = 60.0
TROUBLE_REMINDER_S = 600.0


class Trouble(enum.StrEnum):
    """Why a worker cannot be asked, that is the worker's and not the network's."""

    UNAUTHORIZED = "unauthorized"
    TLS = "tls"


@dataclass(frozen=True, slots=True)
class Reply:
    """How a request went: the HTTP status and the body as JSON (None: not JSON, or too large), or, without an answer
    (``status`` None), the error in one line (``timed_out``: no answer within the bound); ``trouble`` for a 401/403
    or a failed TLS handshake."""

    status: int | None
    json: Any = None
    error: str | None = None
    trouble: Trouble | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return self.status is not None and 200 <= self.status < 300


class Credentials:
    """Basic authentication from a file holding ``user:password`` (its first line that is not blank or a comment),
    read again when the file changes, so that a rotated secret needs no restart."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._pair: tuple[str, str] | None = None
        self._warned = False

    def current(self) -> tuple[str, str] | None:
        """The user and password now; None when the file cannot be read or holds none (said once)."""
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._pair, self._stamp = _pair(self.path.read_text(encoding="utf-8")), stamp
                self._warned = self._warned and self._pair is None
        except OSError as e:
            self._pair, self._stamp = None, None
            self._warn(f"cannot be read ({e.strerror or e})")
            return None
        if self._pair is None:
            self._warn("holds no user:password line")
        return self._pair

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("The workers' credentials file %s (sidecar.workers.rest.credentials.file) %s: requests to "
                        "the workers go without credentials", self.path, why)


def _pair(text: str) -> tuple[str, str] | None:
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, separator, password = line.partition(":")
        return (user.strip(), password.strip()) if separator and user.strip() else None
    return None


class WorkerRest:
    """An HTTP client of the workers' REST APIs (``start`` before use, ``stop`` after)."""

    def __init__(self, timeout_s: float, ca_file: str | None = None, credentials_file: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout_s = timeout_s
        self._ca_file = ca_file
        self._credentials = Credentials(credentials_file) if credentials_file is not None else None
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        # Each troubled worker: its trouble, until when it is paused, when the line that says so may come again.
        self._troubles: dict[str, tuple[Trouble, float, float]] = {}

    def start(self) -> None:
        """Open the client (the CA file is read now: a file that cannot be read is an error here, at start)."""
        # Each request is logged once, by the caller, with why it was sent: not again by httpx.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        verify: ssl.SSLContext | bool = True
        if self._ca_file is not None:
            verify = ssl.create_default_context(cafile=self._ca_file)
        self._client = httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=False, verify=verify)

    async def stop(self) -> None:
        """Close the client (requests in flight are let go by their callers)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def paused_until(self, worker: str) -> float | None:
        """Until when (this client's clock) the worker is not to be asked, for a trouble of its own; None: it may be."""
        trouble = self._troubles.get(worker)
        return trouble[1] if trouble is not None and trouble[1] > self._clock() else None

    async def get(self, worker: str, url: str, timeout_s: float | None = None) -> Reply:
        """A GET to a worker (bounded by ``timeout_s``, else the client's bound); its answer read as JSON."""
        return await self._request("GET", worker, url, timeout_s)

    async def post(self, worker: str, url: str, timeout_s: float | None = None) -> Reply:
        """A POST without a body to a worker."""
        return await self._request("POST", worker, url, timeout_s)

    async def _request(self, method: str, worker: str, url: str, timeout_s: float | None) -> Reply:
        assert self._client is not None, "WorkerRest.start() first"
        auth = None
        if self._credentials is not None and httpx.URL(url).userinfo == b"":
            auth = self._credentials.current()
        try:
            timeout = httpx.Timeout(timeout_s if timeout_s is not None else self._timeout_s)
            async with self._client.stream(method, url, auth=auth, timeout=timeout) as answer:
                body = bytearray()
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        return Reply(answer.status_code, None, f"an answer larger than {MAX_ANSWER_BYTES} bytes")
                status = answer.status_code
        except httpx.HTTPError as e:
            handshake = _tls_failure(e)
            if handshake is not None:
                self._troubled(worker, Trouble.TLS, method, url, handshake)
                return Reply(None, None, f"TLS handshake failed: {handshake}", Trouble.TLS)
            return Reply(None, None, redacted(f"{type(e).__name__}: {e}")[:300],
                         timed_out=isinstance(e, httpx.TimeoutException))
        if status in (401, 403):
            self._troubled(worker, Trouble.UNAUTHORIZED, method, url, f"HTTP {status}")
            return Reply(status, _json(bytes(body)), f"HTTP {status}", Trouble.UNAUTHORIZED)
        self._cleared(worker, url)
        return Reply(status, _json(bytes(body)))

    def _troubled(self, worker: str, trouble: Trouble, method: str, url: str, detail: str) -> None:
        now = self._clock()
        before = self._troubles.get(worker)
        # When the line may come again: now for a new trouble, else at the reminder.
        next_line = before[2] if before is not None and before[0] is trouble else now
        if now < next_line:
            self._troubles[worker] = (trouble, now + TROUBLE_PAUSE_S, next_line)
            return
        self._troubles[worker] = (trouble, now + TROUBLE_PAUSE_S, now + TROUBLE_REMINDER_S)
        path = httpx.URL(url).raw_path.decode("ascii", "replace")
        if trouble is Trouble.UNAUTHORIZED:
            why = (f"it answered {detail} to {method} {path}: the sidecar's credentials are missing or wrong "
                   "(sidecar.workers.rest.credentials.file, or user:password in the worker's URL)")
        else:
            why = (f"the TLS handshake of {method} {path} failed ({detail}): a TLS failure, not an unreachable "
                   "worker; sidecar.workers.rest.ssl.ca.location must name the CA that signed its certificate, and "
                   "the URL must be the https one it serves")
        log.warning("Worker %s (%s): %s. It is not asked again for %.0f s%s", worker, redacted(url), why,
                    TROUBLE_PAUSE_S, "" if before is None else "; still so")

    def _cleared(self, worker: str, url: str) -> None:
        before = self._troubles.pop(worker, None)
        if before is not None:
            log.info("Worker %s (%s) answers the sidecar again (%s is over)", worker, redacted(url),
                     "refused credentials" if before[0] is Trouble.UNAUTHORIZED else "the failed TLS handshake")


def _tls_failure(error: BaseException) -> str | None:
    """The TLS error under an HTTP client's error (its reason), or None for another failure."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {cause.verify_message}"
        if isinstance(cause, ssl.SSLError):
            return str(cause.reason or cause)
        cause = cause.__cause__ or cause.__context__
    return None


def _json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None

