"""The report's charts as SVG text, drawn here (no plotting library): horizontal bars, and two series of bars over
time. Pure functions of their rows: the same rows give the same bytes.

Every text from the data (a worker id, a state) is escaped, so a chart inlined in the HTML report holds no markup of
the data's. Sizes are in pixels of the ``viewBox``; the report's style sheet lets a chart shrink to the page.
"""

from __future__ import annotations

import datetime
import html
import math
from collections.abc import Sequence

FONT = "font-family=\"system-ui, sans-serif\" font-size=\"12\""
TEXT_COLOR = "#222"
GRID_COLOR = "#ddd"
CHAR_PX = 7  # about the width of a character at 12 px, to size the label column
BAR_PX = 18
ROW_PX = 24
TITLE_PX = 28
MARGIN_PX = 10
MAX_LABEL_CHARS = 40


def bar_chart(title: str, bars: Sequence[tuple[str, float]], color: str, width: int = 700) -> str:
    """Horizontal bars, one per (label, value), top to bottom in the given order, each with its value at its end."""
    labels = [_clip(label) for label, _ in bars]
    label_px = min(max((len(label) for label in labels), default=0), MAX_LABEL_CHARS) * CHAR_PX + MARGIN_PX
    value_px = 8 * CHAR_PX  # room for the value after the longest bar
    area = max(width - label_px - value_px - 2 * MARGIN_PX, 50)
    top = max((value for _, value in bars), default=0)
    scale = area / top if top > 0 else 0.0
    height = TITLE_PX + ROW_PX * len(bars) + MARGIN_PX
    x0 = MARGIN_PX + label_px
    parts = [_header(title, width, height)]
    parts.append(f'<line x1="{x0}" y1="{TITLE_PX - 4}" x2="{x0}" y2="{height - MARGIN_PX}" stroke="{GRID_COLOR}"/>')
    for i, (label, (_, value)) in enumerate(zip(labels, bars, strict=True)):
        y = TITLE_PX + i * ROW_PX
        length = max(value, 0) * scale
        parts.append(f'<text x="{x0 - 6}" y="{y + 13}" text-anchor="end">{html.escape(label)}</text>')
        parts.append(f'<rect x="{x0}" y="{y}" width="{length:.1f}" height="{BAR_PX}" fill="{color}"/>')
        parts.append(f'<text x="{x0 + length + 4:.1f}" y="{y + 13}">{_number(value)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def time_chart(title: str, rows: Sequence[tuple[int, int, int]], bucket_ms: int, colors: tuple[str, str],
               names: tuple[str, str], width: int = 900, height: int = 300) -> str:
    """Two series of bars side by side per time bucket: rows of (bucket start in epoch ms, first, second), the
    buckets ``bucket_ms`` long; a time axis (UTC) with a few labels and a count axis with a few grid lines."""
    left, right, bottom = 50, 40, 40
    plot_w, plot_h = width - left - right, height - TITLE_PX - bottom - 16
    y_top = TITLE_PX + 16
    first = min((r[0] for r in rows), default=0)
    last = max((r[0] for r in rows), default=0) + bucket_ms
    span = max(last - first, bucket_ms)
    top = max((max(r[1], r[2]) for r in rows), default=0)
    step = _nice_step(top)
    ceiling = max(step * math.ceil(top / step), step)
    parts = [_header(title, width, height)]
    for i, (color, name) in enumerate(zip(colors, names, strict=True)):
        x = left + i * 110
        parts.append(f'<rect x="{x}" y="{TITLE_PX - 2}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="{TITLE_PX + 8}">{html.escape(name)}</text>')
    for tick in range(0, ceiling + 1, step):
        y_tick = y_top + plot_h - tick / ceiling * plot_h
        parts.append(f'<line x1="{left}" y1="{y_tick:.1f}" x2="{left + plot_w}" y2="{y_tick:.1f}" '
                     f'stroke="{GRID_COLOR}"/>')
        parts.append(f'<text x="{left - 6}" y="{y_tick + 4:.1f}" text-anchor="end">{tick:,}</text>')
    slot = plot_w * bucket_ms / span
    bar = max(slot * 0.4, 1.0)
    for start, *values in rows:
        x_bucket = left + (start - first) / span * plot_w
        for i, (value, color) in enumerate(zip(values, colors, strict=True)):
            h = value / ceiling * plot_h
            parts.append(f'<rect x="{x_bucket + slot * 0.1 + i * bar:.1f}" y="{y_top + plot_h - h:.1f}" '
                         f'width="{bar:.1f}" height="{h:.1f}" fill="{color}"/>')
    labels = 6
    for i in range(labels + 1):
        at = first + span * i // labels
        x_label = left + plot_w * i / labels
        parts.append(f'<line x1="{x_label:.1f}" y1="{y_top + plot_h}" x2="{x_label:.1f}" y2="{y_top + plot_h + 4}" '
                     f'stroke="{TEXT_COLOR}"/>')
        parts.append(f'<text x="{x_label:.1f}" y="{y_top + plot_h + 18}" text-anchor="middle">'
                     f"{_when(at, bucket_ms)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def _header(title: str, width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" {FONT} fill="{TEXT_COLOR}">\n'
            f"<title>{html.escape(title)}</title>\n"
            f'<text x="{width / 2:g}" y="16" text-anchor="middle" font-size="14" font-weight="bold">'
            f"{html.escape(title)}</text>")


def _clip(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "\u2026"


def _number(value: float) -> str:
    return f"{value:,}" if float(value).is_integer() else f"{value:,.1f}"


def _nice_step(top: float) -> int:
    """A step of 1, 2 or 5 times a power of ten that cuts ``top`` into at most five parts."""
    if top <= 5:
        return 1
    power = 10 ** math.floor(math.log10(top / 5))
    return int(next(power * m for m in (1, 2, 5, 10) if top / (power * m) <= 5))


def _when(epoch_ms: int, bucket_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC)
    return moment.strftime("%m-%d %H:%M" if bucket_ms < 86_400_000 else "%Y-%m-%d")
