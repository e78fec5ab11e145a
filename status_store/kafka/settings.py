"""The settings status-store fixes for its Kafka clients, and finding a topic's partitions."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from ..errors import KafkaUnavailableError, TopicSetupError
from .client_log import client_logging

T = TypeVar("T")
DEFAULT_DELIVERY_TIMEOUT_MS = 10000
# How long a client thread waits for an event before it looks at its stop flag again.
POLL_INTERVAL_S = 0.1


# Java's client defaults where librdkafka's differ in a way that matters here: a broker that comes back is
# reconnected to within a second (librdkafka waits up to 10 s), as Connect's clients do; and no Nagle's algorithm on
# broker connections (Java's client sets TCP_NODELAY on each; librdkafka leaves Nagle on, which holds a small request
# behind the delayed ACK of the one before: tens of ms a write). Overridable.
JAVA_DEFAULTS = {"reconnect.backoff.ms": "50", "reconnect.backoff.max.ms": "1000", "socket.nagle.disable": "true"}
# A status write goes out at once rather than after librdkafka's 5 ms linger: a write waited for (?wait=true, an
# agent's flush before a rebalance) waits for the log, not a timer, and the writes of one turn of the event loop reach
# librdkafka together anyway (the producer's outbox). Overridable.
PRODUCER_DEFAULTS = {"linger.ms": "0"}
# Produce requests in flight per broker connection (see producer_settings).
MAX_IN_FLIGHT = 5

# How long the reader waits for a broker's answer before it gives the connection up and asks the metadata where its
# partitions are led now. A leader that hangs (a paused process, a network partition) answers nothing and closes
# nothing: a Fetch to it goes unanswered until this bound, and the partitions it led, moved to other brokers within
# seconds, are not read meanwhile (so no write to them becomes visible). librdkafka's default is 60 s, Java's
# consumer (Connect's reader) 30 s; a broker that works answers a Fetch within fetch.wait.max.ms (100 ms).
# Overridable (sidecar.kafka.socket.timeout.ms).
READER_REQUEST_TIMEOUT_MS = 10000


def producer_settings(bootstrap_servers: str, client_configs: Mapping[str, str],
                      delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS) -> dict[str, Any]:
    """librdkafka producer settings matching Connect's status producer.

    ``delivery_timeout_ms`` bounds one attempt: how long librdkafka holds a write (queued or in
    flight) before failing it back to the retry queue.
    """
    return {
        **JAVA_DEFAULTS,
        **PRODUCER_DEFAULTS,
        **client_configs,
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_configs.get("client.id", "status-store"),
        **client_logging(bootstrap_servers),
        # Java's default partitioner (murmur2 of the key), so Connect and we agree on partitions.
        "partitioner": "murmur2_random",
        "acks": "all",
        # Retries belong to status-store, not the client (as in Connect).
        "retries": 0,
        # More than one request in flight per broker, where Connect's status producer keeps one: librdkafka puts one
        # partition in each ProduceRequest (Java's client every partition of a broker in one), so with one in flight a
        # write to a second partition of a leader waited for the first one's answer. Order does not ask for one: the
        # retry queue never has two writes of one key in flight (a newer one waits until the older one settles), the
        # status topic orders per key only, and librdkafka never resends (retries 0), so one connection's requests are
        # appended in the order sent. Java's client's default.
        "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
        "enable.idempotence": False,
        "message.timeout.ms": delivery_timeout_ms,
        "request.timeout.ms": min(30000, delivery_timeout_ms),
        # The status topic is set up deliberately (ensure_topic), never auto-created by a write.
        "allow.auto.create.topics": False,
    }


def consumer_settings(bootstrap_servers: str, client_configs: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka consumer settings for a group-less reader of the whole topic."""
    return {
        **JAVA_DEFAULTS,
        # Kafka's default, as Connect's consumers read (librdkafka's default is read_committed): records of open
        # and aborted transactions are read. sidecar.kafka.isolation.level may change it.
        "isolation.level": "read_uncommitted",
        "socket.timeout.ms": READER_REQUEST_TIMEOUT_MS,
        **client_configs,
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_configs.get("client.id", "status-store"),
        **client_logging(bootstrap_servers),
        # librdkafka wants a group id even for assign(); nothing is ever committed or joined.
        "group.id": f"status-store-reader-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        # Bounds how long an idle read_to_end waits for the Fetch that reports the end.
        "fetch.wait.max.ms": 100,
        "allow.auto.create.topics": False,
    }


async def topic_partitions(client: Producer | Consumer, topic: str, bootstrap_servers: str,
                           timeout: float) -> tuple[str | None, tuple[int, ...]]:
    """The cluster id and the topic's partitions, from a Metadata request of ``client``."""
    try:
        metadata = await list_topics(client, topic, timeout)
    except KafkaException as e:
        raise KafkaUnavailableError(f"cannot reach Kafka at {bootstrap_servers}: {e.args[0].str()}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        reason = found.error if found is not None and found.error is not None else "no partitions"
        raise TopicSetupError(f"topic {topic!r} cannot be used: {reason}")
    return metadata.cluster_id, tuple(sorted(found.partitions))


async def list_topics(client: Producer | Consumer | AdminClient, topic: str, timeout: float) -> ClusterMetadata:
    """``client.list_topics(topic, timeout)``, a Metadata request, off the event loop (``off_loop``)."""
    return await off_loop(functools.partial(client.list_topics, topic, timeout), "status-store-metadata")


async def off_loop(call: Callable[[], T], name: str) -> T:
    """A blocking call of a Kafka client, off the event loop in a daemon thread of its own. librdkafka's calls cannot
    be interrupted: against brokers that are gone one takes its whole timeout, and a thread of asyncio's default
    executor would hold the process's exit that long (the interpreter waits for them), past the shutdown's bound."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def request() -> None:
        try:
            result = call()
        except Exception as e:
            settle = functools.partial(_fail, answer, e)
        else:
            settle = functools.partial(_succeed, answer, result)
        with contextlib.suppress(RuntimeError):  # the event loop is closed: nobody waits for the answer
            loop.call_soon_threadsafe(settle)

    threading.Thread(target=request, name=name, daemon=True).start()
    return await answer


def _succeed(answer: asyncio.Future[T], result: T) -> None:
    if not answer.done():
        answer.set_result(result)


def _fail(answer: asyncio.Future[T], error: Exception) -> None:
    if not answer.done():
        answer.set_exception(error)


def check_property(name: str, value: str) -> str | None:
    """Ask librdkafka, through the Python client, whether it knows ``name`` and accepts ``value``.

    Returns None when it does, "unknown" when librdkafka has no such property, or librdkafka's own message
    for an invalid value. (A client of this one setting alone may be refused for another reason, such as a
    SASL mechanism this build lacks: that says nothing about the setting itself, so it counts as accepted.)
    """
    try:
        Producer({name: value, "logger": _DISCARD})
    except KafkaException as e:
        message: str = e.args[0].str()
        if message.startswith("No such configuration property"):
            return "unknown"
        if not message.startswith("Failed to create"):  # that is the client's complaint, not this setting's
            return message
    return None


class _Discard:
    """A client logger that drops what a throwaway client says."""

    def log(self, *args: object) -> None:
        return None


_DISCARD = _Discard()
