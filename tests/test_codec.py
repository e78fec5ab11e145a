"""Connect's wire format: byte-exact encoding, tolerant decoding (checked against real Jackson in tests/jackson)."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from status_store.connect.codec import (
    GarbledValue,
    StatusValue,
    decode_status,
    decode_topic_status,
    encode_status,
    encode_topic_status,
    json_string,
)
from status_store.connect.model import UNVERSIONED, State, TopicStatus

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
    # Connect 4.1+ (KIP-891): the running plugin's version after the generation, null when it knows none. Bytes as
    # a Connect 4.4 worker wrote them (the live check: tests/test_connect_live.py).
    (
        StatusValue(State.RUNNING, None, "127.0.0.1:18083", 5, "1.0.0-scripted"),
        b'{"state":"RUNNING","trace":null,"worker_id":"127.0.0.1:18083","generation":5,"version":"1.0.0-scripted"}',
    ),
    (
        StatusValue(State.UNASSIGNED, None, "127.0.0.1:18083", 5, None),
        b'{"state":"UNASSIGNED","trace":null,"worker_id":"127.0.0.1:18083","generation":5,"version":null}',
    ),
]
TOPIC_EXAMPLE = (
    TopicStatus("foo-topic", "foo-source", 0, 1700000000000),
    b'{"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1700000000000}}',
)
# All of Unicode, lone surrogates included (a Java string can hold them; they are written escaped).
texts = st.text(alphabet=st.characters(exclude_categories=[]), max_size=60)
# Names are in record keys (UTF-8): no lone surrogates.
names = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60)


def as_java(text: str) -> str:
    """The text as a Java string holds it: UTF-16, so two lone surrogates that make a pair are one character."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@pytest.mark.parametrize(("value", "wire"), EXAMPLES)
def test_reference_status_examples_encode_byte_for_byte(value: StatusValue, wire: bytes) -> None:
    assert encode_status(value.state, value.worker_id, value.generation, value.trace, value.version) == wire


@pytest.mark.parametrize(("value", "wire"), EXAMPLES)
def test_reference_status_examples_decode(value: StatusValue, wire: bytes) -> None:
    assert decode_status(wire) == value


def test_a_status_without_a_version_is_written_without_the_field_as_connect_3_writes_it() -> None:
    wire = b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'
    assert encode_status(State.RUNNING, "w", 1, None) == wire
    assert decode_status(wire).version is UNVERSIONED


@pytest.mark.parametrize("version", ["5", "[\"x\"]", "{}", "true"])
def test_a_version_of_another_type_than_string_or_null_is_garbled_as_connect_4_skips_it(version: str) -> None:
    with pytest.raises(GarbledValue, match="version"):
        decode_status(f'{{"state":"RUNNING","worker_id":"w","generation":1,"version":{version}}}'.encode())


def test_reference_topic_example_both_directions() -> None:
    status, wire = TOPIC_EXAMPLE
    assert encode_topic_status(status) == wire
    assert decode_topic_status(wire) == status


def test_destroyed_is_a_tombstone() -> None:
    assert encode_status(State.DESTROYED, "w:1", 3, None) is None


def test_strings_are_escaped_like_jackson() -> None:
    # Upper-case hex for control characters, short forms for the five, raw BMP characters and DEL.
    assert json_string("\x01\x1f\x7f") == '"\\u0001\\u001F\x7f"'
    assert json_string('é€ "q" \\ /') == '"é€ \\"q\\" \\\\ /"'
    assert json_string("\b\f\n\r\t") == '"\\b\\f\\n\\r\\t"'
    assert encode_status(State.RUNNING, "wörker", 1, "\x00").decode() == (
        '{"state":"RUNNING","trace":"\\u0000","worker_id":"wörker","generation":1}'
    )


def test_characters_above_the_bmp_are_written_as_escaped_surrogate_pairs() -> None:
    # Jackson writes a string as UTF-16 and escapes every surrogate, in upper-case hex.
    assert json_string("😀\U0001d7cf") == '"\\uD83D\\uDE00\\uD835\\uDFCF"'
    assert encode_status(State.FAILED, "w😀", 1, "at 𠀀") == (
        b'{"state":"FAILED","trace":"at \\uD840\\uDC00","worker_id":"w\\uD83D\\uDE00","generation":1}')


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    # Java strings can hold one (read from a value with "\ud800"); Jackson writes it back escaped.
    assert json_string("a\ud800b\udfff") == '"a\\uD800b\\uDFFF"'
    value = b'{"state":"RUNNING","trace":"\\ud800","worker_id":"w\\uDC00","generation":1}'
    decoded = decode_status(value)
    assert decoded == StatusValue(State.RUNNING, "\ud800", "w\udc00", 1)
    assert encode_status(decoded.state, decoded.worker_id, decoded.generation, decoded.trace) == (
        b'{"state":"RUNNING","trace":"\\uD800","worker_id":"w\\uDC00","generation":1}')


@pytest.mark.parametrize("wire", [
    b'{"state":"RUNNING","trace":null,"worker_id":null,"generation":3}',
    b'{"state":"RUNNING","trace":null,"generation":3}',
])
def test_a_missing_or_null_worker_id_is_read_as_none(wire: bytes) -> None:
    assert decode_status(wire) == StatusValue(State.RUNNING, None, None, 3)


def test_a_status_without_worker_id_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="worker_id"):
        encode_status(State.RUNNING, None, 1, None)


