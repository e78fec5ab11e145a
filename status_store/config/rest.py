"""The settings of the REST API's TLS (``sidecar.rest.tls.*``): PEM files, as a Kubernetes secret of cert-manager
holds them (``tls.crt``, ``tls.key``, ``ca.crt``), re-read when they change (``api/credentials.py``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..errors import ConfigError
from ..settings import choice, setting, text


class ClientAuth(enum.StrEnum):
    """Whether the REST API asks clients for a certificate (Kafka's and Connect's ``ssl.client.auth``)."""

    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class RestTlsConfig:
    """HTTPS for the REST API, and mutual TLS."""

    cert_file: str | None = setting(
        "sidecar.rest.tls.cert.file", None, text,
        "A PEM file holding the REST API's certificate, then its chain: set, the API serves HTTPS only (with "
        "sidecar.rest.tls.key.file). The files are read again when they change (checked at most once a second, when a "
        "connection is opened): a renewed certificate is served to new connections without a restart; a change that "
        "cannot be used (a key that does not match) is logged and the previous certificate kept.",
        example="/etc/status-store/tls/tls.crt", section="HTTPS (the REST API's TLS)")
    key_file: str | None = setting(
        "sidecar.rest.tls.key.file", None, text,
        "A PEM file holding the private key of sidecar.rest.tls.cert.file (unencrypted: keep it 0600).",
        example="/etc/status-store/tls/tls.key")
    ca_file: str | None = setting(
        "sidecar.rest.tls.ca.file", None, text,
        "A PEM file of the CAs whose client certificates the REST API accepts: set, it asks every client for a "
        "certificate (mutual TLS; see sidecar.rest.tls.client.auth). Read again when it changes, as the certificate.",
        example="/etc/status-store/tls/ca.crt")
    client_auth: ClientAuth | None = setting(
        "sidecar.rest.tls.client.auth", None, choice(ClientAuth),
        "With sidecar.rest.tls.ca.file: required (a connection without a certificate signed by one of those CAs is "
        "refused: kubelet's HTTPS probes present none, so probe with exec, or choose requested), requested (a "
        "certificate is asked for and checked when given, not required). Unset: required when a CA file is set, none "
        "otherwise.", example="requested")

    @property
    def enabled(self) -> bool:
        """Whether the REST API serves HTTPS."""
        return self.cert_file is not None

    @property
    def client_certificates(self) -> ClientAuth:
        """What the API asks of clients' certificates."""
        if self.client_auth is not None:
            return self.client_auth
        return ClientAuth.REQUIRED if self.ca_file is not None else ClientAuth.NONE


def check(tls: RestTlsConfig) -> None:
    """The files that go together."""
    if (tls.cert_file is None) != (tls.key_file is None):
        missing = "sidecar.rest.tls.key.file" if tls.key_file is None else "sidecar.rest.tls.cert.file"
        raise ConfigError(missing, None, "sidecar.rest.tls.cert.file and sidecar.rest.tls.key.file go together")
    if tls.ca_file is not None and tls.cert_file is None:
        raise ConfigError("sidecar.rest.tls.cert.file", None, "required with sidecar.rest.tls.ca.file (client "
                                                              "certificates are asked for over HTTPS only)")
    if tls.client_auth not in (None, ClientAuth.NONE) and tls.ca_file is None:
        raise ConfigError("sidecar.rest.tls.ca.file", None, f"required with sidecar.rest.tls.client.auth="
                                                            f"{tls.client_auth.value}: the CAs to check them against")
