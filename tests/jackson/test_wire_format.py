"""Our codec against Connect's own, on real Jackson: byte for byte when writing; the same accept or reject, and
the same value, when reading whatever any writer may have left in the status topic."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from status_store.api.responses import connect_json
from status_store.connect.codec import (
    GarbledValue,
    StatusValue,
    decode_status,
    decode_topic_status,
    encode_status,
    encode_topic_status,
)
from status_store.connect.configs import ConnectorConfigs
from status_store.connect.model import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, State, TopicStatus

from .oracle import JacksonOracle, Rejected
from .values import CONFIG_FIELDS, STATUS_FIELDS, TEXT, TOPIC_FIELDS, record_values

# Each example is a batch through the one JVM: 60 examples of up to 40 values is a few thousand values a test.
# (No "explain" phase: its tracing makes shrinking a failure of these large examples take minutes.)
BATCHES = settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WRITABLE_STATES = [state for state in State if state is not State.DESTROYED]
status_values = st.builds(StatusValue, st.sampled_from(WRITABLE_STATES), st.none() | TEXT, TEXT,
                          st.integers(INT32_MIN, INT32_MAX))
names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=30)
topic_statuses = st.builds(TopicStatus, names.filter(lambda t: ":" not in t), names, st.integers(0, INT32_MAX),
                           st.integers(INT64_MIN, INT64_MAX))


def ours_status(value: bytes) -> StatusValue | Rejected:
    try:
        return decode_status(value)
    except GarbledValue as e:
        return Rejected(str(e))


def ours_topic(value: bytes) -> TopicStatus | Rejected:
    try:
        return decode_topic_status(value)
    except GarbledValue as e:
        return Rejected(str(e))


# Jackson 2.21 (PySpark's) refuses surrogates in UTF-8 input that the Jackson of released Connect versions
# (2.16 in Kafka 3.9 and 4.0; 2.17 to 2.20 alike) reads: encoded in UTF-8 (ED A0..BF xx) in strings and names,
# and escaped but unpaired in names. Its UTF-16 reader still reads them all as the older versions do, so for
# such a value the oracle is asked about the same text in UTF-16, raw surrogates written as escapes (which
# older versions read alike). Values that are not UTF-8 apart from surrogates cannot be transcoded: they are
# left unchecked on 2.21 (set JACKSON_ORACLE_JARS to a 2.16 to 2.20 Jackson to check them too).
RAW_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Unchecked:
    """A value Jackson 2.21 reads differently from Connect's Jackson, and that the test cannot transcode."""


def connect_reads(jackson: JacksonOracle, read: Callable[[list[bytes]], list[Any]], values: list[bytes]) -> list[Any]:
    """What Connect reads, as the Jackson of released Connect versions reads it."""
    answers = read(values)
    if jackson.version < (2, 21):
        return answers
    again: dict[int, bytes] = {}
    for i, (value, answer) in enumerate(zip(values, answers, strict=True)):
        utf8 = 0 not in value[:2] and not value.startswith((b"\xfe\xff", b"\xff\xfe"))
        if utf8 and isinstance(answer, Rejected) and "surrogate" in answer.reason:
            try:
                text = value.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                answers[i] = Unchecked()
                continue
            again[i] = RAW_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04X}", text).encode("utf-16-be")
    for i, answer in zip(again, read(list(again.values())), strict=True):
        answers[i] = answer
    if currently_in_test_context():
        event(f"values Jackson 2.21 reads unlike Connect's Jackson: {len(again)} transcoded, "
              f"{sum(isinstance(a, Unchecked) for a in answers)} unchecked")
    return answers


def assert_same_reading(values: list[bytes], ours: list[Any], connect: list[Any]) -> None:
    for value, mine, theirs in zip(values, ours, connect, strict=True):
        if isinstance(theirs, Unchecked):
            continue
        if isinstance(theirs, Rejected):
            assert isinstance(mine, Rejected), f"Connect rejects {value!r} ({theirs.reason}); we read {mine!r}"
        else:
            assert mine == theirs, f"{value!r}: Connect reads {theirs!r}, we {mine!r}"


