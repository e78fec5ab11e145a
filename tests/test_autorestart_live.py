"""Auto-restart and workers that are gone, against two real Connect 4.4.0 workers on Apache Kafka: one sidecar beside
each worker (``sidecar.restart.workers`` naming it), each worker's REST API reached through an HTTP proxy that notes
the time of every request (so that the restarts are measured where Connect receives them) and can refuse them.

The scripted connector's ``fail-once`` tasks fail their first run and run once restarted through Connect's REST API;
``fail-on-start`` fails on every start; ``scripted.error=config`` fails with Kafka's ConfigException (a user failure);
its sink with ``scripted.downstream`` fails while nothing accepts its TCP connection (a transient failure); Connect's
JsonConverter fails on a record that is not JSON (a user failure)."""

from __future__ import annotations

import collections
import contextlib
import http.client
import itertools
import json
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.downstream import Downstream
from harness.http_proxy import HttpFaultProxy, Refusal
from harness.java_process import SINK_CONNECTOR, SOURCE_CONNECTOR, wait_until
from harness.real_connect import ConnectCluster, all_in
from harness.real_kafka import KafkaCluster
from harness.restart_pod import RestartPod
from harness.sidecar import LiveSidecar
from status_store.act.plan import MAX_IN_FLIGHT
from status_store.act.restarter import WORKER_BACKOFF_INITIAL_MS

pytestmark = pytest.mark.timeout(600)

# Short bounds: the first restart 2 s after the failure (jitter up to half of it more), doubling to 8 s; three
# restarts at most; 20 restart requests a second at most; the group read every second.
INITIAL_S, JITTER, MAX_RESTARTS, RATE = 2.0, 0.5, 3, 20.0
REQUEST_TIMEOUT_S = 10.0
SIDECAR = {"sidecar.restart.enable": "true", "sidecar.restart.initial.backoff.ms": str(int(INITIAL_S * 1000)),
           "sidecar.restart.max.backoff.ms": "8000", "sidecar.restart.jitter.factor": str(JITTER),
           "sidecar.restart.max.restarts": str(MAX_RESTARTS), "sidecar.restart.max.per.second": str(RATE),
           "sidecar.restart.request.timeout.ms": str(int(REQUEST_TIMEOUT_S * 1000)),
           "sidecar.workers.check.interval.ms": "1000"}
SESSION_TIMEOUT_S = 6.0
# A worker that leaves gives its tasks up after this (Connect's 5 minutes, shortened): meanwhile Connect says RUNNING.
REBALANCE_DELAY_MS = 20000
STEP_WAIT = 60.0


@pytest.fixture(scope="module")
def pod(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartPod]:
    with RestartPod(kafka, tmp_path_factory.mktemp("autorestart"), "autorestart", SIDECAR,
                    worker_settings={"scheduled.rebalance.max.delay.ms": str(REBALANCE_DELAY_MS)}) as running:
        yield running


class EventReader:
    """A client of a sidecar's GET /events in a thread of its own: the (event type, data) of every event it reads."""

    def __init__(self, sidecar: LiveSidecar) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._connection = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=120)
        self._connection.request("GET", "/events", headers={"Accept": "text/event-stream"})
        self._response = self._connection.getresponse()
        assert self._response.status == 200
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        name = ""
        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
            for raw in self._response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    self.events.append((name, json.loads(line[len("data: "):])))

    def of(self, name: str) -> list[dict[str, Any]]:
        return [data for event, data in list(self.events) if event == name]

    def close(self) -> None:
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._connection.close()
        self._thread.join(10)


def source(**settings: str) -> dict[str, str]:
    return {"connector.class": SOURCE_CONNECTOR, "tasks.max": "1", **settings}


def task_status(connect: ConnectCluster, connector: str, task: int = 0) -> dict[str, Any]:
    """Connect's answer for a task's status ({} before it has one)."""
    answer = connect.request("GET", f"/connectors/{connector}/tasks/{task}/status")
    status: dict[str, Any] = answer.json() if answer.status == 200 else {}
    return status


