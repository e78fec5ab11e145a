"""The durable spool: every status update not yet settled, kept on local disk across crashes.

Optional (``status.storage.spool.path``). A SQLite database in WAL mode (Python's standard library)
holds the latest unsettled value per key. A row is written when an update is submitted and
committed before the HTTP API answers (``commit``; otherwise at the end of that turn of the event
loop: one commit covers every update of a batch or a burst, not one fsync-free commit per update),
and removed when the update settles: written (Kafka has this value or
a newer one) or given up under Connect's rules. A failed update leaves it too (the KIP-1278
behaviour); the row stays only while the update is unsettled. On start the store replays what
is left, before it serves writes, so a sidecar killed during an outage loses nothing it accepted.

A spool that cannot be opened or read is moved aside (``<path>.corrupt-<time>``) with an error
naming both paths, never silently discarded, and a new one is started.
"""

from __future__ import annotations

import asyncio
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
        self._db = self._open()
        row = self._db.execute("SELECT MAX(version) FROM pending").fetchone()
        self._next_version = (row[0] or 0) + 1
        # The spool version of each update of this process, by update number, until it settles or is released.
        self._versions: dict[int, int] = {}
        self._kept: dict[int, int] = {}
        self._commit_scheduled = False
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
