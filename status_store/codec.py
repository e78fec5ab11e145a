"""Connect's wire format for status values: byte-exact encoding and tolerant decoding (pure).

Connect writes values with its ``JsonConverter`` (schemas disabled), which is Jackson underneath:
compact JSON, fields in schema order, non-ASCII written raw, control characters other than
``\\b \\f \\n \\r \\t`` escaped as ``\\u00XX`` with upper-case hex. A ``DESTROYED`` status is
never serialized; it is written as a tombstone.
"""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple, TypeGuard

from .model import State, TopicStatus

# Jackson's escapes: the two mandatory ones, the five short forms, \u00XX (upper-case) for the rest.
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = {code: _SHORT.get(chr(code), f"\\u{code:04X}") for code in range(0x20)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"
_STATES = {state.value: state for state in State}


class GarbledValue(ValueError):
    """A record value Connect would log and skip."""


class StatusValue(NamedTuple):
    """The decoded value of a connector or task status record."""

    state: State
    trace: str | None
    worker_id: str
    generation: int


def json_string(text: str) -> str:
    """A JSON string literal exactly as Jackson writes it."""
    return '"' + text.translate(_ESCAPES) + '"'


def encode_status(state: State, worker_id: str, generation: int, trace: str | None) -> bytes | None:
    """The value bytes of a connector or task status; ``None`` (a tombstone) for DESTROYED."""
    if state is State.DESTROYED:
        return None
    trace_json = "null" if trace is None else json_string(trace)
    return (
        f'{{"state":"{state.value}","trace":{trace_json},'
        f'"worker_id":{json_string(worker_id)},"generation":{generation}}}'
    ).encode()


def encode_topic_status(status: TopicStatus) -> bytes:
    """The value bytes of a topic status record."""
    return (
        f'{{"topic":{{"name":{json_string(status.topic)},"connector":{json_string(status.connector)},'
        f'"task":{status.task},"discoverTimestamp":{status.discover_timestamp}}}}}'
    ).encode()


def decode_status(value: bytes) -> StatusValue:
    """Decode a connector or task status value; raise GarbledValue for what Connect skips."""
    # Small values repeat (same state, worker and generation across many tasks): decode them once.
    # Values with stack traces are large and mostly unique: caching them would only hold memory.
    return _decode_small_status(value) if len(value) <= _CACHED_VALUE_BYTES else _decode_status(value)


_CACHED_VALUE_BYTES = 256


@functools.lru_cache(maxsize=8192)
def _decode_small_status(value: bytes) -> StatusValue:
    return _decode_status(value)


def _decode_status(value: bytes) -> StatusValue:
    fields = _decode_object(value)
    state_name = fields.get("state")
    state = _STATES.get(state_name) if isinstance(state_name, str) else None
    if state is None:
        raise GarbledValue(f"unknown state {state_name!r}")
    trace = fields.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise GarbledValue(f"trace is not a string: {trace!r}")
    worker_id = fields.get("worker_id")
    if not isinstance(worker_id, str):
        raise GarbledValue(f"worker_id is not a string: {worker_id!r}")
    if not _encodable(worker_id) or (trace is not None and not _encodable(trace)):
        raise GarbledValue("a lone surrogate escape in worker_id or trace")
    return StatusValue(state, trace, worker_id, _java_int(fields.get("generation"), "generation"))


def decode_topic_status(value: bytes) -> TopicStatus:
    """Decode a topic status value; raise GarbledValue for what Connect skips."""
    inner = _decode_object(value).get("topic")
    if not isinstance(inner, dict):
        raise GarbledValue("no 'topic' object")
    name, connector = inner.get("name"), inner.get("connector")
    if not isinstance(name, str) or not isinstance(connector, str):
        raise GarbledValue("topic name or connector is not a string")
    timestamp = inner.get("discoverTimestamp")
    if not _is_int(timestamp):
        raise GarbledValue(f"discoverTimestamp is not an integer: {timestamp!r}")
    try:
        return TopicStatus(name, connector, _java_int(inner.get("task"), "task"), _narrow(timestamp, 64))
    except ValueError as e:
        raise GarbledValue(str(e)) from None


def _decode_object(value: bytes) -> dict[str, Any]:
    if not value:
        raise GarbledValue("empty value (a tombstone is a null value, not empty bytes)")
    try:
        text = value.decode("utf-8").lstrip(" \t\r\n")
        # Like Jackson's readTree, read one JSON value and ignore whatever follows it.
        decoded, _ = _DECODER.raw_decode(text)
    except (ValueError, RecursionError) as e:
        raise GarbledValue(f"not JSON: {e}") from None
    if not isinstance(decoded, dict):
        raise GarbledValue(f"not a JSON object: {type(decoded).__name__}")
    return decoded


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> None:
    # Jackson rejects NaN and Infinity by default; Python would accept them.
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _java_int(value: object, field: str) -> int:
    """An integer field as Connect reads it: any JSON integer, narrowed like Java's longValue().intValue()."""
    if not _is_int(value):
        raise GarbledValue(f"{field} is not an integer: {value!r}")
    return _narrow(value, 32)


def _narrow(value: int, bits: int) -> int:
    """The low ``bits`` bits of an integer, as a signed number (Java's narrowing conversions)."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half
