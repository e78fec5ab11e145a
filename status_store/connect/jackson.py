"""JSON bytes read exactly as a Connect worker reads them (pure).

Connect's ``JsonDeserializer`` is Jackson's ``ObjectMapper.readTree`` with leading zeros allowed
(``ALLOW_LEADING_ZEROS_FOR_NUMBERS``) and fractions read as ``BigDecimal``. What Jackson does
beyond strict JSON, and this module reproduces:

- the encoding is detected from the first bytes: UTF-8 (a BOM is skipped), UTF-16 or UTF-32, big
  or little endian, with or without a BOM. UTF-8 is decoded leniently inside strings (overlong
  forms, encoded surrogates and code points above U+10FFFF are accepted, as Jackson's decoder
  does); UTF-16 is decoded by Java's decoder, which replaces malformed input with U+FFFD; UTF-32 by
  Jackson's own reader, which fails on code points above U+10FFFF, but only in the 4000-character
  chunks the parser loads;
- numbers may have leading zeros (``007`` is 7);
- one value is read and whatever follows it is ignored, but for the character right after a literal
  (``true``, ``false``, ``null``), which must not continue it: a letter, a digit, ``_`` or another character
  Java takes for part of an identifier (in UTF-8 input, any non-ASCII byte) is an unrecognized token;
- UTF-32 input that ends with 1-3 bytes of an incomplete character fails once the parser asks for more than the
  complete characters (Jackson's UTF32Reader: "Unexpected EOF in the middle of a 4-byte UTF-32 char"), so a
  value that ends before them is read;
- ``StreamReadConstraints``: at most 1000 digits in a number, 1000 levels of nesting, 50,000
  bytes (UTF-8 input) or characters (UTF-16/32 input) in a property name, 20,000,000 characters
  in a string; a fraction must fit a ``BigDecimal`` (an exponent within 32 bits);
- strings are Java strings: lone surrogates (``"\\ud800"``) are kept.

Strings come back as Python ``str`` holding what the Java string holds: surrogate pairs become one
code point, lone surrogates stay. Well-formed UTF-8 without those extensions takes the fast path
(Python's C decoder plus the limits); anything else is read by a small parser that follows
Jackson's rules step by step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .java_text import (
    ByteOrder,
    JsonReadError,
    detect_encoding,
    jackson_utf32,
    java_identifier_part,
    java_string,
    java_utf16,
)

MAX_NUMBER_LENGTH = 1000
MAX_NESTING_DEPTH = 1000
MAX_NAME_LENGTH = 50_000
MAX_STRING_LENGTH = 20_000_000
# The ReaderBasedJsonParser (UTF-16/32 input) loads this many characters at a time.
_CHUNK = 4000
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_WHITESPACE = frozenset(b" \t\n\r")
_ESCAPES = {ord('"'): 0x22, ord("\\"): 0x5C, ord("/"): 0x2F, ord("b"): 0x08, ord("f"): 0x0C, ord("n"): 0x0A,
            ord("r"): 0x0D, ord("t"): 0x09}
_HEX = {c: int(chr(c), 16) for c in b"0123456789abcdefABCDEF"}
_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_FLOAT = re.compile(r"-?(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?")


class NoContent(JsonReadError):
    """Bytes that hold no JSON value at all (nothing, or whitespace): Jackson's ``readTree`` answers a missing
    node, which Connect's converter hands over as null."""


