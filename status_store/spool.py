"""The durable spool: every status update not yet settled, kept on local disk across crashes.

Optional (``status.storage.spool.path``). A SQLite database in WAL mode (Python's standard library)
holds the latest unsettled value per key. A row is written when an update is submitted and
committed before the HTTP API answers (``commit``; otherwise at the end of that turn of the event
loop: one commit covers every update of a batch or a burst, not one fsync-free commit per update),
and removed when the update settles: written (Kafka has this value or
a newer one) or given up under Connect's rules. A failed update leaves it too (the KIP-1278
behaviour); the row stays only while the update is unsettled. On start the store replays what
is left, before it serves writes, so a sidecar killed during an outage loses nothing it accepted.

A spool file that fails SQLite's integrity check is moved aside (``<path>.corrupt-<time>``) with an
error naming both paths, never silently discarded, and a new one is started. Anything else that
keeps the spool from being used (a directory or a device at the path, a directory or file this user
cannot write, another process using it) is a configuration error, and nothing is moved. The spool's
directory is created 0700 and its files 0600: they hold statuses. One process at a time uses a
spool: it holds an ``flock`` on ``<path>.lock``, which names it (pid and host) and which the kernel
releases when the process ends, however it ends.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import socket
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .errors import ConfigError
from .retry_queue import Outcome, RetryListener, StatusUpdate

log = logging.getLogger(__name__)

SPOOL_KEY = "status.storage.spool.path"
# SQLite's primary result codes for a file that is damaged or no database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    safe INTEGER NOT NULL,
    value BLOB
)
"""


@dataclass(frozen=True, slots=True)
class SpooledUpdate:
    """An update found in the spool at start."""

    key: str
    kind: str
    safe: bool
    value: bytes | None


