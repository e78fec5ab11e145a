"""Text as Jackson and Java read it (pure): the encoding Jackson detects from a value's first bytes, UTF-16 as Java's
decoder reads it, UTF-32 as Jackson's own reader does, Java's strings and identifier characters. ``jackson`` reads
JSON with them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Literal

ByteOrder = Literal["big", "little"]


class JsonReadError(ValueError):
    """Bytes Jackson would not read as one JSON value."""


def detect_encoding(data: bytes) -> tuple[str, int]:
    """The encoding Jackson's ByteSourceJsonBootstrapper picks, and where the content starts (after a BOM)."""
    if len(data) >= 4:
        quad = int.from_bytes(data[:4], "big")
        if quad == 0x0000FEFF:
            return "utf-32-be", 4
        if quad == 0xFFFE0000:
            return "utf-32-le", 4
        if quad in (0x0000FFFE, 0xFEFF0000):
            raise JsonReadError("an unsupported UCS-4 byte order (2143 or 3412)")
        if quad >> 16 == 0xFEFF:
            return "utf-16-be", 2
        if quad >> 16 == 0xFFFE:
            return "utf-16-le", 2
        if quad >> 8 == 0xEFBBBF:
            return "utf-8", 3
        if quad >> 8 == 0:
            return "utf-32-be", 0
        if quad & 0x00FFFFFF == 0:
            return "utf-32-le", 0
        if quad & 0xFF00FFFF == 0 or quad & 0xFFFF00FF == 0:
            raise JsonReadError("an unsupported UCS-4 byte order (2143 or 3412)")
        return _detect_utf16(quad >> 16)
    if len(data) >= 2:
        return _detect_utf16(int.from_bytes(data[:2], "big"))
    return "utf-8", 0


def _detect_utf16(first_two: int) -> tuple[str, int]:
    if first_two & 0xFF00 == 0:
        return "utf-16-be", 0
    if first_two & 0x00FF == 0:
        return "utf-16-le", 0
    return "utf-8", 0


def java_utf16(data: bytes, byteorder: ByteOrder) -> list[int]:
    """UTF-16 decoded by Java's decoder with malformed input replaced (as ``new String(bytes, "UTF-16BE")``
    and ``InputStreamReader`` do): a lone low surrogate, or a high surrogate not followed by a low one (both
    units dropped), becomes one U+FFFD; so do leftover bytes at the end."""
    units: list[int] = []
    i, n = 0, len(data)
    while n - i >= 2:
        unit = int.from_bytes(data[i:i + 2], byteorder)
        if 0xD800 <= unit <= 0xDBFF:
            if n - i < 4:
                break
            low = int.from_bytes(data[i + 2:i + 4], byteorder)
            units.extend((unit, low) if 0xDC00 <= low <= 0xDFFF else (0xFFFD,))
            i += 4
            continue
        units.append(0xFFFD if 0xDC00 <= unit <= 0xDFFF else unit)
        i += 2
    if i < n:
        units.append(0xFFFD)
    return units


def jackson_utf32(data: bytes, byteorder: ByteOrder) -> tuple[list[int], int | None, int]:
    """UTF-32 decoded by Jackson's UTF32Reader: the units before the first code point above U+10FFFF, that code
    point's unit position (None when there is none), and how many bytes of an incomplete character end the input
    (0-3; 0 when such a code point comes first). Surrogate code points pass as they are."""
    units: list[int] = []
    for i in range(0, len(data) - 3, 4):
        code = int.from_bytes(data[i:i + 4], byteorder)
        if code > 0x10FFFF:
            return units, len(units), 0
        if code > 0xFFFF:
            code -= 0x10000
            units.extend((0xD800 + (code >> 10), 0xDC00 | (code & 0x3FF)))
        else:
            units.append(code)
    return units, None, len(data) % 4


# Java's Character.isIdentifierIgnorable: these controls, and the format characters (Cf).
_IGNORABLE_CONTROLS = (range(0x00, 0x09), range(0x0E, 0x1C), range(0x7F, 0xA0))
_IDENTIFIER_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Sc", "Pc", "Nd", "Nl", "Mc", "Mn", "Cf"})


def java_identifier_part(unit: int) -> bool:
    """Java's ``Character.isJavaIdentifierPart`` of a UTF-16 code unit (a surrogate is not one)."""
    if any(unit in controls for controls in _IGNORABLE_CONTROLS):
        return True
    if 0xD800 <= unit <= 0xDFFF:
        return False
    return unicodedata.category(chr(unit)) in _IDENTIFIER_CATEGORIES


def java_string(units: Sequence[int]) -> str:
    """A Java string (UTF-16 code units) as a Python str: pairs combined, lone surrogates kept."""
    return b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")
