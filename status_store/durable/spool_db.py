"""The spool's SQLite database: opened and checked whole, upgraded from older formats, written in transactions of
many rows a statement, and made anew when its file is deleted or replaced while in use.

A spool file that fails SQLite's integrity check is moved aside (``<path>.corrupt-<time>``) with an error naming both
paths, never silently discarded, and a new one is started. Anything else that keeps SQLite from using it is a
configuration error, and nothing is moved.

**A full volume drains.** SQLite needs room on the volume to delete rows: the WAL takes the changed pages first, and
only a whole checkpoint (the WAL's pages copied into the file, which may grow) lets it start over. So the WAL is kept
short (checkpointed past a quarter of the reserve, rows inserted in transactions of an eighth of it), and when a
delete finds the volume full, the reserve (``spool_file.Reserve``) is given back: the checkpoint completes, the rows
go (in smaller transactions while room is short), and before rows are added again the reserve is made again, from
room the volume has or the file gives back (the WAL emptied, the file rewritten without its free pages).

**A spool file deleted (or replaced) while in use** would go on taking rows that no later start can read: SQLite
writes to the open, unlinked file. So ``check_identity`` compares the file's identity (device and inode of the path
against those of the file opened); when they differ it logs one ERROR, creates the file anew and writes into it every
row the open one holds. If it cannot (the directory gone for good, a full disk), it raises: the spool is not written
until it can.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .spool_file import SPOOL_KEY, Reserve, check_path, identity

log = logging.getLogger(__name__)

# SQLite's primary result codes for a file that is damaged or no database at all, and for one it cannot write.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_FULL = 13
_CANNOT_WRITE = {3, 8, 10, 14}  # SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN

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
# The highest version the file has taken, written with the rows (the rows holding it may be deleted since): what the
# tally beside the file is compared with at start (``spool_tally.py``).
_ACCEPTED = "CREATE TABLE IF NOT EXISTS accepted (high INTEGER NOT NULL)"
_SET_HIGH = "UPDATE accepted SET high = ?"
# Columns added since the first spool format (a spool of an older version is upgraded in place).
_ADDED_COLUMNS = {"base": "INTEGER", "deleted_base": "INTEGER", "sent": "BLOB"}
NAMES = "version, key, kind, safe, value, base, deleted_base, sent"
_UPDATE = "UPDATE pending SET base = ?, sent = ? WHERE version = ?"
# Values bound to one statement at most: a commit writes its rows and deletes in statements of many rows each,
# because Python's sqlite3 lets go of the GIL at every step of a statement, and each step of an
# ``executemany`` then waits for the GIL behind the store's other threads (the producer's delivery reports,
# the reader): many times slower than the row's own work.
_VALUES_PER_STATEMENT = 2048
# How long a commit waits for a lock another process holds before it gives up until the next turn.
BUSY_TIMEOUT_MS = 50
# A row's bytes besides its key and values, about (SQLite's record header, the integers, the b-tree's cell).
_ROW_BYTES = 48
# How a failure of the spool's file begins.
DELETED = "the spool file was deleted or replaced while in use"
# A row as it is written: version, key, kind, safe, value, base, deleted_base, sent.
Row = tuple[Any, ...]


class SpoolDatabase:
    """The SQLite database of one spool (see the module's docstring)."""

    def __init__(self, path: Path, reserve: Reserve) -> None:
        self.path = path
        self._reserve = reserve
        # Rows are inserted in transactions of at most this many bytes (about): the WAL holds what it can delete.
        self._part_bytes = reserve.size // 8
        # Where a damaged file found at start was moved (None: none was).
        self.moved_aside: Path | None = None
        self.db = self._open()
        try:
            self._upgrade()
        except BaseException:
            self.db.close()
            raise
        # The (device, inode) of the file opened: the path naming another file (or none) means it was deleted.
        self._identity = identity(self.path)
        # The highest version the file has taken, and the rows it holds (kept as its transactions commit).
        self.high = self._accepted_high()
        self.held = self.count()
        # Whether the file's deletion was logged, until it is made anew.
        self._deletion_logged = False

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
            self.moved_aside = aside
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
            # Set before the first access, so that SQLite keeps the WAL's index in the heap, never in a memory-mapped
            # -shm file: a page of that file the kernel could not write (its volume read-only, the file made
            # immutable) killed the process with SIGBUS, no log line. One process uses a spool anyway (its lock).
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            # WAL: a committed row survives the process being killed; NORMAL skips an fsync per commit.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # A short WAL, so that the reserve makes room for a checkpoint on a full volume (see the docstring); what
            # VACUUM copies is kept in memory, never on another volume.
            page: int = db.execute("PRAGMA page_size").fetchone()[0]
            db.execute(f"PRAGMA wal_autocheckpoint = {max(2, self._reserve.size // 4 // page)}")
            db.execute("PRAGMA temp_store = MEMORY")
            # Every page, not just what a query touches: damage found later would fail every start.
            problems = [row[0] for row in db.execute("PRAGMA integrity_check(5)").fetchall()]
            if problems != ["ok"]:
                raise _CorruptSpool("integrity check: " + "; ".join(problems))
            db.execute(_SCHEMA)
            db.execute(_ACCEPTED)
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
        db = self.db
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

    def _accepted_high(self) -> int:
        """The file's highest version; a file of an older format takes its rows' highest."""
        found = self.db.execute("SELECT high FROM accepted").fetchone()
        if found is not None:
            high: int = found[0]
            return high
        high = self.highest_version()
        self.db.execute("INSERT INTO accepted (high) VALUES (?)", (high,))
        return high

    def rows(self, names: str = NAMES) -> list[Row]:
        """Every row (these columns), oldest first."""
        return self.db.execute(f"SELECT {names} FROM pending ORDER BY version").fetchall()

    def count(self) -> int:
        """How many rows the file holds."""
        count: int = self.db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
        return count

    def highest_version(self) -> int:
        """The highest version of a row the file holds (0: none; ``high`` is the highest it took)."""
        highest: int | None = self.db.execute("SELECT MAX(version) FROM pending").fetchone()[0]
        return highest or 0

    def versions_by_key(self) -> dict[str, int]:
        """The version of each key's row."""
        return dict(self.db.execute("SELECT key, version FROM pending"))

    def delete(self, versions: list[int]) -> None:
        """Delete these rows, taken out of ``versions`` as they go (``sqlite3.DatabaseError`` when they cannot all be
        deleted). A volume too full for SQLite to delete them gets the reserve's room."""
        try:
            self.transaction(lambda db: _DELETE.run(db, versions))
        except sqlite3.DatabaseError as e:
            if not _full(e):
                raise
        else:
            self.held -= len(versions)
            versions.clear()
            return
        if self._reserve.held:
            log.warning("The volume of the spool %s is full: its reserve (%s, %d bytes) is given back, so that the "
                        "rows of the writes Kafka took can be deleted; writes are refused until the reserve is whole "
                        "again", self.path, self._reserve.path, self._reserve.size)
            self._reserve.release()
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # Fewer rows a transaction while room is short: each one's pages must fit in the WAL.
        part = max(1, len(versions) // 2)
        while versions:
            try:
                self.transaction(functools.partial(_DELETE.run, values=versions[:part]))
            except sqlite3.DatabaseError as e:
                if not _full(e) or part == 1:
                    raise
                part //= 2
            else:
                self.held -= len(versions[:part])
                del versions[:part]

    def ensure_reserve(self) -> None:
        """The reserve is whole before rows are added: made again when it was given back, from room the volume has or
        the file gives back (``sqlite3.OperationalError`` when there is not enough)."""
        if self._reserve.held:
            return
        with contextlib.suppress(OSError):
            self._reserve.make()
            return
        # The room the file holds and does not use goes back to the volume: the WAL emptied, then, when its free pages
        # would make room for the reserve, the file rewritten without them.
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page: int = self.db.execute("PRAGMA page_size").fetchone()[0]
        if self.db.execute("PRAGMA freelist_count").fetchone()[0] * page >= self._reserve.size:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            self._reserve.make()
        except OSError as e:
            raise sqlite3.OperationalError(f"no room on its volume for the spool's reserve ({self._reserve.path}, "
                                           f"{self._reserve.size} bytes): {e.strerror}") from None
        log.warning("The reserve of the spool %s is whole again (%d bytes)", self.path, self._reserve.size)

    def write(self, inserts: dict[int, Row], updates: Sequence[tuple[int | None, bytes | None, int]],
              deletes: Sequence[int]) -> None:
        """Insert rows, taken out of ``inserts`` as they are written (in transactions of about ``_part_bytes``), and
        with the last of them move rows' read tokens on (base, sent, version) and delete the rows they replace: a
        key's row goes only once its newer one is on disk (``sqlite3.DatabaseError`` when not all is written)."""
        part: list[Row] = []
        size = 0
        for row in list(inserts.values()):
            part.append(row)
            size += _ROW_BYTES + sum(len(row[i] or b"") for i in (1, 4, 7))
            if size >= self._part_bytes:
                self._insert(inserts, part, (), ())
                part, size = [], 0
        self._insert(inserts, part, updates, deletes)

    def _insert(self, inserts: dict[int, Row], part: list[Row],
                updates: Sequence[tuple[int | None, bytes | None, int]], deletes: Sequence[int]) -> None:
        """One transaction: these rows inserted with the file's highest version (rows come in version order), the
        read tokens moved on, the rows replaced deleted."""
        high = part[-1][0] if part else self.high

        def write(db: sqlite3.Connection) -> None:
            _INSERT.run(db, list(chain.from_iterable(part)))
            if high != self.high:
                db.execute(_SET_HIGH, (high,))
            db.executemany(_UPDATE, updates)
            _DELETE.run(db, deletes)
        self.transaction(write)
        for written in part:
            del inserts[written[0]]
        self.high = high
        self.held += len(part) - len(deletes)

    def transaction(self, write: Callable[[sqlite3.Connection], None]) -> None:
        """``write`` in one transaction, committed; rolled back when it fails (``sqlite3.DatabaseError``)."""
        db = self.db
        try:
            db.execute("BEGIN")
            write(db)
            db.execute("COMMIT")
        except sqlite3.DatabaseError:
            with contextlib.suppress(sqlite3.DatabaseError):  # SQLite may have rolled back already
                if db.in_transaction:
                    db.execute("ROLLBACK")
            raise

    def explain(self, error: sqlite3.DatabaseError) -> str:
        """SQLite's error, and for one that says it cannot write, what the system says of writing the spool's journal
        (its volume read-only, the file made immutable or taken from this user): SQLite says only "disk I/O
        error"."""
        reason = str(error)
        if getattr(error, "sqlite_errorcode", 0) & 0xFF not in _CANNOT_WRITE:
            return reason
        # The journal, not the database file: closing a descriptor of that file would drop SQLite's own lock on it.
        journal = self.path.with_name(self.path.name + "-wal")
        try:
            os.close(os.open(journal, os.O_WRONLY))
        except FileNotFoundError:
            return reason
        except OSError as e:
            return f"{reason}: {journal} cannot be written: {e.strerror}"
        return reason

    def check_reserve(self) -> None:
        """Whether the reserve is still whole (someone may have deleted it): it is made again before rows are added."""
        self._reserve.check()

    def check_identity(self) -> None:
        """The file at the path is the one open; else (deleted, or replaced) it is made anew with every row the open
        one holds (``sqlite3.DatabaseError`` when it cannot be)."""
        try:
            if identity(self.path) == self._identity:
                return
        except OSError:
            pass  # gone: made anew below
        rows = self.rows()
        if not self._deletion_logged:
            self._deletion_logged = True
            log.error("The spool file %s was deleted or replaced while in use (the path no longer names the file "
                      "this process opened): making it anew and writing again the %d row(s) it held; a start with "
                      "the file as it was would have replayed none of them", self.path, len(rows))
        try:
            check_path(self.path)
            if self.path.exists():
                # Replaced: what is there now is not ours; it is moved aside, never read as this spool.
                aside = self.path.with_name(f"{self.path.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
                self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    self.path.with_name(self.path.name + suffix).unlink()
            db = self._connect()
        except (ConfigError, _CorruptSpool, OSError) as e:
            raise sqlite3.OperationalError(f"{DELETED} and cannot be made anew: {e}") from None
        try:
            db.execute("BEGIN")
            _INSERT.run(db, list(chain.from_iterable(rows)))
            db.execute("INSERT INTO accepted (high) VALUES (?)", (self.high,))
            db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            db.close()
            raise sqlite3.OperationalError(f"{DELETED} and its rows cannot be written again: {e}") from None
        old, self.db = self.db, db
        old.close()
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._identity = identity(self.path)
        self._deletion_logged = False
        log.warning("The spool %s was made anew with the %d row(s) it held", self.path, len(rows))

    def close(self) -> None:
        """Close the database (what it holds stays for the next start)."""
        self.db.close()


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


_INSERT = _ManyRows(f"INSERT INTO pending ({NAMES}) VALUES ", "(?, ?, ?, ?, ?, ?, ?, ?)", "", 8)
_DELETE = _ManyRows("DELETE FROM pending WHERE version IN (", "?", ")", 1)


def _full(error: sqlite3.DatabaseError) -> bool:
    """Whether SQLite failed for want of room (SQLITE_FULL: "database or disk is full")."""
    return getattr(error, "sqlite_errorcode", 0) & 0xFF == _SQLITE_FULL


class _CorruptSpool(Exception):
    """The spool file is damaged (SQLite says so): it may be moved aside."""
