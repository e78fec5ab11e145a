"""The report: what is broken first, per worker, top messages, over time, MTTR percentiles, flapping; one
self-contained HTML file, checked in a real headless browser (Debian's Chromium) without network access."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from pyspark.sql import SparkSession

from status_store.act.events import Restart
from status_store.act.plan import Due, Result, Target
from status_store.analytics.analysis import analyze
from status_store.analytics.report import write_report
from status_store.analytics.report_sections import FAILURE_COLOR

D = 1_763_769_600_000  # 2025-11-22T00:00:00Z
HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_TRACE = "<script>document.title='pwned'</script>\n\tat Evil.run(Evil.java:1)"
BOOM = "org.apache.kafka.connect.errors.ConnectException: boom {n}\n\tat Task.poll(Task.java:42)"
SCHEMA = "topic string, partition int, offset long, timestamp long, key string, value string"


def status_value(state: str, worker: str, trace: str | None = None) -> str:
    return json.dumps({"state": state, "trace": trace, "worker_id": worker, "generation": 1})


def event(time: int, connector: str, task: int | None, state: str, worker: str,
          trace: str | None = None) -> dict[str, Any]:
    key = f"status-task-{connector}-{task}" if task is not None else f"status-connector-{connector}"
    return {"event": "status", "time": time, "sidecar": "s", "key": key, "kind": "task" if task is not None else
            "connector", "connector": connector, "task": task, "state": state, "worker_id": worker,
            "generation": 1, "trace": trace}


def restart(time: int, connector: str, task: int, result: Result, failed_at: int) -> dict[str, Any]:
    """The sidecar's restart event (``Restart.history_event``), times in ms."""
    due = Due(Target(connector, task), "w2:8083", 1, "boom", failed_at / 1000)
    event: dict[str, Any] = json.loads(Restart(due, result, time / 1000, None, None).history_event("s"))
    return event


STATUS = [
    (f"status-connector-{HOSTILE}", status_value("RUNNING", "w1:8083")),
    (f"status-task-{HOSTILE}-0", status_value("FAILED", "w1:8083", HOSTILE_TRACE)),
    ("status-connector-sink", status_value("RUNNING", "w2:8083")),
    ("status-task-sink-0", status_value("FAILED", "w2:8083", BOOM.format(n=7))),
    ("status-task-sink-1", status_value("RUNNING", "w2:8083")),
]
HISTORY = [
    event(D, HOSTILE, 0, "RUNNING", "w1:8083"),
    event(D + 3_600_000, HOSTILE, 0, "FAILED", "w1:8083", HOSTILE_TRACE),
    event(D, "sink", 0, "RUNNING", "w2:8083"),
    event(D + 60_000, "sink", 0, "FAILED", "w2:8083", BOOM.format(n=1)),
    event(D + 120_000, "sink", 0, "RUNNING", "w2:8083"),  # recovered after 60 s
    event(D + 7_200_000, "sink", 0, "FAILED", "w2:8083", BOOM.format(n=7)),  # FAILED since 02:00
    event(D, "sink", 1, "RUNNING", "w2:8083"),
    event(D + 600_000, "sink", 1, "FAILED", "w3:8083", BOOM.format(n=2)),
    event(D + 900_000, "sink", 1, "RUNNING", "w2:8083"),  # recovered after 300 s
    # The sidecar restarted sink-0 in both its episodes (the second restart went unanswered), never sink-1.
    restart(D + 61_000, "sink", 0, Result.RESTARTED, D + 60_100),
    restart(D + 7_201_000, "sink", 0, Result.UNREACHABLE, D + 7_200_100),
    # Flapping: 7 transitions 10 s apart.
    *[event(D + 10_800_000 + i * 10_000, "flappy", 0, "RUNNING" if i % 2 == 0 else "FAILED", "w4:8083", "flap")
      for i in range(8)],
]


@pytest.fixture(scope="module")
def report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    outputs = tmp_path_factory.mktemp("outputs")
    status = spark.createDataFrame([("s", 0, i, D + i, key, value) for i, (key, value) in enumerate(STATUS)], SCHEMA)
    history = spark.createDataFrame([("h", 0, i, D, "k", json.dumps(e)) for i, e in enumerate(HISTORY)], SCHEMA)
    analysis = analyze(status, history, flap_transitions=5, flap_window_ms=60_000)
    analysis.write(outputs)
    report = write_report(analysis, str(outputs), outputs / "report")
    analysis.unpersist()
    return report


def section(report: Path, title: str) -> str:
    """One section of the HTML report."""
    text = report.read_text()
    start = text.index(f"<h2>{title}</h2>")
    return text[start:text.index("</section>", start)]


def test_the_report_opens_with_every_failed_task_since_when_on_which_worker_and_why(report: Path) -> None:
    broken = section(report, "Broken now")
    rows = re.findall(r"<tr>(.*?)</tr>", broken)[1:]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [(c[1], c[2], c[3], c[4], c[5]) for c in cells] == [
        ("&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;", "0", "2025-11-22 01:00:00.000Z",
         "w1:8083", "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;"),
        ("sink", "0", "2025-11-22 02:00:00.000Z", "w2:8083",
         "org.apache.kafka.connect.errors.ConnectException: boom 7"),
    ]
    assert report.read_text().index("<h2>Broken now</h2>") < report.read_text().index("<h2>Failures per worker</h2>")


