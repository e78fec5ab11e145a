"""Real faults on real brokers: status-store and a Connect 4.x worker on Apache Kafka's three-broker cluster
(harness/real_kafka.py; every broker behind a fault-injecting proxy), the status topic at replication factor 3 with
``min.insync.replicas=2``, status writes going on through the sidecar's REST API (and through Connect's own status
store, whose connector is paused or resumed during each fault) while brokers are stopped, killed, restarted, paused
and black-holed.

After each fault, undone before the test ends: every write the sidecar acknowledged (``?wait=true`` answered 200)
is the latest value of its key in the topic, read with a plain consumer; no key's value ever went back to an older
one; once the sidecar has settled, every write it accepted is there (an update out of retries is parked, not
dropped); and the sidecar answers the status routes of every connector written as Connect does.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import re
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, murmur2
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from harness.java_process import SOURCE_CONNECTOR, kafka_line, wait_until
from harness.kafka_proxy import Fault
from harness.real_connect import Answer, ConnectCluster, all_in
from harness.real_kafka import KafkaCluster
from harness.sidecar import LiveSidecar
from status_store.connect.codec import encode_status
from status_store.connect.model import State, connector_key

from .helpers import eventually_value
from .test_connect_live import same_answers

pytestmark = pytest.mark.timeout(600)

# Connect's own connector, paused and resumed through Connect's REST API while the faults last.
CONNECTOR = "steady"
# The sidecar's writers wait at most this long for each answer, so they go on writing through an outage.
WRITE_WAIT_MS = 1000
# Between two writes of one writer.
PACE_S = 0.05
# Bound on the sidecar writing and reading back again once a hung broker's partitions have moved: its clients'
# requests in flight to that broker time out first (10 s, status.storage.retry.delivery.timeout.ms for writes),
# then they ask the metadata for the new leaders. Less than librdkafka's default socket.timeout.ms (60 s).
HUNG_BROKER_S = 40.0
# Bound on Connect taking a pause or resume while a fault lasts.
TOGGLE_S = 120.0
# Bound on the sidecar settling (every update written, nothing parked or held) and Connect catching up.
SETTLE_S = 90.0
STATES = (State.RUNNING, State.PAUSED, State.FAILED)
# Of the status topic (Connect's default).
PARTITIONS = 5


@dataclass
class Faults:
    """The three-broker cluster, the Connect worker and the sidecar on its topics."""

    kafka: KafkaCluster
    connect: ConnectCluster
    sidecar: LiveSidecar
    # The state Connect's connector is in, or on its way to.
    connector_state: str = "RUNNING"
    # The sidecar's first output line of the test running now.
    log_start: int = 0
    _toggling: threading.Thread | None = None
    _toggle_errors: list[str] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return self.connect.status_topic

    def metric(self, name: str) -> float:
        """One sample of the sidecar's /metrics (the series without labels, or the sum over the labels)."""
        text = self.sidecar.request("GET", "/metrics").body.decode()
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == name)

    def log(self) -> str:
        """The sidecar's log lines of the test running now."""
        assert self.sidecar.service is not None
        return "".join(self.sidecar.service.output()[self.log_start:])

    def leader(self, partition: int) -> int:
        """The leader of a partition of the status topic as the metadata says now (-1: none, or no answer)."""
        try:
            return self.kafka.partitions(self.topic)[partition].leader
        except KafkaException:
            return -1

    def toggle_connector(self) -> None:
        """Pause Connect's connector, or resume it, in the background: its worker writes the new target state to
        its config topic, then the new states of the connector and its tasks to the status topic. Asked again
        (bounded) while Connect answers 500: a broker that hangs can make its config write time out."""
        self.connector_state = "PAUSED" if self.connector_state == "RUNNING" else "RUNNING"
        path = f"/connectors/{CONNECTOR}/{'pause' if self.connector_state == 'PAUSED' else 'resume'}"

        answers: list[Answer | None] = []

        def put() -> Answer | None:
            try:
                answers.append(self.connect.request("PUT", path))
            except OSError:  # no answer in time (a worker whose brokers all restart), a refused connection
                answers.append(None)
            return answers[-1]

        def ask() -> None:
            # A failure here is recorded for the test's thread to report (this thread's assertion would be lost).
            with contextlib.suppress(AssertionError):
                eventually_value(put, lambda answer: answer is not None and answer.status < 500, TOGGLE_S, 1.0)
            answer = answers[-1] if answers else None
            if answer is None or answer.status >= 300:
                got = "no answer" if answer is None else f"{answer.status} {answer.body[:300]!r}"
                self._toggle_errors.append(f"PUT {path} -> {got}")

        self._toggling = threading.Thread(target=ask, name="toggle", daemon=True)
        self._toggling.start()

    def toggled(self) -> None:
        """Wait until Connect has taken the last pause or resume (bounded)."""
        if self._toggling is not None:
            self._toggling.join(TOGGLE_S + 60)
            assert not self._toggling.is_alive(), "Connect did not answer a pause or resume"
        assert not self._toggle_errors, self._toggle_errors

    def quiet_broker(self) -> tuple[int, int]:
        """A broker that leads a partition of the status topic but neither Connect's config topic nor the group
        coordinator's partition of Connect's group (so Connect's REST API keeps answering while it is down), and
        that partition."""
        offsets = self.kafka.partitions("__consumer_offsets")
        busy = {self.kafka.partitions(self.connect.config_topic)[0].leader,
                offsets[coordinator_partition(self.connect.workers[0].group, len(offsets))].leader}
        for number, partition in sorted(self.kafka.partitions(self.topic).items()):
            if partition.leader not in busy:
                return partition.leader, number
        raise AssertionError(f"every leader of {self.topic} also leads Connect's config or group: {busy}")

    def restore(self) -> None:
        """Undo every fault: proxies pass everything, every broker runs, every replica is in sync and every
        partition led by its preferred replica, the sidecar has nothing held."""
        for proxy in self.kafka.proxies:
            proxy.set_fault(Fault.NONE)
            proxy.delay_s = 0.0
        stopped = []
        for node in self.kafka.brokers:
            assert node.process is not None
            node.process.resume()
            if not node.process.alive():
                stopped.append(node.node_id)
        if stopped:
            self.kafka.start_brokers(stopped)
        self.kafka.wait_in_sync([self.topic, self.connect.config_topic, "__consumer_offsets"])
        self.wait_released("no partition held")

    def wait_released(self, what: str) -> None:
        """Wait (bounded) until the sidecar holds no partition; else fail with what it holds, on the failure's first
        line (CI shows little more): its waiting updates' last errors, and whether probes went meanwhile (probes
        failing: the writes fail; none: nothing tests the partition)."""
        probes = self.metric("status_retry_probes_total")
        try:
            wait_until(lambda: self.metric("status_partitions_held") == 0, SETTLE_S, what)
        except TimeoutError:
            raise TimeoutError(f"{what}: not within {SETTLE_S} s; {self.holding(probes)}") from None

    def holding(self, probes_before: float) -> str:
        """One line of what the sidecar holds now."""
        held = [r for r in self.sidecar.call("GET", "/retries?limit=1000") if r["held"]]
        errors = collections.Counter(r["last_error"] or "none" for r in held)
        soonest = min((r["next_attempt_in_seconds"] for r in held), default=None)
        return (f"{self.metric('status_partitions_held'):.0f} partition(s) held, {len(held)} update(s) waiting in "
                f"them (last errors {dict(errors)}, the next probe in {soonest} s), "
                f"{self.metric('status_retry_probes_total') - probes_before:.0f} probe(s) sent during the wait, "
                f"{self.metric('status_parked_updates'):.0f} parked")


