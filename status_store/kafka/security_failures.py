"""Kafka refusing this service's login or certificates, named once: one line per cause, never a stream.

librdkafka logs a failed login or TLS handshake at every reconnection of every client (the producer, the readers,
the admin clients), each broker's connection apart, about once a second, in its own words: "SSL handshake failed:
... certificate verify failed" whether the broker's certificate expired, names another host or comes from a CA
this service does not trust. ``ClientLog`` hands each of its lines here (``noticed``); a line that is such a
failure is taken off the log (DEBUG), and the first of each cause (``Failure``, per broker) is one ERROR line
that names it, again at most every ``REMIND_S`` while it lasts, with how many times it was seen meanwhile.

What a handshake failure means is found out, off the client's thread, once per cause:

- **The broker's certificate** (librdkafka's "certificate verify failed"): fetched again in a handshake that
  verifies nothing (it is only read, to explain, never trusted), and checked: expired, not yet valid, not naming
  the host, else not signed by a CA this service trusts.
- **This service's certificate** (a TLS alert from the broker after the handshake: the broker refused it): this
  service's own certificate is read from its settings (``watch``) and checked for its dates; else the broker's
  listener does not trust its CA, or none is configured.

``current()`` is the cause seen last within ``CURRENT_S`` (librdkafka retries within a second, so a cause seen
that recently still holds): ``/ready`` answers 503 with it, and a start that cannot reach Kafka names it.
"""

from __future__ import annotations

import datetime
import enum
import ipaddress
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a certificate is read: cryptography is not loaded with every Kafka client
    from cryptography import x509

log = logging.getLogger(__name__)

# A cause that lasts is named again at most this often, with how many times it was seen meanwhile.
REMIND_S = 300.0
# A cause seen within this long still holds (librdkafka reconnects within a second, failing again).
CURRENT_S = 30.0
# The bound on the handshake that fetches a broker's certificate to explain a failure.
PROBE_TIMEOUT_S = 5.0


class Failure(enum.Enum):
    """Why a connection to a broker failed, as far as a log line of librdkafka tells."""

    LOGIN = "login"
    BROKER_CERTIFICATE = "broker certificate"
    CLIENT_CERTIFICATE = "client certificate"
    PROTOCOL = "security protocol"


_CAUSES = (
    (Failure.LOGIN, re.compile(r"SASL authentication (error|failed)|Authentication failed")),
    (Failure.BROKER_CERTIFICATE, re.compile(r"certificate verify failed")),
    (Failure.CLIENT_CERTIFICATE, re.compile(r"alert (bad certificate|certificate unknown|certificate expired|"
                                            r"certificate revoked|unknown ca|certificate required|"
                                            r"unsupported certificate|access denied|handshake failure)")),
    (Failure.PROTOCOL, re.compile(r"connecting to a PLAINTEXT broker listener|incorrect security\.protocol")),
)
# "sasl_ssl://127.0.0.1:9093/bootstrap: ..." or ".../1: ...", or a coordinator's connection ("GroupCoordinator:
# 127.0.0.1:9093: ..."): the broker's address.
_BROKER = re.compile(r"^(?:(?:[a-z_]+://)?(\[[^\]]+\]|[^/:\s]+):(\d+)/\S*?|[A-Za-z]+(?:/\d+)?: "
                     r"(\[[^\]]+\]|[^/:\s]+):(\d+)):\s")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")


@dataclass(frozen=True)
class Problem:
    """A cause of failed connections: what, which broker, what librdkafka said, and the line that names it."""

    failure: Failure
    broker: str
    detail: str
    explanation: str


@dataclass
class _Seen:
    problem: Problem
    last_seen: float
    last_logged: float
    held: int = 0


