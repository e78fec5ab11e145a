"""The Python side of JacksonOracle.java: Connect's own writing and reading of status values, on real Jackson.

One JVM serves a whole test session; each call sends a batch of requests and reads the batch's answers.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from status_store.connect.codec import StatusValue
from status_store.connect.model import State, TopicStatus

SOURCE = Path(__file__).with_name("JacksonOracle.java")
T = TypeVar("T")
JARS = ("jackson-core-*.jar", "jackson-databind-*.jar", "jackson-annotations-*.jar")


@dataclass(frozen=True)
class Rejected:
    """What Connect does not accept, with Java's reason."""

    reason: str


class JacksonOracle:
    """A running JacksonOracle JVM."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        assert process.stdin is not None
        assert process.stdout is not None
        self._in: IO[bytes] = process.stdin
        self._out: IO[bytes] = process.stdout

    def write_statuses(self, values: Sequence[StatusValue]) -> list[bytes | Rejected]:
        """Connect's value bytes for connector or task statuses."""
        requests = [b"E" + _string(v.state.value) + _optional(v.trace) + _string(v.worker_id or "")
                    + struct.pack(">i", v.generation) for v in values]
        return self._call(requests, self._read_bytes)

    def write_topic_statuses(self, values: Sequence[TopicStatus]) -> list[bytes | Rejected]:
        """Connect's value bytes for topic statuses."""
        requests = [b"T" + _string(v.topic) + _string(v.connector) + struct.pack(">iq", v.task, v.discover_timestamp)
                    for v in values]
        return self._call(requests, self._read_bytes)

    def json_objects(self, texts: Sequence[str]) -> list[bytes | Rejected]:
        """Jackson's ``{text: text}`` for each text: a property name and a string value, as Connect's REST answers
        write them."""
        return self._call([b"J" + _string(text) for text in texts], self._read_bytes)

    def read_statuses(self, values: Sequence[bytes]) -> list[StatusValue | Rejected]:
        """What a Connect worker reads from connector or task status records."""
        return self._call([b"S" + _bytes(value) for value in values], self._read_status)

    def read_topic_statuses(self, values: Sequence[bytes]) -> list[TopicStatus | Rejected]:
        """What a Connect worker reads from topic status records (TopicStatus without our write checks)."""
        return self._call([b"P" + _bytes(value) for value in values], self._read_topic_status)

    def read_connector_configs(self, values: Sequence[bytes]) -> list[bytes | Rejected]:
        """What a Connect worker reads from connector configuration records: the properties map written back by
        Jackson (``null`` for a tombstone), or why the record is ignored."""
        return self._call([b"C" + _bytes(value) for value in values], self._read_bytes)

    @functools.cached_property
    def version(self) -> tuple[int, int]:
        """Jackson's (major, minor) version."""
        answer = self._call([b"V"], self._read_text)[0]
        major, minor = answer.split(".")[:2]
        return int(major), int(minor)

    def close(self) -> None:
        """Stop the JVM (it exits at the end of its input)."""
        self._in.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)

    def _call(self, requests: list[bytes], read_answer: Callable[[], T]) -> list[T]:
        self._in.write(struct.pack(">i", len(requests)) + b"".join(requests))
        self._in.flush()
        return [read_answer() for _ in requests]

    def _take(self, size: int) -> bytes:
        data = self._out.read(size)
        if len(data) != size:
            self._process.wait(timeout=10)
            raise RuntimeError(f"the Jackson oracle stopped (exit code {self._process.returncode})")
        return data

    def _int(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def _string(self) -> str:
        return self._take(2 * self._int()).decode("utf-16-be", "surrogatepass")

    def _optional_string(self) -> str | None:
        return self._string() if self._take(1) == b"\x01" else None

    def _rejected_or(self) -> Rejected | None:
        return Rejected(self._string()) if self._take(1) == b"\x01" else None

    def _read_bytes(self) -> bytes | Rejected:
        return self._rejected_or() or self._take(self._int())

    def _read_text(self) -> str:
        self._take(1)
        return self._string()

    def _read_status(self) -> StatusValue | Rejected:
        rejected = self._rejected_or()
        if rejected is not None:
            return rejected
        state = State(self._string())
        trace, worker_id = self._optional_string(), self._optional_string()
        return StatusValue(state, trace, worker_id, self._int())

    def _read_topic_status(self) -> TopicStatus | Rejected:
        rejected = self._rejected_or()
        if rejected is not None:
            return rejected
        name, connector, task = self._string(), self._string(), self._int()
        timestamp: int = struct.unpack(">q", self._take(8))[0]
        return TopicStatus(name, connector, task, timestamp)


def _string(text: str) -> bytes:
    units = text.encode("utf-16-be", "surrogatepass")
    return struct.pack(">i", len(units) // 2) + units


def _optional(text: str | None) -> bytes:
    return b"\x00" if text is None else b"\x01" + _string(text)


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def jdk_missing() -> str | None:
    """Why the oracle cannot run here, or None."""
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    return f"the Jackson oracle needs a JDK ({' and '.join(missing)} not on PATH)" if missing else None


def jackson_classpath() -> list[Path]:
    """Jackson's jars as PySpark ships them (PySpark is in the test extra), or from the directory named by
    JACKSON_ORACLE_JARS (to check another Jackson version, e.g. the one a Connect release pins)."""
    chosen = os.environ.get("JACKSON_ORACLE_JARS")
    spec = importlib.util.find_spec("pyspark")
    if chosen is not None:
        jars = Path(chosen)
    elif spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed: install the test extra (pip install -e '.[test]')")
    else:
        jars = Path(spec.origin).parent / "jars"
    found = []
    for pattern in JARS:
        matches = sorted(jars.glob(pattern))
        if not matches:
            raise RuntimeError(f"no {pattern} in {jars}")
        found.append(matches[-1])
    return found


@contextmanager
def running_oracle(build_dir: Path) -> Iterator[JacksonOracle]:
    """Compile JacksonOracle.java into ``build_dir`` and run it."""
    classpath = [*map(str, jackson_classpath()), str(build_dir)]
    subprocess.run(["javac", "-Xlint:all", "-Werror", "-d", str(build_dir), "-cp", ":".join(classpath[:-1]),
                    str(SOURCE)], check=True, timeout=120)
    process = subprocess.Popen(
        # A short-lived JVM: the quick compiler and a small collector.
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", ":".join(classpath),
         "JacksonOracle"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    oracle = JacksonOracle(process)
    try:
        yield oracle
    finally:
        oracle.close()
