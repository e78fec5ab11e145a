"""The status page (GET /ui) in a real browser: its time to first render, and the time from a status record
written to its row updated, at each fleet size, against what the same sidecar's own API takes in the same run.

    .venv/bin/python -m bench.ui [--connectors 100,10000] [--tasks 10] [--samples 20] [--broker kafka]
    .venv/bin/python -m bench.ui --quick    # 50 connectors of 3 tasks, 5 samples: a check that it all runs

`status-store serve` runs as a process of its own on Apache Kafka's broker (one node, the jars
./scripts/test.sh fetched; --broker embedded: its embedded broker, as --quick does). For each size, the fleet
(connectors of --tasks tasks each, a share of them not RUNNING) is written through POST /statuses (?wait=true),
then Debian's Chromium (driven by Playwright, headless) opens /ui:

- first render: from the navigation's start to the page's mark after it drew its first rows (it reads
  GET /fleet, then follows GET /events). Baseline: GET /fleet alone, the answer the page waits for, fetched by
  the bench's own HTTP client.
- record to row: a RUNNING connector's status is written FAILED with a plain producer in Connect's bytes (its
  row rises to the top, where an operator looks), and timed, in wall-clock time, until the page's DOM shows
  its row FAILED (a MutationObserver the bench adds notes the moment); then it is put back (not timed) and the
  next sample takes another connector. Baseline: the same write, timed until the sidecar's
  GET /connectors/{name}/status shows it (the sidecar has read the record back: what the page can show at
  the earliest), polled every millisecond.

Reported: medians and the 90th percentile, and the page's cost over its baseline.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from confluent_kafka import Producer
from playwright.sync_api import Page, sync_playwright

from bench import BenchParser
from harness import free_port, stop
from status_store.connect.codec import encode_status
from status_store.connect.model import State, connector_key

WAIT_S = 120.0
# How long the page marks a change (app.js's CHANGED_MS), and a little more.
CHANGED_MARK_MS = 4500
BATCH = 5000
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update", "--disable-default-apps"]


@dataclass
class Sidecar:
    url: str
    bootstrap_servers: str
    topic: str = "connect-status"


@contextmanager
def kafka_broker() -> Iterator[str]:
    """A single-node Apache Kafka (harness/real_kafka.py, the jars ./scripts/test.sh fetched), full JIT: its
    bootstrap servers."""
    from harness.java_process import kafka_line
    from harness.real_kafka import KafkaCluster  # the tests' way to run Kafka: one place for it

    with (tempfile.TemporaryDirectory() as directory,
          KafkaCluster(kafka_line("kafka-4"), Path(directory), full_jit=True) as cluster):
        cluster.create_topic("connect-status", 5, 1, {"cleanup.policy": "compact"})
        yield cluster.bootstrap_servers


@contextmanager
def serve(broker: str) -> Iterator[Sidecar]:
    """``status-store serve`` on its embedded broker, or on Apache Kafka (``broker`` "kafka"); stopped by its
    pid."""
    with contextlib.ExitStack() as stack:
        arguments = ["--port", str(free_port())]
        bootstrap = ""  # the embedded broker's, once it says
        if broker == "kafka":
            bootstrap = stack.enter_context(kafka_broker())
            config = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "sidecar.properties"
            config.write_text(f"bootstrap.servers={bootstrap}\nstatus.storage.topic=connect-status\n"
                              "status.storage.replication.factor=1\n")
            arguments += ["--config", str(config)]
        yield stack.enter_context(_serve(arguments, bootstrap))


@contextmanager
def _serve(arguments: list[str], bootstrap: str) -> Iterator[Sidecar]:
    port = int(arguments[1])
    process = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", *arguments],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + WAIT_S
        for line in process.stdout:
            if "bootstrap.servers=" in line:  # the embedded broker's
                bootstrap = line.strip().rsplit("bootstrap.servers=", 1)[1]
            if "Status page: " in line:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("status-store serve did not start")
        # Its further output is read and dropped, so that it never fills the pipe.
        threading.Thread(target=drain, args=(process,), daemon=True).start()
        yield Sidecar(f"http://127.0.0.1:{port}", bootstrap)
    finally:
        stop(process)


def drain(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for _ in process.stdout:
        pass


def post(url: str, body: object) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT_S) as answer:
        assert answer.status == 200, answer.status


def write_fleet(sidecar: Sidecar, prefix: str, connectors: int, tasks: int) -> list[str]:
    """Connectors of ``tasks`` tasks each through POST /statuses; one in 20 has a FAILED task, one in 50 is PAUSED."""
    names = [f"{prefix}-{n:05d}" for n in range(connectors)]
    updates: list[dict[str, object]] = []
    for n, name in enumerate(names):
        state = "PAUSED" if n % 50 == 7 else "RUNNING"
        updates.append({"kind": "connector", "connector": name, "state": state, "worker_id": f"10.0.{n % 16}.1:8083",
                        "generation": 1, "version": "2.4.1", "type": "sink" if n % 3 == 0 else "source"})
        for task in range(tasks):
            failed = n % 20 == 3 and task == 0
            updates.append({"kind": "task", "connector": name, "task": task, "state": "FAILED" if failed else state,
                            "worker_id": f"10.0.{task % 16}.2:8083", "generation": 1,
                            **({"trace": "java.lang.RuntimeException: boom\n\tat X.y(X.java:1)\n"} if failed else {})})
    for start in range(0, len(updates), BATCH):
        post(f"{sidecar.url}/statuses?wait=true&timeout_ms=120000", {"updates": updates[start:start + BATCH]})
    return names


def until(page: Page, condition: str) -> None:
    """Poll ``condition`` in the page (page.evaluate: the page's policy forbids what wait_for_function evaluates)."""
    deadline = time.monotonic() + WAIT_S
    while not page.evaluate(condition):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not in time: {condition}")
        time.sleep(0.005)


def api_state(sidecar: Sidecar, name: str) -> str:
    with urllib.request.urlopen(f"{sidecar.url}/connectors/{name}/status", timeout=WAIT_S) as answer:
        state: str = json.load(answer)["connector"]["state"]
        return state


# Notes, in the page, when each connector's row first shows each state (wall-clock ms): the moment the DOM has it.
WATCH_ROWS = """() => {
  window.rowsShown = new Map();
  const note = () => {
    for (const row of document.querySelectorAll('.row.connector:not([hidden])')) {
      const key = `${row.dataset.connector} ${row.querySelector('.state').textContent}`;
      if (!window.rowsShown.has(key)) { window.rowsShown.set(key, Date.now()); }
    }
  };
  new MutationObserver(note).observe(document.getElementById('spacer'),
                                     {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def shown_at(page: Page, name: str, state: str) -> float | None:
    """When the page's row of ``name`` first showed ``state`` (ms since the epoch), None while it has not."""
    at: float | None = page.evaluate("key => window.rowsShown.get(key) ?? null", f"{name} {state}")
    return at


def row_failed(page: Page, name: str) -> bool:
    return shown_at(page, name, "FAILED") is not None


def api_failed(sidecar: Sidecar, name: str) -> bool:
    return api_state(sidecar, name) == "FAILED"


def wait(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not in time: {what}")
        time.sleep(0.001)


@dataclass
class Figures:
    connectors: int
    first_render_ms: list[float]
    fleet_ms: list[float]
    row_ms: list[float]
    api_ms: list[float]


def measure(sidecar: Sidecar, browser_path: str, connectors: int, tasks: int, samples: int, renders: int,
            screenshot: Path | None = None) -> Figures:
    names = write_fleet(sidecar, f"c{connectors}", connectors, tasks)
    producer = Producer({"bootstrap.servers": sidecar.bootstrap_servers, "partitioner": "murmur2_random"})
    figures = Figures(connectors, [], [], [], [])
    for _ in range(renders):
        start = time.perf_counter()
        with urllib.request.urlopen(f"{sidecar.url}/fleet", timeout=WAIT_S) as answer:
            answer.read()
        figures.fleet_ms.append((time.perf_counter() - start) * 1000)

    def write(name: str, state: State) -> float:
        """Write a state of ``name`` as a Connect worker writes it; the wall-clock ms just before."""
        at = time.time() * 1000
        producer.produce(sidecar.topic, encode_status(state, "10.9.9.9:8083", 2, None, "2.4.1"),
                         connector_key(name).encode())
        producer.flush(WAIT_S)
        return at

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=CHROMIUM_FLAGS)
        try:
            for _ in range(renders):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{sidecar.url}/ui")
                until(page, "() => performance.getEntriesByName('status-store:first-render').length > 0")
                figures.first_render_ms.append(
                    page.evaluate("performance.getEntriesByName('status-store:first-render')[0].startTime"))
                page.close()
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{sidecar.url}/ui")
            until(page, "() => performance.getEntriesByName('status-store:first-render').length > 0"
                        " && document.getElementById('stream').textContent === 'live'")
            # The first rows, worst first: the ones shown without scrolling.
            shown = page.eval_on_selector_all(".row.connector:not([hidden])",
                                              "rows => rows.map(r => r.dataset.connector)")
            if screenshot is not None:  # the worst connector opened, its tasks and trace shown
                page.click(".row.connector:not([hidden]) >> nth=0")
                page.wait_for_timeout(CHANGED_MARK_MS)  # after the marks of the changes have faded
                page.screenshot(path=str(screenshot))
            page.evaluate(WATCH_ROWS)
            # A RUNNING connector fails: its row comes to the top, where an operator looks. Each sample takes
            # another one, and puts it back to RUNNING afterwards (not timed).
            running = [name for name in names if name not in shown][:samples]
            for name in running:
                written = write(name, State.FAILED)
                wait(f"{name}'s row FAILED", partial(row_failed, page, name))
                figures.row_ms.append((shown_at(page, name, "FAILED") or 0.0) - written)
                write(name, State.RUNNING)
            for name in reversed(names[-samples:]):
                written = write(name, State.FAILED)
                wait(f"{name} FAILED in the API", partial(api_failed, sidecar, name))
                figures.api_ms.append(time.time() * 1000 - written)
                write(name, State.RUNNING)
        finally:
            browser.close()
    return figures


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered):8.1f} ms, p90 {p90:8.1f} ms"


