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
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import javaproperties

from .backoff import Backoff, JitterMode, Random, RetryMode, backoff_policy
from .budget import BudgetSettings, RetryBudget
from .errors import ConfigError, is_secret_key
from .kafka.settings import check_property
from .settings import (
    INT32_MAX,
    INT64_MAX,
    Setting,
    boolean,
    choice,
    construct,
    declared,
    example_lines,
    integer,
    number,
    setting,
    shown,
    text,
    topic_name,
)
from .updates import RetryPolicy

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


class ExactlyOnceSourceSupport(enum.StrEnum):
    """Connect's ``exactly.once.source.support`` (KIP-618)."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


class FleetMetrics(enum.StrEnum):
    """Which series of the fleet's statuses /metrics serves."""

    OBJECTS = "objects"
    COUNTS = "counts"
    OFF = "off"


def _token(key: str, raw: str) -> str:
    value = text(key, raw)
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


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How failed status writes are retried: KIP-1278's settings and ours."""

    max_retries: int = setting(
        "status.storage.retry.max.retries", 5, integer(0, INT32_MAX),
        "KIP-1278: retries of a failed status write (2147483647: retry forever).", section="Retries (KIP-1278)")
    initial_backoff_ms: int = setting(
        "status.storage.retry.initial.backoff.ms", 300, integer(0, INT64_MAX),
        "KIP-1278: backoff before the first retry, in milliseconds.")
    max_backoff_ms: int = setting(
        "status.storage.retry.max.backoff.ms", 10000, integer(0, INT64_MAX),
        "KIP-1278: cap on the backoff before jitter, in milliseconds.")
    backoff_multiplier: float = setting(
        "status.storage.retry.backoff.multiplier", 2.0, number(1.0, 1e6), "KIP-1278: growth of the backoff per retry.")
    jitter_factor: float = setting(
        "status.storage.retry.jitter.factor", 0.25, number(0.0, 1.0),
        "KIP-1278: share of the backoff added as random jitter.")
    jitter_mode: JitterMode = setting(
        "status.storage.retry.jitter.mode", JitterMode.ADDITIVE, choice(JitterMode),
        "additive: KIP-1278 (jitter adds up to jitter.factor, so a delay may exceed max.backoff.ms by that share); "
        "symmetric: KIP-580, U[1-j,1+j) and never above the max; full: U[0, backoff), AWS full jitter.")
    mode: RetryMode = setting(
        "status.storage.retry.mode", RetryMode.PARTITION, choice(RetryMode),
        "partition: a write failing with a retriable error holds its partition; the partition's updates wait in "
        "order while one probe at a time (the oldest, at its latest value) tests it on the backoff schedule, capped "
        "at probe.max.backoff.ms (one probe for all while every partition is held); when a write gets through they "
        "are released in batches (2 per 25 ms, doubling while batches succeed, then growing slower, halved on a "
        "failure). An outage costs one probe per interval, and recovery about one probe interval. per-update: "
        "every update retries on its own backoff (the engine before partitions were held; the retry budget "
        "applies only here). See docs/operations.md.")
    probe_max_backoff_ms: int = setting(
        "status.storage.retry.probe.max.backoff.ms", 1000, integer(1, INT64_MAX),
        "partition mode: the longest wait between two probes of a held partition (the probes follow "
        "initial.backoff.ms, backoff.multiplier and jitter up to this, and never beyond max.backoff.ms). It bounds "
        "how long a recovered partition waits to be noticed.")
    max_pending: int = setting(
        "status.storage.retry.max.pending", 100000, integer(1, INT32_MAX),
        "Status updates that may be pending at once (in flight, waiting or parked); beyond it a new write is refused "
        "(HTTP 503 with Retry-After; WriteRejectedError from put), never dropped. A write replacing a key's waiting "
        "value takes no room. About 2 KB of memory each: see docs/operations.md.")
    timeout_ms: int | None = setting(
        "status.storage.retry.timeout.ms", None, integer(1, INT64_MAX),
        "Total time bound for one update across all its attempts, time held in a partition's line included (in "
        "the spirit of KIP-572). Unset: bounded by max.retries only.", example="120000")
    delivery_timeout_ms: int = setting(
        "status.storage.retry.delivery.timeout.ms", 10000, integer(1, INT32_MAX),
        "Bound on one attempt: how long the producer may hold a write (queued or in flight) before failing it back "
        "to the retry queue. Keep it below status.storage.retry.timeout.ms.")
    budget_max_tokens: float = setting(
        "status.storage.retry.budget.max.tokens", 0.0, number(0.0, 1e6),
        "Retry budget (gRPC-style retry throttling) for retry.mode=per-update: size of the token bucket, counted in "
        "attempts of one record. A failed attempt takes a token, a written one adds token.ratio; retries wait while "
        "half the bucket or less is left (none is dropped, none uses up a retry). 0: no budget. 10 suits a fleet of "
        "sidecars sharing a cluster (see docs/operations.md).")
    budget_token_ratio: float = setting(
        "status.storage.retry.budget.token.ratio", 0.5, number(0.001, 1e6),
        "Retry budget: tokens a written attempt adds back (0.5: retries keep going while fewer than about 1 attempt "
        "in 3 fails; gRPC's example, 0.1, reopens the bucket 5 times slower after an outage).")
    budget_min_retries_per_s: float = setting(
        "status.storage.retry.budget.min.retries.per.second", 1.0, number(0.001, 1e6),
        "Retry budget: retries let through per second whatever the bucket holds, so that no retry waits forever "
        "and the bucket refills once Kafka answers again.")

    @property
    def budget(self) -> BudgetSettings:
        """The retry budget's settings (``max_tokens == 0``: no budget)."""
        return BudgetSettings(self.budget_max_tokens, self.budget_token_ratio, self.budget_min_retries_per_s)

    def policy(self, rng: Random, budgeted: bool) -> RetryPolicy:
        """The retry queue's policy from these settings; the status queue (``budgeted``) has the budget and the
        bound on pending updates, the event topics neither."""
        def backoff(max_ms: int) -> Backoff:
            return backoff_policy(self.jitter_mode, self.initial_backoff_ms, max_ms, self.backoff_multiplier,
                                  self.jitter_factor, rng)

        budget = RetryBudget(self.budget) if budgeted and self.budget.enabled else None
        timeout = self.timeout_ms / 1000 if self.timeout_ms is not None else None
        probe_ms = min(self.max_backoff_ms, max(self.initial_backoff_ms, self.probe_max_backoff_ms))
        return RetryPolicy(backoff(self.max_backoff_ms), self.max_retries, timeout, budget, self.mode,
                           backoff(probe_ms), self.max_pending if budgeted else None)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The validated configuration of one status-store instance."""

    bootstrap_servers: str | None = setting(
        "bootstrap.servers", None, text,
        "Kafka brokers (host:port,...). Unset without a configuration file: start an embedded in-memory broker "
        "(not durable). A configuration file must set it, or sidecar.embedded.broker=true.",
        example="localhost:9092", section="Kafka (Connect's names)")
    embedded_broker: bool | None = setting(
        "sidecar.embedded.broker", None, boolean,
        "true: run an embedded in-memory Kafka broker (librdkafka's mock cluster; NOT durable: every status is lost "
        "when the process exits), to try things out with a configuration file. Cannot be combined with "
        "bootstrap.servers. Unset: the embedded broker runs only when neither a configuration file nor "
        "bootstrap.servers is given.", example="true")
    topic: str = setting(
        "status.storage.topic", DEFAULT_TOPIC, topic_name,
        f"The compacted status topic: the Connect workers' own, so that both read each other's statuses. Required "
        f"with bootstrap.servers; '{DEFAULT_TOPIC}' when embedded.", example=DEFAULT_TOPIC, set_in_example=True)
    partitions: int = setting(
        "status.storage.partitions", 5, integer(1, INT32_MAX, (-1,)),
        "Partitions of the status topic when this service creates it (-1: broker default).")
    replication_factor: int = setting(
        "status.storage.replication.factor", 3, integer(1, 32767, (-1,)),
        "Replication factor of the status topic when this service creates it (-1: broker default).")
    config_topic: str | None = setting(
        "config.storage.topic", None, topic_name,
        "Connect's config topic (the worker's own key, so a worker file turns it on), read only: status-store reads "
        "connector and task configurations from it as Connect's workers do and serves GET /connectors (the "
        "configured connectors), GET /connectors/{name}, /config, /tasks, ?expand=info and the connectors' type "
        "from it. It never writes or creates the topic, never resolves ${...} placeholders and never logs a "
        "configuration value. Unset: off, and connectors are listed from their statuses.",
        example="connect-configs")
    exactly_once_source_support: ExactlyOnceSourceSupport = setting(
        "exactly.once.source.support", ExactlyOnceSourceSupport.DISABLED, choice(ExactlyOnceSourceSupport),
        "Connect's worker key (KIP-618; a worker file sets it). With enabled, Connect's workers write the config "
        "topic in transactions and read it read_committed: status-store then reads the config topic read_committed "
        "too, so that it never serves a configuration of an aborted or open transaction. The status topic is read as "
        "Connect reads it either way (read_uncommitted; sidecar.kafka.isolation.level changes that reader only).")
    topic_tracking: bool = setting(
        "topic.tracking.enable", True, boolean,
        "Connect's worker key (KIP-558; a worker file sets it). false: topic tracking is off, as on Connect's "
        "workers: GET /connectors/{name}/topics and PUT /connectors/{name}/topics/reset answer 403 (Connect's "
        "'Topic tracking is disabled.'), and so do this service's own topic writes (PUT and DELETE "
        "/connectors/{name}/topics/{topic}, and topic items of POST /statuses).")
    topic_tracking_reset: bool = setting(
        "topic.tracking.allow.reset", True, boolean,
        "Connect's worker key (KIP-558; a worker file sets it). false: PUT /connectors/{name}/topics/reset answers "
        "403 (Connect's 'Topic tracking reset is disabled.') and writes nothing.")
    retry: RetryConfig = field(default_factory=RetryConfig)
    exhausted_action: ExhaustedAction = setting(
        "status.storage.retry.exhausted.action", ExhaustedAction.PARK, choice(ExhaustedAction),
        "After the last retry failed: drop (KIP-1278: counted and logged, the update is lost), dead-letter "
        "(appended with its error and attempts to status.storage.retry.dead.letter.topic), or park (the latest "
        "value per key is kept, in the spool when there is one, in its partition's line, and sent again once its "
        "partition's probe or another write to it gets through; still counted as a failure). An update Kafka "
        "refused for good (a fatal error) is never parked: sending it again cannot help.")
    dead_letter_topic: str | None = setting(
        "status.storage.retry.dead.letter.topic", None, topic_name,
        "The dead-letter topic (not compacted; created if missing), required for exhausted.action=dead-letter.",
        example="connect-status-dead-letters")
    history_topic: str | None = setting(
        "status.storage.history.topic", None, topic_name,
        "A non-compacted topic receiving every accepted status change and every write outcome as an event "
        "(created if missing; read by `status-store analyze`, docs/analytics.md). Unset: no history.",
        example="connect-status-history", section="Status history")
    history_max_pending: int = setting(
        "status.storage.history.max.pending", 100000, integer(1, INT32_MAX),
        "History events waiting to be written at most; beyond it events are dropped and counted, so an unreachable "
        "history topic never grows memory or slows status writes.")
    sidecar_name: str | None = setting(
        "sidecar.name", None, text, "This sidecar's name in history events and dead letters. Unset: the host name.",
        example="worker-1-sidecar")
    spool_path: str | None = setting(
        "status.storage.spool.path", None, text,
        "A local file (SQLite, WAL) keeping every update not yet settled, replayed at start: nothing accepted is "
        "lost when the sidecar is killed. Unset: no spool. A spool file that fails SQLite's integrity check is "
        "moved aside (<path>.corrupt-<time>) with an error; a path that cannot be used (a directory, not writable, "
        "used by another process) stops the start with an error. Its directory is created 0700 if missing, the "
        "files 0600; the shipped systemd unit and Kubernetes manifest provide /var/lib/status-store for it.",
        example="/var/lib/status-store/spool.db", section="Durable spool")
    connector_types: Mapping[str, str] = setting(
        "sidecar.connector.types", {}, _connector_types,
        "Connector types by connector class, <class>:<source|sink>,... (Connect asks the plugin class, which "
        "status-store cannot load). A connector whose class is not listed here or among Kafka's MirrorMaker 2 "
        "connectors (sources) takes the type its status writer gave, else the rule Connect's validation enforces: "
        "a sink's configuration names topics or topics.regex, anything else is a source. Without a configuration "
        "(no config topic) and no writer's type: unknown.",
        example="com.example.QueueSourceConnector:source", section="The sidecar itself")
    rest_host: str = setting(
        "sidecar.rest.host", "127.0.0.1", text,
        "Address the HTTP API binds to. Loopback by default; widen it deliberately.")
    rest_port: int = setting("sidecar.rest.port", 8084, integer(0, 65535), "Port of the HTTP API (0: any free port).")
    rest_token: str | None = setting(
        "sidecar.rest.token", None, _token,
        "Bearer token every write request must carry (Authorization: Bearer ...); printable ASCII. Unset: writes "
        "are open, so keep the API on loopback (binding another address without a token logs a warning). Reads are "
        "always open, as Connect's are. Prefer the environment (STATUS_STORE_SIDECAR_REST_TOKEN) to a file for the "
        "secret. The examples' placeholder, shown here, is refused at start: generate one (openssl rand -hex 32).",
        example=PLACEHOLDER_TOKEN_PREFIX)
    rest_max_body_bytes: int = setting(
        "sidecar.rest.max.body.bytes", 1048576, integer(1, INT32_MAX),
        "Largest request body the API accepts (larger: 413).")
    startup_timeout_ms: int = setting(
        "sidecar.startup.timeout.ms", 60000, integer(1, INT32_MAX),
        "Bound on reaching the brokers, setting up the topic and reading it to the end at start.")
    shutdown_timeout_ms: int = setting(
        "sidecar.shutdown.timeout.ms", 10000, integer(0, INT32_MAX),
        "Bound on flushing pending writes at shutdown; what is still pending then is reported.")
    fleet_metrics: FleetMetrics = setting(
        "sidecar.metrics.fleet", FleetMetrics.OBJECTS, choice(FleetMetrics),
        "Series of the fleet's statuses on /metrics, read from the status topic: objects (every connector's and "
        "task's state, worker, last state change and count of state changes, plus the counts by state), counts "
        "(the numbers of connectors and tasks by state only), or off. docs/metrics.md lists the series.",
        section="Fleet metrics")
    fleet_metrics_max_objects: int = setting(
        "sidecar.metrics.fleet.max.objects", 20000, integer(0, INT32_MAX),
        "With sidecar.metrics.fleet=objects: connectors and tasks that get series of their own (three each) at "
        "most. Beyond it those not RUNNING are kept first, the rest are left out of the per-object series (the "
        "counts still cover them), a warning is logged and status_fleet_objects_omitted says how many.")
    events_buffer_max: int = setting(
        "sidecar.events.buffer.max", 50000, integer(1, INT32_MAX),
        "GET /events keeps this many of the last status changes read, so that a client that reconnects with "
        "Last-Event-ID gets what it missed; an id older than what is kept is refused (HTTP 410).",
        section="Status events (GET /events)")
    events_buffer_max_bytes: int = setting(
        "sidecar.events.buffer.max.bytes", 64 * 1024 * 1024, integer(1, INT32_MAX),
        "Bytes the status changes GET /events keeps for resumption hold at most (each holds what it sends: its "
        "key, state, worker id and the first line of its trace), whatever their number.")
    events_subscriber_queue_max: int = setting(
        "sidecar.events.subscriber.queue.max", 20000, integer(1, INT32_MAX),
        "Status changes waiting to be sent to one GET /events client at most: a client that falls further behind "
        "is dropped (it may reconnect with its Last-Event-ID), so that no client slows the store.")
    events_subscribers_max: int = setting(
        "sidecar.events.subscribers.max", 100, integer(1, INT32_MAX),
        "GET /events clients at once at most, and never more than half the HTTP connection limit, so that event "
        "streams leave room for the probes and the writes: past it a new client is answered 503 with Retry-After.")
    events_heartbeat_ms: int = setting(
        "sidecar.events.heartbeat.ms", 15000, integer(10, INT32_MAX),
        "GET /events sends a comment line when nothing else was sent for this long, so that proxies keep the "
        "connection and clients see that it is alive.")
    # What no key of ours declares: status.storage.<x> topic configs, and the Kafka clients' settings.
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    client_configs: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"StoreConfig(bootstrap_servers={self.bootstrap_servers!r}, topic={self.topic!r}, ...)"

    @property
    def embedded(self) -> bool:
        """True when no ``bootstrap.servers`` is set: the service starts its own in-memory broker."""
        return self.bootstrap_servers is None

    @property
    def name(self) -> str:
        """This sidecar's name in history events and dead letters (``sidecar.name``, else the host name)."""
        return self.sidecar_name or socket.gethostname()

    @property
    def config_topic_client_configs(self) -> Mapping[str, str]:
        """The config topic reader's client settings: read_committed when exactly-once source support is enabled,
        as Connect's ``KafkaConfigBackingStore`` insists (whatever sidecar.kafka.isolation.level says)."""
        if self.exactly_once_source_support is ExactlyOnceSourceSupport.ENABLED:
            return {**self.client_configs, "isolation.level": "read_committed"}
        return self.client_configs

    @property
    def startup_timeout_s(self) -> float:
        """``sidecar.startup.timeout.ms`` in seconds."""
        return self.startup_timeout_ms / 1000

    @property
    def shutdown_timeout_s(self) -> float:
        """``sidecar.shutdown.timeout.ms`` in seconds."""
        return self.shutdown_timeout_ms / 1000