def wait_for(condition: Callable[[], bool], what: str, timeout: float = STEP_WAIT) -> None:
    wait_until(condition, timeout, what, interval=0.2)


def fleet_entry(sidecar: LiveSidecar, connector: str) -> dict[str, Any] | None:
    fleet = sidecar.call("GET", "/fleet")
    found: dict[str, Any] | None = next((c for c in fleet["connectors"] if c["name"] == connector), None)
    return found


def task_restarts(sidecar: LiveSidecar, connector: str, task: int = 0) -> dict[str, Any] | None:
    """What the sidecar's GET /fleet says of a task's restarts."""
    entry = fleet_entry(sidecar, connector)
    if entry is None:
        return None
    found: dict[str, Any] | None = next((t["restarts"] for t in entry["tasks"] if t["id"] == task), None)
    return found


def test_a_task_that_fails_once_is_restarted_once_by_its_workers_sidecar_only(pod: RestartPod) -> None:
    connect = pod.connect
    readers = [EventReader(sidecar) for sidecar in pod.sidecars]
    connect.call("PUT", "/connectors/once/config", source(**{"scripted.task": "fail-once"}))
    wait_for(lambda: task_status(connect, "once").get("state") in ("FAILED", "RUNNING"), "task once-0 FAILED")
    worker = task_status(connect, "once")["worker_id"]
    sidecar, _ = pod.of(worker)
    connect.wait_for_status("once", all_in("RUNNING", 1), "recovered by the sidecar's restart")
    (at, index, task), = pod.restarts("once")
    assert task == "0"
    assert pod.connect.workers[index].worker_id == worker  # its own worker's sidecar, not the other
    wait_for(lambda: len(pod.history("once")) == 1, "the restart in the history topic")
    (event,) = pod.history("once")
    # After the initial backoff from when the sidecar read the FAILED status, within its jitter and the time the
    # restart request takes to reach the worker's proxy (a whole-suite run at a load of 47 took 1.08 s past the jitter).
    assert INITIAL_S - 0.05 <= at - event["failed_at"] / 1000 <= INITIAL_S * (1 + JITTER) + 2.0
    time.sleep(INITIAL_S * (1 + JITTER) * 2)
    assert len(pod.restarts("once")) == 1  # exactly once
    entry = fleet_entry(sidecar, "once")
    assert entry is not None
    restarts = entry["tasks"][0]["restarts"]
    assert restarts["count"] == 1
    assert restarts["result"] == "restarted"
    assert entry["health"] == "HEALTHY"
    assert event["attempt"] == 1
    assert event["result"] == "restarted"
    assert event["reason"] == "org.apache.kafka.connect.errors.ConnectException: scripted failure"
    assert event["worker_id"] == worker
    assert event["kind"] == "task"
    assert event["task"] == 0
    assert event["sidecar"] == f"sidecar-{index}"
    # GET /events of the sidecar that restarted it says so; the other's says nothing of it.
    wait_for(lambda: bool(readers[index].of("restart")), "the restart in GET /events")
    for reader in readers:
        reader.close()
    (said,) = readers[index].of("restart")
    assert {k: said[k] for k in ("connector", "kind", "task", "attempt", "result", "worker_id")} == {
        "connector": "once", "kind": "task", "task": 0, "attempt": 1, "result": "restarted", "worker_id": worker}
    assert readers[1 - index].of("restart") == []
    connect.call("DELETE", "/connectors/once")


