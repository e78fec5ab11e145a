"""A Connect worker file's security settings, as librdkafka takes them.

A worker's clients are Java's: its file names Java key and trust stores (JKS, PKCS#12 or PEM files), a JAAS login,
and Java's names for ciphers and protocols. librdkafka reads PEM and PKCS#12 through OpenSSL and takes a username
and password where Java takes a JAAS line. Each worker setting here becomes librdkafka's, or stops the start with
one line naming the key and what to set instead: a sidecar that ignored a trust store would trust the system's CAs
instead, fail every handshake with its brokers, and never be ready.

- ``ssl.truststore.*``: a PEM file is librdkafka's ``ssl.ca.location``; a PKCS#12 store's certificates are read
  (with its password) and given as ``ssl.ca.pem``; inline PEM certificates (``ssl.truststore.certificates``) as
  ``ssl.ca.pem``. A JKS (or JCEKS) store cannot be read: the start stops, unless ``sidecar.kafka.ssl.ca.location``
  (or ``.ssl.ca.pem``) says what to trust instead.
- ``ssl.keystore.*``: a PKCS#12 store is librdkafka's ``ssl.keystore.location`` with its password, as it is; a PEM
  file holding the chain and the key is ``ssl.certificate.location`` and ``ssl.key.location``; inline PEM
  (``ssl.keystore.certificate.chain``, ``ssl.keystore.key``) is ``ssl.certificate.pem`` and ``ssl.key.pem``. A JKS
  keystore stops the start, unless ``sidecar.kafka.ssl.keystore.location`` or ``.ssl.certificate.location`` is set.
- ``ssl.endpoint.identification.algorithm``: Java's empty value (no host name check) is librdkafka's ``none``.
- ``ssl.cipher.suites`` names Java's suites, which OpenSSL does not know: it is left out, with a warning (the broker
  still enforces its own list; ``sidecar.kafka.ssl.cipher.suites`` takes OpenSSL's names).
- ``sasl.jaas.config``: a PLAIN or SCRAM login's username and password.
- Any other ``security.protocol``, ``sasl.*`` or ``ssl.*`` setting librdkafka has the same name for is passed as it
  is (librdkafka checks it); one it does not have is left out with a warning.

Whatever is taken is then tried: a client is made with it (no broker is asked), so that a store whose password is
wrong, or a key that does not match its certificate, stops the start naming the worker's key, not a failed handshake
later. Explicit ``sidecar.kafka.*`` settings win over all of this.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from ..errors import ConfigError, is_secret_key
from ..kafka.settings import check_property

log = logging.getLogger(__name__)

# Client settings of a Connect worker file that the Kafka clients of this service use too.
CLIENT_PREFIXES = ("security.protocol", "sasl.", "ssl.")
TRUSTSTORE = "ssl.truststore."
KEYSTORE = "ssl.keystore."
# Java's keystore formats by their first bytes: JKS and JCEKS have magic numbers; PKCS#12 is DER (a SEQUENCE).
_JKS_MAGIC = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
# librdkafka's settings that replace a Java store (given as sidecar.kafka.*: the worker's store is then not needed).
_TRUST_REPLACEMENTS = ("ssl.ca.location", "ssl.ca.pem")
_KEY_REPLACEMENTS = ("ssl.keystore.location", "ssl.certificate.location", "ssl.certificate.pem")
# The worker key that led to each librdkafka setting, for an error found when the settings are tried.
_SOURCE = {"ssl.ca.location": "ssl.truststore.location", "ssl.ca.pem": "ssl.truststore.location",
           "ssl.keystore.location": "ssl.keystore.location", "ssl.keystore.password": "ssl.keystore.password",
           "ssl.certificate.location": "ssl.keystore.location", "ssl.key.location": "ssl.keystore.location",
           "ssl.certificate.pem": "ssl.keystore.certificate.chain", "ssl.key.pem": "ssl.keystore.key",
           "ssl.key.password": "ssl.key.password", "sasl.username": "sasl.jaas.config",
           "sasl.password": "sasl.jaas.config"}


def worker_security(worker: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's settings for a worker file's security settings (``worker``: its ``security.protocol``,
    ``sasl.*`` and ``ssl.*`` keys), given the explicit ``sidecar.kafka.*`` ``overrides`` (which win, and may replace
    a store librdkafka cannot read). A ``ConfigError`` naming the worker's key for what cannot be taken."""
    settings: dict[str, str] = {}
    stores: dict[str, str] = {}
    for key, raw in worker.items():
        if key.startswith((TRUSTSTORE, KEYSTORE)) or key == "ssl.key.password":
            stores[key] = raw.strip()
        else:
            settings.update(_setting(key, raw.strip()))
    settings.update(_truststore(stores, overrides))
    settings.update(_keystore(stores, overrides))
    if settings:
        _try(settings, overrides)
    return settings


