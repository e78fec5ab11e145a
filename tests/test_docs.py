"""Docs that cannot drift from the code: each wing's ``__init__`` names exactly its modules, the operations guide's
contents are its headings, and every file docs/architecture.md's "change X" table names exists."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "status_store"
WINGS = sorted(path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file())

# A module (lower case) is named as ``name``, ``name/`` (a folder), ``name.Class`` or name.py; ``status_store.x``
# is a wing's import rule, not one of its modules.
NAMED = re.compile(r"``(?!status_store\b)([a-z_][a-z0-9_]*)(?:/|\.[A-Z]\w*)?``|\b([a-z_][a-z0-9_]*)\.py\b")


def modules_of(wing: str) -> set[str]:
    """The wing's modules and folders, as its docstring names them (``__init__`` and caches aside)."""
    folder = PACKAGE / wing
    return ({path.stem for path in folder.glob("*.py") if path.name != "__init__.py"}
            | {path.name for path in folder.iterdir() if path.is_dir() and path.name != "__pycache__"})


def named_in(docstring: str) -> set[str]:
    return {module or file for module, file in NAMED.findall(docstring)}


def test_the_wings_are_the_package_folders() -> None:
    assert WINGS == ["act", "analytics", "api", "config", "connect", "durable", "embedded", "fleet", "kafka", "retry"]


@pytest.mark.parametrize("wing", WINGS)
def test_a_wings_docstring_names_exactly_its_modules(wing: str) -> None:
    docstring = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text())) or ""
    named = named_in(docstring)
    modules = modules_of(wing)
    assert not modules - named, f"status_store/{wing}/__init__.py does not name {sorted(modules - named)}"
    assert not named - modules, f"status_store/{wing}/__init__.py names {sorted(named - modules)}, not in the folder"


def test_the_naming_rule_sees_a_missing_and_a_stray_module() -> None:
    assert named_in("``reader``: ``TopicReader``; ``queue.RetryQueue``, spool.py, ``routes/``") == {
        "reader", "queue", "spool", "routes"}
    assert named_in("``status_store.connect``, ``reader.status_records``, ``bootstrap.servers``") == set()


def docs_contents(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_contents.py"), *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_the_operations_guides_contents_are_its_headings() -> None:
    done = docs_contents("--check", "docs/operations.md")
    assert done.returncode == 0, done.stderr


def test_a_new_section_fails_the_check_until_it_is_listed(tmp_path: Path) -> None:
    page = tmp_path / "operations.md"
    page.write_text((ROOT / "docs" / "operations.md").read_text() + "\n## A helper's new section\n\nIts text.\n")
    assert docs_contents("--check", str(page)).returncode == 1
    assert docs_contents(str(page)).returncode == 0
    assert "\n- [A helper's new section](#a-helpers-new-section)\n<!-- end of contents -->" in page.read_text()
    assert docs_contents("--check", str(page)).returncode == 0


def test_headings_in_fenced_code_are_not_sections(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n<!-- contents: made by `python scripts/docs_contents.py docs/operations.md`; do not "
                    "edit by hand -->\n<!-- end of contents -->\n\n## One `thing`\n\n```\n## not a heading\n```\n\n"
                    "### Two, again\n\n## One `thing`\n")
    assert docs_contents(str(page)).returncode == 0
    listed = page.read_text().split("-->\n", 1)[1].split("<!--", 1)[0]
    assert listed == "- [One `thing`](#one-thing)\n  - [Two, again](#two-again)\n- [One `thing`](#one-thing-1)\n"


def change_table() -> list[str]:
    """The rows of docs/architecture.md's "Change X: read Y, run Z" table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Change X: read Y, run Z\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| change ")]


def test_every_file_the_change_table_names_exists() -> None:
    rows = change_table()
    named = [token for row in rows for token in re.findall(r"`([^`\s]+)`", row)
             if "/" in token or re.search(r"\.(py|md|json|sh|xml)$", token)]
    assert len(named) > 50
    missing = [token for token in named if not (ROOT / token).exists() and not (PACKAGE / token).exists()]
    assert not missing, f"docs/architecture.md's change table names files that do not exist: {missing}"


def test_the_change_table_has_a_row_with_tests_for_every_wing() -> None:
    changes = " ".join(row.split("|")[1] for row in change_table())
    assert not [wing for wing in WINGS if f"`{wing}/`" not in changes]
    assert all("`tests/" in row.split("|")[3] for row in change_table())
