"""The fault suite's shared pieces: stores under several exhausted-actions fed the same stream of updates,
and the checks every fault scenario ends with.

Why several stores at once: an outage costs the same wall time whatever the number of stores that live
through it, so one outage serves park + spool and drop side by side (each on its own topic).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from status_store.connect.codec import encode_status
from status_store.connect.model import State, TaskId, TaskStatus, task_key
from status_store.errors import ErrorKind, classify
from status_store.retry.updates import Outcome, Result, StatusUpdate
from status_store.store import StatusStore

from .conftest import StoreFactory
from .helpers import eventually, last_values
from .test_exhausted import assert_counters_add_up, counts

# Retries that give up within about 0.7 s while the brokers are gone (two 300 ms attempts and a backoff),
# so that park and drop act even in a 2 s outage; the probe of parked updates runs every second.
QUICK = {"status.storage.retry.max.retries": "1", "status.storage.retry.delivery.timeout.ms": "300",
         "status.storage.retry.initial.backoff.ms": "50", "status.storage.retry.max.backoff.ms": "200",
         "sidecar.shutdown.timeout.ms": "2000"}
STATES = (State.RUNNING, State.PAUSED, State.FAILED)
# After a long outage librdkafka may wait up to reconnect.backoff.max.ms (10 s) before it reconnects.
SETTLE = 60.0


@dataclass(frozen=True)
class Policy:
    """An exhausted-action, with or without the spool."""

    name: str
    action: str
    spooled: bool

    @property
    def keeps_latest(self) -> bool:
        """Park with a spool: no latest value may be lost, whatever the fault."""
        return self.action == "park" and self.spooled

    def settings(self, spool_dir: Path) -> dict[str, str]:
        """The store properties of this policy; a spool lives in ``spool_dir``."""
        settings = {"status.storage.retry.exhausted.action": self.action}
        if self.spooled:
            settings["status.storage.spool.path"] = str(spool_dir / f"{self.name}.db")
        return settings


PARK_SPOOL = Policy("park-spool", "park", spooled=True)
DROP = Policy("drop", "drop", spooled=False)
POLICIES = (PARK_SPOOL, DROP)


class Outcomes:
    """A retry listener tallying outcomes and retries by their last Kafka error's name."""

    def __init__(self) -> None:
        self.finished: collections.Counter[tuple[Result, str | None]] = collections.Counter()
        self.retried: collections.Counter[str | None] = collections.Counter()
        # A parked update sent again is a new update: from each parked update to the one that carries its value on.
        self.sent_again: dict[int, StatusUpdate] = {}

    def on_submitted(self, update: StatusUpdate) -> None:
        pass

    def on_retry(self, update: StatusUpdate) -> None:
        self.retried[update.last_error.name if update.last_error is not None else None] += 1

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        self.finished[outcome.result, outcome.error.name if outcome.error is not None else None] += 1

    def on_unparked(self, update: StatusUpdate, again: StatusUpdate | None, reason: str) -> None:
        if again is not None:
            self.sent_again[update.number] = again

    def last_of(self, update: StatusUpdate) -> StatusUpdate:
        """The update that carried this one's value last: itself, or the last one sent again after parking."""
        seen = 0
        while update.number in self.sent_again and seen <= len(self.sent_again):
            update, seen = self.sent_again[update.number], seen + 1
        return update

    def failed(self, error: str) -> int:
        """Updates that failed for good with this last error."""
        return self.finished[Result.FAILED, error]


@dataclass
class Subject:
    """One store under test, its metrics' registry, and the latest update submitted for each key."""

    policy: Policy
    store: StatusStore
    registry: CollectorRegistry
    outcomes: Outcomes
    latest: dict[bytes, tuple[StatusUpdate, bytes]] = field(default_factory=dict)

    def put_round(self, keys: Iterable[int], round_: int) -> None:
        """One new value for each key; the round number makes every value distinct."""
        for key in keys:
            status = task_status(key, round_)
            record_key, value = record(status)
            self.latest[record_key] = (self.store.put(status), value)

    def settled(self) -> bool:
        """Every update has an outcome and nothing is parked."""
        return self.store.queue.unsettled == 0 and not self.store.queue.parked()

    def written(self) -> float:
        """Updates written so far (the success counter)."""
        return counts(self.registry).get("status_update_success_total", 0)


def task_status(key: int, round_: int) -> TaskStatus:
    """Key ``key``'s value in round ``round_``: one generation throughout, so no retry is abandoned for a
    generation change (Connect's rule) and every latest value must reach the topic."""
    return TaskStatus(TaskId(f"conn-{key // 10}", key % 10), STATES[round_ % len(STATES)], "worker-1:8083", 1,
                      f"round {round_}")


