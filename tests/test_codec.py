"""Connect's wire format: byte-exact encoding, tolerant decoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from status_store.codec import (
    GarbledValue,
    StatusValue,
    decode_status,
    decode_topic_status,
    encode_status,
    encode_topic_status,
    json_string,
)
from status_store.model import State, TopicStatus

TRACE = "java.lang.RuntimeException: boom\n\tat Foo.bar(Foo.java:1)\n"
EXAMPLES = [
    (
        StatusValue(State.RUNNING, None, "localhost:8083", 0),
        b'{"state":"RUNNING","trace":null,"worker_id":"localhost:8083","generation":0}',
    ),
    (
        StatusValue(State.FAILED, TRACE, "10.0.0.7:8083", 7),
        b'{"state":"FAILED","trace":"java.lang.RuntimeException: boom\\n\\tat Foo.bar(Foo.java:1)\\n",'
        b'"worker_id":"10.0.0.7:8083","generation":7}',
    ),
]
TOPIC_EXAMPLE = (
    TopicStatus("foo-topic", "foo-source", 0, 1700000000000),
    b'{"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1700000000000}}',
)
texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=60)


@pytest.mark.parametrize(("value", "wire"), EXAMPLES)
def test_reference_status_examples_encode_byte_for_byte(value: StatusValue, wire: bytes) -> None:
    assert encode_status(value.state, value.worker_id, value.generation, value.trace) == wire


@pytest.mark.parametrize(("value", "wire"), EXAMPLES)
def test_reference_status_examples_decode(value: StatusValue, wire: bytes) -> None:
    assert decode_status(wire) == value


def test_reference_topic_example_both_directions() -> None:
    status, wire = TOPIC_EXAMPLE
    assert encode_topic_status(status) == wire
    assert decode_topic_status(wire) == status


def test_destroyed_is_a_tombstone() -> None:
    assert encode_status(State.DESTROYED, "w:1", 3, None) is None


def test_strings_are_escaped_like_jackson() -> None:
    # Upper-case hex for control characters, short forms for the five, raw non-ASCII and DEL.
    assert json_string("\x01\x1f\x7f") == '"\\u0001\\u001F\x7f"'
    assert json_string('é€😀 "q" \\ /') == '"é€😀 \\"q\\" \\\\ /"'
    assert json_string("\b\f\n\r\t") == '"\\b\\f\\n\\r\\t"'
    assert encode_status(State.RUNNING, "wörker", 1, "\x00").decode() == (
        '{"state":"RUNNING","trace":"\\u0000","worker_id":"wörker","generation":1}'
    )


@given(st.sampled_from([s for s in State if s is not State.DESTROYED]), texts, st.integers(-(2**31), 2**31 - 1),
       st.none() | texts)
def test_status_values_round_trip(state: State, worker: str, generation: int, trace: str | None) -> None:
    wire = encode_status(state, worker, generation, trace)
    assert wire is not None
    assert decode_status(wire) == StatusValue(state, trace, worker, generation)
    # Compact, and valid JSON for any reader.
    assert json.loads(wire)["worker_id"] == worker


@given(texts.filter(lambda t: t and ":" not in t), texts.filter(bool), st.integers(0, 2**31 - 1),
       st.integers(-(2**63), 2**63 - 1))
def test_topic_values_round_trip(topic: str, connector: str, task: int, timestamp: int) -> None:
    status = TopicStatus(topic, connector, task, timestamp)
    assert decode_topic_status(encode_topic_status(status)) == status


def test_unknown_fields_are_ignored() -> None:
    wire = b'{"extra":[1,2],"state":"PAUSED","trace":null,"worker_id":"w","generation":4,"more":{}}'
    assert decode_status(wire) == StatusValue(State.PAUSED, None, "w", 4)


def test_generation_is_narrowed_like_javas_long_intvalue() -> None:
    wire = b'{"state":"RUNNING","worker_id":"w","generation":4294967297}'
    assert decode_status(wire).generation == 1
    wire = b'{"state":"RUNNING","worker_id":"w","generation":99999999999999999999}'
    assert decode_status(wire).generation == 1661992959  # the low 32 bits, as Java keeps them


def test_data_after_the_json_value_is_ignored_like_jacksons_read_tree() -> None:
    wire = b' {"state":"RUNNING","trace":null,"worker_id":"w","generation":2}garbage'
    assert decode_status(wire) == StatusValue(State.RUNNING, None, "w", 2)


def test_values_with_traces_are_not_kept_in_the_decode_cache() -> None:
    from status_store.codec import _decode_small_status

    before = _decode_small_status.cache_info().currsize
    big = encode_status(State.FAILED, "w", 1, "x" * 10000)
    assert big is not None
    assert decode_status(big).trace == "x" * 10000
    assert _decode_small_status.cache_info().currsize == before


@pytest.mark.parametrize(
    "wire",
    [
        b"",  # empty bytes are garbage, not a tombstone
        b"not json",
        b"null",
        b'["RUNNING"]',
        b'"RUNNING"',
        b'{"state":"RUNNNING","worker_id":"w","generation":0}',
        b'{"state":null,"worker_id":"w","generation":0}',
        b'{"state":"RUNNING","worker_id":"w"}',
        b'{"state":"RUNNING","worker_id":"w","generation":1.5}',
        b'{"state":"RUNNING","worker_id":"w","generation":"1"}',
        b'{"state":"RUNNING","worker_id":"w","generation":true}',
        b'{"state":"RUNNING","worker_id":"w","generation":NaN}',
        b'{"state":"RUNNING","worker_id":7,"generation":0}',
        b'{"state":"RUNNING","trace":5,"worker_id":"w","generation":0}',
        b'{"state":"RUNNING","worker_id":"w","generation":0',
        b"\xff\xfe\x00",
    ],
)
def test_garbled_status_values_are_rejected(wire: bytes) -> None:
    with pytest.raises(GarbledValue):
        decode_status(wire)


@pytest.mark.parametrize(
    "wire",
    [
        b"",
        b'{"name":"t","connector":"c","task":0,"discoverTimestamp":1}',
        b'{"topic":"t"}',
        b'{"topic":{"name":"t","connector":"c","task":0}}',
        b'{"topic":{"name":"t","connector":"c","task":"0","discoverTimestamp":1}}',
        b'{"topic":{"name":null,"connector":"c","task":0,"discoverTimestamp":1}}',
    ],
)
def test_garbled_topic_values_are_rejected(wire: bytes) -> None:
    with pytest.raises(GarbledValue):
        decode_topic_status(wire)
