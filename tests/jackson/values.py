"""Hypothesis strategies for status record values as any writer might have left them: JSON in every spelling
Jackson reads (escapes, leading zeros, whitespace, BOMs, UTF-16/32), and the damage it must refuse (bad UTF-8,
truncation, garbage, too-deep nesting, too-long numbers). Most values are plausible statuses, so that both
what Connect reads and what it skips are well covered."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from status_store.connect.model import State

# All of Unicode: astral characters, control characters and lone surrogates included.
TEXT = st.text(st.characters(exclude_categories=[]), max_size=20)
ENCODINGS = ["utf-8-bom", "utf-16-be", "utf-16-le", "utf-32-be", "utf-32-le", "utf-16-be-bom",
                              "utf-16-le-bom", "utf-32-be-bom", "utf-32-le-bom"]
BOMS = {"utf-8": b"\xef\xbb\xbf", "utf-16-be": b"\xfe\xff", "utf-16-le": b"\xff\xfe",
        "utf-32-be": b"\x00\x00\xfe\xff", "utf-32-le": b"\xff\xfe\x00\x00"}
# Byte sequences Jackson's lenient UTF-8 decoder reads in strings, or refuses: overlong forms, encoded
# surrogates (CESU-8), code points above U+10FFFF, stray or missing continuation bytes, invalid lead bytes.
ODD_UTF8 = [b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80",
            b"\xf0\x80\x80\xaf", b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf", b"\x80", b"\xbf", b"\xc3", b"\xe2\x82",
            b"\xf0\x9f\x98", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xc3\x28", b"\xe2\x28\xa1"]
BAD_NUMBERS = ["+1", ".5", "1.", "1e", "1e+", "-", "--1", "0x10", "NaN", "Infinity", "-Infinity", "1_000", "- 1",
               "1.e5", "01.", "-.5", "1ee5", "1.5.5"]
INT32 = st.integers(-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class Raw:
    """Text written as it is (a number's spelling, or anything else)."""

    text: str


@dataclass(frozen=True)
class Odd:
    """Bytes written as they are inside a UTF-8 string (a plain "?" in other encodings)."""

    data: bytes


@dataclass(frozen=True)
class Obj:
    """A JSON object with its members in this order (names may repeat)."""

    members: tuple[tuple[str, Any], ...]


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each about as often as its weight says (the first when shrinking)."""
    total = sum(weight for weight, _ in choices)

    @st.composite
    def pick(draw: st.DrawFn) -> Any:
        roll = draw(st.integers(0, 2**16 - 1)) % total
        for weight, strategy in choices:
            if roll < weight:
                return draw(strategy)
            roll -= weight
        raise AssertionError(roll)
    return pick()


def _numbers() -> st.SearchStrategy[Raw]:
    """Integers and fractions in every spelling: leading zeros, huge, exponents near BigDecimal's limits."""
    digits = weighted((4, st.text("0123456789", min_size=1, max_size=12)),
                      (1, st.integers(490, 1005).map(lambda n: "7" * n)))
    small_exponents = st.integers(-20, 20)
    # Exponents beyond 32 bits only in fractions shorter than 500 characters: longer ones Jackson parses with
    # another parser whose rule changed after Kafka's Jackson 2.16 (2.17+ accept such an exponent when the
    # scale fits; 2.16 and the JDK's BigDecimal do not). The limits test covers the short ones.
    exponents = st.one_of(small_exponents, st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1]))

    @st.composite
    def spelled(draw: st.DrawFn) -> Raw:
        text = draw(st.sampled_from(["", "-"])) + "0" * draw(st.sampled_from([0, 0, 1, 3])) + draw(digits)
        if draw(st.booleans()):
            text += "." + draw(digits)
        if draw(st.booleans()):
            exponent = draw(exponents if len(text) < 450 else small_exponents)
            text += draw(st.sampled_from(["e", "E"])) + ("+" if exponent >= 0 and draw(st.booleans()) else "")
            text += str(exponent)
        return Raw(text)

    huge = st.integers(995, 1005).map(lambda n: Raw("9" * n))
    return weighted((3, st.integers(-(2**70), 2**70).map(lambda i: Raw(str(i)))), (4, spelled()), (1, huge),
                    (1, st.sampled_from(BAD_NUMBERS).map(Raw)))


