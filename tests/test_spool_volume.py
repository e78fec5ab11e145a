"""The spool on a volume of its own, a real one mounted in the service's private mount namespace (a tmpfs, or an ext4
image on a loop device): a full volume drains as Kafka takes the writes, without a restart; its files made immutable,
or the volume made read-only by the kernel, are a clear error (writes refused with the reason, ``/ready`` 503, one log
line), never a crash."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from harness import free_port
from harness.faulty_cluster import FaultyCluster
from harness.service import Service, sidecar_config

from .conftest import Broker
from .helpers import eventually_awaited

WAIT = 20.0
QUICK = {"status.storage.retry.delivery.timeout.ms": "300", "status.storage.retry.initial.backoff.ms": "100",
         "status.storage.retry.max.backoff.ms": "200", "sidecar.shutdown.timeout.ms": "300",
         "status.storage.retry.max.retries": "1000"}
BODY = {"worker_id": "w:8083", "generation": 1}


@dataclass(frozen=True)
class Volume:
    """A directory and the shell command that mounts a volume there (run in the service's mount namespace)."""

    directory: Path
    mount: str


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT, check=False)


@functools.cache
def _cannot_mount_tmpfs() -> str | None:
    """Why this machine cannot mount a tmpfs in a private mount namespace (None: it can)."""
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    with tempfile.TemporaryDirectory() as scratch:
        mounted = _run("unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {scratch}")
        if mounted.returncode != 0:
            return f"cannot mount a tmpfs in a private mount namespace (needs root): {mounted.stderr.strip()}"
    return None


def tmpfs_volume(tmp_path: Path, size: int) -> Volume:
    """A tmpfs of ``size`` bytes: a volume that fills for real (ENOSPC), where SQLite needs room to delete rows."""
    reason = _cannot_mount_tmpfs()
    if reason is not None:
        pytest.skip(reason)
    directory = tmp_path / "volume"
    directory.mkdir()
    return Volume(directory, f"mount -t tmpfs -o size={size},mode=0700 tmpfs {directory}")


@functools.cache
def _cannot_mount_ext4() -> str | None:
    """Why this machine cannot mount an ext4 image on a loop device in a private mount namespace and have the kernel
    remount it read-only on an error (None: it can)."""
    for tool in ("unshare", "nsenter", "mkfs.ext4", "chattr"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    with tempfile.TemporaryDirectory() as scratch:
        image, directory = Path(scratch, "image"), Path(scratch, "volume")
        directory.mkdir()
        made = _run("mkfs.ext4", "-q", str(_sized(image, 1 << 20)))
        if made.returncode != 0:
            return f"mkfs.ext4 fails: {made.stderr.strip()}"
        mounted = _run("unshare", "-m", "sh", "-c", f"mount -o loop,errors=remount-ro {image} {directory} && "
                       f"test -w /sys/fs/ext4/$(basename $(findmnt -n -o SOURCE {directory}))/trigger_fs_error")
        if mounted.returncode != 0:
            return ("cannot mount an ext4 image on a loop device in a private mount namespace, with the kernel's "
                    f"trigger_fs_error writable (needs root, loop devices and sysfs): {mounted.stderr.strip()}")
    return None


def _sized(path: Path, size: int) -> Path:
    with path.open("wb") as file:
        file.truncate(size)
    return path


def ext4_volume(tmp_path: Path, size: int = 8 << 20) -> Volume:
    """An ext4 file system in an image file, mounted on a loop device with ``errors=remount-ro`` (the default of
    most distributions): the loop device is freed when the namespace's last process ends."""
    reason = _cannot_mount_ext4()
    if reason is not None:
        pytest.skip(reason)
    image, directory = _sized(tmp_path / "volume.img", size), tmp_path / "volume"
    assert _run("mkfs.ext4", "-q", str(image)).returncode == 0
    directory.mkdir()
    return Volume(directory, f"mount -o loop,errors=remount-ro {image} {directory}")


def serve_on(volume: Volume, config: Path, port: int) -> Service:
    """``status-store serve`` in a private mount namespace with the volume mounted (the mount ends with it)."""
    return Service("--config", str(config), "--port", str(port),
                   wrap=("unshare", "-m", "sh", "-c", f'{volume.mount} && exec "$@"', "sh"))


def in_namespace(service: Service, *command: str) -> str:
    """Run a command in the (running) service's mount namespace; its output."""
    assert service.process.poll() is None, "the service is not running"
    done = _run("nsenter", "-t", str(service.process.pid), "-m", *command)
    assert done.returncode == 0, done.stderr
    return done.stdout


def remount_read_only(service: Service, volume: Volume) -> None:
    """What ext4 does on an I/O error with ``errors=remount-ro``: the kernel makes it read-only, under open files."""
    device = in_namespace(service, "findmnt", "-n", "-o", "SOURCE", str(volume.directory)).strip()
    Path(f"/sys/fs/ext4/{os.path.basename(device)}/trigger_fs_error").write_text("status-store's test\n")


async def put(http: httpx.AsyncClient, connector: str, state: str = "RUNNING") -> httpx.Response:
    return await http.put(f"/connectors/{connector}/status", json={"state": state, **BODY})


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT) -> None:
    """Wait, bounded, until ``check()`` holds."""
    await eventually_awaited(check, bool, timeout, 0.1, what=what)


async def ready_status(http: httpx.AsyncClient, status: int) -> bool:
    return (await http.get("/ready")).status_code == status


def spool_errors(service: Service) -> list[str]:
    return [line for line in service.output() if " ERROR " in line and "spool" in line]


