"""Connect's wire format for status values: byte-exact encoding and tolerant decoding (pure).

Connect writes values with its ``JsonConverter`` (schemas disabled), which is Jackson underneath:
compact JSON, fields in schema order, characters of the Basic Multilingual Plane written raw, those
above it (and lone surrogates) as escaped UTF-16 units, control characters other than
``\\b \\f \\n \\r \\t`` escaped as ``\\u00XX``, all hex in upper case. A ``DESTROYED`` status is
never serialized; it is written as a tombstone.

It reads values as Connect's ``JsonDeserializer`` does (``jackson.read_value``: encodings, leading zeros,
Jackson's limits), then applies ``KafkaStatusBackingStore``'s casts: what Connect skips is ``GarbledValue``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, NamedTuple, TypeGuard

from .jackson import read_value
from .model import UNVERSIONED, ConnectorStatus, PluginVersion, State, TaskId, TaskStatus, TopicStatus, Unversioned

# Jackson's escapes: the two mandatory ones, the five short forms, \u00XX (upper-case) for the rest.
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = {code: _SHORT.get(chr(code), f"\\u{code:04X}") for code in range(0x20)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"
# Characters Jackson does not write raw: those above U+FFFF and lone surrogates.
_BEYOND_BMP_OR_SURROGATE_RANGES = "\ud800-\udfff\U00010000-\U0010ffff"
_BEYOND_BMP_OR_SURROGATE = re.compile(f"[{_BEYOND_BMP_OR_SURROGATE_RANGES}]")
# Any character json_string changes: most strings (keys, worker ids, results) have none and are written as they are.
_NEEDS_ESCAPE = re.compile(f"[{re.escape(''.join(map(chr, _ESCAPES)))}{_BEYOND_BMP_OR_SURROGATE_RANGES}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What Python's own JSON string writer (json.encoder's, in C) writes otherwise than Jackson: a control character
# without a short form (Python writes \u001b, Jackson \u001B), and what Jackson escapes beyond the BMP. Text without
# them (a stack trace's newlines and tabs included) is escaped by it, many times faster than by ``str.translate``.
_PYTHON_WRITES_OTHERWISE = re.compile(f"[\x00-\x07\x0b\x0e-\x1f{_BEYOND_BMP_OR_SURROGATE_RANGES}]")
_python_json_string = json.encoder.encode_basestring
_STATES = {state.value: state for state in State}


class ConnectJSON(str):
    """JSON text already rendered as Jackson writes it: the REST answers' writer (``api.responses.connect_json``)
    puts it in as it is."""


class GarbledValue(ValueError):
    """A record value Connect would log and skip."""


class StatusValue(NamedTuple):
    """The decoded value of a connector or task status record."""

    state: State
    trace: str | None
    # None when the writer left it out or null (Connect reads such a value too).
    worker_id: str | None
    generation: int
    # KIP-891's field (Connect 4.1+): UNVERSIONED when the value has none.
    version: PluginVersion = UNVERSIONED


def json_string(text: str) -> str:
    """A JSON string literal exactly as Jackson writes it."""
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    if _PYTHON_WRITES_OTHERWISE.search(text) is None:
        return _python_json_string(text)
    escaped = text.translate(_ESCAPES)
    if not escaped.isascii():
        escaped = _BEYOND_BMP_OR_SURROGATE.sub(_escape_utf16, escaped)
    return '"' + escaped + '"'


def connect_data_json(value: Any) -> ConnectJSON:
    """A JSON value (as ``jackson.read_value`` reads it) turned into what Connect's JsonConverter (schemas disabled)
    hands over, written as Jackson writes those Java objects: an integer as a long (its low 64 bits), a fraction as
    a double (beyond a double's range an infinity, which Jackson writes as the string ``"Infinity"``), strings as
    ``json_string`` writes them, objects in their order. Iterative: a value may nest as deep as Jackson reads."""
    parts: list[str] = []
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Punctuation:
            parts.append(item)
        elif isinstance(item, str):
            parts.append(json_string(item))
        elif item is None or isinstance(item, bool):
            parts.append(_LITERALS[item])
        elif isinstance(item, int):
            parts.append(str(_narrow(item, 64)))
        elif isinstance(item, float):
            parts.append(repr(item) if math.isfinite(item) else '"Infinity"' if item > 0 else '"-Infinity"')
        elif isinstance(item, dict):
            # Pushed in reverse: the first member comes off the stack first.
            todo.append(_Punctuation("}"))
            members = list(item.items())
            for i in range(len(members) - 1, -1, -1):
                name, element = members[i]
                todo += [element, _Punctuation("," * (i > 0) + json_string(name) + ":")]
            todo.append(_Punctuation("{"))
        else:
            todo.append(_Punctuation("]"))
            for i in range(len(item) - 1, -1, -1):
                todo += [item[i], _Punctuation("," * (i > 0))]
            todo.append(_Punctuation("["))
    return ConnectJSON("".join(parts))


class _Punctuation(str):
    """Text ``connect_data_json`` writes as it is."""


_LITERALS = {None: "null", True: "true", False: "false"}
def json_scalar(value: str | int | float | None) -> str:
    """A JSON string (as ``json_string`` writes it), number, boolean or null."""
    if isinstance(value, str):
        return json_string(value)
    if value is None:
        return "null"
    # Exactly int (not bool, not an IntEnum, whose str() is not its number): the commonest number, written
    # without json.dumps's own setup.
    if type(value) is int:
        return str(value)
    return json.dumps(value, allow_nan=False)


def escape_surrogates(text: str) -> str:
    """``text`` with each surrogate (a lone one, which UTF-8 cannot encode: Connect writes one when a Java string
    is cut inside a pair) written as Jackson escapes it, ``\\uD800``; for text outside JSON, such as a label."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape_utf16, text)


def _escape_utf16(match: re.Match[str]) -> str:
    # Jackson writes a Java string, i.e. UTF-16: every surrogate unit (of a pair, or a lone one) is escaped.
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2))


