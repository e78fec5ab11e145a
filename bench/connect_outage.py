"""Benchmark one status-topic outage seen side by side by a real Connect worker's own status store, by status-store,
and by bench/writers.py's Python re-implementation of Connect's resend loop, on Apache Kafka's brokers.

    .venv/bin/python -m bench.connect_outage [--brokers 3] [--connectors 10] [--tasks 3] [--outage-seconds 30]
                                             [--runs 3] [--sidecar KEY=VALUE ...] [--quick]

The cluster: ``--brokers`` Apache Kafka brokers (KRaft, a controller of their own, both JIT compilers), each behind
a ``KafkaProxy`` (harness/kafka_proxy.py) that counts the requests it forwards by client id and API key. The clients:

- **Connect**: one Connect 4.x distributed worker (both JIT compilers) with the scripted test connector
  (harness/jvm); its status store is Connect's own ``KafkaStatusBackingStore``, whose producer's client id is
  ``<group>-statuses``;
- **status-store**: ``status-store serve`` as a process, on the worker's own properties (as a user points it at
  them) with a status topic of its own (client id ``status-store``);
- **bench/writers.py**: ``ConnectWriter`` with immediate resend, the Python re-implementation of Connect's status
  writes that earlier benchmarks used as Connect's stand-in (client id ``connect-status-baseline``), on a topic of
  its own, in this process.

Each has its own status topic: 5 partitions, replication factor ``--brokers``, ``min.insync.replicas`` one less.
Before the runs the last broker is stopped, so every partition has one in-sync replica less than its replicas,
which the topics allow. **The outage**: the three status topics' ``min.insync.replicas`` raised to
``--brokers``, above the in-sync replicas available (one AlterConfigs request for all three), for
``--outage-seconds``: every write to them fails with NOT_ENOUGH_REPLICAS, while Connect's config and offset
topics and its group keep working. **Recovery**: ``min.insync.replicas`` back (one request); that moment is the
brokers' return.

**The same status changes, during the outage.** Each run has fresh source connectors (``--connectors``, with
``--tasks`` tasks each, all RUNNING before the outage). From one second into the outage, evenly spread until a few
seconds before its end, each connector in turn goes through: pause, resume, a task failing (its config changed so
that task 0 fails), recovering (the config changed back), a restart with its tasks. Connect gets each step as a
call to its REST API (on a thread per connector, so that a slow answer holds up no other connector's steps; a
409 during a rebalance is asked again), and writes what its worker writes for it. status-store (through
``POST /statuses``) and the Python writer get, at the same moment, the statuses Connect's worker writes for that
step when nothing fails (the step's ``mirror``, read off a real worker: a restart is UNASSIGNED, RESTARTING,
RUNNING for the connector and each task, with Connect's safe writes as safe writes). The report says how many
steps were given (and how many of Connect's REST calls were answered) before the outage ended.

**Measured**, per run and client:

- Produce requests during the outage, as the proxies count them by client id;
- every latest status durable after recovery: seconds from the recovering AlterConfigs request until the last
  record of every key of the run is its latest status, as a consumer tailing each topic reads them (a consumer
  reads a record once every in-sync replica has it: durable); "never" when some key ends stale;
- statuses left stale: keys whose last record, once the topics have been quiet for a few seconds, is not their
  latest status. The latest status of a key is, for status-store and the Python writer, the last status they
  were given (compared byte for byte); for Connect, whose worker picks generations itself, the state the steps
  leave the connector or task in (RUNNING, PAUSED, FAILED; compared by state alone, so a stale record of the
  same state passes: Connect's count is a lower bound). The column beside counts, for every client, the stale
  keys whose last record is in another state than the latest status: the like-for-like count.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from bench import BenchParser, load_average
from bench.retry import BASELINES
from bench.writers import ConnectWriter, Ledger
from harness.kafka_proxy import PRODUCE
from harness.real_kafka import (
    SCRIPTED_VERSION,
    SOURCE_CONNECTOR,
    ConnectCluster,
    ConnectError,
    KafkaCluster,
    all_in,
    kafka_line,
    wait_until,
)
from harness.sidecar import LiveSidecar
from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, connector_key, task_key

PARTITIONS = 5
GROUP = "outage"
CONNECT = "Connect worker"
SIDECAR = "status-store"
PYTHON = "bench/writers.py ConnectWriter"
CLIENT_IDS = {CONNECT: f"{GROUP}-statuses", SIDECAR: "status-store", PYTHON: "connect-status-baseline"}
# The steps start this long after the outage begins, and the last one comes this long before its end.
LEAD_S, TAIL_S = 1.0, 4.0
# Topics are settled once no record of a run's keys has arrived for this long.
QUIET_S = 5.0
# Bounds: for the topics to settle after recovery, for one REST call (Connect answers 409 during a rebalance).
SETTLE_BOUND_S = 90.0
REST_BOUND_S = 60.0
ACTIONS = ("pause", "resume", "fail", "recover", "restart")
# The trace Connect's worker writes when a scripted source task fails (its length is what matters here).
FAILURE_TRACE = "".join([
    "org.apache.kafka.connect.errors.ConnectException: scripted failure\n",
    "\tat statusstore.connect.ScriptedSourceTask.poll(ScriptedSourceTask.java:28)\n",
    "\tat org.apache.kafka.connect.runtime.AbstractWorkerSourceTask.poll(AbstractWorkerSourceTask.java:483)\n",
    "\tat org.apache.kafka.connect.runtime.AbstractWorkerSourceTask.execute(AbstractWorkerSourceTask.java:366)\n",
    "\tat org.apache.kafka.connect.runtime.WorkerTask.doRun(WorkerTask.java:243)\n",
    "\tat org.apache.kafka.connect.runtime.WorkerTask.run(WorkerTask.java:298)\n",
    "\tat org.apache.kafka.connect.runtime.AbstractWorkerSourceTask.run(AbstractWorkerSourceTask.java:83)\n",
    "\tat org.apache.kafka.connect.runtime.isolation.Plugins.lambda$withClassLoader$0(Plugins.java:252)\n",
    "\tat java.base/java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:539)\n",
    "\tat java.base/java.util.concurrent.FutureTask.run(FutureTask.java:264)\n",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)\n",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:635)\n",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)\n",
])

Update = dict[str, Any]  # a status of POST /statuses


def record(update: Update) -> tuple[str, bytes]:
    """The key and value bytes of a status update (as status-store writes it, and as Connect 4.x does)."""
    if update["kind"] == "connector":
        key = connector_key(update["connector"])
    else:
        key = task_key(TaskId(update["connector"], update["task"]))
    value = encode_status(State[update["state"]], update["worker_id"], update["generation"], update["trace"],
                          update["version"])
    assert value is not None
    return key, value


class Connectors:
    """One run's connectors: the REST call of each step for Connect, the statuses Connect's worker writes for it
    (its mirror, for the others), and the state the steps leave each connector and task in."""

    def __init__(self, run: int, count: int, tasks: int, worker_id: str) -> None:
        self.names = [f"run{run}-c{i}" for i in range(count)]
        self.tasks, self.worker_id = tasks, worker_id
        # Connect's generation moves at each rebalance, which a config change brings.
        self.generation = 1
        self.states = {key: "RUNNING" for name in self.names for key in self.keys(name)}

    def keys(self, name: str) -> list[str]:
        """The status keys of a connector and its tasks."""
        return [connector_key(name), *(task_key(TaskId(name, task)) for task in range(self.tasks))]

    def config(self, failing: bool) -> dict[str, str]:
        """A connector's config: its tasks run, or task 0 fails."""
        config = {"connector.class": SOURCE_CONNECTOR, "tasks.max": str(self.tasks)}
        if failing:
            config["scripted.task.0"] = "fail"
        return config

    def steps(self) -> list[tuple[str, str]]:
        """Every (action, connector), each action for every connector in turn."""
        return [(action, name) for action in ACTIONS for name in self.names]

    def status(self, name: str, task: int | None, state: str, generation: int, safe: bool = False) -> Update:
        """A status as Connect's worker writes it: the plugin's version while it runs, none otherwise."""
        kind = {"kind": "connector"} if task is None else {"kind": "task", "task": task}
        return {**kind, "connector": name, "state": state, "worker_id": self.worker_id, "generation": generation,
                "trace": FAILURE_TRACE if state == "FAILED" else None, "safe": safe,
                "version": SCRIPTED_VERSION if state in ("RUNNING", "PAUSED", "FAILED") else None}

    def running(self, name: str) -> list[Update]:
        """What Connect's worker wrote when the connector and its tasks started."""
        return [self.status(name, task, "RUNNING", self.generation) for task in (None, *range(self.tasks))]

    def step(self, action: str, name: str) -> tuple[tuple[str, str, object], list[Update]]:
        """The REST call of a step, and its mirror (from a real worker's writes); the expected states follow it."""
        g, tasks, status = self.generation, range(self.tasks), self.status
        connector_states = {"pause": "PAUSED", "fail": "RUNNING"}
        self.states[connector_key(name)] = connector_states.get(action, "RUNNING")
        for task in tasks:
            failed = action == "fail" and task == 0
            self.states[task_key(TaskId(name, task))] = "FAILED" if failed else connector_states.get(action, "RUNNING")
        if action in ("pause", "resume"):
            state = "PAUSED" if action == "pause" else "RUNNING"
            method = "pause" if action == "pause" else "resume"
            return ("PUT", f"/connectors/{name}/{method}", None), [status(name, t, state, g) for t in (None, *tasks)]
        if action == "restart":
            return (("POST", f"/connectors/{name}/restart?includeTasks=true", None),
                    [status(name, t, state, g, safe=state == "UNASSIGNED") for t in (None, *tasks)
                     for state in ("UNASSIGNED", "RESTARTING", "RUNNING")])
        # A config change: the connector restarts, its tasks are stopped and started in a new generation.
        self.generation += 1
        mirror = [status(name, None, "UNASSIGNED", g, safe=True), status(name, None, "RUNNING", g)]
        for task in tasks:
            was_failed = action == "recover" and task == 0
            if not was_failed:
                mirror.append(status(name, task, "UNASSIGNED", g, safe=True))
            mirror.append(status(name, task, "RUNNING", g + 1))
            if action == "fail" and task == 0:
                mirror.append(status(name, task, "FAILED", g + 1, safe=True))
        return ("PUT", f"/connectors/{name}/config", self.config(failing=action == "fail")), mirror


