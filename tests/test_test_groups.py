"""The suite's test processes keep tests/conftest.py's groups: a group's tests run in one process, so the real
Kafka processes and a module's fixtures start once (./scripts/test.sh runs ``--dist loadgroup``). A pytest and
pytest-xdist pair that drops the groups passes every test while starting each broker and worker once per process:
this test is what notices."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os
import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i, tmp_path_factory):
    out = tmp_path_factory.getbasetemp().parent.parent / f"worker-{i}"
    out.write_text(os.environ["PYTEST_XDIST_WORKER"])
'''


def test_a_groups_tests_run_in_one_process(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    base = tmp_path / "base" / "run"
    base.parent.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "--basetemp", str(base), str(tmp_path / "test_grouped.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    workers = {(tmp_path / "base" / f"worker-{i}").read_text() for i in range(6)}
    assert len(workers) == 1, f"the group's six tests ran in {sorted(workers)}: --dist loadgroup ignored the group"
