"""The embedded broker: librdkafka's in-memory mock cluster, for a zero-configuration first try."""

from __future__ import annotations

from ..config import ExhaustedAction, StoreConfig
from .mock_cluster import MockCluster


def start_embedded_broker(config: StoreConfig) -> MockCluster:
    """Start a one-broker in-memory cluster on 127.0.0.1 holding every topic the configuration uses.

    The mock broker has no CreateTopics API, so the status topic, the history topic, the
    dead-letter topic and Connect's config topic are created here, before anyone looks for them.
    The config topic has one partition, as Connect requires of it (Connect workers using the
    embedded broker write it; status-store only reads it).
    """
    cluster = MockCluster(brokers=1)
    partitions = config.partitions if config.partitions > 0 else 5
    dead_letters = config.dead_letter_topic if config.exhausted_action is ExhaustedAction.DEAD_LETTER else None
    for topic in (config.topic, config.history_topic, dead_letters):
        if topic is not None:
            cluster.create_topic(topic, partitions, replication_factor=1)
    if config.config_topic is not None:
        cluster.create_topic(config.config_topic, 1, replication_factor=1)
    return cluster
