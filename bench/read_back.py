"""Benchmark the sidecar's own write until durable and read back (``PUT ?wait=true``) against the log's own pace, in
the same run, on Apache Kafka's broker on loopback.

    .venv/bin/python -m bench.read_back [--writes 1200] [--rounds 6] [--sidecar KEY=VALUE ...] [--quick]

One Apache Kafka 4.x broker (KRaft, both JIT compilers) on 127.0.0.1, and ``status-store serve`` on it (its status
topic of 5 partitions, created by the sidecar). Measured, one write at a time, in ``--rounds`` alternating blocks:

- **the sidecar**: ``PUT /connectors/{name}/status?wait=true`` on one keep-alive HTTP connection, until its answer
  (200: acknowledged by the broker and read back into the sidecar's cache, what ``?wait=true`` promises), sent by
  the standard library's ``http.client``, a lean client (a request with a small body in one ``send``);
- **the sidecar through httpx**: the same requests sent by httpx, the client of the earlier figures, whose own
  Python adds about a millisecond a request on this machine: what a heavier client costs, measured beside;
- **the log**: the same record bytes written by a plain confluent-kafka producer with the sidecar's own producer
  settings (``kafka.settings.producer_settings``: ``acks=all`` and the rest), until a plain consumer with the
  sidecar's reader settings, tailing the topic, has read it back: what the log itself takes, with no HTTP, no store
  (to a topic of its own, of the same partitions); and, apart, until the producer's acknowledgement alone;
- **the agent's request**: ``POST /agent/statuses`` with one status and ``wait_ms`` (as a worker's agent sends a
  status: agent/PROTOCOL.md), on one keep-alive ``http.client`` connection, until the answer that carries its
  outcome (``written``: Kafka acknowledged it). What a stock worker's producer does in the log's acknowledgement
  alone, the pod does in this request: its cost against that acknowledgement is what a worker's flush before a
  rebalance, and a resume, pay.

``--sidecar sidecar.kafka.<x>=<v>`` sets a client setting of the sidecar, and the same of the plain clients, so
both sides stay alike. Prints each side's p50, p99 and max in ms and the ratios; the target is the sidecar's p99
within 10 ms.
"""

from __future__ import annotations

import functools
import http.client
import json
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Message, Producer, TopicPartition

from bench import BenchParser, load_average
from harness import free_port
from harness.java_process import kafka_line
from harness.real_kafka import KafkaCluster
from harness.service import Service, sidecar_config
from status_store.connect.codec import encode_status
from status_store.connect.model import State, connector_key
from status_store.kafka.settings import consumer_settings, producer_settings

PARTITIONS = 5
CONNECTORS = 7
# Bound on one write of either side: past it the run fails rather than hangs.
WRITE_BOUND_S = 30.0