class TopicTail:
    """Every record of a topic with the time a consumer read it (a consumer reads a record once every in-sync
    replica has it); on a thread of its own until ``stop()``."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"tail-{uuid.uuid4()}",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 10, "log_level": 2})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, bytes | None]] = {}
        self._arrivals: collections.Counter[str] = collections.Counter()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            for message in self._consumer.consume(500, 0.1):
                if message.error() is None:
                    key = (message.key() or b"").decode()
                    with self._lock:
                        self._last[key] = (time.monotonic(), message.value())
                        self._arrivals[key] += 1

    def last(self, key: str) -> tuple[float, bytes | None] | None:
        """When the key's last record so far was read, and its value."""
        with self._lock:
            return self._last.get(key)

    def arrivals(self, keys: Iterable[str]) -> int:
        """Records of these keys read so far."""
        with self._lock:
            return sum(self._arrivals[key] for key in keys)

    def latest_arrival(self, keys: Iterable[str]) -> float:
        """When the last record of these keys was read (0 for none)."""
        with self._lock:
            return max((self._last[key][0] for key in keys if key in self._last), default=0.0)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(10)
        self._consumer.close()


@dataclass
class ClientRun:
    """One client through one run."""

    produce_requests: int
    records: int  # records of the run's keys read from its topic since the outage began
    durable_s: float | None  # every latest status durable, after recovery (None: some key stale)
    rest_durable_s: float | None  # the keys that are not stale
    stale: list[str]  # each stale key, with the state its last record holds
    stale_states: int  # keys whose last record is not in the state of their latest status


