"""The Kafka clients' settings from the configuration: ``sidecar.kafka.<property>`` overrides (checked by librdkafka,
never those correctness depends on); a Connect worker file's security settings are ``security``'s."""

from __future__ import annotations

from ..errors import ConfigError
from ..kafka.settings import check_property

KAFKA_PREFIX = "sidecar.kafka."
# Settings the store's correctness depends on; sidecar.kafka.* may not change them.
PROTECTED_CLIENT_SETTINGS = frozenset({
    "bootstrap.servers", "metadata.broker.list", "acks", "request.required.acks", "retries",
    "message.send.max.retries", "partitioner", "enable.idempotence", "max.in.flight",
    "max.in.flight.requests.per.connection", "group.id", "enable.auto.commit", "enable.partition.eof",
    "enable.auto.offset.store", "transactional.id",
})


def kafka_override(key: str, raw: str) -> str:
    """A ``sidecar.kafka.<property>`` value, checked: a config error for a protected or unknown property."""
    name, value = key[len(KAFKA_PREFIX):], raw.strip()
    if name in PROTECTED_CLIENT_SETTINGS:
        raise ConfigError(key, raw, "this client setting is fixed by status-store (correctness depends on it)")
    problem = check_property(name, value)
    if problem == "unknown":
        raise ConfigError(key, raw, f"librdkafka has no property {name!r}", show_value=False)
    if problem is not None:
        raise ConfigError(key, raw, problem)
    return value