def body(i: int) -> dict[str, object]:
    """The i-th status: RUNNING and PAUSED in turn, so that every write changes its key."""
    return {"state": "PAUSED" if i % 2 else "RUNNING", "worker_id": "worker-1.example.com:8083", "generation": 3}


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` (nearest rank), in ms."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Log:
    """A plain producer and a tailing consumer on the topic, with the sidecar's own client settings."""

    def __init__(self, kafka: KafkaCluster, topic: str, client_configs: dict[str, str]) -> None:
        self.topic = topic
        # Each write's seconds until the producer's acknowledgement alone (the read back not waited for).
        self.acknowledged: list[float] = []
        bootstrap = kafka.bootstrap_servers
        kafka.create_topic(topic, PARTITIONS, 1, {"cleanup.policy": "compact"})
        self._producer = Producer(producer_settings(bootstrap, {**client_configs, "log_level": "2"}))
        self._consumer = Consumer(consumer_settings(bootstrap, {**client_configs, "log_level": "2"}))
        self._consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        # Until the assignment has settled at the end of every partition.
        for _ in range(20):
            self._consumer.poll(0.05)

    def write(self, i: int) -> float:
        """One record written, acknowledged and read back; seconds."""
        state = State.PAUSED if i % 2 else State.RUNNING
        acknowledged = threading.Event()
        failed: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failed.append(error)
            acknowledged.set()

        key = connector_key(f"c{i % CONNECTORS}").encode()
        began = time.perf_counter()
        self._producer.produce(self.topic, encode_status(state, "worker-1.example.com:8083", 3, None), key,
                               on_delivery=delivered)
        deadline = began + WRITE_BOUND_S
        while not acknowledged.is_set():
            self._producer.poll(0.1)
            if time.perf_counter() > deadline:
                raise TimeoutError("the log's write was not acknowledged")
        if failed:
            raise RuntimeError(f"the log's write failed: {failed[0]}")
        self.acknowledged.append(time.perf_counter() - began)
        while True:
            message = self._consumer.poll(0.1)
            if message is not None and message.error() is None and message.key() == key:
                return time.perf_counter() - began
            if time.perf_counter() > deadline:
                raise TimeoutError("the log's write was not read back")

    def close(self) -> None:
        self._consumer.close()
        self._producer.flush(10)


def httpx_write(http: httpx.Client, i: int) -> float:
    """One ``PUT ?wait=true`` sent by httpx; seconds until its 200."""
    began = time.perf_counter()
    answer = http.put(f"/connectors/c{i % CONNECTORS}/status", params={"wait": "true"}, content=json.dumps(body(i)),
                      headers={"Content-Type": "application/json"})
    took = time.perf_counter() - began
    if answer.status_code != 200:
        raise RuntimeError(f"PUT ?wait=true answered {answer.status_code}: {answer.text[:300]}")
    return took


class PlainClient:
    """``PUT ?wait=true`` on one keep-alive connection of the standard library's ``http.client``, which sends a request
    with a small body in one ``send``. A connection the sidecar closed while the other sides took their turn (its
    keep-alive timeout) is opened again once, as httpx opens one again."""

    def __init__(self, port: int) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WRITE_BOUND_S)

    def write(self, i: int) -> float:
        """One ``PUT ?wait=true``; seconds until its 200."""
        try:
            return self._write(i)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self._connection.close()
            return self._write(i)

    def _write(self, i: int) -> float:
        began = time.perf_counter()
        self._connection.request("PUT", f"/connectors/c{i % CONNECTORS}/status?wait=true",
                                 json.dumps(body(i)).encode(), {"Content-Type": "application/json"})
        answer = self._connection.getresponse()
        text = answer.read()
        took = time.perf_counter() - began
        if answer.status != 200:
            raise RuntimeError(f"PUT ?wait=true answered {answer.status}: {text[:300]!r}")
        return took

    def close(self) -> None:
        self._connection.close()


class AgentClient:
    """A worker's agent's request, one status each (agent/PROTOCOL.md): ``POST /agent/statuses`` with ``wait_ms``, on
    one keep-alive ``http.client`` connection, until the answer carrying its outcome."""

    WAIT_MS = 250

    def __init__(self, port: int) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WRITE_BOUND_S)
        self._agent = uuid.uuid4().hex
        self._seq = 0

    def write(self, i: int) -> float:
        """One status in one request; seconds until the answer that says it was written."""
        try:
            return self._write(i)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self._connection.close()
            return self._write(i)

    def _write(self, i: int) -> float:
        self._seq += 1
        seq = self._seq
        update = {"seq": seq, "kind": "connector", "connector": f"c{i % CONNECTORS}", "trace": None, "safe": False,
                  **body(i)}
        request = {"agent": self._agent, "worker_id": "worker-1.example.com:8083", "ack": seq - 1,
                   "lease_ms": 10_000, "sent_at_ms": int(time.time() * 1000), "final": False,
                   "wait_ms": self.WAIT_MS, "updates": [update]}
        began = time.perf_counter()
        self._connection.request("POST", "/agent/statuses", json.dumps(request).encode(),
                                 {"Content-Type": "application/json"})
        answer = self._connection.getresponse()
        text = answer.read()
        took = time.perf_counter() - began
        if answer.status != 200:
            raise RuntimeError(f"POST /agent/statuses answered {answer.status}: {text[:300]!r}")
        outcomes = {o["seq"]: o["result"] for o in json.loads(text)["outcomes"]}
        if outcomes.get(seq) != "written":
            raise RuntimeError(f"status {seq} not written within wait_ms {self.WAIT_MS}: {text[:300]!r}")
        return took

    def close(self) -> None:
        self._connection.close()


def main() -> None:
    """Start the broker and the sidecar, measure the sides in alternating blocks, print the table."""
    parser = BenchParser(__doc__)
    parser.add_size("--writes", type=int, full=1200, quick=40, help="writes per side")
    parser.add_size("--rounds", type=int, full=6, quick=2, help="alternating blocks the writes are split into")
    parser.add_key_values("--sidecar", help="a sidecar setting (again for more); sidecar.kafka.* ones go to the "
                                            "plain clients too")
    args = parser.parse()
    settings: dict[str, str] = args.sidecar
    clients = {key.removeprefix("sidecar.kafka."): value for key, value in settings.items()
               if key.startswith("sidecar.kafka.")}
    print(f"load average at the start: {load_average()}; the sidecar with {settings or 'its defaults'}")
    ours, through_httpx, log_side = ("the sidecar, PUT ?wait=true", "the sidecar through httpx",
                                     "the log (plain producer and consumer)")
    agent_side, acknowledged = ("the agent's request, until its outcome", "the log, until acknowledged")
    sides: dict[str, list[float]] = {ours: [], through_httpx: [], log_side: [], agent_side: []}
    with tempfile.TemporaryDirectory(prefix="bench-read-back-") as scratch, \
            KafkaCluster(kafka_line("kafka-4"), Path(scratch) / "kafka", full_jit=not args.quick) as kafka:
        topic = f"read-back-{uuid.uuid4().hex[:8]}"
        port = free_port()
        config = sidecar_config(Path(scratch), kafka.bootstrap_servers, topic,
                                {"status.storage.partitions": PARTITIONS, **settings})
        service = Service("--config", str(config), "--port", str(port))
        log = None
        try:
            service.wait_for("Uvicorn running on")
            log = Log(kafka, f"{topic}-log", clients)
            block = max(1, args.writes // args.rounds)
            # TCP_NODELAY, as a worker's agent (Java's HTTP client) sends: Nagle's algorithm would hold a request's
            # body behind the ACK of its headers.
            transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            plain = PlainClient(port)
            agent = AgentClient(port)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WRITE_BOUND_S, transport=transport) as http:
                writers: list[tuple[str, Callable[[int], float]]] = [
                    (ours, plain.write), (through_httpx, functools.partial(httpx_write, http)), (log_side, log.write),
                    (agent_side, agent.write)]
                for i in range(10):  # the connections, the JIT and the keys warmed, on every side
                    for _, write in writers:
                        write(i)
                log.acknowledged.clear()
                for round_ in range(args.rounds):
                    # The sides take turns at going first.
                    turn = round_ % len(writers)
                    for side, write in writers[turn:] + writers[:turn]:
                        sides[side] += [write(round_ * block + i) for i in range(block)]
            plain.close()
            agent.close()
            sides[acknowledged] = log.acknowledged
        finally:
            if log is not None:
                log.close()
            service.stop()
    print(f"\none write at a time, until acknowledged and read back, on one Apache Kafka broker on loopback "
          f"({PARTITIONS} partitions); {args.rounds} alternating blocks\n")
    print("| side | writes | p50 (ms) | p99 (ms) | max (ms) | mean (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for side, seconds in sides.items():
        print(f"| {side} | {len(seconds)} | {quantile(seconds, 0.5):.1f} | {quantile(seconds, 0.99):.1f} | "
              f"{1000 * max(seconds):.1f} | {1000 * statistics.mean(seconds):.1f} |")
    mine, heavier, log_pace = sides[ours], sides[through_httpx], sides[log_side]
    print(f"\nthe sidecar against the log: p50 {quantile(mine, 0.5) / quantile(log_pace, 0.5):.2f}x, p99 "
          f"{quantile(mine, 0.99) / quantile(log_pace, 0.99):.2f}x; the sidecar's p99 {quantile(mine, 0.99):.1f} ms "
          f"(target <= 10 ms); through httpx: p50 {quantile(heavier, 0.5):.1f} ms, p99 {quantile(heavier, 0.99):.1f} "
          f"ms (httpx's own cost: {quantile(heavier, 0.5) - quantile(mine, 0.5):+.1f} ms at p50, "
          f"{quantile(heavier, 0.99) - quantile(mine, 0.99):+.1f} ms at p99)")
    requests, acks = sides[agent_side], sides[acknowledged]
    print(f"the agent's request against the log's acknowledgement: p50 {quantile(requests, 0.5):.1f} against "
          f"{quantile(acks, 0.5):.1f} ms ({quantile(requests, 0.5) - quantile(acks, 0.5):+.1f} ms), p99 "
          f"{quantile(requests, 0.99):.1f} against {quantile(acks, 0.99):.1f} ms "
          f"({quantile(requests, 0.99) - quantile(acks, 0.99):+.1f} ms)")
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
