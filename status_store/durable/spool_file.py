"""The spool's file as the operating system sees it: a path this process may use (``check_path``), one process at a
time on it (``SpoolLock``), the file's identity (``identity``), by which the spool finds its file deleted or
replaced while in use (``spool_db.py``), and room kept on its volume for the day it fills (``Reserve``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import threading
from pathlib import Path
from typing import ClassVar

from ..errors import ConfigError

SPOOL_KEY = "status.storage.spool.path"
# The reserve: this share of the spool's volume, within these bounds.
RESERVE_SHARE = 8
RESERVE_MIN_BYTES = 64 << 10
RESERVE_MAX_BYTES = 16 << 20
_BLOCK = 4096


def identity(path: Path) -> tuple[int, int]:
    """The device and inode of the file at ``path`` (OSError when there is none)."""
    found = path.stat()
    return found.st_dev, found.st_ino


def check_path(path: Path) -> None:
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


class SpoolLock:
    """One process at a time on a spool: an exclusive ``flock`` on ``<spool>.lock``, which holds the owner's
    pid and host. The kernel drops it when the owner ends, even by SIGKILL. The spools of one process on
    one path share its lock (a test may open a spool again before an earlier one was closed); SQLite's own exclusive
    lock then keeps a second connection off a database another one has open."""

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


class Reserve:
    """Room kept on the spool's volume for the day it fills: SQLite needs room on the volume to delete rows (its
    journal takes the changed pages first), so a full volume would never drain. ``<spool>.reserve`` holds that room,
    allocated (never sparse: its blocks are taken from the volume), 1/``RESERVE_SHARE`` of the volume within
    ``RESERVE_MIN_BYTES`` and ``RESERVE_MAX_BYTES``. It is given back when a delete finds no room, and made again once
    there is room."""

    def __init__(self, spool: Path) -> None:
        self.path = spool.with_name(spool.name + ".reserve")
        volume = os.statvfs(spool.parent)
        share = volume.f_blocks * volume.f_frsize // RESERVE_SHARE
        self.size = max(RESERVE_MIN_BYTES, min(RESERVE_MAX_BYTES, share)) // _BLOCK * _BLOCK
        # Whether the room is taken (as far as this process knows: ``check`` looks).
        self.held = False

    def make(self) -> None:
        """Take the room (``OSError``, e.g. ENOSPC, when the volume has not that much free)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # a part of it goes back: half a reserve is none
            raise
        finally:
            os.close(fd)
        self.held = True

    def release(self) -> None:
        """Give the room back to the volume."""
        self.held = False
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, 0)

    def check(self) -> None:
        """Whether the room is still taken: someone may have deleted or cut the file (then it is made again)."""
        try:
            found = os.stat(self.path)
        except OSError:
            self.held = False
            return
        if found.st_blocks * 512 < self.size:
            self.held = False
