"""Apache Kafka's own broker (KRaft) and Connect's distributed worker as real processes, for the tests and the
benchmarks: the jars ``./scripts/test.sh`` fetched from Maven Central (``harness/jvm/pom.xml``), started with
``java -cp '<dir>/*' <main class>``, every process bounded in time and stopped by its pid.

- ``kafka_line("kafka-4")`` / ``kafka_line("kafka-3")``: the jars of the newest 4.x (broker and worker) and of
  the last 3.x line (worker);
- ``KafkaCluster``: one or more KRaft brokers, with the controller in the broker's process (one node) or in a
  process of its own (several brokers, so that stopping brokers never takes the quorum with them);
- ``ConnectWorker``: a distributed worker with the scripted test connector (``harness/jvm/src``) on its
  classpath, and Connect's REST API as a client.

Every process writes its log to a file of its own; ``tails()`` gives the last lines of each for a failing
test's report (tests/conftest.py).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from status_store.kafka.reading import read_to_end

from .kafka_proxy import KafkaProxy

JVM_DIR = Path(__file__).with_name("jvm")
CONNECTOR_SOURCES = JVM_DIR / "src"
CONNECTOR_RESOURCES = JVM_DIR / "resources"
SOURCE_CONNECTOR = "statusstore.connect.ScriptedSourceConnector"
SINK_CONNECTOR = "statusstore.connect.ScriptedSinkConnector"
# What the scripted connector's version() answers (harness/jvm/src/statusstore/connect/Script.java).
SCRIPTED_VERSION = "1.0.0-scripted"

START_WAIT = 90.0
STOP_WAIT = 20.0
# The header on the records a test writes into a Connect cluster's topics in a foreign writer's place
# (tests/test_connect_records_live.py), so that a test of what Connect itself wrote can leave them out.
FOREIGN_WRITER_HEADER = "status-store-test-foreign-writer"


def jvm_cache() -> Path:
    """Where ./scripts/test.sh keeps what it fetched (outside the repository)."""
    configured = os.environ.get("STATUS_STORE_JVM_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "status-store" / "jvm"


class RealKafkaMissing(RuntimeError):
    """The jars or the JDK are not there: one line saying what to run."""


@dataclass(frozen=True)
class KafkaLine:
    """The jars of one Kafka release line, as fetched."""

    name: str
    directory: Path
    version: str

    @property
    def classpath(self) -> str:
        return str(self.directory / "*")

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def kafka_line(name: str) -> KafkaLine:
    """The fetched jars of ``kafka-4`` or ``kafka-3``; ``RealKafkaMissing`` when they are not there."""
    directory = jvm_cache() / name
    runtime = sorted(directory.glob("connect-runtime-*.jar"))
    if not (directory / ".complete").exists() or not runtime:
        raise RealKafkaMissing(f"Apache Kafka's jars ({name}) are not in {directory}: run ./scripts/test.sh, which "
                               f"fetches them from Maven Central")
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise RealKafkaMissing("no JDK (java and javac) on PATH: ./scripts/test.sh installs one where it may")
    return KafkaLine(name, directory, runtime[0].name.removeprefix("connect-runtime-").removesuffix(".jar"))


def scripted_connector(line: KafkaLine) -> Path:
    """The scripted test connector, compiled against ``line``'s Connect API once per version of its sources."""
    return compiled(line, "scripted-connector", JVM_DIR, CONNECTOR_SOURCES, CONNECTOR_RESOURCES)


def jmx_options(port: int) -> list[str]:
    """A JVM's options to serve JMX on 127.0.0.1:``port`` without authentication (as a test's JMX exporter reads it)."""
    return [f"-Dcom.sun.management.jmxremote.port={port}", f"-Dcom.sun.management.jmxremote.rmi.port={port}",
            "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1"]


