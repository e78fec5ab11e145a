"""Benchmark one status-topic outage seen side by side by a stock Connect worker (its own status store) and by the
pod: a stock Connect worker started with the agent, and the sidecar it hands every status to; on Apache Kafka's
brokers. Then the burst a rebalance makes, for both.

    .venv/bin/python -m bench.connect_outage [--brokers 3] [--connectors 10] [--tasks 3] [--outage-seconds 30]
                                             [--runs 3] [--burst-connectors 20] [--bursts 5] [--changes 20]
                                             [--sidecar KEY=VALUE ...] [--agent KEY=VALUE ...] [--keep DIR]
                                             [--quick]

The cluster: ``--brokers`` Apache Kafka brokers (KRaft, a controller of their own, both JIT compilers), each behind
a ``KafkaProxy`` (harness/kafka_proxy.py) that counts the requests it forwards by client id and API key. Two Connect
4.x distributed workers (both JIT compilers, the scripted test connector of harness/jvm), each in a group of its own
with topics of its own:

- **Connect worker**: a stock worker; its status store is Connect's own ``KafkaStatusBackingStore``, whose producer
  is ``<group>-statuses``;
- **the pod**: a stock worker started with the agent (``-javaagent``, nothing else), and ``status-store serve`` on
  the worker's own properties (its producer ``outage-pod-sidecar``): the worker hands it every status write. Its
  Produce requests are the worker's status producer's and the sidecar's together. ``--agent enabled=false`` checks
  the bench against itself: the pod's worker then runs on its own store, beside its sidecar.

Each status topic: 5 partitions, replication factor ``--brokers``, ``min.insync.replicas`` one less. Before the runs
the last broker is stopped, so every partition has one in-sync replica less than its replicas, which the topics
allow. **The outage**: both status topics' ``min.insync.replicas`` raised to ``--brokers``, above the in-sync
replicas available (one AlterConfigs request for both), for ``--outage-seconds``: every write to them fails with
NOT_ENOUGH_REPLICAS, while the workers' config and offset topics and their groups keep working. **Recovery**:
``min.insync.replicas`` back (one request); that moment is the brokers' return.

**The same steps, at the same moments, for both workers.** Each run has fresh source connectors (``--connectors``,
with ``--tasks`` tasks each, all RUNNING before the outage). From one second into the outage, evenly spread until a
few seconds before its end, each connector in turn goes through: pause, resume, a task failing (its config changed
so that task 0 fails), recovering (the config changed back), a restart with its tasks; each a call to the worker's
REST API, on a thread per connector and worker (a 409 during a rebalance is asked again).

**Measured**, per run and worker:

- Produce requests during the outage, as the proxies count them by client id;
- every latest status durable after recovery: seconds from the recovering AlterConfigs request until the last
  record of every key of the run is in the state the steps left it in, as a consumer tailing each status topic
  reads them (a consumer reads a record once every in-sync replica has it: durable); "never" when some key ends
  stale (compared by state: a stale record of the same state passes, so the count is a lower bound for both). A
  key whose last record is older than the outage but in the state the steps left it in is not stale (a reader sees
  its latest state), though no write of the outage reached the topic for it (Connect's rules drop a write's
  retries once the store's generation moved on, and the pod keeps them; on a loaded machine both workers left keys
  so): the report lists such keys apart;
- keys left stale: as each worker's own REST API shows them once the topics are quiet (it serves what its store
  read from the topic: what operators see), and as the topic's last records say;
- the worker's REST API during the outage: every answer to ``GET /connectors`` asked every 200 ms, p99 and max.

**The burst** (after the outages, no fault; ``--runs 0`` for the bursts alone): ``--burst-connectors`` connectors
of ``--tasks`` tasks created at once on each worker: seconds until each worker's REST API shows every one RUNNING,
and the status records written per second meanwhile; then every one deleted: seconds until each worker answers 404
for every one. A deletion revokes the connector and its tasks, and Connect flushes its status store before that
rebalance goes on (``DistributedHerder``'s ``onRevoked``), where the agent waits until the sidecar has settled what
it was given. ``--bursts`` of them, the workers taking turns at going first. The deletions' Produce requests of each
worker's status writes (the pod's worker's and sidecar's), as the proxies see them: the broker's answer, and how many
were sent while another request of their connection was unanswered (a broker reads a connection's next request once
it has answered the one before; librdkafka, the sidecar's client, puts one partition in each request, where a stock
worker's Java client sends a broker every partition's records in one).

**Status changes** (after the bursts): one connector of ``--tasks`` tasks on each worker, paused, resumed and
restarted (with its tasks) through the worker's REST API, ``--changes`` times each, one worker at a time (taking
turns at going first): seconds from the call until the worker's own REST API shows the change, the connector and
every task in the new state (a restart: RUNNING again, after the API showed it RESTARTING). What an operator waits
for after a click: the status written (through the sidecar, for the pod), read back by the worker, served.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Collection, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from bench import BenchParser, load_average, write_json
from bench.outage_report import (
    CONNECT,
    POD,
    Burst,
    CreationPhases,
    DeletionTimes,
    Run,
    WorkerRun,
    creation_phases,
    rebalance_phases,
    report,
)
from bench.status_changes import CHANGES, Call, status_changes
from bench.status_changes import CONNECTOR as CHANGED
from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.kafka_proxy import PRODUCE
from harness.real_connect import ConnectCluster, ConnectError, all_in
from harness.real_kafka import KafkaCluster
from harness.sidecar import AgentPod
from harness.topic_tail import TopicTail
from status_store.connect.model import TaskId, connector_key, task_key
from status_store.kafka.reading import read_to_end

GROUP = "outage"
POD_GROUP = "outage-pod"
POD_SIDECAR_CLIENT = "outage-pod-sidecar"
CLIENT_IDS = {CONNECT: [f"{GROUP}-statuses"], POD: [f"{POD_GROUP}-statuses", POD_SIDECAR_CLIENT]}
# The steps start this long after the outage begins, and the last one comes this long before its end.
LEAD_S, TAIL_S = 1.0, 4.0
# Topics are settled once no record of a run's keys has arrived for this long.
QUIET_S = 5.0
# Bounds: for the topics to settle after recovery, for one REST call (Connect answers 409 during a rebalance).
SETTLE_BOUND_S = 120.0
REST_BOUND_S = 60.0
# How long after the last deleted connector's 404 its status tombstones may take to be read from the topic.
TOMBSTONES_BOUND_S = 10.0
PROBE_INTERVAL_S = 0.2
# How often a burst asks a worker's REST API whether its connectors run: the creation's time is quantized by it (at
# 200 ms, Connect's own pace of a test's wait, a burst of 2-3 s was off by up to 8 %, more than the gap it measures).
RUNNING_POLL_S = 0.01
ACTIONS = ("pause", "resume", "fail", "recover", "restart")


class Connectors:
    """One run's connectors: the REST call of each step, and the state the steps leave each connector and task in."""

    def __init__(self, prefix: str, count: int, tasks: int) -> None:
        self.names = [f"{prefix}-c{i}" for i in range(count)]
        self.tasks = tasks
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

    def step(self, action: str, name: str) -> tuple[str, str, object]:
        """The REST call of a step; the expected states follow it."""
        connector_states = {"pause": "PAUSED", "fail": "RUNNING"}
        self.states[connector_key(name)] = connector_states.get(action, "RUNNING")
        for task in range(self.tasks):
            failed = action == "fail" and task == 0
            self.states[task_key(TaskId(name, task))] = "FAILED" if failed else connector_states.get(action, "RUNNING")
        if action in ("pause", "resume"):
            return "PUT", f"/connectors/{name}/{action}", None
        if action == "restart":
            return "POST", f"/connectors/{name}/restart?includeTasks=true", None
        return "PUT", f"/connectors/{name}/config", self.config(failing=action == "fail")


