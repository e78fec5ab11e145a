"""The output directory (``--out``): a run writes into a staging directory inside it, and only a run that
finished moves what it wrote into place, so a failed run leaves the earlier outputs as they were.

    <out>/latest/date=.../, mttr/, ...   the outputs (Parquet, partitioned by date)
    <out>/summary.json, report/          the run's summary and report
    <out>/_state/checkpoint.json         incremental runs: where each partition's next read starts, and
    <out>/_state/records/<run>/          the raw records each run read (by topic), and what it kept of the
                                         earlier ones (<run>-kept; analysed again by a run that cannot continue)
    <out>/_state/tails/<run>/            what the next run continues from (``incremental``): the tails, and
    <out>/_state/outcomes/<run>/         the outcome events
    <out>/_run-<run>/                    a run in progress: what it wrote, not yet in place
    <out>/_logs/                         the runs' logs (local outputs)

The commit first writes the list of what it moves (``_run-<run>/_COMMIT``), then moves each item: a date
partition of an output (replacing that date only, so the other dates stay), the report, a state batch,
and the summary last. A commit cut short (a killed process) is finished by the next run, which also
removes what failed runs left. One run at a time per output directory.

Every file operation goes through Hadoop's FileSystem in Spark's JVM, so that a path means what it means
to Spark's own writers (a local path, ``hdfs://...``, or a bare path on the cluster's default file system).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

COMMIT_MARKER = "_COMMIT"
RUN_PREFIX = "_run-"
STATE_DIR = "_state"
CHECKPOINT = f"{STATE_DIR}/checkpoint.json"


class OutputDir:
    """The ``--out`` directory of one run: its staging directory, the commit, and small text files."""

    def __init__(self, spark: SparkSession, out: str) -> None:
        jvm: Any = spark._jvm  # Hadoop's FileSystem, through Spark's JVM
        self._path_class = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils
        self._hadoop_conf = spark._jsc.hadoopConfiguration()
        self.out = out.rstrip("/") or out
        self._fs: Any = self._file_system(self.out)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.run_id = f"{stamp}-{uuid.uuid4().hex[:8]}"
        self.staging = f"{self.out}/{RUN_PREFIX}{self.run_id}"
        self._committing = False

    def _path(self, path: str) -> Any:
        return self._path_class(path)

    def _file_system(self, path: str) -> Any:
        """The file system of ``path`` (the raw one for local paths: no ".crc" file beside each small file)."""
        fs = self._path(path).getFileSystem(self._hadoop_conf)
        return fs.getRawFileSystem() if fs.getScheme() == "file" else fs

    def exists(self, path: str) -> bool:
        """Whether the path exists (on its own file system: ``--since`` may name another one)."""
        return bool(self._file_system(path).exists(self._path(path)))

    def children(self, path: str) -> list[str]:
        """The names in a directory (none when it does not exist)."""
        if not self.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in self._fs.listStatus(self._path(path)))

    def read_text(self, path: str) -> str | None:
        """A small text file's content, or None when it does not exist."""
        if not self.exists(path):
            return None
        stream = self._file_system(path).open(self._path(path))
        try:
            return str(self._io.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Write a small text file (replacing it)."""
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def remove(self, path: str) -> None:
        """Remove a file or directory (and what it holds)."""
        self._fs.delete(self._path(path), True)

    def staged(self, relative: str) -> str:
        """Where this run writes ``relative`` (a path under ``--out``) before the commit."""
        return f"{self.staging}/{relative}"

    def recover(self) -> list[str]:
        """Finish a commit an earlier run was cut short in, and remove what failed runs left; returns what
        was done, for the log."""
        done = []
        for name in self.children(self.out):
            if not name.startswith(RUN_PREFIX) or name == f"{RUN_PREFIX}{self.run_id}":
                continue
            staging = f"{self.out}/{name}"
            items = self._commit_items(staging)
            if items is None:
                done.append(f"removed {staging}, left by a run that failed")
            else:
                for item in items:
                    self._move(staging, item)
                done.append(f"finished the commit of {staging}, cut short by an earlier run's end")
            self._fs.delete(self._path(staging), True)
        return done

    def _commit_items(self, staging: str) -> list[str] | None:
        text = self.read_text(f"{staging}/{COMMIT_MARKER}")
        try:
            items = json.loads(text) if text is not None else None
        except ValueError:
            return None  # cut short while writing the list: nothing was moved yet
        return [str(item) for item in items] if isinstance(items, list) else None

    def commit(self, items: Sequence[str]) -> None:
        """Move the staged ``items`` (paths under ``--out``, in this order) into place, then remove the
        staging directory."""
        self.write_text(self.staged(COMMIT_MARKER), json.dumps(list(items)))
        self._committing = True  # from here on, the next run finishes what this one could not
        for item in items:
            self._move(self.staging, item)
        self._fs.delete(self._path(self.staging), True)

    def discard(self) -> None:
        """Remove what this run staged (a failed run); a commit under way is left for the next run to finish."""
        if self._committing:
            log.error("the commit of %s did not finish; the next run finishes it", self.staging)
            return
        try:
            self._fs.delete(self._path(self.staging), True)
        except Exception:  # the run's own failure is the one to report
            log.exception("could not remove %s", self.staging)

    def _move(self, staging: str, item: str) -> None:
        """Move one staged item into place; the one it replaces goes aside first. Done again after a crash,
        it completes what is left."""
        staged, target = self._path(f"{staging}/{item}"), self._path(f"{self.out}/{item}")
        if not self._fs.exists(staged):
            return  # moved already
        if self._fs.exists(target):
            aside = self._path(f"{staging}/_replaced/{item}")
            self._fs.mkdirs(aside.getParent())
            self._rename(target, aside)
        self._fs.mkdirs(target.getParent())
        self._rename(staged, target)

    def _rename(self, source: Any, target: Any) -> None:
        if not self._fs.rename(source, target):
            raise OSError(f"could not move {source} to {target}")

    def partition_items(self, outputs: Iterable[str]) -> list[str]:
        """The staged items of date-partitioned outputs: each date partition (and Spark's markers) apart,
        so that a commit replaces the dates this run wrote and leaves the others. An output without rows
        is an empty directory, put in place only where there is none."""
        items = []
        for name in outputs:
            children = self.children(self.staged(name))
            items += [f"{name}/{child}" for child in children]
            if not children and not self.exists(f"{self.out}/{name}"):
                self._fs.mkdirs(self._path(self.staged(name)))
                items.append(name)
        return items


@dataclass
class Checkpoint:
    """Where an incremental run starts: each partition's next offset, and the raw records earlier runs read
    (analysed again with the new ones, so that the result equals one run over everything)."""

    status_topic: str
    history_topic: str | None
    #: topic -> partition -> the next offset to read.
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    #: Directories of raw records (Parquet), full paths.
    batches: list[str] = field(default_factory=list)
    #: How many records the batches hold (to size the next run).
    records: int = 0
    #: The start of the retention window the batches were cut to (epoch ms, a UTC midnight): the next run's
    #: dated outputs are exact from this day on; None when nothing was cut.
    from_ms: int | None = None
    #: What the next run may continue from (``incremental``): the run's as-of, its flapping settings
    #: (transitions, window), its history counters, its tails and the outcome events kept (full paths); no tails
    #: when the run kept none.
    as_of_ms: int | None = None
    flapping: tuple[int, int] | None = None
    counters: dict[str, int] = field(default_factory=dict)
    tails: str | None = None
    outcomes: list[str] = field(default_factory=list)

    def paths(self) -> list[str]:
        """Every directory the checkpoint names (the records, the tails, the outcome events)."""
        return [*self.batches, *([self.tails] if self.tails else []), *self.outcomes]

    def moved(self, source: str, target: str) -> Checkpoint:
        """The same checkpoint with its paths under ``source`` under ``target`` (the staging directory's, once
        committed)."""
        def move(path: str) -> str:
            return target + path[len(source):] if path.startswith(source) else path

        return dataclasses.replace(self, batches=[move(b) for b in self.batches],
                                   tails=move(self.tails) if self.tails else None,
                                   outcomes=[move(o) for o in self.outcomes])

    def to_json(self, out: str) -> str:
        """The checkpoint file's text; batches under ``out`` are kept relative to it (the directory may move)."""
        prefix = out.rstrip("/") + "/"

        def relative(path: str) -> str:
            return path[len(prefix):] if path.startswith(prefix) else path

        return json.dumps({
            "status_topic": self.status_topic, "history_topic": self.history_topic,
            "offsets": {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in self.offsets.items()},
            "batches": [relative(b) for b in self.batches],
            "records": self.records, "from_ms": self.from_ms, "as_of_ms": self.as_of_ms,
            "flapping": list(self.flapping) if self.flapping else None, "counters": self.counters,
            "tails": relative(self.tails) if self.tails else None, "outcomes": [relative(o) for o in self.outcomes],
        }, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, out: str) -> Checkpoint:
        """Read a checkpoint file's text (written by ``to_json`` for ``out``); a ValueError naming the field that
        is wrong when it is not one."""
        try:
            found = json.loads(text)
        except ValueError as e:
            raise ValueError(f"not JSON ({e})") from None
        if not isinstance(found, dict):
            raise ValueError(f"not a JSON object but {_json_type(found)}")
        for name in ("status_topic", "history_topic", "offsets", "batches"):
            if name not in found:
                raise ValueError(f'no "{name}" field')
        if not isinstance(found["status_topic"], str):
            raise ValueError(f'"status_topic" must be a string, got {_json_type(found["status_topic"])}')
        if found["history_topic"] is not None and not isinstance(found["history_topic"], str):
            raise ValueError(f'"history_topic" must be a string or null, got {_json_type(found["history_topic"])}')
        offsets = found["offsets"]
        if not isinstance(offsets, dict):
            raise ValueError(f'"offsets" must be an object (topic -> partition -> offset), got {_json_type(offsets)}')
        parsed: dict[str, dict[int, int]] = {}
        for topic, parts in offsets.items():
            if not isinstance(parts, dict):
                raise ValueError(f'"offsets"."{topic}" must be an object (partition -> offset), got '
                                 f"{_json_type(parts)}")
            parsed[topic] = {}
            for partition, offset in parts.items():
                if not partition.isdigit():
                    raise ValueError(f'"offsets"."{topic}": {partition!r} is not a partition number')
                if type(offset) is not int or offset < 0:
                    raise ValueError(f'"offsets"."{topic}"."{partition}" must be an offset (an integer >= 0), got '
                                     f"{json.dumps(offset)}")
                parsed[topic][int(partition)] = offset
        batches = found["batches"]
        if not isinstance(batches, list) or not all(isinstance(b, str) for b in batches):
            raise ValueError(f'"batches" must be a list of paths, got {json.dumps(batches)[:100]}')
        records = found.get("records", 0)
        if type(records) is not int or records < 0:
            raise ValueError(f'"records" must be a count (an integer >= 0), got {json.dumps(records)}')
        from_ms, as_of_ms = found.get("from_ms"), found.get("as_of_ms")
        for name, value in (("from_ms", from_ms), ("as_of_ms", as_of_ms)):
            if value is not None and type(value) is not int:
                raise ValueError(f'"{name}" must be epoch milliseconds or null, got {json.dumps(value)}')
        flapping = found.get("flapping")
        if flapping is not None and not (isinstance(flapping, list) and len(flapping) == 2
                                         and all(type(v) is int for v in flapping)):
            raise ValueError(f'"flapping" must be [transitions, window_ms] or null, got {json.dumps(flapping)}')
        counters = found.get("counters") or {}
        if not isinstance(counters, dict) or not all(type(v) is int for v in counters.values()):
            raise ValueError(f'"counters" must be an object of counts, got {json.dumps(counters)[:100]}')
        tails, outcomes = found.get("tails"), found.get("outcomes") or []
        if tails is not None and not isinstance(tails, str):
            raise ValueError(f'"tails" must be a path or null, got {json.dumps(tails)[:100]}')
        if not isinstance(outcomes, list) or not all(isinstance(o, str) for o in outcomes):
            raise ValueError(f'"outcomes" must be a list of paths, got {json.dumps(outcomes)[:100]}')
        prefix = out.rstrip("/")

        def full(path: str) -> str:
            return path if "://" in path or path.startswith("/") else f"{prefix}/{path}"

        return cls(found["status_topic"], found["history_topic"], parsed, [full(b) for b in batches], records,
                   from_ms, as_of_ms, (flapping[0], flapping[1]) if flapping else None, counters,
                   full(tails) if tails else None, [full(o) for o in outcomes])


def _json_type(value: Any) -> str:
    """How JSON names a value's type, for error messages."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def read_local_text(path: str) -> str | None:
    """A small local file's text (``path`` without a URL scheme), or None when it does not exist."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def is_local(path: str) -> bool:
    """Whether a path is a local one (no URL scheme): read and written without Spark."""
    return "://" not in path
