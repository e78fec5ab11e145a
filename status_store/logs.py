"""Log lines that a client cannot forge or multiply.

- ``EscapingFormatter`` escapes the characters that let a name from a request forge or hide log
  text: control characters (a newline starts a fake line), the Unicode line and paragraph
  separators (U+2028, U+2029) and the bidirectional controls (U+202E shows text reversed), and lone
  surrogates (no encoding can write them). ``escape_text`` does the same for the command line's output
  (``client.py``): a terminal escape sequence in a name from the status topic stays text.
- ``JsonFormatter`` writes one JSON object per line (``--log-format json``); JSON escapes every such
  character itself.
- ``RateLimit`` lets a line that a client can trigger at will (a refused token, a full file
  descriptor table) through at most once per interval, and says how many were held back.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable

# C0 and C1 controls and DEL; line and paragraph separators; bidirectional marks, embeddings,
# overrides and isolates; lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escape_text(text: str) -> str:
    """``text`` with every character that could forge, hide or break log or terminal text written as
    ``\\uXXXX``."""
    if text.isascii() and text.isprintable():
        return text
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class EscapingFormatter(logging.Formatter):
    """A formatter that escapes the message (not the traceback, whose line breaks are its own)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_text(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)

    def converter(self, seconds: float | None) -> time.struct_time:
        return time.gmtime(seconds)


class RateLimit:
    """At most one line per ``interval_s``: ``take()`` answers how many lines were held back since the
    last one let through, or None when this line is held back too."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self._clock = interval_s, clock
        self._next = float("-inf")
        self._held = 0

    def take(self) -> int | None:
        now = self._clock()
        if now < self._next:
            self._held += 1
            return None
        held, self._held, self._next = self._held, 0, now + self.interval_s
        return held

    def log(self, logger: logging.Logger, level: int, message: str, *args: object) -> None:
        """Log ``message`` unless the limit holds it back; a line let through counts those held back."""
        held = self.take()
        if held is None:
            return
        if held:
            logger.log(level, message + " (and %d more like it since the last one logged)", *args, held)
        else:
            logger.log(level, message, *args)
