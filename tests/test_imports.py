"""Dependencies point one way: the pure core needs neither Kafka nor HTTP, the retry queue does not know the Kafka
log, and parsing configuration never loads librdkafka's mock-cluster binding. Read from the source's imports
(transitively), so a new import that breaks a layer fails here."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "status_store"
# Pure: Connect's rules and the retry engine's arithmetic, testable without a broker or a server.
PURE = ["model", "codec", "jackson", "cache", "backoff", "budget", "errors", "delivery", "updates", "holds",
        "record_limit", "settings"]
# The retry path, bottom up: the parts RetryQueue composes, each importing only parts before it here (no circle,
# none imports RetryQueue's module back).
RETRY_PATH = ["scheduler", "holds", "ledger", "partition_gate", "retry_timing", "key_slots", "key_writes",
              "retry_queue"]
# The parts that never touch the event loop themselves (a test drives them on a clock of its own).
NO_EVENT_LOOP = ["scheduler", "holds", "partition_gate", "retry_timing", "key_slots", "key_writes"]
THIRD_PARTY_IO = ("confluent_kafka", "fastapi", "starlette", "uvicorn", "pyspark", "prometheus_client", "sqlite3")


def _module_path(module: str) -> Path:
    path = PACKAGE.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def direct_imports(module: str) -> frozenset[str]:
    """Modules ``status_store.<module>`` imports: package modules without the prefix, others by top-level name
    prefixed with ``ext:``."""
    tree = ast.parse(_module_path(module).read_text())
    package = module.split(".")[:-1] if _module_path(module).name != "__init__.py" else module.split(".")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(_classify(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
                names = [f"{target}.{a.name}" if target else a.name for a in node.names]
                found.update(name for name in names if _module_path(name).exists())
                if target and _module_path(target).exists():
                    found.add(target)
            elif node.module is not None:
                found.add(_classify(node.module))
    found.discard("")
    return frozenset(found)


def _classify(name: str) -> str:
    if name == "status_store" or name.startswith("status_store."):
        return name.removeprefix("status_store").removeprefix(".")
    return "ext:" + name.split(".")[0]


def closure(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for imported in direct_imports(current):
            if imported not in seen:
                seen.add(imported)
                if not imported.startswith("ext:"):
                    todo.append(imported)
    return seen


@pytest.mark.parametrize("module", PURE)
def test_the_pure_core_needs_no_kafka_client_server_or_storage(module: str) -> None:
    reached = closure(module)
    assert not {f"ext:{name}" for name in THIRD_PARTY_IO} & reached, sorted(reached)
    assert not {"kafka", "store", "api", "mock_cluster", "client_log"} & {m.split(".")[0] for m in reached}


def test_the_retry_queue_does_not_know_the_kafka_log_or_the_store() -> None:
    reached = {m.split(".")[0] for m in closure("retry_queue")}
    assert not {"kafka", "store", "ext:confluent_kafka", "api", "spool", "history"} & reached, sorted(reached)


@pytest.mark.parametrize("module", RETRY_PATH)
def test_the_retry_path_imports_one_way(module: str) -> None:
    later = set(RETRY_PATH[RETRY_PATH.index(module) + 1:])
    reached = closure(module)
    assert not later & reached, sorted(later & reached)
    assert not {"kafka", "store", "ext:confluent_kafka", "api", "spool", "history"} & {m.split(".")[0]
                                                                                     for m in reached}


@pytest.mark.parametrize("module", NO_EVENT_LOOP)
def test_the_retry_paths_parts_run_without_an_event_loop(module: str) -> None:
    assert "ext:asyncio" not in direct_imports(module)


def test_configuration_never_loads_the_mock_cluster_binding() -> None:
    reached = closure("config")
    assert "mock_cluster" not in reached, sorted(reached)
    assert "ext:ctypes" not in reached, sorted(reached)


def test_the_package_never_imports_its_testing_module() -> None:
    modules = (path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
               for path in PACKAGE.rglob("*.py"))
    assert [module for module in modules if module != "testing" and "testing" in direct_imports(module)] == []


def test_the_import_reader_sees_imports() -> None:
    # The checks above must not pass because the reader finds nothing.
    assert "ext:confluent_kafka" in closure("store")
    assert {"retry_queue", "kafka", "codec"} <= {m.split(".")[0] for m in closure("store")}
    assert "updates" in direct_imports("retry_queue")
    assert {"scheduler", "ledger", "partition_gate", "key_writes"} <= direct_imports("retry_queue")
