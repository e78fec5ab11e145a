"""The package's arrows are import-linter contracts (pyproject.toml, run by ./scripts/test.sh as ``lint-imports``).
Here: they hold, and they can fail: a copy of the package with one wrong import breaks the contract it should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": ""})


def test_the_contracts_hold() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("connect/codec.py", "import confluent_kafka", "need no Kafka client"),
    ("retry/holds.py", "from ..store import StatusStore", "Wings point one way"),
    ("retry/scheduler.py", "from .queue import RetryQueue", "import one way, bottom up"),
    ("retry/partition_gate.py", "import asyncio", "need no event loop"),
    ("retry/commands.py", "import asyncio", "need no event loop"),
    ("retry/updates.py", "import asyncio", "need no event loop"),
    ("store.py", "from .retry.holds import Slot", "Only the retry wing imports the retry engine's parts"),
    ("act/plan.py", "import asyncio", "decided without an event loop"),
    ("config/load.py", "from ..embedded import mock_cluster", "mock-cluster binding"),
    ("config/clients.py", "import ctypes", "mock-cluster binding"),
    ("store.py", "import harness", "harness"),
])
def test_a_wrong_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    shutil.copytree(ROOT / "status_store", tmp_path / "status_store", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__", "jvm"))
    path = tmp_path / "status_store" / module
    assert path.exists(), f"{module} is not a module of the package: the case would test nothing"
    with path.open("a") as source:
        source.write(f"\n{line}\n")
    done = lint(tmp_path)
    assert done.returncode != 0
    broken = [row for row in done.stdout.splitlines() if row.endswith("BROKEN")]
    assert [row for row in broken if contract in row], done.stdout
