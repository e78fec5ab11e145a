"""Setting up a topic: creating it when missing, and refusing one whose cleanup policy would lose data."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from ..errors import KafkaUnavailableError, TopicSetupError
from .client_log import client_logging, is_embedded
from .security_failures import security_failures
from .settings import list_topics

log = logging.getLogger(__name__)
# How often a client's log lines are served while a first request waits for the brokers.
LOG_POLL_S = 0.5


async def topic_exists(bootstrap_servers: str, client_configs: Mapping[str, str], topic: str, timeout: float) -> bool:
    """Whether the cluster has the topic (a Metadata request that never creates it)."""
    # Without allow.auto.create.topics=false, a Metadata request for a missing topic may create it.
    logging_settings = client_logging(bootstrap_servers)
    admin = AdminClient({**client_configs, "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False,
                         **logging_settings})
    request = asyncio.ensure_future(list_topics(admin, topic, timeout))
    try:
        # The client's log lines are served while it waits: a refused login or certificate is named at once.
        while not (await asyncio.wait((request,), timeout=LOG_POLL_S))[0]:
            admin.poll(0)
        metadata = request.result()
    except KafkaException as e:
        admin.poll(0)  # serves the client's log lines: the last one says why (e.g. "Connection refused")
        problem = security_failures.current()
        reason = (problem.explanation if problem is not None else None) or logging_settings["logger"].last_problem \
            or e.args[0].str()
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap_servers} within {timeout:g} s ({reason})") from None
    found = metadata.topics.get(topic)
    return found is not None and found.error is None


async def ensure_topic(
    bootstrap_servers: str,
    client_configs: Mapping[str, str],
    topic: str,
    partitions: int,
    replication_factor: int,
    topic_configs: Mapping[str, str],
    timeout: float,
    compacted: bool = True,
    role: str = "status topic",
) -> None:
    """Create the topic if missing; refuse one whose cleanup policy would lose data.

    The status topic (``compacted``) follows Connect: a topic that exists with any cleanup policy but
    exactly ``compact`` would lose statuses, so it is an error. An append-only topic (history, dead
    letters) must not be compacted, or all but the last event per key go. A broker that cannot
    describe configs is trusted, with a warning.
    """
    wanted = "compact" if compacted else "delete"
    admin = AdminClient({**client_configs, "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False,
                         **client_logging(bootstrap_servers)})
    if not await topic_exists(bootstrap_servers, client_configs, topic, timeout):
        new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                             config={**topic_configs, "cleanup.policy": wanted})
        future = admin.create_topics([new_topic], request_timeout=timeout)[topic]
        try:
            await asyncio.wrap_future(future)
            log.info("Created %s %s (%d partitions, replication factor %d, cleanup.policy=%s)",
                     role, topic, partitions, replication_factor, wanted)
            return
        except KafkaException as e:
            error = e.args[0]
            if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicSetupError(
                    f"{role} {topic!r} does not exist and could not be created: {error.str()}. "
                    f"Create it with cleanup.policy={wanted}, or grant this client CreateTopics."
                ) from None
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = await asyncio.wrap_future(admin.describe_configs([resource], request_timeout=timeout)[resource])
    except KafkaException as e:
        # Expected of an embedded broker (it has no DescribeConfigs); worth a warning from a real cluster.
        log.log(logging.DEBUG if is_embedded(bootstrap_servers) else logging.WARNING,
                "Cannot describe the configs of %s %s (%s); assuming cleanup.policy=%s", role, topic, e.args[0].str(),
                wanted)
        return
    # A broker may leave out keys still at their defaults; Kafka's default policy is "delete".
    entry = entries.get("cleanup.policy")
    policy = entry.value if entry is not None else "delete"
    if compacted and policy != "compact":
        raise TopicSetupError(
            f"{role} {topic!r} has cleanup.policy={policy}, but it must be exactly 'compact' or "
            f"statuses are lost. Fix: kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
            f"--add-config cleanup.policy=compact (or set status.storage.topic to another topic)."
        )
    if not compacted and "compact" in policy:
        raise TopicSetupError(
            f"{role} {topic!r} has cleanup.policy={policy}, but it must not be compacted: compaction keeps only "
            f"the last record per key and the events before it are lost. Use a topic with cleanup.policy=delete."
        )
