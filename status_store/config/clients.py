"""The Kafka clients' settings from the configuration: ``sidecar.kafka.<property>`` overrides (checked by librdkafka,
never those correctness depends on), and a Connect worker file's security settings translated for librdkafka."""

from __future__ import annotations

import logging
import re

from ..errors import ConfigError, is_secret_key
from ..kafka.settings import check_property

log = logging.getLogger(__name__)

KAFKA_PREFIX = "sidecar.kafka."
# Client settings of a Connect worker file that the Kafka clients of this service use too.
CLIENT_PREFIXES = ("security.protocol", "sasl.", "ssl.")
# Settings the store's correctness depends on; sidecar.kafka.* may not change them.
PROTECTED_CLIENT_SETTINGS = frozenset({
    "bootstrap.servers", "metadata.broker.list", "acks", "request.required.acks", "retries",
    "message.send.max.retries", "partitioner", "enable.idempotence", "max.in.flight",
    "max.in.flight.requests.per.connection", "group.id", "enable.auto.commit", "enable.partition.eof",
    "enable.auto.offset.store", "transactional.id",
})
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


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


def worker_client_setting(key: str, raw: str) -> dict[str, str]:
    """Translate one security setting of a Connect worker file for librdkafka."""
    value = raw.strip()
    if key == "sasl.jaas.config":
        # PLAIN and SCRAM logins carry a username and password; librdkafka takes them directly.
        fields = dict(_JAAS_FIELD.findall(value))
        if "username" in fields and "password" in fields:
            return {"sasl.username": _jaas_unquote(fields["username"]),
                    "sasl.password": _jaas_unquote(fields["password"])}
        log.warning("Ignoring sasl.jaas.config: only PLAIN/SCRAM username and password can be taken over; "
                    "set sidecar.kafka.<librdkafka property> instead")
        return {}
    problem = check_property(key, value)
    if problem is None:
        return {key: value}
    if problem == "unknown":
        problem = "a Java client setting librdkafka does not have"
    elif is_secret_key(key) and value:
        problem = problem.replace(value, "(hidden)")
    log.warning("Ignoring %s from the worker configuration: %s. Set sidecar.kafka.<librdkafka property> "
                "instead.", key, problem)
    return {}


_JAAS_ESCAPE = re.compile(r"\\([0-3][0-7]{0,2}|[4-7][0-7]?|.)", re.DOTALL)
_JAAS_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _jaas_unquote(text: str) -> str:
    """The value of a quoted JAAS option, read as Java's JAAS parser (a StreamTokenizer) reads it: C escapes
    and octal codes; a backslash before any other character keeps that character (``\\u`` is ``u``)."""

    def replace(match: re.Match[str]) -> str:
        seq = match.group(1)
        if seq[0].isdigit():
            return chr(int(seq, 8))
        return _JAAS_SIMPLE_ESCAPES.get(seq, seq)

    return _JAAS_ESCAPE.sub(replace, text)