def main() -> None:
    parser = BenchParser(__doc__)
    parser.add_size("--connectors", full="100,10000", quick="50", help="fleet sizes, comma-separated")
    parser.add_size("--tasks", full=10, quick=3, type=int, help="tasks per connector")
    parser.add_size("--samples", full=20, quick=5, type=int, help="writes timed per size and side")
    parser.add_size("--renders", full=5, quick=2, type=int, help="page loads timed per size")
    parser.add_argument("--screenshot", type=Path, help="a PNG of the page at the first size (docs/img/...)")
    parser.add_size("--broker", full="kafka", quick="embedded", choices=["kafka", "embedded"],
                    help="Apache Kafka's broker (one node, from ./scripts/test.sh's cache), or the embedded one")
    args = parser.parse()
    browser = shutil.which("chromium")
    if browser is None:
        sys.exit("bench.ui needs Debian's chromium (apt-get install chromium)")
    with serve(args.broker) as sidecar:
        for size in (int(part) for part in args.connectors.split(",")):
            figures = measure(sidecar, browser, size, args.tasks, args.samples, args.renders, args.screenshot)
            args.screenshot = None
            print(f"{size} connectors x {args.tasks} tasks")
            print(f"  first render (navigation to first rows): {summary(figures.first_render_ms)}")
            print(f"    baseline GET /fleet alone:              {summary(figures.fleet_ms)}")
            print(f"  record written -> row updated:            {summary(figures.row_ms)}")
            print(f"    baseline record -> GET .../status:      {summary(figures.api_ms)}")
            print(f"  page over baseline (medians): first render "
                  f"{statistics.median(figures.first_render_ms) / statistics.median(figures.fleet_ms):.1f}x, "
                  f"update {statistics.median(figures.row_ms) / statistics.median(figures.api_ms):.1f}x")


if __name__ == "__main__":
    main()
