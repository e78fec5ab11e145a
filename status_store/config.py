"""Configuration: a Java ``.properties`` file plus environment overrides -> one validated object.

Connect's own keys keep Connect's names (``bootstrap.servers``, ``status.storage.topic``, ...), so
the sidecar can read a Connect worker's properties file; keys this service does not use are
ignored. Inside this service's own namespaces (``status.storage.retry.``, ``.spool.``, ``.history.``
and ``sidecar.``) an unknown key is an error, so a typo never passes silently. Every other ``status.storage.<x>`` is
passed to topic creation as topic config ``<x>``, exactly as Connect does.

A key one or two characters away from a key this service knows (``bootstrap.server``,
``status.storage.topik``) is an error with a suggestion, wherever it is: a typo of
``bootstrap.servers`` would otherwise select the embedded broker, which keeps nothing. For the same
reason, a configuration file without ``bootstrap.servers`` must ask for the embedded broker
(``sidecar.embedded.broker=true``); only a start without any file gets it by default.

An environment variable ``STATUS_STORE_<KEY>`` overrides ``<key>``: upper-case, dots as
underscores (``STATUS_STORE_BOOTSTRAP_SERVERS`` -> ``bootstrap.servers``). The variables Kubernetes
injects for a Service whose name starts with ``status-store`` (``STATUS_STORE_SIDECAR_PORT=tcp://...``,
``..._SERVICE_HOST``, ...) are not settings and are ignored.

Values of keys that may hold secrets (``is_secret_key``) and of unknown keys never appear in errors.
"""

from __future__ import annotations

import difflib
import enum
import logging
import math
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backoff import JitterMode, RetryMode
from .budget import BudgetSettings
from .errors import ConfigError, is_secret_key
from .kafka.settings import check_property

log = logging.getLogger(__name__)

ENV_PREFIX = "STATUS_STORE_"
DEFAULT_TOPIC = "connect-status"
TOPIC_PREFIX = "status.storage."
RETRY_PREFIX = "status.storage.retry."
SPOOL_PREFIX = "status.storage.spool."
HISTORY_PREFIX = "status.storage.history."
SIDECAR_PREFIX = "sidecar."
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
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
# Environment variables of Kubernetes service links (and Docker links) for a Service named
# status-store-<x>: <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT[_<port name>], <NAME>_PORT=tcp://ip:port and
# <NAME>_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR].
_SERVICE_LINK_NAME = re.compile(r".+_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)")
_SERVICE_LINK_PORT = re.compile(r".+_PORT")
_SERVICE_LINK_URL = re.compile(r"(tcp|udp|sctp)://\S+")
# The token the deployment examples ship with; a service must never run with it.
PLACEHOLDER_TOKEN_PREFIX = "change-me"
# A key this many edits (or fewer) away from a known key is a typo of it.
_NEAR_MISS_EDITS = 2


class ExhaustedAction(enum.StrEnum):
    """What happens to a status update after its last retry failed."""

    DROP = "drop"
    DEAD_LETTER = "dead-letter"
    PARK = "park"


