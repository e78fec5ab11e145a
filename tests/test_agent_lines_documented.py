"""docs/operations.md lists every line the agent logs: each text of the agent's sources that reaches a line is found in
the section an operator reads.

A text reaches a line straight (``AgentLog``, its rate limited ``Warnings``), as a fall back's reason, or inside another
line's text: the message of an exception a line names (a bad option's in ``not attached: ...``, a failed request's in
``does not take statuses: ...`` and in a fall back's reason), or what a method returns that a line names (a sidecar's
mismatch, an answer's inconsistency, rule 5's reasons).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).parent.parent
SOURCES = ROOT / "agent" / "src" / "main" / "java"
PACKAGE = SOURCES / "io" / "statusstore" / "agent"
# The calls whose arguments reach a line: logged straight, rate limited (after the cause), as a fall back's reason
# (toFencing, leave), as what an undone late write landed after (undone); and every exception's message, with the
# helpers that build one (JsonTree's error, SidecarClient's malformed, OptionSources' checkKnown).
CALLS = re.compile(
    r"\b(AgentLog\.(?:info|warn)|\w*[wW]arnings\.warn|toFencing|leave|undone"
    r"|new [\w.]*(?:Exception|Error)|error|malformed|checkKnown)\("
)
# The methods whose result a line names, by file under the agent's package: every literal of their bodies is logged.
NAMED_RESULTS = {
    "StatusStoreAgent.java": ("version",),  # "attached (<version>, ...)"
    "AgentOptions.java": ("describe", "disabledBy"),  # "attached (...; <describe>)", "disabled (<disabledBy>); ..."
    "json/Jackson.java": ("missing", "version"),  # "not attached: <missing>; ...", "attached (..., <version>; ...)"
    "sidecar/SidecarTls.java": ("describe",),  # the tls part of "attached (...)"
    "sidecar/SidecarIdentity.java": ("mismatch",),  # "the sidecar at <url> <mismatch>; statuses stay ..."
    "path/Handover.java": ("onConnect",),  # the probe's reason, held in `why` until its line
    "path/AnswerCheck.java": ("inconsistency",),  # "answered what the agent did not ask: <inconsistency>"
    "path/OverdueCheck.java": ("leave", "leaveIfStillPending", "overdueLine"),  # rule 5's reasons for falling back
}
# Texts the scan finds that reach no line, each with why.
NEVER_LOGGED = {
    "no probe key found for partition": "ProbeRecord: thrown on the probe's own thread, where canWrite catches it and "
    "answers that the worker's producer could not write (the rule 5 line then says 'it failed')",
    "not a Connect status": "StatusReader: only for a null or foreign status, which Connect's put and putSafe "
    "(StoreShape.WRITES) never get; it would be in the stack trace of 'agent fault', not in a line",
    "no operations": "MetricsMBeans: the answer to a JMX client that invokes an operation, not logged",
}
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
# A fragment shorter than this is glue ("; of ", " ms"), not words an operator searches for.
SHORTEST = 12


def logged_fragments() -> dict[str, tuple[str, int]]:
    """Each literal text (stripped) that reaches a line, with where it is (file and line)."""
    found: dict[str, tuple[str, int]] = {}
    for source in sorted(SOURCES.rglob("*.java")):
        text = source.read_text()
        for call in CALLS.finditer(text):
            arguments = _enclosed(text, call.end(), "(", ")")
            literals = list(LITERAL.finditer(text, call.end(), call.end() + len(arguments)))
            if call.group(1).endswith("arnings.warn") and arguments.lstrip().startswith('"'):
                literals = literals[1:]  # the cause's own name
            _add(found, literals, source, text)
        for method in NAMED_RESULTS.get(source.relative_to(PACKAGE).as_posix(), ()):
            start, end = _body(text, method)
            _add(found, LITERAL.finditer(text, start, end), source, text)
    return found


def _add(found: dict[str, tuple[str, int]], literals: Iterable[re.Match[str]], source: Path, text: str) -> None:
    for literal in literals:
        fragment = literal.group(1).strip(" ;:,()")
        if len(fragment) >= SHORTEST:
            found[fragment] = (str(source.relative_to(ROOT)), text.count("\n", 0, literal.start()) + 1)


def _body(text: str, method: str) -> tuple[int, int]:
    """Where the body of the method of this name starts and ends."""
    # Its declaration, not a call: a statement's `;` comes before any `{`.
    declaration = re.search(rf"^[ \t]+(?:[\w<>\[\],.?]+[ \t]+)+{method}\([^;{{]*\)[^;{{]*\{{", text, re.MULTILINE)
    assert declaration, f"no method {method} (NAMED_RESULTS names it)"
    return declaration.end(), declaration.end() + len(_enclosed(text, declaration.end(), "{", "}"))


def _enclosed(text: str, start: int, opening: str, closing: str) -> str:
    """The text from just after an opening bracket to its closing one (strings may hold brackets)."""
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
        elif char == opening:
            depth += 1
        elif char == closing:
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
    assert len(fragments) > 100, fragments  # the scan finds the agent's calls at all
    section = documented()
    missing = sorted(
        (where, fragment) for fragment, where in fragments.items()
        if fragment not in section and fragment not in NEVER_LOGGED
    )
    assert not missing, "lines the agent logs that docs/operations.md does not list:\n" + "\n".join(
        f"  {file}:{line}: {fragment!r}" for (file, line), fragment in missing)


def test_the_texts_said_never_logged_are_still_in_the_sources() -> None:
    assert set(NEVER_LOGGED) <= set(logged_fragments())
