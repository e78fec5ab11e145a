"""The status page (GET /ui) in a real browser: Debian's headless Chromium driven by Playwright, against
``status-store serve`` on Apache Kafka's broker, with statuses written by a plain producer in Connect's bytes.

Every page of these tests is watched: a request that leaves 127.0.0.1, a script error or a dialog fails the test.
"""

from __future__ import annotations

import http.client
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Browser, Page, Request, Route, sync_playwright

from harness import free_port
from harness.real_connect import http as http_request
from harness.real_kafka import KafkaCluster
from harness.service import Service, sidecar_config
from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, connector_key, task_key

from .helpers import eventually_value

pytestmark = pytest.mark.timeout(300)

CHROMIUM = shutil.which("chromium")
# As the machine's own probe starts it: no sandbox (root), no GPU, and none of the background traffic Chromium
# sends to Google's hosts.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update", "--disable-default-apps"]
WAIT_MS = 20_000
CONNECTOR_ROWS = ".row.connector:not([hidden])"
TRACE = "java.lang.IllegalStateException: the sink's table is gone\n\tat io.example.Sink.put(Sink.java:42)\n"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (./scripts/test.sh installs it: apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@dataclass
class Sidecar:
    """``status-store serve`` on a topic of its own on Apache Kafka, a producer writing as Connect writes, and the
    pages opened on it (each watched for requests off 127.0.0.1, script errors and dialogs)."""

    kafka: KafkaCluster
    directory: Path
    topic: str = field(default_factory=lambda: f"ui-{uuid.uuid4().hex[:8]}")
    port: int = field(default_factory=free_port)
    settings: dict[str, str] = field(default_factory=dict)
    service: Service | None = None
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Compacted, as Connect creates its status topic (the sidecar refuses any other).
        self.kafka.create_topic(self.topic, 5, 1, {"cleanup.policy": "compact"})
        self.producer = Producer({"bootstrap.servers": self.kafka.bootstrap_servers, "partitioner": "murmur2_random",
                                  "log_level": 0})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = sidecar_config(self.directory, self.kafka.bootstrap_servers, self.topic, self.settings)
        self.service = Service("--config", str(config), "--port", str(self.port))
        self.service.wait_for("Status page: ")

    def stop(self) -> None:
        if self.service is not None:
            service, self.service = self.service, None
            with service:  # reaped even when it does not stop cleanly
                assert service.stop() == 0

    def write(self, key: str, state: State | None, worker: str = "10.0.0.7:8083", trace: str | None = None,
              generation: int = 3) -> None:
        """A status record as a Connect 4.x worker writes it (None: a tombstone)."""
        value = None if state is None else encode_status(state, worker, generation, trace, "2.4.1")
        self.producer.produce(self.topic, value, key.encode())

    def flush(self) -> None:
        assert self.producer.flush(15) == 0

    def open(self, browser: Browser, hold: list[Route] | None = None) -> Page:
        """A page on the sidecar; with ``hold``, its GET /fleet requests are held there (the test lets them go)."""
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def local_only(route: Route, request: Request) -> None:
            if urlsplit(request.url).hostname != "127.0.0.1":
                self.problems.append(f"a request left 127.0.0.1: {request.url}")
                route.abort()
            else:
                route.continue_()

        page.route("**/*", local_only)
        if hold is not None:
            # Routes match newest first: this one before local_only.
            page.route("**/fleet", lambda route: hold.append(route))
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))
        page.on("dialog", lambda dialog: (self.problems.append(f"a dialog opened: {dialog.message}"),
                                          dialog.dismiss()))
        page.goto(self.url + "/ui")
        return page


@pytest.fixture
def sidecar(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Sidecar]:
    running = Sidecar(kafka, tmp_path)
    yield running
    running.stop()
    assert not running.problems, running.problems


def row(page: Page, connector: str, task: int | None = None) -> str:
    """The selector of a connector's row, or of one of its tasks' rows."""
    quoted = connector.replace("\\", "\\\\").replace('"', '\\"')
    kind = "connector" if task is None else "task"
    task_part = "" if task is None else f'[data-task="{task}"]'
    return f'.row.{kind}[data-connector="{quoted}"]{task_part}'


def state_of(page: Page, connector: str, task: int | None = None) -> str:
    return page.inner_text(row(page, connector, task) + " .state")


