"""``status-store status`` and ``watch``: topic text is printed with terminal controls escaped (against the real
service), and an answer that is not the service's (from a server on 127.0.0.1 that sends malformed data on
purpose) is one clear line, never a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config
from status_store import client
from status_store.client import show_status, watch

from .conftest import Broker
from .helpers import eventually, write_raw
from .test_events import ServedFactory, serve, status  # noqa: F401  (serve: the fixture)

WAIT = 20.0
# A terminal's escape sequences (set the window title, clear the screen, a C1 control sequence introducer) and a
# right-to-left override, as a name, worker id and trace written to the status topic by any writer.
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\u202etxt\x9b31m"
# What may never reach a terminal raw: C0 controls (but the line ends), DEL, C1, bidirectional controls.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


async def test_status_and_watch_print_topic_text_with_terminal_controls_escaped(serve: ServedFactory) -> None:  # noqa: F811
    async with serve() as served:
        printed = io.StringIO()
        watching = asyncio.ensure_future(asyncio.to_thread(watch, served.url, None, printed))
        await eventually(lambda: served.hub.subscribers == 1)
        failed = status("FAILED", worker_id=HOSTILE, trace=f"{HOSTILE}\nat x")
        write_raw(served.store, (f"status-connector-{HOSTILE}".encode(), failed),
                  (f"status-task-{HOSTILE}-0".encode(), status("RUNNING", worker_id=HOSTILE)))
        await served.store.read_to_end(WAIT)
        await eventually(lambda: printed.getvalue().count("\n") == 2)
        served.hub.close()  # the service stops: the stream ends, and so does the watch
        assert await asyncio.wait_for(watching, WAIT) == 0
        table = io.StringIO()
        assert await asyncio.to_thread(show_status, served.url, None, table) == 0
    for output in (printed.getvalue(), table.getvalue()):
        assert RAW_CONTROL.search(output) is None, output
        assert "evil\\u001b]0;pwned\\u0007\\u001b[2J\\u202etxt\\u009b31m" in output
    assert table.getvalue().count("\n") == 3  # the heading, the connector and its task: one line each


# What an endless answer sends at most (then it ends), for a client that never stops reading.
ENDLESS_CAP = 64 << 20


@dataclass(frozen=True)
class Endless:
    """An answer that sends ``chunk`` again and again."""

    chunk: bytes


class HostileServer:
    """An HTTP server on 127.0.0.1 that answers each path with canned bytes (or endless ones), in turn, and notes the
    Last-Event-ID of each request. A content type ``status NNN`` answers that status with the bytes as its body."""

    def __init__(self, answers: dict[str, list[tuple[str, bytes | Endless]]]) -> None:
        self.answers = answers
        self.last_event_ids: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.last_event_ids.append(self.headers.get("Last-Event-ID"))
                content_type, body = server.answers[self.path].pop(0)
                status = int(content_type.split(" ")[1]) if content_type.startswith("status ") else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if status != 200 else content_type)
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                # Endless: the same bytes again and again, until the client goes (or ENDLESS_CAP, in case it never
                # does: then the answer ends).
                self.end_headers()
                sent = 0
                with contextlib.suppress(OSError):
                    while sent < ENDLESS_CAP:
                        self.wfile.write(body.chunk)
                        sent += len(body.chunk)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[HostileServer]:
        thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join(WAIT)


def event(data: bytes, event_id: bytes | None = None, name: bytes = b"status") -> bytes:
    """An event as a text/event-stream frames it."""
    head = b"id: " + event_id + b"\n" if event_id is not None else b""
    return head + b"event: " + name + b"\ndata: " + data + b"\n\n"


GOOD = json.dumps({"kind": "task", "connector": "sink", "task": 0, "state": "FAILED", "worker_id": "w:2",
                   "generation": 4, "trace": "Boom", "timestamp": 0}).encode()


def test_watch_skips_malformed_events_with_one_line_each_and_resumes_after_the_last_good_id(
        capsys: pytest.CaptureFixture[str]) -> None:
    dropped = json.dumps({"message": "this client fell too far behind and was dropped: reconnect with the id of "
                                     "the last event received"}).encode()
    first = b"".join([
        b": subscribed\n\n",
        event(b"\xff\xfe", b"0:1"),  # not UTF-8
        event(b"{not json", b"0:2"),
        event(b'{"kind":"task"}', b"0:3"),  # fields missing
        event(b'{"kind":"task","connector":"sink","state":"RUNNING","timestamp":1e300}', b"0:3"),  # out of range
        # A CR ends a line, as the format says: the id is 0:4 ("bad" is a field of its own, unknown).
        event(GOOD, b"0:4\rbad"),
        event(GOOD, "0:\u00e95".encode()),  # an id no Last-Event-ID header can carry: the event is kept
        event(dropped, name=b"error"),
    ])
    stopping = event(json.dumps({"message": "the server is stopping"}).encode(), name=b"error")
    server = HostileServer({"/events": [("text/event-stream", first), ("text/event-stream", stopping)]})
    printed = io.StringIO()
    with server.running():
        assert watch(server.url, None, printed) == 0
    assert server.last_event_ids == [None, "0:4"]
    assert printed.getvalue() == "1970-01-01T00:00:00Z  task sink/0  FAILED  worker w:2  generation 4  Boom\n" * 2
    problems = capsys.readouterr().err.splitlines()
    assert [line for line in problems if "skipped" in line] == [
        f"status-store: skipped an event (a line of it is not UTF-8) from {server.url}/events",
        f"status-store: skipped an event (its data is not JSON) from {server.url}/events",
        f"status-store: skipped an event (the event has no 'connector' of the expected kind) from {server.url}/events",
        f"status-store: skipped an event (its timestamp is out of range) from {server.url}/events",
        f"status-store: skipped an event id that cannot be sent back ('0:\u00e95') from {server.url}/events",
    ]
    assert problems[-1] == "status-store: to resume where this stopped: status-store watch --last-event-id 0:4"


@pytest.mark.parametrize(("answer", "why"), [
    (b"\xff\xfe{}", "did not answer JSON"),
    (b"<html>a proxy's error page</html>", "did not answer JSON"),
    (b'{"a":{"status":{"name":"a"}}}', "the status has no 'type'"),
    (b'{"a":{"status":{"name":"a","type":"sink","connector":{"state":"RUNNING","worker_id":"w"},'
     b'"tasks":[{"id":"zero","state":"RUNNING","worker_id":"w"}]}}}', "a task status has no 'id'"),
    (b'{"a":{"status":{"name":"a","type":"sink","connector":{"state":"RUNNING","worker_id":7},"tasks":[]}}}',
     "the connector's status has no 'worker_id'"),
    (b'["a"]', "the list of connectors is not a JSON object"),
])
def test_status_answers_that_are_not_statuses_are_one_clear_line(answer: bytes, why: str) -> None:
    server = HostileServer({"/connectors?expand=status": [("application/json", answer)]})
    with server.running(), pytest.raises(SystemExit) as failed:
        show_status(server.url, None, io.StringIO())
    message = str(failed.value.code)
    assert message.startswith("status-store: ")
    assert why in message
    assert "\n" not in message



NESTED = b"[" * 100_000 + b"]" * 100_000


def test_json_nested_deeper_than_the_parser_goes_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    """An answer, an event's data and an error's body, each nested 100,000 deep: no RecursionError traceback."""
    server = HostileServer({"/connectors?expand=status": [("application/json", NESTED)],
                            "/connectors/c/status": [("status 503", b'{"message":' + NESTED + b"}")],
                            "/events": [("text/event-stream", event(NESTED, b"0:1") + event(
                                json.dumps({"message": "the server is stopping"}).encode(), name=b"error"))]})
    with server.running():
        with pytest.raises(SystemExit) as answer:
            show_status(server.url, None, io.StringIO())
        with pytest.raises(SystemExit) as error_body:
            show_status(server.url, "c", io.StringIO())
        assert watch(server.url, None, io.StringIO()) == 0
    assert str(answer.value.code) == (f"status-store: {server.url}/connectors?expand=status did not answer JSON "
                                      "(nested too deeply)")
    assert str(error_body.value.code) == "status-store: Service Unavailable (HTTP 503)"
    assert f"status-store: skipped an event (its data is not JSON) from {server.url}/events" in (
        capsys.readouterr().err.splitlines())


def test_an_endless_answer_or_line_ends_the_command_with_one_line_at_its_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An endless body grew ``status`` to 3.44 GB and an endless line ``watch`` to 2.46 GB: each read is bounded."""
    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 1 << 20)
    server = HostileServer({"/connectors?expand=status": [("application/json", Endless(b'["' + b"x" * 65536))],
                            "/events": [("text/event-stream", Endless(b"data: " + b"x" * 65536))]})
    with server.running():
        with pytest.raises(SystemExit) as body:
            show_status(server.url, None, io.StringIO())
        with pytest.raises(SystemExit) as line:
            watch(server.url, None, io.StringIO())
    assert str(body.value.code) == (f"status-store: {server.url}/connectors?expand=status answered more than "
                                    "1,048,576 bytes; not read")
    assert str(line.value.code) == (f"status-store: {server.url}/events sent a line longer than 1,048,576 bytes: not "
                                    "an event stream of status-store")


