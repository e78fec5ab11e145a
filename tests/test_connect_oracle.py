"""Connect's own REST API as the oracle.

A scenario is driven through a real Connect cluster's REST API (Apache Kafka's newest 4.x, two distributed
workers, the scripted test connector of harness/jvm), and after every step every GET route that status-store serves
is asked of both, the Connect worker and a sidecar reading the same status and config topics (started with the
workers' own properties): the same status code and the same JSON (for the status routes, the same bytes), or a
difference that docs/compatibility.md names (``DIFFERENCES``; tests/test_compatibility.py checks each is there).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.java_process import SCRIPTED_VERSION, SINK_CONNECTOR, SOURCE_CONNECTOR, wait_until
from harness.real_connect import Answer, ConnectCluster, all_in, states
from harness.sidecar import AgentPod, LiveSidecar

from .helpers import eventually_value

# Both variants share the suite's real Kafka processes (tests/conftest.py groups the tests that do).
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("real-kafka")]

# How long both sides may take to read the same records and agree.
AGREE_WAIT = 30.0
STEP_WAIT = 60.0
# A failure message beyond the Basic Multilingual Plane, with a line separator and an accent: the trace's bytes
# and the REST answers escape each differently.
MESSAGE = "boom \U0001f600 \u00e9 \u2028 \U0001d7cf"

# Differences docs/compatibility.md names, by the words of its row (tests/test_compatibility.py checks them).
DIFFERENCES = {
    "root": "`GET /`: `{\"version\",\"commit\",\"kafka_cluster_id\"}`",
    "list order": "`GET /connectors`: the configured connectors (config topic), in hash order",
    "health": "`GET /health`: 200 `{\"status\":\"healthy\",...}`",
}


def source(**settings: str) -> dict[str, str]:
    return {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2", **settings}


def sink(topic: str, **settings: str) -> dict[str, str]:
    return {"connector.class": SINK_CONNECTOR, "tasks.max": "2", "topics": topic, **BYTES, **settings}


# A sink takes whatever it is given, as bytes.
BYTES = {"key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
         "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}


def comparable(route: str, answer: Answer) -> Any:
    """What of an answer both sides must agree on: the JSON (and, for the status routes, the bytes), but for the
    differences docs/compatibility.md names."""
    body = answer.json() if answer.body else None
    if route == "/":
        # status-store is not a Connect worker: its own version and commit. The cluster is the same one.
        return answer.status, list(body)[:3], body["kafka_cluster_id"]
    if route == "/health":
        return answer.status, body["status"]
    if route == "/connectors" and answer.status == 200:
        return answer.status, sorted(body)  # Connect lists in its hash map's order, status-store sorted
    if route.endswith("/status") and answer.status == 200:
        return answer.status, answer.body
    return answer.status, body


@dataclass
class Scenario:
    """The Connect cluster, the sidecar beside it, and the connectors created so far."""

    connect: ConnectCluster
    sidecar: LiveSidecar
    steps: int = 0

    def routes(self) -> list[str]:
        """Every GET route status-store serves, for every connector either side knows of and one nobody does."""
        names = set(self.connect.call("GET", "/connectors")) | set(self.sidecar.call("GET", "/connectors"))
        routes = ["/", "/health", "/connectors", "/connectors?expand=status", "/connectors?expand=info",
                  "/connectors?expand=status&expand=info", "/connectors?expand=bogus", "/connectors?expand="]
        for name in [*sorted(names), "never-created"]:
            base = f"/connectors/{name}"
            routes += [base, f"{base}/config", f"{base}/status", f"{base}/tasks", f"{base}/topics"]
            tasks = self.connect.request("GET", f"{base}/status")
            count = len(tasks.json()["tasks"]) if tasks.status == 200 else 0
            routes += [f"{base}/tasks/{task}/status" for task in range(count + 1)]
        return routes

    def differences(self) -> dict[str, tuple[Any, Any]]:
        """Each route on which the two sides disagree, with both answers."""
        found = {}
        for route in self.routes():
            ours = comparable(route, self.sidecar.request("GET", route))
            theirs = comparable(route, self.connect.request("GET", route))
            if ours != theirs:
                found[route] = (theirs, ours)
        return found

    def agree(self, step: str) -> None:
        """Wait, bounded, until both sides answer every route alike; fail with what differs."""
        seen: list[dict[str, tuple[Any, Any]]] = []

        def differences_now() -> dict[str, tuple[Any, Any]]:
            seen.append(self.differences())
            return seen[-1]

        try:
            eventually_value(differences_now, lambda found: not found, AGREE_WAIT, 0.3)
        except AssertionError:
            differences = seen[-1]
            shown = "\n".join(f"  {route}\n    Connect:      {theirs}\n    status-store: {ours}"
                              for route, (theirs, ours) in list(differences.items())[:8])
            pytest.fail(f"after step {step!r}, {len(differences)} route(s) differ:\n{shown}")
        self.steps += 1

    def step(self, name: str, action: Callable[[], object], settle: Callable[[], object]) -> None:
        """Do ``action`` through Connect's REST API, wait until Connect shows its effect, then compare."""
        action()
        settle()
        self.agree(name)

    # Shorthands for steps.
    def put(self, path: str, body: object = None) -> Callable[[], object]:
        return lambda: self.connect.call("PUT", path, body)

    def post(self, path: str) -> Callable[[], object]:
        return lambda: self.connect.call("POST", path)

    def delete(self, path: str) -> Callable[[], object]:
        return lambda: self.connect.call("DELETE", path)

    def until(self, connector: str, condition: Callable[[dict[str, Any]], bool], what: str) -> Callable[[], object]:
        return lambda: self.connect.wait_for_status(connector, condition, what, STEP_WAIT)

    def until_gone(self, connector: str) -> Callable[[], object]:
        def gone() -> None:
            eventually_value(lambda: self.connect.request("GET", f"/connectors/{connector}/status").status,
                             lambda status: status == 404, STEP_WAIT, what=f"{connector}'s status answer")
        return gone

    def until_topics(self, connector: str, expected: list[str]) -> Callable[[], object]:
        def listed() -> None:
            eventually_value(lambda: self.connect.call("GET", f"/connectors/{connector}/topics")[connector]["topics"],
                             lambda topics: topics == expected, STEP_WAIT, what=f"{connector}'s topics")
        return listed