def jmx_attributes(line: KafkaLine, port: int, pattern: str) -> dict[str, dict[str, str]]:
    """The attributes of the MBeans ``pattern`` names in the JVM serving JMX on 127.0.0.1:``port``, by object name
    (read by a small Java client, harness/jvm/tools, as a JMX exporter reads them)."""
    tools = compiled(line, "jvm-tools", JVM_DIR, JVM_DIR / "tools")
    done = subprocess.run(["java", "-cp", str(tools), "statusstore.tools.JmxQuery", f"127.0.0.1:{port}", pattern],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"JMX query of 127.0.0.1:{port} failed: {done.stderr[-2000:]}")
    found: dict[str, dict[str, str]] = {}
    for row in done.stdout.splitlines():
        name, attribute, value = row.split("\t", 2)
        found.setdefault(name, {})[attribute] = value
    return found


def compiled(line: KafkaLine, name: str, root: Path, sources: Path, resources: Path | None = None) -> Path:
    """The Java sources under ``sources`` (with the files under ``resources`` beside the classes), compiled with
    javac against ``line``'s jars into the cache, once per version of the files (named relative to ``root``): the
    directory to put on a classpath."""
    java = sorted(sources.rglob("*.java"))
    digest = hashlib.sha256()
    for path in [*java, *(sorted(resources.rglob("*")) if resources is not None else [])]:
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    target = jvm_cache() / name / f"{line.name}-{digest.hexdigest()[:16]}"
    if (target / ".complete").exists():
        return target
    building = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run(["javac", "-nowarn", "--release", "17", "-encoding", "UTF-8", "-cp", line.classpath,
                    "-d", str(building), *map(str, java)], check=True, capture_output=True, timeout=120)
    if resources is not None:
        shutil.copytree(resources, building, dirs_exist_ok=True)
    (building / ".complete").touch()
    try:
        building.rename(target)
    except OSError:  # another process compiled it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return target


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 nobody listens on right now."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def log4j2_config(log_file: Path) -> str:
    """A log4j2 configuration sending every line of a Kafka 4.x JVM to ``log_file``."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="{log_file}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.connect.runtime.isolation" level="warn"/>
    <Logger name="org.reflections" level="error"/>
    <Logger name="org.apache.kafka.connect.runtime.rest.RestServer" level="warn"/>
    <Logger name="org.apache.kafka.connect.runtime.WorkerSourceTask" level="warn"/>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def _log4j1_config(log_file: Path) -> str:
    return (f"log4j.rootLogger=INFO, file\n"
            f"log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={log_file}\n"
            f"log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            f"log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.isolation=WARN\n"
            f"log4j.logger.org.reflections=ERROR\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.rest.RestServer=WARN\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.WorkerSourceTask=WARN\n")


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """A Java .properties file (values written as they are: the tests' values need no escapes)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()), encoding="utf-8")


_RUNNING: list[JavaProcess] = []
_RUNNING_LOCK = threading.Lock()


def tails(lines: int = 40) -> str:
    """The last lines of the log of every JVM started by this test process that has not been forgotten."""
    with _RUNNING_LOCK:
        processes = list(_RUNNING)
    return "\n".join(process.tail(lines) for process in processes)


class JavaProcess:
    """One JVM: started, stopped (SIGTERM, then SIGKILL after a bound), killed, paused and resumed by its pid."""

    def __init__(self, name: str, line: KafkaLine, main: str, args: Sequence[str], workdir: Path,
                 extra_classpath: Sequence[Path] = (), heap: str = "512m", full_jit: bool = False,
                 jvm_options: Sequence[str] = ()) -> None:
        """``jvm_options``: more options for the JVM (a ``-javaagent:``, as KAFKA_OPTS passes one)."""
        self.name, self.line, self.main, self.args = name, line, main, list(args)
        self.jvm_options = list(jvm_options)
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_file = workdir / f"{name}.log"
        self.stdout_file = workdir / f"{name}.stdout"
        self.classpath = ":".join([line.classpath, *map(str, extra_classpath)])
        self.heap, self.full_jit = heap, full_jit
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        if self.line.major >= 4:
            logging_config = self.workdir / f"{self.name}-log4j2.xml"
            logging_config.write_text(log4j2_config(self.log_file), encoding="utf-8")
            logging = f"-Dlog4j2.configurationFile={logging_config}"
        else:
            logging_config = self.workdir / f"{self.name}-log4j.properties"
            logging_config.write_text(_log4j1_config(self.log_file), encoding="utf-8")
            logging = f"-Dlog4j.configuration=file:{logging_config}"
        # Small heaps and the serial collector: two cores are shared by every JVM of the suite. C1 alone starts
        # faster; a benchmark asks for the full JIT.
        jit = [] if self.full_jit else ["-XX:TieredStopAtLevel=1"]
        return ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", *jit, "-XX:-UsePerfData",
                "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true", logging, *self.jvm_options,
                "-cp", self.classpath, self.main, *self.args]

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, f"{self.name} is running"
        with open(self.stdout_file, "ab") as out:
            self.process = subprocess.Popen(self.command(), cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        with _RUNNING_LOCK:
            if self not in _RUNNING:
                _RUNNING.append(self)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_alive(self) -> None:
        """Raise, with the log's tail, when the process has exited."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with code {self.process.returncode}\n{self.tail()}")

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """SIGTERM (Kafka's and Connect's clean shutdown), SIGKILL when it outlasts ``timeout``."""
        if not self.alive():
            return
        assert self.process is not None
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL (a crash) and wait for it to go."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(STOP_WAIT)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and answers nothing."""
        if self.alive():
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)

    def forget(self) -> None:
        """Stop, and leave the report's list of logs."""
        self.stop()
        with _RUNNING_LOCK:
            if self in _RUNNING:
                _RUNNING.remove(self)

    def tail(self, lines: int = 40) -> str:
        parts = []
        for path in (self.stdout_file, self.log_file):
            if path.exists() and path.stat().st_size:
                with open(path, "rb") as f:
                    f.seek(max(0, path.stat().st_size - 200 * lines))
                    text = f.read().decode("utf-8", "replace").splitlines()[-lines:]
                parts.append(f"--- {path} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(parts) or f"--- {self.name}: no output ---"


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               processes: Iterable[JavaProcess] = (), interval: float = 0.1) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` s, or at once when one of ``processes`` died."""
    watched = list(processes)
    deadline = time.monotonic() + timeout
    while not condition():
        for process in watched:
            process.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s\n" + "\n".join(p.tail() for p in watched))
        time.sleep(interval)


@dataclass(frozen=True)
class PartitionState:
    """A partition's leader (-1: none), replicas and in-sync replicas, by broker id."""

    leader: int
    replicas: tuple[int, ...]
    isrs: tuple[int, ...]


class Started:
    """A part of the test bed that runs processes: started for a ``with`` block and closed after it, also when its
    start fails half-way, so no process outlives the block."""

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop every process, by pid, and leave the report's list of logs."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class KafkaNode:
    """One KRaft node: a broker, a controller, or both in one process. A broker listens for clients on
    ``client_port`` (advertising ``proxy``'s port when it has one) and for other brokers on
    ``replication_port``."""

    node_id: int
    roles: str
    workdir: Path
    client_port: int | None
    replication_port: int | None
    controller_port: int | None
    proxy: KafkaProxy | None = None
    settings: dict[str, str] = field(default_factory=dict)
    process: JavaProcess | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles


class KafkaCluster(Started):
    """Apache Kafka in KRaft mode on 127.0.0.1: ``brokers`` broker processes and one controller, combined with
    the broker when there is one broker, in a process of its own otherwise (stopping brokers then never costs
    the metadata quorum).

    ``proxied``: every client reaches the brokers through a ``KafkaProxy`` each (the brokers advertise the
    proxies' ports to clients, and replicate to each other directly), which counts requests and injects faults.
    """

    def __init__(self, line: KafkaLine, workdir: Path, brokers: int = 1, full_jit: bool = False,
                 proxied: bool = False, settings: Mapping[str, str] | None = None) -> None:
        self.line, self.workdir, self.full_jit = line, workdir, full_jit
        self.cluster_id = ""
        ports = iter(free_ports(4 * brokers + 1))
        if brokers == 1:
            self.nodes = [KafkaNode(1, "broker,controller", workdir / "node-1", next(ports), next(ports),
                                    next(ports))]
            controllers = [self.nodes[0]]
        else:
            controller = KafkaNode(100, "controller", workdir / "controller", None, None, next(ports))
            self.nodes = [controller] + [KafkaNode(i, "broker", workdir / f"broker-{i}", next(ports), next(ports),
                                                   None) for i in range(1, brokers + 1)]
            controllers = [controller]
        for node in self.brokers:
            if proxied:
                assert node.client_port is not None
                node.proxy = KafkaProxy(node.client_port, next(ports))
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in controllers)
        replication = str(min(brokers, 3))
        common = {
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CLIENTS:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "REPLICATION",
            "offsets.topic.replication.factor": replication,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            # A stopped broker is fenced (and leaves every ISR) within seconds, not Kafka's 9 s.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "replica.lag.time.max.ms": "5000",
            "controlled.shutdown.max.retries": "1",
            **(settings or {}),
        }
        for node in self.nodes:
            listeners, advertised = [], []
            if node.client_port is not None:
                listeners += [f"CLIENTS://127.0.0.1:{node.client_port}",
                              f"REPLICATION://127.0.0.1:{node.replication_port}"]
                advertised += [f"CLIENTS://127.0.0.1:{node.proxy.port if node.proxy else node.client_port}",
                               f"REPLICATION://127.0.0.1:{node.replication_port}"]
            if node.controller_port is not None:
                listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
            node.settings = {
                "process.roles": node.roles,
                "node.id": str(node.node_id),
                "listeners": ",".join(listeners),
                "log.dirs": str(node.workdir / "data"),
                **common,
            }
            if advertised:
                node.settings["advertised.listeners"] = ",".join(advertised)
            node.workdir.mkdir(parents=True, exist_ok=True)
            write_properties(node.workdir / "server.properties", node.settings)

    @property
    def brokers(self) -> list[KafkaNode]:
        return [node for node in self.nodes if node.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        """Where clients connect: the proxies, when there are."""
        return ",".join(f"127.0.0.1:{node.proxy.port if node.proxy else node.client_port}" for node in self.brokers)

    @property
    def proxies(self) -> list[KafkaProxy]:
        return [node.proxy for node in self.brokers if node.proxy is not None]

    def broker(self, node_id: int) -> KafkaNode:
        return next(node for node in self.brokers if node.node_id == node_id)

    def start(self, timeout: float = START_WAIT) -> None:
        """Format every node's storage (once) and start them; return when every broker is registered."""
        self.cluster_id = self._format()
        for proxy in self.proxies:
            proxy.start()
        for node in self.nodes:
            node.process = JavaProcess(f"kafka-{node.node_id}", self.line, "kafka.Kafka",
                                       [str(node.workdir / "server.properties")], node.workdir,
                                       full_jit=self.full_jit)
            node.process.start()
        self.wait_for_brokers([node.node_id for node in self.brokers], timeout)

    def _format(self) -> str:
        # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding, never starting with '-'
        # (Kafka's Uuid.randomUuid draws again: a command line would read it as an option).
        text = "-"
        while text.startswith("-"):
            text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        formats = [subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
             "-cp", self.line.classpath, "kafka.tools.StorageTool", "format", "-t", text,
             "-c", str(node.workdir / "server.properties"), "--ignore-formatted"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for node in self.nodes]
        for node, process in zip(self.nodes, formats, strict=True):
            try:
                output, _ = process.communicate(timeout=START_WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
            if process.returncode != 0:
                raise RuntimeError(f"formatting node {node.node_id} failed:\n{output.decode(errors='replace')}")
        return text

    def wait_for_brokers(self, node_ids: Sequence[int], timeout: float = START_WAIT) -> None:
        """Wait until the cluster's metadata lists every broker in ``node_ids``."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})

        def registered() -> bool:
            try:
                return set(node_ids) <= set(admin.list_topics(timeout=1).brokers)
            except KafkaException:
                return False

        wait_until(registered, timeout, f"brokers {list(node_ids)} registered",
                   [n.process for n in self.nodes if n.process is not None and n.node_id in (*node_ids, 100)])

    def create_topic(self, topic: str, partitions: int = 5, replication: int | None = None,
                     config: Mapping[str, str] | None = None) -> None:
        replication = replication or min(len(self.brokers), 3)
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        futures = admin.create_topics([NewTopic(topic, partitions, replication, config=dict(config or {}))],
                                      operation_timeout=30, request_timeout=30)
        futures[topic].result(timeout=60)

    def records(self, topic: str, foreign: bool = True) -> list[tuple[bytes, bytes | None]]:
        """Every record of a topic, as (key, value), read with a plain consumer to the end; without the records tests
        wrote in a foreign writer's place (``FOREIGN_WRITER_HEADER``) unless ``foreign``."""
        return [(m.key() or b"", m.value())
                for batch in read_to_end({"bootstrap.servers": self.bootstrap_servers}, topic, 30.0, 500)
                for m in batch if foreign or FOREIGN_WRITER_HEADER not in dict(m.headers() or ())]

    def stop_broker(self, node_id: int) -> None:
        node = self.broker(node_id)
        assert node.process is not None
        node.process.stop()

    def kill_broker(self, node_id: int) -> None:
        node = self.broker(node_id)
        assert node.process is not None
        node.process.kill()

    def start_broker(self, node_id: int, timeout: float = START_WAIT) -> None:
        self.start_brokers([node_id], timeout)

    def start_brokers(self, node_ids: Sequence[int], timeout: float = START_WAIT) -> None:
        """Start these brokers together; return when every one is registered."""
        for node_id in node_ids:
            node = self.broker(node_id)
            assert node.process is not None
            node.process.start()
        self.wait_for_brokers(node_ids, timeout)

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        """Each partition of ``topic``: its leader (-1 while it has none), replicas and in-sync replicas, as the
        cluster's metadata says now."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        metadata = admin.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        return {number: PartitionState(p.leader, tuple(p.replicas), tuple(p.isrs))
                for number, p in metadata.partitions.items()}

    def wait_in_sync(self, topics: Iterable[str], timeout: float = START_WAIT) -> None:
        """Wait until every replica of every partition of ``topics`` is in sync and every partition led by its
        preferred replica (the first), electing preferred leaders where a fault moved them."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        names = list(topics)

        def balanced() -> bool:
            try:
                states = {(topic, n): p for topic in names for n, p in self.partitions(topic).items()}
            except KafkaException:
                return False
            if any(set(p.isrs) != set(p.replicas) for p in states.values()):
                return False
            moved = [TopicPartition(topic, n) for (topic, n), p in states.items() if p.leader != p.replicas[0]]
            if moved:
                with contextlib.suppress(KafkaException):
                    admin.elect_leaders(ElectionType.PREFERRED, moved).result(10)
            return not moved

        wait_until(balanced, timeout, f"every replica of {names} in sync and led by its preferred replica",
                   self.processes(), interval=0.5)

    def processes(self) -> list[JavaProcess]:
        return [node.process for node in self.nodes if node.process is not None]

    def close(self) -> None:
        """Every broker, then the controller (a broker's clean shutdown asks the controller)."""
        for node in sorted(self.nodes, key=lambda n: not n.is_broker):
            if node.process is not None:
                node.process.forget()
        for proxy in self.proxies:
            proxy.stop()


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
                 full_jit: bool = False, jvm_options: Sequence[str] = ()) -> None:
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
                                   jvm_options=jvm_options)

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
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def forget(self) -> None:
        self.process.forget()


class ConnectCluster(Started):
    """Connect workers of one group (their own status, config and offset topics) on a Kafka cluster."""

    def __init__(self, line: KafkaLine, workdir: Path, kafka: KafkaCluster, name: str, workers: int = 2,
                 settings: Mapping[str, str] | None = None, full_jit: bool = False,
                 jvm_options: Sequence[str] = ()) -> None:
        """``full_jit``: the workers' JVMs with both compilers, as a user runs them (benchmarks). ``jvm_options``:
        more options for every worker's JVM (a ``-javaagent:``)."""
        self.line, self.kafka, self.name = line, kafka, name
        self.replication = replication = min(len(kafka.brokers), 3)
        self.workers = [ConnectWorker(line, workdir / f"worker-{i}", kafka.bootstrap_servers, name, name,
                                      replication, settings, full_jit, jvm_options) for i in range(workers)]
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