@BATCHES
@given(st.lists(status_values, min_size=20, max_size=40))
def test_status_values_are_written_as_connect_writes_them(jackson: JacksonOracle, values: list[StatusValue]) -> None:
    expected = jackson.write_statuses(values)
    assert [encode_status(v.state, v.worker_id, v.generation, v.trace) for v in values] == expected


@BATCHES
@given(st.lists(topic_statuses, min_size=20, max_size=40))
def test_topic_values_are_written_as_connect_writes_them(jackson: JacksonOracle, values: list[TopicStatus]) -> None:
    assert [encode_topic_status(v) for v in values] == jackson.write_topic_statuses(values)


@BATCHES
@given(st.lists(TEXT, min_size=20, max_size=40))
def test_strings_are_written_as_jackson_writes_them(jackson: JacksonOracle, texts: list[str]) -> None:
    # As a REST body holds them: a property name (a connector's name in an expanded list) and a string.
    assert [connect_json({text: text}).encode() for text in texts] == jackson.json_objects(texts)


@BATCHES
@given(st.lists(record_values(STATUS_FIELDS), min_size=20, max_size=40))
def test_status_values_are_read_as_connect_reads_them(jackson: JacksonOracle, values: list[bytes]) -> None:
    connect = connect_reads(jackson, jackson.read_statuses, values)
    assert_same_reading(values, [ours_status(v) for v in values], connect)


@BATCHES
@given(st.lists(record_values(TOPIC_FIELDS), min_size=20, max_size=40))
def test_topic_values_are_read_as_connect_reads_them(jackson: JacksonOracle, values: list[bytes]) -> None:
    connect = connect_reads(jackson, jackson.read_topic_statuses, values)
    assert_same_reading(values, [ours_topic(v) for v in values], connect)


def ours_connector_config(value: bytes) -> bytes | Rejected:
    """A connector configuration record as we read it: its properties as our REST answers write them, ``null`` for
    a tombstone, Rejected when the record is ignored (the configuration read before stays)."""
    configs = ConnectorConfigs()
    configs.apply("connector-c", b'{"properties":{}}')
    before = configs.connector_config("c")
    configs.apply("connector-c", value)
    after = configs.connector_config("c")
    if after is None:
        return b"null"
    return Rejected("ignored") if after is before else connect_json(after).encode("utf-8", "surrogatepass")


def json_of(text: bytes) -> Any:
    """JSON text as a value: the same value in both spellings of a number (Java's 1.0E20, Python's 1e+20)."""
    return json.loads(text.decode("utf-8", "surrogatepass"))


@BATCHES
@given(st.lists(record_values(CONFIG_FIELDS), min_size=20, max_size=40))
def test_connector_configurations_are_read_as_connect_reads_them(jackson: JacksonOracle, values: list[bytes]) -> None:
    connect = connect_reads(jackson, jackson.read_connector_configs, values)
    ours = [ours_connector_config(v) for v in values]
    assert_same_reading(values, [o if isinstance(o, Rejected) else json_of(o) for o in ours],
                        [c if isinstance(c, Rejected | Unchecked) else json_of(c) for c in connect])


def status_with(member: str, generation: str = "1") -> bytes:
    """A status value with one more member before worker_id (and the generation spelled as given)."""
    return f'{{"state":"RUNNING",{member}"worker_id":"w","generation":{generation}}}'.encode("utf-8", "surrogatepass")


def arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


