"""Configuration: .properties parsing, validation with clear errors, environment overrides."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from status_store.config import SETTINGS, build_config, example_properties, load_config, parse_properties
from status_store.errors import ConfigError

EXAMPLE = Path(__file__).parent.parent / "config" / "status-store.properties"
KAFKA = {"bootstrap.servers": "127.0.0.1:9092", "status.storage.topic": "connect-status"}


def test_properties_syntax_follows_java() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "  a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=x\\\n"
        "   y\n"
        "e=tab\\there\\u00e9\n"
        "f\\=g=h\n"
        "empty=\n"
        "spaced   =   v  w\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "xy", "e": "tab\there\u00e9", "f=g": "h",
        "empty": "", "spaced": "v  w",
    }


def test_properties_lines_unicode_escapes_and_encodings_follow_java(tmp_path: Path) -> None:
    # Only \n, \r and \r\n end lines; a \uXXXX surrogate pair is one character.
    assert parse_properties("a=x\x0by\rb=\\uD83D\\uDE00\r\nc=z") == {"a": "x\x0by", "b": "😀", "c": "z"}
    bad = tmp_path / "bad.properties"
    bad.write_text("status.storage.topic=\\u12zz\n")
    with pytest.raises(ConfigError, match="malformed"):
        load_config(bad, {})
    latin = tmp_path / "worker.properties"
    latin.write_bytes("# caf\xe9\nbootstrap.servers=k:9092\nstatus.storage.topic=t\n".encode("latin-1"))
    assert load_config(latin, {}).topic == "t"


def test_defaults_run_an_embedded_broker() -> None:
    config = build_config({})
    assert config.embedded
    assert config.topic == "connect-status"
    assert (config.partitions, config.replication_factor) == (5, 3)
    assert config.retry.max_retries == 5
    assert config.rest_host == "127.0.0.1"


def test_topic_is_required_with_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match=r"status\.storage\.topic: required"):
        build_config({"bootstrap.servers": "127.0.0.1:9092"})


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("status.storage.topic", "", "must not be empty"),
        ("status.storage.topic", "bad topic!", "not a legal Kafka topic name"),
        ("status.storage.partitions", "-3", r"must be in \[1, 2147483647\] or -1"),
        ("status.storage.partitions", "0", "must be in"),
        ("status.storage.partitions", "five", "not an integer"),
        ("status.storage.replication.factor", "40000", "must be in"),
        ("status.storage.retry.max.retries", "1e3", "not an integer"),
        ("status.storage.retry.jitter.factor", "1.5", r"must be a number in \[0.0, 1.0\]"),
        ("status.storage.retry.jitter.factor", "nan", "must be a number"),
        ("status.storage.retry.backoff.multiplier", "0.5", "must be a number in"),
        ("sidecar.rest.port", "70000", "must be in"),
        ("sidecar.late.writes.watch.ms", "999", "must be in"),
        ("sidecar.late.writes.watches.max", "0", "must be in"),
    ],
)
def test_bad_values_name_the_key_the_value_and_the_rule(key: str, value: str, rule: str) -> None:
    with pytest.raises(ConfigError, match=rule) as caught:
        build_config({**KAFKA, key: value})
    assert caught.value.key == key
    assert key in str(caught.value)
    assert repr(value) in str(caught.value)


def test_typo_in_our_namespace_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"unknown key \(did you mean status\.storage\.retry\.max\.retries\?\)"):
        build_config({**KAFKA, "status.storage.retry.max.retires": "3"})
    with pytest.raises(ConfigError, match="sidecar.rest.prot"):
        build_config({**KAFKA, "sidecar.rest.prot": "1"})


def test_a_delivery_timeout_below_the_linger_is_refused() -> None:
    with pytest.raises(ConfigError, match="greater than the producer's linger.ms"):
        build_config({**KAFKA, "sidecar.kafka.linger.ms": "2000", "status.storage.retry.delivery.timeout.ms": "1000"})


def test_initial_backoff_above_max_is_refused() -> None:
    with pytest.raises(ConfigError, match="must not exceed status.storage.retry.max.backoff.ms"):
        build_config({**KAFKA, "status.storage.retry.initial.backoff.ms": "500",
                      "status.storage.retry.max.backoff.ms": "100"})


def test_other_status_storage_keys_become_topic_configs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = build_config({**KAFKA, "status.storage.min.insync.replicas": "2",
                               "status.storage.cleanup.policy": "delete"})
    assert config.topic_configs == {"min.insync.replicas": "2"}
    assert "always compacted" in caplog.text


def test_worker_file_keys_we_do_not_use_are_ignored() -> None:
    config = build_config({**KAFKA, "group.id": "connect-cluster", "key.converter": "x",
                           "offset.storage.topic": "connect-offsets", "config.storage.topic": "connect-configs"})
    assert config.client_configs == {}


def test_worker_security_settings_reach_the_clients() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\\"w";'
    config = build_config({**KAFKA, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": jaas})
    assert config.client_configs == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                     "sasl.username": "u", "sasl.password": 'p"w'}
    # A trust store the clients cannot read stops the start (tests/test_worker_security.py has the stores).
    with pytest.raises(ConfigError, match="ssl.truststore.location.*cannot be read"):
        build_config({**KAFKA, "security.protocol": "SASL_SSL", "ssl.truststore.location": "/x.jks"})


def test_librdkafka_overrides_are_checked() -> None:
    config = build_config({**KAFKA, "sidecar.kafka.socket.timeout.ms": "5000"})
    assert config.client_configs == {"socket.timeout.ms": "5000"}
    with pytest.raises(ConfigError, match="librdkafka has no property 'no.such.thing'"):
        build_config({**KAFKA, "sidecar.kafka.no.such.thing": "1"})
    with pytest.raises(ConfigError, match="fixed by status-store"):
        build_config({**KAFKA, "sidecar.kafka.acks": "1"})
    with pytest.raises(ConfigError, match="sidecar.kafka.security.protocol"):
        build_config({**KAFKA, "sidecar.kafka.security.protocol": "CARRIER_PIGEON"})


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "worker.properties"
    path.write_text("bootstrap.servers=file:9092\nstatus.storage.topic=from-file\n")
    config = load_config(path, {"STATUS_STORE_STATUS_STORAGE_TOPIC": "from-env", "STATUS_STORE_SIDECAR_REST_PORT": "9",
                                "UNRELATED": "x"})
    assert (config.bootstrap_servers, config.topic, config.rest_port) == ("file:9092", "from-env", 9)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "nope.properties", {})


def test_example_file_is_generated_from_the_declarations_documents_every_key_and_loads() -> None:
    text = EXAMPLE.read_text()
    assert text == example_properties(), "regenerate it: status-store config-example > config/status-store.properties"
    for setting in SETTINGS:
        assert setting.key in text, f"{setting.key} is missing from {EXAMPLE.name}"
    config = load_config(EXAMPLE, {"STATUS_STORE_BOOTSTRAP_SERVERS": "kafka:9092"})
    assert config.topic == "connect-status"
    assert not config.embedded


def test_retry_budget_settings_are_off_by_default_and_validated() -> None:
    assert not build_config(KAFKA).retry.budget.enabled
    with pytest.raises(ConfigError, match="applies to status.storage.retry.mode=per-update only") as refused:
        build_config({**KAFKA, "status.storage.retry.budget.max.tokens": "100"})
    assert refused.value.key == "status.storage.retry.budget.max.tokens"
    budget = build_config({**KAFKA, "status.storage.retry.mode": "per-update",
                           "status.storage.retry.budget.max.tokens": "100",
                           "status.storage.retry.budget.token.ratio": "0.5",
                           "status.storage.retry.budget.min.retries.per.second": "2"}).retry.budget
    assert (budget.enabled, budget.max_tokens, budget.token_ratio, budget.min_retries_per_s) == (True, 100, 0.5, 2)
    for key, value in (("status.storage.retry.budget.max.tokens", "-1"),
                       ("status.storage.retry.budget.token.ratio", "0"),
                       ("status.storage.retry.budget.min.retries.per.second", "0")):
        with pytest.raises(ConfigError, match="must be a number in") as caught:
            build_config({**KAFKA, key: value})
        assert caught.value.key == key


@pytest.mark.parametrize(("key", "meant"), [
    ("bootstrap.server", "bootstrap.servers"),
    ("bootstrapservers", "bootstrap.servers"),
    ("bootstarp.servers", "bootstrap.servers"),
    ("status.storage.topik", "status.storage.topic"),
    ("status.storage.partition", "status.storage.partitions"),
    ("status.storage.replication.factr", "status.storage.replication.factor"),
])
def test_a_near_miss_of_a_known_key_is_an_error_naming_both(key: str, meant: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown key \(did you mean {re.escape(meant)}\?\)") as caught:
        build_config({**KAFKA, key: "x"})
    assert caught.value.key == key


def test_a_typo_in_an_environment_variable_never_selects_the_embedded_broker() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.server .*did you mean bootstrap\.servers\?"):
        load_config(None, {"STATUS_STORE_BOOTSTRAP_SERVER": "kafka:9092"})


def test_a_connect_worker_file_loads_without_false_suggestions(tmp_path: Path) -> None:
    worker = tmp_path / "connect-distributed.properties"
    worker.write_text(
        "bootstrap.servers=kafka:9092\ngroup.id=connect-cluster\nkey.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=true\n"
        "offset.storage.topic=connect-offsets\noffset.storage.replication.factor=1\noffset.storage.partitions=25\n"
        "config.storage.topic=connect-configs\nconfig.storage.replication.factor=1\n"
        "status.storage.topic=connect-status\nstatus.storage.replication.factor=1\nstatus.storage.partitions=5\n"
        "offset.flush.interval.ms=10000\nlisteners=HTTP://:8083\nrest.advertised.host.name=worker-1\n"
        "rest.advertised.port=8083\nplugin.path=/usr/share/java\nconfig.providers=file\n"
        "status.storage.min.insync.replicas=1\nclient.id=worker-1\nrest.port=8083\n")
    config = load_config(worker, {})
    assert (config.bootstrap_servers, config.topic, config.partitions) == ("kafka:9092", "connect-status", 5)
    assert config.topic_configs == {"min.insync.replicas": "1"}


def test_a_configuration_file_must_choose_the_embedded_broker_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "sidecar.properties"
    path.write_text("status.storage.topic=connect-status\n")
    with pytest.raises(ConfigError, match=r"bootstrap\.servers: .*sidecar\.embedded\.broker=true") as caught:
        load_config(path, {})
    assert caught.value.key == "bootstrap.servers"
    assert load_config(path, {"STATUS_STORE_SIDECAR_EMBEDDED_BROKER": "true"}).embedded
    with pytest.raises(ConfigError, match="cannot be combined with bootstrap.servers"):
        load_config(path, {"STATUS_STORE_SIDECAR_EMBEDDED_BROKER": "true", "STATUS_STORE_BOOTSTRAP_SERVERS": "k:9092"})
    with pytest.raises(ConfigError, match="must be true or false"):
        load_config(path, {"STATUS_STORE_SIDECAR_EMBEDDED_BROKER": "yes"})
    # Without any file (the README's first command), the embedded broker is the default; false refuses it.
    assert load_config(None, {}).embedded
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        load_config(None, {"STATUS_STORE_SIDECAR_EMBEDDED_BROKER": "false"})


SECRET = "hunter2-Sup3rSecret"


@pytest.mark.parametrize("properties", [
    {"sidecar.rest.tokn": SECRET},  # an unknown key, with a suggestion
    {"sidecar.rest.token": f"{SECRET}\u00e9"},  # not ASCII
    {"no.such.key.anywhere": "x", "status.storage.topik": SECRET},
    {"sidecar.kafka.ssl.key.password": SECRET, "sidecar.kafka.no.such.thing": SECRET},
])
def test_config_errors_never_show_a_secret_or_an_unknown_keys_value(properties: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config({**KAFKA, **properties})
    message = str(caught.value)
    assert SECRET not in message
    assert "\n" not in message
    assert caught.value.key in message


def test_a_jaas_password_is_read_as_java_reads_it_and_never_shown(tmp_path: Path) -> None:
    # After the properties file's own escapes, \u is no escape for Java's JAAS parser: it is "u".
    path = tmp_path / "worker.properties"
    path.write_text("bootstrap.servers=k:9092\nstatus.storage.topic=t\nsasl.mechanism=PLAIN\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="u" password="pa\\\\u12zz\\\\\\"s\\\\101";\n')
    config = load_config(path, {})
    assert config.client_configs["sasl.password"] == 'pau12zz"sA'
    # A malformed \uXXXX escape of the properties file itself is an error naming the line, not its text.
    path.write_text(f"bootstrap.servers=k:9092\nstatus.storage.topic=t\nsasl.password={SECRET}\\u12\n")
    with pytest.raises(ConfigError, match=r"line 3: malformed \\uXXXX escape") as caught:
        load_config(path, {})
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(("token", "rule"), [
    ("t\u00f6ken-with-umlaut", "printable ASCII"),
    ("tab\tinside", "printable ASCII"),
    ("change-me-to-a-long-random-string", "placeholder"),
    ("CHANGE-ME", "placeholder"),
])
def test_tokens_that_could_never_match_or_ship_in_the_examples_are_refused(token: str, rule: str) -> None:
    with pytest.raises(ConfigError, match=rule) as caught:
        build_config({**KAFKA, "sidecar.rest.token": token})
    assert token not in str(caught.value)
    assert build_config({**KAFKA, "sidecar.rest.token": "0123456789abcdef"}).rest_token == "0123456789abcdef"


def test_kubernetes_service_link_variables_are_not_settings() -> None:
    links = {
        "STATUS_STORE_SIDECAR_PORT": "tcp://10.0.0.1:8084",
        "STATUS_STORE_SIDECAR_SERVICE_HOST": "10.0.0.1",
        "STATUS_STORE_SIDECAR_SERVICE_PORT": "8084",
        "STATUS_STORE_SIDECAR_SERVICE_PORT_HTTP": "8084",
        "STATUS_STORE_SIDECAR_PORT_8084_TCP": "tcp://10.0.0.1:8084",
        "STATUS_STORE_SIDECAR_PORT_8084_TCP_PROTO": "tcp",
        "STATUS_STORE_SIDECAR_PORT_8084_TCP_PORT": "8084",
        "STATUS_STORE_SIDECAR_PORT_8084_TCP_ADDR": "10.0.0.1",
    }
    config = load_config(None, {**links, "STATUS_STORE_SIDECAR_REST_PORT": "9"})
    assert config.rest_port == 9
    # A variable that only looks like one is still checked.
    with pytest.raises(ConfigError, match="sidecar.port"):
        load_config(None, {"STATUS_STORE_SIDECAR_PORT": "8085"})


def test_an_environment_value_that_is_no_text_is_a_config_error() -> None:
    # Bytes that are no UTF-8 reach Python as lone surrogates, which no Kafka client can take.
    with pytest.raises(ConfigError, match="STATUS_STORE_SIDECAR_KAFKA_CLIENT_ID is not valid UTF-8 text"):
        load_config(None, {"STATUS_STORE_SIDECAR_KAFKA_CLIENT_ID": "worker-\udcff"})
