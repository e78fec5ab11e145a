"""What the spool accepted, kept beside its file, so that a start notices what it lost.

SQLite ignores a WAL it finds damaged (bytes another process wrote into it, a torn write) from the damage on: every
commit after it is gone, and the file that is left passes every check. So after each commit the spool writes, beside
the file, the highest write number the file has taken and how many rows it holds (``<path>.tally``: one record
written in place, no fsync, as durable as the WAL itself at ``synchronous=NORMAL``); the file keeps its own highest
write number (``spool_db.py``). A start that finds the file's number behind the tally's lost what the missing commits
held: at least the rows counted less the rows found, at most the rows counted or the write numbers missing, whichever
is fewer. It is logged at ERROR with the numbers and kept in ``<path>.lost`` (JSON) until an operator acknowledges it
(``DELETE /spool/loss``, or the file deleted while the sidecar is stopped); each start logs it again meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# The tally's record: what it is, the highest write number, the rows held, a CRC-32 of the two numbers.
_MAGIC = b"SSTALLY1"
_RECORD = struct.Struct("<8sQQI")
_NUMBERS = struct.Struct("<QQ")
# The tally file's size: one block, written once, so that a record never needs room on a full volume.
_FILE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SpoolLoss:
    """Accepted writes a start did not find in the spool (None: not known, the tally being damaged)."""

    detected_at: str
    expected_rows: int | None
    found_rows: int
    expected_high: int | None
    found_high: int
    reason: str

    @property
    def at_least(self) -> int:
        """How many accepted writes are lost for sure."""
        return max(0, self.expected_rows - self.found_rows) if self.expected_rows is not None else 0

    @property
    def at_most(self) -> int | None:
        """How many accepted writes may be lost (None: not known)."""
        if self.expected_rows is None or self.expected_high is None:
            return None
        return min(self.expected_rows, self.expected_high - self.found_high)

    def describe(self) -> str:
        """The loss in a sentence, with its numbers."""
        if self.at_most is None:
            return (f"found at {self.detected_at}: {self.reason}; the spool held {self.found_rows} row(s), and "
                    f"how many accepted writes are lost cannot be told")
        count = str(self.at_most) if self.at_most == self.at_least else f"{self.at_least} to {self.at_most}"
        return (f"{count} accepted write(s) lost, found at {self.detected_at}: the spool's last commit held "
                f"{self.expected_rows} row(s), up to write number {self.expected_high}; the start found "
                f"{self.found_rows}, up to write number {self.found_high} ({self.reason})")


class SpoolTally:
    """The tally of one spool and the losses found and not yet acknowledged (see the module's docstring)."""

    def __init__(self, spool: Path) -> None:
        self.path = spool.with_name(spool.name + ".tally")
        self.lost_path = spool.with_name(spool.name + ".lost")
        self.losses = self._read_losses()
        # The last record: (highest write number, rows held); None when there is none; damaged: it cannot be read.
        self.last: tuple[int, int] | None = None
        self.damaged = False
        try:
            found = self.path.read_bytes()
        except FileNotFoundError:
            found = None
        if found is not None and found.strip(b"\0"):
            self.last = _parse(found)
            self.damaged = self.last is None
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if found is None or len(found) < _FILE_BYTES:
            os.pwrite(self._fd, (found or b"").ljust(_FILE_BYTES, b"\0"), 0)
        self._recorded: tuple[int, int] | None = None

    def check(self, found_high: int, found_rows: int, reason: str) -> SpoolLoss | None:
        """Compare the file found at start with the last record: a loss is logged, kept in ``<path>.lost`` (once:
        a start that stopped before its tally said what it found compares the same numbers again), and the tally
        then says what the file holds. ``reason``: what may have happened to the file."""
        loss = None
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if self.damaged:
            loss = SpoolLoss(now, None, found_rows, None, found_high, f"its tally {self.path} is damaged")
        elif self.last is not None:
            high, rows = self.last
            if high > found_high and min(rows, high - found_high) > 0:
                loss = SpoolLoss(now, rows, found_rows, high, found_high, reason)
        if loss is not None and not any((seen.expected_high, seen.found_high) == (loss.expected_high, found_high)
                                        for seen in self.losses if seen.expected_high is not None):
            self.losses.append(loss)
            log.error("The spool %s lost accepted writes: %s. They are not replayed: their keys keep what the topic "
                      "holds until their next change. Acknowledge with DELETE /spool/loss once handled.",
                      self.path.with_suffix(""), loss.describe())
            self._write_losses()
        else:
            loss = None
        earlier = [seen.describe() for seen in self.losses if seen is not loss]
        if earlier:
            log.error("The spool %s lost accepted writes before, not acknowledged yet (DELETE /spool/loss): %s",
                      self.path.with_suffix(""), "; ".join(earlier))
        self.record(found_high, found_rows)
        return loss

    @property
    def high(self) -> int:
        """The highest write number the tally has seen (0: none)."""
        return self.last[0] if self.last is not None else 0

    def record(self, high: int, held: int) -> None:
        """The file now takes writes up to ``high`` and holds ``held`` rows (``OSError`` when it cannot be written)."""
        if (high, held) == self._recorded:
            return
        numbers = _NUMBERS.pack(high, held)
        os.pwrite(self._fd, _MAGIC + numbers + struct.pack("<I", zlib.crc32(numbers)), 0)
        self._recorded = (high, held)

    def acknowledge(self) -> list[SpoolLoss]:
        """An operator has seen the losses: they are forgotten (``<path>.lost`` deleted); the ones acknowledged."""
        acknowledged, self.losses = self.losses, []
        with contextlib.suppress(FileNotFoundError):
            self.lost_path.unlink()
        _sync_directory(self.lost_path.parent)
        if acknowledged:
            log.warning("The spool's lost writes were acknowledged: %s", "; ".join(a.describe() for a in acknowledged))
        return acknowledged

    def close(self) -> None:
        """Close the tally's file (again: nothing)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _read_losses(self) -> list[SpoolLoss]:
        try:
            found = json.loads(self.lost_path.read_text())
            return [SpoolLoss(**item) for item in found["losses"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError, KeyError) as e:
            # Unreadable, but there: a loss nobody acknowledged, whose numbers are gone.
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            return [SpoolLoss(now, None, 0, None, 0, f"{self.lost_path} cannot be read ({e})")]

    def _write_losses(self) -> None:
        """``<path>.lost`` holds the losses, durably (written aside, synced, renamed); a failure is logged, and the
        losses are still reported by this process."""
        text = json.dumps({"losses": [asdict(loss) for loss in self.losses]}, indent=2) + "\n"
        aside = self.lost_path.with_name(self.lost_path.name + ".new")
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, text.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            aside.replace(self.lost_path)
            _sync_directory(self.lost_path.parent)
        except OSError as e:
            log.error("Cannot keep the spool's lost writes in %s (%s): a restart will not report them again",
                      self.lost_path, e.strerror)


def _parse(record: bytes) -> tuple[int, int] | None:
    """A tally's record; None when it is not one (damaged)."""
    if len(record) < _RECORD.size:
        return None
    magic, high, held, crc = _RECORD.unpack_from(record)
    if magic != _MAGIC or crc != zlib.crc32(_NUMBERS.pack(high, held)):
        return None
    return high, held


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
