"""The command line, end to end: `status-store serve` as a real process on the embedded broker."""

from __future__ import annotations

import gc
import json
import os
import queue
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from harness import free_port
from harness.service import Service
from status_store.client import rows
from status_store.connect.model import ConnectorStatus, State
from status_store.kafka.reading import read_to_end
from status_store.service import FULL_COLLECTION_EVERY, tune_collector

from .conftest import StoreFactory

WAIT = 30.0


async def test_serve_runs_on_the_embedded_broker(service: Service, store_factory: StoreFactory) -> None:
    banner = service.wait_for("Embedded Kafka broker")
    bootstrap = banner.strip().rsplit("bootstrap.servers=", 1)[1]
    running = service.wait_for("Uvicorn running on")
    url = running.split("Uvicorn running on ", 1)[1].split()[0]
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        info = (await http.get("/")).json()
        assert (await http.get("/health")).status_code == 200
    assert info["embedded_broker"] is True
    assert info["bootstrap_servers"] == bootstrap
    assert info["status_topic"] == "connect-status"
    assert url.startswith("http://127.0.0.1:")
    # A second client reaches the embedded broker at the printed address.
    async with store_factory(bootstrap, "connect-status") as other:
        other.put(ConnectorStatus("conn", State.RUNNING, "w:8083", 0))
        await other.read_your_writes(WAIT)
        assert other.cache.get_connector("conn") is not None
    assert service.stop() == 0
    assert any("NOT durable" in line for line in service.seen)


def test_documented_steps_write_read_bytes_and_count(service: Service) -> None:
    bootstrap = service.wait_for("Embedded Kafka broker").strip().rsplit("bootstrap.servers=", 1)[1]
    url = service.wait_for("Uvicorn running on").split("Uvicorn running on ", 1)[1].split()[0]
    with httpx.Client(base_url=url, timeout=WAIT) as http:
        written = http.put("/connectors/conn/status", params={"wait": "true"},
                                 json={"state": "RUNNING", "worker_id": "localhost:8083", "generation": 0,
                                       "type": "source"})
        assert written.status_code == 200, written.text
        http.put("/connectors/conn/tasks/0/status", params={"wait": "true"},
                       json={"state": "FAILED", "trace": "boom\n\tat X", "worker_id": "localhost:8083",
                             "generation": 0})
        metrics = http.get("/metrics").text
        status = http.get("/connectors/conn/status")
        assert status.status_code == 200
    # The bytes in the topic, read with a plain consumer, are Connect's.
    records = read_topic(bootstrap, "connect-status")
    assert (b"status-connector-conn",
            b'{"state":"RUNNING","trace":null,"worker_id":"localhost:8083","generation":0}') in records
    assert (b"status-task-conn-0",
            b'{"state":"FAILED","trace":"boom\\n\\tat X","worker_id":"localhost:8083","generation":0}') in records
    # The KIP-1278 counters moved.
    assert 'status_update_success_total{kind="connector"} 1.0' in metrics
    assert 'status_update_success_total{kind="task"} 1.0' in metrics
    assert 'status_update_failure_total{kind="connector"} 0.0' in metrics
    # A person at a terminal sees the statuses as a table.
    shown = subprocess.run([sys.executable, "-m", "status_store.cli", "status", "conn", "--url", url],
                           capture_output=True, text=True, timeout=WAIT)
    assert shown.returncode == 0, shown.stderr
    assert "conn (source)" in shown.stdout
    assert "FAILED" in shown.stdout
    assert "boom" in shown.stdout
    missing = subprocess.run([sys.executable, "-m", "status_store.cli", "status", "nope", "--url", url],
                             capture_output=True, text=True, timeout=WAIT)
    assert missing.returncode == 1
    assert "No status found for connector nope (HTTP 404)" in missing.stderr


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    return [(m.key(), m.value()) for batch in read_to_end({"bootstrap.servers": bootstrap}, topic, 30.0)
            for m in batch]


