"""Plain confluent-kafka clients for checking what is really in a topic."""

from __future__ import annotations

import asyncio
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from status_store.store import StatusStore

WAIT = 15.0


def raw_producer(store: StatusStore) -> Producer:
    """A plain client writing the way a Connect worker does (Java partitioning)."""
    return Producer({"bootstrap.servers": store.bootstrap_servers, "partitioner": "murmur2_random"})


def write_raw(store: StatusStore, *records: tuple[bytes | None, bytes | None]) -> None:
    producer = raw_producer(store)
    for key, value in records:
        producer.produce(store.config.topic, value, key)
    assert producer.flush(WAIT) == 0


def read_raw(store: StatusStore, topic: str | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the status topic (or another topic) as (partition, key, value), read with a plain
    consumer."""
    topic = topic or store.config.topic
    consumer = Consumer({"bootstrap.servers": store.bootstrap_servers, "group.id": "raw-reader",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    partitions = set(consumer.list_topics(topic, WAIT).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records: list[tuple[int, bytes | None, bytes | None]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT
    try:
        while at_end != partitions and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.1):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                elif error is None:
                    records.append((message.partition() or 0, message.key(), message.value()))
    finally:
        consumer.close()
    assert at_end == partitions, "did not reach the end of the topic in time"
    return records


def last_values(store: StatusStore) -> dict[bytes | None, bytes | None]:
    """The last value of each key in the topic (records of a key share a partition, in order)."""
    return {key: value for _, key, value in read_raw(store)}


async def eventually(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait, bounded, until ``condition()`` holds (for states that no event announces)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.01)


SERVICE_WAIT = 30.0


def sidecar_config(directory: Path, bootstrap_servers: str, topic: str, settings: Mapping[str, object]) -> Path:
    """A `status-store serve --config` file in ``directory``: the brokers, the status topic (replication factor 1)
    and these settings."""
    config = directory / "sidecar.properties"
    lines = [f"bootstrap.servers={bootstrap_servers}", f"status.storage.topic={topic}",
             "status.storage.replication.factor=1", *(f"{key}={value}" for key, value in settings.items())]
    config.write_text("\n".join(lines) + "\n")
    return config


class Service:
    """A `status-store serve` process whose output lines are collected by background threads."""

    def __init__(self, *args: str, nofile: int | None = None) -> None:
        """``nofile``: the process's limit of open file descriptors (RLIMIT_NOFILE), when given."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen([sys.executable, "-m", "status_store.cli", "serve", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        preexec_fn=limit_files)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)

    def wait_for(self, text: str) -> str:
        """The first output line containing ``text``; fails after SERVICE_WAIT seconds."""
        while True:
            try:
                line = self.lines.get(timeout=SERVICE_WAIT)
            except queue.Empty:
                pytest.fail(f"no line with {text!r} in {SERVICE_WAIT} s; output so far: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line

    def output(self) -> list[str]:
        """Every output line so far (those ``wait_for`` went past included), without waiting."""
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return self.seen

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(SERVICE_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail("status-store did not stop within the bound after SIGTERM")
