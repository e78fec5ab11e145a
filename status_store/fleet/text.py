"""Text from the topic as the read side shows it: names and worker ids cut to a bound, one rule for every view.

A key, and so a connector's name, may be as long as a record (a megabyte); a worker id too. The views of the whole
fleet (``GET /fleet``, ``GET /events``, the metrics' labels) show each at most ``MAX_SHOWN_CHARS`` characters: a
longer one is cut, and ends with ``…`` and a digest of the whole, so that two names that differ only past the cut
stay apart, and every view shows a name the same way (the status page matches the rows of ``GET /fleet`` with the
events by it). The routes that address one connector (``GET /connectors/{name}/status``) answer the whole text.
"""

from __future__ import annotations

import hashlib

MAX_SHOWN_CHARS = 256
# Hex digits of the whole text's digest at the end of a text cut.
DIGEST_CHARS = 8
_KEPT_CHARS = MAX_SHOWN_CHARS - DIGEST_CHARS - 1


def shown(text: str, whole: str | None = None) -> str:
    """``text`` as the views show it: itself when at most ``MAX_SHOWN_CHARS`` characters, else its start, ``…`` and
    ``DIGEST_CHARS`` hex digits of a digest of ``whole`` (default: ``text``; the text ``text`` was made from, e.g.
    escaped, when it differs)."""
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    digest = hashlib.blake2b((text if whole is None else whole).encode("utf-8", "surrogatepass"),
                             digest_size=DIGEST_CHARS // 2)
    return text[:_KEPT_CHARS] + "…" + digest.hexdigest()


def may_be_cut(text: str) -> bool:
    """Whether ``text`` could be a text ``shown`` cut (then the whole one is to be looked for)."""
    return len(text) == MAX_SHOWN_CHARS and text[_KEPT_CHARS] == "…"
