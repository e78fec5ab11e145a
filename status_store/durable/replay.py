"""The spool's replay at start: what an earlier run accepted and did not see written, sent as the retries it is.

An update whose key another writer wrote after it was accepted (or whose connector was deleted since) is
not written: a compare-and-set on what was read of the key when it was accepted (the offset of its last
record, a task's connector's last tombstone) drops it, counted as superseded. An update the topic already
holds is forgotten. The rest go through Connect's rules again, as the writes they were.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..connect import codec
from ..connect.codec import connector_status, task_status
from ..connect.model import ConnectorKey, Status, TaskId, TaskKey, parse_key
from ..retry.updates import StatusUpdate, UpdateKind
from .spool import Spool, SpooledUpdate

log = logging.getLogger(__name__)

# Replayed updates the topic made obsolete are logged one by one up to this many, then summed up.
_LOG_LINES = 20


class ReadKeys(Protocol):
    """What the store has read of the status topic's keys."""

    def holds(self, key: str, value: bytes | None) -> bool:
        """Whether the key's cached status is this value (decoded, as every reader sees it)."""

    def last_offset(self, key: str) -> int:
        """The offset of the key's last record (read, or our own acknowledged write); -1: none."""

    def deleted_at(self, connector: str) -> int:
        """The offset of the connector's last tombstone read (it deleted its tasks too); -1: none."""


# Write a connector or task status as ``put`` (or ``put_safe``) would; None when it is dropped.
SendStatus = Callable[[Status, bool], StatusUpdate | None]
# Write a record as it is (a topic status, a tombstone).
Submit = Callable[[str, bytes | None, UpdateKind], StatusUpdate]
# Settle an update that is not to be written as superseded (reported like any other outcome).
Supersede = Callable[[StatusUpdate, str], StatusUpdate]


def replay(spool: Spool, read: ReadKeys, send_status: SendStatus, submit: Submit, supersede: Supersede) -> None:
    """Submit what the spool kept from an earlier run (see the module's docstring)."""
    spooled = spool.pending()
    if spooled:
        log.warning("Replaying %d status update(s) that the spool %s kept from an earlier run",
                    len(spooled), spool.path)
    dropped = 0
    for item in spooled:
        if item.base is not None and read.holds(item.key, item.value):
            log.debug("Not replaying the update of %s: the topic holds it already", item.key)
            spool.forget(item.key)
            continue
        reason = conflict(item, read)
        if reason is not None:
            dropped += 1
            if dropped <= _LOG_LINES:
                log.warning("Not replaying the spooled update of %s: %s", item.key, reason)
            supersede(StatusUpdate(item.key, item.value, UpdateKind(item.kind), safe=item.safe), reason)
            continue
        status = _status(item)
        if status is None:
            submit(item.key, item.value, UpdateKind(item.kind))
        elif send_status(status, item.safe) is None:
            spool.forget(item.key)
    if dropped:
        log.warning("%d spooled update(s) were not replayed: the topic has newer records of their keys "
                    "(counted in status_update_superseded_total)", dropped)
    # On disk before the store serves writes, and what keeps the spool from them (no room for its reserve) found now.
    spool.commit()


def conflict(item: SpooledUpdate, read: ReadKeys) -> str | None:
    """Why a spooled update must not be written now, or None: compare-and-set on what was read of its key
    when it was accepted (rows of an older spool format kept nothing to compare: Connect's rules decide)."""
    if item.base is None:
        return None
    parsed = parse_key(item.key)
    if item.deleted_base is not None and isinstance(parsed, TaskKey):
        deleted = read.deleted_at(parsed.connector)
        if deleted > item.deleted_base:
            return (f"connector {parsed.connector!r} was deleted (a tombstone at offset {deleted}) after it was "
                    "accepted")
    current = read.last_offset(item.key)
    # At or below what was read then: nothing newer (a log that started over holds nothing newer either).
    if current <= item.base or (item.sent is not None and read.holds(item.key, item.sent)):
        return None
    return (f"another writer wrote the key after it was accepted (its last record is at offset {current}, "
            f"it was at {item.base})")


def _status(item: SpooledUpdate) -> Status | None:
    """The connector or task status a spooled record holds; None for a tombstone or a topic record."""
    parsed = parse_key(item.key)
    if item.value is None or not isinstance(parsed, ConnectorKey | TaskKey):
        return None
    value = codec.decode_status(item.value)
    if isinstance(parsed, ConnectorKey):
        return connector_status(parsed.connector, value)
    return task_status(TaskId(parsed.connector, parsed.task), value)


def tokens(read: ReadKeys) -> Callable[[str], tuple[int, int]]:
    """What the spool keeps of a key when an update is accepted: its last record's offset, and for a task its
    connector's last tombstone's (-1: none)."""
    def of(key: str) -> tuple[int, int]:
        parsed = parse_key(key)
        return read.last_offset(key), read.deleted_at(parsed.connector) if isinstance(parsed, TaskKey) else -1
    return of
