"""Certificates a test makes for itself, in its own temporary folder: a CA, servers on 127.0.0.1, clients, and
certificates outside their validity (expired, not yet valid), as PEM files and as the PKCS#12 and JKS stores that
Java brokers and workers read (JKS through the JDK's ``keytool``, as users make them).

Every certificate a server presents names ``IP:127.0.0.1`` and ``DNS:localhost``: Kafka's clients and librdkafka
check the host name by default (``ssl.endpoint.identification.algorithm=https``).
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The password of every store made here (keystores, trust stores, their keys).
PASSWORD = "test-secret"
DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key: PEM files, and a PKCS#12 and a JKS keystore holding both with the CA's chain
    (password ``PASSWORD``)."""

    name: str
    cert: Path
    key: Path
    p12: Path
    jks: Path


class TestCA:
    """A certificate authority of the test's own, in ``directory``: ``cert`` (PEM), and trust stores holding it
    (``truststore_jks``, ``truststore_p12``)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "status-store test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.cert = directory / "ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self.truststore_p12 = directory / "truststore.p12"
        self.truststore_p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self._cert, b"ca")], serialization.BestAvailableEncryption(PASSWORD.encode())))
        self.truststore_jks = directory / "truststore.jks"
        _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(self.cert), "-keystore",
                 str(self.truststore_jks), "-storetype", "JKS", "-storepass", PASSWORD)

    def server(self, name: str = "server", not_before: datetime.datetime | None = None,
               not_after: datetime.datetime | None = None) -> Issued:
        """A certificate for a server on 127.0.0.1 (valid from yesterday for 30 days unless told otherwise: give
        ``not_after`` in the past for an expired one)."""
        return self._issue(name, server=True, not_before=not_before, not_after=not_after)

    def client(self, name: str, not_before: datetime.datetime | None = None,
               not_after: datetime.datetime | None = None) -> Issued:
        """A client's certificate, its subject's common name ``name`` (mutual TLS); valid as ``server``'s."""
        return self._issue(name, server=False, not_before=not_before, not_after=not_after)

    def _issue(self, name: str, server: bool, not_before: datetime.datetime | None = None,
               not_after: datetime.datetime | None = None) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start = not_before if not_before is not None else now - DAY
        end = not_after if not_after is not None else now + 30 * DAY
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(min(start, end - datetime.timedelta(seconds=1))).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                         else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        # The chain: the certificate, then the CA's (what a server sends).
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM)
                              + self._cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        p12 = self.directory / f"{name}.p12"
        p12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [self._cert], serialization.BestAvailableEncryption(PASSWORD.encode())))
        jks = self.directory / f"{name}.jks"
        _keytool("-importkeystore", "-noprompt", "-srckeystore", str(p12), "-srcstoretype", "PKCS12",
                 "-srcstorepass", PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
                 "-deststorepass", PASSWORD, "-destkeypass", PASSWORD)
        return Issued(name, cert_path, key_path, p12, jks)


def _keytool(*args: str) -> None:
    keytool = shutil.which("keytool")
    if keytool is None:
        raise RuntimeError("keytool (the JDK's) is not on PATH: the suite needs a JDK 17+")
    subprocess.run([keytool, *args], check=True, capture_output=True, timeout=60)