def _json_values(leaves: int) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), TEXT, NUMBERS, st.sampled_from([Odd(b) for b in ODD_UTF8]))
    return st.recursive(scalars, lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(st.tuples(TEXT, children), max_size=3).map(lambda m: Obj(tuple(m)))), max_leaves=leaves)


@st.composite
def _nested(draw: st.DrawFn) -> Any:
    """A value wrapped in arrays and objects, sometimes right at Jackson's nesting limit."""
    inner = draw(SMALL_VALUES)
    rnd = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.sampled_from([1, 2, 3, 997, 998, 999, 1000]))):
        inner = [inner] if rnd.random() < 0.5 else Obj((("n", inner),))
    return inner


NUMBERS = _numbers()
SMALL_VALUES = _json_values(2)
OTHER_VALUES = _json_values(3)
_PRESENT = weighted((15, st.just(True)), (1, st.just(False)))


def _members(fields: list[tuple[str, st.SearchStrategy[Any]]]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    """The fields (each sometimes missing), a few unknown or repeated ones, in any order."""
    extra = st.tuples(weighted((3, TEXT), (1, st.sampled_from([name for name, _ in fields]))),
                      weighted((6, OTHER_VALUES), (1, _nested())))
    extras = weighted((3, st.just([])), (1, st.lists(extra, min_size=1, max_size=2)))

    @st.composite
    def members(draw: st.DrawFn) -> list[tuple[str, Any]]:
        found = [(name, draw(strategy)) for name, strategy in fields if draw(_PRESENT)]
        return list(draw(st.permutations(found + draw(extras))))
    return members()


_TEXT_OR_NULL = weighted((4, TEXT), (3, st.none()), (1, OTHER_VALUES))
# The members of a status value: the four fields, mostly valid, sometimes in any other form.
STATUS_FIELDS = _members([
    ("state", weighted((8, st.sampled_from([state.value for state in State])),
                       (1, st.sampled_from(["running", "", " RUNNING", "RUNNING "])), (1, TEXT), (1, OTHER_VALUES))),
    ("trace", _TEXT_OR_NULL),
    ("worker_id", _TEXT_OR_NULL),
    ("generation", weighted((6, st.integers(-(2**31), 2**31 - 1).map(lambda i: Raw(str(i)))), (3, NUMBERS),
                            (1, OTHER_VALUES))),
])
_NAME = weighted((6, TEXT), (2, st.sampled_from(["", "a:b", ":", "t"])), (1, OTHER_VALUES))
_TOPIC = _members([
    ("name", _NAME),
    ("connector", _NAME),
    ("task", weighted((6, st.integers(-(2**33), 2**33).map(lambda i: Raw(str(i)))), (3, NUMBERS), (1, OTHER_VALUES))),
    ("discoverTimestamp", weighted((6, st.integers(-(2**65), 2**65).map(lambda i: Raw(str(i)))), (3, NUMBERS),
                                   (1, OTHER_VALUES))),
])
# The members of a topic status value: {"topic": {...}}, its fields mostly valid.
TOPIC_FIELDS = _members([("topic", weighted((12, _TOPIC.map(lambda m: Obj(tuple(m)))), (1, OTHER_VALUES)))])
# The members of a connector configuration record: {"properties": {...}}, mostly strings (Connect writes only
# strings and nulls), some values of any other kind, numbers in every spelling among them.
_PROPERTY = st.tuples(TEXT, weighted((6, TEXT), (2, st.none()), (2, NUMBERS), (2, OTHER_VALUES), (1, _nested())))
CONFIG_FIELDS = _members([("properties", weighted((12, st.lists(_PROPERTY, max_size=4).map(lambda m: Obj(tuple(m)))),
                                                  (1, OTHER_VALUES)))])


def render(value: Any, rnd: random.Random, utf8: bool) -> list[str | bytes]:
    """JSON text with random whitespace and escapes; Odd bytes only in UTF-8 output. Iterative: values may
    nest 1000 deep."""
    parts: list[str | bytes] = []
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, _Literal):
            parts.append(item.text)
            continue
        if item is _SPACE:
            parts.append(_space(rnd))
            continue
        parts.append(_space(rnd))
        todo.append(_SPACE)
        if isinstance(item, Obj):
            children: list[Any] = [_Literal("{")]
            for i, (name, member) in enumerate(item.members):
                children += [_Literal("," * (i > 0) + _space(rnd) + _string(name, rnd) + _space(rnd) + ":"), member]
            todo.extend(reversed([*children, _Literal(_space(rnd) + "}")]))
        elif isinstance(item, list):
            children = [_Literal("[")]
            for i, element in enumerate(item):
                children += [_Literal("," * (i > 0)), element]
            todo.extend(reversed([*children, _Literal(_space(rnd) + "]")]))
        elif isinstance(item, str):
            parts.append(_string(item, rnd))
        elif isinstance(item, Raw):
            parts.append(item.text)
        elif isinstance(item, Odd):
            parts.extend(['"', item.data, '"'] if utf8 else ['"?"'])
        else:
            parts.append({None: "null", True: "true", False: "false"}[item])
    return parts


