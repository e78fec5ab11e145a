"""The spool's file: only a damaged spool file is ever moved aside; a path that cannot be a spool, one
this user cannot write, or one another process uses stops the start with one clear error naming
``status.storage.spool.path``; what it creates is private (0700/0600)."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from status_store.durable import spool_file
from status_store.durable.spool import Spool, SpooledUpdate
from status_store.errors import ConfigError
from status_store.retry.delivery import Delivery
from status_store.retry.updates import Outcome, Result, StatusUpdate

ROOT = Path(__file__).parent.parent
WAIT = 60.0
NOBODY = 65534
PAGE = 4096


def fill(path: Path, rows: int) -> None:
    """A spool holding ``rows`` updates, closed (its journal merged into the file)."""
    spool = Spool(path)
    for number in range(1, rows + 1):
        update = StatusUpdate(f"status-task-c-{number}", b"x" * 200, "task")
        update.number = number
        spool.on_submitted(update)
    spool.close()


def counts_pass(path: Path) -> bool:
    """Whether ``SELECT COUNT(*)`` of every table of the file works."""
    db = sqlite3.connect(path)
    try:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
        return bool(tables)
    except sqlite3.DatabaseError:
        return False
    finally:
        db.close()


def integrity_fails(path: Path) -> bool:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA integrity_check").fetchall() != [("ok",)]
    except sqlite3.DatabaseError:
        return True
    finally:
        db.close()


def damage_beyond_count(path: Path) -> None:
    """Damage one page of the spool where ``COUNT(*)`` does not look but an integrity check does."""
    original = path.read_bytes()
    for page in range(2, len(original) // PAGE):
        damaged = bytearray(original)
        damaged[page * PAGE + 100:page * PAGE + 200] = b"\xff" * 100
        path.write_bytes(damaged)
        if counts_pass(path) and integrity_fails(path):
            return
    raise AssertionError("no page of the spool could be damaged out of COUNT(*)'s sight")


def test_a_spool_damaged_beyond_what_count_reads_is_moved_aside_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    fill(path, 2000)
    damage_beyond_count(path)
    damaged = path.read_bytes()
    spool = Spool(path)
    assert spool.pending() == []  # reading it no longer fails
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("spool.db.corrupt-") and p.suffix != ".lock"]
    assert [p.read_bytes() for p in aside] == [damaged]
    spool.close()


def test_a_directory_at_the_spool_path_is_a_config_error_and_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    path.mkdir()
    (path / "precious.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="is a directory") as caught:
        Spool(path)
    assert caught.value.key == "status.storage.spool.path"
    assert (path / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool.db"]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_device_at_the_spool_path_is_a_config_error_and_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a null device, as /dev/null
    with pytest.raises(ConfigError, match="device") as caught:
        Spool(path)
    assert caught.value.key == "status.storage.spool.path"
    assert stat.S_ISCHR(path.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool.db"]


def test_what_the_spool_creates_is_private(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        path = tmp_path / "state" / "status-store" / "spool.db"
        spool = Spool(path)
        update = StatusUpdate("status-connector-c", b"{}", "connector")
        update.number = 1
        spool.on_submitted(update)  # the journal files exist from the first write
        created = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        # No -shm: SQLite keeps the journal's index in memory (a memory-mapped file could kill the process).
        assert created == {"spool.db": 0o600, "spool.db-wal": 0o600, "spool.db.lock": 0o600, "spool.db.reserve": 0o600,
                           "spool.db.tally": 0o600}
        spool.close()
    finally:
        os.umask(old_umask)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="spool-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def open_without_privileges(path: Path) -> subprocess.CompletedProcess[str]:
    """Open a spool in a child process that file modes bind: when the tests run as root, it becomes
    ``nobody`` once its modules are loaded (the interpreter may live where ``nobody`` cannot read)."""
    drop = f"os.setgroups([])\nos.setgid({NOBODY})\nos.setuid({NOBODY})\n" if os.geteuid() == 0 else ""
    code = ("import os, sys\nfrom status_store.errors import ConfigError\n"
            "from status_store.durable.spool import Spool\n"
            f"{drop}try:\n    Spool(sys.argv[1]).close()\nexcept ConfigError as e:\n    print(e)\n    sys.exit(2)\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=WAIT,
                          cwd=ROOT)


def give_to_child(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)


def test_a_read_only_directory_is_one_clear_error(shared_dir: Path) -> None:
    directory = shared_dir / "ro"
    directory.mkdir(mode=0o755)  # root's: not writable by the child
    if os.geteuid() != 0:
        directory.chmod(0o555)
    result = open_without_privileges(directory / "spool.db")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == ""
    assert result.stdout.count("\n") == 1
    assert "status.storage.spool.path" in result.stdout
    assert "not writable" in result.stdout
    assert list(directory.iterdir()) == []


def test_a_read_only_spool_file_is_one_clear_error_and_is_not_moved(shared_dir: Path) -> None:
    path = shared_dir / "spool.db"
    fill(path, 3)
    give_to_child(shared_dir)  # the directory is writable, the file is not
    for beside in ("spool.db.lock", "spool.db.reserve", "spool.db.tally"):
        (shared_dir / beside).unlink()
    path.chmod(0o444)
    before = path.read_bytes()
    result = open_without_privileges(path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == ""
    assert "status.storage.spool.path" in result.stdout
    assert "not readable and writable" in result.stdout
    assert sorted(p.name for p in shared_dir.iterdir()) == ["spool.db"]
    assert path.read_bytes() == before


def test_a_second_process_on_the_same_spool_is_refused_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    code = ("import sys\nfrom status_store.durable.spool import Spool\nspool = Spool(sys.argv[1])\n"
            "print('open', flush=True)\nsys.stdin.read()\n")
    first = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    try:
        assert first.stdout is not None
        assert first.stdout.readline() == "open\n"
        with pytest.raises(ConfigError, match=rf"in use by another status-store \(pid {first.pid} on host ") as caught:
            Spool(path)
        assert caught.value.key == "status.storage.spool.path"
    finally:
        first.send_signal(signal.SIGKILL)  # no chance to clean up: the kernel still releases the lock
        first.wait(WAIT)
    Spool(path).close()


@pytest.mark.parametrize("columns", [
    "key TEXT PRIMARY KEY, version INTEGER NOT NULL, kind TEXT NOT NULL, safe INTEGER NOT NULL, value BLOB",
    "key TEXT PRIMARY KEY, version INTEGER NOT NULL, kind TEXT NOT NULL, safe INTEGER NOT NULL, value BLOB, "
    "base INTEGER, deleted_base INTEGER, sent BLOB",
], ids=["first format", "rows keyed by their key"])
def test_a_spool_of_an_older_version_keeps_its_rows_in_order(tmp_path: Path, columns: str) -> None:
    path = tmp_path / "spool.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"CREATE TABLE pending ({columns})")
    # Versions as an older version wrote them: one row per key, not in key order.
    rows = [("status-task-c-0", 7, b"x"), ("status-connector-c", 3, b"y"), ("status-task-c-1", 9, None)]
    for key, version, value in rows:
        db.execute("INSERT INTO pending (key, version, kind, safe, value) VALUES (?, ?, 'task', 1, ?)",
                   (key, version, value))
    db.close()
    spool = Spool(path)
    pending = spool.pending()
    assert [(item.key, item.value, item.safe, item.base) for item in pending] == [
        ("status-connector-c", b"y", True, None), ("status-task-c-0", b"x", True, None),
        ("status-task-c-1", None, True, None)]
    # The upgraded rows are replaced and forgotten by key, as the spool's own.
    update = StatusUpdate("status-task-c-0", b"z", "task")
    update.number = 1
    spool.on_submitted(update)
    spool.forget("status-connector-c")
    spool.commit()
    expected = [("status-task-c-1", None), ("status-task-c-0", b"z")]
    assert [(item.key, item.value) for item in spool.pending()] == expected
    spool.close()
    assert [(item.key, item.value) for item in reopened(path)] == expected


def reopened(path: Path) -> list[SpooledUpdate]:
    spool = Spool(path)
    try:
        return spool.pending()
    finally:
        spool.close()


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=2 * 2048 + 300), st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
       st.randoms(use_true_random=False))
def test_the_rows_settled_in_one_commit_go_and_no_other(tmp_path_factory: pytest.TempPathFactory, rows: int,
                                                         share: float, rng: random.Random) -> None:
    """A commit writes its rows, and deletes the settled ones, in statements of many rows each (up to thousands
    a commit): every row added is there, and a delete never takes a row still pending."""
    settled = [rng.random() < share for _ in range(rows)]
    spool = Spool(tmp_path_factory.mktemp("spool") / "spool.db")

    async def settle_in_one_turn() -> list[StatusUpdate]:
        # On an event loop, as in the store: the changes of one turn are committed together.
        updates = []
        for number in range(1, len(settled) + 1):
            update = StatusUpdate(f"status-task-c-{number}", b"v", "task")
            update.number = number
            spool.on_submitted(update)
            updates.append(update)
        spool.commit()
        done = [update for update, gone in zip(updates, settled, strict=True) if gone]
        rng.shuffle(done)  # outcomes come in any order
        for update in done:
            spool.settled(update, Outcome(update.key, Result.WRITTEN, 1, "written", Delivery(0, update.number)))
        spool.commit()
        return updates

    updates = asyncio.run(settle_in_one_turn())
    assert [item.key for item in spool.pending()] == [u.key for u, gone in zip(updates, settled, strict=True)
                                                       if not gone]
    spool.close()


def test_a_commit_of_more_rows_than_a_part_writes_each_once_and_replaces_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are inserted in transactions of an eighth of the reserve (the WAL holds what the reserve can make room
    for); a key's older row goes with the last of them."""
    monkeypatch.setattr(spool_file, "RESERVE_MAX_BYTES", spool_file.RESERVE_MIN_BYTES)  # parts of 8 KiB
    spool = Spool(tmp_path / "spool.db")

    async def submit_in_one_turn(first: int, value: bytes) -> list[StatusUpdate]:
        # On an event loop, as in the store: the changes of one turn are committed together, here about 10 parts.
        updates = []
        for number in range(first, first + 500):
            update = StatusUpdate(f"status-task-c-{number % 500}", value, "task")
            update.number = number
            spool.on_submitted(update)
            updates.append(update)
        assert spool.commit()
        return updates

    older = asyncio.run(submit_in_one_turn(1, b"a" * 100))
    assert [(item.key, item.value) for item in spool.pending()] == [(u.key, u.value) for u in older]
    newer = asyncio.run(submit_in_one_turn(501, b"b" * 100))  # each key again: the rows above are replaced
    assert [(item.key, item.value) for item in spool.pending()] == [(u.key, u.value) for u in newer]
    spool.close()
    assert [(item.key, item.value) for item in reopened(tmp_path / "spool.db")] == [(u.key, u.value) for u in newer]


