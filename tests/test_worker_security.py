"""A Connect worker file's security settings as librdkafka takes them (status_store/config/security.py): Java's stores
made by the JDK's keytool and by the test's CA (harness/certs.py), read or refused at start with one line naming the
key and what to set instead. The same settings against a real secured broker: tests/test_secured_kafka_live.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.certs import PASSWORD, TestCA
from harness.secured_kafka import scram_jaas
from harness.service import Service, sidecar_config
from status_store.config import build_config
from status_store.errors import ConfigError

KAFKA = {"bootstrap.servers": "127.0.0.1:9", "status.storage.topic": "connect-status"}
SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.jaas.config": scram_jaas("connect", "connect-secret")}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("certs"))


def truststore(ca: TestCA, path: Path, kind: str = "JKS") -> dict[str, str]:
    return {"ssl.truststore.location": str(path), "ssl.truststore.type": kind, "ssl.truststore.password": PASSWORD}


def test_a_jks_truststore_stops_the_start_naming_the_key_and_what_to_set(ca: TestCA) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config({**KAFKA, **SCRAM, **truststore(ca, ca.truststore_jks)})
    message = str(caught.value)
    assert "ssl.truststore.location" in message
    assert "JKS trust store, which librdkafka cannot read" in message
    assert "sidecar.kafka.ssl.ca.location" in message
    assert PASSWORD not in message
    assert "connect-secret" not in message


def test_a_jks_keystore_stops_the_start_naming_the_key(ca: TestCA) -> None:
    client = ca.client("jks-client")
    with pytest.raises(ConfigError, match="ssl.keystore.location.*JKS keystore, which librdkafka cannot read"):
        build_config({**KAFKA, "security.protocol": "SSL", **truststore(ca, ca.truststore_p12, "PKCS12"),
                      "ssl.keystore.location": str(client.jks), "ssl.keystore.password": PASSWORD,
                      "ssl.key.password": PASSWORD})


def test_what_replaces_a_jks_store_lets_the_start_go_on(ca: TestCA, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        config = build_config({**KAFKA, **SCRAM, **truststore(ca, ca.truststore_jks),
                               "sidecar.kafka.ssl.ca.location": str(ca.cert)})
    assert config.client_configs["ssl.ca.location"] == str(ca.cert)
    assert "ssl.ca.pem" not in config.client_configs
    assert "Not reading ssl.truststore.location" in caplog.text


def test_a_pkcs12_truststore_is_taken_with_its_password(ca: TestCA) -> None:
    config = build_config({**KAFKA, **SCRAM, **truststore(ca, ca.truststore_p12, "PKCS12")})
    assert config.client_configs["ssl.ca.pem"].strip() == ca.cert.read_text().strip()
    assert config.client_configs["sasl.username"] == "connect"
    assert config.client_configs["sasl.password"] == "connect-secret"
    # Java's default type is JKS, and Java reads a PKCS#12 file under it: the content decides, not the type.
    assert build_config({**KAFKA, **SCRAM, **truststore(ca, ca.truststore_p12, "JKS")}).client_configs[
        "ssl.ca.pem"] == config.client_configs["ssl.ca.pem"]


def test_a_pkcs12_truststore_with_another_password_is_refused_without_showing_it(ca: TestCA) -> None:
    with pytest.raises(ConfigError, match="ssl.truststore.location.*ssl.truststore.password") as caught:
        build_config({**KAFKA, **SCRAM, **truststore(ca, ca.truststore_p12, "PKCS12"),
                      "ssl.truststore.password": "not-the-password"})
    assert "not-the-password" not in str(caught.value)


def test_a_pem_truststore_is_the_ca_location(ca: TestCA) -> None:
    config = build_config({**KAFKA, **SCRAM, **truststore(ca, ca.cert, "PEM")})
    assert config.client_configs["ssl.ca.location"] == str(ca.cert)


def test_a_truststore_that_cannot_be_read_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl.truststore.location.*cannot be read \(No such file"):
        build_config({**KAFKA, **SCRAM, "ssl.truststore.location": str(tmp_path / "missing.jks")})


def test_a_pkcs12_keystore_is_taken_as_it_is(ca: TestCA) -> None:
    client = ca.client("p12-client")
    config = build_config({**KAFKA, "security.protocol": "SSL", **truststore(ca, ca.truststore_p12, "PKCS12"),
                           "ssl.keystore.location": str(client.p12), "ssl.keystore.type": "PKCS12",
                           "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD})
    assert config.client_configs["ssl.keystore.location"] == str(client.p12)
    assert config.client_configs["ssl.keystore.password"] == PASSWORD
    assert "ssl.key.password" not in config.client_configs


def test_a_pkcs12_keystore_whose_password_is_wrong_stops_the_start(ca: TestCA) -> None:
    client = ca.client("p12-wrong")
    with pytest.raises(ConfigError, match="ssl.keystore.*librdkafka cannot use it") as caught:
        build_config({**KAFKA, "security.protocol": "SSL", **truststore(ca, ca.truststore_p12, "PKCS12"),
                      "ssl.keystore.location": str(client.p12), "ssl.keystore.password": "not-the-password"})
    assert "not-the-password" not in str(caught.value)


def test_pem_stores_as_kip_651_writes_them(ca: TestCA, tmp_path: Path) -> None:
    client = ca.client("pem-client")
    both = tmp_path / "client-keystore.pem"
    both.write_bytes(client.key.read_bytes() + client.cert.read_bytes())
    config = build_config({**KAFKA, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                           "ssl.truststore.certificates": ca.cert.read_text(), "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(both)})
    assert config.client_configs["ssl.ca.pem"] == ca.cert.read_text().strip()
    assert config.client_configs["ssl.certificate.location"] == str(both)
    assert config.client_configs["ssl.key.location"] == str(both)
    inline = build_config({**KAFKA, "security.protocol": "SSL", "ssl.keystore.type": "PEM",
                           "ssl.keystore.certificate.chain": client.cert.read_text(),
                           "ssl.keystore.key": client.key.read_text()})
    assert inline.client_configs["ssl.certificate.pem"] == client.cert.read_text().strip()
    assert inline.client_configs["ssl.key.pem"] == client.key.read_text().strip()


def test_java_names_librdkafka_spells_otherwise(ca: TestCA, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = build_config({**KAFKA, **SCRAM, **truststore(ca, ca.cert, "PEM"),
                               "ssl.endpoint.identification.algorithm": "",
                               "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                               "ssl.enabled.protocols": "TLSv1.3"})
    assert config.client_configs["ssl.endpoint.identification.algorithm"] == "none"
    assert "ssl.cipher.suites" not in config.client_configs
    assert "Ignoring ssl.cipher.suites" in caplog.text
    assert "Ignoring ssl.enabled.protocols" in caplog.text


def test_serve_refuses_a_jks_truststore_with_one_line_and_exit_code_2(ca: TestCA, tmp_path: Path) -> None:
    """The process as a user starts it on a worker file: one line naming the key, exit code 2, nothing served."""
    config = sidecar_config(tmp_path, "127.0.0.1:9", "connect-status", {**SCRAM, **truststore(ca, ca.truststore_jks)})
    with Service("--config", str(config), "--port", "0") as service:
        code = service.process.wait(30)
    lines = [line for line in service.output() if line.strip()]
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("status-store: Invalid value")
    assert "configuration ssl.truststore.location: a JKS" in lines[0]
    assert "sidecar.kafka.ssl.ca.location" in lines[0]
