"""The class-data-sharing archive of local runs: the classes a local Spark's JVM loads, saved once and mapped by the
next JVMs instead of being loaded again (JDK 13+ dynamic archives; a bare Spark start went from 11.8 s to 5.5 s,
docs/BENCHMARKS.md).

One archive per JDK, PySpark version and class path, in ``~/.cache/status-store/cds`` (``$XDG_CACHE_HOME`` if set).
The JVM maps an archive only on the JDK build that wrote it and only when the class path it runs with starts with the
one the archive was written with (each entry the same file, by name or link, a jar of the same size and modification
time: HotSpot's ``FileMapInfo::validate_shared_path_table``); so two installs of the same Spark jars (two venvs)
each need their own archive, and the archive is named by the resolved class path too (``spark_class_path``). The
first local run without one asks its JVM to write one at exit (``-XX:ArchiveClassesAtExit``, under a name of its
own) and, once the run is done, stops that JVM and puts the archive in place (``finish``); the runs after it map it
(``-XX:SharedArchiveFile``). A JVM checks an archive before it maps it and refuses one it cannot use (another JDK
build, changed Spark jars, another heap layout): the run goes on without it, its JVM's log says so, and the archive
is removed, so the next run writes a new one. The JVM's own warnings go to its stderr (the run's log), not to stdout.

The cache stays bounded: an archive written for a class path replaces that path's archives of other PySpark versions
(the jars there changed: the JVM would refuse them), an archive no run mapped for ``UNUSED_DAYS`` days (a venv since
removed, a JDK since upgraded) is removed, and so are archives of the earlier naming (by JDK and PySpark only), which
no run maps any more.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: How long the JVM may take to write a new archive at its exit.
DUMP_TIMEOUT_S = 120.0
#: Java options that say what to do about class data sharing: a run that gives one is left alone.
USER_FLAGS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
#: What the JVM logs when it does not use an archive (refused for whatever reason).
REFUSED = "Unable to use shared archive"
MAPPED = "Mapped dynamic region"
#: An archive no run mapped (or wrote) for this long is removed.
UNUSED_DAYS = 30
#: The earlier naming, by JDK and PySpark version only: no run maps those archives any more.
_UNNAMED_PATH = re.compile(r"spark-(?!.*-cp-)[^/]+-jdk-[0-9a-f]{16}\.jsa")


def cache_dir() -> Path:
    """Where the archives live."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "status-store" / "cds"