def test_failures_per_worker_top_messages_and_percentiles(report: Path) -> None:
    per_worker = section(report, "Failures per worker")
    # worker, FAILED now, FAILED episodes, not recovered, connectors
    assert re.search(r"<td>w2:8083</td><td class=\"num\">1</td><td class=\"num\">2</td><td class=\"num\">1</td>",
                     per_worker), per_worker
    assert re.search(r"<td>w3:8083</td><td class=\"num\">0</td><td class=\"num\">1</td><td class=\"num\">0</td>",
                     per_worker), per_worker
    messages = section(report, "Top failure messages")
    # boom 1, boom 2 and boom 7 are one message, three episodes of two tasks.
    assert re.search(r"<td>org.apache.kafka.connect.errors.ConnectException: boom &lt;n&gt;</td>"
                     r"<td class=\"num\">3</td><td class=\"num\">2</td>", messages), messages
    recovery = section(report, "Time to recovery")
    # sink: recovered after 60 s and 300 s; p50 (interpolated) 180 s, p90 276 s.
    assert re.search(r"<td>sink</td><td class=\"num\">3</td><td class=\"num\">2</td><td class=\"num\">3.0 min</td>"
                     r"<td class=\"num\">4.6 min</td>", recovery), recovery
    over_time = section(report, "Failures and recoveries over time")
    assert "per hour" in over_time
    assert "<svg" in over_time
    flapping = section(report, "Flapping")
    assert re.search(r"<td>flappy</td><td>0</td><td class=\"num\">6</td>", flapping), flapping


def test_restarts_per_task_and_time_to_recovery_with_and_without_one(report: Path) -> None:
    restarts = section(report, "Restarts")
    assert "auto-restart sent 2 restart requests; connectors and tasks restarted: 1." in restarts
    # kind, connector, task, restarts, restarted, rebalancing, unreachable, refused, not-found
    cells = re.search(r"<td>task</td><td>sink</td><td>0</td>" + r"<td class=\"num\">(\d)</td>" * 6, restarts)
    assert cells is not None, restarts
    assert cells.groups() == ("2", "1", "0", "1", "0", "0")
    # kind, restarted, episodes, recovered, unrecovered, MTTR: sink-0's two episodes (one recovered after 60 s);
    # without: the hostile task's, sink-1's and flappy's four.
    assert re.search(r"<td>task</td><td>yes</td><td class=\"num\">2</td><td class=\"num\">1</td>"
                     r"<td class=\"num\">1</td><td class=\"num\">60.0 s</td>", restarts), restarts
    assert re.search(r"<td>task</td><td>no</td><td class=\"num\">6</td><td class=\"num\">4</td>"
                     r"<td class=\"num\">2</td>", restarts), restarts


def test_the_markdown_report_says_the_same_with_svg_charts(report: Path) -> None:
    markdown = (report.parent / "report.md").read_text()
    assert markdown.index("## Broken now") < markdown.index("## Failures per worker")
    assert ("| task | sink | 0 | 2025-11-22 02:00:00.000Z | w2:8083 | "
            "org.apache.kafka.connect.errors.ConnectException: boom 7 |") in markdown
    assert "&lt;script&gt;" in markdown
    assert "<script>" not in markdown
    for chart in ("failures_per_worker.svg", "failures_over_time.svg", "latest_states.svg"):
        assert f"]({chart})" in markdown
        svg = (report.parent / chart).read_text().strip()
        assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
        assert svg in report.read_text()  # the same chart inline in the HTML


def test_the_html_report_is_one_file_that_loads_nothing(report: Path) -> None:
    text = report.read_text()
    assert "Content-Security-Policy" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text, re.IGNORECASE)
    assert "<script" not in text
    assert "<img" not in text  # charts are inline SVG


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Debian's Chromium, headless, in a network namespace of its own: no network at all."""
    browser = shutil.which("chromium")
    if browser is None or shutil.which("unshare") is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium) and unshare")
    command = ["unshare", "--net", browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"cannot make a network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_browser_without_network_shows_the_failed_list_and_the_charts_and_runs_nothing(report: Path) -> None:
    screenshot = report.parent / "screenshot.png"
    dom = chromium("--window-size=1200,5000", f"--screenshot={screenshot}", "--dump-dom", report.as_uri()).stdout
    # Nothing from the data ran: the title is the report's, and no element came from a name or a trace.
    assert "<title>Kafka Connect status report</title>" in dom
    assert "pwned" not in re.sub(r"&[a-z#0-9]+;", "", re.sub(r">[^<]*<", "><", dom))  # only in text, escaped
    assert "<img" not in dom
    assert "<script" not in dom
    assert "&lt;img src=x onerror=" in dom
    assert "ConnectException: boom 7" in dom
    assert len(re.findall(r"<svg", dom)) == 4  # per worker, over time, latest states, time in state
    # The charts are drawn: the failure bars' colour is on the screen.
    red = tuple(int(FAILURE_COLOR[i:i + 2], 16) for i in (1, 3, 5))
    colours = Image.open(screenshot).convert("RGB").getcolors(maxcolors=1 << 24) or []
    assert sum(count for count, colour in colours if colour == red) > 500
