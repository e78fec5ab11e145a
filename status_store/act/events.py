"""What the sidecar did and saw beside the status records, as events: a restart it sent (``GET /events``'s
``restart`` and the history topic's ``restart`` event, docs/analytics.md), a failure it does not restart and why
(``GET /events``' ``restart`` with the result ``skipped``: no request was sent, so the history topic has none), a
worker that left or came back to the group, or hangs in it (``GET /events``'s ``worker``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ..connect import codec
from ..connect.failures import Failure
from ..connect.model import ConnectorKey, TaskId, TaskKey, connector_key, task_key
from ..durable.history import encode_event
from ..fleet.event import StatusEvent
from ..fleet.text import shown
from .plan import Due, Result, Skip, Target
from .stuck import Stuck


@dataclass(frozen=True, slots=True)
class Restart:
    """One restart request and how it went: when (seconds since the epoch), the HTTP status (None: no answer) and
    the error when there was no answer; ``refuted``: the worker, asked first, refuted it (it says another state, or
    Connect has no such connector or task), so no restart was sent."""

    due: Due
    result: Result
    time: float
    http_status: int | None
    error: str | None
    refuted: bool = False

    @property
    def key(self) -> str:
        """The status key of what was restarted."""
        target = self.due.target
        return connector_key(target.connector) if target.task is None else task_key(TaskId(target.connector,
                                                                                            target.task))

    def fields(self) -> dict[str, object]:
        """The restart's fields, as the history topic and ``GET /events`` carry them."""
        due = self.due
        return {"kind": "connector" if due.target.task is None else "task", "connector": due.target.connector,
                "task": due.target.task, "worker_id": due.worker, "attempt": due.attempt, "reason": due.reason,
                "result": self.result.value, "http_status": self.http_status, "error": self.error}

    def history_event(self, sidecar: str) -> bytes:
        """The history topic's ``restart`` event (the conventions of the ``status`` and ``outcome`` events: ``time``
        in epoch milliseconds, the status key, its kind, connector and task)."""
        failed_at = self.due.failed_at
        return encode_event({"event": "restart", "time": round(self.time * 1000), "sidecar": sidecar, "key": self.key,
                             **self.fields(),
                             "failed_at": round(failed_at * 1000) if failed_at is not None else None})


@dataclass(frozen=True, slots=True)
class Skipped:
    """A FAILED status not restarted: its target, worker, why (``skip``), its failure, when it was read."""

    target: Target
    worker: str
    skip: Skip
    failure: Failure
    time: float

    def fields(self) -> dict[str, object]:
        """As ``GET /events`` carries it: a ``restart`` whose result is ``skipped``."""
        target = self.target
        return {"kind": "connector" if target.task is None else "task", "connector": target.connector,
                "task": target.task, "worker_id": self.worker, "attempt": None, "reason": self.failure.cause,
                "result": "skipped", "skipped": self.skip.value, "failure": self.failure.fields(),
                "http_status": None, "error": None}


def _key(target: Target) -> ConnectorKey | TaskKey:
    return ConnectorKey(target.connector) if target.task is None else TaskKey(target.connector, target.task)


def _position(position: Mapping[int, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(position), tuple(position.values())


class RestartEvent(StatusEvent):
    """``event: restart`` of ``GET /events``: a restart request this sidecar sent and how it went."""

    __slots__ = ("restart",)

    def __init__(self, restart: Restart | Skipped, position: Mapping[int, int]) -> None:
        target = restart.due.target if isinstance(restart, Restart) else restart.target
        super().__init__(_key(target), None, -1, -1, restart.time, *_position(position))
        self.restart = restart
        reason = restart.due.reason if isinstance(restart, Restart) else restart.failure.action
        self.size += len(reason or "") * 2

    @property
    def name(self) -> str:
        return "restart"

    def data(self) -> str:
        # The connector's name and the worker id as every view of the fleet shows them (``text.shown``).
        restart = self.restart
        target, worker = (restart.due.target, restart.due.worker) if isinstance(restart, Restart) else (
            restart.target, restart.worker)
        return _json({**restart.fields(), "connector": shown(target.connector), "worker_id": shown(worker),
                      "timestamp": self.timestamp})


class WorkerEvent(StatusEvent):
    """``event: worker`` of ``GET /events``: a worker left the Connect group (``up`` false, gone since ``since``) or
    came back."""

    __slots__ = ("up", "worker_id")

    def __init__(self, worker_id: str, up: bool, at: float, position: Mapping[int, int]) -> None:
        # No connector's: a subscriber of one connector is not handed it.
        super().__init__(ConnectorKey(""), None, -1, -1, at, *_position(position))
        self.worker_id, self.up = worker_id, up
        self.size += len(worker_id) * 2

    @property
    def name(self) -> str:
        return "worker"

    def data(self) -> str:
        return _json({"kind": "worker", "worker_id": shown(self.worker_id), "up": self.up,
                      "since": None if self.up else self.timestamp, "timestamp": self.timestamp})


class WorkerStuckEvent(StatusEvent):
    """``event: worker`` of ``GET /events`` for a worker in the group that hangs (``stuck`` with why: its ``GET
    /health`` answered 500, or nothing) or answers again (``stuck`` false)."""

    __slots__ = ("stuck", "worker_id")

    def __init__(self, worker_id: str, stuck: Stuck | None, at: float, position: Mapping[int, int]) -> None:
        super().__init__(ConnectorKey(""), None, -1, -1, at, *_position(position))
        self.worker_id, self.stuck = worker_id, stuck
        self.size += (len(worker_id) + len(stuck.message or "") if stuck is not None else len(worker_id)) * 2

    @property
    def name(self) -> str:
        return "worker"

    def data(self) -> str:
        stuck = self.stuck
        return _json({"kind": "worker", "worker_id": shown(self.worker_id), "up": True, "stuck": stuck is not None,
                      "since": stuck.since if stuck is not None else None,
                      "probe": stuck.probe.value if stuck is not None else None,
                      "message": stuck.message if stuck is not None else None, "timestamp": self.timestamp})


def _json(fields: Mapping[str, object]) -> str:
    # Names and traces come from the topic: a lone surrogate is written as Jackson's \\uD800 escape.
    return "{" + ",".join(f"{json.dumps(k)}:{_value(v)}" for k, v in fields.items()) + "}"


def _value(value: object) -> str:
    if isinstance(value, dict):
        return _json(value)
    return codec.json_string(value) if isinstance(value, str) else json.dumps(value)
