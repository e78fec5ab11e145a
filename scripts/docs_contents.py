"""A Markdown page's contents list made from its headings, so that it cannot drift from them.

    python scripts/docs_contents.py docs/operations.md           rewrite the list in place
    python scripts/docs_contents.py --check docs/operations.md   exit 1 (saying what differs) if it is not the list

The list sits between the two marker lines below; its entries are the page's ``##`` and ``###`` headings outside
fenced code, each linked by the anchor GitHub gives it. tests/test_docs.py runs ``--check``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BEGIN = "<!-- contents: made by `python scripts/docs_contents.py docs/operations.md`; do not edit by hand -->"
END = "<!-- end of contents -->"
LEVELS = (2, 3)
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")


def headings(text: str) -> list[tuple[int, str]]:
    """Each heading's level and title, in order; lines inside fenced code (``` or ~~~) are not headings."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is None and (match := HEADING.match(line)):
            found.append((len(match.group(1)), match.group(2)))
    return found


def anchor(title: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, ``-1``... on repeats."""
    plain = re.sub(r"`|\[([^\]]*)\]\([^)]*\)", r"\1", title).lower()
    slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def contents(text: str) -> str:
    """The contents list of a page: its headings of LEVELS, indented by level."""
    seen: dict[str, int] = {}
    lines = []
    for level, title in headings(text):
        slug = anchor(title, seen)
        if level in LEVELS:
            lines.append(f"{'  ' * (level - LEVELS[0])}- [{title}](#{slug})")
    return "\n".join(lines)


def with_contents(text: str) -> str:
    """The page with the list between its markers made anew (ValueError if it lacks them)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"the page needs one line {BEGIN!r} and, after it, one line {END!r}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{contents(text)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` only compare) each page's contents list."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a list is not its page's")
    parser.add_argument("pages", nargs="+", type=Path)
    options = parser.parse_args(argv)
    stale = []
    for page in options.pages:
        text = page.read_text()
        made = with_contents(text)
        if made == text:
            continue
        if options.check:
            stale.append(page)
        else:
            page.write_text(made)
    for page in stale:
        print(f"{page}: its contents list is not its headings; run python scripts/docs_contents.py {page}",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
