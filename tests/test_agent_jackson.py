"""The agent's JSON is the worker's own Jackson (jackson-core from the class path the agent was loaded from), never
one of its own: its jar carries none, and on a class path without Jackson the real ``-javaagent`` attach says so in
one line and leaves the JVM alone; attached on the command line (as KAFKA_OPTS puts it) or through
JAVA_TOOL_OPTIONS, it finds each Connect line's jackson-core, and given both ways at once it keeps the first. The
agent's Maven build runs its JSON tests on both
lines' Jackson (a surefire execution per version); tests/test_agent_live.py runs a real worker of each line."""

from __future__ import annotations

import os
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


def run_main(tmp_path: Path, java_options: list[str], env: dict[str, str]) -> tuple[list[str], str]:
    """Run MAIN in a small JVM (the source launcher); its agent lines on stderr (java.util.logging: no SLF4J here),
    and its output."""
    main = tmp_path / "Main.java"
    main.write_text(MAIN, encoding="utf-8")
    done = subprocess.run(["java", "-Xmx64m", "-XX:TieredStopAtLevel=1", *java_options, str(main)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=90, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "main ran", done.stdout
    return [line for line in done.stderr.splitlines() if "status-store agent:" in line], done.stderr


def test_the_agent_jar_carries_no_jackson() -> None:
    with zipfile.ZipFile(agent_jar()) as jar:
        names = jar.namelist()
    assert any(name.startswith("io/statusstore/agent/json/") for name in names), names[:20]
    assert not [name for name in names if "fasterxml" in name], "Jackson packed into the agent"


def test_on_a_class_path_without_jackson_the_agent_stays_out_in_one_line_and_the_jvm_runs(tmp_path: Path) -> None:
    # The class path holds the agent's jar alone (-javaagent appends it): no Jackson.
    env = {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}
    lines, stderr = run_main(tmp_path, [javaagent("http://127.0.0.1:9")], env)
    assert len(lines) == 1, stderr
    assert "not attached: no Jackson (jackson-core" in lines[0], lines
    assert "the worker runs on its own status store" in lines[0], lines


@pytest.mark.parametrize("attach", ["command line", "JAVA_TOOL_OPTIONS"])
@pytest.mark.parametrize("line", ["kafka-3", "kafka-4"])
def test_attached_either_way_the_agent_uses_the_jackson_of_the_class_path(line: str, attach: str,
                                                                          tmp_path: Path) -> None:
    """The JVM appends an agent's jar to the system class path however -javaagent reaches it (the command line, as
    KAFKA_OPTS puts it there, or JAVA_TOOL_OPTIONS): the agent finds the line's jackson-core on the same class path."""
    [jar] = sorted(kafka_line(line).directory.glob("jackson-core-*.jar"))
    version = jar.name.removeprefix("jackson-core-").removesuffix(".jar")
    agent = javaagent("http://127.0.0.1:9")
    env = {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}
    options = ["-cp", str(jar)]
    if attach == "JAVA_TOOL_OPTIONS":
        env["JAVA_TOOL_OPTIONS"] = agent
    else:
        options.append(agent)
    lines, stderr = run_main(tmp_path, options, env)
    assert len(lines) == 1, stderr
    assert "attached (status-store-agent " in lines[0], lines
    assert f", jackson-core {version};" in lines[0], lines


def test_given_both_through_java_tool_options_and_on_the_command_line_the_first_holds_and_the_second_says_so(
        tmp_path: Path) -> None:
    """A platform's JAVA_TOOL_OPTIONS and a user's KAFKA_OPTS (the command line) may both carry the agent: the JVM
    starts the one in JAVA_TOOL_OPTIONS first, whose options hold; the second says in one line that it is ignored."""
    [jar] = sorted(kafka_line("kafka-4").directory.glob("jackson-core-*.jar"))
    env = {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}
    env["JAVA_TOOL_OPTIONS"] = javaagent("http://127.0.0.1:9", {"max.keys": "123"})
    lines, stderr = run_main(tmp_path, ["-cp", str(jar), javaagent("http://127.0.0.1:7", {"max.keys": "456"})], env)
    assert len(lines) == 2, stderr
    assert "attached (status-store-agent " in lines[0], lines
    assert "url=http://127.0.0.1:9, " in lines[0], lines
    assert "max.keys=123" in lines[0], lines
    assert "given twice to this JVM (KAFKA_OPTS and JAVA_TOOL_OPTIONS both name it?): the second is ignored" in lines[1]
    assert "127.0.0.1:7" not in stderr, stderr
    assert "max.keys=456" not in stderr, stderr
