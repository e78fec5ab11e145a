"""The writers the retry benchmarks compare, behind one small interface, and the ledger they all report to.

- ``ConnectWriter``: Kafka Connect's status writes (``KafkaStatusBackingStore``) on a plain librdkafka
  ``Producer`` with Connect's producer settings, resending each failed update on its own after a backoff (a
  static one, or KIP-1278's): what Connect's store would do with such a policy. These are the baselines. (Connect's
  own immediate resend is not re-implemented any more: bench/connect_outage.py measures a real worker's.)
- ``StoreWriter``: status-store's ``StatusStore`` with a given set of settings.

What Connect does, read in apache/kafka (``connect/runtime/.../storage/KafkaStatusBackingStore.java`` and
``.../util/KafkaBasedLog.java``):

- The status producer gets ``retries=0`` ("we handle retries in this class") and
  ``enable.idempotence=false``; ``KafkaBasedLog.createProducer`` forces ``acks=all`` and
  ``max.in.flight.requests.per.connection=1``. Everything else is the Java producer's default:
  ``linger.ms=5`` since Kafka 4.0 (KIP-1030; 0 up to 3.9), ``batch.size=16384``,
  ``delivery.timeout.ms=120000``, ``request.timeout.ms=30000``, ``buffer.memory`` 32 MiB, reconnect
  backoff 50 ms growing to 1 s, TCP_NODELAY on, and murmur2 of the key for the partition.
- A write's callback, on a retriable error, sends the same record again at once, for ever (the source
  says "TODO: retry more gracefully and not forever"); since KAFKA-14902 the resend is handed to a
  single "status-store-retry" thread. It gives up only when the key was deleted, the store's generation
  moved on, or a safe write is no longer safe: none of these happen here (one worker, one generation,
  plain puts). Every update is retried on its own, so a key updated ten times during an outage has ten
  resend loops.

The translation: the same settings in librdkafka's names, a thread that polls the producer (serving
delivery reports as soon as they arrive, as Java's I/O thread runs callbacks), and each resend made by one timer
thread (a scheduled executor) once its backoff has passed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer

from status_store.config import build_config
from status_store.connect.codec import encode_status
from status_store.connect.model import ConnectorStatus, State, connector_key
from status_store.retry.updates import Outcome, Result, RetryListener, StatusUpdate
from status_store.store import StatusStore

# Java producer defaults (Kafka 4.x) that matter here, in librdkafka's names.
JAVA_LINGER_MS = 5


def connect_producer_settings(bootstrap_servers: str, linger_ms: int) -> dict[str, Any]:
    """Connect's status producer in librdkafka's terms."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "client.id": "connect-status-baseline",
        "partitioner": "murmur2_random",            # Java's default partitioner for keyed records
        "acks": "all",                              # KafkaBasedLog.createProducer
        "max.in.flight.requests.per.connection": 1,  # KafkaBasedLog.createProducer
        "retries": 0,                               # KafkaStatusBackingStore.configure
        "enable.idempotence": False,                # KafkaStatusBackingStore.configure
        "linger.ms": linger_ms,
        "batch.size": 16384,
        "message.timeout.ms": 120000,               # delivery.timeout.ms
        "request.timeout.ms": 30000,
        "queue.buffering.max.kbytes": 32768,        # buffer.memory
        "queue.buffering.max.messages": 2147483647,  # Java bounds the buffer by bytes only
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000,
        "socket.nagle.disable": True,
        "allow.auto.create.topics": False,
        "log_level": 2,                             # connection-refused lines during outages are expected
    }


def status_for(key_index: int, version: int) -> ConnectorStatus:
    """The status every writer writes for a key at a version. The version is in the worker id, so a value
    says which version it is, whatever path it took (a retry, a parked update sent again); the store's
    write rules do not look at the worker id of a plain put."""
    return ConnectorStatus(f"connector-{key_index}", State.FAILED if version % 2 else State.RUNNING,
                           f"worker-{version}:8083", 1)


def version_of(value: bytes | None) -> int:
    """The version a value of ``status_for`` carries."""
    worker_id: str = json.loads(value or b"{}")["worker_id"]
    return int(worker_id.removeprefix("worker-").partition(":")[0])


def key_for(key_index: int) -> str:
    """The record key of ``status_for(key_index, ...)``."""
    return connector_key(f"connector-{key_index}")