ESCAPED_E_ACUTE = "\\u00e9"
UTF16_TEXT = status_with("").decode()
EDGES = [
    # Numbers: 1000 digits at most (leading zeros not counted), fractions within BigDecimal's range.
    status_with("", "9" * 1000), status_with("", "9" * 1001), status_with("", "-" + "9" * 1000),
    status_with("", "0" * 5 + "9" * 1000), status_with("", "007"), status_with("", "-007"), status_with("", "00"),
    status_with(f'"x":{"1" * 1001},'), status_with(f'"x":0.{"1" * 999},'), status_with(f'"x":0.{"1" * 1000},'),
    status_with(f'"x":1.{"5" * 600}e2147483647,'), status_with(f'"x":1.{"5" * 600}e-2147483647,'),
    status_with(f'"x":1.{"5" * 600}e-2147483049,'),
    *(status_with(f'"x":{spelling},') for spelling in [
        "1e2147483647", "1e2147483648", "1e-2147483648", "1e-2147483649", "1.5e-2147483647", "0.0e-2147483648",
        "1e+0000000000002", "1e00000000002147483648", "00.5", "-00.5e-01", "1.", ".5", "+1", "1e", "0x1"]),
    # Names: at most 50,000 bytes in UTF-8 input (an escape counts as its UTF-8 length).
    status_with(f'"{"n" * 50_000}":1,'), status_with(f'"{"n" * 50_001}":1,'),
    status_with(f'"{"é" * 25_000}":1,'), status_with(f'"{"é" * 25_001}":1,'),
    status_with(f'"{ESCAPED_E_ACUTE * 25_000}":1,'), status_with(f'"{ESCAPED_E_ACUTE * 25_001}":1,'),
    status_with(f'"{"😀" * 12_500}":1,'), status_with(f'"{"😀" * 12_501}":1,'),
    # ... and 50,000 characters in UTF-16 input.
    status_with(f'"{"é" * 50_000}":1,').decode().encode("utf-16-le"),
    status_with(f'"{"é" * 50_001}":1,').decode().encode("utf-16-le"),
    # ... also where Jackson's reader of UTF-16 input re-reads a number (a leading 0, or across the 4000
    # characters it loads at a time), which lets a fraction have one digit more.
    *(status_with(spelling).decode().encode("utf-16-le") for spelling in [
        f'"x":0.{"1" * 1000},', f'"x":0.{"1" * 1001},', f'"x":-00{"1" * 1000}.7,', f'"x":0{"1" * 999}.7e1,',
        f'"p":"{"x" * 2000}","x":1.{"1" * 1000},', f'"p":"{"x" * 3500}","x":1.{"1" * 1000},',
        f'"p":"{"x" * 3500}","x":1.{"1" * 999}e1,', f'"p":"{"x" * 3500}","x":1{"1" * 1000},']),
    # Nesting: at most 1000 levels, the status object being the first.
    status_with(f'"x":{arrays(999)},'), status_with(f'"x":{arrays(1000)},'),
    status_with(f'"x":{objects(999)},'), status_with(f'"x":{objects(1000)},'),
    status_with(f'"x":{arrays(1000)},').decode().encode("utf-16-be"),
    # Encodings, BOMs, lone surrogates, and what follows the value.
    b"\xef\xbb\xbf" + status_with(""), b"\xef\xbb\xbf\xef\xbb\xbf" + status_with(""),
    status_with("") + b"\xff\xfe garbage", status_with("") + b"}", status_with("")[:-1],
    "\ufeff".encode("utf-16-be") + UTF16_TEXT.encode("utf-16-be"), UTF16_TEXT.encode("utf-16-le"),
    UTF16_TEXT.encode("utf-32-be"), "\ufeff".encode("utf-32-le") + UTF16_TEXT.encode("utf-32-le"),
    UTF16_TEXT.encode("utf-16-be") + b"\xd8\x00", UTF16_TEXT.encode("utf-16-be") + b"\x00",
    status_with('"trace":"\\ud800",'), status_with('"trace":"\\udc00\\ud800",'),
    status_with('"trace":"\ud800",').decode("utf-8", "surrogatepass").encode("utf-16-le", "surrogatepass"),
    status_with('"trace":"A\ud800A",').decode("utf-8", "surrogatepass").encode("utf-16-be", "surrogatepass"),
    status_with('"trace":"A\ufffeA",').decode().encode("utf-16-be"),
    b'{"state":"RUNNING","trace":"\xf4\x90\x80\x80\xc0\xaf\xe0\x80\xaf","worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":"\xed\xa0\x80x\xed\xa0\xbd\xed\xb8\x80","worker_id":"w","generation":1}',
    b'{"state":"RUNNING","\xed\xa0\x80":1,"\\udc00":2,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":"\xf0\x80\x80\xaf","worker_id":"w","generation":1}',
    b'{"state":"RUNNING","\xf0\x80\x80\xaf":"x","worker_id":"w","generation":1}',
    b"\x00\x00" + UTF16_TEXT.encode("utf-16-be"), b"\x00{\x00\x00", b"{\x00\x00\x00", b"\x00\x00{\x00", b"\x00",
    b'{"state":"RUNNING","trace":null,"worker_id":null,"generation":1}', b'{"state":"RUNNING","generation":1}',
    b"",
]


