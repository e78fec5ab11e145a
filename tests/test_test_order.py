"""The suite's test processes take the groups that take minutes first, longest first (tests/conftest.py's
LONGEST_FIRST), as ./scripts/test.sh runs them: pytest-xdist's own order (by number of tests) would hand a module of a
few slow tests out last, and make it the run's tail. A small suite of modules named as the suite's, run with the
pytest-xdist options of scripts/test.sh and tests/conftest.py's own hook, says the order they ran in."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ROOT

from .conftest import LONGEST_FIRST

CONFTEST = '''
from tests.conftest import pytest_collection_modifyitems  # noqa: F401
'''
RECORDS = '''
import os
import pytest

@pytest.mark.parametrize("i", range({count}))
def test_{name}(i):
    with open(os.environ["ORDER_FILE"], "a") as order:
        order.write("{path}\\n")
'''


def script_options() -> list[str]:
    """The pytest-xdist options scripts/test.sh runs the suite with, but the number of processes."""
    (line,) = [line for line in (ROOT / "scripts" / "test.sh").read_text().splitlines()
               if line.startswith(".venv/bin/pytest ")]
    words = shlex.split(line.split('"$@"')[0])[1:]
    return [word for i, word in enumerate(words) if "-n" not in (word, words[i - 1])]


# A hang guard: two Python processes that import the suite's conftest took 53 s at load 31 on this 2-core machine.
@pytest.mark.timeout(300)
def test_the_longest_groups_run_first_whatever_their_number_of_tests(tmp_path: Path) -> None:
    # Two of the slow modules (one test each, the second slower than the first) and a module of many quick tests.
    slow, slower = LONGEST_FIRST[2], LONGEST_FIRST[1]
    modules = {slow: 1, slower: 1, "tests/test_many_quick_ones.py": 8}
    for path, count in modules.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(RECORDS.format(name=re.sub(r"\W", "_", Path(path).stem), count=count, path=path))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    order = tmp_path / "order"
    options = script_options()
    assert "--dist" in options, options
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", *options, "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "ORDER_FILE": str(order),
             "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert run.returncode == 0, run.stdout + run.stderr
    ran = list(dict.fromkeys(order.read_text().splitlines()))
    assert ran == [slower, slow, "tests/test_many_quick_ones.py"], f"{ran} (scripts/test.sh's options: {options})"
