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

Values of keys that may hold secrets (``errors.is_secret_key``) and of unknown keys never appear in errors.

The package: ``store`` (``StoreConfig``, every key declared once), ``retry`` (``RetryConfig``, KIP-1278's keys and the
engine's policy), ``load`` (reading and validating), ``clients`` (the Kafka clients' settings), ``security`` (a
worker file's security settings as librdkafka takes them), ``rest`` (the REST API's TLS), ``act`` (auto-restart and
the workers' REST API), ``reference`` (the generated reference and example file).
"""

from .load import build_config, load_config, parse_properties
from .reference import example_properties, reference_markdown
from .retry import RetryConfig
from .store import SETTINGS, ExactlyOnceSourceSupport, ExhaustedAction, FleetMetrics, StoreConfig

__all__ = [
    "SETTINGS",
    "ExactlyOnceSourceSupport",
    "ExhaustedAction",
    "FleetMetrics",
    "RetryConfig",
    "StoreConfig",
    "build_config",
    "example_properties",
    "load_config",
    "parse_properties",
    "reference_markdown",
]
