"""docs/operations.md lists every line the agent logs: each text the agent's sources log (``AgentLog``, its rate
limited ``Warnings``, and the reasons a fall back names) is found in the section an operator reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
SOURCES = ROOT / "agent" / "src" / "main" / "java"
# The calls whose arguments are logged: straight, rate limited (after the cause), or as a fall back's reason.
CALLS = re.compile(r"\b(AgentLog\.(?:info|warn)|warnings\.warn|toFencing|leave)\(")
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
# A fragment shorter than this is glue ("; of ", " ms"), not words an operator searches for.
SHORTEST = 12


def logged_fragments() -> dict[str, str]:
    """Each literal text (stripped) of a logging call's arguments, with where it is."""
    found: dict[str, str] = {}
    for source in sorted(SOURCES.rglob("*.java")):
        text = source.read_text()
        for call in CALLS.finditer(text):
            arguments = _arguments(text, call.end())
            literals = LITERAL.findall(arguments)
            if call.group(1) == "warnings.warn":
                literals = literals[1:] if arguments.lstrip().startswith('"') else literals  # the cause's own name
            for literal in literals:
                fragment = literal.strip(" ;:,(")
                if len(fragment) >= SHORTEST:
                    found[fragment] = f"{source.relative_to(ROOT)}:{text.count(chr(10), 0, call.start()) + 1}"
    return found


def _arguments(text: str, start: int) -> str:
    """The text of a call's arguments from just after its opening parenthesis (strings may hold parentheses)."""
    depth, at, quoted = 1, start, False
    while depth and at < len(text):
        char = text[at]
        if quoted:
            if char == "\\":
                at += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        at += 1
    return text[start:at - 1]


def documented() -> str:
    """docs/operations.md's section on the agent's lines, without Markdown's escapes and code marks."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    section = doc[doc.index("#### What the agent logs"):doc.index("### Kubernetes: a sidecar of the Connect worker")]
    return section.replace("\\|", "|").replace("`", "")


def test_every_line_the_agent_logs_is_in_the_operations_guide() -> None:
    fragments = logged_fragments()
    assert len(fragments) > 30, fragments  # the scan finds the agent's calls at all
    section = documented()
    missing = {fragment: where for fragment, where in fragments.items() if fragment not in section}
    assert not missing, "lines the agent logs that docs/operations.md does not list:\n" + "\n".join(
        f"  {where}: {fragment!r}" for fragment, where in sorted(missing.items(), key=lambda item: item[1]))