def test_watch_reconnects_after_a_backoff_that_doubles_with_jitter(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that drops every stream at once was asked 3,784 times in 4.8 s: the waits double (half of each is
    random: here the middle of its range), from 0.5 s, and a stream that lasts starts over."""
    dropped = event(json.dumps({"message": "this client fell too far behind and was dropped: reconnect with the id of "
                                           "the last event received"}).encode(), name=b"error")
    stopping = event(json.dumps({"message": "the server is stopping"}).encode(), name=b"error")
    server = HostileServer({"/events": [("text/event-stream", event(GOOD, b"0:1") + dropped)]
                            + [("text/event-stream", dropped)] * 5 + [("text/event-stream", stopping)]})
    slept: list[float] = []
    # Each stream lasts no time, but for the fourth, which lasts a minute: the waits start over after it.
    lasted = iter([0, 0, 0, 0, 0, 0, 0, 60, 60, 60, 0, 0, 0, 0])
    with server.running():
        assert watch(server.url, None, io.StringIO(), sleep=slept.append, clock=lambda: next(lasted),
                     rng=lambda: 0.5) == 0
    assert slept == [0.5, 1.0, 2.0, 0.5, 1.0]
    assert server.last_event_ids == [None, *["0:1"] * 6]
    assert capsys.readouterr().err.count("status-store: reconnecting in ") == 5


def start_watch(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "status_store.cli", "watch", "--url", url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_watch_ends_when_the_service_stops_and_resumes_after_a_restart_from_the_id_it_named(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    """The decision: watch does not wait for a service that stops (it may be gone for good): it exits 0, naming the
    id to resume from, and ``--last-event-id`` after a restart prints what changed meanwhile, nothing twice."""
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    watchers: list[subprocess.Popen[str]] = []
    try:
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            watchers.append(start_watch(url))
            async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                await eventually(lambda: "status_events_subscribers 1.0" in httpx.get(f"{url}/metrics").text)
                written = await http.put("/connectors/a/status", params={"wait": "true"},
                                         json={"state": "RUNNING", "worker_id": "w:1", "generation": 1})
                assert written.status_code == 200
            first = watchers[0]
            assert first.stdout is not None
            assert first.stderr is not None
            assert "connector a  RUNNING" in await asyncio.wait_for(asyncio.to_thread(first.stdout.readline), WAIT)
            assert service.stop() == 0
            assert await asyncio.to_thread(first.wait, WAIT) == 0
            hint = first.stderr.read().splitlines()[-1]
            assert hint.startswith("status-store: to resume where this stopped: status-store watch --last-event-id ")
            # While the service is down, a Connect worker writes on.
            producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "partitioner": "murmur2_random"})
            producer.produce(topic, status("PAUSED"), b"status-connector-b")
            assert producer.flush(WAIT) == 0
        with Service("--config", str(config), "--port", str(port)) as service:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            watchers.append(start_watch(url, "--last-event-id", hint.rsplit(" ", 1)[1]))
            second = watchers[1]
            assert second.stdout is not None
            assert "connector b  PAUSED" in await asyncio.wait_for(asyncio.to_thread(second.stdout.readline), WAIT)
            assert service.stop() == 0
            assert await asyncio.to_thread(second.wait, WAIT) == 0
            assert second.stdout.read() == ""  # a's change came before the id: not printed again
    finally:
        for watcher in watchers:
            if watcher.poll() is None:
                watcher.kill()


class DrippingServer:
    """A server on 127.0.0.1 that answers every request a byte at a time, one every ``interval_s`` (after ``head``
    whole, when given), for at most ``DRIP_S``: every read gets data in time, and the answer never completes."""

    DRIP_S = 30.0

    def __init__(self, head: bytes = b"", interval_s: float = 0.2) -> None:
        self.head, self.interval_s = head, interval_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()

    def _serve(self) -> None:
        self._listener.settimeout(0.1)  # a closed listener does not wake accept(): it looks at the stop flag
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(None)
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(self.head)
            # The trickle is the fault: a byte per interval for DRIP_S (bounded), whatever the client does.
            ends = time.monotonic() + self.DRIP_S
            while time.monotonic() < ends and not self._stop.is_set():
                connection.sendall(b"x" if self.head else b"HTTP/1.1 200 OK\r\n"[:1])
                time.sleep(self.interval_s)

    @contextmanager
    def running(self) -> Iterator[DrippingServer]:
        thread = threading.Thread(target=self._serve, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._listener.close()
            thread.join(WAIT)


def test_a_server_that_trickles_bytes_cannot_hold_status_past_its_deadline() -> None:
    """A server that sent a byte every 5 s held ``status`` for 25 s and more (each read got its byte in time): the
    command has one deadline for the whole of it."""
    with DrippingServer().running() as server, pytest.raises(SystemExit) as caught:
        show_status(server.url, None, io.StringIO(), timeout_s=1.0)
    assert str(caught.value.code) == (f"status-store: no complete answer from {server.url}/connectors?expand=status "
                                      "within the command's time (--timeout)")


def test_a_stream_that_trickles_bytes_without_a_line_ends_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "WATCH_IDLE_S", 1.0)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: ok\n\ndata: "
    with DrippingServer(head).running() as server, pytest.raises(SystemExit) as caught:
        watch(server.url, None, io.StringIO(), timeout_s=5.0)
    assert str(caught.value.code) == (f"status-store: {server.url}/events answered no stream within 5 s, or sent no "
                                      "complete line within 1 s")
