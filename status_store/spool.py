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

Changes are buffered and written in one transaction per commit, so a listener call never touches the
disk; a database another process holds locked makes a commit wait at most ``BUSY_TIMEOUT_MS`` and try
again on the next turn, never block the event loop for seconds or break the retry queue.

A spool that cannot be opened or read is moved aside (``<path>.corrupt-<time>``) with an error
naming both paths, never silently discarded, and a new one is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .retry_queue import Outcome, RetryListener, StatusUpdate

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    safe INTEGER NOT NULL,
    value BLOB,
    base INTEGER,
    deleted_base INTEGER,
    sent BLOB
)
"""
# Columns added since the first spool format (a spool of an older version is upgraded in place).
_ADDED_COLUMNS = {"base": "INTEGER", "deleted_base": "INTEGER", "sent": "BLOB"}
# How long a commit waits for a lock another process holds before it gives up until the next turn.
BUSY_TIMEOUT_MS = 50
# A commit that found the database locked is tried again this much later.
_RETRY_COMMIT_S = 0.1
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
    """The unsettled updates of one store, on disk; a listener of its retry queue."""

    def __init__(self, path: str | Path, keep: Callable[[StatusUpdate, Outcome], bool] | None = None,
                 tokens: Tokens | None = None) -> None:
        """``keep(update, outcome)``: whether a settled update's row stays (a parked update, or one whose
        dead letter is not written yet) until ``release`` is called for it. ``tokens(key)``: what the store
        has read of a key (see the module's docstring); without it rows keep none."""
        self.path = Path(path)
        self._keep = keep
        self._tokens = tokens
        self._db = self._open()
        self._upgrade()
        row = self._db.execute("SELECT MAX(version) FROM pending").fetchone()
        self._next_version = (row[0] or 0) + 1
        # The spool version of each update of this process, by update number, until it settles or is released.
        self._versions: dict[int, int] = {}
        self._kept: dict[int, int] = {}
        # Each key's row as this process wrote it last.
        self._rows: dict[str, _Row] = {}
        # Changes not yet committed, in order.
        self._changes: list[tuple[str, tuple[object, ...]]] = []
        self._commit_scheduled = False
        self._locked_since: float | None = None
        self._closed = False

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._connect()
        except sqlite3.DatabaseError as e:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                extra = self.path.with_name(self.path.name + suffix)
                if extra.exists():
                    extra.rename(aside.with_name(aside.name + suffix))
            log.error("The spool %s cannot be read (%s); it was moved aside to %s for inspection, and a new "
                      "spool was started. Updates it held are not replayed.", self.path, e, aside)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # WAL: a committed row survives the process being killed; NORMAL skips an fsync per commit.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
            db.execute("SELECT COUNT(*) FROM pending").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _upgrade(self) -> None:
        """Add the columns newer versions keep to a spool of an older one; wait briefly for another process's lock."""
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(pending)")}
        for name, kind in _ADDED_COLUMNS.items():
            if name not in columns:
                self._db.execute(f"ALTER TABLE pending ADD COLUMN {name} {kind}")

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
        self._rows.pop(key, None)
        self._change("DELETE FROM pending WHERE key = ?", (key,))

    def commit(self) -> bool:
        """Make every change so far durable (the WAL survives the process being killed). False when another
        process holds the database locked: the changes are kept and committed on a later try."""
        self._commit_scheduled = False
        if self._closed or not self._changes:
            return True
        changes, db = self._changes, self._db
        try:
            db.execute("BEGIN")
            for sql, parameters in changes:
                db.execute(sql, parameters)
            db.execute("COMMIT")
        except sqlite3.OperationalError as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._locked(e)
            return False
        self._changes = []
        if self._locked_since is not None:
            log.info("The spool %s takes writes again after %.1f s", self.path, time.monotonic() - self._locked_since)
            self._locked_since = None
        return True

    def _locked(self, error: sqlite3.OperationalError) -> None:
        if self._locked_since is None:
            self._locked_since = time.monotonic()
            log.error("Cannot write to the spool %s (%s): %d change(s) wait in memory and are tried again every "
                      "%.1f s; a crash now would lose them", self.path, error, len(self._changes), _RETRY_COMMIT_S)
        with contextlib.suppress(RuntimeError):  # no event loop: the next change or close tries again
            asyncio.get_running_loop().call_later(_RETRY_COMMIT_S, self._commit_later)
            self._commit_scheduled = True

    def _commit_later(self) -> None:
        if self._commit_scheduled:
            self.commit()

    def _change(self, sql: str, parameters: tuple[object, ...]) -> None:
        """Buffer a change, committed at the end of this turn of the event loop (or by ``commit``)."""
        self._changes.append((sql, parameters))
        if not self._commit_scheduled:
            try:
                asyncio.get_running_loop().call_soon(self.commit)
                self._commit_scheduled = True
            except RuntimeError:  # no event loop: commit now
                self.commit()

    def release(self, update: StatusUpdate) -> None:
        """A kept update is done with: its row goes unless a newer value of the key replaced it."""
        version = self._kept.pop(update.number, None)
        if version is not None:
            self._delete(update.key, version)

    def _delete(self, key: str, version: int) -> None:
        row = self._rows.get(key)
        if row is not None and row.version <= version:
            del self._rows[key]
        self._change("DELETE FROM pending WHERE key = ? AND version <= ?", (key, version))

    def close(self) -> None:
        """Commit and close the database (its rows stay for the next start)."""
        if not self.commit():
            log.error("Closing the spool %s with %d change(s) it could not write", self.path, len(self._changes))
        self._closed = True
        self._db.close()

    # ----------------------------------------------------------------------------- RetryListener

    def on_submitted(self, update: StatusUpdate) -> None:
        version = self._next_version
        self._next_version += 1
        self._versions[update.number] = version
        row = self._rows.get(update.key)
        if row is None:
            base, deleted_base = self._tokens(update.key) if self._tokens is not None else (None, None)
            sent = None
        else:
            # The key's earlier value is unsettled: what was read of the key then still holds, and if that value
            # was sent, it may be in the topic by now (our own write, not another writer's).
            base, deleted_base = row.base, row.deleted_base
            sent = row.update.value if row.update.attempts > 0 else row.sent
        self._rows[update.key] = _Row(version, update, base, deleted_base, sent)
        self._change(
            "INSERT INTO pending (key, version, kind, safe, value, base, deleted_base, sent) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET version=excluded.version, "
            "kind=excluded.kind, safe=excluded.safe, value=excluded.value, base=excluded.base, "
            "deleted_base=excluded.deleted_base, sent=excluded.sent",
            (update.key, version, update.kind, int(update.safe), update.value, base, deleted_base, sent),
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
        row = self._rows.get(update.key)
        if outcome.delivery is not None and row is not None and row.version > version:
            # A newer value waits: it now stands on this write of ours, not on what was read before.
            row.base = outcome.delivery.offset
            if row.sent == update.value:
                row.sent = None
            self._change("UPDATE pending SET base = ?, sent = ? WHERE key = ? AND version = ?",
                         (row.base, row.sent, update.key, row.version))
        # Written (Kafka has this value), given up, or failed: the row goes unless a newer value replaced it.
        self._delete(update.key, version)

    def on_unparked(self, update: StatusUpdate, again: StatusUpdate | None, reason: str) -> None:
        self.release(update)