def _setting(key: str, value: str) -> dict[str, str]:
    """One security setting that is no store, as librdkafka takes it (nothing, with a warning, when it cannot)."""
    if key == "sasl.jaas.config":
        # PLAIN and SCRAM logins carry a username and password; librdkafka takes them directly.
        fields = dict(_JAAS_FIELD.findall(value))
        if "username" in fields and "password" in fields:
            return {"sasl.username": _jaas_unquote(fields["username"]),
                    "sasl.password": _jaas_unquote(fields["password"])}
        log.warning("Ignoring sasl.jaas.config: only PLAIN/SCRAM username and password can be taken over; "
                    "set sidecar.kafka.<librdkafka property> instead")
        return {}
    if key == "ssl.endpoint.identification.algorithm":
        return {key: value.lower() or "none"}
    if key == "ssl.cipher.suites":
        log.warning("Ignoring ssl.cipher.suites from the worker configuration: it names Java's cipher suites, which "
                    "OpenSSL (librdkafka) names otherwise; the brokers enforce their own list. Set "
                    "sidecar.kafka.ssl.cipher.suites with OpenSSL's names to restrict them here too.")
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


def _truststore(stores: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """``ssl.truststore.*`` as librdkafka's CA settings."""
    location, kind = stores.get(TRUSTSTORE + "location"), stores.get(TRUSTSTORE + "type", "JKS").upper()
    key = TRUSTSTORE + "location"
    if location is None and kind == "PEM" and TRUSTSTORE + "certificates" in stores:
        return {"ssl.ca.pem": stores[TRUSTSTORE + "certificates"]}
    if not location:
        return {}
    replaced = next((name for name in _TRUST_REPLACEMENTS if name in overrides), None)
    if replaced is not None:
        log.info("Not reading %s=%s: sidecar.kafka.%s is set", key, location, replaced)
        return {}
    data = _read(key, location)
    found = _format(data)
    if found in _JKS_MAGIC.values():
        raise ConfigError(key, location, f"a {found} trust store, which librdkafka cannot read. Give the CA as PEM: "
                          f"keytool -exportcert -rfc -keystore {location} -alias <the CA's alias> -file ca.pem, then "
                          f"set sidecar.kafka.ssl.ca.location=ca.pem (or make the store PKCS#12, which Java reads too: "
                          f"keytool -importkeystore -srckeystore {location} -destkeystore truststore.p12 "
                          f"-deststoretype PKCS12)")
    if found == "PEM":
        return {"ssl.ca.location": location}
    return {"ssl.ca.pem": _pkcs12_certificates(key, location, data, stores.get(TRUSTSTORE + "password"))}


def _keystore(stores: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """``ssl.keystore.*`` (and ``ssl.key.password``) as librdkafka's client certificate settings."""
    location, key_password = stores.get(KEYSTORE + "location"), stores.get("ssl.key.password")
    chain, private_key = stores.get(KEYSTORE + "certificate.chain"), stores.get(KEYSTORE + "key")
    password_only = {"ssl.key.password": key_password} if key_password else {}
    if location is None and chain is not None and private_key is not None:
        return {"ssl.certificate.pem": chain, "ssl.key.pem": private_key, **password_only}
    if not location:
        return {}
    key = KEYSTORE + "location"
    replaced = next((name for name in _KEY_REPLACEMENTS if name in overrides), None)
    if replaced is not None:
        log.info("Not reading %s=%s: sidecar.kafka.%s is set", key, location, replaced)
        return {}
    found = _format(_read(key, location))
    if found in _JKS_MAGIC.values():
        raise ConfigError(key, location, f"a {found} keystore, which librdkafka cannot read. Make it PKCS#12, which "
                          f"Java reads too (keytool -importkeystore -srckeystore {location} -destkeystore "
                          f"keystore.p12 -deststoretype PKCS12) and name that in ssl.keystore.location, or set "
                          f"sidecar.kafka.ssl.keystore.location to a PKCS#12 copy")
    if found == "PEM":
        return {"ssl.certificate.location": location, "ssl.key.location": location, **password_only}
    # A PKCS#12 store has one password for the store and its key (keytool refuses another key password for it).
    password = stores.get(KEYSTORE + "password")
    return {"ssl.keystore.location": location, **({"ssl.keystore.password": password} if password else {})}


def _read(key: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise ConfigError(key, location, f"cannot be read ({e.strerror or e})") from None


def _format(data: bytes) -> str:
    """A key or trust store's format by its content (a worker's ``.type`` may be JKS, Java's default, for a PKCS#12
    file: Java reads either)."""
    if data[:4] in _JKS_MAGIC:
        return _JKS_MAGIC[data[:4]]
    if data.lstrip()[:5] == b"-----":
        return "PEM"
    return "PKCS12"


def _pkcs12_certificates(key: str, location: str, data: bytes, password: str | None) -> str:
    """The certificates of a PKCS#12 trust store, as PEM text."""
    # Imported here: only a PKCS#12 trust store needs it.
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as e:
        raise ConfigError(key, location, f"is not a PKCS#12 trust store that ssl.truststore.password opens ({e})"
                          ) from None
    certificates = [store.cert.certificate] if store.cert is not None else []
    certificates += [entry.certificate for entry in store.additional_certs]
    if not certificates:
        raise ConfigError(key, location, "holds no certificate to trust")
    return "".join(certificate.public_bytes(Encoding.PEM).decode() for certificate in certificates)


def _try(settings: Mapping[str, str], overrides: Mapping[str, str]) -> None:
    """Make a client of the settings taken (and the overrides), asking no broker: OpenSSL reads every store and key
    then, so one it cannot use stops the start naming the worker key it came from."""
    try:
        Producer({**settings, **overrides, "logger": _DISCARD})
    except KafkaException as e:
        message: str = e.args[0].str().removeprefix("Failed to create producer: ")
        property_name = next((name for name in sorted(settings, key=len, reverse=True) if name in message), None)
        if property_name is None or property_name in overrides:
            return  # not the worker's settings' doing: sidecar.kafka.* is checked on its own
        source = _SOURCE.get(property_name, property_name)
        hint = " (the password does not open it)" if "mac verify failure" in message else ""
        raise ConfigError(source, settings[property_name], f"librdkafka cannot use it: {_hidden(message, settings)}"
                          f"{hint}") from None


def _hidden(message: str, settings: Mapping[str, str]) -> str:
    """``message`` without any secret of ``settings``."""
    for name, value in settings.items():
        if is_secret_key(name) and value:
            message = message.replace(value, "(hidden)")
    return message


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


class _Discard:
    """A client logger that drops what a throwaway client says."""

    def log(self, *args: object) -> None:
        return None


_DISCARD = _Discard()
