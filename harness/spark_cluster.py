"""A Spark standalone cluster on 127.0.0.1 from the installed PySpark: a master and workers as separate
processes, and spark-submit against it. Used by tests/analytics/test_spark_cluster.py and
bench/spark_cluster_history.py.

Every process binds 127.0.0.1: ``--host`` for the RPC endpoints and ``SPARK_LOCAL_IP`` for everything else
(the master's and workers' web UIs, which cannot be turned off, bind it on a free port; the master's REST
submission server is turned off). Every start and wait is bounded; every process is started in its own
process group (a worker's executors are its children) and stopped by that id.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import venv
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyspark

from harness import FAST_JVM, free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
_LOOPBACK_V4 = re.compile(r"^[0-9A-F]{6}7F$")  # 127.x.x.x, as /proc/net/tcp writes it (little-endian)
_LOOPBACK_V6 = ("0000000000000000FFFF0000", "00000000000000000000000001000000")  # ::ffff:127.x.x.x, ::1


def package_zip(root: Path, target: Path) -> Path:
    """``status_store`` as a zip for ``--py-files`` (what ``zip -r status_store.zip status_store`` makes)."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((root / "status_store").rglob("*.py")):
            archive.write(path, path.relative_to(root))
    return target


def python_without_the_package(target: Path) -> Path:
    """A Python that imports this environment's libraries (PySpark, confluent-kafka, pyarrow...) but not
    ``status_store``: a bare virtual environment whose one ``.pth`` line adds this one's site-packages.
    Paths added that way are not scanned for ``.pth`` files, so the editable install of the package is
    not seen: executors and the driver must get it from ``--py-files``."""
    venv.create(target, with_pip=False, clear=True)
    site = next((target / "lib").glob("python3*/site-packages"))
    own = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "libraries.pth").write_text(own + "\n")
    return target / "bin" / "python"


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) under ``workdir``."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = workdir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    @classmethod
    def running(cls, master_url: str, workdir: Path) -> StandaloneCluster:
        """A cluster started elsewhere, to submit to; ``workdir`` keeps what submitting writes (its processes are
        not this object's: nothing to start or stop)."""
        workdir.mkdir(parents=True, exist_ok=True)
        cluster = cls(workdir, workers=0)
        cluster.master_url = master_url
        return cluster

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of the cluster's processes (and of spark-submit)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "PYTHONPATH"))}
        env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.workdir),
                    "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})
        env.update(extra or {})
        return env

    def log(self, name: str) -> Path:
        """The stdout and stderr of one of the cluster's processes."""
        return self.workdir / f"{name}.log"

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the master, then the workers; return when every worker has registered (bounded)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout_s
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(free_port())])
        self._wait_for("master", "I have been elected leader", deadline)
        for i in range(self.workers):
            work = self.workdir / f"worker-{i}"
            self._spawn(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                        "--cores", str(self.cores), "--memory", self.memory,
                                        "--webui-port", str(free_port()), "--work-dir", str(work), self.master_url])
        for i in range(self.workers):
            self._wait_for(f"worker-{i}", "Successfully registered with master", deadline)

    def _spawn(self, name: str, arguments: Sequence[str]) -> None:
        with self.log(name).open("wb") as out:
            process = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *arguments], env=self.env(),
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self._processes.append((name, process))

    def _wait_for(self, name: str, line: str, deadline: float) -> None:
        process = dict(self._processes)[name]
        while time.monotonic() < deadline:
            if line in self.log(name).read_text(errors="replace"):
                return
            if process.poll() is not None:
                break
            time.sleep(0.2)
        tail = self.log(name).read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"{name} did not say {line!r} in time (exit code {process.poll()}):\n{tail}")

    def pids(self) -> list[int]:
        """The ids of the cluster's processes and their children (executors, Python workers)."""
        found: list[int] = []
        queue = [process.pid for _, process in self._processes if process.poll() is None]
        while queue:
            pid = queue.pop()
            found.append(pid)
            for task in _listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                    queue += [int(child) for child in f.read().split()]
        return found

    def listening_beyond_loopback(self) -> list[str]:
        """Listening TCP sockets of the cluster's processes bound to anything but loopback (none expected)."""
        inodes = set()
        for pid in self.pids():
            for fd in _listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
        found = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for row in f.read().splitlines()[1:]:
                    fields = row.split()
                    address, state, inode = fields[1].split(":")[0], fields[3], fields[9]
                    loopback = (_LOOPBACK_V4.match(address) if len(address) == 8
                                else (address.startswith(_LOOPBACK_V6[0]) and address.endswith("7F"))
                                or address == _LOOPBACK_V6[1])
                    if state == "0A" and inode in inodes and not loopback:
                        found.append(f"{table} {fields[1]}")
        return found

    def submit(self, script: str, arguments: Sequence[str], py_files: Path, python: Path,
               conf: Mapping[str, str], log: Path, timeout_s: float,
               started: Callable[[int], None] | None = None) -> int:
        """spark-submit ``script`` to the cluster (client mode; the driver on 127.0.0.1, running ``python``,
        as the executors do); its output goes to ``log``; returns its exit code (bounded). ``started`` is told the
        spark-submit process's id (a benchmark samples its memory)."""
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                    "spark.ui.enabled": "false", "spark.pyspark.python": str(python),
                    "spark.pyspark.driver.python": str(python), **conf}
        command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master_url, "--py-files", str(py_files),
                   *[a for key, value in settings.items() for a in ("--conf", f"{key}={value}")], script, *arguments]
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=self.env(), stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir)
            if started is not None:
                started(process.pid)
            try:
                return process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _stop_group(process, 10.0)
                raise
            finally:
                _stop_group(process, 10.0)  # nothing of it outlives the call

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the workers (their executors with them), then the master; each by its process group id."""
        for _, process in reversed(self._processes):
            _stop_group(process, timeout_s)
        self._processes.clear()


def _stop_group(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM to the process's group (its own id: started with a new session), SIGKILL after ``timeout_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