@dataclass
class Run:
    """One outage."""

    keys: int
    statuses_given: int
    steps: int
    # Steps given to status-store and the Python writer during the outage, and the last one's time; Connect's
    # REST calls answered during the outage, and the last answer's time (seconds after the outage began).
    given_in_outage: int
    last_given_s: float
    answered_in_outage: int
    last_answered_s: float
    # How long the recovering AlterConfigs request took (its answer comes once the controller has the change).
    alter_s: float
    # Connectors and tasks that Connect's own REST API shows in another state than the steps left them in.
    shown_stale: list[str] = field(default_factory=list)
    clients: dict[str, ClientRun] = field(default_factory=dict)


# Per key: the state of its latest status, and whether a value is its latest status.
Latest = dict[str, tuple[str, Callable[[bytes | None], bool]]]


def outcome(tail: TopicTail, latest: Latest, recovered: float, requests: int, records_before: int) -> ClientRun:
    """A client's figures from its topic's tail."""
    durable: list[float] = []
    stale: list[str] = []
    stale_states = 0
    for key, (state, is_latest) in latest.items():
        last = tail.last(key)
        if last is not None and is_latest(last[1]):
            durable.append(max(0.0, last[0] - recovered))
            continue
        found = json.loads(last[1])["state"] if last is not None and last[1] else "none"
        stale.append(f"{key.removeprefix('status-')} {found} (latest {state})")
        stale_states += found != state
    rest = max(durable) if durable else None
    return ClientRun(requests, tail.arrivals(latest) - records_before, None if stale else rest, rest, stale,
                     stale_states)


