"""The Java side of the harness: the jars of each Kafka line ``./scripts/test.sh`` fetched from Maven Central
(``kafka_line``), the scripted test connector and other Java sources compiled against them (``compiled``), JMX, log
configuration, and ``JavaProcess``: a JVM started with ``java -cp '<dir>/*' <main class>``, bounded in time, stopped
by its pid, its log in a file of its own (``tails()`` gives the last lines of each for a failing test's report)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import free_ports as free_ports  # where the harness's JVMs' ports come from

JVM_DIR = Path(__file__).with_name("jvm")
CONNECTOR_SOURCES = JVM_DIR / "src"
CONNECTOR_RESOURCES = JVM_DIR / "resources"
SOURCE_CONNECTOR = "statusstore.connect.ScriptedSourceConnector"
SINK_CONNECTOR = "statusstore.connect.ScriptedSinkConnector"
# What the scripted connector's version() answers (harness/jvm/src/statusstore/connect/Script.java).
SCRIPTED_VERSION = "1.0.0-scripted"

START_WAIT = 90.0
STOP_WAIT = 20.0
# How long a JVM asked for a thread dump (SIGQUIT) has to write it, and the dump's last part (HotSpot's).
DUMP_WAIT = 5.0
DUMP_END = b"JNI global refs"
# The header on the records a test writes into a Connect cluster's topics in a foreign writer's place
# (tests/test_connect_records_live.py), so that a test of what Connect itself wrote can leave them out.
FOREIGN_WRITER_HEADER = "status-store-test-foreign-writer"


def jvm_cache() -> Path:
    """Where ./scripts/test.sh keeps what it fetched (outside the repository)."""
    configured = os.environ.get("STATUS_STORE_JVM_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "status-store" / "jvm"


class RealKafkaMissing(RuntimeError):
    """The jars or the JDK are not there: one line saying what to run."""


@dataclass(frozen=True)
class KafkaLine:
    """The jars of one Kafka release line, as fetched."""

    name: str
    directory: Path
    version: str

    @property
    def classpath(self) -> str:
        return str(self.directory / "*")

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def kafka_line(name: str) -> KafkaLine:
    """The fetched jars of ``kafka-4`` or ``kafka-3``; ``RealKafkaMissing`` when they are not there."""
    directory = jvm_cache() / name
    runtime = sorted(directory.glob("connect-runtime-*.jar"))
    if not (directory / ".complete").exists() or not runtime:
        raise RealKafkaMissing(f"Apache Kafka's jars ({name}) are not in {directory}: run ./scripts/test.sh, which "
                               f"fetches them from Maven Central")
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise RealKafkaMissing("no JDK (java and javac) on PATH: ./scripts/test.sh installs one where it may")
    return KafkaLine(name, directory, runtime[0].name.removeprefix("connect-runtime-").removesuffix(".jar"))


def scripted_connector(line: KafkaLine) -> Path:
    """The scripted test connector, compiled against ``line``'s Connect API once per version of its sources."""
    return compiled(line, "scripted-connector", JVM_DIR, CONNECTOR_SOURCES, CONNECTOR_RESOURCES)


def jmx_options(port: int) -> list[str]:
    """A JVM's options to serve JMX on 127.0.0.1:``port`` without authentication (as a test's JMX exporter reads it)."""
    return [f"-Dcom.sun.management.jmxremote.port={port}", f"-Dcom.sun.management.jmxremote.rmi.port={port}",
            "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1"]


def jmx_attributes(line: KafkaLine, port: int, pattern: str) -> dict[str, dict[str, str]]:
    """The attributes of the MBeans ``pattern`` names in the JVM serving JMX on 127.0.0.1:``port``, by object name
    (read by a small Java client, harness/jvm/tools, as a JMX exporter reads them)."""
    tools = compiled(line, "jvm-tools", JVM_DIR, JVM_DIR / "tools")
    done = subprocess.run(["java", "-cp", str(tools), "statusstore.tools.JmxQuery", f"127.0.0.1:{port}", pattern],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"JMX query of 127.0.0.1:{port} failed: {done.stderr[-2000:]}")
    found: dict[str, dict[str, str]] = {}
    for row in done.stdout.splitlines():
        name, attribute, value = row.split("\t", 2)
        found.setdefault(name, {})[attribute] = value
    return found


def compiled(line: KafkaLine, name: str, root: Path, sources: Path, resources: Path | None = None) -> Path:
    """The Java sources under ``sources`` (with the files under ``resources`` beside the classes), compiled with
    javac against ``line``'s jars into the cache, once per version of the files (named relative to ``root``): the
    directory to put on a classpath."""
    java = sorted(sources.rglob("*.java"))
    digest = hashlib.sha256()
    for path in [*java, *(sorted(resources.rglob("*")) if resources is not None else [])]:
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    target = jvm_cache() / name / f"{line.name}-{digest.hexdigest()[:16]}"
    if (target / ".complete").exists():
        return target
    building = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run(["javac", "-nowarn", "--release", "17", "-encoding", "UTF-8", "-cp", line.classpath,
                    "-d", str(building), *map(str, java)], check=True, capture_output=True, timeout=120)
    if resources is not None:
        shutil.copytree(resources, building, dirs_exist_ok=True)
    (building / ".complete").touch()
    try:
        building.rename(target)
    except OSError:  # another process compiled it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return target


