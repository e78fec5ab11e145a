"""A text/event-stream read as events, bounded: what ``status-store watch`` reads from ``GET /events``. Lines end
by CRLF, LF or a CR alone, comment lines are skipped, and a line, or an event's lines together, longer than
``MAX_EVENT_BYTES`` is ``TooLarge``, whatever the server sends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, NamedTuple

# A line of the stream, or an event's lines together, at most.
MAX_EVENT_BYTES = 1 << 20


class TooLarge(ValueError):
    """More data than the bound for it."""


class ServerSentEvent(NamedTuple):
    """One event of a text/event-stream: its id field (None without one), type and data; ``problem`` says why it
    cannot be read (a line that is not UTF-8)."""

    id: str | None
    name: str
    data: str
    problem: str | None


def server_sent_events(stream: IO[bytes], on_line: Callable[[], None] | None = None) -> Iterator[ServerSentEvent]:
    """The events of a text/event-stream (comment lines skipped), its lines ended by CRLF, LF or a CR alone, as
    the format says. An id field holding NUL is ignored, as the format says. ``TooLarge`` for a line, or an
    event's lines together, longer than ``MAX_EVENT_BYTES``. ``on_line``: called after each line read."""
    fields: dict[str, str] = {}
    problem: str | None = None
    size = 0
    for raw in _lines(stream, on_line):
        size += len(raw)
        if size > MAX_EVENT_BYTES:
            raise TooLarge(f"an event longer than {MAX_EVENT_BYTES:,} bytes")
        if not raw:
            size = 0
            if "data" in fields or problem is not None:
                yield ServerSentEvent(fields.get("id"), fields.get("event", "message"), fields.get("data", ""), problem)
            fields, problem = {}, None
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            problem = "a line of it is not UTF-8"
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data" and "data" in fields:
            fields["data"] += "\n" + value
        elif name != "id" or "\0" not in value:
            fields[name] = value


def _lines(stream: IO[bytes], on_line: Callable[[], None] | None = None) -> Iterator[bytes]:
    """The lines of a stream read line by line (up to each LF, at most ``MAX_EVENT_BYTES`` each: ``TooLarge`` for a
    longer one): CRLF, LF or a CR alone ends a line."""
    while raw := stream.readline(MAX_EVENT_BYTES + 1):
        if on_line is not None:
            on_line()
        if len(raw) > MAX_EVENT_BYTES:
            raise TooLarge(f"a line longer than {MAX_EVENT_BYTES:,} bytes")
        line = raw[:-1].removesuffix(b"\r") if raw.endswith(b"\n") else raw.removesuffix(b"\r")
        yield from line.split(b"\r")