class Spool(RetryListener):
    """The unsettled updates of one store, on disk; a listener of its retry queue."""

    def __init__(self, path: str | Path, keep: Callable[[StatusUpdate, Outcome], bool] | None = None) -> None:
        """``keep(update, outcome)``: whether a settled update's row stays (a parked update, or one whose
        dead letter is not written yet) until ``release`` is called for it."""
        self.path = Path(path)
        self._keep = keep
        _check_path(self.path)
        self._lock = _SpoolLock(self.path)
        try:
            self._db = self._open()
        except BaseException:
            self._lock.release()
            raise
        row = self._db.execute("SELECT MAX(version) FROM pending").fetchone()
        self._next_version = (row[0] or 0) + 1
        # The spool version of each update of this process, by update number, until it settles or is released.
        self._versions: dict[int, int] = {}
        self._kept: dict[int, int] = {}
        self._commit_scheduled = False
        self._closed = False

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except _CorruptSpool as e:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                extra = self.path.with_name(self.path.name + suffix)
                if extra.exists():
                    extra.rename(aside.with_name(aside.name + suffix))
            log.error("The spool %s cannot be read (%s); it was moved aside to %s for inspection, and a new "
                      "spool was started. Updates it held are not replayed.", self.path, e, aside)
        try:
            return self._connect()
        except _CorruptSpool as e:
            raise ConfigError(SPOOL_KEY, str(self.path), f"a new spool is unusable too: {e}") from None

    def _connect(self) -> sqlite3.Connection:
        """Open the spool and check all of it; ``_CorruptSpool`` when the file is damaged, a ``ConfigError``
        when SQLite cannot use it for another reason."""
        # Created here, not by SQLite, to be 0600 (its journal files take the same mode).
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # WAL: a committed row survives the process being killed; NORMAL skips an fsync per commit.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Every page, not just what a query touches: damage found later would fail every start.
            problems = [row[0] for row in db.execute("PRAGMA integrity_check(5)").fetchall()]
            if problems != ["ok"]:
                raise _CorruptSpool("integrity check: " + "; ".join(problems))
            db.execute(_SCHEMA)
        except sqlite3.DatabaseError as e:
            db.close()
            if getattr(e, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
                raise _CorruptSpool(str(e)) from None
            raise ConfigError(SPOOL_KEY, str(self.path), f"SQLite cannot use it: {e}") from None
        except _CorruptSpool:
            db.close()
            raise
        return db

    def pending(self) -> list[SpooledUpdate]:
        """What the spool holds, oldest first."""
        rows = self._db.execute("SELECT key, kind, safe, value FROM pending ORDER BY version").fetchall()
        return [SpooledUpdate(key, kind, bool(safe), value) for key, kind, safe, value in rows]

    def __len__(self) -> int:
        count: int = self._db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
        return count

    def forget(self, key: str) -> None:
        """Drop a key's row (a replayed update that Connect's rules no longer allow)."""
        self._write("DELETE FROM pending WHERE key = ?", (key,))

    def commit(self) -> None:
        """Make every change so far durable (the WAL survives the process being killed)."""
        self._commit_scheduled = False
        if not self._closed and self._db.in_transaction:
            self._db.execute("COMMIT")

    def _write(self, sql: str, parameters: tuple[object, ...]) -> None:
        """Run a change in the open transaction, committed at the end of this turn of the event loop."""
        if not self._db.in_transaction:
            self._db.execute("BEGIN")
        self._db.execute(sql, parameters)
        if not self._commit_scheduled:
            try:
                asyncio.get_running_loop().call_soon(self.commit)
                self._commit_scheduled = True
            except RuntimeError:  # no event loop: commit now
                self.commit()

    def release(self, update: StatusUpdate, forget: bool = False) -> None:
        """A kept update is done with: its row goes unless a newer value of the key replaced it. ``forget``:
        the row goes, whatever replaced it (the update's key was deleted or its generation moved on)."""
        version = self._kept.pop(update.number, None)
        if forget:
            self.forget(update.key)
        elif version is not None:
            self._write("DELETE FROM pending WHERE key = ? AND version <= ?", (update.key, version))

    def close(self) -> None:
        """Commit and close the database (its rows stay for the next start)."""
        self.commit()
        self._closed = True
        self._db.close()
        self._lock.release()

    # ----------------------------------------------------------------------------- RetryListener

    def on_submitted(self, update: StatusUpdate) -> None:
        version = self._next_version
        self._next_version += 1
        self._versions[update.number] = version
        self._write(
            "INSERT INTO pending (key, version, kind, safe, value) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET version=excluded.version, kind=excluded.kind, safe=excluded.safe, "
            "value=excluded.value",
            (update.key, version, update.kind, int(update.safe), update.value),
        )

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        version = self._versions.pop(update.number, None)
        if version is None:
            return
        if outcome.stopped:
            return  # not settled: the next start replays it
        if self._keep is not None and self._keep(update, outcome):
            self._kept[update.number] = version
            return
        # Written (Kafka has this value), given up, or failed: the row goes unless a newer value replaced it.
        self._write("DELETE FROM pending WHERE key = ? AND version <= ?", (update.key, version))


class _CorruptSpool(Exception):
    """The spool file is damaged (SQLite says so): it may be moved aside."""


def _check_path(path: Path) -> None:
    """Refuse, naming the reason, a spool path this process cannot use; create a missing directory (0700)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise ConfigError(SPOOL_KEY, str(path), f"cannot be examined: {e.strerror}") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a device or other special file"
        raise ConfigError(SPOOL_KEY, str(path), f"is {kind}, not a spool file")
    directory = path.parent
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(SPOOL_KEY, str(path), f"its directory cannot be created: {e.strerror}") from None
    # SQLite writes its journal files (-wal, -shm) beside the spool, so the directory must be writable too.
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(SPOOL_KEY, str(path), f"its directory {directory} is not writable by this user "
                                                f"(uid {os.geteuid()})")
    if mode is not None and not os.access(path, os.R_OK | os.W_OK):
        raise ConfigError(SPOOL_KEY, str(path), f"is not readable and writable by this user (uid {os.geteuid()})")


class _SpoolLock:
    """One process at a time on a spool: an exclusive ``flock`` on ``<spool>.lock``, which holds the owner's
    pid and host. The kernel drops it when the owner ends, even by SIGKILL. The spools of one process on
    one path share its lock (a test may look into the spool of a store it runs)."""

    _held: ClassVar[dict[Path, list[int]]] = {}  # lock file -> [descriptor, users]
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, spool: Path) -> None:
        self._file = spool.with_name(spool.name + ".lock").resolve()
        self._released = False
        with self._guard:
            held = self._held.get(self._file)
            if held is not None:
                held[1] += 1
                return
            fd = os.open(self._file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.read(fd, 256).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise ConfigError(SPOOL_KEY, str(spool), f"in use by another status-store ({owner}); two "
                                                         "processes must not share a spool") from None
            except OSError as e:
                os.close(fd)
                raise ConfigError(SPOOL_KEY, str(spool), f"cannot lock {self._file}: {e.strerror}") from None
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
            self._held[self._file] = [fd, 1]

    def release(self) -> None:
        """Give up this spool's share of the lock; the last one unlocks."""
        with self._guard:
            held = self._held.get(self._file)
            if held is None or self._released:
                return
            self._released = True
            held[1] -= 1
            if held[1] == 0:
                del self._held[self._file]
                os.close(held[0])  # closing the descriptor drops the flock