def test_a_spool_killed_between_commits_reports_no_loss(tmp_path: Path) -> None:
    """What the tally says is written after the file's commit: a kill between them leaves the file ahead of it,
    never behind (no false alarm)."""
    path = tmp_path / "spool.db"
    code = ("import os, signal, sys\nfrom status_store.durable.spool import Spool\n"
            "from status_store.retry.delivery import Delivery\n"
            "from status_store.retry.updates import Outcome, Result, StatusUpdate\n"
            "spool = Spool(sys.argv[1])\nupdates = []\n"
            "for number in range(1, 201):\n"
            "    update = StatusUpdate(f'status-task-c-{number}', b'v', 'task')\n"
            "    update.number = number\n    spool.on_submitted(update)\n    updates.append(update)\n"
            "for update in updates[:150]:\n"
            "    spool.settled(update, Outcome(update.key, Result.WRITTEN, 1, 'written', Delivery(0, update.number)))\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=WAIT,
                            cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with Spool(path) as spool:
        assert len(spool.pending()) == 50
        assert spool.losses == []


def test_a_spool_moved_aside_is_a_loss_of_the_rows_it_held(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "spool.db"
    fill(path, 30)
    damage_beyond_count(path)
    with caplog.at_level(logging.ERROR), Spool(path) as spool:
        [loss] = spool.losses
    assert (loss.at_least, loss.at_most, loss.found_rows) == (30, 30, 0)
    assert "moved aside" in loss.reason
    assert "30 accepted write(s) lost" in caplog.text


def test_a_damaged_tally_is_a_loss_that_cannot_be_counted(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    fill(path, 3)
    tally = tmp_path / "spool.db.tally"
    tally.write_bytes(b"\xff" * 28 + tally.read_bytes()[28:])
    with Spool(path) as spool:
        [loss] = spool.losses
        assert (loss.at_least, loss.at_most, loss.found_rows) == (0, None, 3)
        assert "damaged" in loss.describe()
        assert len(spool.pending()) == 3
        spool.acknowledge_losses()
    with Spool(path) as spool:
        assert spool.losses == []  # the tally says what the file holds again


def test_a_loss_not_acknowledged_is_kept_across_starts_and_a_new_one_is_added(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    fill(path, 5)
    path.unlink()  # an operator's rm while the sidecar was stopped: its rows are gone
    (tmp_path / "spool.db-wal").unlink(missing_ok=True)
    with Spool(path) as spool:
        assert [(loss.at_least, loss.at_most) for loss in spool.losses] == [(5, 5)]
        update = StatusUpdate("status-task-c-1", b"v", "task")
        update.number = 1
        spool.on_submitted(update)
    path.unlink()
    with Spool(path) as spool:
        assert [(loss.at_least, loss.at_most) for loss in spool.losses] == [(5, 5), (1, 1)]
        assert [loss.found_rows for loss in spool.acknowledge_losses()] == [0, 0]
    with Spool(path) as spool:
        assert spool.losses == []