@pytest.mark.parametrize(("wire", "generation"), [
    (b'{"state":"RUNNING","worker_id":"w","generation":007}', 7),
    (b'{"state":"RUNNING","worker_id":"w","generation":-0012}', -12),
    (b'{"state":"RUNNING","worker_id":"w","generation":00,"x":00.5e01}', 0),
])
def test_numbers_with_leading_zeros_are_read(wire: bytes, generation: int) -> None:
    # Connect's JsonDeserializer enables ALLOW_LEADING_ZEROS_FOR_NUMBERS.
    assert decode_status(wire).generation == generation


STATUS_TEXT = '{"state":"PAUSED","trace":"é😀","worker_id":"w","generation":2}'


@pytest.mark.parametrize("wire", [
    b"\xef\xbb\xbf" + STATUS_TEXT.encode(),
    STATUS_TEXT.encode("utf-16-be"), STATUS_TEXT.encode("utf-16-le"), STATUS_TEXT.encode("utf-16"),
    STATUS_TEXT.encode("utf-32-be"), STATUS_TEXT.encode("utf-32-le"), STATUS_TEXT.encode("utf-32"),
])
def test_a_bom_and_utf16_or_utf32_values_are_read_as_jackson_detects_them(wire: bytes) -> None:
    assert decode_status(wire) == StatusValue(State.PAUSED, "é😀", "w", 2)


@pytest.mark.parametrize("wire", [
    b'{"state":"RUNNING","worker_id":"w","generation":' + b"1" * 1001 + b"}",
    b'{"state":"RUNNING","worker_id":"w","generation":1,"x":0.' + b"5" * 1000 + b"}",
    b'{"state":"RUNNING","worker_id":"w","generation":1,"x":1e2147483648}',
    b'{"state":"RUNNING","worker_id":"w","generation":1,"' + b"n" * 50_001 + b'":0}',
    b'{"state":"RUNNING","worker_id":"w","generation":1,"x":' + b"[" * 1000 + b"]" * 1000 + b"}",
    # A repeated name does not hide what its first value broke.
    b'{"state":"RUNNING","worker_id":"w","generation":1,"x":' + b"[" * 1000 + b"]" * 1000 + b',"x":1}',
])
def test_values_beyond_jacksons_read_limits_are_garbled(wire: bytes) -> None:
    # StreamReadConstraints: 1000 digits, 50,000-byte names, 1000 levels of nesting; BigDecimal's range.
    with pytest.raises(GarbledValue):
        decode_status(wire)


def test_values_just_within_jacksons_read_limits_are_read() -> None:
    for wire in [
        b'{"state":"RUNNING","worker_id":"w","generation":' + b"0" * 9 + b"1" * 1000 + b"}",
        b'{"state":"RUNNING","worker_id":"w","generation":1,"' + b"n" * 50_000 + b'":0}',
        b'{"state":"RUNNING","worker_id":"w","generation":1,"x":' + b"[" * 999 + b"]" * 999 + b"}",
    ]:
        assert decode_status(wire).state is State.RUNNING


def test_lenient_utf8_in_strings_is_read_as_jackson_reads_it() -> None:
    # An encoded surrogate (CESU-8) and an overlong '/': Jackson's UTF-8 decoder accepts both in strings.
    wire = b'{"state":"RUNNING","trace":"\xed\xa0\x80\xc0\xaf","worker_id":"w","generation":1}'
    assert decode_status(wire).trace == "\ud800/"


@pytest.mark.parametrize("wire", [
    b'{"topic":{"name":"","connector":"c","task":0,"discoverTimestamp":1}}',
    b'{"topic":{"name":"a:b","connector":"","task":-1,"discoverTimestamp":1}}',
    b'{"topic":{"name":"t\\ud800","connector":"c","task":4294967295,"discoverTimestamp":1}}',
])
def test_topic_values_connect_lists_are_read(wire: bytes) -> None:
    # Connect's TopicStatus needs only non-null strings; it lists such topics.
    status = decode_topic_status(wire)
    assert isinstance(status.topic, str)
    assert status.task in (0, -1)


@pytest.mark.parametrize("fields", [("", "c", 0, 1), ("a:b", "c", 0, 1), ("t", "", 0, 1), ("t", "c", -1, 1),
                                    ("t\ud800", "c", 0, 1)])
def test_topic_statuses_that_could_not_be_read_back_under_their_key_are_not_written(
        fields: tuple[str, str, int, int]) -> None:
    with pytest.raises(ValueError, match="topic|connector|task"):
        encode_topic_status(TopicStatus(*fields))


@given(st.sampled_from([s for s in State if s is not State.DESTROYED]), texts, st.integers(-(2**31), 2**31 - 1),
       st.none() | texts)
def test_status_values_round_trip(state: State, worker: str, generation: int, trace: str | None) -> None:
    wire = encode_status(state, worker, generation, trace)
    assert wire is not None
    assert decode_status(wire) == StatusValue(state, trace and as_java(trace), as_java(worker), generation)
    # Compact, ASCII outside the Basic Multilingual Plane, and valid JSON for any reader.
    assert json.loads(wire)["worker_id"] == as_java(worker)


@given(names.filter(lambda t: ":" not in t), names, st.integers(0, 2**31 - 1),
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
    from status_store.connect.codec import _decode_small_status

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
        b'{"state":"RUNNING","worker_id":"w","generation":0}\xff'[:-2],
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
        b'{"topic":{"connector":"c","task":0,"discoverTimestamp":1}}',
    ],
)
def test_garbled_topic_values_are_rejected(wire: bytes) -> None:
    with pytest.raises(GarbledValue):
        decode_topic_status(wire)


def test_encoding_keeps_no_copy_of_large_values() -> None:
    """Small values are encoded once and kept; a client's large worker ids are not (8,192 of them, a megabyte each,
    would be 8 GiB)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for generation in range(50):
            assert encode_status(State.RUNNING, "w" * 100_000, generation, None) is not None
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000, kept
