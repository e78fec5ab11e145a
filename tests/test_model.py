"""Keys and status values: building and parsing exactly as Connect does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from status_store.connect.model import (
    ConnectorKey,
    ConnectorStatus,
    State,
    TaskId,
    TaskKey,
    TaskStatus,
    TopicKey,
    TopicStatus,
    connector_key,
    parse_key,
    task_key,
    topic_key,
)

# Names with dashes, colons, unicode and control characters (no lone surrogates: not encodable).
names = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
topic_names = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters=":"), min_size=1,
                      max_size=40)


def test_reference_keys_are_built_exactly() -> None:
    assert connector_key("conn") == "status-connector-conn"
    assert task_key(TaskId("my-conn", 12)) == "status-task-my-conn-12"
    assert topic_key("foo-source", "foo-topic") == "status-topic-foo-topic:connector-foo-source"


@pytest.mark.parametrize(
    ("key", "parsed"),
    [
        ("status-connector-conn", ConnectorKey("conn")),
        ("status-task-my-conn-12", TaskKey("my-conn", 12)),
        ("status-task-conn-0", TaskKey("conn", 0)),
        ("status-topic-foo-topic:connector-foo-source", TopicKey("foo-topic", "foo-source")),
        # The topic ends at the first ':'; the connector may contain ':' and ':connector-'.
        ("status-topic-t:connector-a:connector-b", TopicKey("t", "a:connector-b")),
        # Java's split("-") drops trailing empty strings; inner empty parts survive the re-join.
        ("status-task-a--b-3", TaskKey("a--b", 3)),
        ("status-task-ab--0", TaskKey("ab-", 0)),
        # Integer.parseInt accepts a leading '+' and decimal digits of any script.
        ("status-task-conn-+7", TaskKey("conn", 7)),
        ("status-task-conn-٣", TaskKey("conn", 3)),
        ("status-task-conn-\uff11\uff12", TaskKey("conn", 12)),  # fullwidth digits: in the Basic Multilingual Plane
        # Like Connect, the 11 characters from the first ':' are skipped without being looked at.
        ("status-topic-t:XXXXXXXXXXc", TopicKey("t", "c")),
    ],
)
def test_parse_key_reads_what_connect_reads(key: str, parsed: object) -> None:
    assert parse_key(key) == parsed


@pytest.mark.parametrize(
    "key",
    [
        "status-connector-",  # empty connector
        "status-task-conn",  # fewer than 4 parts
        "status-task-conn-",  # trailing dash: split drops it, 3 parts remain
        "status-task-conn-x",  # non-numeric task
        "status-task-conn- 1",  # Java does not trim
        "status-task-conn-²",  # a digit character that is not a decimal digit
        "status-task-conn-1_0",  # Python's int() would take it; Java's parseInt does not
        # A digit above U+FFFF is two UTF-16 surrogate units in a Java string, and parseInt reads one unit at a
        # time: neither is a digit. Connect 4.4 discards these two keys and the overflow below too ("Invalid task
        # status key"): tests/test_connect_records_live.py::test_status_task_numbers_are_read_as_connect_reads_them
        "status-task-conn-\U0001d7cf",
        "status-task-conn-1\U0001d7cf",
        "status-task-conn-2147483648",  # overflows int
        "status-topic-:connector-c",  # empty topic
        "status-topic-t:connector-",  # empty connector
        "status-topic-t-connector-c",  # no ':'
        "status-topic-t:conn-c",  # ':' not followed by the separator
        "something-else",
        "",
    ],
)
def test_parse_key_discards_what_connect_discards(key: str) -> None:
    assert parse_key(key) is None


@given(names, st.integers(0, 2**31 - 1))
def test_task_keys_round_trip(connector: str, task: int) -> None:
    assert parse_key(task_key(TaskId(connector, task))) == TaskKey(connector, task)


@given(names)
def test_connector_keys_round_trip(connector: str) -> None:
    assert parse_key(connector_key(connector)) == ConnectorKey(connector)


@given(names, topic_names)
def test_topic_keys_round_trip(connector: str, topic: str) -> None:
    assert parse_key(topic_key(connector, topic)) == TopicKey(topic, connector)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ConnectorStatus("", State.RUNNING, "w", 0), "connector name"),
        (lambda: ConnectorStatus("c", State.RUNNING, "w", 2**31), "generation"),
        (lambda: ConnectorStatus("c", State.RUNNING, "w", True), "generation"),
        (lambda: ConnectorStatus("c\ud800", State.RUNNING, "w", 0), "surrogate"),
        (lambda: TaskStatus(TaskId("c", -1), State.RUNNING, "w", 0), "task"),
        (lambda: ConnectorStatus("c", State.RUNNING, 7, 0), "worker_id"),
        (lambda: TopicStatus("t", "c", 0, 2**63), "discover_timestamp"),
        (lambda: TopicStatus("t", "c", 2**31, 0), "task"),
        (lambda: TopicStatus("t", None, 0, 0), "connector"),
        (lambda: TopicStatus("a:b", "c", 0, 0).check_writable(), "':'"),
        (lambda: TopicStatus("t", "c", -1, 0).check_writable(), "task"),
    ],
)
def test_invalid_status_values_are_refused(build: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()  # type: ignore[operator]


def test_the_mock_cluster_binding_refuses_a_librdkafka_it_was_not_written_for() -> None:
    from status_store.embedded.mock_cluster import UnsupportedLibrdkafka, check_version

    check_version("2.16.0")
    with pytest.raises(UnsupportedLibrdkafka, match=r"written for librdkafka 2\.16\.x and this .* has 2\.17"):
        check_version("2.17.1")


def test_status_values_as_connect_reads_them_can_be_held() -> None:
    # What Connect reads from the topic: no worker id, lone surrogates, odd topic statuses.
    assert ConnectorStatus("c", State.RUNNING, None, 0, "\ud800").worker_id is None
    assert TaskStatus(TaskId("c", 0), State.FAILED, "w\udc00", 0).worker_id == "w\udc00"
    assert TopicStatus("a:b", "", -1, 0).task == -1