SETTINGS: tuple[Setting, ...] = tuple(declared(StoreConfig))
SETTINGS_BY_KEY = {s.key: s for s in SETTINGS}


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
    client_configs: dict[str, str] = {}
    overrides: dict[str, str] = {}
    for key, raw in properties.items():
        declared_setting = SETTINGS_BY_KEY.get(key)
        if declared_setting is not None:
            values[key] = declared_setting.parse(key, raw)
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
    """The configuration reference (docs/configuration.md), from the same declarations the code validates with."""
    lines = [
        "# Configuration reference",
        "",
        "Generated by `status-store config-docs` from the declarations in `status_store/config.py`; a test keeps it",
        f"in sync. Every key can also be set as an environment variable `{ENV_PREFIX}<KEY>` (upper-case, dots as",
        "underscores). See `config/status-store.properties` for a commented example.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
    ]
    for item in SETTINGS:
        default = "(unset)" if item.default is None or item.default == {} else f"`{shown(item.default)}`"
        lines.append(f"| `{item.key}` | {default} | {item.doc} |")
    lines += [
        "",
        "Other keys:",
        "",
        *(f"- {note}" for note in _OTHER_KEYS),
        "- Any other key of a Connect worker file is ignored.",
        "",
    ]
    return "\n".join(lines)