def every_one_running(connect: ConnectCluster, pending: list[str], tasks: int) -> bool:
    """Whether a worker's REST API shows every connector of ``pending`` and its tasks RUNNING; asks for the first
    not seen so yet, and drops from ``pending`` each one it shows so (it stays so: nothing else changes them)."""
    running = all_in("RUNNING", tasks)
    while pending:
        answer = connect.request("GET", f"/connectors/{pending[0]}/status")
        if answer.status != 200 or not running(answer.json()):
            return False
        pending.pop(0)
    return True


def all_read_in(tail: TopicTail, keys: list[str], state: str | None, since: float) -> float | None:
    """Seconds after ``since`` (monotonic) until the tail had read, for every key, a record in ``state`` (None: a
    tombstone) written since (the first such of each key); None when some key has none."""
    read = tail.records(keys)
    last = last_first(((at, key, json.loads(value)["state"] if value else None) for at, key, value in read), keys,
                      state, since)
    return None if last is None else last - since


def last_first(records: Iterable[tuple[float, str, str | None]], keys: Collection[str], state: str | None,
               since: float) -> float | None:
    """Of ``records`` (time, key, state; None: a tombstone), the time of the latest of each key's first record in
    ``state`` at or after ``since``; None when some key has none."""
    first: dict[str, float] = {}
    for at, key, record_state in records:
        if at >= since and record_state == state and key not in first:
            first[key] = at
    return max(first.values()) if len(first) == len(keys) else None


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds a process has used so far, every thread's (its user and system time in /proc); None: the whole
    machine's busy time so far, every CPU's (all but idle and I/O wait, /proc/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    if pid is None:
        fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:]
        return sum(int(value) for index, value in enumerate(fields) if index not in (3, 4)) / tick
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return float("nan")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def gone(connect: ConnectCluster, connector: str) -> bool:
    """Whether a worker answers 404 for a connector's status."""
    return connect.request("GET", f"/connectors/{connector}/status").status == 404