def read_value(data: bytes) -> Any:
    """The first JSON value in ``data`` as Connect's JsonDeserializer reads it; JsonReadError otherwise.

    Objects are dicts (a repeated name keeps its last value), arrays lists, integers ints,
    fractions floats.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _Parser.for_bytes(data).read()
    size = len(data)
    if 0 in data[:2] or (size > MAX_NESTING_DEPTH and data.count(b"{") + data.count(b"[") > MAX_NESTING_DEPTH):
        # UTF-16 or UTF-32 input, or a value that may nest too deep (perhaps in a member that a repeated
        # name replaced, which the fast path's result no longer shows): the parser follows Jackson there.
        return _Parser.for_bytes(data).read()
    # The limits a value of this size can reach decide the decoder: the fewer checks, the faster. No number
    # can exceed 1000 digits in 1000 bytes, and no name 50,000 bytes (as Jackson counts) in 50,000 bytes.
    decoder = _SHORT if size <= MAX_NUMBER_LENGTH else _MEDIUM if size <= MAX_NAME_LENGTH else _LONG
    start = 0 if text[:1] == "{" else len(text) - len(text.lstrip(" \t\r\n"))
    try:
        value, end = decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        # Leading zeros, a BOM, a name that may be too long, or not JSON at all: Jackson's rules decide.
        return _Parser.for_bytes(data).read()
    if value is None or isinstance(value, bool):
        # A literal at the root: the character after it may continue it (``nullx``), as Jackson checks.
        return _Parser.for_bytes(data).read()
    if size > MAX_STRING_LENGTH:
        _check_string_lengths(text[:end])
    return value


# ------------------------------------------------------------------------------------ the fast path


def _fast_int(text: str) -> int:
    if len(text) - text.startswith("-") > MAX_NUMBER_LENGTH:
        raise JsonReadError(f"a number longer than {MAX_NUMBER_LENGTH} digits")
    return int(text)


def _fast_float(text: str) -> float:
    match = _FLOAT.fullmatch(text)
    assert match is not None  # the JSON scanner matched the same grammar
    integer, fraction, exponent = match.groups()
    _check_fraction(len(integer), fraction, exponent)
    return float(text)


def _reject_constant(name: str) -> None:
    # Jackson rejects NaN and Infinity (ALLOW_NON_NUMERIC_NUMBERS is off); Python would accept them.
    raise JsonReadError(f"{name} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for name, _ in pairs:
        if len(name) * 6 > MAX_NAME_LENGTH:
            # Perhaps more than 50,000 UTF-8 bytes as Jackson counts them (an escape as the bytes of what it
            # escapes): only the parser counts exactly.
            raise JsonReadError("a property name that may be too long")
    return dict(pairs)


def _check_string_lengths(text: str) -> None:
    """Jackson's limit on every string the value holds (also one a repeated name replaced), in UTF-16 units."""
    for token in _STRING_TOKEN.finditer(text):
        if len(token.group()) - 2 > MAX_STRING_LENGTH:
            units = len(json.loads(token.group()).encode("utf-16-le", "surrogatepass")) // 2
            if units > MAX_STRING_LENGTH:
                raise JsonReadError(f"a string longer than {MAX_STRING_LENGTH} characters")


_SHORT = json.JSONDecoder(parse_float=_fast_float, parse_constant=_reject_constant)
_MEDIUM = json.JSONDecoder(parse_int=_fast_int, parse_float=_fast_float, parse_constant=_reject_constant)
_LONG = json.JSONDecoder(parse_int=_fast_int, parse_float=_fast_float, parse_constant=_reject_constant,
                         object_pairs_hook=_object)


def _check_fraction(integer_digits: int, fraction: str | None, exponent: str | None, slack: int = 0) -> None:
    """A fraction Jackson reads: at most 1000 digits in all (``slack`` more in some of Jackson's paths), and a
    valid ``java.math.BigDecimal``."""
    fraction = fraction or ""
    exponent_digits = len(exponent.lstrip("+-")) if exponent else 0
    if integer_digits + len(fraction) + exponent_digits - slack > MAX_NUMBER_LENGTH:
        raise JsonReadError(f"a number longer than {MAX_NUMBER_LENGTH} digits")
    power = int(exponent) if exponent else 0
    if not _INT32_MIN <= power <= _INT32_MAX or not _INT32_MIN <= len(fraction) - power <= _INT32_MAX:
        raise JsonReadError("a number beyond BigDecimal's range (exponent or scale overflow)")


# ------------------------------------------------------------------------------------ Jackson's rules