# What the reference and the example say of the keys no field declares.
_TOPIC_CONFIG_NOTE = ("`status.storage.<x>`: passed to topic creation as topic config `<x>`, as Connect does "
                      "(`cleanup.policy` is ignored: the topic is always compacted).")
_WORKER_CLIENT_NOTE = ("`security.protocol`, `sasl.*`, `ssl.*` from a Connect worker file: used by the Kafka clients "
                       "(`sasl.jaas.config` with a PLAIN/SCRAM username and password is translated; Java-only keys "
                       "are ignored with a warning).")
_KAFKA_NOTE = (f"`{KAFKA_PREFIX}<property>`: a librdkafka property for the Kafka clients, checked by librdkafka. "
               "Settings status-store depends on cannot be changed: "
               + ", ".join(f"`{k}`" for k in sorted(PROTECTED_CLIENT_SETTINGS)) + ".")
_OTHER_KEYS = (_TOPIC_CONFIG_NOTE, _WORKER_CLIENT_NOTE, _KAFKA_NOTE)
_EXAMPLE_HEADER = """\
# status-store configuration (Java .properties, the format of a Connect worker file).
# Generated by `status-store config-example` from the declarations in status_store/config.py.
#
# The sidecar can read the Connect worker's own properties file: Connect's keys keep Connect's names,
# the worker's other keys are ignored. Every key can be overridden by an environment variable
# STATUS_STORE_<KEY> (upper-case, dots as underscores), e.g. STATUS_STORE_BOOTSTRAP_SERVERS.
# Keys under status.storage.retry., .spool., .history. and sidecar. are checked: an unknown one (a typo) is an
# error, and so is any key one or two characters away from a known one (bootstrap.server, status.storage.topik).
# A Connect worker passes every status.storage.<x> it does not know to topic creation, so give the
# status.storage.retry.* keys to status-store only (its own file or STATUS_STORE_* variables)."""
_EXAMPLE_NOTES = {
    "Kafka (Connect's names)": (
        "Any other status.storage.<x> is passed as topic config <x> when the topic is created, as Connect does "
        "(cleanup.policy is ignored: the topic is always compacted), e.g. status.storage.min.insync.replicas=2. "
        "Security settings of the worker file (security.protocol, sasl.*, ssl.*) are used for the Kafka clients "
        "too; sasl.jaas.config with a PLAIN/SCRAM username and password is translated, Java-only keys (keystores) "
        "are ignored with a warning: give PEM files with sidecar.kafka.ssl.* instead."),
    "The sidecar itself": (
        f"{KAFKA_PREFIX}<property> passes a librdkafka property to the Kafka clients, e.g. "
        f"{KAFKA_PREFIX}ssl.ca.location=/etc/kafka/ca.pem. Settings status-store depends on (acks, retries, "
        "partitioner, idempotence, ...) cannot be changed."),
}


def example_properties() -> str:
    """The commented example file (config/status-store.properties), from the same declarations."""
    return "\n".join([_EXAMPLE_HEADER, *example_lines(iter(SETTINGS), _EXAMPLE_NOTES), ""])