def record(status: TaskStatus) -> tuple[bytes, bytes]:
    """The status's record in the topic: key and value bytes."""
    value = encode_status(status.state, status.worker_id, status.generation, status.trace)
    assert value is not None  # never DESTROYED here: no tombstone
    return task_key(status.id).encode(), value


def batch_item(status: TaskStatus) -> dict[str, object]:
    """The status as an item of ``POST /statuses``."""
    return {"kind": "task", "connector": status.id.connector, "task": status.id.task, "state": status.state.value,
            "worker_id": status.worker_id, "generation": status.generation, "trace": status.trace}


@contextlib.asynccontextmanager
async def subjects(store_factory: StoreFactory, bootstrap_servers: str, topics: Sequence[str], spool_dir: Path,
                   policies: Sequence[Policy] = POLICIES,
                   settings: Mapping[str, str] | None = None) -> AsyncIterator[list[Subject]]:
    """A started store per policy, each on its own topic, with QUICK retries unless ``settings`` say otherwise."""
    async with contextlib.AsyncExitStack() as stack:
        started = []
        for policy, topic in zip(policies, topics, strict=True):
            registry, outcomes = CollectorRegistry(), Outcomes()
            properties = {**QUICK, **policy.settings(spool_dir), **(settings or {})}
            store = await stack.enter_async_context(
                store_factory(bootstrap_servers, topic, [outcomes], registry=registry, **properties))
            started.append(Subject(policy, store, registry, outcomes))
        yield started


async def stream(fleet: Sequence[Subject], keys: Iterable[int], rounds: Iterable[int], interval: float) -> None:
    """Rounds of updates to every store, ``interval`` seconds apart."""
    keys = list(keys)
    for round_ in rounds:
        for subject in fleet:
            subject.put_round(keys, round_)
        await asyncio.sleep(interval)  # the stream's pace: the traffic under the fault, not a wait for a state


async def stream_until_written(fleet: Sequence[Subject], keys: Iterable[int], first_round: int,
                               interval: float, timeout: float = SETTLE) -> int:
    """Keep streaming until every store has had a write acknowledged since this call (Kafka takes writes
    again); bounded. Returns the next round number."""
    before = [subject.written() for subject in fleet]
    rounds = itertools.count(first_round)
    # The stream is cancelled only between rounds (in its pause), so the next number of ``rounds`` was never put.
    streaming = asyncio.create_task(stream(fleet, keys, rounds, interval))
    try:
        await eventually(lambda: all(subject.written() > seen for subject, seen in zip(fleet, before, strict=True)),
                         timeout)
    finally:
        streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await streaming
    return next(rounds)


async def settle(fleet: Sequence[Subject], timeout: float = SETTLE) -> None:
    """Wait, bounded, until every update of every store has an outcome and nothing stays parked."""
    await eventually(lambda: all(subject.settled() for subject in fleet), timeout)


def check(subject: Subject) -> dict[bytes, StatusUpdate]:
    """The checks that end every scenario; returns the keys whose latest value is not the topic's last one.

    The counters add up (success + failure + superseded = submitted). Under park with a spool the topic's
    last value of every key is the latest one submitted, unless Kafka refused that value with a fatal error
    (never parked: retrying cannot help), also when the value was parked first and met that error when sent
    again; under the other policies every key whose latest value is missing has a failed outcome, counted
    among the failures: no loss is silent.
    """
    assert_counters_add_up(subject.registry)
    values = last_values(subject.store)
    missing = {key: update for key, (update, value) in subject.latest.items() if values.get(key) != value}
    if subject.policy.keeps_latest:
        lost = [key for key, update in missing.items() if not _refused(subject.outcomes.last_of(update))]
        assert not lost, f"{subject.policy.name}: {len(lost)} latest value(s) lost, e.g. {lost[0]!r}"
    silent = {key: update.outcome for key, update in missing.items()
              if update.outcome is None or update.outcome.result is not Result.FAILED}
    assert not silent, f"{subject.policy.name}: latest values lost without a counted failure: {silent}"
    assert counts(subject.registry)["status_update_failure_total"] >= len(missing)
    return missing


def _refused(update: StatusUpdate) -> bool:
    """Failed for good because Kafka refused the value itself (a fatal error)."""
    outcome = update.outcome
    return (outcome is not None and outcome.result is Result.FAILED and outcome.error is not None
            and classify(outcome.error) is ErrorKind.FATAL)
