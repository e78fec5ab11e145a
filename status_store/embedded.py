"""The embedded broker: librdkafka's in-memory mock cluster, for a zero-configuration first try."""

from __future__ import annotations

import logging

from .config import StoreConfig
from .librdkafka import MockCluster

log = logging.getLogger(__name__)


def start_embedded_broker(config: StoreConfig) -> MockCluster:
    """Start a one-broker in-memory cluster on 127.0.0.1 holding the status topic."""
    cluster = MockCluster(brokers=1)
    partitions = config.partitions if config.partitions > 0 else 5
    cluster.create_topic(config.topic, partitions, replication_factor=1)
    log.warning(
        "No bootstrap.servers configured: running an EMBEDDED in-memory Kafka broker at %s. It is NOT "
        "durable: every status is lost when this process exits. Set bootstrap.servers for real use.",
        cluster.bootstrap_servers,
    )
    return cluster
