"""``status-store status`` and ``status-store watch``: a person's view of a running service's statuses, as a
table, and of their changes as they are read (``GET /events``), one line each.

What they print comes from the status topic, which any writer fills: every text from the service is printed
with its control characters (C0, C1: terminal escape sequences), line separators and bidirectional controls
escaped (``logs.escape_text``), so it can neither drive the terminal nor hide or reverse what is shown. An
answer that is not what the service's API answers (not UTF-8, not JSON, a field missing or of another kind:
a proxy's page, another service, a damaged stream) is one clear line on stderr, never a traceback:
``status`` stops there, ``watch`` skips that event and goes on.

``watch`` reconnects on its own only when the service ended its stream and asked it to reconnect (it fell behind
and was dropped, or its stream reached its time bound), with the id of the last event printed, so nothing is
missed or printed twice, after a backoff that doubles at each reconnection in a row (with jitter, from
``RECONNECT_INITIAL_MS`` to ``RECONNECT_MAX_MS``): a server that ends every stream at once is not asked thousands
of times a second. When the service stops, it says so and exits 0, naming the id to resume from
(``--last-event-id``): a service that restarts keeps the events it can, and the run that resumes prints those that
came meanwhile.

What they read is bounded, whatever the server sends: an answer (``MAX_ANSWER_BYTES``), an error's body
(``MAX_ERROR_BYTES``), a line or an event of the stream (``event_stream.MAX_EVENT_BYTES``), JSON nested deeper than
Python's parser goes. Past a bound, one line says so and the command ends. And in time: ``status`` gets its answers
within one deadline for the whole command (``--timeout``), ``watch`` its stream's head within it and then each line
(an event's, a heartbeat) within ``WATCH_IDLE_S`` of the last: a server that sends a byte now and then keeps every
read alive, so a watchdog thread closes the connection at the deadline (``Deadline``).

Over HTTPS (an ``https://`` URL) they trust the system's CAs, or the CA file given (``--cacert``), and present a
client certificate when one is given (``--cert``, ``--key``: a sidecar asking for mutual TLS).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, TextIO

from .connect.failures import FailureClass, classify
from .event_stream import ServerSentEvent, TooLarge, server_sent_events
from .fleet.text import shown
from .logs import escape_text
from .retry.backoff import JitterMode, Random, backoff_policy

# The whole of ``status`` (both its requests), and ``watch``'s stream until its head arrived, by default.
TIMEOUT_S = 60.0
# ``watch`` gives up when nothing, not even a heartbeat (every 15 s by default), came for this long.
WATCH_IDLE_S = 60.0
# The most read of one answer (``status`` of every connector: a fleet of 100,000 connectors of 10 tasks, a tenth
# FAILED with a 2 KB trace, answers about 330 MB), of an error's body, and of one event (the service's are a few KB:
# its names are cut to 256 characters, its traces to a line).
MAX_ANSWER_BYTES = 512 << 20
MAX_ERROR_BYTES = 64 << 10
# ``watch``'s reconnections in a row wait from this long, twice as long each time, up to the most (half of each
# wait is random: clients dropped together come back apart); a stream that lasted the most starts over.
RECONNECT_INITIAL_MS = 500
RECONNECT_MAX_MS = 30_000
# An event id that can be sent back in a Last-Event-ID header: visible ASCII.
_SENDABLE_ID = re.compile(r"[\x21-\x7e]+")
_KINDS = ("connector", "task", "topic")


class MalformedAnswer(ValueError):
    """Data from the service that is not what its API answers."""


class DeadlinePassed(Exception):
    """The exchange was not over by its deadline."""


class HttpError(Exception):
    """An answer with an error status: its status, and the message of its body (Connect's), else its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Tls:
    """How the commands speak HTTPS: the CA file trusted (default: the system's CAs), and the client certificate
    and key presented (PEM files), when given."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    def context(self) -> ssl.SSLContext:
        """The client's TLS context (a SystemExit naming the file that cannot be used)."""
        try:
            context = ssl.create_default_context(cafile=self.cafile)
            if self.certfile is not None:
                context.load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as e:
            raise SystemExit(f"status-store: the TLS files cannot be used: {escape_text(str(e))}") from None
        return context


class Deadline:
    """When an exchange must be over, and the watchdog that holds it: a thread that closes the connection's socket
    when the deadline passes (every read then fails at once), whatever the server trickles meanwhile. ``extend``
    moves it on (``watch``, after each line); ``expired`` says whether it fired."""

    def __init__(self, connection: http.client.HTTPConnection, at: float) -> None:
        self._connection = connection
        self._at = at
        self._done = False
        self.expired = False
        self.sock: socket.socket | None = None
        self._wake = threading.Condition()
        threading.Thread(target=self._watch, name="status-store-deadline", daemon=True).start()

    def extend(self, at: float) -> None:
        """The deadline is ``at`` now (a later one is found when the watchdog wakes; an earlier one wakes it)."""
        earlier = at < self._at
        self._at = at
        if earlier:
            with self._wake:
                self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._done = True
            self._wake.notify()

    def _watch(self) -> None:
        with self._wake:
            while not self._done:
                left = self._at - time.monotonic()
                if left <= 0:
                    self.expired = True
                    # http.client lets go of the socket once an answer is to be read to its close: held here.
                    sock = self._connection.sock or self.sock
                    if sock is not None:
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                    return
                self._wake.wait(left)


@contextlib.contextmanager
def get(url: str, deadline_at: float, tls: Tls | None = None, headers: dict[str, str] | None = None,
        read_timeout_s: float | None = None) -> Iterator[tuple[http.client.HTTPResponse, Deadline]]:
    """A GET whose answer's head arrived (status 2xx: ``HttpError`` otherwise) by ``deadline_at``
    (``time.monotonic()``), with the deadline that goes on holding while the body is read. Each read waits at most
    ``read_timeout_s`` (default: until the deadline)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url} is not an http:// or https:// URL")
    timeout = max(0.001, min(read_timeout_s or math.inf, deadline_at - time.monotonic()))
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout,
                                                 context=(tls or Tls()).context())
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    deadline = Deadline(connection, deadline_at)
    try:
        connection.request("GET", urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, "")),
                           headers=headers or {})
        deadline.sock = connection.sock
        response = connection.getresponse()
        if response.status >= 400:
            raise HttpError(response.status, error_message(response))
        yield response, deadline
    except Exception:
        if deadline.expired:  # the watchdog closed the connection: that is why the read failed or came short
            raise DeadlinePassed from None
        raise
    else:
        if deadline.expired:  # a read that came short at the close ended what was read without an error
            raise DeadlinePassed
    finally:
        deadline.close()
        connection.close()


def fetch(url: str, deadline_at: float, tls: Tls | None = None) -> Any:
    """GET a JSON document by the deadline; raise SystemExit with a clear message on any failure."""
    try:
        with get(url, deadline_at, tls, {"Accept": "application/json", "Accept-Encoding": "gzip"}) as (response, _):
            return parse_json(read_bounded(response, MAX_ANSWER_BYTES))
    except HttpError as e:
        raise SystemExit(f"status-store: {e.message} (HTTP {e.status})") from None
    except DeadlinePassed:
        raise SystemExit(f"status-store: no complete answer from {url} within the command's time "
                         f"(--timeout)") from None
    except (OSError, http.client.HTTPException) as e:
        raise SystemExit(f"status-store: cannot reach {url}: {escape_text(str(e) or type(e).__name__)}") from None
    except TooLarge as e:
        raise SystemExit(f"status-store: {url} answered {e}; not read") from None
    except ValueError as e:  # not UTF-8, or not JSON, or not a URL
        raise SystemExit(f"status-store: {url} did not answer JSON ({escape_text(str(e))})") from None


def read_bounded(response: IO[bytes], limit: int) -> bytes:
    """The body of an answer, at most ``limit`` bytes (``TooLarge`` past them, by its Content-Length or as read),
    decompressed when it came gzip-encoded (at most ``limit`` bytes of text too)."""
    headers = getattr(response, "headers", {})
    declared = headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"more than {limit:,} bytes (Content-Length: {int(declared):,})")
    body = response.read(limit + 1)
    if len(body) > limit:
        raise TooLarge(f"more than {limit:,} bytes")
    if headers.get("Content-Encoding", "").strip().lower() == "gzip":
        decompressor = zlib.decompressobj(31)
        try:
            body = decompressor.decompress(body, limit + 1)
        except zlib.error as e:
            raise ValueError(f"its gzip body cannot be read: {e}") from None
        if len(body) > limit or decompressor.unconsumed_tail:
            raise TooLarge(f"more than {limit:,} bytes once decompressed")
    return body


def parse_json(data: bytes | str) -> Any:
    """JSON text as Python values; ValueError for text that is not JSON or is nested too deeply to be parsed."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def error_message(error: http.client.HTTPResponse) -> str:
    """The message of Connect's error body, else the HTTP reason (escaped)."""
    try:
        body = parse_json(read_bounded(error, MAX_ERROR_BYTES))
        message = body.get("message", error.reason) if isinstance(body, dict) else error.reason
    except (ValueError, OSError, http.client.HTTPException):
        message = error.reason
    return escape_text(str(message))


def field(data: object, name: str, kinds: type | tuple[type, ...], what: str) -> Any:
    """``data[name]`` when ``data`` is a JSON object holding a value of these kinds there (a missing one is None);
    MalformedAnswer otherwise (``what``: what ``data`` is, for the message)."""
    if not isinstance(data, dict):
        raise MalformedAnswer(f"{what} is not a JSON object")
    value = data.get(name)
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is int):
        raise MalformedAnswer(f"{what} has no {name!r} of the expected kind")
    return value