def log4j2_config(log_file: Path) -> str:
    """A log4j2 configuration sending every line of a Kafka 4.x JVM to ``log_file``, through its clean stop: log4j2's
    own shutdown hook, which runs beside Kafka's and Connect's, would stop the logging before they log their stop."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <File name="file" fileName="{log_file}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.connect.runtime.isolation" level="warn"/>
    <Logger name="org.reflections" level="error"/>
    <Logger name="org.apache.kafka.connect.runtime.rest.RestServer" level="warn"/>
    <Logger name="org.apache.kafka.connect.runtime.WorkerSourceTask" level="warn"/>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def _log4j1_config(log_file: Path) -> str:
    return (f"log4j.rootLogger=INFO, file\n"
            f"log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={log_file}\n"
            f"log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            f"log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.isolation=WARN\n"
            f"log4j.logger.org.reflections=ERROR\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.rest.RestServer=WARN\n"
            f"log4j.logger.org.apache.kafka.connect.runtime.WorkerSourceTask=WARN\n")


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """A Java .properties file (values written as they are: the tests' values need no escapes)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()), encoding="utf-8")


_RUNNING: list[JavaProcess] = []
_RUNNING_LOCK = threading.Lock()


def tails(lines: int = 40) -> str:
    """The last lines of the log of every JVM started by this test process that has not been forgotten."""
    with _RUNNING_LOCK:
        processes = list(_RUNNING)
    return "\n".join(process.tail(lines) for process in processes)


class JavaProcess:
    """One JVM: started, stopped (SIGTERM, then SIGKILL after a bound), killed, paused and resumed by its pid."""

    def __init__(self, name: str, line: KafkaLine, main: str, args: Sequence[str], workdir: Path,
                 extra_classpath: Sequence[Path] = (), heap: str = "512m", full_jit: bool = False,
                 jvm_options: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        """``jvm_options``: more options for the JVM (a ``-javaagent:``, as KAFKA_OPTS passes one). ``env``: more
        environment variables for it (``JAVA_TOOL_OPTIONS``, which every JVM reads, or an agent's own)."""
        self.name, self.line, self.main, self.args = name, line, main, list(args)
        self.jvm_options = list(jvm_options)
        self.env = dict(env or {})
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_file = workdir / f"{name}.log"
        self.stdout_file = workdir / f"{name}.stdout"
        self.classpath = ":".join([line.classpath, *map(str, extra_classpath)])
        self.heap, self.full_jit = heap, full_jit
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        if self.line.major >= 4:
            logging_config = self.workdir / f"{self.name}-log4j2.xml"
            logging_config.write_text(log4j2_config(self.log_file), encoding="utf-8")
            logging = f"-Dlog4j2.configurationFile={logging_config}"
        else:
            logging_config = self.workdir / f"{self.name}-log4j.properties"
            logging_config.write_text(_log4j1_config(self.log_file), encoding="utf-8")
            logging = f"-Dlog4j.configuration=file:{logging_config}"
        # Small heaps and the serial collector: two cores are shared by every JVM of the suite. C1 alone starts
        # faster; a benchmark asks for the full JIT.
        jit = [] if self.full_jit else ["-XX:TieredStopAtLevel=1"]
        return ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", *jit, "-XX:-UsePerfData",
                "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true", logging, *self.jvm_options,
                "-cp", self.classpath, self.main, *self.args]

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, f"{self.name} is running"
        with open(self.stdout_file, "ab") as out:
            self.process = subprocess.Popen(self.command(), cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env={**os.environ, **self.env})
        with _RUNNING_LOCK:
            if self not in _RUNNING:
                _RUNNING.append(self)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_alive(self) -> None:
        """Raise, with the log's tail, when the process has exited."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with code {self.process.returncode}\n{self.tail()}")

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """SIGTERM (Kafka's and Connect's clean shutdown), SIGKILL when it outlasts ``timeout``: a clean stop turned
        into a crash says so, with a thread dump at the end of the stdout file that says where the stop hung."""
        if not self.alive():
            return
        assert self.process is not None
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.dump_threads()
            print(f"{self.name} (pid {self.pid}) outlasted its clean stop ({timeout:g} s): killed; its threads are at "
                  f"the end of {self.stdout_file}", file=sys.stderr)
            self.kill()

    def dump_threads(self) -> None:
        """A thread dump (SIGQUIT) at the end of the stdout file; returns once written, or after ``DUMP_WAIT``."""
        if not self.alive():
            return
        written = self.stdout_file.stat().st_size if self.stdout_file.exists() else 0
        os.kill(self.pid, signal.SIGQUIT)
        deadline = time.monotonic() + DUMP_WAIT
        while time.monotonic() < deadline and self.alive():
            with open(self.stdout_file, "rb") as out:
                out.seek(written)
                if DUMP_END in out.read():
                    return
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL (a crash) and wait for it to go."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(STOP_WAIT)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and answers nothing."""
        if self.alive():
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)

    def forget(self) -> None:
        """Stop, and leave the report's list of logs."""
        self.stop()
        with _RUNNING_LOCK:
            if self in _RUNNING:
                _RUNNING.remove(self)

    def tail(self, lines: int = 40) -> str:
        parts = []
        for path in (self.stdout_file, self.log_file):
            if path.exists() and path.stat().st_size:
                with open(path, "rb") as f:
                    f.seek(max(0, path.stat().st_size - 200 * lines))
                    text = f.read().decode("utf-8", "replace").splitlines()[-lines:]
                parts.append(f"--- {path} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(parts) or f"--- {self.name}: no output ---"


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               processes: Iterable[JavaProcess] = (), interval: float = 0.1) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` s, or at once when one of ``processes`` died."""
    watched = list(processes)
    deadline = time.monotonic() + timeout
    while not condition():
        for process in watched:
            process.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s\n" + "\n".join(p.tail() for p in watched))
        time.sleep(interval)