def coordinator_partition(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` whose leader coordinates ``group``: Kafka's
    ``Utils.abs(group.hashCode()) % partitions``, with Java's String.hashCode."""
    encoded = group.encode("utf-16-be")
    code = 0
    for unit in struct.unpack(f">{len(encoded) // 2}H", encoded):
        code = (31 * code + unit) & 0xFFFFFFFF
    signed = code - (1 << 32) if code >= 1 << 31 else code
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


@pytest.fixture(scope="module")
def faults(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    """One Connect 4.x worker on the three brokers (its status topic at replication factor 3 with
    min.insync.replicas=2), a running connector of two tasks, and the sidecar on the worker's own properties."""
    with (ConnectCluster(kafka_line("kafka-4"), tmp_path_factory.mktemp("faults-connect"), kafka_cluster, "faults",
                         workers=1, settings={"status.storage.min.insync.replicas": "2"}) as connect,
          LiveSidecar(tmp_path_factory.mktemp("faults-sidecar"), connect) as sidecar):
        connect.call("PUT", f"/connectors/{CONNECTOR}/config", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "2"})
        connect.wait_for_status(CONNECTOR, all_in("RUNNING", 2), "running")
        yield Faults(kafka_cluster, connect, sidecar)


@pytest.fixture
def cluster(faults: Faults) -> Iterator[Faults]:
    """The module's cluster for one test, every fault undone when it ends (whatever happened). The sidecar's log
    lines of the test are printed (pytest shows them when it fails)."""
    assert faults.sidecar.service is not None
    faults.log_start = len(faults.sidecar.service.output())
    yield faults
    print(f"--- the sidecar's log during the test ---\n{faults.log()[-20000:]}")
    faults.restore()


@dataclass
class Ledger:
    """What the sidecar answered writes of each key, by round: the last round accepted (answered 200, 504: still
    being retried, or 503: failed and parked) and the last acknowledged (200)."""

    accepted: dict[bytes, int] = field(default_factory=dict)
    acknowledged: dict[bytes, int] = field(default_factory=dict)
    answers: collections.Counter[int] = field(default_factory=collections.Counter)
    unexpected: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, keys: list[bytes], round_: int, answer: Answer) -> bool:
        """Record the answer to a write of ``keys`` in round ``round_``; whether it was acknowledged."""
        accepted = answer.status in (200, 504) or (answer.status == 503 and b"did not accept" in answer.body)
        with self._lock:
            self.answers[answer.status] += 1
            if not accepted:
                self.unexpected.append(f"{answer.status} {answer.body[:300]!r}")
            for key in keys:
                if accepted:
                    self.accepted[key] = round_
                if answer.status == 200:
                    self.acknowledged[key] = round_
        return answer.status == 200


@dataclass
class Writers:
    """Threads writing task statuses through the sidecar's ``POST /statuses?wait=true`` (bounded at WRITE_WAIT_MS,
    so they go on writing through an outage), each round after round over the tasks of a connector of its own,
    which cover every partition: every value carries its round, so the topic shows whether a key's value ever went
    back."""

    sidecar: LiveSidecar
    prefix: str
    threads: int = 3
    # Tasks per connector at least (more where these do not cover every partition).
    tasks: int = 8
    ledger: Ledger = field(default_factory=Ledger)
    _stop: threading.Event = field(default_factory=threading.Event)
    _running: list[threading.Thread] = field(default_factory=list)

    @property
    def connectors(self) -> list[str]:
        return [f"{self.prefix}-{n}" for n in range(self.threads)]

    def __enter__(self) -> Writers:
        for connector in self.connectors:
            thread = threading.Thread(target=self._write, args=(connector,), name=f"writer-{connector}", daemon=True)
            thread.start()
            self._running.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._running:
            thread.join(WRITE_WAIT_MS / 1000 + 30)
        assert not any(thread.is_alive() for thread in self._running), "a writer did not stop"
        assert not self.ledger.unexpected, f"the sidecar answered writes unexpectedly: {self.ledger.unexpected[:5]}"

    def _write(self, connector: str) -> None:
        round_ = 0
        while not self._stop.is_set():
            round_ += 1
            state = STATES[round_ % len(STATES)].value
            updates = [{"kind": "task", "connector": connector, "task": task, "state": state,
                        "worker_id": "writer:8083", "generation": 1, "trace": f"round {round_}"}
                       for task in self._tasks(connector)]
            try:
                answer = self.sidecar.request("POST", f"/statuses?wait=true&timeout_ms={WRITE_WAIT_MS}",
                                              {"updates": updates})
            except OSError as e:  # no answer: whether the sidecar accepted the round is unknown
                self.ledger.unexpected.append(f"round {round_} of {connector}: {e}")
                return
            self.ledger.note(self._keys(connector), round_, answer)
            self._stop.wait(PACE_S)

    def _tasks(self, connector: str) -> range:
        """The connector's first ``tasks`` tasks, and more until their keys cover every partition."""
        covered: set[int] = set()
        count = 0
        while count < self.tasks or len(covered) < PARTITIONS:
            covered.add(murmur2(f"status-task-{connector}-{count}".encode(), PARTITIONS))
            count += 1
        return range(count)

    def _keys(self, connector: str) -> list[bytes]:
        return [f"status-task-{connector}-{task}".encode() for task in self._tasks(connector)]

    def wait_for_answers(self, count: int, status: int, timeout: float = 30.0) -> None:
        """Wait until ``count`` more writes have been answered ``status``."""
        answers = self.ledger.answers
        target = answers[status] + count
        try:
            wait_until(lambda: answers[status] >= target, timeout, f"{count} more writes answered {status}")
        except TimeoutError:
            raise TimeoutError(f"{count} more writes answered {status}: not within {timeout} s; the answers so far "
                               f"{dict(answers)}") from None


def round_of(value: bytes) -> int:
    trace: str = json.loads(value)["trace"]
    return int(trace.removeprefix("round "))


def check_after(faults: Faults, writers: Writers, *others: Ledger, routes: tuple[str, ...] = ()) -> None:
    """What must hold once a fault is undone: the sidecar settles (nothing pending, parked or held); per key the
    topic's values never go back to an older round, its last value is the last one accepted, and none older than
    the last one acknowledged; Connect shows its connector in the state it was last asked for; and the sidecar
    answers every route as Connect does."""
    wait_until(lambda: faults.metric("status_retry_queue_pending") == 0 and faults.metric("status_parked_updates") == 0
               and faults.metric("status_partitions_held") == 0, SETTLE_S, "the sidecar settled")
    faults.toggled()
    faults.connect.wait_for_status(CONNECTOR, all_in(faults.connector_state, 2), faults.connector_state, SETTLE_S)
    rounds: dict[bytes, list[int]] = collections.defaultdict(list)
    ledgers = [writers.ledger, *others]
    written = {key for ledger in ledgers for key in ledger.accepted}
    for key, value in faults.kafka.records(faults.topic):
        if key in written:
            assert value is not None, f"a tombstone for {key!r}"
            rounds[key].append(round_of(value))
    for ledger in ledgers:
        assert ledger.acknowledged, "no write was acknowledged at all"
        for key, last in ledger.accepted.items():
            found = rounds[key]
            went_back = [(a, b) for a, b in itertools.pairwise(found) if b < a]
            assert not went_back, f"{key!r}: an older value overwrote a newer one: {went_back} in {found}"
            assert found, f"{key!r} is not in the topic"
            assert found[-1] == last, f"{key!r}: the topic ends at round {found[-1]}, the last accepted is {last}"
            assert found[-1] >= ledger.acknowledged.get(key, 0)
    checked = [f"/connectors/{name}/status" for name in [CONNECTOR, *writers.connectors]]
    checked += [f"/connectors/{CONNECTOR}/tasks/{task}/status" for task in range(2)]
    same_answers(faults.connect.request, faults.sidecar.request, [*checked, *routes, "/connectors?expand=status"])


def test_two_brokers_stopped_hold_the_partitions_until_they_return(cluster: Faults) -> None:
    """With one replica left of three (min.insync.replicas=2) the brokers refuse every write: the sidecar holds
    every partition and probes them, one probe at a time, and releases them when the brokers return."""
    kafka = cluster.kafka
    probes = cluster.metric("status_retry_probes_total")
    with Writers(cluster.sidecar, "replicas") as writers:
        writers.wait_for_answers(3, 200)
        kafka.stop_broker(2)
        kafka.stop_broker(3)
        cluster.toggle_connector()
        wait_until(lambda: cluster.metric("status_partitions_held") == PARTITIONS, 30, "every partition held")
        wait_until(lambda: cluster.metric("status_retry_probes_total") >= probes + 5, 30, "probes")
        retries: list[dict[str, Any]] = []

        def refused_for_replicas() -> bool:
            retries[:] = cluster.sidecar.call("GET", "/retries?limit=1000")
            return any("NOT_ENOUGH_REPLICAS" in (r["last_error"] or "") for r in retries)

        wait_until(refused_for_replicas, 30, "writes refused with NOT_ENOUGH_REPLICAS on /retries")
        assert all(r["held"] for r in retries), retries
        kafka.start_brokers([2, 3])
        cluster.wait_released("every partition released")
        writers.wait_for_answers(3, 200)
    # One line when a partition is held (naming the first error: a write waiting for the replicas that went away
    # may time out first), one when it is released.
    log, partition = cluster.log(), f"of the {cluster.topic} topic is"
    assert log.count(f"{partition} held: ") == log.count(f"{partition} released after") >= PARTITIONS
    check_after(cluster, writers)


# One write at a time, this long apart, for the timing of a leader's move.
PULSE_S = 0.02


@dataclass
class Pulse:
    """A writer of one key, one write at a time: when each write was sent and answered, and whether it was
    written."""

    name: str
    write: Callable[[int], bool]
    log: list[tuple[float, float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Pulse:
        self._thread = threading.Thread(target=self._run, name=f"pulse-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop"

    def _run(self) -> None:
        round_ = 0
        while not self._stop.is_set():
            round_ += 1
            sent = time.monotonic()
            written = self.write(round_)
            self.log.append((sent, time.monotonic(), written))
            self._stop.wait(PULSE_S)

    def written_since(self, moment: float) -> bool:
        """Whether a write sent at or after ``moment`` was written."""
        return any(written and sent >= moment for sent, _, written in list(self.log))

    def usual_time(self, moment: float) -> float:
        """The median time a write took before ``moment``."""
        return statistics.median(answered - sent for sent, answered, written in list(self.log)
                                 if written and answered < moment)

    def longest_gap(self, moment: float) -> float:
        """The longest time between two successive successful answers, the second after ``moment``: how long this
        writer saw no write succeed across a fault at ``moment`` (one write's time and PULSE_S included)."""
        answers = [answered for _, answered, written in list(self.log) if written]
        return max(b - a for a, b in itertools.pairwise(answers) if b > moment)


def key_in(partition: int, prefix: str) -> str:
    """A connector name whose status key Java's partitioner puts in ``partition``."""
    return next(name for n in range(1000)
                if murmur2(connector_key(name := f"{prefix}-{n}").encode(), PARTITIONS) == partition)


def sidecar_pulse(faults: Faults, connector: str, ledger: Ledger) -> Pulse:
    """Connector status writes through the sidecar, each waiting (bounded) until it is written."""
    key = connector_key(connector).encode()

    def write(round_: int) -> bool:
        status = {"state": "RUNNING", "worker_id": "pulse:8083", "generation": 1, "trace": f"round {round_}"}
        return ledger.note([key], round_, faults.sidecar.request(
            "PUT", f"/connectors/{connector}/status?wait=true&timeout_ms=60000", status))

    return Pulse("sidecar", write)


def producer_pulse(faults: Faults, connector: str) -> Pulse:
    """The same writes from a plain confluent-kafka producer with librdkafka's defaults (its own retries, KIP-951
    included) and Java's partitioner, each flushed before the next."""
    producer = Producer({"bootstrap.servers": faults.kafka.bootstrap_servers, "partitioner": "murmur2_random"})
    key = connector_key(connector).encode()

    def write(round_: int) -> bool:
        errors: list[object] = []
        value = encode_status(State.RUNNING, "plain:8083", 1, f"round {round_}")
        producer.produce(faults.topic, value, key, on_delivery=lambda error, _: errors.append(error))
        producer.flush(60)
        return errors == [None]

    return Pulse("producer", write)


@pytest.mark.parametrize("signal", ["SIGKILL", "SIGTERM"])
def test_the_leader_of_a_status_partition_killed(cluster: Faults, signal: str,
                                                 record_property: Callable[[str, object], None]) -> None:
    """KIP-951's path: the partition's writes move to the new leader, after a crash (SIGKILL: the controller moves
    the partition once the broker's session has expired) or a clean shutdown (SIGTERM: the broker hands its
    partitions over first and answers NOT_LEADER_OR_FOLLOWER with the new leader). Writers of one write at a time
    to that partition, through the sidecar (until ?wait=true answers 200: written and read back) and through a
    plain producer beside it (until its delivery report), each saw no write succeed for a while around the signal:
    the longest such time of each is printed and recorded, with each one's usual time for a write before the
    signal and the time until the metadata showed the partition led elsewhere (figures, not asserted)."""
    kafka = cluster.kafka
    leader, partition = cluster.quiet_broker()
    name = signal.lower()
    side, plain = key_in(partition, f"{name}-sidecar"), key_in(partition, f"{name}-producer")
    ledger = Ledger()
    with Writers(cluster.sidecar, name) as writers, sidecar_pulse(cluster, side, ledger) as ours, \
            producer_pulse(cluster, plain) as theirs:
        pulses = (ours, theirs)
        writers.wait_for_answers(3, 200)
        wait_until(lambda: all(pulse.written_since(0) for pulse in pulses), 30, "pulses writing")
        killed = time.monotonic()
        (kafka.kill_broker if signal == "SIGKILL" else kafka.stop_broker)(leader)
        cluster.toggle_connector()
        wait_until(lambda: cluster.leader(partition) not in (leader, -1), 60,
                   f"partition {partition} led by another broker than {leader}", interval=0.05)
        moved = time.monotonic() - killed
        wait_until(lambda: all(pulse.written_since(killed) for pulse in pulses), 60,
                   f"a write after the {signal} from every pulse")
        writers.wait_for_answers(3, 200)
    figures = {"partition led elsewhere (metadata)": moved,
               "sidecar ?wait=true: longest without a 200": ours.longest_gap(killed),
               "sidecar ?wait=true: usual time before": ours.usual_time(killed),
               "plain producer: longest without a delivery": theirs.longest_gap(killed),
               "plain producer: usual time before": theirs.usual_time(killed)}
    print(f"{signal} of the leader, seconds:", {k: round(v, 3) for k, v in figures.items()})
    for what, seconds in figures.items():
        record_property(f"{signal}: {what} (s)", seconds)
    kafka.start_broker(leader)
    check_after(cluster, writers, ledger, routes=(f"/connectors/{side}/status", f"/connectors/{plain}/status"))


def test_every_broker_restarted(cluster: Faults) -> None:
    """Every broker stopped at once, then started again: every partition is held, the writers' waits run out
    (504) while the sidecar keeps their writes, and everything goes out when the brokers are back."""
    kafka = cluster.kafka
    brokers = [node.node_id for node in kafka.brokers]
    with Writers(cluster.sidecar, "restarted") as writers:
        writers.wait_for_answers(3, 200)
        cluster.toggle_connector()
        stopping = [threading.Thread(target=kafka.stop_broker, args=(n,)) for n in brokers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join(60)
        wait_until(lambda: cluster.metric("status_partitions_held") == PARTITIONS, 30, "every partition held")
        writers.wait_for_answers(2, 504)
        kafka.start_brokers(brokers)
        cluster.wait_released("every partition released")
        writers.wait_for_answers(3, 200)
    assert "no longer exists" not in cluster.log()  # the topic was never taken for lost
    check_after(cluster, writers)


def test_a_broker_paused_then_resumed(cluster: Faults) -> None:
    """A leader that hangs (SIGSTOP: its connections stay open, nothing is answered) is fenced by the controller
    and its partitions move; while it stays paused, the sidecar's writes to them are acknowledged and read back
    from the new leaders (each writer's round covers every partition)."""
    kafka = cluster.kafka
    broker, partition = cluster.quiet_broker()
    process = kafka.broker(broker).process
    assert process is not None
    with Writers(cluster.sidecar, "sigstop") as writers:
        writers.wait_for_answers(3, 200)
        process.pause()
        try:
            cluster.toggle_connector()
            wait_until(lambda: cluster.leader(partition) not in (broker, -1), 60,
                       f"partition {partition} led by another broker than {broker}")
            # The clients' requests in flight to the paused broker go unanswered until they time out.
            writers.wait_for_answers(3, 200, timeout=HUNG_BROKER_S)
        finally:
            process.resume()
        kafka.wait_in_sync([cluster.topic])
        writers.wait_for_answers(3, 200)
    check_after(cluster, writers)


def test_a_black_holed_broker(cluster: Faults) -> None:
    """The network between the clients and one broker drops everything, while the broker goes on leading and
    replicating: the clients see time-outs, not errors, and only the partitions it leads are held."""
    kafka = cluster.kafka
    broker, _ = cluster.quiet_broker()
    proxy = kafka.broker(broker).proxy
    assert proxy is not None
    led = [n for n, p in kafka.partitions(cluster.topic).items() if p.leader == broker]
    with Writers(cluster.sidecar, "blackhole") as writers:
        writers.wait_for_answers(3, 200)
        proxy.set_fault(Fault.BLACKHOLE)
        try:
            cluster.toggle_connector()
            wait_until(lambda: cluster.metric("status_partitions_held") == len(led), 60,
                       f"the partitions {broker} leads held ({led})")
            assert re.search(f"of the {cluster.topic} topic is held: _(MSG_)?TIMED_OUT", cluster.log())
        finally:
            proxy.set_fault(Fault.NONE)
        cluster.wait_released("every partition released")
        writers.wait_for_answers(3, 200)
    check_after(cluster, writers)


def move_every_leader_and_back(faults: Faults, writers: Writers) -> None:
    """Every broker restarted in turn while ``writers`` write: every partition's leader moves, and moves back, and the
    sidecar's clients follow, and hold their leader epochs, above a new topic's."""
    kafka = faults.kafka
    for node in kafka.brokers:
        kafka.stop_broker(node.node_id)
        kafka.start_broker(node.node_id)
        kafka.wait_in_sync([faults.topic, faults.connect.config_topic, "__consumer_offsets"])
    faults.wait_released("every partition released")
    writers.wait_for_answers(3, 200)


def create_topic_again(faults: Faults) -> None:
    """Delete the status topic and create it again (compacted, as Connect creates it). With Kafka's
    auto.create.topics.enable (these brokers'), a running worker's clients create a deleted topic again at once, with
    the brokers' defaults (one partition, not compacted): the worker is held still (SIGSTOP) while the topic is created
    again as a status topic, as a cluster without auto-creation, or a topic operator, has it."""
    kafka, topic = faults.kafka, faults.topic
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    worker = faults.connect.workers[0].process
    worker.pause()
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
        wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 60, "the status topic gone")
        kafka.create_topic(topic, PARTITIONS, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"})
    finally:
        worker.resume()
    kafka.wait_in_sync([topic])


def test_the_status_topic_deleted_and_created_again(cluster: Faults) -> None:
    """The status topic deleted and created again under the same name (an operator's slip, a topic operator that
    restores it) while nothing writes, after its partitions' leaders have moved. Connect's worker then writes its new
    statuses to the new topic and reads them back (its clients follow the topic's new id), and the sidecar answers its
    status routes as Connect does, though nothing it writes tells it that the topic's log started over; then the
    sidecar's own writes are acknowledged and read back. librdkafka's clients do not follow a new topic id (its issue
    #4898: a producer from before times out every write to a partition whose leader moved, for good; a reader from
    before fetches some partitions in vain): the sidecar renews them (its topic-id reading, every 10 s)."""
    with Writers(cluster.sidecar, "recreated") as before:
        move_every_leader_and_back(cluster, before)
    create_topic_again(cluster)
    cluster.toggle_connector()
    cluster.toggled()
    cluster.connect.wait_for_status(CONNECTOR, all_in(cluster.connector_state, 2), cluster.connector_state, SETTLE_S)
    routes = [f"/connectors/{CONNECTOR}/status", *(f"/connectors/{CONNECTOR}/tasks/{task}/status" for task in range(2))]
    same_answers(cluster.connect.request, cluster.sidecar.request, routes)
    with Writers(cluster.sidecar, "recreated-after") as writers:
        writers.wait_for_answers(3, 200, timeout=SETTLE_S)
    check_after(cluster, writers)
