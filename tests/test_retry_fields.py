"""No module of the retry engine writes another object's fields: each part changes another's state through its
methods (a slot's, a partition's, the cluster probe's and the release's steps are in holds.py, the handle's in
updates.py), so that one update's path can be followed part by part. A new write of another object's field fails
here."""

from __future__ import annotations

import ast
from pathlib import Path

RETRY = Path(__file__).resolve().parent.parent / "status_store" / "retry"

# Methods that change the collection they are called on (``release.inflight.add(n)`` writes the release's field).
MUTATORS = {"add", "append", "appendleft", "clear", "discard", "extend", "insert", "move_to_end", "pop", "popitem",
            "popleft", "remove", "setdefault", "update"}

def foreign_writes(source: str) -> list[tuple[int, str]]:
    """(line, target) of each assignment, augmented assignment, ``del`` or mutating call whose target is a field of
    an object other than ``self``: ``slot.waiting = u``, ``self._cluster.due = t``, ``partition.line[k] = s``,
    ``release.inflight.add(n)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
              and isinstance(node.func.value, ast.Attribute)):
            targets = [node.func.value]
        while targets:
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets.extend(target.elts)
                continue
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and not (isinstance(target.value, ast.Name)
                                                          and target.value.id in {"self", "cls"}):
                found.append((target.lineno, ast.unparse(target)))
    return sorted(found)


def test_no_retry_module_writes_another_objects_fields() -> None:
    found = {path.name: writes for path in sorted(RETRY.glob("*.py")) if (writes := foreign_writes(path.read_text()))}
    assert found == {}


def test_the_rule_sees_each_kind_of_write_and_not_an_objects_own() -> None:
    source = """
class Part:
    def step(self, slot, partition, release):
        self.count = 1
        self._table[slot.key] = slot
        self.x, self.y = 1, 2
        slot.waiting = None
        self._cluster.due += 1.0
        partition.line[slot.key] = slot
        release.inflight.add(3)
        del slot.partition.line[slot.key]
        a, b.c = 1, 2
        self._heap.append(slot)
        slot.update(1)
"""
    assert [target for _, target in foreign_writes(source)] == [
        "slot.waiting", "self._cluster.due", "partition.line", "release.inflight", "slot.partition.line", "b.c"]