@dataclass
class ClassData:
    """The archive of one JVM start: mapped (``archive`` exists) or written at the JVM's exit (``dumping``)."""

    archive: Path
    #: The JVM's class-data log for this start (whether it mapped the archive).
    jvm_log: Path
    #: Where the JVM writes the new archive at its exit, when there was none.
    dumping: Path | None

    @classmethod
    def for_runtime(cls, java_version_text: str, java: str, pyspark_version: str, class_path: Sequence[str],
                    directory: Path | None = None) -> ClassData:
        """The archive for this JDK (its binary and full version text), PySpark version and class path (its entries
        in order; ``spark_class_path``), each entry resolved to the file it names."""
        directory = directory or cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(directory)
        jdk = _digest(f"{os.path.realpath(java)}\n{java_version_text}")
        path = _digest("\n".join(_resolved(entry) for entry in class_path))
        archive = directory / f"spark-{pyspark_version}-cp-{path}-jdk-{jdk}.jsa"
        own = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        dumping = None if archive.exists() else directory / f"{archive.name}.{own}.tmp"
        return cls(archive, directory / f"jvm-{own}.log", dumping)

    def java_options(self) -> str:
        """The JVM's options: map the archive, or write one at exit; warnings to stderr, class data to ``jvm_log``."""
        use = (f"-XX:ArchiveClassesAtExit={self.dumping}" if self.dumping is not None
               else f"-XX:SharedArchiveFile={self.archive}")
        return f"{use} -Xlog:disable -Xlog:all=warning:stderr -Xlog:cds=info,cds+dynamic=info:file={self.jvm_log}"

    def check(self) -> bool:
        """After the JVM started: whether it mapped the archive; one it refused is removed (the next run writes a new
        one). True while an archive is being written."""
        text = _read(self.jvm_log)
        with contextlib.suppress(OSError):
            self.jvm_log.unlink()
        if self.dumping is not None:
            return True
        if MAPPED in text and REFUSED not in text:
            with contextlib.suppress(OSError):  # used: kept past UNUSED_DAYS
                os.utime(self.archive)
            return True
        log.warning("the JVM did not use the class-data archive %s (%s); removed: the next run writes a new one",
                    self.archive, next((line for line in text.splitlines() if REFUSED in line), "not mapped"))
        with contextlib.suppress(OSError):
            self.archive.unlink()
        return False

    def finish(self, process: subprocess.Popen[bytes] | None) -> None:
        """After the run: when this JVM writes a new archive, close it (``process``: its ``Popen``; it exits at the
        end of its input) and put the archive in place once it is written (bounded by ``DUMP_TIMEOUT_S``)."""
        if self.dumping is None or process is None:
            return
        began = time.monotonic()
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(DUMP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a JVM that does not end in time: its archive is not trusted
            log.warning("the JVM did not exit within %g s of the run's end; no class-data archive", DUMP_TIMEOUT_S)
            return
        if process.returncode == 0 and self.dumping.exists() and self.dumping.stat().st_size > 0:
            os.replace(self.dumping, self.archive)
            log.info("class-data archive %s written in %.1f s", self.archive, time.monotonic() - began)
            self._replace_other_versions()
        else:
            log.warning("the JVM wrote no class-data archive (exit code %s)", process.returncode)
        with contextlib.suppress(OSError):
            self.dumping.unlink()

    def _replace_other_versions(self) -> None:
        """This class path's archives (on this JDK) of other PySpark versions: its jars are this version's now."""
        _, same_path = self.archive.name.split("-cp-", 1)
        for other in self.archive.parent.glob(f"spark-*-cp-{same_path}"):
            if other != self.archive:
                with contextlib.suppress(OSError):
                    other.unlink()


def spark_class_path(spark_home: str, conf: Mapping[str, str], env: Mapping[str, str] = os.environ) -> list[str]:
    """The entries of a local Spark driver's class path (Spark's launcher: the driver's extra class path, the conf
    directory, the jars, the Hadoop and YARN conf directories, ``SPARK_DIST_CLASSPATH``); order and form may differ
    from the launcher's, enough to tell two class paths apart."""
    entries = [*conf.get("spark.driver.extraClassPath", "").split(os.pathsep),
               env.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"), os.path.join(spark_home, "jars", "*"),
               env.get("HADOOP_CONF_DIR", ""), env.get("YARN_CONF_DIR", ""),
               *env.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep)]
    return [entry for entry in entries if entry]


def _resolved(entry: str) -> str:
    """A class path entry as the file it names (a wildcard's directory resolved): the JVM takes a link to the same
    file as that file."""
    head, tail = os.path.split(entry)
    return os.path.join(os.path.realpath(head), tail) if tail == "*" else os.path.realpath(entry)


def _digest(text: str) -> str:
    """A short, stable name for ``text`` in an archive's file name."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _remove_abandoned(directory: Path, age_s: float = 3600.0) -> None:
    """Archives and logs an earlier run started and never finished (killed), after an hour; archives no run mapped
    for ``UNUSED_DAYS``; archives of the earlier naming."""
    now = time.time()
    for path in [*directory.glob("*.tmp"), *directory.glob("jvm-*.log")]:
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > age_s:
                path.unlink()
    for path in directory.glob("spark-*.jsa"):
        with contextlib.suppress(OSError):
            if _UNNAMED_PATH.fullmatch(path.name) or now - path.stat().st_mtime > UNUSED_DAYS * 86400:
                path.unlink()
