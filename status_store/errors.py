"""Every error a caller of status-store can see.

    StatusStoreError
     ├── ConfigError        a configuration key has a bad value, or is unknown in our namespaces
     ├── KafkaUnavailableError  the brokers cannot be reached
     ├── TopicSetupError    the status topic cannot be created or is not safe to use
     ├── StoreClosedError   a write was submitted to a store that is not running
     └── WriteFailedError   Kafka did not accept a status write (carries the Kafka error code)

Waits that run out raise the built-in ``TimeoutError``.
"""

from __future__ import annotations


class StatusStoreError(Exception):
    """Base class of status-store's own errors."""


class ConfigError(StatusStoreError):
    """A configuration value is invalid; the message names the key, the value and the rule."""

    def __init__(self, key: str, value: object, rule: str) -> None:
        self.key, self.value, self.rule = key, value, rule
        super().__init__(f"Invalid value {value!r} for configuration {key}: {rule}")


class KafkaUnavailableError(StatusStoreError):
    """The Kafka brokers cannot be reached."""


class TopicSetupError(StatusStoreError):
    """The status topic cannot be created, or exists with settings that would lose statuses."""


class StoreClosedError(StatusStoreError):
    """The store is not running."""


class WriteFailedError(StatusStoreError):
    """Kafka did not accept a status write."""

    def __init__(self, key: str, code: int, name: str, reason: str) -> None:
        self.key, self.code, self.name, self.reason = key, code, name, reason
        super().__init__(f"write of {key!r} failed: {name}: {reason}")
