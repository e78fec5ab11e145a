"""Prometheus metrics of the store, fed by the retry queue's events (the core never imports this).

KIP-1278's three counters keep their names (``status-update-{retry,failure,success}-total`` become
``status_update_{retry,failure,success}_total``), with one low-cardinality label, ``kind``:
connector, task or topic. Connector names are never labels. No ``<name>_created`` series: the Python
client's default would double what a reader scans and what Prometheus stores, for no use here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .fleet.series import FleetCollector
from .retry.queue import RetryQueue
from .retry.updates import STATUS_KINDS, Outcome, Result, RetryListener, StatusUpdate
from .store import StatusStore

# A process-wide switch of the client: it covers the HTTP metrics too.
disable_created_metrics()  # type: ignore[no-untyped-call]  # the client leaves it unannotated
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_ATTEMPT_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 11, 16, 32, 64)


class StoreMetrics(RetryListener):
    """The store's metrics in one registry; a RetryListener of the store's retry queue."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, ["kind"], registry=registry)

        self.submitted = counter("status_update_submitted", "Status updates submitted to the retry queue.")
        self.retries = counter("status_update_retry",
                               "Retries of status writes (KIP-1278 status-update-retry-total).")
        self.failures = counter("status_update_failure",
                                "Status updates that failed for good: retries exhausted, time bound passed, a "
                                "fatal error, or the store stopped (KIP-1278 status-update-failure-total).")
        self.successes = counter("status_update_success",
                                 "Status updates written to Kafka (KIP-1278 status-update-success-total).")
        self.superseded = counter("status_update_superseded",
                                  "Status updates given up because a newer write of the key, a deletion or a "
                                  "generation change made them obsolete (not failures).")
        self.latency = Histogram("status_update_write_latency_seconds",
                                 "Time from submitting a status update to Kafka acknowledging it.", ["kind"],
                                 buckets=_LATENCY_BUCKETS, registry=registry)
        self.attempts = Histogram("status_update_attempts", "Attempts per settled status update.", ["kind"],
                                  buckets=_ATTEMPT_BUCKETS, registry=registry)
        self.queue_pending = Gauge("status_retry_queue_pending",
                                   "Status updates without an outcome yet (in flight, held or waiting to retry).",
                                   registry=registry)
        self.queue_waiting = Gauge("status_retry_queue_waiting_retries",
                                   "Status updates waiting for their next attempt.", registry=registry)
        self.oldest_age = Gauge("status_retry_queue_oldest_pending_age_seconds",
                                "Age of the oldest status update without an outcome (0 when none).",
                                registry=registry)
        # Children bound once: the hot path does no label look-ups.
        self._by_result: dict[tuple[str, Result], Counter] = {}
        for kind in STATUS_KINDS:
            self._by_result[kind, Result.WRITTEN] = self.successes.labels(kind)
            self._by_result[kind, Result.FAILED] = self.failures.labels(kind)
            self._by_result[kind, Result.SUPERSEDED] = self.superseded.labels(kind)
        self._submitted = {kind: self.submitted.labels(kind) for kind in STATUS_KINDS}
        self._retries = {kind: self.retries.labels(kind) for kind in STATUS_KINDS}
        self._latency = {kind: self.latency.labels(kind) for kind in STATUS_KINDS}
        self._attempts = {kind: self.attempts.labels(kind) for kind in STATUS_KINDS}

    @classmethod
    def watching(cls, store: StatusStore, registry: CollectorRegistry) -> StoreMetrics:
        """The metrics of a store not started yet, in one step: a listener of its retry queue, its queue's gauges,
        what became of exhausted updates and of the event topics' events, and the fleet's statuses as read from
        the topic, all in ``registry``."""
        metrics = cls(registry)
        store.queue.subscribe(metrics)
        metrics._watch(store.queue)
        registry.register(_StoreCollector(store))
        config = store.config
        registry.register(FleetCollector(store.cache.view, config.fleet_metrics, config.fleet_metrics_max_objects))
        return metrics

    def _watch(self, queue: RetryQueue) -> None:
        """Read the queue's gauges and the retry budget's figures from this queue at every scrape."""
        self.queue_pending.set_function(lambda: queue.unsettled)
        self.queue_waiting.set_function(lambda: queue.waiting_count)
        self.oldest_age.set_function(queue.oldest_unsettled_age)
        self.registry.register(_QueueCollector(queue))

    def on_submitted(self, update: StatusUpdate) -> None:
        self._submitted[update.kind].inc()

    def on_retry(self, update: StatusUpdate) -> None:
        self._retries[update.kind].inc()

    def on_finished(self, update: StatusUpdate, outcome: Outcome) -> None:
        self._by_result[update.kind, outcome.result].inc()
        if outcome.attempts:
            self._attempts[update.kind].observe(outcome.attempts)
        if outcome.result is Result.WRITTEN:
            # submitted_at is the event loop's clock.
            self._latency[update.kind].observe(asyncio.get_running_loop().time() - update.submitted_at)