def rows(info: object) -> list[tuple[str, str, str, str]]:
    """(what, state, worker, first line of the trace) for a connector and its tasks, escaped; MalformedAnswer for
    a status that is not what ``GET /connectors/{name}/status`` answers."""
    name, connector_type = field(info, "name", str, "the status"), field(info, "type", str, "the status")
    found = [_row(f"{escape_text(name)} ({escape_text(connector_type)})", field(info, "connector", dict, "the status"),
                  "the connector's status")]
    for task in field(info, "tasks", list, "the status"):
        found.append(_row(f"  task {field(task, 'id', int, 'a task status')}", task, "a task status"))
    return found


def _row(what: str, status: object, kind: str) -> tuple[str, str, str, str]:
    state = field(status, "state", str, kind)
    # null for a status its writer left without a worker id, as Connect shows it.
    worker = field(status, "worker_id", (str, type(None)), kind)
    trace = field(status, "trace", (str, type(None)), kind)
    line = escape_text(trace.splitlines()[0]) if trace else ""
    failure = classify(trace) if trace and state == "FAILED" else None
    if failure is not None and failure.failure_class is not FailureClass.UNKNOWN:
        # Whether a restart can help, before the trace's line (docs/operations.md "Failure classes").
        line = f"[{failure.failure_class.value}" + (f", {failure.family.value}" if failure.family else "") + f"] {line}"
    return (what, escape_text(state), escape_text(worker) if worker is not None else "-", line)


