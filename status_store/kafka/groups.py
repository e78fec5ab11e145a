"""A consumer group's members as the group coordinator lists them (DescribeGroups): for the Connect group, whose
members' metadata carries each worker's URL (``status_store/act/workers.py`` reads it).

confluent-kafka's ``describe_consumer_groups`` refuses a group of another protocol type than ``consumer`` ("is not
a consumer group (connect)", checked against Apache Kafka 4.4.0 and Connect 4.4.0); ``AdminClient.list_groups``,
deprecated but present, describes any group and hands each member's raw metadata.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .client_log import client_logging
from .settings import JAVA_DEFAULTS, off_loop

CONNECT_PROTOCOL_TYPE = "connect"


@dataclass(frozen=True, slots=True)
class GroupRead:
    """One read of a group: its state (``Stable``, ``PreparingRebalance``, ``Empty``, ``Dead``...), protocol type and
    members as (member id, metadata); a group that does not exist reads as ``Dead`` without members."""

    state: str
    protocol_type: str
    members: tuple[tuple[str, bytes], ...]


def admin_client(bootstrap_servers: str, client_configs: Mapping[str, str]) -> AdminClient:
    """An admin client with the store's client settings (security) and log."""
    settings: dict[str, Any] = {**JAVA_DEFAULTS, **client_configs, "bootstrap.servers": bootstrap_servers,
                                "client.id": client_configs.get("client.id", "status-store-workers"),
                                **client_logging(bootstrap_servers)}
    return AdminClient(settings)


async def read_group(admin: AdminClient, group: str, timeout: float) -> GroupRead:
    """The group's state and members, off the event loop; ``KafkaException`` when it cannot be read."""
    return await off_loop(functools.partial(_read, admin, group, timeout), "status-store-group")


def _read(admin: AdminClient, group: str, timeout: float) -> GroupRead:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # list_groups: the one call that describes any group
        found = [g for g in admin.list_groups(group, timeout=timeout) if g.id == group]
    if not found:
        return GroupRead("Dead", "", ())
    described = found[0]
    if described.error is not None:
        raise KafkaException(described.error)
    return GroupRead(described.state or "", described.protocol_type or "",
                     tuple((m.id or "", bytes(m.metadata or b"")) for m in described.members))