@dataclass(frozen=True)
class _Literal:
    text: str


_SPACE = object()
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\r": "\\r",
                  "/": "\\/"}


def _space(rnd: random.Random) -> str:
    return "".join(rnd.choice(" \t\n\r") for _ in range(rnd.randint(1, 3))) if rnd.random() < 0.2 else ""


def _string(text: str, rnd: random.Random) -> str:
    """A JSON string: what must be escaped is, the rest sometimes (short forms, \\u with either case)."""
    escape_share = max(0.0, rnd.random() * 2 - 1)
    out = ['"']
    for char in text:
        if char in '"\\' or ord(char) < 0x20 or rnd.random() < escape_share:
            short = _SHORT_ESCAPES.get(char)
            if short is not None and rnd.random() < 0.5:
                out.append(short)
                continue
            units = char.encode("utf-16-be", "surrogatepass")
            for i in range(0, len(units), 2):
                hexes = f"{units[i]:02x}{units[i + 1]:02x}"
                out.append("\\u" + (hexes.upper() if rnd.random() < 0.5 else hexes))
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def encode(parts: list[str | bytes], encoding: str) -> bytes:
    """The rendered text in one of the encodings Jackson detects (lone surrogates passed through)."""
    base = encoding.removesuffix("-bom")
    body = b"".join(part if isinstance(part, bytes) else part.encode(base, "surrogatepass") for part in parts)
    return (BOMS[base] if encoding.endswith("-bom") else b"") + body


_DAMAGE = weighted((12, st.just("none")), (1, st.sampled_from(["truncate", "insert", "delete", "replace", "trailing"])))
_INSERTED = st.one_of(st.binary(min_size=1, max_size=4), st.sampled_from(ODD_UTF8))
_TRAILING = st.one_of(st.binary(max_size=8), st.sampled_from(ODD_UTF8), st.just(b'{"state":'))
_ENCODING = weighted((3, st.just("utf-8")), (1, st.sampled_from(ENCODINGS)))


def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """The bytes, sometimes damaged: truncated, cut, with bytes inserted or replaced, or trailing data."""
    kind = draw(_DAMAGE)
    if kind == "none":
        return data
    at = draw(st.integers(0, len(data)))
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + draw(_INSERTED) + data[at:]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 4)):]
    if kind == "replace":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data + draw(_TRAILING)


def record_values(fields: st.SearchStrategy[list[tuple[str, Any]]]) -> st.SearchStrategy[bytes]:
    """Record values: generated members, rendered, encoded, maybe damaged."""
    roots = weighted((19, fields.map(lambda m: Obj(tuple(m)))), (1, OTHER_VALUES))

    @st.composite
    def values(draw: st.DrawFn) -> bytes:
        encoding = draw(_ENCODING)
        parts = render(draw(roots), random.Random(draw(st.integers(0, 2**32))), utf8=encoding == "utf-8")
        return _damaged(draw, encode(parts, encoding))
    return values()