def latest_state(tail: TopicTail, states: dict[str, str], began: float, recovered: float
                 ) -> tuple[float | None, float | None, list[str], list[str]]:
    """From a topic's tail: when every key's last record was in its latest state (None: some key is stale), the
    same for the keys that are not stale, the stale keys, and the keys whose last record is older than the outage
    but in their latest state (counted durable from before the recovery)."""
    durable: list[float] = []
    stale: list[str] = []
    kept: list[str] = []
    for key, state in states.items():
        last = tail.last(key)
        fresh = last is not None and last[0] >= began
        found = json.loads(last[1])["state"] if last is not None and last[1] else "none"
        if found != state:
            stale.append(f"{key.removeprefix('status-')} {found}{'' if fresh else ', older than the outage'} "
                         f"(latest {state})")
        elif fresh:
            assert last is not None
            durable.append(max(0.0, last[0] - recovered))
        else:
            kept.append(f"{key.removeprefix('status-')} {found}")
            durable.append(0.0)
    rest = max(durable) if durable else None
    return (None if stale else rest), rest, stale, kept


class Prober:
    """``GET /connectors`` of a worker every PROBE_INTERVAL_S on a thread of its own; each answer's time."""

    def __init__(self, connect: ConnectCluster) -> None:
        self._connect = connect
        self.seconds: list[float] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"probe-{connect.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(PROBE_INTERVAL_S):
            began = time.monotonic()
            with contextlib.suppress(OSError):  # counted as the time it took to fail
                self._connect.request("GET", "/connectors")
            self.seconds.append(time.monotonic() - began)

    def stop(self) -> list[float]:
        self._stopping.set()
        self._thread.join(REST_BOUND_S)
        return sorted(self.seconds)


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank); nan for none."""
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


class Bench:
    """The cluster, the stock worker, the pod, and their status topics' tails, for every run."""

    def __init__(self, workdir: Path, brokers: int, full_jit: bool, sidecar_settings: dict[str, str],
                 agent_options: dict[str, str] | None = None) -> None:
        line = kafka_line("kafka-4")
        self.brokers = brokers
        self.kafka = KafkaCluster(line, workdir / "kafka", brokers=brokers, proxied=True, full_jit=full_jit)
        self.connect = ConnectCluster(line, workdir / "connect", self.kafka, GROUP, workers=1, full_jit=full_jit)
        self.pod = AgentPod(line, workdir / "pod", self.kafka, POD_GROUP, workers=1, full_jit=full_jit,
                            sidecar_settings={"sidecar.kafka.client.id": POD_SIDECAR_CLIENT, **sidecar_settings},
                            agent_options=agent_options)
        self.workers = {CONNECT: self.connect, POD: self.pod.connect}
        self.topics = {name: worker.status_topic for name, worker in self.workers.items()}
        self.admin: AdminClient | None = None
        self.tails: dict[str, TopicTail] = {}

    def start(self) -> None:
        """Start everything; stop the last broker, and wait until it has left every status partition's ISR."""
        self.kafka.start()
        for proxy in self.kafka.proxies:
            proxy.timed = True  # the workers' and the sidecar's connections: their Produce requests' answers
        self.admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers, "log_level": 2})
        self.connect.start()
        self.pod.start()
        self.set_min_insync_replicas(self.brokers - 1)
        self.kafka.stop_broker(self.brokers)

        def shrunk() -> bool:
            assert self.admin is not None
            topics = self.admin.list_topics(timeout=10).topics
            return all(len(partition.isrs) == self.brokers - 1 and partition.leader >= 0
                       for topic in self.topics.values() for partition in topics[topic].partitions.values())

        wait_until(shrunk, 60, f"broker {self.brokers} out of every status partition's ISR", interval=0.5)
        self.tails = {name: TopicTail(self.kafka.bootstrap_servers, topic, keep_records=True)
                      for name, topic in self.topics.items()}

    def set_min_insync_replicas(self, value: int) -> None:
        """Every status topic's min.insync.replicas, in one AlterConfigs request."""
        assert self.admin is not None
        resources = [ConfigResource("TOPIC", topic, incremental_configs=[
            ConfigEntry("min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET)])
            for topic in self.topics.values()]
        for future in self.admin.incremental_alter_configs(resources).values():
            future.result(30)

    def produce_requests(self) -> dict[str, int]:
        """Produce requests forwarded so far, per worker (the pod's worker and sidecar together)."""
        return {name: sum(proxy.requests(PRODUCE, clients) for proxy in self.kafka.proxies)
                for name, clients in CLIENT_IDS.items()}

    def rest(self, connect: ConnectCluster, method: str, path: str, body: object, began: float) -> float:
        """A call to a worker's REST API, again while it answers 409 (a rebalance), within a bound; when it was
        answered, in seconds after ``began``."""
        deadline = time.monotonic() + REST_BOUND_S
        while True:
            answer = connect.request(method, path, body)
            if answer.status in (200, 201, 202, 204):
                return time.monotonic() - began
            if answer.status != 409 or time.monotonic() > deadline:
                raise ConnectError(f"{method} {path} -> {answer.status} {answer.body[:500]!r}")
            time.sleep(0.1)

    @staticmethod
    def shown_stale(connect: ConnectCluster, scenario: Connectors) -> list[str]:
        """What a worker's REST API shows in another state than the steps left it in (it serves its status store's
        cache, which holds what it read from its status topic)."""
        shown = []
        for name in scenario.names:
            status = connect.call("GET", f"/connectors/{name}/status")
            found = {connector_key(name): status["connector"]["state"],
                     **{task_key(TaskId(name, task["id"])): task["state"] for task in status["tasks"]}}
            shown += [f"{key.removeprefix('status-')} {found.get(key, 'none')} (latest {state})"
                      for key in scenario.keys(name) if found.get(key) != (state := scenario.states[key])]
        return shown

    async def run(self, index: int, connectors: int, tasks: int, outage_s: float) -> Run:
        """One outage with fresh connectors on both workers."""
        scenario = Connectors(f"run{index}", connectors, tasks)
        for connect in self.workers.values():
            for name in scenario.names:
                connect.call("PUT", f"/connectors/{name}/config", scenario.config(failing=False))
        for connect in self.workers.values():
            for name in scenario.names:
                connect.wait_for_status(name, all_in("RUNNING", tasks), "running", 120)
        keys = list(scenario.states)
        records_before = {name: tail.arrivals(keys) for name, tail in self.tails.items()}
        steps = scenario.steps()
        spacing = (outage_s - LEAD_S - TAIL_S) / len(steps)
        # Each worker's REST calls go out at the steps' times, on a thread per connector (its calls in order), so that
        # one slow answer does not hold up the steps of other connectors or of the other worker.
        calls = {(worker, name): ThreadPoolExecutor(1, thread_name_prefix=name)
                 for worker in self.workers for name in scenario.names}
        answered: dict[str, list[Future[float]]] = {worker: [] for worker in self.workers}

        def drive(began: float) -> None:
            for number, (action, name) in enumerate(steps):
                time.sleep(max(0.0, began + LEAD_S + number * spacing - time.monotonic()))
                call = scenario.step(action, name)
                for worker, connect in self.workers.items():
                    answered[worker].append(calls[worker, name].submit(self.rest, connect, *call, began))

        try:
            for proxy in self.kafka.proxies:
                proxy.reset_counts()
            probers = {name: Prober(connect) for name, connect in self.workers.items()}
            began = time.monotonic()
            self.set_min_insync_replicas(self.brokers)
            driver = threading.Thread(target=drive, args=(began,), name="steps")
            driver.start()
            await asyncio.sleep(max(0.0, began + outage_s - time.monotonic()))
            requests = self.produce_requests()
            probed = {name: prober.stop() for name, prober in probers.items()}
            recovered = time.monotonic()
            self.set_min_insync_replicas(self.brokers - 1)
            alter_s = time.monotonic() - recovered
            await asyncio.to_thread(driver.join, outage_s)
            done = {worker: [future.result(REST_BOUND_S * len(steps)) for future in futures]
                    for worker, futures in answered.items()}
            for executor in calls.values():
                executor.shutdown()

            def settled() -> bool:
                quiet = all(time.monotonic() - tail.latest_arrival(keys) >= QUIET_S for tail in self.tails.values())
                return quiet and not latest_state(self.tails[POD], scenario.states, began, recovered)[2]

            with contextlib.suppress(TimeoutError):  # what is left stale then is reported as stale
                await asyncio.to_thread(wait_until, settled, SETTLE_BOUND_S, "the status topics settled")
            result = Run(len(keys), len(steps), alter_s)
            for name, connect in self.workers.items():
                durable, rest_durable, stale, kept = latest_state(self.tails[name], scenario.states, began,
                                                                  recovered)
                result.workers[name] = WorkerRun(
                    requests[name], self.tails[name].arrivals(keys) - records_before[name], durable, rest_durable,
                    stale, kept, self.shown_stale(connect, scenario), quantile(probed[name], 0.99),
                    max(probed[name], default=float("nan")), sum(1 for at in done[name] if at < outage_s),
                    max(done[name]))
            return result
        finally:
            for connect in self.workers.values():
                for name in scenario.names:
                    connect.call("DELETE", f"/connectors/{name}")

    def burst(self, connectors: int, tasks: int, repetition: int) -> dict[str, Burst]:
        """``connectors`` connectors created at once on each worker: how long until each shows them all RUNNING, and
        the status records written meanwhile; then all deleted: how long until each answers 404 for every one. The
        workers take turns at going first, one repetition to the next."""
        results = {}
        order = list(self.workers.items())
        for name, connect in order[repetition % 2:] + order[:repetition % 2]:
            scenario = Connectors(f"burst{repetition}", connectors, tasks)
            keys = list(scenario.states)
            before = self.tails[name].arrivals(keys)
            log_file = connect.worker.process.log_file
            log_from = log_file.stat().st_size
            processes = self.burst_processes(name)
            cpu_before = {what: cpu_seconds(pid) for what, pid in processes.items()}
            created_at, began_wall = time.monotonic(), time.time()
            began = created_at
            for connector in scenario.names:
                connect.call("PUT", f"/connectors/{connector}/config", scenario.config(failing=False))
            configs_s = time.monotonic() - began
            wait_until(functools.partial(every_one_running, connect, list(scenario.names), tasks), 300,
                       "every connector RUNNING", interval=RUNNING_POLL_S)
            created = time.monotonic() - began
            cpu = {what: cpu_seconds(pid) - cpu_before[what] for what, pid in processes.items()}
            records = self.tails[name].arrivals(keys) - before
            with log_file.open("rb") as log:
                log.seek(log_from)
                creation = creation_phases(log.read().decode(errors="replace").splitlines(), began_wall,
                                           scenario.names)
            log_from = log_file.stat().st_size
            began = time.monotonic()
            for connector in scenario.names:
                self.rest(connect, "DELETE", f"/connectors/{connector}", None, began)
            requests_s = time.monotonic() - began
            for connector in scenario.names:
                wait_until(functools.partial(gone, connect, connector), 300, f"{connector} deleted", interval=0.05)
            deleted = time.monotonic() - began
            produce = [answer for proxy in self.kafka.proxies
                       for answer in proxy.answers(PRODUCE, CLIENT_IDS[name], since=began)
                       if answer.sent <= began + deleted]
            with log_file.open("rb") as log:
                log.seek(log_from)
                phases = rebalance_phases(log.read().decode(errors="replace").splitlines())
            # The records of the creation as the tail read them, however late (after the deletions: all of them).
            durable_s = all_read_in(self.tails[name], keys, "RUNNING", created_at)
            # Connect writes a deleted connector's and its tasks' tombstones as it removes the config: by the time REST
            # answers 404 for the last, the last tombstones are on their way, read within the bound.
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: all_read_in(self.tails[name], keys, None, began) is not None,  # noqa: B023
                           TOMBSTONES_BOUND_S, "every status tombstone read", interval=0.05)
            tombstones_s = all_read_in(self.tails[name], keys, None, began)
            results[name] = Burst(created, records, deleted, phases,
                                  CreationPhases(configs_s, *creation, durable_s, cpu),
                                  DeletionTimes(requests_s, tombstones_s, produce))
        return results

    def stages(self, calls: list[Call], tasks: int) -> list[tuple[Call, float | None]]:
        """Each status change's call, with seconds from it until its last status reached a producer: the first record
        of the change's state of every key of the connector, by its timestamp (the producer's clock at the send: the
        worker's own producer, for the pod the sidecar's); None when not found."""
        keys = {connector_key(CHANGED), *(task_key(TaskId(CHANGED, task)) for task in range(tasks))}
        written: dict[str, list[tuple[float, str, str | None]]] = {name: [] for name in self.topics}
        assert self.admin is not None
        described = self.admin.list_topics(timeout=10).topics
        for name, topic in self.topics.items():
            partitions: dict[int, int] = {}
            for batch in read_to_end({"bootstrap.servers": self.kafka.bootstrap_servers}, topic, SETTLE_BOUND_S):
                for message in batch:
                    key, value = (message.key() or b"").decode(), message.value()
                    if key in keys:
                        state = json.loads(value)["state"] if value else None
                        written[name].append((message.timestamp()[1] / 1000, key, state))
                        if (partition := message.partition()) is not None:
                            partitions[partition] = described[topic].partitions[partition].leader
            # The keys' partitions (the same in each topic: the key's hash), led by brokers that differ topic to topic.
            print(f"{name}: the status changes' keys in partitions {sorted(partitions)}, led by brokers "
                  f"{[partitions[partition] for partition in sorted(partitions)]}")
        found = []
        for call in calls:
            state = CHANGES[call.change][2]
            last = last_first(written[call.worker], keys, state, math.floor(call.began_epoch * 1000) / 1000)
            found.append((call, None if last is None else last - call.began_epoch))
        return found

    def burst_processes(self, name: str) -> dict[str, int | None]:
        """The processes whose CPU a creation burst counts: the worker's JVM, the pod's sidecar (None: the machine's
        every process, from /proc/stat)."""
        worker = self.workers[name].worker.process.process
        found: dict[str, int | None] = {"worker": worker.pid if worker is not None else None}
        service = self.pod.sidecar.service
        if name == POD and service is not None and service.process is not None:
            found["sidecar"] = service.process.pid
        found["machine"] = None
        return found

    def stop(self) -> None:
        for tail in self.tails.values():
            tail.stop()
        self.pod.close()
        self.connect.close()
        self.kafka.close()


async def main() -> None:
    """Start the cluster and the workers, run the outages and the burst, print the tables."""
    parser = BenchParser(__doc__)
    parser.add_size("--brokers", type=int, full=3, quick=2, help="brokers (the last one is stopped before the runs)")
    parser.add_size("--connectors", type=int, full=10, quick=2, help="source connectors per run")
    parser.add_size("--tasks", type=int, full=3, quick=2, help="tasks per connector")
    parser.add_size("--outage-seconds", type=float, full=30.0, quick=8.0, help="seconds of the outage")
    parser.add_size("--runs", type=int, full=3, quick=1, help="outages, each with fresh connectors")
    parser.add_size("--burst-connectors", type=int, full=20, quick=2, help="connectors created at once (the burst)")
    parser.add_size("--bursts", type=int, full=5, quick=1, help="bursts, the workers taking turns at going first")
    parser.add_size("--changes", type=int, full=20, quick=1, help="rounds of pause, resume and restart timed")
    parser.add_key_values("--sidecar", help="a setting of the pod's sidecar (again for more), beside the worker's "
                                            "properties")
    parser.add_key_values("--agent", help="an option of the pod's agent (again for more), in its -javaagent string; "
                                          "enabled=false checks the bench against itself: the pod's worker then runs "
                                          "on its own store")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="the cluster's files in DIR (new or empty), kept: every JVM's log and the sidecar's")
    args = parser.parse()
    print(f"load average at the start: {load_average()}")
    calls: list[Call] = []
    stages: list[tuple[Call, float | None]] = []
    with (contextlib.nullcontext(str(args.keep)) if args.keep
          else tempfile.TemporaryDirectory(prefix="bench-connect-outage-")) as scratch:
        # Quick runs check that it all runs: the JVMs start sooner with the fast compiler alone.
        bench = Bench(Path(scratch), args.brokers, not args.quick, args.sidecar, args.agent)
        try:
            bench.start()
            runs = [await bench.run(index, args.connectors, args.tasks, args.outage_seconds)
                    for index in range(args.runs)]
            bursts = [await asyncio.to_thread(bench.burst, args.burst_connectors, args.tasks, repetition)
                      for repetition in range(args.bursts)]
            changes = (await asyncio.to_thread(status_changes, bench.workers, bench.rest, args.changes, args.tasks,
                                               calls) if args.changes else None)
            if changes:
                try:
                    stages = await asyncio.to_thread(bench.stages, calls, args.tasks)
                except Exception as e:  # a breakdown: the run's figures stand without it
                    print(f"the status changes' stages not read: {e!r}")
        finally:
            if args.keep and bench.pod.sidecar.service is not None:
                (args.keep / "sidecar.log").write_text("".join(bench.pod.sidecar.service.output()), encoding="utf-8")
            bench.stop()
    found = report(runs, bursts, changes, args.brokers, args.connectors, args.tasks, args.outage_seconds,
                   args.burst_connectors, args.sidecar, stages, args.agent)
    print(f"\nload average at the end: {load_average()}")
    write_json(args.json, {**found, "load average at the end": os.getloadavg()})


if __name__ == "__main__":
    asyncio.run(main())
