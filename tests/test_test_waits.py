"""Tests wait through one helper (``eventually``/``eventually_value`` in tests/helpers.py), not by sleeping a
fixed time or by a deadline loop of their own: a sleep guesses how long a state takes to come
(too short on a loaded machine: a flaky test; too long: a slow suite), a hand-written loop is one more place to
get the bound wrong. What is left is counted here against named exceptions, each with why."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
HELPER = TESTS / "helpers.py"

# file (relative to tests/) -> (how many sleeps and deadline loops it keeps, or None for any; why)
EXCEPTIONS: dict[str, tuple[int | None, str]] = {
    "faults_support.py": (1, "stream(): the pace of the traffic under a fault, not a wait for a state"),
    "test_agent_sessions.py": (1, "sessions of distinct ages: eviction goes oldest first"),
    "test_agent_transcript.py": (1, "a transcript's sleep_ms step: a pause the transcript holds (a lease ending)"),
    "test_cli.py": (1, "new_lines(): every line printed within a window (the window is the test: nothing more)"),
    "test_faults.py": (1, "rounds of writes spread over an outage: the traffic under the fault"),
    "test_http_server.py": (3, "a trickled head and a request pace (the fault); a hold past the linger"),
    "test_spool.py": (1, "writes in librdkafka's queue, unacknowledged: no public state says so"),
    "test_client.py": (2, "DrippingServer: the trickle (a byte per interval for a bounded time) is the fault"),
    "test_rest_tls.py": (1, "an unusable TLS file held over three check intervals: still served, one warning"),
    "test_retry_properties.py": (2, "a pause the generated program drew: time between its steps is the property"),
    "test_failures_live.py": (1, "past the backoff a restart would have waited: nothing may happen in that time"),
    "test_record_route.py": (1, "each state lasts a while: the record's durations are what is tested"),
    "test_service_helper.py": (1, "a reader thread that hands each line on late: the lag is the fault under test"),
    "test_secured_workers_live.py": (1, "past the initial backoff again and again: a storm of requests would show"),
    "test_stuck_workers_live.py": (2, "a worker held stopped for its pause; a rolling restart's quiet after: no "
                                      "false mark may appear in that time"),
    "test_autorestart_live.py": (6, "quiet periods past the backoff a restart would have waited (one restart "
                                    "only, none after giving up, none of a configuration error); the failures' "
                                    "schedule: tasks failing at a moment of the clock (twice), forged statuses "
                                    "written a second before"),
    "test_agent_live.py": (3, "past every fence (twice): nothing older may land in that time; idle past the agent's "
                              "liveness window, which only its own clock knows"),
    "test_agent_route.py": (2, "a session's lease lapses (no state announces it): past it, a final request's "
                               "write is still written; an expired session's writes hold back no other write"),
}


def _is_clock(node: ast.expr) -> bool:
    """``time.monotonic()``, ``time.time()``, ``loop.time()``: a reading of a clock."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"monotonic", "time", "perf_counter"})


def _waits(source: str) -> list[int]:
    """Line numbers of the sleeps of a non-zero time and of the hand-written deadlines (a clock plus a time)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            zero = bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0
            if name == "sleep" and not zero:
                lines.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_clock(node.left):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_sleeps_and_deadline_loops() -> None:
    source = ("import asyncio, time\n"
              "async def f(loop):\n"
              "    await asyncio.sleep(0)\n"
              "    time.sleep(0.2)\n"
              "    deadline = loop.time() + 5\n"
              "    ends = time.monotonic() + 1.0\n"
              "    await asyncio.sleep(interval)\n"
              "    spent = time.monotonic() - start\n")
    assert _waits(source) == [4, 5, 6, 7]


def test_tests_wait_through_the_helper_but_for_named_exceptions() -> None:
    found = {str(path.relative_to(TESTS)): _waits(path.read_text())
             for path in sorted(TESTS.rglob("*.py")) if path != HELPER}
    wrong = []
    for name, lines in found.items():
        allowed, _ = EXCEPTIONS.get(name, (0, ""))
        if allowed is not None and len(lines) != allowed:
            wrong.append(f"{name}: {len(lines)} sleeps or deadline loops (lines {lines}), {allowed} named")
    assert not wrong, "wait with tests/helpers.py's eventually, or name the exception and why:\n" + "\n".join(wrong)
    assert set(EXCEPTIONS) <= set(found), f"exceptions naming no file: {set(EXCEPTIONS) - set(found)}"
