"""``status-store serve`` as a process of its own, its output collected, stopped by its pid."""

from __future__ import annotations

import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SERVICE_WAIT = 30.0


def sidecar_config(directory: Path, bootstrap_servers: str, topic: str, settings: Mapping[str, object]) -> Path:
    """A `status-store serve --config` file in ``directory``: the brokers, the status topic (replication factor 1)
    and these settings."""
    config = directory / "sidecar.properties"
    lines = [f"bootstrap.servers={bootstrap_servers}", f"status.storage.topic={topic}",
             "status.storage.replication.factor=1", *(f"{key}={value}" for key, value in settings.items())]
    config.write_text("\n".join(lines) + "\n")
    return config


class Service:
    """A `status-store serve` process whose output lines are collected by background threads; a context manager
    that always reaps it (``with Service(...) as service:``)."""

    def __init__(self, *args: str, nofile: int | None = None, wrap: Sequence[str] = (),
                 stop_wait: float = SERVICE_WAIT) -> None:
        """``nofile``: the process's limit of open file descriptors (RLIMIT_NOFILE), when given. ``wrap``: a command
        that runs the service by ``exec`` (e.g. ``unshare -m sh -c '... && exec "$@"' sh``), so that the process is
        still the service's. ``stop_wait``: how long a stop waits for the process to exit after each signal."""
        self.stop_wait = stop_wait
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.command = [*wrap, sys.executable, "-m", "status_store.cli", "serve", *args]
        self.process = subprocess.Popen(self.command,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        preexec_fn=limit_files)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        # The readers of its stdout and stderr: each ends at its pipe's end (the process gone).
        self._pumps = [threading.Thread(target=self._pump, args=(stream,), daemon=True)
                       for stream in (self.process.stdout, self.process.stderr)]
        for pump in self._pumps:
            pump.start()
        # Whether the readers were waited for once the process had exited (``output``).
        self._read_to_end = False

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)

    def wait_for(self, text: str) -> str:
        """The first output line containing ``text``; fails after SERVICE_WAIT seconds."""
        while True:
            try:
                line = self.lines.get(timeout=SERVICE_WAIT)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in {SERVICE_WAIT} s; output so far: "
                                     f"{''.join(self.seen)}") from None
            self.seen.append(line)
            if text in line:
                return line

    def output(self) -> list[str]:
        """Every output line so far (those ``wait_for`` went past included); once the process has exited, every line it
        wrote: the readers, which may lag behind the process, are waited for to the pipes' end (once, at most
        SERVICE_WAIT seconds in all). While it runs, without waiting."""
        if not self._read_to_end and self.process.poll() is not None:
            self._read_to_end = True
            deadline = time.monotonic() + SERVICE_WAIT
            for pump in self._pumps:
                pump.join(max(0.0, deadline - time.monotonic()))
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return self.seen

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reap()

    def stop(self) -> int:
        """SIGTERM, then the exit code; fails (after killing and reaping the process) if it does not exit within
        ``stop_wait`` seconds."""
        if self.process.poll() is None and self._is_running_service():
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(self.stop_wait)
        except subprocess.TimeoutExpired:
            self._kill()
            raise AssertionError("status-store did not stop within the bound after SIGTERM") from None

    def reap(self) -> None:
        """However the test went: the process asked to stop (SIGTERM), killed if it has not exited within
        ``stop_wait`` seconds, and waited for, so that no process and no zombie is left. A signal goes to the pid only
        while it is still this service (its command line checked); an exited one is only waited for."""
        if self.process.poll() is not None:
            return
        if self._is_running_service():
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(self.stop_wait)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        """SIGKILL (while the pid is still this service) and wait for the process to be gone."""
        if self._is_running_service():
            self.process.kill()
        try:
            self.process.wait(self.stop_wait)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"status-store (pid {self.process.pid}) did not exit within {self.stop_wait} s of "
                                 f"SIGKILL") from None

    def _is_running_service(self) -> bool:
        """Whether the pid is still this service: its command line is the one started (or, before a wrapper's
        ``exec``, the wrapper's); an exited process not yet waited for has none."""
        try:
            command = Path(f"/proc/{self.process.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        started = [os.fsencode(part) for part in self.command]
        return command[:len(started)] == started or b"status_store.cli" in command
