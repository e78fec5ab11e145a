"""Reading the configuration: a Java ``.properties`` file, ``STATUS_STORE_*`` environment variables and the command
line's options, validated alike into one ``StoreConfig`` (the rules are in the package's docstring)."""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import javaproperties

from ..errors import ConfigError
from ..retry.backoff import JitterMode, RetryMode
from ..settings import INT32_MAX, construct
from . import act, rest
from .clients import KAFKA_PREFIX, kafka_override
from .retry import RetryConfig
from .security import CLIENT_PREFIXES, worker_security
from .store import SETTINGS, SETTINGS_BY_KEY, ExhaustedAction, StoreConfig

log = logging.getLogger(__name__)

ENV_PREFIX = "STATUS_STORE_"
TOPIC_PREFIX = "status.storage."
RETRY_PREFIX = "status.storage.retry."
SPOOL_PREFIX = "status.storage.spool."
HISTORY_PREFIX = "status.storage.history."
SIDECAR_PREFIX = "sidecar."
# Environment variables of Kubernetes service links (and Docker links) for a Service named
# status-store-<x>: <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT[_<port name>], <NAME>_PORT=tcp://ip:port and
# <NAME>_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR].
_SERVICE_LINK_NAME = re.compile(r".+_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)")
_SERVICE_LINK_PORT = re.compile(r".+_PORT")
_SERVICE_LINK_URL = re.compile(r"(tcp|udp|sctp)://\S+")
# A key this many edits (or fewer) away from a known key is a typo of it.
_NEAR_MISS_EDITS = 2


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text as Java does (javaproperties: comments, ``=``/``:``/space separators,
    escapes, continuations, surrogate pairs). A malformed escape is a ``ValueError`` naming its line and
    showing none of the text (it may hold a secret)."""
    result: dict[str, str] = {}
    lines = 0
    try:
        for item in javaproperties.parse(text):
            lines += item.source.count("\n") + item.source.count("\r") - item.source.count("\r\n")
            if isinstance(item, javaproperties.KeyValue):
                result[item.key] = item.value
    except javaproperties.InvalidUEscapeError:
        raise ValueError(f"line {lines + 1}: malformed \\uXXXX escape") from None
    return result


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None,
                overrides: Mapping[str, str] | None = None) -> StoreConfig:
    """Read the properties file (if any), apply ``STATUS_STORE_*`` variables, then ``overrides`` (the command
    line's options, by key), and validate them all alike."""
    properties: dict[str, str] = {}
    if path is not None:
        try:
            raw = Path(path).read_bytes()
        except OSError as e:
            raise ConfigError("--config", str(path), f"cannot read the file: {e}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Java reads .properties files as ISO-8859-1; a Connect worker file may be in it.
            text = raw.decode("latin-1")
        try:
            properties = parse_properties(text)
        except ValueError as e:
            raise ConfigError("--config", str(path), str(e)) from None
    for name, value in (environ or {}).items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            key = name[len(ENV_PREFIX):].lower().replace("_", ".")
            if key not in SETTINGS_BY_KEY and _is_service_link(name, value):
                log.debug("Ignoring the environment variable %s: Kubernetes sets it for a Service, it is no setting",
                          name)
                continue
            if not _is_text(value):
                raise ConfigError(key, value, f"the environment variable {name} is not valid UTF-8 text")
            properties[key] = value
    properties.update(overrides or {})
    return build_config(properties, embedded_needs_opt_in=path is not None)


def _is_text(value: str) -> bool:
    """False for a value holding bytes that were no UTF-8 (Python keeps them as lone surrogates)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_service_link(name: str, value: str) -> bool:
    """Whether an environment variable is one Kubernetes (or Docker) sets for a Service it links."""
    return bool(_SERVICE_LINK_NAME.fullmatch(name)
                or (_SERVICE_LINK_PORT.fullmatch(name) and _SERVICE_LINK_URL.fullmatch(value.strip())))


def build_config(properties: Mapping[str, str], embedded_needs_opt_in: bool = False) -> StoreConfig:
    """Validate a flat key -> value mapping into a StoreConfig.

    ``embedded_needs_opt_in``: the settings come from a configuration file, so a missing
    ``bootstrap.servers`` is an error unless ``sidecar.embedded.broker=true`` asks for the embedded broker.
    """
    values: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    topic_configs: dict[str, str] = {}
    worker_security_settings: dict[str, str] = {}
    overrides: dict[str, str] = {}
    for key, raw in properties.items():
        declared_setting = SETTINGS_BY_KEY.get(key)
        if declared_setting is not None:
            values[key] = declared_setting.parse(key, raw)
        elif key.startswith(KAFKA_PREFIX):
            overrides[key[len(KAFKA_PREFIX):]] = kafka_override(key, raw)
        elif key.startswith((RETRY_PREFIX, SPOOL_PREFIX, HISTORY_PREFIX, SIDECAR_PREFIX)):
            raise ConfigError(key, raw, "unknown key" + _did_you_mean(key), show_value=False)
        elif (near := _near_miss(key)) is not None:
            raise ConfigError(key, raw, f"unknown key (did you mean {near}?)", show_value=False)
        elif key.startswith(TOPIC_PREFIX):
            name = key[len(TOPIC_PREFIX):]
            if name == "cleanup.policy":
                log.warning("Ignoring %s=%s: the status topic is always compacted", key, raw)
            elif name:
                topic_configs[name] = raw.strip()
        elif key.startswith(CLIENT_PREFIXES):
            worker_security_settings[key] = raw
    # Explicit sidecar.kafka.* settings win over those taken from a worker file.
    client_configs = {**worker_security(worker_security_settings, overrides), **overrides}

    _check_broker_choice(values["bootstrap.servers"], values["sidecar.embedded.broker"], embedded_needs_opt_in)
    if values["bootstrap.servers"] is not None and "status.storage.topic" not in properties:
        raise ConfigError("status.storage.topic", None, "required when bootstrap.servers is set")
    config = construct(StoreConfig, values, topic_configs=topic_configs, client_configs=client_configs)
    _check(config)
    return config


def _check(config: StoreConfig) -> None:
    """Rules across keys: a config error naming the key to change."""
    retry = config.retry
    linger = config.client_configs.get("linger.ms", config.client_configs.get("queue.buffering.max.ms"))
    if linger is not None and float(linger) >= retry.delivery_timeout_ms:
        raise ConfigError("status.storage.retry.delivery.timeout.ms", retry.delivery_timeout_ms,
                          f"must be greater than the producer's linger.ms ({linger})")
    if retry.budget.enabled and retry.mode is not RetryMode.PER_UPDATE:
        raise ConfigError("status.storage.retry.budget.max.tokens", retry.budget.max_tokens,
                          "the retry budget applies to status.storage.retry.mode=per-update only (in partition mode "
                          "a held partition sends one probe at a time); set that mode, or leave the budget at 0")
    if retry.initial_backoff_ms > retry.max_backoff_ms:
        raise ConfigError("status.storage.retry.initial.backoff.ms", retry.initial_backoff_ms,
                          f"must not exceed status.storage.retry.max.backoff.ms ({retry.max_backoff_ms})")
    _warn_about_retry_settings(retry)
    act.check(config.restart)
    rest.check(config.rest_tls)
    if config.rest_token is not None and config.rest_token_file is not None:
        raise ConfigError("sidecar.rest.token.file", config.rest_token_file,
                          "cannot be combined with sidecar.rest.token: set one of them")
    if config.exhausted_action is ExhaustedAction.DEAD_LETTER and config.dead_letter_topic is None:
        raise ConfigError("status.storage.retry.dead.letter.topic", None,
                          "required when status.storage.retry.exhausted.action=dead-letter")
    reserved = {config.topic: "status.storage.topic"}
    for key, name in (("config.storage.topic", config.config_topic),
                      ("status.storage.retry.dead.letter.topic", config.dead_letter_topic),
                      ("status.storage.history.topic", config.history_topic)):
        if name is not None and name in reserved:
            raise ConfigError(key, name, f"must differ from {reserved[name]}")
        if name is not None:
            reserved[name] = key


def _check_broker_choice(bootstrap_servers: str | None, embedded: bool | None, needs_opt_in: bool) -> None:
    """The embedded broker keeps nothing: it runs only when chosen, never because a key is missing."""
    if embedded and bootstrap_servers is not None:
        raise ConfigError("sidecar.embedded.broker", "true",
                          "cannot be combined with bootstrap.servers: set one of them")
    if bootstrap_servers is None and (embedded is False or (embedded is None and needs_opt_in)):
        raise ConfigError("bootstrap.servers", None,
                          "set it to the Kafka brokers, or set sidecar.embedded.broker=true for an embedded "
                          "in-memory broker that keeps nothing")


def _warn_about_retry_settings(retry: RetryConfig) -> None:
    """Settings that are valid but probably not what the operator meant."""
    if retry.timeout_ms is not None and retry.delivery_timeout_ms > retry.timeout_ms:
        log.warning("status.storage.retry.delivery.timeout.ms (%d) is longer than status.storage.retry.timeout.ms "
                    "(%d): one attempt may outlast the total bound, so an update can settle late",
                    retry.delivery_timeout_ms, retry.timeout_ms)
    if retry.max_retries > 0 and retry.max_backoff_ms == 0:
        log.warning("status.storage.retry.max.backoff.ms=0: retries are sent at once, with no backoff at all")
    if retry.max_retries == INT32_MAX and retry.timeout_ms is None:
        log.warning("status.storage.retry.max.retries=%d and no status.storage.retry.timeout.ms: a write is retried "
                    "forever while Kafka rejects it", INT32_MAX)
    if retry.jitter_factor == 0 and retry.jitter_mode is not JitterMode.FULL:
        log.warning("status.storage.retry.jitter.factor=0: many sidecars retrying together will do so in step")


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, SETTINGS_BY_KEY, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else f"; known keys: {', '.join(sorted(SETTINGS_BY_KEY))}"


def _near_miss(key: str) -> str | None:
    """The known key that ``key`` is a typo of: at most two edits away (a Connect worker's other keys are
    farther from every key of this service)."""
    for known in SETTINGS_BY_KEY:
        if abs(len(known) - len(key)) <= _NEAR_MISS_EDITS and _edits(key, known) <= _NEAR_MISS_EDITS:
            return known
    return None


def _edits(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) turning ``a`` into ``b``."""
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                best = min(best, before[j - 2] + 1)
            current.append(best)
        before, previous = previous, current
    return previous[-1]