def task_states(*expected: str, connector: str = "RUNNING") -> Callable[[dict[str, Any]], bool]:
    """A condition: the connector in ``connector``'s state and its tasks in ``expected``'s, by id."""
    return lambda status: states(status) == (connector, list(expected))


def parts(status: dict[str, Any]) -> list[dict[str, Any]]:
    """The connector's state and its tasks'."""
    return [status["connector"], *status["tasks"]]


def everything_on(worker_id: str) -> Callable[[dict[str, Any]], bool]:
    """A condition: the connector and every task assigned to ``worker_id`` (in whatever state)."""
    return lambda status: all(part["worker_id"] == worker_id and part["state"] != "UNASSIGNED"
                              for part in parts(status))


def has_unassigned(status: dict[str, Any]) -> bool:
    return any(part["state"] == "UNASSIGNED" for part in parts(status))


@pytest.fixture(params=["stock", "agent"])
def scenario(request: pytest.FixtureRequest) -> Iterator[Scenario]:
    """The scenario on stock workers, whose own store writes their statuses (a sidecar beside them reads them),
    and on stock workers started with the agent, whose every status the sidecar writes."""
    if request.param == "stock":
        connect, sidecar = request.getfixturevalue("connect_cluster"), request.getfixturevalue("connect_sidecar")
    else:
        pod: AgentPod = request.getfixturevalue("agent_pod")
        connect, sidecar = pod.connect, pod.sidecar
    yield Scenario(connect, sidecar)
    for worker in connect.workers:  # a step that stopped a worker leaves none stopped
        if not worker.process.alive():
            worker.start()


