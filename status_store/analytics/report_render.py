"""The report's parts (``Table``, ``Chart``, ``Section``) and their rendering: Markdown, and one HTML page that needs
nothing else (inline SVG, no script, a Content-Security-Policy that forbids scripts and every load from the network).
Every text from the data is escaped."""

from __future__ import annotations

import datetime
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Scripts, frames, fonts, images from anywhere: none. Inline styles only.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.broken { border: 2px solid #c62828; padding: 0 1em 1em; background: #fff5f5; }
.ok { border: 2px solid #2e7d32; padding: 0.5em 1em; background: #f3fbf3; }
code, .trace { font-family: ui-monospace, monospace; font-size: 0.9em; white-space: pre-wrap; }
svg { max-width: 100%; height: auto; }
"""


@dataclass
class Table:
    """A table of the report: its header and rows (cells as text; numbers right-aligned in HTML)."""

    header: list[str]
    rows: list[list[Any]]
    #: Columns holding numbers.
    numeric: set[int] = field(default_factory=set)


@dataclass
class Chart:
    """A chart: an SVG file beside the Markdown, the same SVG inline in the HTML."""

    name: str
    title: str
    svg: str


@dataclass
class Section:
    """A heading, what it says in words, its tables and charts."""

    title: str
    text: list[str] = field(default_factory=list)
    #: Tables, charts and paragraphs after the text, in order.
    parts: list[Table | Chart | str] = field(default_factory=list)
    css_class: str = ""


def markdown(intro: Sequence[str], sections: Sequence[Section]) -> str:
    """The report in Markdown, its charts as images beside it."""
    lines = ["# Kafka Connect status report", "", *intro, ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        lines += [line for text in section.text for line in (_md_text(text), "")]
        for part in section.parts:
            if isinstance(part, str):
                lines += [_md_text(part), ""]
            else:
                lines += [_md_table(part) if isinstance(part, Table) else f"![{part.title}]({part.name})", ""]
    return "\n".join(lines)


def _md_text(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _md_table(table: Table) -> str:
    if not table.rows:
        return "(none)"
    cells = [[_md_text(_cell(v)).replace("|", "\\|") for v in row] for row in table.rows]
    return "\n".join(["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header),
                      *["| " + " | ".join(row) + " |" for row in cells]])


def html_page(intro: Sequence[str], sections: Sequence[Section]) -> str:
    """The report as one self-contained HTML page: inline SVG, no script, every text from the data escaped."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
           "<title>Kafka Connect status report</title>", f"<style>{_STYLE}</style></head><body>",
           "<h1>Kafka Connect status report</h1>", *[f"<p>{html.escape(text)}</p>" for text in intro]]
    for section in sections:
        out.append(f'<section class="{section.css_class}"><h2>{html.escape(section.title)}</h2>')
        out += [f"<p>{html.escape(text)}</p>" for text in section.text]
        for part in section.parts:
            if isinstance(part, str):
                out.append(f"<p>{html.escape(part)}</p>")
            else:
                out.append(_html_table(part) if isinstance(part, Table) else
                           f'<figure aria-label="{html.escape(part.title)}">{part.svg}</figure>')
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_table(table: Table) -> str:
    if not table.rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{html.escape(_cell(v))}</td>' if i in table.numeric else f"<td>{html.escape(_cell(v))}</td>"
        for i, v in enumerate(row)) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def utc_time(epoch_ms: int | None) -> str:
    """A time as the report shows it: UTC, to the millisecond."""
    if epoch_ms is None:
        return "(no history events)"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def duration_text(ms: float | None) -> str:
    """A duration in seconds, minutes or hours, whichever reads best; empty for none."""
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
