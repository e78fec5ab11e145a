"""``StoreConfig``: every setting of one status-store instance, each declared once with its key, default, rule and
documentation (``settings.setting``)."""

from __future__ import annotations

import enum
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..settings import INT32_MAX, Setting, boolean, choice, declared, integer, setting, text, topic_name
from .act import RestartConfig, WorkersConfig
from .rest import RestTlsConfig
from .retry import RetryConfig

DEFAULT_TOPIC = "connect-status"
# The token the deployment examples ship with; a service must never run with it.
PLACEHOLDER_TOKEN_PREFIX = "change-me"


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
    rest_token_file: str | None = setting(
        "sidecar.rest.token.file", None, text,
        "A file holding the bearer token instead of sidecar.rest.token (a Kubernetes secret mounted as a file): each "
        "non-empty line is a token accepted, so a rotation can accept the old and the new one for a while. Read again "
        "when it changes (checked at most once a second, on a request that needs the token), without a restart; a "
        "file that cannot be read or holds no token keeps the tokens read before, with a warning. Cannot be combined "
        "with sidecar.rest.token.", example="/etc/status-store/token/token")
    rest_max_body_bytes: int = setting(
        "sidecar.rest.max.body.bytes", 1048576, integer(1, INT32_MAX),
        "Largest request body the API accepts (larger: 413).")
    rest_docs: bool = setting(
        "sidecar.rest.docs.enable", False, boolean,
        "Serve the API's documentation pages, GET /docs (Swagger UI) and GET /redoc (ReDoc). Their scripts, style "
        "sheets and fonts come from public CDNs (jsDelivr, Google Fonts), so they are off by default: on the origin "
        "where a writer may paste the bearer token, only the sidecar's own scripts run. When on, the pages are "
        "served with a Content-Security-Policy that allows those CDNs and nothing else. GET /openapi.json, the "
        "document itself, is always served (also in the repository: api/openapi.json).")
    startup_timeout_ms: int = setting(
        "sidecar.startup.timeout.ms", 60000, integer(1, INT32_MAX),
        "Bound on reaching the brokers, setting up the topic and reading it to the end at start.")
    shutdown_timeout_ms: int = setting(
        "sidecar.shutdown.timeout.ms", 10000, integer(0, INT32_MAX),
        "Bound on the whole stop, from SIGTERM to exit: requests in progress, flushing pending writes, closing the "
        "clients and the spool (0.5 s of it); what is still pending then is reported (with a spool, kept for the "
        "next start).")
    late_write_watch_ms: int = setting(
        "sidecar.late.writes.watch.ms", 960000, integer(1000, INT32_MAX),
        "How long a write given up after an error that may still let it land (a request or message timeout, a "
        "broken connection) is watched: if its record is read back after a newer record of its key, that newer "
        "record is written again. The default outlasts Linux's retransmission of a held request (tcp_retries2=15, "
        "about 925 s); raise it with tcp_retries2, or for a proxy that holds whole requests longer.",
        section="Late writes")
    late_write_watches_max: int = setting(
        "sidecar.late.writes.watches.max", 10000, integer(1, INT32_MAX),
        "Given-up writes watched at once at most (each holds its key and value, about 200 bytes); past it the "
        "oldest watch is dropped and counted in status_late_write_watches_dropped_total.")
    rest_tls: RestTlsConfig = field(default_factory=RestTlsConfig)
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
        "streams leave room for the probes and the writes. Past it a new client takes the place of the one "
        "connected longest, once that one has had a fifth of sidecar.events.stream.max.ms; else it is answered 503 "
        "with Retry-After.")
    events_stream_max_ms: int = setting(
        "sidecar.events.stream.max.ms", 300000, integer(1000, INT32_MAX),
        "A GET /events stream ends after this long, with an error event asking the client to reconnect with the id of "
        "the last event it received (the status page and status-store watch do, and miss nothing): a client that "
        "never reads (its heartbeats fit in the kernel's buffers for hours) holds its slot this long at most.")
    events_heartbeat_ms: int = setting(
        "sidecar.events.heartbeat.ms", 15000, integer(10, INT32_MAX),
        "GET /events sends a comment line when nothing else was sent for this long, so that proxies keep the "
        "connection and clients see that it is alive.")
    restart: RestartConfig = field(default_factory=RestartConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
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
