"""The SparkSession: Java check, local defaults only where nothing is configured, loopback for local runs.

Master, memory and shuffle partitions are never fixed here: ``--conf`` (or ``spark-submit``) sets them.
Without a configured master the job runs on an embedded ``local[*]`` Spark. Local runs bind to
127.0.0.1 (Spark otherwise picks a non-loopback interface), the Python workers run the very
interpreter of the driver, and the JVM maps the class-data archive of its JDK, PySpark and class path (``class_data``),
or writes it at its exit when there is none yet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

from .class_data import USER_FLAGS, ClassData, spark_class_path
from .console import stderr_to

MIN_JAVA = 17
#: Java options of a local Spark started for a small input, unless ``spark.driver.extraJavaOptions`` is set: such a
#: run is over before the optimising compiler (C2) and the parallel collector pay back the CPU they take (on two
#: loaded cores a 1,000-record run took 71 s with these options against 115 to 126 s without; docs/BENCHMARKS.md).
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JAVA_HELP = (f"Spark needs Java {MIN_JAVA} or newer: install a JDK (e.g. 'apt-get install openjdk-17-jre-headless') "
             "and put its java on PATH or point JAVA_HOME at it (JAVA_HOME/bin/java).")


class JavaMissingError(RuntimeError):
    """No usable Java for Spark."""


def java_runtime(env: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The Java Spark would start and what its ``java -version`` says; JavaMissingError when none runs."""
    home = env.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java", path=env.get("PATH"))
    if java is None or not Path(java).exists():
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH and JAVA_HOME is not set"
        raise JavaMissingError(f"{where}. {JAVA_HELP}")
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaMissingError(f"{java} does not run ({e}). {JAVA_HELP}") from None
    return java, shown


def _major(java: str, shown: str) -> int:
    found = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if found is None:
        raise JavaMissingError(f"cannot tell the version of {java}: {shown.strip()!r}. {JAVA_HELP}")
    major = int(found.group(1))
    # Java 8 and older report "1.8".
    return int(found.group(2) or 0) if major == 1 else major


def check_java(env: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """Raise JavaMissingError unless Java 17+ is there; the java binary and its version text."""
    java, shown = java_runtime(env)
    major = _major(java, shown)
    if major < MIN_JAVA:
        raise JavaMissingError(f"found Java {major}. {JAVA_HELP}")
    return java, shown


def get_session(conf: Mapping[str, str], app_name: str = "status-store-analyze",
                jvm_log: Path | None = None, quick_start: bool = False, class_data: bool = False) -> SparkSession:
    """The running session, or a new one from ``conf``; ``local[*]`` when no master is configured.

    Under ``spark-submit`` the master and every ``--conf`` come from spark-submit itself. A JVM started
    here writes its stderr (Spark's log and stage bars) to ``jvm_log`` when one is given. ``quick_start`` (a small
    input) starts a local JVM with ``QUICK_START_JAVA_OPTIONS`` unless ``conf`` gives the driver's Java options.
    ``class_data``: a local JVM started here maps the class-data archive (or writes it: then call ``finish``), unless
    the driver's Java options say what to do about class data sharing.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    master = conf.get("spark.master") or _submitted_master()
    if master is None:
        master = "local[*]"
        builder = builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    starts_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    archive = None
    if master.startswith("local"):
        java, version_text = check_java()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        options = conf.get("spark.driver.extraJavaOptions") or (QUICK_START_JAVA_OPTIONS if quick_start else "")
        if class_data and starts_jvm and not any(flag in options for flag in USER_FLAGS):
            spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
            archive = ClassData.for_runtime(version_text, java, pyspark.__version__,
                                            spark_class_path(spark_home, conf))
            options = f"{options} {archive.java_options()}".strip()
        if options:
            builder = builder.config("spark.driver.extraJavaOptions", options)
    if jvm_log is None or not starts_jvm:
        session = builder.getOrCreate()
    else:
        with stderr_to(jvm_log):
            session = builder.getOrCreate()
    global _class_data
    if archive is not None and archive.check():
        _class_data = archive
    return session


#: The class-data archive the JVM this process started writes at its exit (``finish``).
_class_data: ClassData | None = None


def finish() -> None:
    """After a run: when this process's JVM writes the class-data archive, stop Spark and that JVM and put the
    archive in place (the first local run of a JDK and PySpark pays this once, after its outputs are written)."""
    global _class_data
    archive, _class_data = _class_data, None
    if archive is None or archive.dumping is None:
        return
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    gateway = SparkContext._gateway
    archive.finish(getattr(gateway, "proc", None))
    # That JVM is gone: a later session starts another.
    SparkContext._gateway = None
    SparkContext._jvm = None


def master_of(conf: Mapping[str, str]) -> str:
    """The master ``get_session(conf)`` runs on: the running session's, ``spark.master``, spark-submit's, or
    ``local[*]``."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return str(active.sparkContext.master)
    return conf.get("spark.master") or _submitted_master() or "local[*]"


def _submitted_master() -> str | None:
    """The master of the spark-submit that launched this driver (it starts the JVM first), if any."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf

    # Without the JVM a SparkConf is empty: connect to spark-submit's JVM first.
    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", None)
