"""The durable spool: every status update not yet settled, kept on local disk across crashes.

Optional (``status.storage.spool.path``). A SQLite database in WAL mode (Python's standard library)
holds the latest unsettled value per key. A row is written when an update is submitted and
committed before the HTTP API answers (``commit``; otherwise at the end of that turn of the event
loop: one commit covers every update of a batch or a burst), and removed when the update settles:
written (Kafka has this value or a newer one) or given up under Connect's rules. A failed update
leaves it too (the KIP-1278 behaviour), unless it is parked or its dead letter is not written yet.
On start the store replays what is left, before it serves writes, so a sidecar killed during an
outage loses nothing it accepted.

A replayed update is a retry, and must not overwrite what another writer wrote after it was accepted.
So each row keeps what the store had read of its key when the update was accepted (``base``: the
offset of the key's last record, our own acknowledged writes included; ``deleted_base``: for a task,
the offset of its connector's last tombstone) and ``sent``, a value of the key this process had sent
without an acknowledgement yet (it may be in the topic: our own, not another writer's). The store
compares them with the topic at replay (``StatusStore`` start).

Changes are buffered and written per commit, so a listener call never touches the disk; a database another
process holds locked makes a commit wait at most ``BUSY_TIMEOUT_MS`` and try again on the next turn, never block
the event loop for seconds or break the retry queue. A commit writes two transactions: first the deletes of the
rows whose updates settled, alone (they need no room: a full disk drains as Kafka takes the writes), then the new
rows with the deletes of the rows they replace (a key's row goes only once its newer one is on disk). A change
undone before it was committed is dropped, not written (a row deleted before its insert was committed is never
inserted). A commit that cannot be written (a full disk, an I/O error, a lock) is tried again after a backoff
(``RETRY_COMMIT_S``, doubling to ``RETRY_COMMIT_MAX_S``) with the changes kept in memory, never in a tight loop;
meanwhile the spool is not ``writable``, the store refuses new writes (what it accepted could not be made durable)
and ``GET /ready`` says why.

**A spool file deleted (or replaced) while in use** would go on taking rows that no later start can read: SQLite
writes to the open, unlinked file. So the spool checks the file's identity (device and inode of the path against
those of the file it opened) before each commit and every ``IDENTITY_CHECK_S``; when they differ it logs one ERROR,
creates the file anew and writes into it every row the open one holds, before any answer says accepted. If it
cannot (the directory gone for good, a full disk), the spool is not ``writable``: writes are refused until it can.

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
import contextlib
import fcntl
import logging
import os
import socket
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import ClassVar

from ..errors import ConfigError
from ..retry.updates import Outcome, RetryListener, StatusUpdate

log = logging.getLogger(__name__)

SPOOL_KEY = "status.storage.spool.path"
# SQLite's primary result codes for a file that is damaged or no database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26

# One row per key (the store keeps that so), keyed by its version: a row is appended and deleted by its rowid,
# with no index on the key to update (a third of the cost of a keyed upsert and delete).
_COLUMNS = """(
    version INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    safe INTEGER NOT NULL,
    value BLOB,
    base INTEGER,
    deleted_base INTEGER,
    sent BLOB
)"""
_SCHEMA = f"CREATE TABLE IF NOT EXISTS pending {_COLUMNS}"
# Columns added since the first spool format (a spool of an older version is upgraded in place).
_ADDED_COLUMNS = {"base": "INTEGER", "deleted_base": "INTEGER", "sent": "BLOB"}
_UPDATE = "UPDATE pending SET base = ?, sent = ? WHERE version = ?"
# Values bound to one statement at most: a commit writes its rows and deletes in statements of many rows each,
# because Python's sqlite3 lets go of the GIL at every step of a statement, and each step of an
# ``executemany`` then waits for the GIL behind the store's other threads (the producer's delivery reports,
# the reader): many times slower than the row's own work.
_VALUES_PER_STATEMENT = 2048
# How long a commit waits for a lock another process holds before it gives up until the next turn.
BUSY_TIMEOUT_MS = 50
# A commit that could not be written (the database locked, a full disk) is tried again this much later, twice as
# late after each failure in a row, up to the most.
RETRY_COMMIT_S = 0.1
RETRY_COMMIT_MAX_S = 2.0
# The spool file's identity is checked this often (and before each commit).
IDENTITY_CHECK_S = 1.0
# (base, deleted_base) of a key: what the store had read of it when an update was accepted.
Tokens = Callable[[str], tuple[int, int]]


@dataclass(frozen=True, slots=True)
class SpooledUpdate:
    """An update found in the spool at start, with what the store had read of its key when it was accepted
    (None: a row of an older spool format, which did not keep it)."""

    key: str
    kind: str
    safe: bool
    value: bytes | None
    base: int | None = None
    deleted_base: int | None = None
    sent: bytes | None = None


class _Row:
    """The spool row of a key, as this process last wrote it."""

    __slots__ = ("base", "deleted_base", "sent", "update", "version")

    def __init__(self, version: int, update: StatusUpdate, base: int | None, deleted_base: int | None,
                 sent: bytes | None) -> None:
        self.version, self.update, self.base, self.deleted_base, self.sent = version, update, base, deleted_base, sent


class Spool(RetryListener):
    """The unsettled updates of one store, on disk: a listener of its retry queue for the updates submitted and
    unparked; an update's outcome is given by what decides after its last retry (``settled``), which knows whether
    its row must stay."""

    def __init__(self, path: str | Path, tokens: Tokens | None = None) -> None:
        """``tokens(key)``: what the store has read of a key (see the module's docstring); without it rows keep
        none."""
        self.path = Path(path)
        self._tokens = tokens
        _check_path(self.path)
        self._lock = _SpoolLock(self.path)
        try:
            self._db = self._open()
            self._upgrade()
        except BaseException:
            self._lock.release()
            raise
        # The (device, inode) of the file opened: the path naming another file (or none) means it was deleted.
        self._identity = _identity(self.path)
        self._watch: asyncio.TimerHandle | None = None
        row = self._db.execute("SELECT MAX(version) FROM pending").fetchone()
        self._next_version = (row[0] or 0) + 1
        # The versions of the rows earlier runs left, by key, until this run replaces or forgets them.
        self._earlier: dict[str, int] = dict(self._db.execute("SELECT key, version FROM pending"))
        # The versions of the rows kept for settled updates (by update number) until they are released.
        self._kept: dict[int, int] = {}
        # Each key's row as this process wrote it last (in the file until it is deleted).
        self._rows: dict[str, _Row] = {}
        # Changes not yet committed: the rows of settled updates to delete (committed first, alone); rows added (by
        # version), rows' read tokens moved on, the rows they replace to delete (committed together). A version is
        # added once, before anything else happens to it; a change to a row whose insert is not committed yet
        # changes the insert instead (or drops it, for a delete).
        self._settled: list[int] = []
        self._inserts: dict[int, tuple[object, ...]] = {}
        self._updates: list[tuple[int | None, bytes | None, int]] = []
        self._replaced: list[int] = []
        self._commit_scheduled = False
        self._retry: asyncio.TimerHandle | None = None
        self.retry_delay_s = RETRY_COMMIT_S
        # Since when commits fail, and why (None: the last commit was written).
        self._failing_since: float | None = None
        self.failure: str | None = None
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

    def _upgrade(self) -> None:
        """Bring a spool of an older version to this one, keeping its rows in order: add the columns it lacks, and
        move rows keyed by their key to rows keyed by their version. Waits briefly for another process's lock."""
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        columns = {row[1]: row[5] for row in db.execute("PRAGMA table_info(pending)")}  # name -> primary key
        for name, kind in _ADDED_COLUMNS.items():
            if name not in columns:
                db.execute(f"ALTER TABLE pending ADD COLUMN {name} {kind}")
        if columns.get("version"):
            return
        names = "key, kind, safe, value, base, deleted_base, sent"
        db.execute("BEGIN")
        try:
            db.execute(f"CREATE TABLE pending_by_version {_COLUMNS}")
            # Numbered anew in their order: an older file's versions need not be unique.
            db.execute(f"INSERT INTO pending_by_version ({names}) SELECT {names} FROM pending ORDER BY version")
            db.execute("DROP TABLE pending")
            db.execute("ALTER TABLE pending_by_version RENAME TO pending")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def pending(self) -> list[SpooledUpdate]:
        """What the spool holds, oldest first."""
        rows = self._db.execute(
            "SELECT key, kind, safe, value, base, deleted_base, sent FROM pending ORDER BY version").fetchall()
        return [SpooledUpdate(key, kind, bool(safe), value, base, deleted_base, sent)
                for key, kind, safe, value, base, deleted_base, sent in rows]

    def __len__(self) -> int:
        count: int = self._db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
        return count

    def forget(self, key: str) -> None:
        """Drop a key's row (a replayed update that Connect's rules no longer allow, or that the topic has)."""
        row = self._rows.pop(key, None)
        version = row.version if row is not None else self._earlier.pop(key, None)
        if version is not None:
            self._drop_row(version, self._settled)
            self._changed()

    def _drop_row(self, version: int, deletes: list[int]) -> None:
        """The row of this version goes: its insert is dropped if not committed yet, else it is deleted with
        ``deletes``."""
        if self._inserts.pop(version, None) is None:
            deletes.append(version)

    def commit(self) -> bool:
        """Make every change so far durable (the WAL survives the process being killed). False when they cannot
        be written now (another process holds the database locked, the disk is full): the changes are kept
        and committed on a later try; the deletes of settled rows may have been written already."""
        self._commit_scheduled = False
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._closed:
            return self._failing_since is None
        try:
            self._check_identity()
            if self._settled:
                # Alone first: a delete needs no room, so a full disk drains as the updates settle.
                self._transaction(lambda db: _DELETE.run(db, self._settled))
                self._settled = []
            if self._inserts or self._updates or self._replaced:
                self._transaction(self._write_rows)
                self._inserts, self._updates, self._replaced = {}, [], []
        except sqlite3.DatabaseError as e:
            self._unwritable(e)
            return False
        self.retry_delay_s = RETRY_COMMIT_S
        if self._failing_since is not None:
            log.warning("The spool %s takes writes again after %.1f s", self.path,
                        time.monotonic() - self._failing_since)
            self._failing_since = self.failure = None
        return True

    def _check_identity(self) -> None:
        """The file at the path is the one open; else (deleted, or replaced) it is made anew with every row the open
        one holds (``sqlite3.DatabaseError`` when it cannot be)."""
        try:
            if _identity(self.path) == self._identity:
                return
        except OSError:
            pass  # gone: made anew below
        rows = self._db.execute(f"SELECT {_NAMES} FROM pending ORDER BY version").fetchall()
        if self._failing_since is None or not (self.failure or "").startswith(_DELETED):
            log.error("The spool file %s was deleted or replaced while in use (the path no longer names the file "
                      "this process opened): making it anew and writing again the %d row(s) it held; a start with "
                      "the file as it was would have replayed none of them", self.path, len(rows))
        try:
            _check_path(self.path)
            if self.path.exists():
                # Replaced: what is there now is not ours; it is moved aside, never read as this spool.
                aside = self.path.with_name(f"{self.path.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
                self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    self.path.with_name(self.path.name + suffix).unlink()
            db = self._connect()
        except (ConfigError, _CorruptSpool, OSError) as e:
            raise sqlite3.OperationalError(f"{_DELETED} and cannot be made anew: {e}") from None
        try:
            db.execute("BEGIN")
            _INSERT.run(db, list(chain.from_iterable(rows)))
            db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            db.close()
            raise sqlite3.OperationalError(f"{_DELETED} and its rows cannot be written again: {e}") from None
        old, self._db = self._db, db
        old.close()
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._identity = _identity(self.path)
        log.warning("The spool %s was made anew with the %d row(s) it held", self.path, len(rows))

    def _watch_identity(self) -> None:
        """Now and then, whether the spool file is still there (a commit would find out too, but none may come)."""
        self._watch = None
        if self._closed:
            return
        if not self._commit_scheduled:
            self.commit()
        self._watch = asyncio.get_running_loop().call_later(IDENTITY_CHECK_S, self._watch_identity)

    def _write_rows(self, db: sqlite3.Connection) -> None:
        _INSERT.run(db, list(chain.from_iterable(self._inserts.values())))
        db.executemany(_UPDATE, self._updates)
        _DELETE.run(db, self._replaced)

    def _transaction(self, write: Callable[[sqlite3.Connection], None]) -> None:
        """``write`` in one transaction, committed; rolled back when it fails (``sqlite3.DatabaseError``)."""
        db = self._db
        try:
            db.execute("BEGIN")
            write(db)
            db.execute("COMMIT")
        except sqlite3.DatabaseError:
            with contextlib.suppress(sqlite3.DatabaseError):  # SQLite may have rolled back already
                if db.in_transaction:
                    db.execute("ROLLBACK")
            raise

    @property
    def writable(self) -> bool:
        """Whether the last commit was written (False from a failed one until one is written again)."""
        return self._failing_since is None

    @property
    def unwritten_changes(self) -> int:
        """Changes kept in memory until a commit writes them (rows added, moved on or deleted)."""
        return self._pending_changes

    def _unwritable(self, error: sqlite3.DatabaseError) -> None:
        self.failure = str(error)
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.error("Cannot write to the spool %s (%s): %d change(s) wait in memory and are tried again from every "
                      "%.1f s to every %.1f s; until one is written, new writes are refused (a crash now would lose "
                      "what they hold)", self.path, error, self._pending_changes, RETRY_COMMIT_S, RETRY_COMMIT_MAX_S)
        delay = self.retry_delay_s
        self.retry_delay_s = min(RETRY_COMMIT_MAX_S, delay * 2)
        with contextlib.suppress(RuntimeError):  # no event loop: the next change or close tries again
            self._retry = asyncio.get_running_loop().call_later(delay, self.commit)
            # Changes meanwhile wait for this try.
            self._commit_scheduled = True

    @property
    def _pending_changes(self) -> int:
        return len(self._settled) + len(self._inserts) + len(self._updates) + len(self._replaced)

    def _changed(self) -> None:
        """A change was buffered: it is committed at the end of this turn of the event loop (or by ``commit``)."""
        if not self._commit_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop: commit now
                self.commit()
                return
            loop.call_soon(self.commit)
            self._commit_scheduled = True
            if self._watch is None:
                self._watch = loop.call_later(IDENTITY_CHECK_S, self._watch_identity)

    def release(self, update: StatusUpdate) -> None:
        """A kept update is done with: its row goes unless a newer value of the key replaced it."""
        version = self._kept.pop(update.number, None)
        if version is not None:
            self._delete(update.key, version)

    def _delete(self, key: str, version: int) -> None:
        """The key's row goes unless a newer value of the key replaced it."""
        row = self._rows.get(key)
        if row is not None and row.version <= version:
            del self._rows[key]
            self._drop_row(row.version, self._settled)
            self._changed()

    def close(self) -> bool:
        """Commit and close the database (its rows stay for the next start). False when the last changes could not
        be written (logged): the spool holds what it held before them."""
        committed = self.commit()
        if not committed:
            log.error("Closing the spool %s with %d change(s) it could not write", self.path, self._pending_changes)
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
        self._db.close()
        self._lock.release()
        return committed

    # ----------------------------------------------------------------------------- RetryListener

    def on_submitted(self, update: StatusUpdate) -> None:
        if update.spooled:
            self._add(update)

    def adopt(self, update: StatusUpdate) -> None:
        """Keep an unsettled update that was not spooled (its writer handed it over for good): from now on it is
        replayed after a crash, as a write accepted now."""
        if not update.spooled and update.outcome is None:
            update.spooled = True
            self._add(update)

    def _add(self, update: StatusUpdate) -> None:
        version = self._next_version
        self._next_version += 1
        row = self._rows.get(update.key)
        if row is None:
            base, deleted_base = self._tokens(update.key) if self._tokens is not None else (None, None)
            sent = None
        else:
            # The key's earlier value is unsettled: what was read of the key then still holds, and if that value
            # was sent, it may be in the topic by now (our own write, not another writer's).
            base, deleted_base = row.base, row.deleted_base
            sent = row.update.value if row.update.attempts > 0 else row.sent
        replaced = row.version if row is not None else self._earlier.pop(update.key, None)
        if replaced is not None:
            self._drop_row(replaced, self._replaced)
        self._rows[update.key] = _Row(version, update, base, deleted_base, sent)
        self._inserts[version] = (version, update.key, update.kind, int(update.safe), update.value, base, deleted_base,
                                  sent)
        self._changed()

    def settled(self, update: StatusUpdate, outcome: Outcome, keep: bool = False) -> None:
        """The update has its outcome: its row goes, unless the outcome is a failure and ``keep`` (a parked update,
        or one whose dead letter is not written yet: ``release`` ends it then)."""
        row = self._rows.get(update.key)
        if row is None or outcome.stopped:
            return  # the row is gone already, or (stopped) not settled: the next start replays it
        if row.update is not update:
            # A newer value of the key replaced this one's row. Written: the newer value now stands on this write
            # of ours, not on what was read before.
            if outcome.delivery is not None:
                row.base = outcome.delivery.offset
                if row.sent == update.value:
                    row.sent = None
                inserted = self._inserts.get(row.version)
                if inserted is not None:
                    self._inserts[row.version] = (*inserted[:5], row.base, inserted[6], row.sent)
                else:
                    self._updates.append((row.base, row.sent, row.version))
                self._changed()
            return
        if not outcome.ok and keep:
            self._kept[update.number] = row.version
            return
        # Written (Kafka has this value), given up, or failed.
        self._delete(update.key, row.version)

    def on_unparked(self, update: StatusUpdate, again: StatusUpdate | None, reason: str) -> None:
        self.release(update)


class _ManyRows:
    """A statement over a list of rows (``VALUES (...), (...)`` or ``IN (...)``), run for many rows in a few
    statements: each of a power of two rows, at most ``_VALUES_PER_STATEMENT`` values, so that few distinct
    statements exist and SQLite's statement cache keeps them prepared."""

    def __init__(self, head: str, row: str, tail: str, width: int) -> None:
        self._head, self._row, self._tail, self._width = head, row, tail, width
        self._texts: dict[int, str] = {}  # by rows

    def run(self, db: sqlite3.Connection, values: Sequence[object]) -> None:
        """Run the statement for ``values``, ``width`` of them a row."""
        width = self._width
        most = min(_VALUES_PER_STATEMENT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)) // width
        rows = 1 << (max(1, most).bit_length() - 1)
        start, end = 0, len(values)
        while start < end:
            while rows * width > end - start:
                rows //= 2
            db.execute(self._text(rows), values[start:start + rows * width])
            start += rows * width

    def _text(self, rows: int) -> str:
        text = self._texts.get(rows)
        if text is None:
            text = self._texts[rows] = self._head + ", ".join([self._row] * rows) + self._tail
        return text


_NAMES = "version, key, kind, safe, value, base, deleted_base, sent"
_INSERT = _ManyRows(f"INSERT INTO pending ({_NAMES}) VALUES ", "(?, ?, ?, ?, ?, ?, ?, ?)", "", 8)
# How a failure of the spool's file begins.
_DELETED = "the spool file was deleted or replaced while in use"


def _identity(path: Path) -> tuple[int, int]:
    """The device and inode of the file at ``path`` (OSError when there is none)."""
    found = path.stat()
    return found.st_dev, found.st_ino
_DELETE = _ManyRows("DELETE FROM pending WHERE version IN (", "?", ")", 1)


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
