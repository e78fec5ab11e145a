"""The class-data-sharing archive of local runs, on a real JVM: written at a first JVM's exit, mapped by the next,
and, once the JVM refuses it (here: a jar on its class path changed), removed and written again."""

from __future__ import annotations

import ast
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from bench.spark_class_data import BARE, WITHOUT, command
from status_store.analytics.class_data import ClassData
from status_store.analytics.session import check_java

from ..bench_runs import run_quick

MAIN = "public class Hello { public static void main(String[] args) { System.out.println(\"hi\"); } }\n"


def jar(directory: Path, extra: str = "") -> Path:
    """A jar holding a class with a main method (and ``extra`` as a file, to change the jar)."""
    if shutil.which("javac") is None:
        pytest.skip("needs a JDK's javac")
    (directory / "Hello.java").write_text(MAIN)
    subprocess.run(["javac", "-d", str(directory), str(directory / "Hello.java")], check=True, timeout=120)
    path = directory / "hello.jar"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(directory / "Hello.class", "Hello.class")
        archive.writestr("extra.txt", extra)
    return path


def start(data: ClassData, classpath: Path) -> bool:
    """A JVM started with the archive's options, as a local Spark's driver is: whether it used the archive; a JVM
    that writes one is finished (the archive put in place)."""
    process = subprocess.Popen(["java", *data.java_options().split(), "-cp", str(classpath), "Hello"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(120)
        used = data.check()
        data.finish(process)
    finally:
        process.kill()
        process.wait(30)
    return used


def test_an_archive_is_written_once_mapped_after_and_rewritten_once_the_jvm_refuses_it(tmp_path: Path) -> None:
    java, version = check_java()
    classes = jar(tmp_path)
    cache = tmp_path / "cds"

    first = ClassData.for_runtime(version, java, "4.x", cache)
    assert first.dumping is not None
    assert not first.archive.exists()
    assert start(first, classes)
    assert first.archive.exists()  # in place once the JVM ended
    assert not list(cache.glob("*.tmp"))

    second = ClassData.for_runtime(version, java, "4.x", cache)
    assert second.dumping is None
    assert start(second, classes)  # mapped

    changed = jar(tmp_path, extra="another build")
    refused = ClassData.for_runtime(version, java, "4.x", cache)
    assert not start(refused, changed)
    assert not refused.archive.exists()  # removed: the next start writes a new one
    assert ClassData.for_runtime(version, java, "4.x", cache).dumping is not None
    # Another PySpark version has an archive of its own.
    assert ClassData.for_runtime(version, java, "5.x", cache).archive != first.archive


def test_the_benchmarks_bare_start_without_the_archive_passes_the_java_options_that_leave_it_out(
        tmp_path: Path) -> None:
    """The one run of the full benchmark its ``--quick`` leaves out: its script, with the driver's Java options
    that leave the archive out, against the same script with the archive (the quick run's first run)."""
    without = command("bare", False, tmp_path, tmp_path / "out")
    with_ = command("bare", True, tmp_path, tmp_path / "out")
    assert with_[1:] == ["-c", BARE.format(extra="")]
    assert without[:2] == with_[:2]
    assert "-Xshare:auto" in WITHOUT
    source = without[2]
    compile(source, "bare", "exec")  # a Python script still
    conf = next(ast.literal_eval(line.split("=", 1)[1].strip()) for line in source.splitlines()
                if line.startswith("conf ="))
    assert conf["spark.driver.extraJavaOptions"] == WITHOUT
    assert source.replace(f', "spark.driver.extraJavaOptions": "{WITHOUT}"', "") == with_[2]


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_the_class_data_benchmark_quick_run(java: None, tmp_path: Path) -> None:
    output = run_quick("spark_class_data", tmp_path, timeout=560)
    assert "the first run, writing the archive: " in output
    rows = [line for line in output.splitlines() if line.startswith(("| bare start", "| status-store analyze"))]
    # The quick run times the job only (the bare start without the archive: the test above).
    assert len(rows) == 1, output
    assert rows[0].startswith("| status-store analyze, 1,000 events |"), output
