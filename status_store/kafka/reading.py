"""What a consumer's errors mean, decided once for every reader of the package, its tests and its benchmarks; and
``read_to_end``, a topic read whole with a plain consumer by that rule.

- ``Consumed.END``: the end of a partition, for now (``_PARTITION_EOF``: librdkafka says so with
  ``enable.partition.eof``).
- ``Consumed.GIVE_UP``: reading again cannot help: a fatal error, a topic or partition the cluster does not know,
  no authorization, an offset out of range, a failed authentication.
- ``Consumed.TRANSIENT``: anything else (a broker away, a leader moving): read again, until a deadline.

The status topic's own reader (``reader.TopicReader``) never gives up, whatever the error: it tails the topic for
the life of the service and logs what it meets; a one-shot read (``read_to_end``, the analytics' offset ranges)
stops at a give-up error and names it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition


class Consumed(enum.Enum):
    """What an error a consumer returned means for the read."""

    END = "end"
    GIVE_UP = "give up"
    TRANSIENT = "transient"


_GIVE_UP = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                      KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.OFFSET_OUT_OF_RANGE,
                      KafkaError._AUTHENTICATION})


def consumed(error: KafkaError) -> Consumed:
    """What the error a consumer returned means: the end of a partition, a reason to give up, or a transient one."""
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        return Consumed.END
    if error.fatal() or code in _GIVE_UP:
        return Consumed.GIVE_UP
    return Consumed.TRANSIENT


class ReadError(RuntimeError):
    """A topic could not be read to its end: an error reading again cannot fix, or the deadline passed."""


def read_to_end(config: Mapping[str, Any], topic: str, timeout_s: float, batch: int = 1000,
                ) -> Iterator[list[Message]]:
    """Every record of ``topic``, from its beginning to the end each partition has when the read reaches it, in
    batches (each partition's records in offset order), read with a consumer of its own (``config``: at least
    ``bootstrap.servers``; no group offsets are used or committed). Raises ``ReadError`` for an error reading
    again cannot fix, or when the partitions are not all at their end within ``timeout_s`` (naming them and the
    last transient error)."""
    consumer = Consumer({"group.id": "status-store-read-to-end", **config, "enable.partition.eof": True,
                         "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        metadata = consumer.list_topics(topic, timeout=max(0.001, timeout_s)).topics.get(topic)
        if metadata is None or metadata.error is not None:
            why = metadata.error.str() if metadata is not None and metadata.error is not None else "not found"
            raise ReadError(f"{topic}: {why}")
        pending = set(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        last_error = ""
        while pending:
            if time.monotonic() > deadline:
                raise ReadError(f"{topic}: partitions {sorted(pending)} not read to their end within {timeout_s:g} s"
                                + (f" (last error: {last_error})" if last_error else ""))
            messages = consumer.consume(batch, 0.2)
            records = [message for message in messages if message.error() is None]
            if len(records) < len(messages):
                for message in messages:
                    error = message.error()
                    if error is None:
                        continue
                    meaning = consumed(error)
                    if meaning is Consumed.END:
                        pending.discard(message.partition())
                    elif meaning is Consumed.GIVE_UP:
                        raise ReadError(f"{topic}/{message.partition()}: {error.str()}")
                    else:
                        last_error = error.str()
            if records:
                yield records
    finally:
        consumer.close()
