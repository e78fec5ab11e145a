"""The settings of what the sidecar does about what the topic shows (``status_store/act``): auto-restart of FAILED
connectors and tasks (``sidecar.restart.*``, off by default) and the Connect group's membership, read to tell the
workers that are gone (``group.id``, Connect's own key, and ``sidecar.workers.*``)."""

from __future__ import annotations

import re
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from ..retry.backoff import Backoff, JitterMode, Random, backoff_policy
from ..settings import INT32_MAX, INT64_MAX, boolean, integer, number, setting, text

# The failure classes (status_store/act/failures.py: the configuration may not import the act wing).
FAILURE_CLASSES = ("transient", "user", "unknown")


def pattern(key: str, raw: str) -> re.Pattern[str]:
    """A regular expression (Python's syntax, close to Java's for these uses)."""
    value = text(key, raw)
    try:
        return re.compile(value)
    except re.error as e:
        raise ConfigError(key, raw, f"not a regular expression: {e}") from None


def failure_classes(key: str, raw: str) -> tuple[str, ...]:
    """A comma-separated list of failure classes (in ``FAILURE_CLASSES``' order, each once)."""
    names = {name.strip() for name in raw.split(",") if name.strip()}
    unknown = sorted(names - set(FAILURE_CLASSES))
    if unknown:
        raise ConfigError(key, raw, f"{', '.join(map(repr, unknown))}: not a failure class "
                                    f"({', '.join(FAILURE_CLASSES)})")
    return tuple(name for name in FAILURE_CLASSES if name in names)


# The password of a URL's user information: masked wherever a URL is shown.
_PASSWORD_IN_URL = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*):[^/@\s]*@")


def redacted(text: str) -> str:
    """``text`` with the password of every URL in it masked (``https://user:***@host``)."""
    return _PASSWORD_IN_URL.sub(r"\g<head>:***@", text)


def ca_file(key: str, raw: str) -> str:
    """A PEM file of CA certificates the TLS library can load."""
    path = text(key, raw)
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise ConfigError(key, raw, f"not a readable PEM file of CA certificates ({e})") from None
    return path


def worker_urls(key: str, raw: str) -> Mapping[str, str]:
    """``[<worker id>=]<REST URL>,...``: each worker's id (by default the URL's host:port, which is Connect's worker
    id when the URL is the one it advertises) and the base URL of its REST API."""
    workers: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        named, separator, url = item.rpartition("=")
        url = url.strip().rstrip("/")
        parsed = urllib.parse.urlsplit(url)
        try:
            port = parsed.port
        except ValueError:
            port = -1
        if parsed.scheme not in ("http", "https") or not parsed.hostname or port == -1 or parsed.query:
            raise ConfigError(key, redacted(raw), f"{redacted(item)!r} is not [<worker id>=]<http or https URL of a "
                                                  "worker's REST API>")
        host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
        worker = named.strip() if separator else f"{host}:{port or (443 if parsed.scheme == 'https' else 80)}"
        if not worker:
            raise ConfigError(key, redacted(raw), f"{redacted(item)!r} names an empty worker id")
        if worker in workers:
            raise ConfigError(key, redacted(raw), f"worker {worker!r} is named twice")
        workers[worker] = url
    return workers


@dataclass(frozen=True, slots=True)
class RestartConfig:
    """Auto-restart of the FAILED connectors and tasks of this sidecar's own workers (docs/operations.md)."""

    enabled: bool = setting(
        "sidecar.restart.enable", False, boolean,
        "true: restart the FAILED connectors and tasks that this sidecar's workers (sidecar.restart.workers) run, "
        "through each worker's REST API (a task: POST /connectors/{c}/tasks/{n}/restart; a connector: KIP-745's "
        "POST /connectors/{c}/restart?includeTasks=true&onlyFailed=true), each after a backoff, at most "
        "sidecar.restart.max.restarts times. Every sidecar restarts only what its own workers run, so a fleet of "
        "sidecars never restarts one task twice. Off by default, as in Strimzi.", section="Auto-restart")
    workers: Mapping[str, str] = setting(
        "sidecar.restart.workers", {}, worker_urls,
        "The workers this sidecar acts for: [<worker id>=]<REST URL>,... (the worker id is what Connect writes in "
        "statuses, its advertised host:port; by default the URL's host:port). Several for a sidecar that serves "
        "several workers (Strimzi). Required with sidecar.restart.enable=true. An https URL is trusted through "
        "sidecar.workers.rest.ssl.ca.location; a URL may hold user:password@ for basic authentication (never "
        "logged), or take sidecar.workers.rest.credentials.file.",
        example="http://127.0.0.1:8083")
    initial_backoff_ms: int = setting(
        "sidecar.restart.initial.backoff.ms", 10000, integer(0, INT64_MAX),
        "The wait between reading a FAILED status and the first restart (KIP-1278's backoff: initial, multiplier, "
        "cap, additive jitter); the jitter spreads a storm of failures over initial * jitter.factor.")
    max_backoff_ms: int = setting(
        "sidecar.restart.max.backoff.ms", 3600000, integer(0, INT64_MAX),
        "The cap on the wait before a restart, before jitter (Strimzi's is 60 minutes).")
    backoff_multiplier: float = setting(
        "sidecar.restart.backoff.multiplier", 2.0, number(1.0, 1e6), "Growth of the wait per restart.")
    jitter_factor: float = setting(
        "sidecar.restart.jitter.factor", 0.25, number(0.0, 1.0),
        "Share of the wait added as random jitter (KIP-1278's additive jitter).")
    max_restarts: int = setting(
        "sidecar.restart.max.restarts", 10, integer(0, INT32_MAX),
        "Restarts of one connector or task at most, until it has run for sidecar.restart.stable.ms; then it is "
        "left FAILED (the status page and /fleet say so). 2147483647: no limit.")
    stable_ms: int = setting(
        "sidecar.restart.stable.ms", 300000, integer(0, INT64_MAX),
        "A connector or task that has been RUNNING this long has its count of restarts reset: its next failure "
        "starts the backoff anew.")
    classes: tuple[str, ...] = setting(
        "sidecar.restart.classes", ("transient", "unknown"), failure_classes,
        "The failure classes restarted (docs/operations.md, 'Failure classes'), comma-separated: transient (the "
        "network, a timeout, a system that says 'not now'), unknown (nothing in the trace says), user "
        "(configuration, credentials, permissions, something missing, data or a schema that does not match: a "
        "restart fails the same way). A failure of another class is left FAILED, logged once with what it needs "
        "of the operator. Add user to restart those too.")
    exclude_trace: re.Pattern[str] | None = setting(
        "sidecar.restart.exclude.trace.pattern", None, pattern,
        "A FAILED status whose trace holds a match of this regular expression is never restarted, whatever its "
        "failure class. Alternatives with |. Unset: none.", example=r"MyConnectorFatalException")
    exclude_connectors: re.Pattern[str] | None = setting(
        "sidecar.restart.exclude.connector.pattern", None, pattern,
        "Connectors whose whole name matches this regular expression are never restarted, nor their tasks. Unset: "
        "none.", example="legacy-.*|manual-.*")
    max_per_second: float = setting(
        "sidecar.restart.max.per.second", 5.0, number(0.001, 1e6),
        "Restart requests this sidecar sends per second at most, whatever the number of failures: a storm "
        "(hundreds failing at once when a downstream system goes away) is spread by the jitter and capped by this.")
    request_timeout_ms: int = setting(
        "sidecar.restart.request.timeout.ms", 30000, integer(1, INT32_MAX),
        "Bound on one restart request to a worker's REST API. A request that fails (refused, timed out, 5xx) or is "
        "answered 409 (a rebalance) is sent again after a backoff of the worker (1 s, doubling to 60 s); it does "
        "not count as a restart.")

    def backoff(self, rng: Random) -> Backoff:
        """The wait before restart number ``n`` (0 for the first)."""
        return backoff_policy(JitterMode.ADDITIVE, self.initial_backoff_ms, self.max_backoff_ms,
                              self.backoff_multiplier, self.jitter_factor, rng)


