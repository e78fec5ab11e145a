"""The agent attached as operators attach agents, on a stock Connect 4.4.0 worker and Apache Kafka's broker: through
``JAVA_TOOL_OPTIONS`` (every JVM reads it; no launch script needed), its options from ``STATUS_STORE_AGENT_*``
variables and a properties file, and switched off with ``enabled=false``. Connect's own REST API reads the status
topic; the sidecar's metrics say whether it wrote the statuses or the worker's own store did."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import free_port
from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.real_connect import ConnectCluster, all_in
from harness.real_kafka import KafkaCluster
from harness.sidecar import LiveSidecar, agent_jar

pytestmark = pytest.mark.timeout(300)

STEP_WAIT = 60.0


def source() -> dict[str, str]:
    return {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2"}


def agent_lines(connect: ConnectCluster) -> list[str]:
    """The agent's lines in the worker's output and log."""
    lines = []
    for worker in connect.workers:
        for path in (worker.process.stdout_file, worker.process.log_file):
            if path.exists():
                lines += [line for line in path.read_text(errors="replace").splitlines()
                          if "status-store agent:" in line]
    return lines


def written_by(sidecar: LiveSidecar) -> float:
    """Statuses the sidecar wrote, by its metrics."""
    metrics = sidecar.request("GET", "/metrics").body.decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("status_update_success_total{"))


def sessions(sidecar: LiveSidecar) -> float:
    """Agent sessions the sidecar serves, by its metrics."""
    metrics = sidecar.request("GET", "/metrics").body.decode()
    [line] = [line for line in metrics.splitlines() if line.startswith("status_agent_sessions ")]
    return float(line.split()[1])


def worker_and_sidecar(kafka: KafkaCluster, workdir: Path, name: str, port: int, jvm_options: list[str],
                       env: dict[str, str]) -> tuple[ConnectCluster, LiveSidecar]:
    """A stock worker with these JVM options and environment variables, and a sidecar on ``port`` on its topics,
    created first so that the sidecar starts before the worker."""
    connect = ConnectCluster(kafka_line("kafka-4"), workdir / "worker", kafka, name, workers=1,
                             jvm_options=jvm_options, env=env)
    connect.create_topics()
    return connect, LiveSidecar(workdir / "sidecar", connect, port=port)


def test_attached_through_java_tool_options_with_options_from_the_environment_and_a_file(
        kafka: KafkaCluster, tmp_path: Path) -> None:
    options = tmp_path / "agent.properties"
    options.write_text("# the agent's options, as a ConfigMap would mount them\n"
                       "probe.interval.ms=500\npoll.interval.ms=200\nurl=http://127.0.0.1:9\n")

    port = free_port()
    # The -javaagent without options, in the variable every JVM reads; the URL from a variable, which wins over the
    # file's (a wrong one); the rest from the file.
    env = {"JAVA_TOOL_OPTIONS": f"-javaagent:{agent_jar()}", "STATUS_STORE_AGENT_URL": f"http://127.0.0.1:{port}",
           "STATUS_STORE_AGENT_CONFIG_FILE": str(options)}
    connect, sidecar = worker_and_sidecar(kafka, tmp_path, "attach-tool-options", port, [], env)
    with sidecar, connect:
        stdout = connect.workers[0].process.stdout_file.read_text(errors="replace")
        assert "Picked up JAVA_TOOL_OPTIONS: -javaagent:" in stdout  # the JVM's own word that it read the variable
        [attached] = [line for line in agent_lines(connect) if "attached (" in line]
        assert f"url={sidecar.url}" in attached, attached
        assert f"from STATUS_STORE_AGENT_* variables, the file {options})" in attached, attached
        connect.call("PUT", "/connectors/t/config", source())
        connect.wait_for_status("t", all_in("RUNNING", 2), "running", STEP_WAIT)
        connect.call("PUT", "/connectors/t/pause")
        connect.wait_for_status("t", all_in("PAUSED", 2), "paused", STEP_WAIT)
        # The sidecar wrote them: the worker handed them over.
        wait_until(lambda: written_by(sidecar) >= 6, STEP_WAIT, "the sidecar wrote the worker's statuses")
        assert not [line for line in agent_lines(connect) if " WARN " in line], agent_lines(connect)


def test_enabled_false_leaves_the_worker_its_own_store(kafka: KafkaCluster, tmp_path: Path) -> None:
    port = free_port()
    # The -javaagent string names the sidecar (as a shared KAFKA_OPTS would); the variable switches the agent off.
    connect, sidecar = worker_and_sidecar(kafka, tmp_path, "attach-disabled", port,
                                          [f"-javaagent:{agent_jar()}=url=http://127.0.0.1:{port}"],
                                          {"STATUS_STORE_AGENT_ENABLED": "false"})
    with sidecar, connect:
        connect.call("PUT", "/connectors/d/config", source())
        connect.wait_for_status("d", all_in("RUNNING", 2), "running on Connect's own store", STEP_WAIT)
        [line] = agent_lines(connect)
        assert "disabled (enabled=false in STATUS_STORE_AGENT_ENABLED)" in line, line
        # Connect's own store wrote them: nothing reached the sidecar, no session began.
        records = dict(kafka.records(connect.status_topic))
        assert records.get(b"status-connector-d") is not None
        assert written_by(sidecar) == 0
        assert sessions(sidecar) == 0