async def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Check ``condition`` every 10 ms for at most ``timeout`` seconds; whether it came true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class Ledger:
    """What a writer was asked to write and what Kafka acknowledged, per key and version.

    Fed from the event loop (status-store) or from the producer's threads (Connect), hence the lock.
    Times are ``time.monotonic()``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latest: dict[str, int] = {}
        self._submitted_at: dict[tuple[str, int], float] = {}
        # When each key's latest version became durable (absent while it is not).
        self.durable_at: dict[str, float] = {}
        # (submitted at, key, submit-to-durable seconds) of every written update.
        self.latencies: list[tuple[float, str, float]] = []
        # The record with the highest offset written per key: (offset, version).
        self._last_written: dict[str, tuple[int, int]] = {}
        self._given_up: set[tuple[str, int]] = set()

    def submitted(self, key: str, version: int) -> None:
        """A writer was asked to write ``version`` of ``key``."""
        now = time.monotonic()
        with self._lock:
            self.latest[key] = version
            self._submitted_at[(key, version)] = now
            self.durable_at.pop(key, None)

    def written(self, key: str, version: int, offset: int) -> None:
        """Kafka acknowledged ``version`` of ``key`` at ``offset``."""
        now = time.monotonic()
        with self._lock:
            self._given_up.discard((key, version))  # a parked update can be written after all
            submitted = self._submitted_at.pop((key, version), None)
            if submitted is not None:
                self.latencies.append((submitted, key, now - submitted))
            if self.latest.get(key) == version and key not in self.durable_at:
                self.durable_at[key] = now
            if offset > self._last_written.get(key, (-1, -1))[0]:
                self._last_written[key] = (offset, version)

    def given_up(self, key: str, version: int) -> None:
        """The writer stopped trying ``version`` of ``key`` without writing it."""
        with self._lock:
            self._given_up.add((key, version))

    def all_durable(self) -> bool:
        """Whether the latest version of every key is durable."""
        with self._lock:
            return all(key in self.durable_at for key in self.latest)

    def durable_after(self, start: float, keys: Iterable[str]) -> float | None:
        """Seconds from ``start`` until the latest version of every one of ``keys`` was durable (None: some
        still are not)."""
        with self._lock:
            times = [self.durable_at.get(key) for key in keys]
        if any(at is None for at in times):
            return None
        return max(0.0, max((at for at in times if at is not None), default=start) - start)

    def submit_to_durable(self, keys: set[str], start: float, end: float) -> list[float]:
        """Submit-to-durable seconds of the written updates of ``keys`` submitted in ``[start, end)``."""
        with self._lock:
            return [latency for at, key, latency in self.latencies if key in keys and start <= at < end]

    def latest_lost(self) -> int:
        """Keys whose latest version the writer gave up on."""
        with self._lock:
            return sum(1 for key, version in self.latest.items() if (key, version) in self._given_up)

    def stale(self) -> int:
        """Keys whose last record in the topic (highest offset) is an older version than the latest: a stale
        retry landed after the newer value."""
        with self._lock:
            return sum(1 for key, version in self.latest.items()
                       if key in self._last_written and self._last_written[key][1] != version)


class Writer(Protocol):
    """A status writer under test."""

    name: str

    async def start(self) -> None:
        """Connect and get ready to write."""

    def submit(self, key_index: int, version: int) -> None:
        """Write ``status_for(key_index, version)``; never blocks."""

    @property
    def attempts(self) -> int:
        """Records handed to the producer so far, first attempts and retries."""

    async def settle(self, timeout: float) -> bool:
        """Wait until every update is written or given up; False if ``timeout`` passed first."""

    async def stop(self) -> None:
        """Close (pending updates are dropped)."""


# Seconds before retry ``n`` (0 for the first retry); None: give up.
ResendDelay = Callable[[int], float | None]


@dataclass(frozen=True)
class ConnectPolicy:
    """A baseline: how Connect's resend loop waits before each resend."""

    name: str
    delay: ResendDelay


@dataclass(order=True)
class _Resend:
    due: float
    number: int
    key: str
    version: int
    value: bytes
    retries: int


