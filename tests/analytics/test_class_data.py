"""The class-data-sharing archive of local runs, on a real JVM: written at a first JVM's exit, mapped by the next,
and, once the JVM refuses it (here: a jar on its class path changed), removed and written again; one archive per
class path (the same jars at two paths each keep their own), and a cache that stays bounded."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from bench.spark_class_data import BARE, WITHOUT, command
from status_store.analytics.class_data import UNUSED_DAYS, ClassData, spark_class_path
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

    first = ClassData.for_runtime(version, java, "4.x", [str(classes)], cache)
    assert first.dumping is not None
    assert not first.archive.exists()
    assert start(first, classes)
    assert first.archive.exists()  # in place once the JVM ended
    assert not list(cache.glob("*.tmp"))

    second = ClassData.for_runtime(version, java, "4.x", [str(classes)], cache)
    assert second.dumping is None
    assert start(second, classes)  # mapped

    changed = jar(tmp_path, extra="another build")
    assert changed == classes  # the same path, other jar contents
    refused = ClassData.for_runtime(version, java, "4.x", [str(classes)], cache)
    assert not start(refused, changed)
    assert not refused.archive.exists()  # removed: the next start writes a new one
    assert ClassData.for_runtime(version, java, "4.x", [str(classes)], cache).dumping is not None
    # Another PySpark version has an archive of its own.
    assert ClassData.for_runtime(version, java, "5.x", [str(classes)], cache).archive != first.archive


def test_the_same_jars_at_two_paths_each_keep_their_own_archive(tmp_path: Path) -> None:
    """Two venvs with the same PySpark: the JVM refuses an archive written with the jars at another path (HotSpot
    compares the class path entries by file), so one shared name had each path remove the other's archive and
    every run write a new one."""
    java, version = check_java()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    at_a = jar(tmp_path / "a")
    at_b = tmp_path / "b" / "hello.jar"
    shutil.copy2(at_a, at_b)  # identical: contents, size and modification time
    (tmp_path / "link").symlink_to(tmp_path / "a")
    cache = tmp_path / "cds"

    def archive(classes: Path) -> ClassData:
        return ClassData.for_runtime(version, java, "4.x", [str(classes)], cache)

    assert archive(at_a).dumping is not None
    assert start(archive(at_a), at_a)
    assert start(archive(at_b), at_b)  # writes its own
    for classes in (at_a, at_b, at_a):
        mapping = archive(classes)
        assert mapping.dumping is None, classes
        assert start(mapping, classes), classes  # mapped: neither path's archive removed
    assert len(list(cache.glob("*.jsa"))) == 2
    via_link = archive(tmp_path / "link" / "hello.jar")  # the same file by another name: its archive
    assert via_link.archive == archive(at_a).archive
    assert start(via_link, tmp_path / "link" / "hello.jar")


def test_the_cache_keeps_one_archive_per_class_path_and_drops_unused_and_earlier_ones(tmp_path: Path) -> None:
    java, version = check_java()
    classes = jar(tmp_path)
    cache = tmp_path / "cds"
    cache.mkdir()
    earlier = cache / "spark-4.3.0-jdk-22350a75c8c82e13.jsa"  # named by JDK and PySpark only
    earlier.write_bytes(b"an archive")

    old = ClassData.for_runtime(version, java, "4.x", [str(classes)], cache)
    assert not earlier.exists()
    assert start(old, classes)
    new = ClassData.for_runtime(version, java, "5.x", [str(classes)], cache)  # PySpark upgraded in place
    assert start(new, classes)
    assert [path.name for path in cache.glob("*.jsa")] == [new.archive.name]  # the path's earlier one replaced

    unused = time.time() - UNUSED_DAYS * 86400 - 60
    os.utime(new.archive, (unused, unused))
    assert ClassData.for_runtime(version, java, "5.x", [str(classes)], cache).dumping is not None
    assert not new.archive.exists()

    assert start(ClassData.for_runtime(version, java, "5.x", [str(classes)], cache), classes)  # written again
    nearly = time.time() - (UNUSED_DAYS - 1) * 86400
    os.utime(new.archive, (nearly, nearly))
    mapped = ClassData.for_runtime(version, java, "5.x", [str(classes)], cache)
    assert mapped.dumping is None
    assert start(mapped, classes)
    assert mapped.archive.stat().st_mtime > nearly + 86400  # mapped: a run used it, its days start again


def test_a_spark_class_path_names_the_spark_home_and_what_the_launcher_adds(tmp_path: Path) -> None:
    home = str(tmp_path / "pyspark")
    plain = spark_class_path(home, {}, {})
    assert plain == [os.path.join(home, "conf"), os.path.join(home, "jars", "*")]
    added = spark_class_path(home, {"spark.driver.extraClassPath": "/x.jar"},
                             {"HADOOP_CONF_DIR": "/etc/hadoop", "SPARK_DIST_CLASSPATH": "/h/a.jar:/h/b.jar"})
    assert added[0] == "/x.jar"
    assert {"/etc/hadoop", "/h/a.jar", "/h/b.jar"} <= set(added)


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
