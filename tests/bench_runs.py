"""Running a benchmark's ``--quick`` as a user runs it, and checking that it left the docs alone."""

from __future__ import annotations

import ast
import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness import ROOT

BENCH = ROOT / "bench"
# What only a full run may write: the figures and charts of docs/BENCHMARKS.md.
DOCS = ROOT / "docs"


def scripts() -> set[str]:
    """The benchmark modules that run as scripts (``python -m bench.<name>``): those with a main block."""
    found = set()
    for path in BENCH.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
                found.add(path.stem)
    return found


def _docs_written_by_benchmarks() -> dict[str, str]:
    """docs/BENCHMARKS.md and every file under docs/img, each with a hash of its content."""
    paths = [DOCS / "BENCHMARKS.md", *(p for p in (DOCS / "img").rglob("*") if p.is_file())]
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def run_quick(script: str, cwd: Path, *arguments: str, timeout: float) -> str:
    """``python -m bench.<script> --quick ...`` in a fresh process started in ``cwd`` (the repository importable,
    as from its root); its output. Fails when the run fails, outlasts ``timeout`` seconds, or changes
    docs/BENCHMARKS.md or docs/img."""
    before = _docs_written_by_benchmarks()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = run_bounded([sys.executable, "-m", f"bench.{script}", "--quick", *arguments], cwd,
                       {**os.environ, "PYTHONPATH": path}, timeout)
    assert done.returncode == 0, f"bench.{script} --quick exited with {done.returncode}:\n{done.stderr[-5000:]}"
    assert _docs_written_by_benchmarks() == before, f"bench.{script} --quick changed the docs"
    return done.stdout


def run_bounded(command: Sequence[str], cwd: Path, env: Mapping[str, str],
                timeout: float) -> subprocess.CompletedProcess[str]:
    """``command``'s run (output captured), in a session of its own: when it outlasts ``timeout`` seconds, every process
    of that session is killed before ``subprocess.TimeoutExpired`` is raised, not only the one started here (a
    benchmark's ``status-store analyze`` and its Spark JVM outlived a quick run cut off at its bound, and loaded the
    machine for minutes). The session's id is the started process's pid, which is not reused before it is reaped."""
    with subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