def wait_for(page: Page, condition: Callable[[], bool], what: str) -> None:
    """Wait, bounded, until ``condition()`` holds, the page handling its events meanwhile."""
    eventually_value(condition, bool, timeout=WAIT_MS / 1000, interval=0.05, what=what,
                     pause=lambda seconds: page.wait_for_timeout(seconds * 1000))


def changes(page: Page) -> int:
    return int(page.inner_text("#changes").split()[0])


def test_the_page_lists_what_the_topic_holds_worst_first_and_shows_each_change_without_a_reload(
        sidecar: Sidecar, browser: Browser) -> None:
    sidecar.settings["sidecar.rest.token"] = "a-token-the-page-never-needs"  # the page only reads
    for name, state in (("orders-sink", State.RUNNING), ("billing-source", State.RUNNING), ("audit", State.PAUSED)):
        sidecar.write(connector_key(name), state)
        sidecar.write(task_key(TaskId(name, 0)), state)
    sidecar.write(task_key(TaskId("orders-sink", 1)), State.FAILED, trace=TRACE)
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    page.wait_for_selector(row(page, "orders-sink"), timeout=WAIT_MS)
    names = page.eval_on_selector_all(CONNECTOR_ROWS, "rows => rows.map(r => r.dataset.connector)")
    assert names == ["orders-sink", "audit", "billing-source"]  # a FAILED task first, then PAUSED, then RUNNING
    counts = page.inner_text("#counts")
    assert "3 connectors" in counts
    assert "1 tasks FAILED" in counts
    sidecar.write(task_key(TaskId("orders-sink", 1)), State.RUNNING, generation=4)
    sidecar.write(connector_key("new-one"), State.UNASSIGNED)
    sidecar.flush()
    wait_for(page, lambda: page.query_selector(row(page, "new-one")) is not None, "the new connector's row")
    wait_for(page, lambda: changes(page) == 2, "two changes applied")
    assert state_of(page, "new-one") == "UNASSIGNED"
    assert "changed" in page.get_attribute(row(page, "new-one"), "class")  # marked for a few seconds
    names = page.eval_on_selector_all(CONNECTOR_ROWS, "rows => rows.map(r => r.dataset.connector)")
    assert names == ["new-one", "audit", "billing-source", "orders-sink"]  # orders-sink RUNNING among the RUNNING


def test_a_failed_task_shows_its_worker_and_its_traces_first_line_and_the_whole_trace_on_demand(
        sidecar: Sidecar, browser: Browser) -> None:
    sidecar.write(connector_key("orders-sink"), State.RUNNING)
    sidecar.write(task_key(TaskId("orders-sink", 0)), State.RUNNING)
    sidecar.write(task_key(TaskId("orders-sink", 1)), State.FAILED, worker="10.0.0.9:8083", trace=TRACE)
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    page.click(row(page, "orders-sink"), timeout=WAIT_MS)
    page.wait_for_selector(row(page, "orders-sink", 1), timeout=WAIT_MS)
    assert state_of(page, "orders-sink", 1) == "FAILED"
    assert page.inner_text(row(page, "orders-sink", 1) + " .worker") == "10.0.0.9:8083"
    first_line = page.inner_text('.row.trace[data-connector="orders-sink"][data-task="1"] .name')
    assert first_line == "java.lang.IllegalStateException: the sink's table is gone…"
    page.click('.row.trace[data-connector="orders-sink"][data-task="1"] button')
    wait_for(page, lambda: page.inner_text("#trace-text") == TRACE, "the whole trace, from GET .../status")
    assert page.inner_text("#trace-title") == "orders-sink, task 1"