@dataclass(frozen=True, slots=True)
class Setting:
    """One configuration key: its name, default, rule and documentation."""

    key: str
    default: Any
    parse: Callable[[str, str], Any]
    doc: str


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How failed status writes are retried: KIP-1278's settings and ours."""

    max_retries: int
    initial_backoff_ms: int
    max_backoff_ms: int
    backoff_multiplier: float
    jitter_factor: float
    jitter_mode: JitterMode = JitterMode.ADDITIVE
    timeout_ms: int | None = None
    delivery_timeout_ms: int = 10000
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    mode: RetryMode = RetryMode.PARTITION
    probe_max_backoff_ms: int = 1000
    max_pending: int | None = 100_000


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The validated configuration of one status-store instance."""

    bootstrap_servers: str | None
    topic: str
    partitions: int
    replication_factor: int
    topic_configs: Mapping[str, str]
    client_configs: Mapping[str, str]
    retry: RetryConfig
    spool_path: str | None
    rest_host: str
    rest_port: int
    rest_token: str | None = field(repr=False)
    rest_max_body_bytes: int
    startup_timeout_s: float
    shutdown_timeout_s: float
    exhausted_action: ExhaustedAction = ExhaustedAction.PARK
    dead_letter_topic: str | None = None
    history_topic: str | None = None
    history_max_pending: int = 100_000
    sidecar_name: str = "status-store"
    config_topic: str | None = None
    connector_types: Mapping[str, str] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        """True when no ``bootstrap.servers`` is set: the service starts its own in-memory broker."""
        return self.bootstrap_servers is None


def _integer(low: int, high: int, extra: tuple[int, ...] = ()) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip(), 10)
        except ValueError:
            raise ConfigError(key, raw, "not an integer") from None
        if not (low <= value <= high or value in extra):
            allowed = f"[{low}, {high}]" + "".join(f" or {e}" for e in extra)
            raise ConfigError(key, raw, f"must be in {allowed}")
        return value

    return parse


def _number(low: float, high: float) -> Callable[[str, str], float]:
    def parse(key: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, "not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(key, raw, f"must be a number in [{low}, {high}]")
        return value

    return parse


def _jitter_mode(key: str, raw: str) -> JitterMode:
    try:
        return JitterMode(raw.strip().lower())
    except ValueError:
        raise ConfigError(key, raw, f"must be one of {', '.join(m.value for m in JitterMode)}") from None


def _retry_mode(key: str, raw: str) -> RetryMode:
    try:
        return RetryMode(raw.strip().lower())
    except ValueError:
        raise ConfigError(key, raw, f"must be one of {', '.join(m.value for m in RetryMode)}") from None


def _exhausted_action(key: str, raw: str) -> ExhaustedAction:
    try:
        return ExhaustedAction(raw.strip().lower())
    except ValueError:
        raise ConfigError(key, raw, f"must be one of {', '.join(a.value for a in ExhaustedAction)}") from None


def _text(key: str, raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ConfigError(key, raw, "must not be empty")
    return value


def _boolean(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, raw, "must be true or false")
    return value == "true"


def _token(key: str, raw: str) -> str:
    value = _text(key, raw)
    # An HTTP header carries it, and headers are latin-1: a non-ASCII token could never match.
    if not (value.isascii() and value.isprintable()):
        raise ConfigError(key, raw, "must be printable ASCII (it travels in an HTTP header)")
    if value.lower().startswith(PLACEHOLDER_TOKEN_PREFIX):
        raise ConfigError(key, raw, "is the placeholder of the examples: set a long random token "
                                    "(for example: openssl rand -hex 32)")
    return value


def _connector_types(key: str, raw: str) -> dict[str, str]:
    types: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        connector_class, separator, kind = item.strip().rpartition(":")
        if not separator or not connector_class.strip() or kind.strip().lower() not in ("source", "sink"):
            raise ConfigError(key, raw, f"{item.strip()!r} is not <connector class>:<source or sink>")
        types[connector_class.strip()] = kind.strip().lower()
    return types


def _topic_name(key: str, raw: str) -> str:
    value = _text(key, raw)
    if value in {".", ".."} or len(value) > 249 or not re.fullmatch(r"[A-Za-z0-9._-]+", value):
        raise ConfigError(key, raw, "not a legal Kafka topic name (1-249 of [a-zA-Z0-9._-], not '.' or '..')")
    return value


SETTINGS: tuple[Setting, ...] = (
    Setting("bootstrap.servers", None, _text,
            "Kafka brokers (host:port,...). Unset without a configuration file: start an embedded in-memory broker "
            "(not durable). A configuration file must set it, or sidecar.embedded.broker=true."),
    Setting("sidecar.embedded.broker", None, _boolean,
            "true: run an embedded in-memory Kafka broker (librdkafka's mock cluster; NOT durable: every status is "
            "lost when the process exits), to try things out with a configuration file. Cannot be combined with "
            "bootstrap.servers. Unset: the embedded broker runs only when neither a configuration file nor "
            "bootstrap.servers is given."),
    Setting("status.storage.topic", None, _topic_name,
            f"The compacted status topic. Required with bootstrap.servers; '{DEFAULT_TOPIC}' when embedded."),
    Setting("status.storage.partitions", 5, _integer(1, _INT32_MAX, (-1,)),
            "Partitions of the status topic when this service creates it (-1: broker default)."),
    Setting("status.storage.replication.factor", 3, _integer(1, 32767, (-1,)),
            "Replication factor of the status topic when this service creates it (-1: broker default)."),
    Setting("config.storage.topic", None, _topic_name,
            "Connect's config topic (the worker's own key, so a worker file turns it on), read only: status-store "
            "reads connector and task configurations from it as Connect's workers do and serves GET /connectors "
            "(the configured connectors), GET /connectors/{name}, /config, /tasks, ?expand=info and the connectors' "
            "type from it. It never writes or creates the topic, never resolves ${...} placeholders and never logs "
            "a configuration value. Unset: off, and connectors are listed from their statuses."),
    Setting("status.storage.retry.max.retries", 5, _integer(0, _INT32_MAX),
            "KIP-1278: retries of a failed status write (2147483647: retry forever)."),
    Setting("status.storage.retry.initial.backoff.ms", 300, _integer(0, _INT64_MAX),
            "KIP-1278: backoff before the first retry, in milliseconds."),
    Setting("status.storage.retry.max.backoff.ms", 10000, _integer(0, _INT64_MAX),
            "KIP-1278: cap on the backoff before jitter, in milliseconds."),
    Setting("status.storage.retry.backoff.multiplier", 2.0, _number(1.0, 1e6),
            "KIP-1278: growth of the backoff per retry."),
    Setting("status.storage.retry.jitter.factor", 0.25, _number(0.0, 1.0),
            "KIP-1278: share of the backoff added as random jitter."),
    Setting("status.storage.retry.jitter.mode", JitterMode.ADDITIVE, _jitter_mode,
            "additive: KIP-1278 (jitter adds up to jitter.factor); symmetric: KIP-580, U[1-j,1+j) and never "
            "above max; full: U[0, backoff), AWS full jitter."),
    Setting("status.storage.retry.mode", RetryMode.PARTITION, _retry_mode,
            "partition: a write failing with a retriable error holds its partition; the partition's updates wait "
            "in order while one probe at a time (the oldest, at its latest value) tests it on the backoff "
            "schedule, capped at probe.max.backoff.ms; when a write succeeds they are released at once, ramped "
            "(a few in flight, doubling per round trip, halved on failure). An outage costs one request per "
            "partition per probe, and recovery takes one probe interval. per-update: every update retries on its "
            "own backoff (the engine before partitions were held; the retry budget applies only here)."),
    Setting("status.storage.retry.probe.max.backoff.ms", 1000, _integer(1, _INT64_MAX),
            "partition mode: the longest wait between two probes of a held partition (the probes follow "
            "initial.backoff.ms, backoff.multiplier and jitter up to this, and never beyond max.backoff.ms). It "
            "bounds how long a recovered partition waits to be noticed."),
    Setting("status.storage.retry.max.pending", 100000, _integer(1, _INT32_MAX),
            "Status updates that may be pending at once (in flight, waiting or parked); beyond it a new write is "
            "refused (HTTP 503 with Retry-After; WriteRejectedError from put), never dropped. A write replacing "
            "a key's waiting value takes no room. See docs/operations.md for the memory per pending update."),
    Setting("status.storage.retry.timeout.ms", None, _integer(1, _INT64_MAX),
            "Total time bound for one update across all attempts (KIP-572 style). Unset: no bound."),
    Setting("status.storage.retry.delivery.timeout.ms", 10000, _integer(1, _INT32_MAX),
            "Bound on one attempt: how long the producer may hold a write before failing it."),
    Setting("status.storage.retry.budget.max.tokens", 0.0, _number(0.0, 1e6),
            "Retry budget (gRPC-style retry throttling): size of the token bucket, counted in attempts of "
            "one record. A failed attempt takes a token, a written one adds token.ratio; retries wait while "
            "half the bucket or less is left. 0: no budget. 10 suits a fleet of sidecars sharing a cluster "
            "(see docs/operations.md)."),
    Setting("status.storage.retry.budget.token.ratio", 0.5, _number(0.001, 1e6),
            "Retry budget: tokens a written attempt adds back (0.5: retries keep going while fewer than about "
            "1 attempt in 3 fails; gRPC's example, 0.1, reopens the bucket 5 times slower after an outage)."),
    Setting("status.storage.retry.budget.min.retries.per.second", 1.0, _number(0.001, 1e6),
            "Retry budget: retries let through per second whatever the bucket holds, so that no retry waits "
            "forever and the bucket refills once Kafka answers again."),
    Setting("status.storage.retry.exhausted.action", ExhaustedAction.PARK, _exhausted_action,
            "After the last retry failed: drop (KIP-1278: counted and logged, the update is lost), dead-letter "
            "(appended with its error and attempts to status.storage.retry.dead.letter.topic), or park (the "
            "latest value per key is kept, in the spool when there is one, and sent again once a write succeeds "
            "or a probe every max.backoff.ms gets through; still counted as a failure). An update Kafka refused "
            "for good (a fatal error) is never parked: sending it again cannot help."),
    Setting("status.storage.retry.dead.letter.topic", None, _topic_name,
            "The dead-letter topic (not compacted; created if missing) for exhausted.action=dead-letter."),
    Setting("status.storage.history.topic", None, _topic_name,
            "A non-compacted topic receiving every accepted status change and every write outcome as an event "
            "(created if missing; read by `status-store analyze`). Unset: no history."),
    Setting("status.storage.history.max.pending", 100000, _integer(1, _INT32_MAX),
            "History events waiting to be written at most; beyond it events are dropped and counted, so an "
            "unreachable history topic never grows memory or slows status writes."),
    Setting("sidecar.connector.types", None, _connector_types,
            "Connector types by connector class, <class>:<source|sink>,... (Connect asks the plugin class, which "
            "status-store cannot load). A connector whose class is not listed here or among Kafka's MirrorMaker 2 "
            "connectors (sources) takes the type its status writer gave, else the rule Connect's validation "
            "enforces: a sink's configuration names topics or topics.regex, anything else is a source. Without a "
            "configuration (no config topic) and no writer's type: unknown."),
    Setting("sidecar.name", None, _text,
            "This sidecar's name in history events and dead letters. Unset: the host name."),
    Setting("status.storage.spool.path", None, _text,
            "A local file (SQLite) keeping every update not yet settled, replayed at start: nothing accepted "
            "is lost when the sidecar is killed. Unset: no spool. Its directory is created (mode 0700) if "
            "missing, the files are created 0600, and one process at a time uses it (a lock file beside it)."),
    Setting("sidecar.rest.host", "127.0.0.1", _text,
            "Address the HTTP API binds to. Loopback by default; widen it deliberately."),
    Setting("sidecar.rest.port", 8084, _integer(0, 65535),
            "Port of the HTTP API (0: any free port)."),
    Setting("sidecar.rest.token", None, _token,
            "Bearer token every write request must carry (Authorization: Bearer ...); printable ASCII, and not the "
            "examples' placeholder. Unset: writes are open, so keep the API on loopback (binding another address "
            "without a token logs a warning). Reads are always open, as Connect's are."),
    Setting("sidecar.rest.max.body.bytes", 1048576, _integer(1, _INT32_MAX),
            "Largest request body the API accepts (larger: 413)."),
    Setting("sidecar.startup.timeout.ms", 60000, _integer(1, _INT32_MAX),
            "Bound on reaching the brokers, setting up the topic and reading it to the end at start."),
    Setting("sidecar.shutdown.timeout.ms", 10000, _integer(0, _INT32_MAX),
            "Bound on flushing pending writes at shutdown; what is still pending then is reported."),
)
SETTINGS_BY_KEY = {s.key: s for s in SETTINGS}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (comments, ``=``/``:``/space separators, escapes, continuations)."""
    result: dict[str, str] = {}
    # Only \n, \r and \r\n end a line in a .properties file (str.splitlines would split on more).
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        number = i
        if not line or line[0] in "#!":
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_entry(line)
        try:
            result[_unescape(key)] = _unescape(value)
        except ValueError as e:
            # Never the line itself: it may hold a secret.
            raise ValueError(f"line {number}: {e}") from None
    return result


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=: \t\f":
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (j >= len(line) or line[j] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|u|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        seq = match.group(1)
        if seq[0] == "u":
            if len(seq) != 5:
                raise ValueError("malformed \\uXXXX escape")
            return chr(int(seq[1:], 16))
        return _SIMPLE_ESCAPES.get(seq, seq)

    unescaped = _ESCAPE.sub(replace, text)
    # Java strings are UTF-16: a \uD83D\uDE00 pair is one character.
    return unescaped.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


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
    client_configs: dict[str, str] = {}
    overrides: dict[str, str] = {}
    for key, raw in properties.items():
        setting = SETTINGS_BY_KEY.get(key)
        if setting is not None:
            values[key] = setting.parse(key, raw)
        elif key.startswith(KAFKA_PREFIX):
            overrides[key[len(KAFKA_PREFIX):]] = _kafka_override(key, raw)
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
            client_configs.update(_worker_client_setting(key, raw))
    # Explicit sidecar.kafka.* settings win over those taken from a worker file.
    client_configs.update(overrides)

    _check_broker_choice(values["bootstrap.servers"], values["sidecar.embedded.broker"], embedded_needs_opt_in)
    if values["status.storage.topic"] is None:
        if values["bootstrap.servers"] is not None:
            raise ConfigError("status.storage.topic", None, "required when bootstrap.servers is set")
        values["status.storage.topic"] = DEFAULT_TOPIC
    retry = RetryConfig(
        max_retries=values["status.storage.retry.max.retries"],
        initial_backoff_ms=values["status.storage.retry.initial.backoff.ms"],
        max_backoff_ms=values["status.storage.retry.max.backoff.ms"],
        backoff_multiplier=values["status.storage.retry.backoff.multiplier"],
        jitter_factor=values["status.storage.retry.jitter.factor"],
        jitter_mode=values["status.storage.retry.jitter.mode"],
        timeout_ms=values["status.storage.retry.timeout.ms"],
        delivery_timeout_ms=values["status.storage.retry.delivery.timeout.ms"],
        budget=BudgetSettings(
            max_tokens=values["status.storage.retry.budget.max.tokens"],
            token_ratio=values["status.storage.retry.budget.token.ratio"],
            min_retries_per_s=values["status.storage.retry.budget.min.retries.per.second"],
        ),
        mode=values["status.storage.retry.mode"],
        probe_max_backoff_ms=values["status.storage.retry.probe.max.backoff.ms"],
        max_pending=values["status.storage.retry.max.pending"],
    )
    linger = client_configs.get("linger.ms", client_configs.get("queue.buffering.max.ms"))
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
    action: ExhaustedAction = values["status.storage.retry.exhausted.action"]
    dead_letter_topic = values["status.storage.retry.dead.letter.topic"]
    if action is ExhaustedAction.DEAD_LETTER and dead_letter_topic is None:
        raise ConfigError("status.storage.retry.dead.letter.topic", None,
                          "required when status.storage.retry.exhausted.action=dead-letter")
    reserved = {values["status.storage.topic"]: "status.storage.topic"}
    for key in ("config.storage.topic", "status.storage.retry.dead.letter.topic", "status.storage.history.topic"):
        name = values[key]
        if name is not None and name in reserved:
            raise ConfigError(key, name, f"must differ from {reserved[name]}")
        if name is not None:
            reserved[name] = key
    return StoreConfig(
        bootstrap_servers=values["bootstrap.servers"],
        topic=values["status.storage.topic"],
        partitions=values["status.storage.partitions"],
        replication_factor=values["status.storage.replication.factor"],
        topic_configs=topic_configs,
        client_configs=client_configs,
        retry=retry,
        spool_path=values["status.storage.spool.path"],
        rest_host=values["sidecar.rest.host"],
        rest_port=values["sidecar.rest.port"],
        rest_token=values["sidecar.rest.token"],
        rest_max_body_bytes=values["sidecar.rest.max.body.bytes"],
        startup_timeout_s=values["sidecar.startup.timeout.ms"] / 1000,
        shutdown_timeout_s=values["sidecar.shutdown.timeout.ms"] / 1000,
        exhausted_action=action,
        dead_letter_topic=dead_letter_topic,
        history_topic=values["status.storage.history.topic"],
        history_max_pending=values["status.storage.history.max.pending"],
        sidecar_name=values["sidecar.name"] or socket.gethostname(),
        config_topic=values["config.storage.topic"],
        connector_types=values["sidecar.connector.types"] or {},
    )


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
    if retry.max_retries == _INT32_MAX and retry.timeout_ms is None:
        log.warning("status.storage.retry.max.retries=%d and no status.storage.retry.timeout.ms: a write is retried "
                    "forever while Kafka rejects it", _INT32_MAX)
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


def _kafka_override(key: str, raw: str) -> str:
    name, value = key[len(KAFKA_PREFIX):], raw.strip()
    if name in PROTECTED_CLIENT_SETTINGS:
        raise ConfigError(key, raw, "this client setting is fixed by status-store (correctness depends on it)")
    problem = check_property(name, value)
    if problem == "unknown":
        raise ConfigError(key, raw, f"librdkafka has no property {name!r}", show_value=False)
    if problem is not None:
        raise ConfigError(key, raw, problem)
    return value


def _worker_client_setting(key: str, raw: str) -> dict[str, str]:
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


def reference_markdown() -> str:
    """The configuration reference (docs/configuration.md), from the same table the code validates with."""
    lines = [
        "# Configuration reference",
        "",
        "Generated by `status-store config-docs` from `status_store/config.py`; a test keeps it in sync.",
        f"Every key can also be set as an environment variable `{ENV_PREFIX}<KEY>` (upper-case, dots as",
        "underscores). See `config/status-store.properties` for a commented example.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
    ]
    for setting in SETTINGS:
        default = "(unset)" if setting.default is None else f"`{setting.default}`"
        lines.append(f"| `{setting.key}` | {default} | {setting.doc} |")
    lines += [
        "",
        "Other keys:",
        "",
        "- `status.storage.<x>`: passed to topic creation as topic config `<x>`, as Connect does "
        "(`cleanup.policy` is ignored: the topic is always compacted).",
        "- `security.protocol`, `sasl.*`, `ssl.*` from a Connect worker file: used by the Kafka clients "
        "(`sasl.jaas.config` with a PLAIN/SCRAM username and password is translated; Java-only keys are "
        "ignored with a warning).",
        f"- `{KAFKA_PREFIX}<property>`: a librdkafka property for the Kafka clients, checked by librdkafka. "
        "Settings status-store depends on cannot be changed: " + ", ".join(f"`{k}`" for k in
                                                                          sorted(PROTECTED_CLIENT_SETTINGS)) + ".",
        "- Any other key of a Connect worker file is ignored.",
        "",
    ]
    return "\n".join(lines)