def state_is(state: str) -> Callable[[bytes | None], bool]:
    """Whether a value is a status in ``state``."""
    return lambda value: value is not None and json.loads(value)["state"] == state


def value_is(expected: bytes) -> Callable[[bytes | None], bool]:
    """Whether a value is these bytes."""
    return lambda value: value == expected


class Bench:
    """The cluster, the three clients and their topics' tails, for every run."""

    def __init__(self, workdir: Path, brokers: int, full_jit: bool, sidecar_settings: dict[str, str]) -> None:
        line = kafka_line("kafka-4")
        self.brokers = brokers
        self.kafka = KafkaCluster(line, workdir / "kafka", brokers=brokers, proxied=True, full_jit=full_jit)
        self.connect = ConnectCluster(line, workdir / "connect", self.kafka, GROUP, workers=1, full_jit=full_jit)
        self.topics = {CONNECT: self.connect.status_topic, SIDECAR: f"{GROUP}-sidecar-status",
                       PYTHON: f"{GROUP}-python-status"}
        self.sidecar = LiveSidecar(workdir / "sidecar", self.connect,
                                   {"status.storage.topic": self.topics[SIDECAR], **sidecar_settings})
        self.admin: AdminClient | None = None
        self.tails: dict[str, TopicTail] = {}

    def start(self) -> None:
        """Start everything; stop the last broker, and wait until it has left every status partition's ISR."""
        self.kafka.start()
        self.admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers, "log_level": 2})
        self.connect.start()
        for name in (SIDECAR, PYTHON):
            self.kafka.create_topic(self.topics[name], PARTITIONS, self.brokers, {"cleanup.policy": "compact"})
        self.set_min_insync_replicas(self.brokers - 1)
        self.sidecar.start()
        self.kafka.stop_broker(self.brokers)

        def shrunk() -> bool:
            assert self.admin is not None
            topics = self.admin.list_topics(timeout=10).topics
            return all(len(partition.isrs) == self.brokers - 1 and partition.leader >= 0
                       for topic in self.topics.values() for partition in topics[topic].partitions.values())

        wait_until(shrunk, 60, f"broker {self.brokers} out of every status partition's ISR", interval=0.5)
        self.tails = {name: TopicTail(self.kafka.bootstrap_servers, topic) for name, topic in self.topics.items()}

    def set_min_insync_replicas(self, value: int) -> None:
        """Every status topic's min.insync.replicas, in one AlterConfigs request."""
        assert self.admin is not None
        resources = [ConfigResource("TOPIC", topic, incremental_configs=[
            ConfigEntry("min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET)])
            for topic in self.topics.values()]
        for future in self.admin.incremental_alter_configs(resources).values():
            future.result(30)

    def produce_requests(self) -> dict[str, int]:
        """Produce requests forwarded so far, per client."""
        return {name: sum(proxy.requests(PRODUCE, [client]) for proxy in self.kafka.proxies)
                for name, client in CLIENT_IDS.items()}

    def rest(self, method: str, path: str, body: object, began: float) -> float:
        """A call to Connect's REST API, again while Connect answers 409 (a rebalance), within a bound; when it
        was answered, in seconds after ``began``."""
        deadline = time.monotonic() + REST_BOUND_S
        while True:
            answer = self.connect.request(method, path, body)
            if answer.status in (200, 201, 202, 204):
                return time.monotonic() - began
            if answer.status != 409 or time.monotonic() > deadline:
                raise ConnectError(f"{method} {path} -> {answer.status} {answer.body[:500]!r}")
            time.sleep(0.1)

    def shown_stale(self, scenario: Connectors) -> list[str]:
        """What Connect's REST API shows in another state than the steps left it in (it serves its status store's
        cache, which holds what it read from its status topic)."""
        shown = []
        for name in scenario.names:
            status = self.connect.call("GET", f"/connectors/{name}/status")
            found = {connector_key(name): status["connector"]["state"],
                     **{task_key(TaskId(name, task["id"])): task["state"] for task in status["tasks"]}}
            shown += [f"{key.removeprefix('status-')} {found.get(key, 'none')} (latest {state})"
                      for key in scenario.keys(name) if found.get(key) != (state := scenario.states[key])]
        return shown

    async def run(self, index: int, connectors: int, tasks: int, outage_s: float) -> Run:
        """One outage with fresh connectors."""
        scenario = Connectors(index, connectors, tasks, self.connect.worker.worker_id)
        for name in scenario.names:
            self.connect.call("PUT", f"/connectors/{name}/config", scenario.config(failing=False))
        for name in scenario.names:
            self.connect.wait_for_status(name, all_in("RUNNING", tasks), "running", 120)
        writer = ConnectWriter(BASELINES[0], self.kafka.bootstrap_servers, self.topics[PYTHON], Ledger())
        await writer.start()
        versions: collections.Counter[str] = collections.Counter()
        latest: dict[str, bytes] = {}

        def give(updates: list[Update]) -> None:
            """The statuses of a step to status-store and to the Python writer."""
            self.sidecar.call("POST", "/statuses", {"updates": updates}, expect=(202,))
            for update in updates:
                key, value = record(update)
                versions[key] += 1
                latest[key] = value
                writer.put(key, versions[key], value)

        try:
            give([update for name in scenario.names for update in scenario.running(name)])
            await writer.settle(30)
            keys = list(scenario.states)
            records_before = {name: tail.arrivals(keys) for name, tail in self.tails.items()}
            steps = scenario.steps()
            spacing = (outage_s - LEAD_S - TAIL_S) / len(steps)
            given_at: list[float] = []
            # Connect's REST calls go out at the steps' times too, on a thread per connector (its calls in order),
            # so that one slow answer does not hold up the steps of other connectors.
            calls = {name: ThreadPoolExecutor(1, thread_name_prefix=name) for name in scenario.names}
            answered: list[Future[float]] = []

            def drive(began: float) -> None:
                for number, (action, name) in enumerate(steps):
                    time.sleep(max(0.0, began + LEAD_S + number * spacing - time.monotonic()))
                    call, mirror = scenario.step(action, name)
                    give(mirror)
                    given_at.append(time.monotonic() - began)
                    answered.append(calls[name].submit(self.rest, *call, began))

            for proxy in self.kafka.proxies:
                proxy.reset_counts()
            began = time.monotonic()
            self.set_min_insync_replicas(self.brokers)
            driver = threading.Thread(target=drive, args=(began,), name="steps")
            driver.start()
            await asyncio.sleep(max(0.0, began + outage_s - time.monotonic()))
            requests = self.produce_requests()
            recovered = time.monotonic()
            self.set_min_insync_replicas(self.brokers - 1)
            alter_s = time.monotonic() - recovered
            await asyncio.to_thread(driver.join, outage_s)
            assert len(given_at) == len(steps), "the steps were not all given"
            done = [future.result(REST_BOUND_S * len(steps)) for future in answered]
            for executor in calls.values():
                executor.shutdown()
            given = {key: (json.loads(value)["state"], value_is(value)) for key, value in latest.items()}
            expected: dict[str, Latest] = {
                CONNECT: {key: (state, state_is(state)) for key, state in scenario.states.items()},
                SIDECAR: given, PYTHON: given}

            def settled() -> bool:
                quiet = all(time.monotonic() - tail.latest_arrival(keys) >= QUIET_S for tail in self.tails.values())
                return quiet and not outcome(self.tails[SIDECAR], expected[SIDECAR], recovered, 0, 0).stale

            with contextlib.suppress(TimeoutError):  # what is left stale then is reported as stale
                await asyncio.to_thread(wait_until, settled, SETTLE_BOUND_S, "the status topics settled")
            result = Run(len(keys), sum(versions.values()), len(steps), sum(1 for at in given_at if at < outage_s),
                         given_at[-1], sum(1 for at in done if at < outage_s), max(done), alter_s)
            for name, tail in self.tails.items():
                result.clients[name] = outcome(tail, expected[name], recovered, requests[name], records_before[name])
            result.shown_stale = self.shown_stale(scenario)
            return result
        finally:
            await writer.stop()
            for name in scenario.names:
                self.connect.call("DELETE", f"/connectors/{name}")

    def stop(self) -> None:
        for tail in self.tails.values():
            tail.stop()
        self.sidecar.close()
        self.connect.close()
        self.kafka.close()


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"


def report(runs: list[Run], brokers: int, connectors: int, tasks: int, outage_s: float,
           sidecar_settings: dict[str, str]) -> None:
    """Print the table and the ratios."""
    first = runs[0]
    settings = ", ".join(f"{key}={value}" for key, value in sidecar_settings.items()) or "its defaults"
    print(f"\nstatus-store with {settings}")
    print(f"{brokers} brokers (broker {brokers} stopped), status topics of {PARTITIONS} partitions and replication "
          f"factor {brokers}; {outage_s:g} s of min.insync.replicas={brokers} on every status topic; {connectors} "
          f"connectors x {tasks} tasks ({first.keys} status keys), {first.steps} steps during the outage "
          f"({first.statuses_given} statuses given to status-store and to the Python writer per run)\n")
    print("| run | client | Produce requests during the outage | per second | records written since the outage "
          "began | every latest status durable after recovery (s) | keys not stale: durable after (s) | "
          "keys left stale | of which in another state | steps in the outage (the last at s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for number, run in enumerate(runs, 1):
        for name, client in run.clients.items():
            steps, last = ((run.answered_in_outage, run.last_answered_s) if name == CONNECT
                           else (run.given_in_outage, run.last_given_s))
            print(f"| {number} | {name} | {client.produce_requests:,} | {client.produce_requests / outage_s:,.1f} | "
                  f"{client.records:,} | {seconds(client.durable_s)} | {seconds(client.rest_durable_s)} | "
                  f"{len(client.stale)} of {run.keys} | {client.stale_states} | {steps} of {run.steps} "
                  f"({last:.1f}) |")
    print("\nKeys left stale (the state of their last record, and of their latest status):")
    for number, run in enumerate(runs, 1):
        if run.shown_stale:
            print(f"- run {number}, as Connect's own REST API shows them: {', '.join(run.shown_stale)}")
        for name, client in run.clients.items():
            if client.stale:
                print(f"- run {number}, {name}: {', '.join(client.stale)}")

    def ratio(baseline: str, run: Run) -> float:
        return run.clients[baseline].produce_requests / max(1, run.clients[SIDECAR].produce_requests)

    print()
    for baseline, target in ((CONNECT, "target >= 50x"), (PYTHON, "the re-implementation, beside the real thing")):
        each = [ratio(baseline, run) for run in runs]
        print(f"Produce requests of the {baseline} per request of status-store: "
              f"{', '.join(f'{r:,.1f}x' for r in each)} (median {statistics.median(each):,.1f}x; {target})")
    print(f"the recovering AlterConfigs request took {', '.join(f'{run.alter_s:.2f}' for run in runs)} s (the "
          f"time from recovery counts from its sending)")
    print(f"status-store: every latest status durable after recovery: "
          f"{', '.join(seconds(run.clients[SIDECAR].durable_s) for run in runs)} s (target <= 1 s); stale: "
          f"{', '.join(str(len(run.clients[SIDECAR].stale)) for run in runs)} (target 0)")


async def main() -> None:
    """Start the cluster and the clients, run the outages, print the tables."""
    parser = BenchParser(__doc__)
    parser.add_size("--brokers", type=int, full=3, quick=2, help="brokers (the last one is stopped before the runs)")
    parser.add_size("--connectors", type=int, full=10, quick=2, help="source connectors per run")
    parser.add_size("--tasks", type=int, full=3, quick=2, help="tasks per connector")
    parser.add_size("--outage-seconds", type=float, full=30.0, quick=8.0, help="seconds of the outage")
    parser.add_size("--runs", type=int, full=3, quick=1, help="outages, each with fresh connectors")
    parser.add_argument("--sidecar", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of status-store's (again for more), beside the worker's properties")
    args = parser.parse()
    sidecar_settings = dict(setting.split("=", 1) for setting in args.sidecar)
    print(f"load average at the start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-connect-outage-") as scratch:
        # Quick runs check that it all runs: the JVMs start sooner with the fast compiler alone.
        bench = Bench(Path(scratch), args.brokers, not args.quick, sidecar_settings)
        try:
            bench.start()
            runs = [await bench.run(index, args.connectors, args.tasks, args.outage_seconds)
                    for index in range(args.runs)]
        finally:
            bench.stop()
    report(runs, args.brokers, args.connectors, args.tasks, args.outage_seconds, sidecar_settings)
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    asyncio.run(main())
