"""Every error a caller of status-store can see.

    StatusStoreError
     ├── ConfigError        a configuration key has a bad value, or is unknown in our namespaces
     ├── KafkaUnavailableError  the brokers cannot be reached
     ├── TopicSetupError    the status topic cannot be created or is not safe to use
     ├── StoreClosedError   a write was submitted to a store that is not running
     ├── WriteRejectedError the store refuses a new write for now (too many updates pending)
     ├── RecordTooLargeError a status record could never be written (larger than the producer's limit)
     └── WriteFailedError   Kafka did not accept a status write (carries the Kafka error code)

Waits that run out raise the built-in ``TimeoutError``.

Kafka error codes are classified once, in ``ERROR_KINDS``: the retry decision reads the table.
"""

from __future__ import annotations

import enum
import re


class StatusStoreError(Exception):
    """Base class of status-store's own errors."""


# Parts of a configuration key whose value is a secret (``sasl.password``, ``sidecar.rest.token``,
# ``sasl.jaas.config``, ``ssl.key.pem``, ...): such a value never appears in an error message.
_SECRET_PARTS = frozenset({"password", "secret", "token", "jaas", "key", "credentials", "credential"})


def is_secret_key(key: str) -> bool:
    """Whether a configuration key may hold a secret (one of its dotted parts names one)."""
    return not _SECRET_PARTS.isdisjoint(re.split(r"[._-]", key.lower()))


class ConfigError(StatusStoreError):
    """A configuration value is invalid; the message (one line) names the key and the rule, and shows the
    value unless it may be a secret (``show_value=False``, or a key that ``is_secret_key``)."""

    def __init__(self, key: str, value: object, rule: str, show_value: bool = True) -> None:
        self.key, self.value, self.rule = key, value, rule
        name = key if key.isprintable() else repr(key)
        if value is None:
            message = f"Missing configuration {name}: {rule}"
        elif show_value and not is_secret_key(key):
            message = f"Invalid value {value!r} for configuration {name}: {rule}"
        else:
            # A rule may quote the value (librdkafka's messages do).
            hidden = rule.replace(value, "(hidden)") if isinstance(value, str) and value else rule
            message = f"Invalid configuration {name} (value not shown): {hidden}"
        super().__init__(" ".join(message.splitlines()))


class KafkaUnavailableError(StatusStoreError):
    """The Kafka brokers cannot be reached."""


class TopicSetupError(StatusStoreError):
    """The status topic cannot be created, or exists with settings that would lose statuses."""


class StoreClosedError(StatusStoreError):
    """The store is not running."""


class WriteRejectedError(StatusStoreError):
    """The store refuses a new write for now (``status.storage.retry.max.pending`` keys have updates pending, or the
    spool cannot be written); nothing was accepted. Try again after ``retry_after_s`` seconds."""

    def __init__(self, reason: str, retry_after_s: float) -> None:
        self.reason, self.retry_after_s = reason, retry_after_s
        super().__init__(reason)


class RecordTooLargeError(StatusStoreError):
    """A status record is larger than the producer's ``message.max.bytes``: it could never be written,
    so it is refused before it is accepted."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.key, self.size, self.limit = key, size, limit
        super().__init__(f"the record of {key!r} is {size} bytes, more than the producer's limit of {limit} bytes "
                         "(message.max.bytes)")


class WriteFailedError(StatusStoreError):
    """Kafka did not accept a status write."""

    def __init__(self, key: str, code: int, name: str, reason: str) -> None:
        self.key, self.code, self.name, self.reason = key, code, name, reason
        super().__init__(f"write of {key!r} failed: {name}: {reason}")


class ErrorKind(enum.Enum):
    """What a failed write's error code means for a retry."""

    RETRIABLE = "retriable"
    # KIP-951: newer leader information is on its way; retry once at once.
    LEADER_CHANGE = "leader_change"
    # Retrying cannot help (too large, not allowed, malformed, client shutting down).
    FATAL = "fatal"


# By librdkafka's error names (``KafkaError.name()``: what a failed write reports; tests check each name exists).
ERROR_KINDS: dict[str, ErrorKind] = {
    **dict.fromkeys([
        "NOT_LEADER_FOR_PARTITION", "FENCED_LEADER_EPOCH", "LEADER_NOT_AVAILABLE",
    ], ErrorKind.LEADER_CHANGE),
    **dict.fromkeys([
        "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_ALL_BROKERS_DOWN",
        "_RESOLVE", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_QUEUE_FULL", "_NODE_UPDATE",
        "_ISR_INSUFF", "_UNKNOWN_BROKER", "_FAIL",
        "INVALID_MSG", "UNKNOWN_TOPIC_OR_PART", "REQUEST_TIMED_OUT", "BROKER_NOT_AVAILABLE",
        "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_CONTROLLER", "KAFKA_STORAGE_ERROR",
        "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "THROTTLING_QUOTA_EXCEEDED",
        "PREFERRED_LEADER_NOT_AVAILABLE",
    ], ErrorKind.RETRIABLE),
    **dict.fromkeys([
        "MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "TOPIC_EXCEPTION",
        "INVALID_REQUIRED_ACKS", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE",
        "INVALID_TIMESTAMP", "UNSUPPORTED_VERSION", "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        "POLICY_VIOLATION", "INVALID_CONFIG", "UNKNOWN", "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "INVALID_PRODUCER_EPOCH", "UNKNOWN_PRODUCER_ID", "DUPLICATE_SEQUENCE_NUMBER",
        "UNSUPPORTED_COMPRESSION_TYPE", "INVALID_REQUEST",
        "_AUTHENTICATION", "_SSL", "_FATAL", "_INVALID_ARG", "_DESTROY", "_PURGE_QUEUE",
        "_PURGE_INFLIGHT", "_BAD_MSG", "_KEY_SERIALIZATION", "_VALUE_SERIALIZATION",
        "_NOT_IMPLEMENTED", "_UNSUPPORTED_FEATURE", "_STATE",
    ], ErrorKind.FATAL),
}


# Failures after which the write may still reach the broker: its request timed out, or its connection broke, while
# it was out, and Kafka gives no answer for such a request (the network may deliver it later, even on a connection
# the client has closed). The retry queue sends such a value again before any newer value of its key.
FATE_UNKNOWN = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION"})


def may_have_landed(error: WriteFailedError) -> bool:
    """Whether a failed write may still be written (see ``FATE_UNKNOWN``)."""
    return error.name in FATE_UNKNOWN


def classify(error: WriteFailedError) -> ErrorKind:
    """The kind of a failed write's Kafka error. An unknown error is retried: retries are bounded, and a new
    broker error is more often transient than not."""
    return ERROR_KINDS.get(error.name, ErrorKind.RETRIABLE)
