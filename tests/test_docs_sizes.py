"""The package's modules and classes stay readable: no module over MAX_MODULE_LINES lines and no class over
MAX_CLASS_LINES (STYLE.md's ~500 and ~350), but the exceptions named here, each with why it is one. An exception that
no longer applies fails too, so the list does not go stale."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "status_store"
MAX_CLASS_LINES = 350
MAX_MODULE_LINES = 500

#: (module, class) -> why it is over the bound for now.
EXCEPTIONS: dict[tuple[str, str], str] = {}


#: module -> why it is over the bound for now.
MODULE_EXCEPTIONS: dict[str, str] = {}


def class_lines(source: str) -> dict[str, int]:
    """Each class of a module (nested ones by their dotted name) and its lines, decorators and docstring included."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(decorator.lineno for decorator in child.decorator_list)])
                sizes[name] = (child.end_lineno or child.lineno) - first + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def over_the_bound() -> dict[tuple[str, str], int]:
    return {(str(path.relative_to(PACKAGE)), name): lines for path in sorted(PACKAGE.rglob("*.py"))
            for name, lines in class_lines(path.read_text()).items() if lines > MAX_CLASS_LINES}


def test_no_class_is_over_the_bound_but_the_named_exceptions() -> None:
    over = over_the_bound()
    assert not {key: lines for key, lines in over.items() if key not in EXCEPTIONS}, \
        f"classes over {MAX_CLASS_LINES} lines: split them by concern"
    assert not [key for key in EXCEPTIONS if key not in over], \
        "an exception that is no longer over the bound (or no longer exists): drop it from EXCEPTIONS"


def test_the_measure_counts_a_class_whole() -> None:
    body = "\n".join(f"    field_{n}: int = {n}" for n in range(MAX_CLASS_LINES))
    source = f"import dataclasses\n\n\n@dataclasses.dataclass\nclass Big:\n{body}\n\n    class Inner:\n        pass\n"
    assert class_lines(source) == {"Big": MAX_CLASS_LINES + 5, "Big.Inner": 2}


def test_no_module_is_over_the_bound_but_the_named_exceptions() -> None:
    over = {str(path.relative_to(PACKAGE)): lines for path in sorted(PACKAGE.rglob("*.py"))
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not {module: lines for module, lines in over.items() if module not in MODULE_EXCEPTIONS}, \
        f"modules over {MAX_MODULE_LINES} lines: split them by concern"
    assert not [module for module in MODULE_EXCEPTIONS if module not in over], \
        "an exception that is no longer over the bound (or no longer exists): drop it from MODULE_EXCEPTIONS"
