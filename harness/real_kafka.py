"""Apache Kafka's own broker (KRaft) as real processes, for the tests and the benchmarks: ``KafkaCluster``, one or
more KRaft brokers, with the controller in the broker's process (one node) or in a process of its own (several
brokers, so that stopping brokers never takes the quorum with them), each optionally behind a ``KafkaProxy``.

The jars, the JVM processes and their logs are ``java_process``'s (``kafka_line``, ``JavaProcess``, ``tails``);
Connect's workers on a cluster are ``real_connect``'s.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from status_store.kafka.reading import read_to_end

from .java_process import (
    FOREIGN_WRITER_HEADER,
    START_WAIT,
    JavaProcess,
    KafkaLine,
    free_ports,
    wait_until,
    write_properties,
)
from .kafka_proxy import KafkaProxy


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
    # A listener of its own per kind of client (``KafkaCluster(client_listeners=...)``), each behind its proxy.
    client_listeners: dict[str, tuple[int, KafkaProxy]] = field(default_factory=dict)
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
    ``client_listeners``: names of more listeners (``SIDECARS``), each on every broker behind a proxy of its own: a
    client bootstrapped on one (``bootstrap(name)``) is told that listener's addresses, so all its traffic goes through
    those proxies (``listener_proxies(name)``), and Kafka can be cut off from that kind of client alone.
    """

    def __init__(self, line: KafkaLine, workdir: Path, brokers: int = 1, full_jit: bool = False,
                 proxied: bool = False, settings: Mapping[str, str] | None = None,
                 client_listeners: Sequence[str] = ()) -> None:
        self.line, self.workdir, self.full_jit = line, workdir, full_jit
        self.cluster_id = ""
        # More arguments of the storage format (a secured cluster's --add-scram credentials).
        self.format_options: list[str] = []
        ports = iter(free_ports((4 + 2 * len(client_listeners)) * brokers + 1))
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
            for name in client_listeners:
                port = next(ports)
                node.client_listeners[name] = (port, KafkaProxy(port, next(ports)))
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in controllers)
        replication = str(min(brokers, 3))
        common = {
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": ",".join(
                f"{name}:PLAINTEXT" for name in ("CLIENTS", "REPLICATION", "CONTROLLER", *client_listeners)),
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
                for name, (port, proxy) in node.client_listeners.items():
                    listeners.append(f"{name}://127.0.0.1:{port}")
                    advertised.append(f"{name}://127.0.0.1:{proxy.port}")
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

    def bootstrap(self, listener: str) -> str:
        """Where clients of a listener of their own (``client_listeners``) connect: its proxies."""
        return ",".join(f"127.0.0.1:{proxy.port}" for proxy in self.listener_proxies(listener))

    def listener_proxies(self, listener: str) -> list[KafkaProxy]:
        """The proxies of a listener of its own, one per broker."""
        return [node.client_listeners[listener][1] for node in self.brokers]

    def broker(self, node_id: int) -> KafkaNode:
        return next(node for node in self.brokers if node.node_id == node_id)

    def start(self, timeout: float = START_WAIT) -> None:
        """Format every node's storage (once) and start them; return when every broker is registered."""
        self.cluster_id = self._format()
        for proxy in self._every_proxy():
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
             "-c", str(node.workdir / "server.properties"), "--ignore-formatted", *self.format_options],
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
        for proxy in self._every_proxy():
            proxy.stop()

    def _every_proxy(self) -> list[KafkaProxy]:
        return self.proxies + [proxy for node in self.brokers for _, proxy in node.client_listeners.values()]