async def test_a_spool_whose_files_are_made_immutable_refuses_writes_and_says_why_never_a_crash(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    """With SQLite's wal-index memory-mapped (its -shm file), the kernel answered the first change of a page of it
    with SIGBUS: the process died with no log line."""
    volume = ext4_volume(tmp_path)
    spool = volume.directory / "spool.db"
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {"status.storage.spool.path": spool,
                                                                              **QUICK})
    port = free_port()
    with serve_on(volume, config, port) as service:
        try:
            await asyncio.to_thread(service.wait_for, "Uvicorn running on")
            mock_cluster.broker_down(-1)  # the updates stay pending: their spool rows are what keeps them
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
                for i in range(3):
                    assert (await put(http, f"c{i}")).status_code == 202
                os.sync()  # the pages written back: the next change of one asks the file system first
                in_namespace(service, "sh", "-c", f"chattr +i {spool}*")
                refused = await put(http, "c3")
                assert refused.status_code == 503
                assert "Operation not permitted" in refused.json()["message"]
                ready = await http.get("/ready")
                assert ready.status_code == 503
                assert "Operation not permitted" in ready.json()["message"]
                assert len(spool_errors(service)) == 1
                in_namespace(service, "sh", "-c", f"chattr -i {spool}*")
                mock_cluster.broker_up(-1)

                async def writable_again() -> bool:
                    return (await put(http, "c4")).status_code == 202

                await until(writable_again, "writes accepted once the files can be written")
                await until(lambda: ready_status(http, 200), "ready once the files can be written")
            assert service.process.poll() is None
            assert len(spool_errors(service)) == 1
        finally:
            if service.process.poll() is None:  # best effort: the image is deleted with the test's folder anyway
                _run("nsenter", "-t", str(service.process.pid), "-m", "sh", "-c", f"chattr -i {spool}*")


async def test_a_spool_whose_volume_the_kernel_remounts_read_only_refuses_writes_and_says_why(
        mock_cluster: FaultyCluster, tmp_path: Path) -> None:
    """An I/O error makes ext4 (``errors=remount-ro``) read-only under the running service; the answers said only
    "disk I/O error"."""
    volume = ext4_volume(tmp_path)
    spool = volume.directory / "spool.db"
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {"status.storage.spool.path": spool,
                                                                              **QUICK})
    port = free_port()
    with serve_on(volume, config, port) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        mock_cluster.broker_down(-1)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            for i in range(3):
                assert (await put(http, f"c{i}")).status_code == 202
            os.sync()
            remount_read_only(service, volume)
            refused = await put(http, "c3")
            assert refused.status_code == 503
            assert "Read-only file system" in refused.json()["message"]
            for _ in range(3):
                again = await put(http, "c3")
                assert again.status_code == 503
                assert "Read-only file system" in again.json()["message"]
            ready = await http.get("/ready")
            assert ready.status_code == 503
            assert "Read-only file system" in ready.json()["message"]
        assert service.process.poll() is None
        assert len(spool_errors(service)) == 1


async def test_a_full_volume_drains_as_kafka_takes_the_writes_without_a_restart(mock_cluster: FaultyCluster,
                                                                                 tmp_path: Path) -> None:
    """On a real 600 KB tmpfs: the brokers away, batches until the spool refuses, the brokers back. SQLite needs room
    on the volume to delete rows (its journal), and the journal had grown to fill it: every write was refused for
    good ("database or disk is full"), /ready 503, until a restart."""
    volume = tmpfs_volume(tmp_path, 600 << 10)
    topic = Broker("mock", mock_cluster.bootstrap_servers, mock_cluster).new_topic()
    config = sidecar_config(tmp_path, mock_cluster.bootstrap_servers, topic, {
        "status.storage.spool.path": volume.directory / "spool.db", **QUICK,
        "status.storage.retry.delivery.timeout.ms": "60000"})
    port = free_port()
    with serve_on(volume, config, port) as service:
        await asyncio.to_thread(service.wait_for, "Uvicorn running on")
        mock_cluster.broker_down(-1)
        taken: list[tuple[str, int]] = []  # accepted, or taken but not durable: written once Kafka is back
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
            for batch in range(200):
                tasks = [(f"c{batch}", task) for task in range(20)]
                answer = await http.post("/statuses", json={"updates": [
                    {"kind": "task", "connector": name, "task": task, "state": "FAILED", "trace": "x" * 1000,
                     **BODY} for name, task in tasks]})
                if answer.status_code == 503:
                    assert "database or disk is full" in answer.json()["message"]
                    if "accepted but not durable" in answer.json()["message"]:
                        taken += tasks
                    break
                assert answer.status_code == 202
                taken += tasks
            else:
                raise AssertionError("the spool's volume never filled")
            assert (await put(http, "refused")).status_code == 503
            mock_cluster.broker_up(-1)

            async def writable_again() -> bool:
                return (await put(http, "after")).status_code == 202

            await until(writable_again, "writes accepted again once Kafka took what the spool held", 3 * WAIT)
            await until(lambda: ready_status(http, 200), "ready again")
            for name, task in taken:
                answer = await http.get(f"/connectors/{name}/tasks/{task}/status")
                assert answer.json()["state"] == "FAILED"
        assert service.process.poll() is None
        said = service.output()
        assert len(spool_errors(service)) == 1  # Cannot write to the spool ... (database or disk is full)
        assert sum("its reserve" in line and "is given back" in line for line in said) == 1
        assert sum("The reserve of the spool" in line and "is whole again" in line for line in said) == 1
        assert sum("takes writes again" in line for line in said) == 1
