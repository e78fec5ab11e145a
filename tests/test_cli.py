"""The command line, end to end: `status-store serve` as a real process on the embedded broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from status_store.model import ConnectorStatus, State

from .conftest import StoreFactory
from .helpers import Service

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
        assert other.get_connector("conn") is not None
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
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    partitions = list(consumer.list_topics(topic, timeout=WAIT).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records, at_end = [], set()
    try:
        for _ in range(300):
            for message in consumer.consume(100, 0.1):
                error = message.error()
                if error is None:
                    records.append((message.key(), message.value()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            if at_end == set(partitions):
                return records
    finally:
        consumer.close()
    raise AssertionError("the topic was not read to its end in time")


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
    assert outputs[1] == ('{"name":"my-conn","connector":{"state":"RUNNING","worker_id":"localhost:8083"},'
                          '"tasks":[],"type":"source"}')
    assert "my-conn (source)" in outputs[2]
    assert 'status_update_success_total{kind="connector"} 1.0' in outputs[3]