def test_a_task_failing_on_every_start_is_restarted_at_the_backoff_until_the_maximum(pod: RestartPod) -> None:
    connect = pod.connect
    connect.call("PUT", "/connectors/always/config", source(**{"scripted.task": "fail-on-start"}))
    wait_for(lambda: len(pod.restarts("always")) == MAX_RESTARTS, "three restarts", timeout=90.0)
    worker = task_status(connect, "always")["worker_id"]
    sidecar, _ = pod.of(worker)
    wait_for(lambda: (task_restarts(sidecar, "always") or {}).get("state") == "gave-up", "gave up")
    times = [at for at, _, _ in pod.restarts("always")]
    # Restart n+1 waits backoff(n) after restart n was accepted: 4 s, then 8 s (each with up to half more jitter).
    for gap, backoff in zip([b - a for a, b in itertools.pairwise(times)], (4.0, 8.0), strict=True):
        assert backoff - 0.1 <= gap <= backoff * (1 + JITTER) + 2.0, times
    time.sleep(8.0 * (1 + JITTER))
    assert len(pod.restarts("always")) == MAX_RESTARTS
    assert task_status(connect, "always")["state"] == "FAILED"
    events = pod.history("always")
    assert [e["attempt"] for e in events] == [1, 2, 3]
    assert {e["result"] for e in events} == {"restarted"}
    metrics = sidecar.request("GET", "/metrics").body.decode().splitlines()
    said = [line for line in metrics if line.startswith(("status_restarts_skipped_total", "status_restarts_given_up"))]
    assert 'status_restarts_skipped_total{reason="max_restarts"} 1.0' in said, said
    assert "status_restarts_given_up 1.0" in said, said
    connect.call("DELETE", "/connectors/always")


def test_a_configuration_error_is_never_restarted(pod: RestartPod) -> None:
    connect = pod.connect
    connect.call("PUT", "/connectors/config-error/config",
                 source(**{"scripted.task": "fail-on-start", "scripted.error": "config"}))
    wait_for(lambda: task_status(connect, "config-error").get("state") == "FAILED", "FAILED")
    assert "org.apache.kafka.common.config.ConfigException" in task_status(connect, "config-error")["trace"]
    time.sleep(INITIAL_S * (1 + JITTER) + 2.0)
    assert pod.restarts("config-error") == []
    sidecar, _ = pod.of(task_status(connect, "config-error")["worker_id"])
    entry = fleet_entry(sidecar, "config-error")
    assert entry is not None
    assert entry["tasks"][0]["restarts"]["state"] == "excluded"
    assert entry["tasks"][0]["restarts"]["skipped"] == "failure_class"
    assert entry["tasks"][0]["failure"]["family"] == "configuration"
    assert entry["health"] == "UNHEALTHY"
    connect.call("DELETE", "/connectors/config-error")