def test_a_failed_task_says_its_failure_class_and_what_it_needs_read_at_the_start_and_as_it_happens(
        sidecar: Sidecar, browser: Browser) -> None:
    refused = ("org.apache.kafka.connect.errors.ConnectException: cannot write\n\tat a.b(C.java:1)\n"
               "Caused by: java.net.ConnectException: Connection refused\n\tat d.e(F.java:2)\n")
    password = ("org.apache.kafka.connect.errors.ConnectException: java.sql.SQLException: login\n\tat a.b(C.java:1)\n"
                "Caused by: java.sql.SQLException: FATAL: password authentication failed for user \"connect\"\n")
    sidecar.write(connector_key("jdbc"), State.RUNNING)
    sidecar.write(task_key(TaskId("jdbc", 0)), State.FAILED, trace=password)
    sidecar.write(task_key(TaskId("jdbc", 1)), State.RUNNING)
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    page.click(row(page, "jdbc"), timeout=WAIT_MS)
    page.wait_for_selector(row(page, "jdbc", 0), timeout=WAIT_MS)
    # Read from GET /fleet: the state says FAILED (its class beside it, not in its text), the trace's line says why.
    assert state_of(page, "jdbc", 0) == "FAILED"
    assert page.get_attribute(row(page, "jdbc", 0) + " .state", "data-failure") == "user"
    failure = page.inner_text('.row.trace[data-connector="jdbc"][data-task="0"] .failure')
    assert failure.startswith("user failure (credentials): Fix the credentials")
    # From GET /events as it happens: task 1 fails on a refused connection, a transient failure.
    sidecar.write(task_key(TaskId("jdbc", 1)), State.FAILED, trace=refused)
    sidecar.flush()
    wait_for(page, lambda: page.get_attribute(row(page, "jdbc", 1) + " .state", "data-failure") == "transient",
             "task 1's failure class from its event")
    title = page.get_attribute(row(page, "jdbc", 1) + " .state", "title") or ""
    assert title.startswith("transient failure (network): ConnectException: Connection refused")


