"""The durable spool: every status update not yet settled, kept on local disk across crashes.

Optional (``status.storage.spool.path``). A SQLite database in WAL mode (Python's standard library, ``spool_db.py``)
holds the latest unsettled value per key. A row is written when an update is submitted and committed before the HTTP
API answers (``commit``; otherwise at the end of that turn of the event loop: one commit covers every update of a
batch or a burst), and removed when the update settles: written (Kafka has this value or a newer one) or given up
under Connect's rules. A failed update leaves it too (the KIP-1278 behaviour), unless it is parked or its dead letter
is not written yet. On start the store replays what is left, before it serves writes, so a sidecar killed during an
outage loses nothing it accepted.

A replayed update is a retry, and must not overwrite what another writer wrote after it was accepted.
So each row keeps what the store had read of its key when the update was accepted (``base``: the
offset of the key's last record, our own acknowledged writes included; ``deleted_base``: for a task,
the offset of its connector's last tombstone) and ``sent``, a value of the key this process had sent
without an acknowledgement yet (it may be in the topic: our own, not another writer's). The store
compares them with the topic at replay (``StatusStore`` start).

Changes are buffered and written per commit, so a listener call never touches the disk; a database another
process holds locked makes a commit wait at most ``BUSY_TIMEOUT_MS`` and try again on the next turn, never block
the event loop for seconds or break the retry queue. A commit writes first the deletes of the rows whose updates
settled, alone (on a full volume with the room of the spool's reserve: a full volume drains as Kafka takes the
writes), then, with the reserve whole, the new rows and the deletes of the rows they replace (a key's row goes only
once its newer one is on disk). A change
undone before it was committed is dropped, not written (a row deleted before its insert was committed is never
inserted). A commit that cannot be written (a full disk, an I/O error, a lock) is tried again after a backoff
(``spool_health.py``) with the changes kept in memory, never in a tight loop; meanwhile the spool is not
``writable``, the store refuses new writes (what it accepted could not be made durable) and ``GET /ready`` says why.
The file is checked before each commit and every ``IDENTITY_CHECK_S``: one deleted or replaced while in use is made
anew with every row (``spool_db.py``). After each commit the spool's tally says how far the file has taken writes,
so that a start notices what it lost (``spool_tally.py``).

The spool's directory is created 0700 and its files 0600: they hold statuses. One process at a time uses a spool: it
holds an ``flock`` on ``<path>.lock`` (``spool_file.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..retry.updates import Outcome, RetryListener, StatusUpdate
from .spool_db import Row, SpoolDatabase
from .spool_file import SPOOL_KEY, Reserve, SpoolLock, check_path
from .spool_health import SpoolHealth
from .spool_tally import SpoolLoss, SpoolTally

log = logging.getLogger(__name__)

# The spool file's identity is checked this often (and before each commit).
IDENTITY_CHECK_S = 1.0


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


# (base, deleted_base) of a key: what the store had read of it when an update was accepted.
Tokens = Callable[[str], tuple[int, int]]


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
        check_path(self.path)
        self._lock = SpoolLock(self.path)
        try:
            reserve = Reserve(self.path)
            self._file = SpoolDatabase(self.path, reserve)
            try:
                self._tally = SpoolTally(self.path)
            except BaseException as e:
                self._file.close()
                if isinstance(e, OSError):
                    raise ConfigError(SPOOL_KEY, str(self.path), f"its tally cannot be written: {e}") from None
                raise
        except BaseException:
            self._lock.release()
            raise
        moved = self._file.moved_aside
        self._tally.check(self._file.high, self._file.held,
                          f"the file failed its integrity check and was moved aside to {moved}" if moved is not None
                          else "commits missing from its file: its WAL damaged or lost, or the file replaced by an "
                               "older copy")
        with contextlib.suppress(OSError):  # no room for it: the first commit says so, and writes are refused
            reserve.make()
        self._health = SpoolHealth(self.path)
        self._watch: asyncio.TimerHandle | None = None
        # Above every number the file or its tally has seen: a number is never used twice, even after a loss.
        self._next_version = max(self._file.high, self._tally.high) + 1
        # The versions of the rows earlier runs left, by key, until this run replaces or forgets them.
        self._earlier: dict[str, int] = self._file.versions_by_key()
        # The versions of the rows kept for settled updates (by update number) until they are released.
        self._kept: dict[int, int] = {}
        # Each key's row as this process wrote it last (in the file until it is deleted).
        self._rows: dict[str, _Row] = {}
        # Changes not yet committed: the rows of settled updates to delete (committed first, alone); rows added (by
        # version), rows' read tokens moved on, the rows they replace to delete (committed together). A version is
        # added once, before anything else happens to it; a change to a row whose insert is not committed yet
        # changes the insert instead (or drops it, for a delete).
        self._settled: list[int] = []
        self._inserts: dict[int, Row] = {}
        self._updates: list[tuple[int | None, bytes | None, int]] = []
        self._replaced: list[int] = []
        self._commit_scheduled = False
        self._closed = False

    def pending(self) -> list[SpooledUpdate]:
        """What the spool holds, oldest first."""
        return [SpooledUpdate(key, kind, bool(safe), value, base, deleted_base, sent)
                for key, kind, safe, value, base, deleted_base, sent
                in self._file.rows("key, kind, safe, value, base, deleted_base, sent")]

    def __len__(self) -> int:
        return self._file.count()

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
        self._health.cancel()
        if self._closed:
            return self._health.writable
        try:
            self._file.check_identity()
            if self._settled:
                # Alone first, with the reserve's room when the volume is full: a full volume drains as Kafka takes
                # the writes.
                self._file.delete(self._settled)
            # Never a row added without the reserve whole: the next full volume would not drain.
            self._file.ensure_reserve()
            if self._inserts or self._updates or self._replaced:
                self._file.write(self._inserts, self._updates, self._replaced)
                self._updates, self._replaced = [], []
            self._tally.record(self._file.high, self._file.held)
        except (sqlite3.DatabaseError, OSError) as e:
            reason = self._file.explain(e) if isinstance(e, sqlite3.DatabaseError) else (
                f"its tally {self._tally.path} cannot be written: {e.strerror}")
            with contextlib.suppress(OSError):  # what the transactions that went through hold
                self._tally.record(self._file.high, self._file.held)
            # Changes meanwhile wait for the next try.
            self._commit_scheduled = self._health.failed(reason, self._pending_changes, self.commit)
            return False
        self._health.written()
        return True

    def _watch_identity(self) -> None:
        """Now and then, whether the spool file is still there (a commit would find out too, but none may come), and
        its reserve whole."""
        self._watch = None
        if self._closed:
            return
        self._file.check_reserve()
        if not self._commit_scheduled:
            self.commit()
        self._watch = asyncio.get_running_loop().call_later(IDENTITY_CHECK_S, self._watch_identity)

    @property
    def writable(self) -> bool:
        """Whether the last commit was written (False from a failed one until one is written again)."""
        return self._health.writable

    @property
    def failure(self) -> str | None:
        """Why the spool cannot be written (None while it can)."""
        return self._health.failure

    @property
    def rows(self) -> int:
        """How many rows the file holds (kept as its transactions commit)."""
        return self._file.held

    @property
    def losses(self) -> list[SpoolLoss]:
        """Accepted writes found lost at a start, not acknowledged yet (``spool_tally.py``)."""
        return list(self._tally.losses)

    def acknowledge_losses(self) -> list[SpoolLoss]:
        """An operator has seen the losses: they are no longer reported; the ones acknowledged."""
        return self._tally.acknowledge()

    @property
    def retry_delay_s(self) -> float:
        """How long after the next failed commit the one after it is tried."""
        return self._health.retry_delay_s

    @property
    def unwritten_changes(self) -> int:
        """Changes kept in memory until a commit writes them (rows added, moved on or deleted)."""
        return self._pending_changes

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
        self._health.cancel()
        if self._watch is not None:
            self._watch.cancel()
        self._file.close()
        self._tally.close()
        self._lock.release()
        return committed

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