class _Parser:
    """Jackson's parser over UTF-8 bytes (UTF8StreamJsonParser) or over UTF-16 code units
    (ReaderBasedJsonParser), building the tree as JsonNodeDeserializer does: without recursion, so the
    nesting limit is Jackson's, not Python's."""

    def __init__(self, data: Sequence[int], utf8: bool) -> None:
        self.data, self.utf8, self.pos, self.depth = data, utf8, 0, 0

    @classmethod
    def for_bytes(cls, data: bytes) -> _Parser:
        encoding, start = detect_encoding(data)
        if encoding == "utf-8":
            return cls(data[start:], utf8=True)
        byteorder: ByteOrder = "big" if encoding.endswith("be") else "little"
        if encoding.startswith("utf-16"):
            return cls(java_utf16(data[start:], byteorder), utf8=False)
        return _Utf32Parser(*jackson_utf32(data[start:], byteorder))

    def read(self) -> Any:
        """The first value; what follows it is never looked at."""
        if self._skip_whitespace() is None:
            raise NoContent("no content")
        open_containers: list[dict[str, Any] | list[Any]] = []
        names: list[str] = []  # the name whose value is being read, for each open object
        while True:
            value, opened = self._value_or_container()
            if opened is not None:
                open_containers.append(opened)
                if isinstance(opened, dict):
                    names.append(self._name())
                continue
            while open_containers:
                parent = open_containers[-1]
                if isinstance(parent, dict):
                    parent[names[-1]] = value
                else:
                    parent.append(value)
                after = self._skip_whitespace()
                self.pos += 1
                if after == 0x2C:  # ,
                    if isinstance(parent, dict):
                        names[-1] = self._name()
                    else:
                        self._skip_whitespace()
                    break
                if after != (0x7D if isinstance(parent, dict) else 0x5D):  # } ]
                    raise self.fail("expected ',' or the end of the object or array")
                value = open_containers.pop()
                if isinstance(value, dict):
                    names.pop()
                self.depth -= 1
            else:
                return value

    def fail(self, why: str) -> JsonReadError:
        return JsonReadError(f"{why} at {'byte' if self.utf8 else 'character'} {self.pos}")

    def _next(self) -> int:
        if self.pos >= len(self.data):
            raise self.fail("unexpected end of input")
        unit = self.data[self.pos]
        self.pos += 1
        return unit

    def _peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def _skip_whitespace(self) -> int | None:
        data, pos = self.data, self.pos
        while pos < len(data) and data[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos
        return data[pos] if pos < len(data) else None

    def _value_or_container(self) -> tuple[Any, dict[str, Any] | list[Any] | None]:
        """A complete value, or a container just opened (with its first element still to read)."""
        first = self._next()
        if first in (0x7B, 0x5B):  # { [
            self.depth += 1
            if self.depth > MAX_NESTING_DEPTH:
                raise self.fail(f"nested deeper than {MAX_NESTING_DEPTH} levels")
            empty: dict[str, Any] | list[Any] = {} if first == 0x7B else []
            if self._skip_whitespace() == first + 2:  # } ]
                self.pos += 1
                self.depth -= 1
                return empty, None
            return None, empty
        if first == 0x22:  # "
            return self._string(name=False), None
        if first == 0x2D or 0x30 <= first <= 0x39:  # - or a digit
            return self._number(first), None
        for literal, value in ((b"true", True), (b"false", False), (b"null", None)):
            if first == literal[0]:
                for expected in literal[1:]:
                    if self._next() != expected:
                        raise self.fail(f"not {literal.decode()}")
                following = self._peek()
                if following is not None and following >= 0x30 and following not in (0x5D, 0x7D) and (
                        (self.utf8 and following >= 0x80) or java_identifier_part(following)):
                    # Jackson's _matchToken2/_checkMatchEnd; in UTF-8 input it decodes the byte as a character's
                    # second byte, which a lead byte never is.
                    raise self.fail(f"an unrecognized token: {literal.decode()} followed by {following:#x}")
                return value, None
        raise self.fail(f"unexpected character {first:#x}")

    def _name(self) -> str:
        """A property name and its colon; the value follows."""
        if self._skip_whitespace() != 0x22:
            raise self.fail("a property name must be a quoted string")
        self.pos += 1
        name = self._string(name=True)
        if self._skip_whitespace() != 0x3A:  # :
            raise self.fail("expected ':'")
        self.pos += 1
        self._skip_whitespace()
        return name

    def _string(self, name: bool) -> str:
        units: list[int] = []
        size = 0  # of a name: UTF-8 bytes (as Jackson counts them in UTF-8 input) or characters
        while True:
            unit = self._next()
            if unit == 0x22:
                break
            if unit < 0x20:
                raise self.fail("an unescaped control character in a string")
            if unit == 0x5C:
                unit = self._escape()
                units.append(unit)
                size += 1 if not self.utf8 or unit < 0x80 else 2 if unit < 0x800 else 3
            elif unit >= 0x80 and self.utf8:
                start = self.pos - 1
                units.extend(self._multibyte(unit, name))
                size += self.pos - start
            else:
                units.append(unit)
                size += 1
        if name and size > MAX_NAME_LENGTH:
            raise self.fail(f"a property name longer than {MAX_NAME_LENGTH}")
        if not name and len(units) > MAX_STRING_LENGTH:
            raise self.fail(f"a string longer than {MAX_STRING_LENGTH} characters")
        return java_string(units)

    def _escape(self) -> int:
        kind = self._next()
        if kind == 0x75:  # u
            code = 0
            for _ in range(4):
                # CharTypes.charToHex looks at the low byte only: in UTF-16 input, U+0130 is the digit 0.
                digit = _HEX.get(self._next() & 0xFF)
                if digit is None:
                    raise self.fail("a \\u escape needs 4 hex digits")
                code = code << 4 | digit
            return code
        unit = _ESCAPES.get(kind)
        if unit is None:
            raise self.fail("an unrecognized escape")
        return unit

    def _multibyte(self, lead: int, name: bool) -> tuple[int, ...]:
        """Jackson's lenient UTF-8: the lead byte says how many continuation bytes follow (each 10xxxxxx); the
        code point is not checked further. A 4-byte form becomes two units (different arithmetic for names
        and for values, which only matters for overlong forms)."""
        if lead & 0xE0 == 0xC0:
            count, code = 1, lead & 0x1F
        elif lead & 0xF0 == 0xE0:
            count, code = 2, lead & 0x0F
        elif lead & 0xF8 == 0xF0:
            count, code = 3, lead & 0x07
        else:
            raise self.fail(f"invalid UTF-8 start byte {lead:#x}")
        for _ in range(count):
            following = self._next()
            if following & 0xC0 != 0x80:
                raise self.fail(f"invalid UTF-8 continuation byte {following:#x}")
            code = code << 6 | following & 0x3F
        if count < 3:
            return (code,)
        code -= 0x10000
        high = (0xD800 + (code >> 10)) if name else (0xD800 | (code >> 10))
        return high & 0xFFFF, 0xDC00 | (code & 0x3FF)

    def _digits(self) -> str:
        start = self.pos
        while (unit := self._peek()) is not None and 0x30 <= unit <= 0x39:
            self.pos += 1
        return "".join(map(chr, self.data[start:self.pos]))

    def _number(self, first: int) -> int | float:
        start = self.pos - 1
        negative = first == 0x2D
        if negative:
            first = self._next()
            if not 0x30 <= first <= 0x39:
                raise self.fail("a '-' must be followed by a digit")
        integer = chr(first) + self._digits()
        # ALLOW_LEADING_ZEROS_FOR_NUMBERS: zeros before other digits are skipped (and not counted).
        integer = integer.lstrip("0") or "0"
        fraction, exponent = None, None
        if self._peek() == 0x2E:  # .
            self.pos += 1
            fraction = self._digits()
            if not fraction:
                raise self.fail("a decimal point must be followed by a digit")
        if self._peek() in (0x65, 0x45):  # e E
            self.pos += 1
            sign = "-" if self._peek() == 0x2D else ""
            if self._peek() in (0x2B, 0x2D):
                self.pos += 1
            digits = self._digits()
            if not digits:
                raise self.fail("an exponent must have a digit")
            exponent = sign + digits
        text = ("-" if negative else "") + integer
        if fraction is None and exponent is None:
            if len(integer) > MAX_NUMBER_LENGTH:
                raise self.fail(f"a number longer than {MAX_NUMBER_LENGTH} digits")
            return int(text)
        # Jackson's ReaderBasedJsonParser re-reads a number that starts with 0 or ends beyond the loaded chunk,
        # and that path counts a missing fraction part or exponent as -1 digits: one digit more is allowed.
        slack = (fraction is None or exponent is None) and self._reread(start, first)
        _check_fraction(len(integer), fraction, exponent, int(slack))
        return float(f"{text}.{fraction or 0}e{exponent or 0}")

    def _reread(self, start: int, first_digit: int) -> bool:
        return not self.utf8 and (first_digit == 0x30 or self.pos >= (start // _CHUNK + 1) * _CHUNK)


class _Utf32Parser(_Parser):
    """UTF-32 input: Jackson's UTF32Reader fails on a code point above U+10FFFF when the parser loads the
    4000-character chunk holding it, so such a code point after the value's chunk goes unnoticed."""

    def __init__(self, units: list[int], invalid_at: int | None, tail: int) -> None:
        super().__init__(units, utf8=False)
        self.invalid_at = invalid_at
        self.tail = tail

    def _at_end(self) -> None:
        """The parser asks for more than the complete characters: the reader fails on an incomplete one."""
        if self.tail:
            raise JsonReadError(f"an incomplete UTF-32 character ({self.tail} bytes) at character {len(self.data)}")

    def _next(self) -> int:
        if self.pos >= len(self.data):
            self._at_end()
        return super()._next()

    def _peek(self) -> int | None:
        if self.pos >= len(self.data):
            self._at_end()
        return super()._peek()

    def _skip_whitespace(self) -> int | None:
        found = super()._skip_whitespace()
        if found is None:
            self._at_end()
        return found

    def fail(self, why: str) -> JsonReadError:
        if self.invalid_at is not None and self.pos >= self.invalid_at:
            why = "a UTF-32 code point above U+10FFFF"
        return super().fail(why)

    def read(self) -> Any:
        value = super().read()
        loaded = -(-self.pos // _CHUNK) * _CHUNK
        if self.invalid_at is not None and self.invalid_at < loaded:
            raise JsonReadError(f"a UTF-32 code point above U+10FFFF at character {self.invalid_at}")
        return value
