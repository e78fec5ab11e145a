"""Log lines a client cannot forge or multiply: escaping and rate limits."""

from __future__ import annotations

import logging
import sys

import pytest

from status_store.logs import EscapingFormatter, RateLimit, escape_text


@pytest.mark.parametrize(("text", "escaped"), [
    ("my-conn", "my-conn"),
    ("é中😀", "é中😀"),
    ("a\nINFO forged line", "a\\u000aINFO forged line"),
    ("a\rb\tc\x1b[31m", "a\\u000db\\u0009c\\u001b[31m"),
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
    ("txt.exe\u202egnp", "txt.exe\\u202egnp"),
    ("\u2066x\u2069\u200e\u200f\u061c", "\\u2066x\\u2069\\u200e\\u200f\\u061c"),
    ("\x85\x7f\x00", "\\u0085\\u007f\\u0000"),
])
def test_escape_text(text: str, escaped: str) -> None:
    assert escape_text(text) == escaped


def test_the_formatter_escapes_the_message_and_keeps_the_traceback() -> None:
    formatter = EscapingFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.WARNING, __file__, 1, "Refused %s", ("a\u2028b\nc",),
                                   exc_info=sys.exc_info())
    text = formatter.format(record)
    first, *rest = text.split("\n")
    assert first == "WARNING Refused a\\u2028b\\u000ac"
    assert rest[0] == "Traceback (most recent call last):"
    assert "\u2028" not in text


def test_a_rate_limit_lets_one_line_through_per_interval_and_counts_the_rest() -> None:
    now = [100.0]
    limit = RateLimit(10.0, clock=lambda: now[0])
    assert limit.take() == 0
    assert [limit.take() for _ in range(5)] == [None] * 5
    now[0] = 109.9
    assert limit.take() is None
    now[0] = 110.0
    assert limit.take() == 6
    now[0] = 125.0
    assert limit.take() == 0


def test_a_rate_limited_log_says_how_many_lines_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limit = RateLimit(10.0, clock=lambda: now[0])
    logger = logging.getLogger("test.rate")
    with caplog.at_level(logging.INFO, logger="test.rate"):
        for i in range(1000):
            limit.log(logger, logging.WARNING, "refused %s", i)
        now[0] = 30.0
        limit.log(logger, logging.WARNING, "refused %s", "last")
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0", "refused last (and 999 more like it since the last one logged)"]