def test_bad_configuration_fails_fast_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("status.storage.partitions=-3\n")
    result = subprocess.run([sys.executable, "-m", "status_store.cli", "serve", "--config", str(config)],
                            capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2
    assert "status.storage.partitions" in result.stderr
    assert "must be in" in result.stderr


def test_the_readmes_first_write_and_read_work_as_written(service: Service) -> None:
    url = service.wait_for("Uvicorn running on").split("Uvicorn running on ", 1)[1].split()[0]
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("A first write and read", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("  #", 1)[0].strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    assert len(commands) == 4
    outputs = []
    for command in commands:
        command = command.replace("http://127.0.0.1:8084", url).replace(".venv/bin/status-store",
                                                                          f"{sys.executable} -m status_store.cli")
        if "status-store" in command or "status_store.cli" in command:
            command += f" --url {url}"
        result = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=WAIT)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert '"result":"written"' in outputs[0]
    assert outputs[1] == ('{"name":"my-conn","connector":{"state":"RUNNING","worker_id":"localhost:8083",'
                          '"version":null},"tasks":[],"type":"source"}')
    assert "my-conn (source)" in outputs[2]
    assert 'status_update_success_total{kind="connector"} 1.0' in outputs[3]


def run_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``status-store serve`` that is expected to stop by itself (a start-up error)."""
    return subprocess.run([sys.executable, "-m", "status_store.cli", "serve", *args], capture_output=True, text=True,
                          timeout=WAIT, env={**os.environ, **(env or {})})


def test_every_command_line_option_is_checked_like_its_key() -> None:
    for args, expected in ((["--port", "99999"], "sidecar.rest.port: must be in [0, 65535]"),
                           (["--port", "http"], "sidecar.rest.port: not an integer"),
                           (["--host", " "], "sidecar.rest.host: must not be empty"),
                           (["--log-level", "LOUD"], "invalid choice: 'LOUD'")):
        result = run_serve(*args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert expected in result.stderr
        assert result.stdout == ""


def test_config_errors_exit_2_with_one_line_that_shows_no_secret(tmp_path: Path) -> None:
    secret = "Hunter2-Sup3r-Secret"
    config = tmp_path / "sidecar.properties"
    config.write_text(
        "bootstrap.servers=127.0.0.1:9092\nstatus.storage.topic=connect-status\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        f'password="{secret}\\\\u12";\n'
        f"sidecar.rest.tokn={secret}\n")
    result = run_serve("--config", str(config))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "sidecar.rest.tokn" in result.stderr
    assert "did you mean sidecar.rest.token?" in result.stderr
    assert secret not in result.stderr + result.stdout


def test_an_unreachable_cluster_at_start_is_one_clear_error(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    config = tmp_path / "sidecar.properties"
    config.write_text(f"bootstrap.servers={bootstrap}\nstatus.storage.topic=connect-status\n"
                      "sidecar.startup.timeout.ms=2000\n")
    result = run_serve("--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"status-store: cannot reach Kafka at {bootstrap} within 2 s (")
    assert "Connection refused" in last
    # librdkafka's own lines come through logging, never raw.
    assert not [line for line in result.stderr.splitlines() if line.startswith("%")]


def test_binding_beyond_loopback_without_a_token_is_warned() -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this host: the warning comes, then binding fails.
    result = run_serve("--host", "192.0.2.1", "--port", str(free_port()))
    assert result.returncode != 0
    warning = [line for line in result.stderr.splitlines() if " WARNING " in line]
    assert len(warning) == 1
    assert "binds 192.0.2.1, not a loopback address, and sidecar.rest.token is not set" in warning[0]


def test_a_shipped_placeholder_token_is_refused_at_start() -> None:
    result = run_serve(env={"STATUS_STORE_SIDECAR_REST_TOKEN": "change-me-to-a-long-random-string"})
    assert result.returncode == 2
    assert "sidecar.rest.token" in result.stderr
    assert "placeholder" in result.stderr
    assert "change-me" not in result.stderr


def new_lines(service: Service, seconds: float) -> list[str]:
    """Every output line the service prints within ``seconds`` (the window is what the callers test: nothing more
    is printed in it, so it is held, not waited out)."""
    lines, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            lines.append(service.lines.get(timeout=left))
        except queue.Empty:
            break
    service.seen += lines
    return lines


OUR_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO (status_store\.[\w.]+|uvicorn\.error): \S.*\n")


def test_the_first_seconds_of_the_readmes_first_command_look_right() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    first_command = readme.split("```sh", 1)[1].split("```", 1)[0].strip()
    assert first_command.endswith(".venv/bin/status-store serve")
    # As the README runs it, on a free port rather than 8084 so that it cannot clash with another run.
    with Service("--port", str(free_port())) as service:
        service.wait_for("Uvicorn running on")
        url = service.seen[-1].split("Uvicorn running on ", 1)[1].split()[0]
        with httpx.Client(base_url=url, timeout=WAIT) as http:
            written = http.put("/connectors/my-conn/status", params={"wait": "true"},
                               json={"state": "RUNNING", "worker_id": "localhost:8083", "generation": 0})
            assert written.status_code == 200, written.text
            assert http.get("/connectors/my-conn/status").status_code == 200
        new_lines(service, 3.0)
        lines = service.seen  # every line so far, the new ones included
    banner = lines[0]
    assert re.fullmatch(r"Embedded Kafka broker \(in-memory, NOT durable: .*\): bootstrap\.servers=127\.0\.0\.1:\d+\n",
                        banner), banner
    others = lines[1:]
    assert [line for line in others if not OUR_LOG_LINE.fullmatch(line)] == []
    assert any("Status store ready" in line for line in others)
    assert [line.split(": ", 1)[1] for line in others if "Status page" in line] == [
        f"Status page: {url}/ui (every connector and task, live)\n"]
    assert len(set(lines)) == len(lines)  # nothing said twice


def test_the_embedded_broker_holds_every_topic_the_configuration_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATUS_STORE_STATUS_STORAGE_HISTORY_TOPIC", "connect-status-history")
    monkeypatch.setenv("STATUS_STORE_STATUS_STORAGE_RETRY_EXHAUSTED_ACTION", "dead-letter")
    monkeypatch.setenv("STATUS_STORE_STATUS_STORAGE_RETRY_DEAD_LETTER_TOPIC", "connect-status-dead-letters")
    with Service("--port", str(free_port())) as service:
        bootstrap = service.wait_for("Embedded Kafka broker").strip().rsplit("bootstrap.servers=", 1)[1]
        url = service.wait_for("Uvicorn running on").split("Uvicorn running on ", 1)[1].split()[0]
        with httpx.Client(base_url=url, timeout=WAIT) as http:
            written = http.put("/connectors/conn/status", params={"wait": "true"},
                               json={"state": "RUNNING", "worker_id": "w:8083", "generation": 0})
            assert written.status_code == 200, written.text
        history = [key for key, _ in read_topic(bootstrap, "connect-status-history")]
        assert b"status-connector-conn" in history
        assert read_topic(bootstrap, "connect-status-dead-letters") == []
        assert service.stop() == 0


def test_a_second_service_on_the_same_spool_is_refused_naming_the_first(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATUS_STORE_STATUS_STORAGE_SPOOL_PATH", str(tmp_path / "spool.db"))
    with Service("--port", str(free_port())) as first:
        first.wait_for("Uvicorn running on")
        second = run_serve("--port", str(free_port()))
        assert second.returncode == 2, second.stderr
        assert f"in use by another status-store (pid {first.process.pid} on host " in second.stderr
        assert second.stderr.startswith("status-store: ")
        assert first.stop() == 0


def test_the_version_and_python_dash_m() -> None:
    from status_store import __version__

    for command in (["status-store"], [sys.executable, "-m", "status_store"]):
        executable = [str(Path(sys.executable).parent / "status-store")] if command == ["status-store"] else command
        done = subprocess.run([*executable, "--version"], capture_output=True, text=True, timeout=WAIT, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"status-store {__version__}"


def test_json_logs_are_one_object_per_line() -> None:
    with Service("--port", str(free_port()), "--log-format", "json") as service:
        line = service.wait_for("Status store ready")
        entry = json.loads(line)
        assert entry["level"] == "INFO"
        assert entry["logger"] == "status_store.store"
        assert entry["message"].startswith("Status store ready")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"])
        json.loads(service.wait_for("Uvicorn running on"))  # uvicorn's lines too
        assert service.stop() == 0


def test_a_status_without_worker_id_shows_a_dash() -> None:
    info = {"name": "c", "type": "unknown", "connector": {"state": "RUNNING", "worker_id": None},
            "tasks": [{"id": 0, "state": "FAILED", "worker_id": None, "trace": "boom\nat x"}]}
    assert rows(info) == [("c (unknown)", "RUNNING", "-", ""), ("  task 0", "FAILED", "-", "boom")]


def test_the_collector_is_tuned_for_bursts_of_writes() -> None:
    """What exists once the store has started is frozen out of the collector's sight, and full collections come
    rarer; young collections keep their default."""
    threshold = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (threshold[0], threshold[1], FULL_COLLECTION_EVERY)
        assert threshold[2] < FULL_COLLECTION_EVERY
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