def utf32(text: str, byteorder: str = "be") -> bytes:
    return text.encode(f"utf-32-{byteorder}")


# What Connect reads as null (a tombstone: the configuration or status removed) or rejects (the record ignored): a
# literal and what follows it, and UTF-32 input that ends with an incomplete character. Each was read as null here
# once (a connector's configuration removed) where Connect ignores the record.
NULL_EDGES = [
    b"\x00\x00\xfe\xff\x00", b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00\x00\x00", utf32("null") + b"\x00",
    utf32("null ") + b"\x00", utf32('{"properties":{}}') + b"\x00", utf32('{"properties":{}} ') + b"\x00\x00",
    utf32(" ") + b"\x00", utf32("nullx"), utf32("null:"), utf32("nullx", "le"),
    b"nullx", b"null1", b"null_", b"null\x7f", b"nullnull", b"null\xc3\xa9", b"null\x80", b"null\xc2\xa0",
    b"null,", b"null]", b"null}", b"null$", b"null-", b"null:", b"null\x00", b"null ", b"null{", b"null/",
    b" true1", b"falsee", "nullx".encode("utf-16-be"), "null1".encode("utf-16-le"), "null,".encode("utf-16-be"),
    "null\u00e9".encode("utf-16-be"), "null\u200b".encode("utf-16-le"), "null\u00a0".encode("utf-16-be"),
    "null\ud800".encode("utf-16-be", "surrogatepass"),
]


@pytest.mark.parametrize("value", NULL_EDGES, ids=range(len(NULL_EDGES)))
def test_what_connect_reads_as_null_or_rejects_is_read_so(jackson: JacksonOracle, value: bytes) -> None:
    configs = connect_reads(jackson, jackson.read_connector_configs, [value])
    assert not isinstance(configs[0], Unchecked)
    ours = ours_connector_config(value)
    assert_same_reading([value], [ours if isinstance(ours, Rejected) else json_of(ours)],
                        [c if isinstance(c, Rejected) else json_of(c) for c in configs])
    statuses = connect_reads(jackson, jackson.read_statuses, [value])
    assert_same_reading([value], [ours_status(value)], statuses)


@pytest.mark.parametrize("value", EDGES, ids=range(len(EDGES)))
def test_status_values_at_jacksons_limits_are_read_as_connect_reads_them(jackson: JacksonOracle, value: bytes) -> None:
    connect = connect_reads(jackson, jackson.read_statuses, [value])
    assert not isinstance(connect[0], Unchecked)
    assert_same_reading([value], [ours_status(value)], connect)


def test_a_utf32_code_point_above_u10ffff_is_only_noticed_in_a_chunk_the_parser_loads(jackson: JacksonOracle) -> None:
    # Jackson's UTF32Reader fails on it when the parser loads the 4000-character chunk holding it.
    padded = status_with(f'"p":"{"x" * 4100}",').decode()
    invalid = b"\x00\x11\x00\x00"
    values = [status_with("").decode().encode("utf-32-be") + invalid,
              padded.encode("utf-32-be") + b"\x00\x00\x00\x20" * (3999 - len(padded) % 4000) + invalid,
              padded.encode("utf-32-be") + b"\x00\x00\x00\x20" * (4000 - len(padded) % 4000) + invalid]
    connect = jackson.read_statuses(values)
    assert [isinstance(answer, Rejected) for answer in connect] == [True, True, False]
    assert_same_reading(values, [ours_status(v) for v in values], connect)


def test_strings_of_twenty_million_characters_are_read_and_longer_ones_are_not(jackson: JacksonOracle) -> None:
    values = [status_with(f'"trace":"{"x" * size}",') for size in (20_000_000, 20_000_001)]
    connect = jackson.read_statuses(values)
    assert [isinstance(answer, Rejected) for answer in connect] == [False, True]
    assert_same_reading(values, [ours_status(v) for v in values], connect)
