"""The agent's JSON is the worker's own Jackson (jackson-core from the class path the agent was loaded from), never
one of its own: its jar carries none, and on a class path without Jackson the real ``-javaagent`` attach says so in
one line and leaves the JVM alone. Both Connect lines' Jackson are tested by the agent's Maven build (a surefire
execution per version) and by tests/test_agent_live.py (a worker of each line)."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from harness.java_process import kafka_line
from harness.sidecar import agent_jar, javaagent

pytestmark = pytest.mark.timeout(120)

# A JVM's main that needs nothing of Jackson or Connect: it says it ran.
MAIN = """public class Main {
    public static void main(String[] args) {
        System.out.println("main ran");
    }
}
"""


def test_the_agent_jar_carries_no_jackson() -> None:
    kafka_line("kafka-4")  # skips where the JVM parts (and so the built jar) are missing
    with zipfile.ZipFile(agent_jar()) as jar:
        names = jar.namelist()
    assert any(name.startswith("io/statusstore/agent/json/") for name in names), names[:20]
    assert not [name for name in names if "fasterxml" in name], "Jackson packed into the agent"


def test_on_a_class_path_without_jackson_the_agent_stays_out_in_one_line_and_the_jvm_runs(tmp_path: Path) -> None:
    kafka_line("kafka-4")
    main = tmp_path / "Main.java"
    main.write_text(MAIN, encoding="utf-8")
    # The class path holds the agent's jar alone (-javaagent appends it): no Jackson, no SLF4J (the agent then logs
    # through java.util.logging, on stderr).
    done = subprocess.run(["java", "-Xmx64m", "-XX:TieredStopAtLevel=1", javaagent("http://127.0.0.1:9"),
                           str(main)], cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False)
    lines = [line for line in done.stderr.splitlines() if "status-store agent:" in line]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "main ran", done.stdout
    assert len(lines) == 1, done.stderr
    assert "not attached: no Jackson (jackson-core" in lines[0], lines
    assert "the worker runs on its own status store" in lines[0], lines