def test_a_connectors_record_opens_from_its_row(sidecar: Sidecar, browser: Browser) -> None:
    """The record (GET /connectors/{name}/history): statuses written through the sidecar are in its history topic."""
    sidecar.settings["status.storage.history.topic"] = f"{sidecar.topic}-history"
    sidecar.start()
    for path, state in (("/connectors/billing/status", "RUNNING"), ("/connectors/billing/tasks/0/status", "RUNNING"),
                        ("/connectors/billing/tasks/0/status", "FAILED")):
        answer = http_request("PUT", f"{sidecar.url}{path}?wait=true", {"state": state, "worker_id": "10.0.0.7:8083",
                                                                 "generation": 1})
        assert answer.status in (200, 202), answer
    page = sidecar.open(browser)
    page.click(row(page, "billing"), timeout=WAIT_MS)
    page.click('.row.record[data-connector="billing"] button', timeout=WAIT_MS)
    wait_for(page, lambda: page.eval_on_selector_all("#record-body tr", "rows => rows.length") >= 9,
             "the record's rows: three windows, each the connector, its tasks together and task 0")
    cells = page.eval_on_selector_all("#record-body tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert cells[0][:3] == ["1h", "connector", "100.00 %"]
    task = next(c for c in cells if c[:2] == ["1h", "task 0"])
    assert task[3] == "1"  # one failure, in the last hour
    assert "history topic" in page.inner_text("#record-note")


def test_the_whole_trace_opens_for_names_no_path_can_address(sidecar: Sidecar, browser: Browser) -> None:
    """A connector named ``..`` (the browser resolves it out of a path) or with a ``/`` (refused encoded)."""
    for name in ("..", "orders/eu"):
        sidecar.write(connector_key(name), State.FAILED, trace=f"{name}: {TRACE}")
        sidecar.write(task_key(TaskId(name, 0)), State.FAILED, trace=f"{name} task 0: {TRACE}")
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    for name in ("..", "orders/eu"):
        page.click(row(page, name), timeout=WAIT_MS)
        for task, trace in (("", f"{name}: {TRACE}"), ("0", f"{name} task 0: {TRACE}")):
            page.click(f'.row.trace[data-connector="{name}"][data-task="{task}"] button', timeout=WAIT_MS)
            wait_for(page, lambda trace=trace: page.inner_text("#trace-text") == trace, f"the whole trace of {name!r}")
            page.click("#trace-close")


def test_the_filter_narrows_the_list_by_name_state_and_worker(sidecar: Sidecar, browser: Browser) -> None:
    for n in range(12):
        name = f"{'orders' if n % 2 else 'billing'}-{n}"
        sidecar.write(connector_key(name), State.FAILED if n % 3 == 0 else State.RUNNING,
                      worker=f"worker-{n % 4}:8083", trace=TRACE if n % 3 == 0 else None)
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    wait_for(page, lambda: len(page.query_selector_all(CONNECTOR_ROWS)) == 12, "twelve rows")

    def shown() -> list[str]:
        return sorted(page.eval_on_selector_all(CONNECTOR_ROWS, "rows => rows.map(r => r.dataset.connector)"))

    page.fill("#filter-name", "ORDERS")
    wait_for(page, lambda: shown() == sorted(f"orders-{n}" for n in range(1, 12, 2)), "orders only")
    page.select_option("#filter-state", "FAILED")
    wait_for(page, lambda: shown() == ["orders-3", "orders-9"], "failed orders only")
    page.fill("#filter-name", "")
    page.select_option("#filter-state", "not-running")
    page.fill("#filter-worker", "worker-0")
    wait_for(page, lambda: shown() == ["billing-0"], "not running on worker-0")
    assert page.inner_text("#shown") == "1 of 12 connectors shown"


def test_a_cut_stream_resumes_without_losing_or_repeating_a_change(sidecar: Sidecar, browser: Browser) -> None:
    sidecar.start()
    page = sidecar.open(browser)
    wait_for(page, lambda: page.inner_text("#stream") == "live", "the stream live")
    for n in range(3):
        sidecar.write(connector_key(f"before-{n}"), State.RUNNING)
    sidecar.flush()
    wait_for(page, lambda: changes(page) == 3, "three changes")
    sidecar.stop()  # every stream is cut
    wait_for(page, lambda: page.inner_text("#stream").startswith("stream down"), "the page says the stream is down")
    sidecar.write(connector_key("before-0"), State.FAILED, trace=TRACE)
    for n in range(4):
        sidecar.write(connector_key(f"during-{n}"), State.PAUSED)
    sidecar.flush()
    sidecar.start()  # the same port: the page reconnects with its Last-Event-ID
    wait_for(page, lambda: changes(page) == 8, "the five changes made while it was down, each once")
    page.wait_for_timeout(2000)
    assert changes(page) == 8
    assert page.inner_text("#stream") == "live"
    assert state_of(page, "before-0") == "FAILED"
    assert [state_of(page, f"during-{n}") for n in range(4)] == ["PAUSED"] * 4


def test_the_page_says_live_once_it_holds_the_statuses_and_counts_each_change_made_after(
        sidecar: Sidecar, browser: Browser) -> None:
    """The page subscribes to GET /events, then reads GET /fleet. It said "live" as soon as the stream answered, before
    GET /fleet's answer: a change made in between (a loaded machine's GET /fleet took that long) came in the answer, not
    as a change, so the page never counted nor marked it (test_a_cut_stream_resumes_without_losing_or_repeating_a_change
    waited 20 s for three changes written once the page said "live")."""
    sidecar.start()
    held: list[Route] = []
    page = sidecar.open(browser, hold=held)
    wait_for(page, lambda: len(held) == 1, "the page's GET /fleet, once its stream is subscribed")
    assert page.inner_text("#stream") != "live"
    for n in range(3):
        sidecar.write(connector_key(f"before-{n}"), State.RUNNING)
    sidecar.flush()
    eventually_value(lambda: len(http_request("GET", sidecar.url + "/fleet").json()["connectors"]), lambda n: n == 3,
                     timeout=WAIT_MS / 1000, what="the sidecar read the three statuses",
                     pause=lambda seconds: page.wait_for_timeout(seconds * 1000))
    held.pop().continue_()
    wait_for(page, lambda: page.inner_text("#stream") == "live", "live once GET /fleet is read")
    assert [state_of(page, f"before-{n}") for n in range(3)] == ["RUNNING"] * 3
    assert changes(page) == 0  # in the statuses read, not changes on top of them
    sidecar.write(connector_key("before-1"), State.PAUSED)
    sidecar.flush()
    wait_for(page, lambda: changes(page) == 1, "the change made once the page said live")
    assert state_of(page, "before-1") == "PAUSED"


HOSTILE = ['<img src=x onerror="window.__pwned=1">', '<script>window.__pwned=2</script>',
           "\u202eevil\u202c \x1b[2J\x1b]0;title\x07", "a\"]' onmouseover='window.__pwned=3"]


def test_hostile_names_worker_ids_and_traces_stay_text(sidecar: Sidecar, browser: Browser) -> None:
    for name in HOSTILE:
        sidecar.write(connector_key(name), State.FAILED, worker='<b onclick="window.__pwned=4">w</b>',
                      trace='<script>window.__pwned=5</script>\x1b[31m red\n<img src=x onerror="window.__pwned=6">')
        sidecar.write(task_key(TaskId(name, 0)), State.FAILED, trace="<iframe src=http://example.com></iframe>")
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    wait_for(page, lambda: len(page.query_selector_all(CONNECTOR_ROWS)) == len(HOSTILE), "every row")
    for name in HOSTILE:
        page.click(row(page, name))
    page.hover(".row.connector >> nth=0")
    page.click('.row.trace[data-task=""] button >> nth=0')  # a connector's own trace
    wait_for(page, lambda: "window.__pwned=6" in page.inner_text("#trace-text"), "a whole trace, as text")
    shown = page.eval_on_selector_all(".row.connector:not([hidden]) .name", "cells => cells.map(c => c.textContent)")
    assert sorted(shown) == sorted(HOSTILE)
    assert page.evaluate("window.__pwned") is None
    made = page.eval_on_selector_all("#list *, #trace-dialog *", "els => [...new Set(els.map(e => e.tagName))]")
    assert set(made) <= {"DIV", "SPAN", "BUTTON", "H2", "PRE"}, made
    # The policy that makes the page's own script the only one that can run.
    policy = page.evaluate("fetch('/ui').then(r => r.headers.get('content-security-policy'))")
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert "unsafe" not in policy


def test_a_thousand_connectors_render_only_what_is_visible(sidecar: Sidecar, browser: Browser,
                                                           tmp_path: Path) -> None:
    for n in range(1000):
        state = State.FAILED if n % 97 == 0 else State.PAUSED if n % 41 == 0 else State.RUNNING
        name = f"connector-{n:04d}"
        sidecar.write(connector_key(name), state, worker=f"10.0.{n % 8}.{n % 5}:8083",
                      trace=TRACE if state is State.FAILED else None)
        for task in range(3):
            sidecar.write(task_key(TaskId(name, task)), state, worker=f"10.0.{task}.1:8083",
                          trace=TRACE if state is State.FAILED else None)
    sidecar.flush()
    sidecar.start()
    page = sidecar.open(browser)
    wait_for(page, lambda: page.inner_text("#shown") == "1000 of 1000 connectors shown", "all thousand")
    assert len(page.query_selector_all(".row:not([hidden])")) < 80  # the rows in view, not a thousand
    page.click(row(page, "connector-0000"))
    page.screenshot(path=str(tmp_path / "status-page-1000.png"))
    assert (tmp_path / "status-page-1000.png").stat().st_size > 10_000
    page.evaluate("document.getElementById('list').scrollTop = 1e9")
    wait_for(page, lambda: page.query_selector(row(page, "connector-0999")) is not None, "the last row on scrolling")


def test_while_the_stream_is_refused_the_page_shows_the_fleet_and_says_the_stream_waits(
        sidecar: Sidecar, browser: Browser) -> None:
    """GET /events refuses a new stream at its bound of clients (one here, held by another client that cannot be
    displaced in its first minute): the page showed "0 of 0 connectors" for up to 60 s. It reads GET /fleet instead
    and says the live stream waits; once the stream opens it resumes after what it read, missing nothing."""
    sidecar.settings["sidecar.events.subscribers.max"] = "1"
    for name, state in (("kept-running", State.RUNNING), ("kept-failed", State.FAILED)):
        sidecar.write(connector_key(name), state)
        sidecar.write(task_key(TaskId(name, 0)), state)
    sidecar.flush()
    sidecar.start()
    holder = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=WAIT_MS / 1000)
    holder.request("GET", "/events", headers={"Accept": "text/event-stream"})
    held = holder.getresponse()  # kept: the stream lives as long as its answer is open
    assert held.status == 200
    try:
        page = sidecar.open(browser)
        wait_for(page, lambda: page.inner_text("#stream").startswith("live stream waiting (GET /events: 503)"),
                 "the page says the live stream waits")
        page.wait_for_selector(row(page, "kept-failed"), timeout=WAIT_MS)
        assert state_of(page, "kept-running") == "RUNNING"
        assert "2 connectors" in page.inner_text("#counts")
        sidecar.write(connector_key("while-waiting"), State.PAUSED)
        sidecar.flush()
    finally:
        held.close()
        holder.close()
    wait_for(page, lambda: page.inner_text("#stream") == "live", "the stream live once a place is free")
    wait_for(page, lambda: page.query_selector(row(page, "while-waiting")) is not None, "the change made meanwhile")
    before = changes(page)
    sidecar.write(connector_key("kept-running"), State.PAUSED, generation=4)
    sidecar.flush()
    wait_for(page, lambda: changes(page) == before + 1, "a change applied live, once")
    assert state_of(page, "kept-running") == "PAUSED"