def show_status(base_url: str, name: str | None, out: TextIO = sys.stdout, tls: Tls | None = None,
                timeout_s: float = TIMEOUT_S) -> int:
    """Print one connector's statuses, or every connector's, with each connector's health word; 0 when shown. Both
    requests within ``timeout_s`` together (SystemExit past it)."""
    deadline_at = time.monotonic() + timeout_s
    base = base_url.rstrip("/")
    url = f"{base}/connectors/{urllib.parse.quote(name, safe='')}/status" if name is not None else (
        f"{base}/connectors?expand=status")
    answer = fetch(url, deadline_at, tls)
    words = health_words(base, name, deadline_at, tls)
    table = [("CONNECTOR / TASK", "STATE", "HEALTH", "WORKER", "TRACE")]
    try:
        if name is not None:
            table.extend(with_health(rows(answer), words.get(name)))
        elif not isinstance(answer, dict):
            raise MalformedAnswer("the list of connectors is not a JSON object")
        else:
            for connector in sorted(answer):
                found = rows(field(answer[connector], "status", dict, f"the entry of {connector!r}"))
                # Names come whole here and cut to a bound in /fleet/health's answer.
                table.extend(with_health(found, words.get(connector, words.get(shown(connector)))))
    except MalformedAnswer as e:
        raise SystemExit(f"status-store: {url} answered something else than statuses: {escape_text(str(e))}") from None
    if len(table) == 1:
        print("No connector has a status.", file=out)
        return 0
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4],
              file=out)
    return 0