def test_every_route_answers_as_connect_through_a_connectors_life(scenario: Scenario) -> None:
    s, connect = scenario, scenario.connect
    first, second = connect.workers
    # Topics of the cluster's own (both variants run on one Kafka cluster).
    beta_in, eps_in, theta_out = (f"{connect.name}-{name}" for name in ("beta-in", "eps-in", "theta-out"))
    running = all_in("RUNNING")
    s.step("create a source connector with two tasks",
           s.put("/connectors/alpha/config", source()), s.until("alpha", all_in("RUNNING", 2), "running"))
    status = connect.call("GET", "/connectors/alpha/status")
    assert status["connector"]["version"] == SCRIPTED_VERSION  # Connect 4.x serves KIP-891's version
    # A sink's consumer notices a topic created after it subscribed only at its next metadata refresh (minutes).
    connect.kafka.create_topic(beta_in, 1, 1)
    s.step("create a sink connector with two tasks",
           s.put("/connectors/beta/config", sink(beta_in)), s.until("beta", all_in("RUNNING", 2), "running"))
    s.step("a task fails with a message beyond the Basic Multilingual Plane",
           s.put("/connectors/delta/config", source(**{"scripted.task.1": "fail", "scripted.task.1.message": MESSAGE})),
           s.until("delta", task_states("RUNNING", "FAILED"), "task 1 failed"))
    trace = connect.call("GET", "/connectors/delta/tasks/1/status")["trace"]
    assert MESSAGE in trace
    s.step("a connector fails on start",
           s.put("/connectors/gamma/config", source(**{"scripted.connector": "fail-on-start",
                                                       "scripted.connector.message": MESSAGE})),
           s.until("gamma", lambda st: st["connector"]["state"] == "FAILED", "connector failed"))
    s.step("a connector fails after its start",
           s.put("/connectors/zeta/config", source(**{"scripted.connector": "fail"})),
           s.until("zeta", lambda st: st["connector"]["state"] == "FAILED", "connector failed"))
    s.step("sink tasks fail on start",
           s.put("/connectors/eps/config", sink(eps_in, **{"scripted.task": "fail-on-start"})),
           s.until("eps", task_states("FAILED", "FAILED"), "tasks failed"))
    s.step("pause a source connector", s.put("/connectors/alpha/pause"),
           s.until("alpha", all_in("PAUSED", 2), "paused"))
    s.step("resume it", s.put("/connectors/alpha/resume"), s.until("alpha", all_in("RUNNING", 2), "running"))
    s.step("stop it (KIP-875)", s.put("/connectors/alpha/stop"),
           s.until("alpha", lambda st: states(st) == ("STOPPED", []), "stopped without tasks"))
    s.step("resume a stopped connector", s.put("/connectors/alpha/resume"),
           s.until("alpha", all_in("RUNNING", 2), "running"))
    s.step("more tasks through a configuration change", s.put("/connectors/alpha/config", source(**{"tasks.max": "3"})),
           s.until("alpha", all_in("RUNNING", 3), "three tasks"))
    s.step("fewer tasks through a configuration change",
           s.put("/connectors/alpha/config", source(**{"tasks.max": "1"})),
           s.until("alpha", all_in("RUNNING", 1), "one task"))
    s.step("a failed task runs again after a configuration change", s.put("/connectors/delta/config", source()),
           s.until("delta", all_in("RUNNING", 2), "running"))
    s.step("restart only the failed instances (onlyFailed=true)",
           s.post("/connectors/eps/restart?includeTasks=true&onlyFailed=true"),
           s.until("eps", task_states("FAILED", "FAILED"), "failed again"))
    s.step("restart a connector and all its tasks (includeTasks=true)",
           s.post("/connectors/beta/restart?includeTasks=true"), s.until("beta", all_in("RUNNING", 2), "running"))
    s.step("restart a connector alone", s.post("/connectors/delta/restart"), s.until("delta", running, "running"))
    s.step("restart one task", s.post("/connectors/delta/tasks/0/restart"), s.until("delta", running, "running"))
    s.step("a connector whose start is slow",
           s.put("/connectors/iota/config", source(**{"scripted.start.delay.ms": "6000", "tasks.max": "1"})),
           s.until("iota", all_in("RUNNING", 1), "running"))
    s.step("RESTARTING, while a slow restart runs", s.post("/connectors/iota/restart?includeTasks=true"),
           s.until("iota", lambda st: "RESTARTING" in [st["connector"]["state"], *states(st)[1]], "restarting"))
    s.step("after the slow restart", lambda: None, s.until("iota", all_in("RUNNING", 1), "running"))
    s.step("a source's topic is tracked (KIP-558)",
           s.put("/connectors/theta/config", source(**{"scripted.topic": theta_out, "tasks.max": "1"})),
           s.until_topics("theta", [theta_out]))
    s.step("a sink's topic is tracked", lambda: _produce(connect, beta_in, 5), s.until_topics("beta", [beta_in]))
    s.step("stop the source that writes", s.put("/connectors/theta/stop"),
           s.until("theta", lambda st: states(st) == ("STOPPED", []), "stopped"))
    # Connect answers STOPPED before the task has stopped, and a task records a topic with each record it writes
    # while its worker lists none (WorkerTask.recordActiveTopic): a record the stopping task writes after the
    # reset lists the topic again, for good. Connect's race, not status-store's (it failed this test once in
    # CI): the reset goes once the task has written nothing for a while.
    _quiet(connect, theta_out)
    s.step("reset its topics", s.put("/connectors/theta/topics/reset"), s.until_topics("theta", []))
    s.step("pause a sink", s.put("/connectors/beta/pause"), s.until("beta", all_in("PAUSED", 2), "paused"))
    s.step("resume the sink", s.put("/connectors/beta/resume"), s.until("beta", all_in("RUNNING", 2), "running"))
    s.step("delete a failed connector", s.delete("/connectors/gamma"), s.until_gone("gamma"))
    s.step("delete a stopped connector", s.delete("/connectors/theta"), s.until_gone("theta"))
    s.step("a worker stops: its connectors and tasks are UNASSIGNED for a while", second.stop,
           lambda: _any_connector(connect, has_unassigned, "some status UNASSIGNED"))
    s.step("then they move to the other worker", lambda: None,
           lambda: _every_connector(connect, everything_on(first.worker_id), "everything on the first worker"))
    s.step("the worker comes back and takes its share again", second.start,
           lambda: _any_connector(connect, lambda st: any(part["worker_id"] == second.worker_id for part in parts(st)),
                                  "some work on the second worker"))
    s.step("a worker crashes (SIGKILL) and its work moves after the session timeout", second.kill,
           lambda: _every_connector(connect, everything_on(first.worker_id), "everything on the first worker"))
    s.step("the crashed worker starts again", second.start, lambda: None)
    s.step("delete a running connector", s.delete("/connectors/alpha"), s.until_gone("alpha"))
    s.step("delete every other connector", lambda: [connect.call("DELETE", f"/connectors/{name}")
                                                    for name in connect.call("GET", "/connectors")],
           lambda: _every_connector(connect, lambda st: False, "none left", none_left=True))
    assert s.steps >= 30