def test_a_user_failure_is_never_restarted_and_a_transient_one_is_restarted_until_it_runs(
        pod: RestartPod, kafka: KafkaCluster) -> None:
    connect = pod.connect
    plain, empty = f"plain-{uuid.uuid4().hex[:6]}", f"empty-{uuid.uuid4().hex[:6]}"
    for topic in (plain, empty):
        kafka.create_topic(topic, 1, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    producer.produce(plain, b"hello, not JSON")
    assert producer.flush(15) == 0
    downstream = Downstream()  # away: nothing listens on its port yet
    readers = [EventReader(sidecar) for sidecar in pod.sidecars]
    try:
        connect.call("PUT", "/connectors/unreadable/config", {
            "connector.class": SINK_CONNECTOR, "tasks.max": "1", "topics": plain,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"})
        connect.call("PUT", "/connectors/away/config", {
            "connector.class": SINK_CONNECTOR, "tasks.max": "1", "topics": empty,
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "scripted.downstream": downstream.address})
        wait_for(lambda: task_status(connect, "unreadable").get("state") == "FAILED", "unreadable FAILED")
        # The transient one is restarted (and fails again while its downstream is away), then runs once it is back.
        wait_for(lambda: len(pod.restarts("away")) >= 1, "a restart of the transient failure")
        downstream.open()
        connect.wait_for_status("away", all_in("RUNNING", 1), "back to RUNNING once the downstream is", timeout=60.0)
        wait_for(lambda: any(e["result"] == "restarted" for e in pod.history("away")), "its restart in the history")
        assert {e["reason"] for e in pod.history("away")} == {
            f"org.apache.kafka.connect.errors.ConnectException: cannot write to the downstream system at "
            f"127.0.0.1:{downstream.port}"}
        # The user one never, whatever the time.
        assert pod.restarts("unreadable") == []
        worker = task_status(connect, "unreadable")["worker_id"]
        sidecar, _ = pod.of(worker)
        entry = fleet_entry(sidecar, "unreadable")
        assert entry is not None
        task = entry["tasks"][0]
        assert (task["failure"]["class"], task["failure"]["family"]) == ("user", "data")
        assert task["failure"]["cause"].startswith("JsonParseException: Unrecognized token 'hello'")
        assert (task["restarts"]["state"], task["restarts"]["skipped"]) == ("excluded", "failure_class")
        assert task_status(connect, "unreadable")["state"] == "FAILED"
        index = pod.sidecars.index(sidecar)
        wait_for(lambda: any(e["connector"] == "unreadable" for e in readers[index].of("restart")),
                 "the skip in GET /events")
        (said,) = [e for e in readers[index].of("restart") if e["connector"] == "unreadable"]
        assert (said["result"], said["skipped"], said["failure"]["class"]) == ("skipped", "failure_class", "user")
        assert pod.restarts("unreadable") == []
    finally:
        for reader in readers:
            reader.close()
        downstream.close()
        for name in ("unreadable", "away"):
            connect.request("DELETE", f"/connectors/{name}")


def forge(kafka: KafkaCluster, topic: str, records: dict[str, bytes | None]) -> None:
    """Status records written into the topic by someone else than a worker (a plain producer, Connect's bytes; None:
    a tombstone)."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "partitioner": "murmur2_random",
                         "log_level": 0})
    for key, value in records.items():
        producer.produce(topic, value, key.encode())
    assert producer.flush(15) == 0


# A forged failure's check (``GET /connectors/forged-N/status``), which the worker's proxy holds this long: four of them
# at once (plan.UNKNOWN_IN_FLIGHT), the hundred take about 19 s.
FORGED_CHECK, FORGED_CHECK_S = "GET /connectors/forged-", 0.75


def checks(proxy: HttpFaultProxy) -> list[float]:
    """When the worker was asked of each forged failure."""
    return sorted(at for at, line in list(proxy.seen) if line.startswith(FORGED_CHECK))


def failed_value(worker: str, trace: str) -> bytes:
    return json.dumps({"state": "FAILED", "trace": trace, "worker_id": worker, "generation": 1},
                      separators=(",", ":")).encode()


def test_forged_failures_are_checked_with_the_worker_and_never_delay_a_genuine_restart(
        pod: RestartPod, kafka: KafkaCluster) -> None:
    connect = pod.connect
    connect.call("PUT", "/connectors/honest/config", source(**{"tasks.max": "4"}))
    status = connect.wait_for_status("honest", all_in("RUNNING", 4), "running")
    worker = status["tasks"][0]["worker_id"]
    _, proxy = pod.of(worker)
    mine = [t["id"] for t in status["tasks"] if t["worker_id"] == worker]
    trace = "org.apache.kafka.connect.errors.ConnectException: forged"
    # The worker's tasks of a connector fail for real at fail_at; a second before, 100 FAILED statuses naming the worker
    # are written, of connectors Connect has no configuration of, and one of a task the running connector lacks.
    fail_at = time.time() + 12.0
    connect.call("PUT", "/connectors/genuine/config", source(**{
        "tasks.max": "4", "scripted.task": "fail-once", "scripted.fail.at.ms": str(int(fail_at * 1000))}))
    forged: dict[str, bytes | None] = {f"status-task-forged-{n}-0": failed_value(worker, trace) for n in range(100)}
    forged["status-task-honest-9"] = failed_value(worker, trace)
    # The worker answers of the forged connectors slowly: their checks, come due before the genuine failures' (written
    # a second earlier), are still being made when those come due, whatever the load.
    proxy.delays[FORGED_CHECK] = FORGED_CHECK_S
    try:
        before = connect.wait_for_status("genuine", all_in("RUNNING", 4), "running before the failure")
        genuine = [t["id"] for t in before["tasks"] if t["worker_id"] == worker]
        assert genuine, before  # Connect spreads the four tasks over both workers
        assert time.time() < fail_at - 1.0, "the connector took too long to start"
        time.sleep(fail_at - 1.0 - time.time())
        forge(kafka, connect.status_topic, forged)
        index = [w.worker_id for w in connect.workers].index(worker)
        wait_for(lambda: len([r for r in pod.restarts("genuine") if r[1] == index]) >= len(genuine),
                 "the worker's genuine failures restarted")
        connect.wait_for_status("genuine", all_in("RUNNING", 4), "genuine running again after its restarts")
        on_worker = [(at, task) for at, i, task in pod.restarts("genuine") if i == index]
        wait_for(lambda: len(checks(proxy)) >= 100, "each forged failure checked with the worker",
                 timeout=STEP_WAIT + 100 * FORGED_CHECK_S)
        assert all(pod.restarts(f"forged-{n}") == [] for n in range(100))
        assert [r for r in pod.restarts("honest") if r[2] == "9"] == []
        assert pod.history("honest") == []  # refuted when asked: no restart, nothing in the history
        # The order, not the time: each genuine restart reached the worker while forged checks were still being made.
        # Behind them (waiting for a place to the worker that a check held, or for a turn of the rate cap that a check
        # took), it would have come after the last of them.
        last_check = max(checks(proxy))
        assert all(at < last_check for at, _ in on_worker), (last_check, on_worker, checks(proxy)[:8])
        # And not before its backoff from when its sidecar read the failure (the history's failed_at).
        wait_for(lambda: len([e for e in pod.history("genuine") if e["worker_id"] == worker]) >= len(genuine),
                 "the worker's genuine restarts in the history")
        read = {event["task"]: event["failed_at"] / 1000 for event in pod.history("genuine")
                if event["worker_id"] == worker}
        assert all(at - read[int(task)] >= INITIAL_S - 0.05 for at, task in on_worker if task is not None), (
            read, on_worker)
        # The limit, as Connect's REST API has it: the worker reads the same topic, so a forged FAILED of a task that
        # exists, naming the worker that runs it, is what the worker says too (the check cannot refute it).
        forge(kafka, connect.status_topic, {f"status-task-honest-{mine[0]}": failed_value(worker, trace)})
        wait_for(lambda: task_status(connect, "honest", mine[0]).get("trace") == trace, "the worker says FAILED")
    finally:
        proxy.delays.pop(FORGED_CHECK, None)
        for name in ("genuine", "honest"):
            connect.request("DELETE", f"/connectors/{name}")
        forge(kafka, connect.status_topic, dict.fromkeys(forged))


def test_a_worker_whose_rest_api_refuses_is_asked_again_after_a_backoff(pod: RestartPod) -> None:
    connect = pod.connect
    for proxy in pod.proxies:
        proxy.refusal = Refusal.UNAVAILABLE
    try:
        # A task that fails on every start: a rebalance that restarts it (after the previous test's connector was
        # deleted, Connect may move and so restart a new task: a fail-once task then ran before any restart was
        # asked) leaves it FAILED still.
        connect.call("PUT", "/connectors/refused/config", source(**{"scripted.task": "fail-on-start"}))

        def asked() -> list[float]:
            """When the worker was asked (its status first, before any restart: each answered 503 by the proxy)."""
            return sorted(at for proxy in pod.proxies for at, line in list(proxy.seen)
                          if line.startswith("GET /connectors/refused/status"))

        wait_for(lambda: len(asked()) >= 4, "four refused requests", timeout=60.0)
        assert pod.restarts("refused") == []  # nothing confirmed, nothing restarted
        times = asked()
        gaps = [b - a for a, b in itertools.pairwise(times)]
        # The worker's backoff: 1 s, 2 s, 4 s (with up to half more), never a tight loop.
        for gap, backoff in zip(gaps, (1.0, 2.0, 4.0), strict=False):
            assert gap >= backoff - 0.1, times
    finally:
        for proxy in pod.proxies:
            proxy.refusal = Refusal.NONE
    # Once the worker answers, the restart it was asked for is made (and the task fails on its start again).
    wait_for(lambda: any(e["result"] == "restarted" for e in pod.history("refused")),
             "restarted once the worker answers", timeout=30.0)
    connect.call("DELETE", "/connectors/refused")


def restart_bound_s(failures: int) -> float:
    """The longest the settings allow from a failure read by a sidecar to its restart request reaching the worker,
    for ``failures`` failures of its worker read at once, the worker confirming each at its first check and answering
    each call within the request timeout (status_store/act/plan.py): the first restart's backoff with all of its
    jitter; then the requests in rounds of at most ``MAX_IN_FLIGHT`` to the worker at once, each holding its place
    for its three calls (the status, the connector, the restart) and its turn of the rate cap behind the others in
    flight, a restart that finds every place taken asked again after the worker's initial backoff; then the last
    one's own calls."""
    hold = 3 * REQUEST_TIMEOUT_S + MAX_IN_FLIGHT / RATE
    rounds = math.ceil(failures / MAX_IN_FLIGHT)
    return INITIAL_S * (1 + JITTER) + rounds * (hold + WORKER_BACKOFF_INITIAL_MS / 1000) + hold


def not_restarted(pod: RestartPod, connector: str, tasks: int) -> str:
    """The tasks without a restart request, each with what its worker's sidecar says of its restarts."""
    asked = {int(task) for _, _, task in pod.restarts(connector) if task is not None}
    said = {}
    for sidecar in pod.sidecars:
        entry = fleet_entry(sidecar, connector)
        for task in entry["tasks"] if entry is not None else []:
            if task["id"] not in asked and (task["restarts"] is not None or task["id"] not in said):
                said[task["id"]] = f"{task['state']} on {task['worker_id']}: {task['restarts'] or 'nothing planned'}"
    return "not restarted: " + "; ".join(f"{n} ({said.get(n, 'no sidecar has it')})"
                                         for n in range(tasks) if n not in asked)


def test_a_storm_of_failures_is_spread_by_the_jitter_and_capped_by_the_rate(pod: RestartPod) -> None:
    connect = pod.connect
    tasks = 100
    fail_at = int((time.time() + 25) * 1000)
    connect.call("PUT", "/connectors/storm/config", source(**{
        "tasks.max": str(tasks), "scripted.task": "fail-once", "scripted.fail.at.ms": str(fail_at)}))
    running = connect.wait_for_status("storm", all_in("RUNNING", tasks), "100 tasks running", timeout=60.0)
    on_worker = collections.Counter(t["worker_id"] for t in running["tasks"])
    bound = restart_bound_s(max(on_worker.values()))
    # Until the failure, a step for the workers to write it and the sidecars to read it, then what the settings allow.
    try:
        wait_for(lambda: len(pod.restarts("storm")) >= tasks, "a restart of each",
                 timeout=max(0.0, fail_at / 1000 - time.time()) + STEP_WAIT + bound)
    except TimeoutError as timeout:
        raise AssertionError(f"{timeout}; {not_restarted(pod, 'storm', tasks)}") from None
    connect.wait_for_status("storm", all_in("RUNNING", tasks), "all running again", timeout=60.0)
    restarts = pod.restarts("storm")
    assert sorted(int(task or -1) for _, _, task in restarts) == list(range(tasks))  # each once, by one sidecar
    # Each within what the settings allow after its sidecar read the failure (the history's failed_at).
    wait_for(lambda: len(pod.history("storm")) == tasks, "every restart in the history")
    read = {event["task"]: event["failed_at"] / 1000 for event in pod.history("storm")}
    late = [(task, round(at - read[int(task)], 1)) for at, _, task in restarts
            if task is not None and at - read[int(task)] > bound]
    assert not late, f"restarts later than {bound:.1f} s after the failure was read: {late}"
    for index in range(len(pod.proxies)):
        times = [at for at, i, _ in restarts if i == index]
        # Not before the initial backoff after the failure; within the rate cap (20 in any second, a little
        # slack for the proxy's clock); spread over at least the time the cap needs.
        assert times[0] >= fail_at / 1000 + INITIAL_S - 0.2
        assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) <= RATE + 1
        assert times[-1] - times[0] >= (len(times) - 1) / RATE - 0.5
    connect.call("DELETE", "/connectors/storm")


def test_a_killed_worker_is_marked_gone_while_connect_says_running(pod: RestartPod) -> None:
    connect = pod.connect
    connect.call("PUT", "/connectors/zombie/config", source(**{"tasks.max": "4"}))
    status = connect.wait_for_status("zombie", all_in("RUNNING", 4), "running")
    victim = connect.workers[1]
    survivor, _ = pod.of(connect.workers[0].worker_id)
    on_victim = [t["id"] for t in status["tasks"] if t["worker_id"] == victim.worker_id]
    assert on_victim, status
    reader = EventReader(survivor)
    killed = time.monotonic()
    victim.kill()

    def marked() -> bool:
        entry = fleet_entry(survivor, "zombie")
        return entry is not None and all(entry["tasks"][n]["worker_gone_since"] is not None for n in on_victim)

    wait_for(marked, "the victim's tasks marked gone", timeout=SESSION_TIMEOUT_S + 1.0 + 10.0)
    took = time.monotonic() - killed
    assert took <= SESSION_TIMEOUT_S + 1.0 + 3.0  # the session timeout, one interval, a read and a scrape
    # Connect's own REST still says RUNNING on the dead worker: the delayed rebalance has not come.
    answer = connect.workers[0].request("GET", "/connectors/zombie/status").json()
    assert [t["state"] for t in answer["tasks"] if t["id"] in on_victim] == ["RUNNING"] * len(on_victim)
    assert all(t["worker_id"] == victim.worker_id for t in answer["tasks"] if t["id"] in on_victim)
    assert set(answer) == {"name", "connector", "tasks", "type"}  # Connect's shape, nothing of ours
    entry = fleet_entry(survivor, "zombie")
    assert entry is not None
    assert entry["health"] in ("DEGRADED", "UNHEALTHY")
    fleet = survivor.call("GET", "/fleet")
    workers = {w["id"]: w for w in fleet["workers"]}
    assert workers[victim.worker_id]["up"] is False
    assert workers[connect.workers[0].worker_id]["up"] is True
    metrics = survivor.request("GET", "/metrics").body.decode()
    assert f'status_worker_up{{worker="{victim.worker_id}"}} 0.0' in metrics
    # Every task status RUNNING on a gone worker, as /fleet marks them: the zombie's, and any other status the topic
    # holds on the victim (the module's earlier tests ran connectors there; run alone, the zombie's only).
    held = sum(1 for c in fleet["connectors"] for t in c["tasks"]
               if t["state"] == "RUNNING" and t["worker_gone_since"] is not None)
    assert held >= len(on_victim)
    gone = [line for line in metrics.splitlines() if line.startswith("status_gone_worker_statuses{")]
    assert f'status_gone_worker_statuses{{kind="task",state="RUNNING"}} {float(held)}' in gone, gone
    # At the delayed rebalance Connect moves them to the survivor: marked back.
    connect.wait_for_status("zombie", lambda s: all(t["worker_id"] != victim.worker_id for t in s["tasks"])
                            and all_in("RUNNING", 4)(s), "reassigned", timeout=REBALANCE_DELAY_MS / 1000 + 40.0)

    def back() -> bool:
        entry = fleet_entry(survivor, "zombie")
        return (entry is not None and entry["health"] == "HEALTHY"
                and all(t["worker_gone_since"] is None for t in entry["tasks"]))

    wait_for(back, "marked back once reassigned", timeout=10.0)
    reader.close()
    assert [(e["worker_id"], e["up"]) for e in reader.of("worker")] == [(victim.worker_id, False)]
