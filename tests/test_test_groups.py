"""The suite's test processes keep tests/conftest.py's groups: a module's tests run in one process (its module-scoped
fixtures start once), and so do the modules with a test on the shared real Kafka processes (they start once), as
./scripts/test.sh runs them (``--dist loadgroup``). A pytest and pytest-xdist pair, or a hook order, that drops the
groups passes every test while starting each broker and worker once per process: this test is what notices. It runs
tests/conftest.py's own grouping hook, not a mark of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ROOT

# The suite's grouping hook, as tests/conftest.py defines it (with its hook options), and a fixture named as a shared
# real Kafka one that starts nothing: the grouping goes by a test's fixture names.
CONFTEST = '''
import pytest

from tests.conftest import pytest_collection_modifyitems  # noqa: F401


@pytest.fixture
def kafka_cluster():
    return "a name only"
'''
WRITES = '''
import os
import pytest

@pytest.mark.parametrize("i", range({count}))
def test_{name}(i, {fixtures}tmp_path_factory):
    out = tmp_path_factory.getbasetemp().parent.parent / f"{name}-{{i}}"
    out.write_text(os.environ["PYTEST_XDIST_WORKER"])
'''
# kafka_b: one of its tests on the shared cluster takes its whole module to the cluster's group.
MODULES = {"module": ("", 6), "kafka_a": ("kafka_cluster, ", 3), "kafka_b": ("", 3), "other": ("", 6)}
ONE_ON_THE_CLUSTER = '''

def test_kafka_b_on_the_cluster(kafka_cluster):
    pass
'''


# A hang guard, not the suite's: four Python processes that import the suite's conftest took 104 s at load 31 on this
# 2-core machine, against the suite's default bound of 120 s.
@pytest.mark.timeout(300)
def test_a_modules_tests_and_the_real_kafka_tests_each_run_in_one_process(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, (fixtures, count) in MODULES.items():
        (tmp_path / f"test_{name}.py").write_text(WRITES.format(name=name, fixtures=fixtures, count=count)
                                                  + (ONE_ON_THE_CLUSTER if name == "kafka_b" else ""))
    base = tmp_path / "base" / "run"
    base.parent.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "--basetemp", str(base), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert run.returncode == 0, run.stdout + run.stderr

    def workers(*names: str) -> set[str]:
        return {(tmp_path / "base" / f"{name}-{i}").read_text() for name in names for i in range(MODULES[name][1])}

    assert len(workers("module")) == 1, f"a module's tests ran in {sorted(workers('module'))}: its group was dropped"
    assert len(workers("kafka_a", "kafka_b")) == 1, (
        f"the real Kafka tests of two modules ran in {sorted(workers('kafka_a', 'kafka_b'))}: their group was dropped")
