"""What becomes of a status update after its last retry, and of a store whose writes keep failing.

``AfterLastRetry`` listens to the status queue: an update that failed for good is parked (by the queue as it
settles, at this listener's request: ``RetryQueue.park_after_last_retry``; its value waits in its partition and is sent
again once the partition takes writes) or dead-lettered, as ``status.storage.retry.exhausted.action`` says, and only
then is its spool row settled (kept while the update is parked or its dead letter unwritten); while writes fail, it
checks now and then that the status topic still exists and creates it again if the cluster lost it; and it tells the
store the offset of each of its own writes (what the spool's replay compares with).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..config import ExhaustedAction, StoreConfig
from ..errors import ErrorKind, classify
from ..kafka.topics import ensure_topic, topic_exists
from ..retry.queue import RetryQueue
from ..retry.updates import Outcome, Result, RetryListener, StatusUpdate
from .history import AppendLog, dead_letter
from .spool import Spool

log = logging.getLogger(__name__)

# While writes fail, whether the status topic still exists is checked at most this often.
TOPIC_CHECK_INTERVAL_S = 10.0


@dataclass(slots=True)
class ExhaustedStats:
    """What became of updates after their last retry (``status.storage.retry.exhausted.action``)."""

    parked: int = 0
    dead_lettered: int = 0
    dead_letter_failed: int = 0


class AfterLastRetry(RetryListener):
    """The status queue's listener for failed writes: parks or dead-letters exhausted updates, re-creates a lost
    status topic, and reports each written update's offset (``written``)."""

    def __init__(self, config: StoreConfig, bootstrap_servers: str, queue: RetryQueue, dead_letters: AppendLog | None,
                 spool: Spool | None, written: Callable[[str, int], None]) -> None:
        """Decides for ``queue``'s updates (its listener: ``queue.subscribe``); ``written(key, offset)``: told of each
        write of the queue that Kafka acknowledged."""
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        self.stats = ExhaustedStats()
        self._queue = queue
        self._dead_letters = dead_letters
        self._spool = spool
        self._written = written
        self._topic_check: asyncio.Task[None] | None = None
        self._next_topic_check = 0.0
        if config.exhausted_action is ExhaustedAction.PARK:
            # The queue parks such an update as it settles, and says so in its outcome (``Outcome.parked``).
            queue.park_after_last_retry()

    def stop(self) -> None:
        """Cancel a topic check in progress."""
        if self._topic_check is not None:
            self._topic_check.cancel()

    def cut_short_at_stop(self, unsettled: list[StatusUpdate], spooled: bool) -> list[StatusUpdate]:
        """What a stop leaves unwritten, logged: the updates the queue could not settle in time, and the parked
        ones. ``spooled``: a spool has them on disk, and the next start replays them; otherwise they are lost.
        Returns the unsettled updates, and the parked ones too when they are lost."""
        parked = self._queue.parked()
        if spooled:
            if parked:
                log.warning("Stopped with %d parked status update(s); the spool keeps them for the next start",
                            len(parked))
            if unsettled:
                log.warning("Stopped with %d status update(s) not yet written to Kafka; the spool keeps them: the "
                            "next start replays them: %s", len(unsettled), _some_keys(unsettled))
            return unsettled
        lost = [*unsettled, *parked]
        if lost:
            why = "the spool could not be written" if self._spool is not None else "no spool keeps them"
            log.error("Stopped with %d status update(s) not durable (%s): they are lost: %s", len(lost), why,
                      _some_keys(lost))
        return lost

    def _keeps(self, update: StatusUpdate, outcome: Outcome) -> bool:
        """Whether the spool keeps a failed update's row: parked, or until its dead letter is written."""
        return outcome.parked or (
            self._dead_letters is not None and outcome.result is Result.FAILED and not outcome.stopped)

    def on_retry(self, update: StatusUpdate) -> None:
        self._write_failed()

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        delivery = outcome.delivery
        if delivery is not None:
            self._written(update.key, delivery.offset)
        elif outcome.result is Result.FAILED and not outcome.stopped:
            self._write_failed()
            self._exhausted(update, outcome)
        # After the decision: the spool row of a parked update, or of one whose dead letter is still to be
        # written, stays.
        if self._spool is not None:
            self._spool.settled(update, outcome, keep=not outcome.ok and self._keeps(update, outcome))

    def _exhausted(self, update: StatusUpdate, outcome: Outcome) -> None:
        """An update failed for good (not because the store stopped): apply the configured action."""
        error = outcome.error
        if (self.config.exhausted_action is ExhaustedAction.PARK and error is not None
                and classify(error) is not ErrorKind.FATAL):
            if outcome.parked:
                self.stats.parked += 1
                log.debug("Parked the status update of %s: it is sent again once its partition takes writes",
                          update.key)
        elif self._dead_letters is not None:
            record = dead_letter(update, outcome, self.config.name)
            if not self._dead_letters.append(update.key, record, lambda result: self._dead_lettered(update, result)):
                self._dead_lettered(update, None)

    def _dead_lettered(self, update: StatusUpdate, outcome: Outcome | None) -> None:
        if outcome is not None and outcome.ok:
            self.stats.dead_lettered += 1
            if self._spool is not None:
                self._spool.release(update)
            return
        self.stats.dead_letter_failed += 1
        reason = outcome.reason if outcome is not None else "not queued"
        log.error("The dead letter of %s could not be written either (%s)%s", update.key, reason,
                  "; the spool keeps the update for the next start" if self._spool is not None else "")

    def _write_failed(self) -> None:
        """A write failed: now and then, check that the status topic still exists."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._topic_check is None and now >= self._next_topic_check:
            self._next_topic_check = now + TOPIC_CHECK_INTERVAL_S
            self._topic_check = loop.create_task(self._recreate_lost_topic())

    async def _recreate_lost_topic(self) -> None:
        """Create the status topic again if the cluster lost it (deleted, or a broker without durable
        storage restarted): otherwise no write could ever succeed again until a restart."""
        cfg = self.config
        try:
            if await topic_exists(self.bootstrap_servers, cfg.client_configs, cfg.topic, TOPIC_CHECK_INTERVAL_S):
                return
            log.error("The status topic %s no longer exists on the cluster (deleted, or the brokers lost it): "
                      "creating it again; statuses written before are gone from Kafka, pending and parked ones "
                      "are written again", cfg.topic)
            await ensure_topic(self.bootstrap_servers, cfg.client_configs, cfg.topic, cfg.partitions,
                               cfg.replication_factor, cfg.topic_configs, TOPIC_CHECK_INTERVAL_S)
        except Exception as e:  # unreachable brokers, refused creation: the next failed write checks again
            log.warning("Could not check or create the status topic %s: %s", cfg.topic, e)
        finally:
            self._topic_check = None


def _some_keys(updates: list[StatusUpdate]) -> str:
    """The first keys of some updates, for a log line."""
    return ", ".join(u.key for u in updates[:10]) + (", ..." if len(updates) > 10 else "")
