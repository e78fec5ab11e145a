"""The retry engine's contracts (pyproject.toml's import-linter contracts) cover every module of the wing: a new
module falls under them, or this fails. Only the queue (the one asyncio layer) imports asyncio, the handle
(``updates``) included: its caller awaits a future the queue made; nothing outside the wing imports the engine or its
parts."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RETRY = ROOT / "status_store" / "retry"

# What the rest of the package may import of the wing: the queue and what a caller holds.
PUBLIC = {"queue", "updates", "backoff", "budget", "delivery"}
# The one module that imports asyncio: the queue drives the engine on the event loop, and makes the future a handle's
# caller awaits (``StatusUpdate.result()``, ``settled()``).
ASYNCIO = {"queue"}


def contract(name: str) -> dict[str, list[str]]:
    """The contract whose name starts with ``name``: its lists of modules."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c["name"].startswith(name)]
    assert len(found) == 1, name
    return {key: value for key, value in found[0].items() if isinstance(value, list)}


def modules() -> set[str]:
    """The wing's modules, by name."""
    return {path.stem for path in RETRY.glob("*.py") if path.stem != "__init__"}


def dotted(names: set[str]) -> set[str]:
    return {f"status_store.retry.{name}" for name in names}


def test_every_module_of_the_wing_but_the_queue_is_forbidden_asyncio() -> None:
    event_loop = contract("The retry engine's parts need no event loop")
    assert event_loop["forbidden_modules"] == ["asyncio"]
    assert set(event_loop["source_modules"]) == dotted(modules() - ASYNCIO)


def test_the_engine_and_its_parts_are_the_wings_own() -> None:
    protected = contract("Only the retry wing imports the retry engine's parts")
    assert set(protected["protected_modules"]) == dotted(modules() - PUBLIC)
    assert protected["allowed_importers"] == ["status_store.retry"]


def test_the_queue_talks_only_to_the_engine() -> None:
    queue = contract("The retry queue talks only to the engine")
    assert set(queue["forbidden_modules"]) == dotted(modules() - PUBLIC - {"engine", "commands"})
