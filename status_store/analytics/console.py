"""What a person running ``status-store analyze`` sees: one line per phase on the console, and the log file
that takes everything else (the driver's log lines, librdkafka's, and a local Spark's own log and stage bars).
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

PREFIX = "status-store analyze"

log = logging.getLogger("status_store.analytics")


class Progress:
    """One line per phase on stderr (stdout keeps the summary): the time since the run began, and what it
    does now."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._began = time.monotonic()

    def phase(self, text: str) -> None:
        """A phase begins."""
        self._print(f"[{time.monotonic() - self._began:6.1f} s] {text}")
        log.info("phase: %s", text)

    def warning(self, text: str) -> None:
        """Something worth knowing that does not fail the run."""
        self._print(f"warning: {text}")
        log.warning("%s", text)

    def _print(self, line: str) -> None:
        print(f"{PREFIX}: {line}", file=self._stream or sys.stderr, flush=True)


def default_log_file(out: str) -> Path:
    """``<out>/_logs/analyze-<time>.log`` for a local ``--out``, else ``./status-store-analyze-<time>.log``."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    if "://" in out:
        return Path(f"status-store-analyze-{stamp}.log")
    return Path(out) / "_logs" / f"analyze-{stamp}.log"


@contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """Python's log lines at INFO and above (py4j's at WARNING) go to ``path`` while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    levels = (root.level, py4j.level)
    root.addHandler(handler)
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    py4j.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        root.setLevel(levels[0])
        py4j.setLevel(levels[1])
        handler.close()


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """The process's stderr (file descriptor 2) goes to ``path`` while the block runs, so a child started
    meanwhile (Spark's JVM) writes its log and stage bars there for its whole life."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def summary_text(summary: dict[str, Any]) -> str:
    """The summary for a terminal."""
    lines = [f"Outputs in {summary['out']}" + (f"; report: {summary['report']}" if "report" in summary else "")]
    lines += [f"  {name}: {value}" for name, value in sorted(summary["counters"].items())]
    lines += [f"  warning: {warning}" for warning in summary["warnings"]]
    return "\n".join(lines)


def first_line(error: Exception) -> str:
    """An exception in one line (Spark's can be pages long): for an error in the JVM, its root cause."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        while java.getCause() is not None:
            java = java.getCause()
        text = str(java.toString())
    else:
        text = f"{type(error).__name__}: {error}"
    return (text.strip().splitlines() or [type(error).__name__])[0][:500]