@dataclass(frozen=True, slots=True)
class WorkersConfig:
    """Reading the Connect group's membership, to tell the workers that are gone."""

    group_id: str | None = setting(
        "group.id", None, text,
        "Connect's worker key (a worker file sets it): the Connect cluster's group. With it, status-store reads the "
        "group's members every sidecar.workers.check.interval.ms (each member's metadata carries its worker's "
        "URL) and marks the statuses of workers no longer in the group as 'worker gone' (/fleet, the status page, "
        "/metrics: status_worker_up). Unset: off.", example="connect-cluster", section="Workers that are gone")
    check_interval_ms: int = setting(
        "sidecar.workers.check.interval.ms", 5000, integer(100, INT32_MAX),
        "How often the group's members are read. A worker that dies is gone from the group after its "
        "session.timeout.ms (10 s by default), and marked within one more interval.")
    health_timeout_ms: int = setting(
        "sidecar.workers.health.timeout.ms", 15000, integer(100, INT32_MAX),
        "With group.id: each worker in the group is asked for Connect's GET /health (KIP-1017) every "
        "sidecar.workers.check.interval.ms, each probe bounded by this (more than the 10 s Connect takes to answer "
        "500 when its herder thread is stuck).")
    stuck_after_ms: int = setting(
        "sidecar.workers.stuck.after.ms", 30000, integer(1, INT32_MAX),
        "A worker in the group whose GET /health answers 500 (its herder thread stuck), or nothing at all, for this "
        "long is stuck: its statuses are marked (worker_stuck_since in /fleet, the status page, /metrics: "
        "status_worker_stuck), its tasks count as not running in the health words, until it answers 200.")
    rest_ca_location: str | None = setting(
        "sidecar.workers.rest.ssl.ca.location", None, ca_file,
        "A PEM file of the CA certificates that signed the workers' REST certificates (Connect's "
        "listeners=https://..., rest.advertised.listener=https), for auto-restart's requests to https worker URLs. "
        "Unset: the system's trust store. A worker whose certificate it does not trust is one WARNING line naming "
        "the TLS failure, and is not asked again for 60 s.", example="/etc/status-store/connect-ca.pem",
        section="The workers' REST APIs")
    rest_credentials_file: str | None = setting(
        "sidecar.workers.rest.credentials.file", None, text,
        "A file holding user:password (its first line that is not blank or #...), sent as basic authentication to "
        "every worker's REST API (Connect's BasicAuthSecurityRestExtension); read again when it changes. A URL's own "
        "user:password@ takes precedence. A worker that answers 401 or 403 is one WARNING line saying the "
        "credentials are missing or wrong, and is not asked again for 60 s.",
        example="/etc/status-store/connect-rest.credentials")


def check(restart: RestartConfig) -> None:
    """Rules across the restart keys: a config error naming the key to change."""
    if restart.enabled and not restart.workers:
        raise ConfigError("sidecar.restart.workers", None, "required when sidecar.restart.enable=true")
    if restart.initial_backoff_ms > restart.max_backoff_ms:
        raise ConfigError("sidecar.restart.initial.backoff.ms", restart.initial_backoff_ms,
                          f"must not exceed sidecar.restart.max.backoff.ms ({restart.max_backoff_ms})")
