"""Connect's distributed worker as a real process for the tests and the benchmarks (``ConnectWorker``,
``ConnectCluster``: one or more workers of one group on a ``KafkaCluster``), with the scripted test connector
(``harness/jvm/src``) on its classpath, and Connect's REST API as a client (``http``, ``Answer``). The jars and the
processes as ``real_kafka`` has them: bounded in time, stopped by their pid, a log file each."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .java_process import (
    START_WAIT,
    JavaProcess,
    KafkaLine,
    free_ports,
    scripted_connector,
    wait_until,
    write_properties,
)
from .real_kafka import KafkaCluster, Started

# The bound of a worker's clean stop before it is killed.
CLEAN_STOP_WAIT = 60.0


class ConnectError(AssertionError):
    """Connect's REST API answered something a test did not expect."""


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: the status code, the body's bytes, and the body as JSON when it is JSON."""

    status: int
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def http(method: str, url: str, body: object = None, timeout: float = 30.0, accept: str = "application/json"
         ) -> Answer:
    """One HTTP request (no client library between the test and the bytes)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.read(), dict(error.headers))


class ConnectWorker:
    """A Connect distributed worker on 127.0.0.1 with the scripted connector, and its REST API."""

    def __init__(self, line: KafkaLine, workdir: Path, bootstrap_servers: str, group: str,
                 topics_prefix: str, replication: int = 1, settings: Mapping[str, str] | None = None,
                 full_jit: bool = False, jvm_options: Sequence[str] = (), env: Mapping[str, str] | None = None
                 ) -> None:
        self.line = line
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker_id = f"127.0.0.1:{self.port}"
        self.group = group
        self.status_topic = f"{topics_prefix}-status"
        self.config_topic = f"{topics_prefix}-configs"
        self.offset_topic = f"{topics_prefix}-offsets"
        self.settings = {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offset_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": str(replication),
            "offset.storage.replication.factor": str(replication),
            "status.storage.replication.factor": str(replication),
            "offset.storage.partitions": "5",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # The scripted connector is on the classpath with ServiceLoader manifests: no plugin scan.
            "plugin.discovery": "service_load",
            # A worker that leaves gives its tasks up at the next rebalance, not after Connect's 5 minutes.
            "scheduled.rebalance.max.delay.ms": "0",
            "offset.flush.interval.ms": "1000",
            "task.shutdown.graceful.timeout.ms": "2000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            **(settings or {}),
        }
        workdir.mkdir(parents=True, exist_ok=True)
        write_properties(workdir / "worker.properties", self.settings)
        self.process = JavaProcess(f"connect-{self.port}", line, "org.apache.kafka.connect.cli.ConnectDistributed",
                                   [str(workdir / "worker.properties")], workdir,
                                   extra_classpath=[scripted_connector(line)], full_jit=full_jit,
                                   jvm_options=jvm_options, env=env)

    def start(self, timeout: float = START_WAIT) -> None:
        """Start the worker; return once its REST API answers (it has joined its group)."""
        self.process.start()
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = START_WAIT) -> None:
        def ready() -> bool:
            try:
                return http("GET", self.url + "/connectors", timeout=5).status == 200
            except OSError:
                return False

        wait_until(ready, timeout, f"Connect worker {self.worker_id} ready", [self.process], interval=0.2)

    def request(self, method: str, path: str, body: object = None, accept: str = "application/json") -> Answer:
        return http(method, self.url + path, body, accept=accept)

    def call(self, method: str, path: str, body: object = None, expect: Iterable[int] = (200, 201, 202, 204)
             ) -> Any:
        """A request whose status must be one of ``expect``; its JSON body."""
        answer = self.request(method, path, body)
        if answer.status not in set(expect):
            raise ConnectError(f"{method} {path} -> {answer.status} {answer.body[:500]!r}")
        return answer.json()

    def stop(self) -> None:
        """Connect's clean stop (SIGTERM): its tasks stopped, its statuses UNASSIGNED, the group left. Bounded longer
        than other JVMs' stops: a worker with many tasks on a loaded machine has outlasted 20 s."""
        self.process.stop(CLEAN_STOP_WAIT)

    def kill(self) -> None:
        self.process.kill()

    def forget(self) -> None:
        self.process.forget()


