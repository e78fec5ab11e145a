"""``status-store serve`` as a process of its own, its output collected, stopped by its pid."""

from __future__ import annotations

import os
import queue
import resource
import signal
import subprocess
import sys
import threading
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
    """A `status-store serve` process whose output lines are collected by background threads."""

    def __init__(self, *args: str, nofile: int | None = None, wrap: Sequence[str] = ()) -> None:
        """``nofile``: the process's limit of open file descriptors (RLIMIT_NOFILE), when given. ``wrap``: a command
        that runs the service by ``exec`` (e.g. ``unshare -m sh -c '... && exec "$@"' sh``), so that the process is
        still the service's."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen([*wrap, sys.executable, "-m", "status_store.cli", "serve", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        preexec_fn=limit_files)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

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
        """Every output line so far (those ``wait_for`` went past included), without waiting."""
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return self.seen

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(SERVICE_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("status-store did not stop within the bound after SIGTERM") from None