class SecurityFailures:
    """The causes seen, per (failure, broker): each named once (``log``), the latest for ``current``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 explain: Callable[[Failure, str, str, Mapping[str, str]], str] | None = None) -> None:
        self._clock = clock
        self._explain = explain or explanation
        self._lock = threading.Lock()
        self._seen: dict[tuple[Failure, str], _Seen] = {}
        self._latest: _Seen | None = None
        self._settings: Mapping[str, str] = {}

    def watch(self, settings: Mapping[str, str]) -> None:
        """The Kafka clients' security settings (``client_configs``), to check this service's own certificate."""
        self._settings = dict(settings)

    def noticed(self, facility: str, text: str) -> bool:
        """Whether a librdkafka line (``text``, its thread prefix removed) is a security failure; the first of its
        cause is explained and logged, on a thread of its own (the explanation may ask the broker)."""
        failure = next((f for f, pattern in _CAUSES if pattern.search(text)), None)
        if failure is None and facility == "SSL" and "routines::" in text:
            failure = Failure.BROKER_CERTIFICATE  # OpenSSL's errors of a handshake, before librdkafka's own line
        if failure is None:
            return False
        match = _BROKER.match(text)
        broker = f"{match.group(1) or match.group(3)}:{match.group(2) or match.group(4)}" if match else "?"
        detail = _AFTER.sub("", text[match.end():] if match else text).strip()
        now = self._clock()
        renamed: _Seen | None = None
        held: int | None = None  # None: held back, not logged now; else how many were held back since last logged
        with self._lock:
            if match is None:  # a line naming no broker (a group coordinator's connection): the cause seen already
                broker = next((b for f, b in self._seen if f is failure), broker)
            elif (failure, "?") in self._seen and (failure, broker) not in self._seen:
                # The cause was first seen on a line naming no broker: this is its broker, not a second cause (it
                # is explained again, not logged again).
                renamed = self._seen[(failure, broker)] = self._seen.pop((failure, "?"))
                renamed.problem = Problem(failure, broker, detail, f"Kafka at {broker}: {detail}")
            seen = self._seen.get((failure, broker))
            if seen is not None:
                seen.last_seen = now
                self._latest = seen
                if now - seen.last_logged < REMIND_S:
                    seen.held += 1
                else:
                    held, seen.held, seen.last_logged = seen.held, 0, now
                problem = seen.problem
            else:
                held = 0
                problem = Problem(failure, broker, detail, f"Kafka at {broker}: {detail}")
                seen = self._seen[(failure, broker)] = _Seen(problem, now, now)
                self._latest = seen
        if held:
            log.error("%s (seen %d more times since it was last logged)", problem.explanation, held)
        elif held == 0 or renamed is not None:  # a renamed cause is explained again, not logged again
            threading.Thread(target=self._explained, args=(seen, held == 0), name="status-store-kafka-security",
                             daemon=True).start()
        return True

    def _explained(self, seen: _Seen, logged: bool) -> None:
        problem = seen.problem
        try:
            text = self._explain(problem.failure, problem.broker, problem.detail, self._settings)
        except Exception as e:  # the explanation is a courtesy: the failure is still named
            text = f"Kafka at {problem.broker} refused this service ({problem.failure.value}): {problem.detail} " \
                   f"(could not look further: {e})"
        explained = Problem(problem.failure, problem.broker, problem.detail, text)
        with self._lock:
            if seen.problem.broker == problem.broker:  # not renamed meanwhile (then explained again)
                seen.problem = explained
        if logged:
            log.error("%s", text)

    def current(self) -> Problem | None:
        """The cause seen last, if seen within ``CURRENT_S``."""
        with self._lock:
            latest = self._latest
            if latest is None or self._clock() - latest.last_seen > CURRENT_S:
                return None
            return latest.problem


def explanation(failure: Failure, broker: str, detail: str, settings: Mapping[str, str]) -> str:
    """One line naming the cause of a failure and what to check."""
    if failure is Failure.LOGIN:
        mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms", "the SASL mechanism"))
        return (f"Kafka at {broker} refused the login ({mechanism}): {detail}. Check the username and password "
                f"(sasl.jaas.config, or sidecar.kafka.sasl.username and sasl.password)")
    if failure is Failure.BROKER_CERTIFICATE:
        host, _, port = broker.rpartition(":")
        why = broker_certificate_problem(host.strip("[]"), int(port)) if port.isdigit() else None
        if why is None:
            return f"Kafka at {broker}: the broker's TLS certificate could not be verified ({detail})"
        return f"Kafka at {broker}: the broker's TLS certificate {why}; this service refuses the connection"
    if failure is Failure.CLIENT_CERTIFICATE:
        own = own_certificate_problem(settings)
        return (f"Kafka at {broker} refused this service's TLS client certificate ({detail}): {own}")
    return (f"Kafka at {broker} does not speak the security protocol this service uses "
            f"({settings.get('security.protocol', 'PLAINTEXT')}): check security.protocol and bootstrap.servers "
            f"({detail})")


def broker_certificate_problem(host: str, port: int) -> str | None:
    """What is wrong with the certificate a broker presents: fetched in a handshake that verifies nothing (it is
    only read here, never trusted) and checked for its dates and its names."""
    from cryptography import x509

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as raw, \
            context.wrap_socket(raw, server_hostname=host or None) as tls:
        der = tls.getpeercert(binary_form=True)
    if der is None:
        return None
    certificate = x509.load_der_x509_certificate(der)
    dates = _dates_problem(certificate)
    if dates is not None:
        return dates
    if not _names(certificate, host):
        return (f"does not name {host} (the host in bootstrap.servers or the broker's advertised listener); "
                f"ssl.endpoint.identification.algorithm=none turns the check off")
    return (f"is not signed by a CA this service trusts (subject {certificate.subject.rfc4514_string()}, issuer "
            f"{certificate.issuer.rfc4514_string()}): give that CA in ssl.truststore.location or "
            f"sidecar.kafka.ssl.ca.location")


def own_certificate_problem(settings: Mapping[str, str]) -> str:
    """What may be wrong with this service's own client certificate, as far as it can tell by itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    certificate: x509.Certificate | None = None
    if settings.get("ssl.certificate.pem"):
        certificate = x509.load_pem_x509_certificate(settings["ssl.certificate.pem"].encode())
    elif settings.get("ssl.certificate.location"):
        certificate = x509.load_pem_x509_certificate(Path(settings["ssl.certificate.location"]).read_bytes())
    elif settings.get("ssl.keystore.location"):
        password = settings.get("ssl.keystore.password")
        store = pkcs12.load_pkcs12(Path(settings["ssl.keystore.location"]).read_bytes(),
                                   password.encode() if password else None)
        certificate = store.cert.certificate if store.cert is not None else None
    if certificate is None:
        return ("this service presents none: the broker's listener requires one (ssl.keystore.location, or "
                "sidecar.kafka.ssl.certificate.location and ssl.key.location)")
    dates = _dates_problem(certificate)
    if dates is not None:
        return f"it {dates} (subject {certificate.subject.rfc4514_string()})"
    return (f"its dates are valid, so the broker's listener does not trust its CA (issuer "
            f"{certificate.issuer.rfc4514_string()}): add it to the listener's ssl.truststore")


def _dates_problem(certificate: x509.Certificate) -> str | None:
    now = datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_after_utc < now:
        return f"expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
    if certificate.not_valid_before_utc > now:
        return f"is not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
    return None


def _names(certificate: x509.Certificate, host: str) -> bool:
    """Whether the certificate names ``host`` (an IP address or a DNS name, wildcards as TLS allows them)."""
    from cryptography import x509

    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        wanted = host.lower().rstrip(".")
        return any(name == wanted or (name.startswith("*.") and wanted.split(".", 1)[-1] == name[2:])
                   for name in (n.lower().rstrip(".") for n in names.get_values_for_type(x509.DNSName)))
    return address in names.get_values_for_type(x509.IPAddress)


# One for the process: every client's lines, whichever client saw the cause first.
security_failures = SecurityFailures()
