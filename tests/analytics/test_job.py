"""End to end: the store writes statuses and history through a real broker; ``status-store analyze`` reads
both topics back from Kafka in parallel ranges and writes the outputs and the report."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.tansu import TansuBroker
from status_store import cli
from status_store.connect.model import ConnectorStatus, State, TaskId, TaskStatus

from ..conftest import StoreFactory

WAIT = 30.0
RUNNING = '{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'


async def test_analyze_reads_what_the_service_wrote_and_reports(spark: SparkSession, tansu: TansuBroker,
                                                                store_factory: StoreFactory, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    topic = f"status-{uuid.uuid4().hex[:12]}"
    history = f"{topic}-history"
    sink0 = TaskId("sink", 0)
    writes = [
        ConnectorStatus("sink", State.RUNNING, "w1:8083", 1),
        TaskStatus(sink0, State.RUNNING, "w1:8083", 1),
        TaskStatus(sink0, State.FAILED, "w1:8083", 1, "boom"),
        TaskStatus(TaskId("sink", 1), State.RUNNING, "w1:8083", 1),
        TaskStatus(sink0, State.RUNNING, "w1:8083", 2),
        ConnectorStatus("old", State.RUNNING, "w1:8083", 1),
        TaskStatus(TaskId("old", 0), State.RUNNING, "w1:8083", 1),
    ]
    async with store_factory(tansu.bootstrap_servers, topic, **{"status.storage.history.topic": history}) as store:
        for status in writes:
            store.put(status)
            await store.read_your_writes(WAIT)  # one at a time: each event gets its own time
        store.delete_connector("old")  # a tombstone for its task, then for itself
        await store.read_your_writes(WAIT)
        expected = {("connector", "sink", None, "RUNNING", 1), ("task", "sink", 0, "RUNNING", 2),
                    ("task", "sink", 1, "RUNNING", 1)}
        assert store.cache.get_connector("old") is None
    # Stopping the store settled its history events (bounded by the shutdown timeout).
    out = tmp_path / "out"
    code = cli.main(["analyze", "--bootstrap-servers", tansu.bootstrap_servers, "--status-topic", topic,
                     "--history-topic", history, "--out", str(out), "--max-records-per-range", "2"])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, captured.err
    summary = json.loads((out / "summary.json").read_text())
    counters = summary["counters"]
    updates = len(writes) + 2
    assert counters["status_records"] == updates
    assert (counters["history_status_events"], counters["history_outcome_events"]) == (updates, updates)
    assert counters["history_garbled"] == counters["garbled_values"] == counters["invalid_keys"] == 0

    latest = spark.read.parquet(str(out / "latest")).collect()
    assert {(r.kind, r.connector, r.task, r.state, r.generation) for r in latest} == expected
    episodes = spark.read.parquet(str(out / "episodes")).collect()
    assert [(r.connector, r.task, r.recovered_ms is not None) for r in episodes] == [("sink", 0, True)]
    assert episodes[0].time_to_recovery_ms >= 0
    outcomes = spark.read.parquet(str(out / "retry_outcomes")).collect()
    assert sum(r["count"] for r in outcomes if r.result == "written") == updates

    report = (out / "report" / "report.md").read_text()
    assert "| sink | 0 | 1 | 1 | 0 |" in report  # the FAILED episode table: sink-0, one episode, recovered
    for chart in ("latest_states.svg", "time_in_state.svg", "retry_outcomes.svg"):
        assert f"]({chart})" in report
        assert (out / "report" / chart).read_text().startswith("<svg")
    assert summary["warnings"] == []
    # Several ranges per topic: 9 records in at most 5 partitions, 2 offsets per range.
    assert all(count >= 5 for count in summary["kafka_ranges"].values()), summary["kafka_ranges"]
    assert str(out) in printed
    # One line per phase on the console, in order; the rest in the run's log file.
    phases = [line.split("] ", 1)[1].split(" ")[0] for line in captured.err.splitlines() if "s] " in line]
    assert phases == ["starting", "planning:", "reading", "analysing", "writing", "done"], captured.err
    (log_file,) = (out / "_logs").glob("analyze-*.log")
    assert "phase: writing" in log_file.read_text()
    assert sorted(path.name for path in out.iterdir()) == sorted([
        "latest", "state_durations", "episodes", "mttr", "flapping", "retry_outcomes", "restarts", "recovery", "report",
        "summary.json", "_logs"])


def _failed(code: int, capsys: pytest.CaptureFixture[str], out: Path) -> str:
    """The one line a failed run printed, after checking it wrote no output."""
    err = capsys.readouterr().err
    assert code == 1, err
    (line,) = [line for line in err.splitlines() if ": failed: " in line]
    assert sorted(path.name for path in out.iterdir()) == ["_logs"]  # nothing but the run's log
    return line


def test_unreachable_brokers_fail_within_the_timeout_with_one_line(spark: SparkSession, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = cli.main(["analyze", "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--timeout", "2",
                     "--out", str(out)])
    line = _failed(code, capsys, out)
    assert "connect-status: cannot read the topic's metadata within 2 s" in line
    assert "Connection refused" in line  # the client's last error says why


def test_a_missing_topic_fails_naming_it(spark: SparkSession, tansu: TansuBroker, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = cli.main(["analyze", "--bootstrap-servers", tansu.bootstrap_servers, "--status-topic", "no-such-topic",
                     "--out", str(out), "--no-report"])
    assert "no-such-topic: topic not found" in _failed(code, capsys, out)


def test_a_range_not_read_in_time_fails_the_run(spark: SparkSession, mock_cluster: FaultyCluster, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    mock_cluster.create_topic("statuses", 1, 1)
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers})
    producer.produce("statuses", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}',
                     b"status-connector-c")
    assert producer.flush(10) == 0
    out = tmp_path / "out"
    code = cli.main(["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--status-topic", "statuses",
                     "--range-timeout", "0", "--out", str(out)])
    assert "statuses/0: stopped after 0 s at offset 0 of range [0, 1)" in _failed(code, capsys, out)


def test_a_missing_or_unreadable_file_fails_the_run(spark: SparkSession, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = cli.main(["analyze", "--files", str(tmp_path / "missing.jsonl"), "--out", str(out)])
    assert f"{tmp_path / 'missing.jsonl'}: no such file or directory" in _failed(code, capsys, out)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    code = cli.main(["analyze", "--files", str(tmp_path / "bad.parquet"), "--out", str(out)])
    assert "bad.parquet" in _failed(code, capsys, out)


def test_an_empty_topic_is_a_success_with_a_warning(spark: SparkSession, mock_cluster: FaultyCluster,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mock_cluster.create_topic("empty", 2, 1)
    out = tmp_path / "out"
    code = cli.main(["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--status-topic", "empty",
                     "--out", str(out), "--no-report"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: empty: empty: no records" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warnings"] == ["empty: empty: no records"]
    assert summary["counters"]["status_records"] == 0


def test_analyze_without_java_exits_2_saying_what_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from status_store.analytics import session

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setattr(session.SparkSession, "getActiveSession", staticmethod(lambda: None))
    code = cli.main(["analyze", "--files", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "out")])
    assert code == 2
    message = capsys.readouterr().err
    assert "Java 17" in message
    assert "JAVA_HOME" in message


def test_the_console_shows_phases_and_the_log_file_takes_spark_s_own_output(tmp_path: Path) -> None:
    """A run in its own process, which starts its own Spark: nothing of Spark's on the console."""
    export = tmp_path / "status.jsonl"
    export.write_text(json.dumps({"topic": "connect-status", "partition": 0, "offset": 0, "timestamp": 1,
                                  "key": "status-connector-c", "value": RUNNING}) + "\n")
    out = tmp_path / "out"
    fast = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    done = subprocess.run([sys.executable, "-m", "status_store.cli", "analyze", "--files", str(export), "--out",
                           str(out), "--no-report", "--conf", "spark.master=local[1]", "--conf",
                           f"spark.driver.extraJavaOptions={fast}", "--conf", "spark.ui.enabled=false",
                           "--conf", "spark.ui.showConsoleProgress=true", "--conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.split("] ", 1)[1].split(" ")[0] for line in done.stderr.splitlines()] == [
        "starting", "reading", "analysing", "writing", "done"], done.stderr
    (log_file,) = (out / "_logs").glob("analyze-*.log")
    spark_output = log_file.read_text()
    assert "Setting default log level" in spark_output  # Spark's own stderr
    assert "[Stage " in spark_output  # its stage bars
    assert "Outputs in" in done.stdout


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the run asks for a Spark session: bad input must fail before Spark starts."""
    from status_store.analytics import job

    def started(*_: object, **__: object) -> SparkSession:
        pytest.fail("the run started Spark before it knew its input was bad")

    monkeypatch.setattr(job, "get_session", started)


def _one_line(code: int, expected: int, capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert code == expected, err
    (line,) = [line for line in err.splitlines() if "s] " not in line]
    return line


def test_unreachable_brokers_fail_before_spark_starts(no_spark: None, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["analyze", "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--timeout", "1",
                     "--history-topic", "history", "--out", str(tmp_path / "out")])
    line = _one_line(code, 1, capsys)
    assert "failed: connect-status: cannot read the topic's metadata within 1 s" in line
    assert not (tmp_path / "out" / "latest").exists()


def test_a_missing_topic_fails_before_spark_starts(no_spark: None, mock_cluster: FaultyCluster, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    mock_cluster.create_topic("connect-status", 1, 1)
    code = cli.main(["analyze", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--history-topic",
                     "no-such-history", "--timeout", "5", "--out", str(tmp_path / "out")])
    assert "failed: no-such-history: topic not found" in _one_line(code, 1, capsys)


@pytest.mark.parametrize(("checkpoint", "named"), [
    ("{not json", "not JSON"),
    ('{"status_topic": "connect-status", "history_topic": null, "offsets": [], "batches": []}',
     '"offsets" must be an object'),
    ('{"status_topic": "connect-status", "history_topic": null, "offsets": {"connect-status": {"0": "7"}}, '
     '"batches": []}', '"offsets"."connect-status"."0" must be an offset'),
    ('{"status_topic": "connect-status", "history_topic": null, "offsets": {}}', 'no "batches" field'),
])
def test_a_malformed_checkpoint_exits_2_naming_the_field_before_spark_starts(
        no_spark: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], checkpoint: str, named: str) -> None:
    out = tmp_path / "out"
    (out / "_state").mkdir(parents=True)
    (out / "_state" / "checkpoint.json").write_text(checkpoint)
    code = cli.main(["analyze", "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--since", str(out),
                     "--out", str(out)])
    line = _one_line(code, 2, capsys)
    assert f"--since {out}: {out}/_state/checkpoint.json is not a checkpoint written by status-store analyze" in line
    assert named in line


def test_a_bad_consumer_setting_exits_2_before_spark_starts(no_spark: None, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["analyze", "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--kafka", "no.such.setting=1",
                     "--out", str(tmp_path / "out")])
    assert "bad Kafka consumer settings" in _one_line(code, 2, capsys)


def test_a_missing_file_fails_before_spark_starts(no_spark: None, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["analyze", "--files", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'missing.jsonl'}: no such file or directory" in _one_line(code, 1, capsys)


class _SessionAsked(BaseException):
    """Stops a run where it asks for its Spark session."""


@pytest.mark.parametrize(("limit", "quick"), [(1_000, True), (0, False)])
def test_a_small_input_asks_for_a_quick_starting_spark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, limit: int,
                                                        quick: bool) -> None:
    """The run knows its size before Spark starts (here the file's): a small one gets the quick-start JVM options,
    a larger one Spark's own (``get_session`` applies them only to a local JVM it starts, and ``--conf`` wins)."""
    from status_store.analytics import job

    asked: dict[str, object] = {}

    def started(*_: object, **options: object) -> SparkSession:
        asked.update(options)
        raise _SessionAsked

    monkeypatch.setattr(job, "get_session", started)
    monkeypatch.setattr(job, "QUICK_RUN_RECORDS", limit)
    export = tmp_path / "status.jsonl"
    export.write_text(json.dumps({"topic": "connect-status", "partition": 0, "offset": 0, "timestamp": 1,
                                  "key": "status-connector-c", "value": RUNNING}) + "\n")
    with pytest.raises(_SessionAsked):
        job.main(["--files", str(export), "--out", str(tmp_path / "out"), "--log-file", str(tmp_path / "run.log")])
    assert asked["quick_start"] is quick