def with_health(found: list[tuple[str, str, str, str]], word: str | None) -> list[tuple[str, str, str, str, str]]:
    """A connector's rows with its health word beside its own state (its tasks have none)."""
    return [(what, state, (word or "-") if i == 0 else "", worker, trace)
            for i, (what, state, worker, trace) in enumerate(found)]


def health_words(base: str, name: str | None, deadline_at: float, tls: Tls | None = None) -> dict[str, str]:
    """Connectors' health words (``GET /fleet/health``), escaped; none from a service that does not serve them, or
    not by the deadline."""
    url = f"{base}/fleet/health" + (f"?{urllib.parse.urlencode({'connector': name})}" if name is not None else "")
    try:
        with get(url, deadline_at, tls, {"Accept": "application/json", "Accept-Encoding": "gzip"}) as (response, _):
            words = parse_json(read_bounded(response, MAX_ANSWER_BYTES))
    except (HttpError, DeadlinePassed, OSError, http.client.HTTPException, ValueError):
        return {}
    if not isinstance(words, dict):
        return {}
    return {connector: escape_text(word) for connector, word in words.items() if isinstance(word, str)}


def watch(base_url: str, connector: str | None, out: TextIO = sys.stdout, last_event_id: str | None = None,
          sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
          rng: Random = random.random, tls: Tls | None = None, timeout_s: float = TIMEOUT_S) -> int:
    """Print each status change as the service reads it, one line each, until the service ends the stream.

    ``last_event_id``: resume after that event. A client the service asks to reconnect (dropped for falling behind,
    or its stream at its time bound) reconnects with the id of the last event printed, after a backoff (``sleep``,
    ``clock`` and ``rng`` for it). 0 when the service ended the stream (it is stopping); SystemExit on a failure,
    and when the stream's head does not come within ``timeout_s`` or a line within ``WATCH_IDLE_S`` of the last.
    """
    url = f"{base_url.rstrip('/')}/events"
    if connector is not None:
        url += "?" + urllib.parse.urlencode({"connector": connector})
    last_id = last_event_id
    backoff = backoff_policy(JitterMode.SYMMETRIC, RECONNECT_INITIAL_MS, RECONNECT_MAX_MS, 2.0, 0.5, rng)
    in_a_row = 0
    while True:
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        opened = clock()
        try:
            with get(url, time.monotonic() + timeout_s, tls, headers, WATCH_IDLE_S) as (stream, deadline):
                on_line = _extending(deadline)
                on_line()
                ended, last_id = _print_changes(server_sent_events(stream, on_line), out, url, last_id)
        except HttpError as e:
            raise SystemExit(f"status-store: {e.message} (HTTP {e.status})") from None
        except DeadlinePassed:
            raise SystemExit(f"status-store: {url} answered no stream within {timeout_s:g} s, or sent no complete "
                             f"line within {WATCH_IDLE_S:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            raise SystemExit(f"status-store: cannot read {url}: {escape_text(str(e) or type(e).__name__)}") from None
        except TooLarge as e:
            raise SystemExit(f"status-store: {url} sent {e}: not an event stream of status-store") from None
        except ValueError as e:  # not a URL
            raise SystemExit(f"status-store: {escape_text(str(e))}") from None
        if ended is None:
            raise SystemExit(f"status-store: {url} ended the stream")
        print(f"status-store: {ended}", file=sys.stderr, flush=True)
        if "reconnect" not in ended:
            if last_id:
                print(f"status-store: to resume where this stopped: status-store watch --last-event-id {last_id}",
                      file=sys.stderr, flush=True)
            return 0
        in_a_row = 0 if clock() - opened >= RECONNECT_MAX_MS / 1000 else in_a_row + 1
        if in_a_row:
            wait = backoff.delay(in_a_row - 1)
            print(f"status-store: reconnecting in {wait:.1f} s", file=sys.stderr, flush=True)
            sleep(wait)


def _print_changes(events: Iterator[ServerSentEvent], out: TextIO, url: str,
                   last_id: str | None) -> tuple[str | None, str | None]:
    """Print each change; a malformed event is one line on stderr. Returns the message of the ``error`` event that
    ended the stream (None: it ended without one) and the id of the last event read."""
    for event in events:
        if event.id is not None:
            if _SENDABLE_ID.fullmatch(event.id):
                last_id = event.id
            else:
                _skipped(url, f"an event id that cannot be sent back ({escape_text(repr(event.id))})")
        try:
            if event.problem is not None:
                raise MalformedAnswer(event.problem)
            try:
                data = parse_json(event.data)
            except ValueError:
                raise MalformedAnswer("its data is not JSON") from None
            if event.name == "error":
                message = data.get("message") if isinstance(data, dict) else None
                return escape_text(str(message)), last_id
            line = change_line(event.name, data)
        except MalformedAnswer as e:
            _skipped(url, f"an event ({e})")
            continue
        print(line, file=out, flush=True)
    return None, last_id


def _skipped(url: str, what: str) -> None:
    print(f"status-store: skipped {what} from {url}", file=sys.stderr, flush=True)


def _extending(deadline: Deadline) -> Callable[[], None]:
    """What moves a stream's deadline on after each line: the next line is due within ``WATCH_IDLE_S``."""
    return lambda: deadline.extend(time.monotonic() + WATCH_IDLE_S)


def change_line(name: str, data: object) -> str:
    """One change for a person, escaped: when, what, and its new status; MalformedAnswer for data that is not an
    event of ``GET /events``."""
    timestamp = data.get("timestamp") if isinstance(data, dict) else None
    if not isinstance(timestamp, int | float | None) or isinstance(timestamp, bool):
        raise MalformedAnswer("its timestamp is not a number")
    try:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp)) if timestamp is not None else "-" * 20
    except (OverflowError, OSError, ValueError):
        raise MalformedAnswer("its timestamp is out of range") from None
    kind = field(data, "kind", str, "the event")
    if name == "worker":
        member = escape_text(field(data, "worker_id", str, "the event"))
        assert isinstance(data, dict)
        if isinstance(data.get("stuck"), bool):
            return (f"{when}  worker {member}  stuck in the Connect group: {_text(data.get('probe'))}: "
                    f"{_text(data.get('message'))}" if data["stuck"] else f"{when}  worker {member}  answers again")
        back = field(data, "up", bool, "the event")
        return f"{when}  worker {member}  {'back in the Connect group' if back else 'gone from the Connect group'}"
    if kind not in _KINDS:
        raise MalformedAnswer(f"its kind is not one of {', '.join(_KINDS)}")
    connector = escape_text(field(data, "connector", str, "the event"))
    assert isinstance(data, dict)
    what = {"connector": f"connector {connector}", "task": f"task {connector}/{_text(data.get('task'))}",
            "topic": f"topic {_text(data.get('topic'))} of {connector}"}[kind]
    if name == "deleted":
        return f"{when}  {what}  deleted"
    if name == "restart" and data.get("result") == "skipped":
        return (f"{when}  {what}  not restarted by the sidecar ({_text(data.get('skipped'))}): "
                f"{_text(data.get('reason'))}  worker {_text(data.get('worker_id'))}")
    if name == "restart":
        return (f"{when}  {what}  restart {_text(data.get('attempt'))} by the sidecar: {_text(data.get('result'))}  "
                f"worker {_text(data.get('worker_id'))}")
    if kind == "topic":
        return f"{when}  {what}  used by task {_text(data.get('task'))}"
    state = escape_text(field(data, "state", str, "the event"))
    worker = data.get("worker_id")
    trace = data.get("trace")
    failure = data.get("failure")
    why = (f"  ({_text(failure.get('class'))} failure)" if isinstance(failure, dict) and failure.get("class")
           in ("transient", "user") else "")
    return (f"{when}  {what}  {state}  worker {_text(worker) if worker is not None else '-'}  "
            f"generation {_text(data.get('generation'))}" + (f"  {_text(trace)}" if trace else "") + why)


def _text(value: object) -> str:
    """A value from the service as printable text."""
    return escape_text(value if isinstance(value, str) else json.dumps(value))
