"""The harness's JVMs: a clean stop that outlasts its bound is killed, and leaves where it hung."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.java_process import JavaProcess, compiled, wait_until

from .conftest import real_line

HANGS_ON_STOP = """
public class HangsOnStop {
    public static void main(String[] args) throws Exception {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                Thread.sleep(600_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "a-hanging-shutdown-hook"));
        System.out.println("started");
        Thread.sleep(600_000);
    }
}
"""


def test_a_jvm_that_outlasts_its_clean_stop_is_killed_after_a_thread_dump(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # A Connect worker whose clean stop outlasted the bound was killed without a word, and the test that stopped it
    # met a crash's aftermath instead (no UNASSIGNED statuses), with nothing to say where the stop had hung.
    line = real_line("kafka-4")
    source = tmp_path / "src" / "HangsOnStop.java"
    source.parent.mkdir()
    source.write_text(HANGS_ON_STOP, encoding="utf-8")
    classes = compiled(line, "hangs-on-stop", tmp_path, source.parent)
    process = JavaProcess("hangs-on-stop", line, "HangsOnStop", [], tmp_path / "run", extra_classpath=[classes],
                          heap="64m")
    process.start()
    try:
        wait_until(lambda: b"started" in process.stdout_file.read_bytes(), 60, "the JVM started")
        process.stop(timeout=1.0)
        assert not process.alive()
        out = process.stdout_file.read_text(encoding="utf-8", errors="replace")
        assert "Full thread dump" in out
        assert '"a-hanging-shutdown-hook"' in out
        assert f"hangs-on-stop (pid {process.pid}) outlasted its clean stop (1 s): killed" in capsys.readouterr().err
    finally:
        process.kill()