def _produce(connect: ConnectCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": connect.kafka.bootstrap_servers})
    for n in range(count):
        producer.produce(topic, json.dumps(n).encode(), b"key")
    assert producer.flush(15) == 0


def _quiet(connect: ConnectCluster, topic: str, quiet_s: float = 3.0) -> None:
    """Wait, bounded, until nothing has been written to ``topic`` for ``quiet_s`` seconds."""
    consumer = Consumer({"bootstrap.servers": connect.kafka.bootstrap_servers, "group.id": "oracle-quiet"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions

        def end() -> int:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, n), timeout=10)[1] for n in partitions)

        last = {"end": end(), "at": time.monotonic()}

        def quiet() -> bool:
            if (now := end()) != last["end"]:
                last.update(end=now, at=time.monotonic())
            return time.monotonic() - last["at"] >= quiet_s

        wait_until(quiet, STEP_WAIT, f"{topic} written to no more for {quiet_s:g} s", interval=0.5)
    finally:
        consumer.close()


def _statuses(connect: ConnectCluster) -> dict[str, Any]:
    expanded: dict[str, Any] = connect.call("GET", "/connectors?expand=status")
    return {name: entry["status"] for name, entry in expanded.items()}


def _wait(connect: ConnectCluster, holds: Callable[[dict[str, Any]], bool], what: str) -> None:
    eventually_value(lambda: _statuses(connect), holds, STEP_WAIT, 0.3, what=f"not {what}: the statuses")


def _any_connector(connect: ConnectCluster, condition: Callable[[dict[str, Any]], bool], what: str) -> None:
    _wait(connect, lambda statuses: any(condition(status) for status in statuses.values()), what)


def _every_connector(connect: ConnectCluster, condition: Callable[[dict[str, Any]], bool], what: str,
                     none_left: bool = False) -> None:
    _wait(connect, lambda statuses: (not statuses) if none_left else all(map(condition, statuses.values())), what)
