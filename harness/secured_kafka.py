"""A secured Apache Kafka broker (KRaft, one node) for the tests: one process serving every listener a secured
Connect cluster uses, with certificates the test makes (``certs.TestCA``):

- ``SCRAM``: SASL_SSL with SCRAM-SHA-512, its users' credentials stored at format time (``--add-scram``);
- ``MTLS``: SSL with client certificates required, signed by the test's CA;
- ``STALE``: SSL presenting a certificate that expired yesterday (a rotation that never happened);
- ``CLIENTS``: PLAINTEXT, for the test's own set-up and checks only (creating topics, reading records).

The workers' and the sidecar's security settings are given as a Connect worker file holds them (``worker_scram``,
``worker_mtls``): Java's names, Java's stores.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .certs import DAY, PASSWORD, Issued, TestCA
from .java_process import KafkaLine, free_ports, write_properties
from .real_kafka import KafkaCluster

# The SCRAM user the workers and the sidecar log in as, and its password.
USER = "connect"
USER_PASSWORD = "connect-secret"
# A second user, whose password a test changes while a sidecar is logged in as it (a rotation the sidecar missed).
ROTATED_USER = "rotated"
ROTATED_PASSWORD = "rotated-secret"
# The SCRAM listener asks its clients to log in again this often (KIP-368): a changed password then takes effect on
# connections already open, as it does in clusters that set it.
REAUTH_MS = 5000
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


def scram_jaas(user: str, password: str) -> str:
    """``sasl.jaas.config`` of a SCRAM login, as a worker file writes it."""
    return f'{SCRAM_LOGIN} required username="{user}" password="{password}";'


class SecuredKafka(KafkaCluster):
    """One KRaft node (broker and controller) with the SCRAM, MTLS, STALE and CLIENTS listeners above; its CA and
    certificates in ``workdir/certs``."""

    def __init__(self, line: KafkaLine, workdir: Path, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(line, workdir, brokers=1, settings=settings)
        self.ca = TestCA(workdir / "certs")
        self.broker_cert = self.ca.server("broker")
        yesterday = datetime.datetime.now(datetime.UTC) - DAY
        self.stale_cert = self.ca.server("stale-broker", not_before=yesterday - 30 * DAY, not_after=yesterday)
        # Clients of the MTLS listener: a valid certificate, and one that expired yesterday.
        self.client_cert = self.ca.client("sidecar")
        self.expired_client_cert = self.ca.client("expired-sidecar", not_before=yesterday - 30 * DAY,
                                                  not_after=yesterday)
        self.scram_port, self.mtls_port, self.stale_port = free_ports(3)
        node = self.nodes[0]
        secured = {"SCRAM": ("SASL_SSL", self.scram_port), "MTLS": ("SSL", self.mtls_port),
                   "STALE": ("SSL", self.stale_port)}
        addresses = ",".join(f"{name}://127.0.0.1:{port}" for name, (_, port) in secured.items())
        protocols = ",".join(f"{name}:{protocol}" for name, (protocol, _) in secured.items())
        node.settings.update({
            "listeners": f"{node.settings['listeners']},{addresses}",
            "advertised.listeners": f"{node.settings['advertised.listeners']},{addresses}",
            "listener.security.protocol.map": f"{node.settings['listener.security.protocol.map']},{protocols}",
            **_keystore("ssl.", self.broker_cert),
            "listener.name.scram.sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"listener.name.scram.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            f"listener.name.scram.{SCRAM_MECHANISM.lower()}.connections.max.reauth.ms": str(REAUTH_MS),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.truststore.location": str(self.ca.truststore_p12),
            "listener.name.mtls.ssl.truststore.type": "PKCS12",
            "listener.name.mtls.ssl.truststore.password": PASSWORD,
            **_keystore("listener.name.stale.ssl.", self.stale_cert),
        })
        write_properties(node.workdir / "server.properties", node.settings)
        self.format_options = [option for user, password in ((USER, USER_PASSWORD), (ROTATED_USER, ROTATED_PASSWORD))
                               for option in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")]

    @property
    def scram_servers(self) -> str:
        return f"127.0.0.1:{self.scram_port}"

    @property
    def mtls_servers(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def stale_servers(self) -> str:
        return f"127.0.0.1:{self.stale_port}"

    def worker_scram(self, store: str = "jks", user: str = USER, password: str = USER_PASSWORD) -> dict[str, str]:
        """A Connect worker file's client settings for the SCRAM listener, as users write them: the trust store a
        JKS (``store="jks"``) or PKCS#12 (``"p12"``) file."""
        return {"bootstrap.servers": self.scram_servers, "security.protocol": "SASL_SSL",
                "sasl.mechanism": SCRAM_MECHANISM, "sasl.jaas.config": scram_jaas(user, password),
                **self.truststore(store)}

    def set_password(self, user: str, password: str) -> None:
        """Change a SCRAM user's password (the Admin API, through the plain listener), as an operator rotates it."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              password.encode())
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
            future.result(timeout=60)

    def worker_mtls(self, client: Issued, store: str = "jks") -> dict[str, str]:
        """A Connect worker file's client settings for the MTLS listener: the client's keystore and the trust store,
        JKS or PKCS#12 files."""
        keystore = client.jks if store == "jks" else client.p12
        return {"bootstrap.servers": self.mtls_servers, "security.protocol": "SSL",
                "ssl.keystore.location": str(keystore), "ssl.keystore.type": _store_type(store),
                "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD, **self.truststore(store)}

    def truststore(self, store: str = "jks", ca: TestCA | None = None) -> dict[str, str]:
        """``ssl.truststore.*`` naming a trust store of ``ca`` (default: the broker's) of that kind."""
        authority = ca or self.ca
        path = authority.truststore_jks if store == "jks" else authority.truststore_p12
        return {"ssl.truststore.location": str(path), "ssl.truststore.type": _store_type(store),
                "ssl.truststore.password": PASSWORD}


def _store_type(store: str) -> str:
    return {"jks": "JKS", "p12": "PKCS12"}[store]


def _keystore(prefix: str, issued: Issued) -> dict[str, str]:
    return {f"{prefix}keystore.location": str(issued.p12), f"{prefix}keystore.type": "PKCS12",
            f"{prefix}keystore.password": PASSWORD, f"{prefix}key.password": PASSWORD}