def encode_status(state: State, worker_id: str | None, generation: int, trace: str | None,
                  version: PluginVersion = UNVERSIONED) -> bytes | None:
    """The value bytes of a connector or task status; ``None`` (a tombstone) for DESTROYED.

    The fields of Connect's status schema in its order: ``state``, ``trace``, ``worker_id``, ``generation``, and
    KIP-891's ``version`` (Connect 4.1+; a null one as ``"version":null``, as Connect 4.x writes it) unless the
    status is UNVERSIONED (Connect 3.x's bytes). A status without a worker id cannot be written (Connect's schema
    requires one): ``ValueError``.
    """
    if state is State.DESTROYED:
        return None
    if worker_id is None:
        raise ValueError("a status without worker_id cannot be written")
    if (trace is None and len(worker_id) <= _CACHED_TEXT_CHARS
            and (not isinstance(version, str) or len(version) <= _CACHED_TEXT_CHARS)):
        # Statuses without a trace repeat (same state, worker and generation across many tasks): encode them once.
        # Only small ones: the cache must not hold what clients send at will.
        return _encode_traceless(state, worker_id, generation, version)
    return _encode(state, worker_id, generation, "null" if trace is None else json_string(trace), version)


_CACHED_TEXT_CHARS = 128


@functools.lru_cache(maxsize=8192, typed=True)
def _encode_traceless(state: State, worker_id: str, generation: int, version: PluginVersion) -> bytes:
    return _encode(state, worker_id, generation, "null", version)


def _encode(state: State, worker_id: str, generation: int, trace_json: str, version: PluginVersion) -> bytes:
    version_json = "" if version is UNVERSIONED else ',"version":' + (
        "null" if version is None else json_string(version))
    return (
        f'{{"state":"{state.value}","trace":{trace_json},'
        f'"worker_id":{json_string(worker_id)},"generation":{generation}{version_json}}}'
    ).encode()


def encode_topic_status(status: TopicStatus) -> bytes:
    """The value bytes of a topic status record; ``ValueError`` for one that could not be read back under its
    key (``TopicStatus.check_writable``)."""
    status.check_writable()
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
    trace, worker_id = fields.get("trace"), fields.get("worker_id")
    if not isinstance(trace, str | None) or not isinstance(worker_id, str | None):
        raise GarbledValue(f"trace or worker_id is neither a string nor null: {trace!r}, {worker_id!r}")
    # Connect 4.x casts the field to a String (a value with another type is skipped); 3.x ignores it.
    version = fields.get("version", UNVERSIONED)
    if not isinstance(version, str | None | Unversioned):
        raise GarbledValue(f"version is neither a string nor null: {version!r}")
    return StatusValue(state, trace, worker_id, _java_int(fields.get("generation"), "generation"), version)


def decode_topic_status(value: bytes) -> TopicStatus:
    """Decode a topic status value; raise GarbledValue for what Connect skips.

    Connect's ``TopicStatus`` takes any strings (empty, with a ``:``) and any task number: such a status is
    read and listed, although it could not be written back under its key.
    """
    inner = _decode_object(value).get("topic")
    if not isinstance(inner, dict):
        raise GarbledValue("no 'topic' object")
    name, connector = inner.get("name"), inner.get("connector")
    if not isinstance(name, str) or not isinstance(connector, str):
        raise GarbledValue("topic name or connector is not a string")
    timestamp = inner.get("discoverTimestamp")
    if not _is_int(timestamp):
        raise GarbledValue(f"discoverTimestamp is not an integer: {timestamp!r}")
    return TopicStatus(name, connector, _java_int(inner.get("task"), "task"), _narrow(timestamp, 64))


def _decode_object(value: bytes) -> dict[str, Any]:
    if not value:
        raise GarbledValue("empty value (a tombstone is a null value, not empty bytes)")
    try:
        decoded = read_value(value)
    except ValueError as e:
        raise GarbledValue(f"not JSON as Connect reads it: {e}") from None
    if not isinstance(decoded, dict):
        raise GarbledValue(f"not a JSON object: {type(decoded).__name__}")
    return decoded


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


def connector_status(connector: str, value: StatusValue) -> ConnectorStatus:
    """A connector's status from its decoded record value."""
    return ConnectorStatus(connector, value.state, value.worker_id, value.generation, value.trace, value.version)


def task_status(task: TaskId, value: StatusValue) -> TaskStatus:
    """A task's status from its decoded record value."""
    return TaskStatus(task, value.state, value.worker_id, value.generation, value.trace, value.version)
