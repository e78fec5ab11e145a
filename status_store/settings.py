"""Declaring configuration keys: one declaration per key (pure).

A configuration dataclass declares each field with ``setting(key, default, parse, doc, ...)``: the field's
type for the code, its key, default, rule and documentation for everything else. From those declarations
come the validation (``parse_values``), the construction of the dataclasses (``construct``), the reference
(docs/configuration.md) and the commented example file (config/status-store.properties).

A parser takes the key and the raw text and returns the value or raises ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import textwrap
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import ConfigError

Parser = Callable[[str, str], Any]
E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Setting:
    """One configuration key: its name, default, rule and documentation; ``example``, a value to show for a key
    that is unset by default (commented out in the example file, unless ``set_in_example``); ``section``, the
    example file's heading it starts."""

    key: str
    default: Any
    parse: Parser
    doc: str
    example: str | None = None
    section: str | None = None
    set_in_example: bool = False


def setting(key: str, default: Any, parse: Parser, doc: str, example: str | None = None,
            section: str | None = None, set_in_example: bool = False) -> Any:
    """A dataclass field declared by its configuration key."""
    declared = Setting(key, default, parse, doc, example, section, set_in_example)
    if isinstance(default, dict):
        return field(default_factory=dict, metadata={"setting": declared})
    return field(default=default, metadata={"setting": declared})


def _nested(cls: type) -> dict[str, type]:
    """The fields of a dataclass whose type is a dataclass too, by name."""
    hints = typing.get_type_hints(cls)
    return {name: hint for name, hint in hints.items() if isinstance(hint, type) and dataclasses.is_dataclass(hint)}


def declared(cls: type) -> Iterator[Setting]:
    """Every setting of a configuration dataclass and of the dataclasses in its fields, in declaration order."""
    nested = _nested(cls)
    for f in dataclasses.fields(cls):
        found = f.metadata.get("setting")
        if found is not None:
            yield found
        elif f.name in nested:
            yield from declared(nested[f.name])


def construct(cls: type[T], values: Mapping[str, Any], **others: Any) -> T:
    """An instance of a configuration dataclass from parsed values by key (nested dataclasses too); ``others``
    gives the fields no key declares."""
    nested = _nested(cls)
    arguments: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        found = f.metadata.get("setting")
        if found is not None:
            arguments[f.name] = values[found.key]
        elif f.name in nested:
            arguments[f.name] = construct(nested[f.name], values)
    return cls(**arguments, **others)


# ----------------------------------------------------------------------------- parsers


def integer(low: int, high: int, extra: tuple[int, ...] = ()) -> Parser:
    """A decimal integer in [low, high], or one of ``extra``."""

    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip(), 10)
        except ValueError:
            raise ConfigError(key, raw, "not an integer") from None
        if not (low <= value <= high or value in extra):
            allowed = f"[{low}, {high}]" + "".join(f" or {e}" for e in extra)
            raise ConfigError(key, raw, f"must be in {allowed}")
        return value

    return parse


def number(low: float, high: float) -> Parser:
    """A finite number in [low, high]."""

    def parse(key: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, "not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(key, raw, f"must be a number in [{low}, {high}]")
        return value

    return parse


def choice(kind: type[E]) -> Parser:
    """One of an enum's values (case-insensitive)."""

    def parse(key: str, raw: str) -> E:
        try:
            return kind(raw.strip().lower())
        except ValueError:
            raise ConfigError(key, raw, f"must be one of {', '.join(str(m.value) for m in kind)}") from None

    return parse


def text(key: str, raw: str) -> str:
    """Any text but empty (surrounding blanks dropped)."""
    value = raw.strip()
    if not value:
        raise ConfigError(key, raw, "must not be empty")
    return value


def boolean(key: str, raw: str) -> bool:
    """true or false."""
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, raw, "must be true or false")
    return value == "true"


def topic_name(key: str, raw: str) -> str:
    """A legal Kafka topic name."""
    value = text(key, raw)
    if value in {".", ".."} or len(value) > 249 or not re.fullmatch(r"[A-Za-z0-9._-]+", value):
        raise ConfigError(key, raw, "not a legal Kafka topic name (1-249 of [a-zA-Z0-9._-], not '.' or '..')")
    return value


# ----------------------------------------------------------------------------- documents


def comment(doc: str, width: int = 100) -> list[str]:
    """Documentation as ``#`` comment lines."""
    return [f"# {line}" for line in textwrap.wrap(doc, width - 2, break_on_hyphens=False)]


def shown(value: Any) -> str:
    """A default as a properties value (an enum by its value, a mapping as ``k:v,...``, a tuple as ``a,b``, a regular
    expression as its text)."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, re.Pattern):
        return str(value.pattern)
    return str(value)


def example_lines(declared_settings: Iterator[Setting], notes: Mapping[str, str]) -> list[str]:
    """The commented example file's settings: each section's heading, each key's documentation and its default
    (or example, commented out), and after a section, its note (by section heading)."""
    lines: list[str] = []
    section: str | None = None
    for item in declared_settings:
        if item.section is not None:
            if section is not None and section in notes:
                lines += ["", *comment(notes[section])]
            section = item.section
            lines += ["", f"# {'-' * 64} {section}"]
        lines += ["", *comment(item.doc)]
        if item.default is not None and item.default != {}:
            lines.append(f"{item.key}={shown(item.default)}")
        elif item.example is not None:
            lines.append(f"{'' if item.set_in_example else '#'}{item.key}={item.example}")
    if section is not None and section in notes:
        lines += ["", *comment(notes[section])]
    return lines
