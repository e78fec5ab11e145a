"""The fault matrix's workload: what it asks Connect for, and the statuses that leaves each key in (the oracle).

Each row has fresh connectors of the scripted test connector (``harness/jvm``, ``TASKS`` tasks each), one per role;
a role is what the workload does to that connector while the fault runs:

    role      set up before the fault     its steps in the fault              then: the connector, its tasks
    pause     created                     pause                                PAUSED, PAUSED
    resume    created, paused             resume                               RUNNING, RUNNING
    flip      created                     pause, resume, pause (spread out)    PAUSED, PAUSED
    stop      created                     stop                                 STOPPED, no task status
    restart   created                     restart with its tasks               RUNNING, RUNNING
    fail      created                     its config changed: task 0 fails     RUNNING, task 0 FAILED, task 1 RUNNING
    delete    created                     deleted                              no status at all
    new       -                           created (a connector added:          RUNNING, RUNNING
                                          a rebalance)

A stopped connector's tasks, and a deleted connector's every key, have no status: Connect's leader tombstones the
statuses of connectors and tasks the config topic no longer holds after each rebalance. But a task stopping writes its
UNASSIGNED (``putSafe``) as the leader tombstones it, in no order Connect keeps: a stock worker, under no fault, left
a deleted connector's task UNASSIGNED in its topic (and so served by its task status route). So such a task may end
with no status or UNASSIGNED (``is_right``). The ``none`` row (no fault) checks this table against real workers: pod
and stock must both end right there.

A step is *timed* when it is its connector's only step and changes what Connect's REST API shows (all but ``flip``,
whose steps follow each other, and ``restart``, which ends in the state it began in): the time until every worker's
REST API shows it is measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from status_store.connect.model import TASK_PREFIX, TaskId, connector_key, task_key

from .java_process import SOURCE_CONNECTOR
from .real_connect import Answer, ConnectCluster, ConnectError

TASKS = 2
# A REST call is asked again while Connect answers 409 (a rebalance) or 5xx (a worker gone, a leader moving), within
# this bound.
REST_BOUND_S = 60.0
RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED = "RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED"


@dataclass(frozen=True)
class Shown:
    """What a connector's status should show: its state and each task's (by task id), None for no status."""

    connector: str | None
    tasks: tuple[str | None, ...] = (None,) * TASKS

    @staticmethod
    def all_in(state: str) -> Shown:
        return Shown(state, (state,) * TASKS)

    def by_key(self, name: str) -> dict[str, str | None]:
        """Each status key of the connector and the state it should hold (None: no status)."""
        return {connector_key(name): self.connector,
                **{task_key(TaskId(name, task)): state for task, state in enumerate(self.tasks)}}


GONE = Shown(None)


@dataclass(frozen=True)
class Step:
    """One REST call of the workload to a connector, and what its status shows once the call has taken effect."""

    role: str
    connector: str
    method: str
    path: str
    body: dict[str, str] | None
    shown: Shown
    timed: bool


def config(failing: bool = False) -> dict[str, str]:
    """A scripted source connector's config: its tasks run, or task 0 fails (from ``poll()``)."""
    settings = {"connector.class": SOURCE_CONNECTOR, "tasks.max": str(TASKS)}
    if failing:
        settings["scripted.task.0"] = "fail"
    return settings


class Workload:
    """One row's connectors (named ``<prefix>-<role>``), the calls that set them up, the steps, and the oracle."""

    ROLES = ("pause", "resume", "flip", "stop", "restart", "fail", "delete", "new")

    def __init__(self, prefix: str) -> None:
        self.names = {role: f"{prefix}-{role}" for role in self.ROLES}

    def setup(self) -> list[tuple[str, str, dict[str, str] | None]]:
        """The calls before the fault, in order: every connector but ``new`` created, ``resume`` paused."""
        calls: list[tuple[str, str, dict[str, str] | None]] = [
            ("PUT", f"/connectors/{name}/config", config()) for role, name in self.names.items() if role != "new"]
        return [*calls, ("PUT", f"/connectors/{self.names['resume']}/pause", None)]

    def before(self) -> dict[str, Shown]:
        """What each connector shows once set up (``new``: nothing yet)."""
        return {name: GONE if role == "new" else Shown.all_in(PAUSED if role == "resume" else RUNNING)
                for role, name in self.names.items()}

    def steps(self) -> list[Step]:
        """The steps in the order they go: the flip's first, the others, the flip's last two (spread by time)."""
        n = self.names
        paused, running = Shown.all_in(PAUSED), Shown.all_in(RUNNING)
        return [
            Step("flip", n["flip"], "PUT", f"/connectors/{n['flip']}/pause", None, paused, False),
            Step("pause", n["pause"], "PUT", f"/connectors/{n['pause']}/pause", None, paused, True),
            Step("resume", n["resume"], "PUT", f"/connectors/{n['resume']}/resume", None, running, True),
            Step("stop", n["stop"], "PUT", f"/connectors/{n['stop']}/stop", None, Shown(STOPPED), True),
            Step("restart", n["restart"], "POST", f"/connectors/{n['restart']}/restart?includeTasks=true", None,
                 running, False),
            Step("fail", n["fail"], "PUT", f"/connectors/{n['fail']}/config", config(failing=True),
                 Shown(RUNNING, (FAILED, RUNNING)), True),
            Step("delete", n["delete"], "DELETE", f"/connectors/{n['delete']}", None, GONE, True),
            Step("new", n["new"], "PUT", f"/connectors/{n['new']}/config", config(), running, True),
            Step("flip", n["flip"], "PUT", f"/connectors/{n['flip']}/resume", None, running, False),
            Step("flip", n["flip"], "PUT", f"/connectors/{n['flip']}/pause", None, paused, False),
        ]

    def expected(self) -> dict[str, str | None]:
        """The oracle: each status key the workload touched, and the state its steps left it in (None: no status)."""
        shown = self.before()
        for step in self.steps():
            shown[step.connector] = step.shown
        return {key: state for name, last in shown.items() for key, state in last.by_key(name).items()}


def is_right(key: str, due: str | None, seen: str | None) -> bool:
    """Whether a key's status is what the workload left it in: its state, or for a task that is to have none
    (its connector stopped or deleted) none or UNASSIGNED (Connect's own race, above)."""
    return seen == due or (due is None and seen == UNASSIGNED and key.startswith(TASK_PREFIX))


def call(connect: ConnectCluster, method: str, path: str, body: object) -> Answer:
    """A workload's REST call to a Connect cluster (any running worker: each forwards to the leader), asked again
    while Connect answers 409 or 5xx, within ``REST_BOUND_S``. A deletion answered 404 when asked again was made."""
    deadline = time.monotonic() + REST_BOUND_S
    asked = False
    while True:
        try:
            answer = connect.request(method, path, body)
        except OSError as e:  # the worker answering went away meanwhile
            answer = Answer(599, str(e).encode(), {})
        if answer.status < 300 or (asked and method == "DELETE" and answer.status == 404):
            return answer
        if (answer.status != 409 and answer.status < 500) or time.monotonic() > deadline:
            raise ConnectError(f"{method} {path} -> {answer.status} {answer.body[:300]!r}")
        asked = True
        time.sleep(0.5)


def shown_by(status: Any, name: str) -> dict[str, str | None]:
    """Each status key of a connector and the state a Connect-shaped status answer shows it in (None: none)."""
    found = {connector_key(name): status["connector"]["state"]}
    for task in status["tasks"]:
        found[task_key(TaskId(name, task["id"]))] = task["state"]
    return {key: found.get(key) for key in GONE.by_key(name)}