class ConnectWriter:
    """Connect's status write path: every update sent on its own and resent on its own after a failure."""

    def __init__(self, policy: ConnectPolicy, bootstrap_servers: str, topic: str, ledger: Ledger) -> None:
        self.name = policy.name
        self._policy, self._bootstrap, self._topic, self._ledger = policy, bootstrap_servers, topic, ledger
        self._producer: Producer | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timers: list[_Resend] = []
        self._timer_wake = threading.Condition()
        self._numbers = itertools.count()
        self._count_lock = threading.Lock()
        self._attempts = 0
        # Updates neither written nor given up yet.
        self._unsettled = 0

    async def start(self) -> None:
        """Create the producer, fetch the topic's metadata, start the poll and timer threads."""
        self._producer = Producer(connect_producer_settings(self._bootstrap, JAVA_LINGER_MS))
        await asyncio.to_thread(self._producer.list_topics, self._topic, 10)
        self._threads = [threading.Thread(target=self._poll, name="connect-baseline-poll", daemon=True),
                         threading.Thread(target=self._run_timers, name="connect-baseline-retry", daemon=True)]
        for thread in self._threads:
            thread.start()

    def submit(self, key_index: int, version: int) -> None:
        """``KafkaStatusBackingStore.put``: encode and send."""
        status = status_for(key_index, version)
        value = encode_status(status.state, status.worker_id, status.generation, status.trace)
        assert value is not None
        self.put(key_for(key_index), version, value)

    def put(self, key: str, version: int, value: bytes) -> None:
        """``KafkaStatusBackingStore.put`` of an encoded status, the ``version``-th of its key; never blocks."""
        self._ledger.submitted(key, version)
        with self._count_lock:
            self._unsettled += 1
        self._send(key, version, value, 0)

    @property
    def attempts(self) -> int:
        """Records handed to the producer."""
        return self._attempts

    async def settle(self, timeout: float) -> bool:
        """Wait until nothing is in flight or waiting for a resend."""
        return await wait_until(lambda: self._unsettled == 0, timeout)

    async def stop(self) -> None:
        """Stop resending, drop what is left, and join the threads."""
        self._stopping.set()
        with self._timer_wake:
            self._timer_wake.notify()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        if self._producer is not None:
            self._producer.purge()
            self._producer.flush(1)

    def _send(self, key: str, version: int, value: bytes, retries: int) -> None:
        assert self._producer is not None
        with self._count_lock:
            self._attempts += 1

        def delivered(error: KafkaError | None, message: Message) -> None:
            # Runs on the poll thread, as Java runs send callbacks on the producer's I/O thread.
            if error is None:
                self._ledger.written(key, version, message.offset() or 0)
                self._settled()
            elif self._stopping.is_set():
                self._settled()
            else:
                self._failed(key, version, value, retries)

        try:
            self._producer.produce(self._topic, value, key.encode(), on_delivery=delivered)
        except BufferError:
            # Past buffer.memory, Java's send would block the resend thread; the benchmark sizes stay far below.
            self._ledger.given_up(key, version)
            self._settled()

    def _failed(self, key: str, version: int, value: bytes, retries: int) -> None:
        wait = self._policy.delay(retries)
        if wait is None:
            self._ledger.given_up(key, version)
            self._settled()
        else:
            resend = _Resend(time.monotonic() + wait, next(self._numbers), key, version, value, retries + 1)
            with self._timer_wake:
                heapq.heappush(self._timers, resend)
                self._timer_wake.notify()

    def _settled(self) -> None:
        with self._count_lock:
            self._unsettled -= 1

    def _poll(self) -> None:
        producer = self._producer
        assert producer is not None
        while not self._stopping.is_set():
            # Returns as soon as a delivery report is served; the timeout only bounds how late a stop is seen.
            producer.poll(0.05)

    def _run_timers(self) -> None:
        while not self._stopping.is_set():
            with self._timer_wake:
                now = time.monotonic()
                due: list[_Resend] = []
                while self._timers and self._timers[0].due <= now:
                    due.append(heapq.heappop(self._timers))
                if not due:
                    self._timer_wake.wait(self._timers[0].due - now if self._timers else None)
                    continue
            for resend in due:
                self._send(resend.key, resend.version, resend.value, resend.retries)
        with self._timer_wake:
            dropped, self._timers = len(self._timers), []
        with self._count_lock:
            self._unsettled -= dropped


class StoreWriter(RetryListener):
    """status-store with some settings, as a writer of the benchmark (it listens to its own queue's outcomes)."""

    def __init__(self, settings: dict[str, str], bootstrap_servers: str, topic: str, ledger: Ledger) -> None:
        self.name = store_label(settings)
        self._ledger = ledger
        config = build_config({"bootstrap.servers": bootstrap_servers, "status.storage.topic": topic,
                               "sidecar.shutdown.timeout.ms": "1000", **settings})
        self.store = StatusStore(config, bootstrap_servers, listeners=[self])

    async def start(self) -> None:
        """Start the store (topic check, read to the end)."""
        await self.store.start()

    def submit(self, key_index: int, version: int) -> None:
        """``StatusStore.put``."""
        self._ledger.submitted(key_for(key_index), version)
        self.store.put(status_for(key_index, version))

    @property
    def attempts(self) -> int:
        """Attempts the store's retry queue has sent."""
        return self.store.queue.attempts_total

    async def settle(self, timeout: float) -> bool:
        """Wait until every update has an outcome."""
        try:
            await self.store.flush(timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop the store."""
        await self.store.stop()

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        """Record a written update in the ledger, and a failed one as given up (a superseded one has a newer
        version that counts instead)."""
        if outcome.result is Result.WRITTEN:
            offset = outcome.delivery.offset if outcome.delivery is not None else 0
            self._ledger.written(update.key, version_of(update.value), offset)
        elif outcome.result is Result.FAILED:
            self._ledger.given_up(update.key, version_of(update.value))


def store_label(settings: dict[str, str]) -> str:
    """A store variant's name: its settings, or "defaults"."""
    return "status-store, " + (", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults")