class _StoreCollector(Collector):
    """Figures the store keeps itself, read at every scrape."""

    def __init__(self, store: StatusStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        stats = self._store.exhausted
        for name, doc, value in (
            ("status_update_parked", "Status updates parked after their last retry (exhausted.action=park).",
             stats.parked),
            ("status_update_dead_lettered", "Status updates written to the dead-letter topic after their last retry.",
             stats.dead_lettered),
            ("status_update_dead_letter_failed", "Exhausted status updates whose dead letter could not be written "
             "either (the spool, if any, keeps them).", stats.dead_letter_failed),
        ):
            yield CounterMetricFamily(name, doc, value)
        yield GaugeMetricFamily("status_parked_updates", "Status updates parked now, waiting for Kafka to take "
                                "writes again.", self._store.queue.parked_count)
        rejected = CounterMetricFamily("status_update_rejected",
                                       "Writes refused before they were accepted, by reason (queue_full: "
                                       "status.storage.retry.max.pending keys had updates pending; spool_unwritable: "
                                       "the spool could not be written).", labels=["reason"])
        rejected.add_metric(["queue_full"], self._store.queue.rejected_total)
        rejected.add_metric(["spool_unwritable"], self._store.spool_rejected_total)
        yield rejected
        errors = CounterMetricFamily("status_listener_errors",
                                     "Exceptions raised by a listener of the retry queue (spool, metrics, history) or "
                                     "by a subscriber of the status cache (listener=\"cache:<name>\": the events, "
                                     "auto-restart); the queue and the cache carried on.", labels=["listener"])
        for listener, count in sorted(self._store.queue.listener_errors.items()):
            errors.add_metric([listener], count)
        for subscriber, count in sorted(self._store.cache.subscriber_errors.items()):
            errors.add_metric([f"cache:{subscriber}"], count)
        yield errors
        spool = self._store.spool
        if spool is not None:
            yield GaugeMetricFamily("status_spool_writable", "1 while the spool takes writes; 0 from a commit that "
                                    "could not be written (a full disk, an I/O error, a lock) until one is, during "
                                    "which writes are refused.", value=int(spool.writable))
            yield GaugeMetricFamily("status_spool_unwritten_changes", "Changes to the spool kept in memory until a "
                                    "commit writes them (normally 0 between turns of the event loop).",
                                    value=spool.unwritten_changes)
            yield GaugeMetricFamily("status_spool_losses_unacknowledged", "Starts that found accepted writes missing "
                                    "from the spool (its WAL or file damaged or lost), not yet acknowledged "
                                    "(DELETE /spool/loss).", value=len(spool.losses))
        outcomes = CounterMetricFamily("status_event_total", "Events for the append-only topics (history, "
                                       "dead letters) by outcome: written, failed, dropped (too many pending).",
                                       labels=["log", "outcome"])
        pending = GaugeMetricFamily("status_event_pending", "Events not yet written, per append-only topic.",
                                    labels=["log"])
        for events in self._store.event_logs:
            outcomes.add_metric([events.kind, "written"], events.written)
            outcomes.add_metric([events.kind, "failed"], events.failed)
            outcomes.add_metric([events.kind, "dropped"], events.dropped)
            pending.add_metric([events.kind], events.pending)
        yield outcomes
        yield pending
        late = self._store.late_writes
        landed = CounterMetricFamily("status_late_writes", "Writes the sidecar gave up (reported not written) read "
                                     "back late from the status topic, by outcome: undone (they landed over a newer "
                                     "record of their key, which was written again), left (nothing newer of their key "
                                     "had landed, or what had was equal to them).", labels=["outcome"])
        landed.add_metric(["undone"], late.undone)
        landed.add_metric(["left"], late.left)
        yield landed
        yield GaugeMetricFamily("status_late_write_watches", "Writes given up that may still land, watched now.",
                                value=late.watched)
        yield CounterMetricFamily("status_late_write_watches_dropped", "Watches of given-up writes dropped for the "
                                  "bound on their number (the oldest first): a late landing of those is not undone.",
                                  value=late.dropped)


class _QueueCollector(Collector):
    """Figures the retry queue keeps itself (holds, probes, refusals, the retry budget), read at every scrape."""

    def __init__(self, queue: RetryQueue) -> None:
        self._queue = queue

    def collect(self) -> Iterator[Metric]:
        queue = self._queue
        yield GaugeMetricFamily("status_partitions_held",
                                "Partitions of the status topic held now: a write failed with a retriable error, "
                                "and their updates wait while one probe at a time tests the partition.",
                                value=len(queue.held_partitions))
        yield CounterMetricFamily("status_retry_probes",
                                  "Probes sent to held partitions (each one update, the oldest waiting).",
                                  value=queue.probes_total)
        yield CounterMetricFamily("status_update_retry_throttled",
                                  "Retries the retry budget held back while most attempts failed; each waited "
                                  "one more backoff step (none was dropped). 0 without a budget.",
                                  value=queue.throttled_total)
        budget = queue.policy.budget
        if budget is not None:
            yield GaugeMetricFamily("status_retry_budget_tokens",
                                    "Tokens in the retry budget's bucket; retries wait while they are at or "
                                    "below half of status.storage.retry.budget.max.tokens.", value=budget.tokens)