class ConnectCluster(Started):
    """Connect workers of one group (their own status, config and offset topics) on a Kafka cluster."""

    def __init__(self, line: KafkaLine, workdir: Path, kafka: KafkaCluster, name: str, workers: int = 2,
                 settings: Mapping[str, str] | None = None, full_jit: bool = False,
                 jvm_options: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        """``full_jit``: the workers' JVMs with both compilers, as a user runs them (benchmarks). ``jvm_options``:
        more options for every worker's JVM (a ``-javaagent:``); ``env``: more environment variables for them."""
        self.line, self.kafka, self.name = line, kafka, name
        self.replication = replication = min(len(kafka.brokers), 3)
        self.workers = [ConnectWorker(line, workdir / f"worker-{i}", kafka.bootstrap_servers, name, name,
                                      replication, settings, full_jit, jvm_options, env) for i in range(workers)]
        first = self.workers[0]
        self.status_topic, self.config_topic, self.offset_topic = (first.status_topic, first.config_topic,
                                                                   first.offset_topic)
        self.settings = first.settings

    def create_topics(self) -> None:
        """Create the workers' status, config and offset topics as Connect creates them (compacted; one partition
        for the configs), for a part that must read them before the first worker starts (a sidecar)."""
        compacted = {"cleanup.policy": "compact"}
        for topic, partitions in ((self.status_topic, 5), (self.config_topic, 1), (self.offset_topic, 5)):
            self.kafka.create_topic(topic, partitions, self.replication, compacted)

    def start(self, timeout: float = START_WAIT) -> None:
        """Start every worker (the first alone: it creates the internal topics); return once all answer."""
        self.workers[0].start(timeout)
        for worker in self.workers[1:]:
            worker.process.start()
        for worker in self.workers[1:]:
            worker.wait_ready(timeout)

    def running(self) -> list[ConnectWorker]:
        return [worker for worker in self.workers if worker.process.alive()]

    @property
    def worker(self) -> ConnectWorker:
        """A running worker (any: each forwards what only the leader does)."""
        running = self.running()
        assert running, f"no worker of {self.name} is running"
        return running[0]

    def request(self, method: str, path: str, body: object = None, accept: str = "application/json") -> Answer:
        return self.worker.request(method, path, body, accept)

    def call(self, method: str, path: str, body: object = None,
             expect: Iterable[int] = (200, 201, 202, 204)) -> Any:
        return self.worker.call(method, path, body, expect)

    def wait_for_status(self, connector: str, condition: Callable[[dict[str, Any]], bool], what: str,
                        timeout: float = 60.0) -> dict[str, Any]:
        """Wait until Connect answers ``GET /connectors/{connector}/status`` with a status ``condition`` accepts."""
        seen: list[Any] = [None]

        def holds() -> bool:
            answer = self.request("GET", f"/connectors/{connector}/status")
            seen[0] = answer.json() if answer.status == 200 else answer.status
            return answer.status == 200 and condition(seen[0])

        try:
            wait_until(holds, timeout, f"{connector}: {what}", [w.process for w in self.running()], interval=0.2)
        except TimeoutError as e:
            raise TimeoutError(f"{e}\nlast status of {connector}: {seen[0]}") from None
        status: dict[str, Any] = seen[0]
        return status

    def close(self) -> None:
        for worker in self.workers:
            worker.forget()


def states(status: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A Connect status's connector state and its tasks' states, by task id."""
    return status["connector"]["state"], [task["state"] for task in status["tasks"]]


def all_in(state: str, tasks: int | None = None) -> Callable[[dict[str, Any]], bool]:
    """A condition: the connector and every task in ``state`` (and exactly ``tasks`` tasks, when given)."""
    def condition(status: dict[str, Any]) -> bool:
        connector, task_states = states(status)
        return (connector == state and all(s == state for s in task_states)
                and (tasks is None or len(task_states) == tasks))
    return condition
