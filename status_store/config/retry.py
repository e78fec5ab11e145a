"""The retry engine's settings (KIP-1278's ``status.storage.retry.*`` keys and ours), and the engine's policy made
from them."""

from __future__ import annotations

from dataclasses import dataclass

from ..retry.backoff import Backoff, JitterMode, Random, RetryMode, backoff_policy
from ..retry.budget import BudgetSettings, RetryBudget
from ..retry.updates import RetryPolicy
from ..settings import INT32_MAX, INT64_MAX, choice, integer, number, setting


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How failed status writes are retried: KIP-1278's settings and ours."""

    max_retries: int = setting(
        "status.storage.retry.max.retries", 5, integer(0, INT32_MAX),
        "KIP-1278: retries of a failed status write (2147483647: retry forever).", section="Retries (KIP-1278)")
    initial_backoff_ms: int = setting(
        "status.storage.retry.initial.backoff.ms", 300, integer(0, INT64_MAX),
        "KIP-1278: backoff before the first retry, in milliseconds.")
    max_backoff_ms: int = setting(
        "status.storage.retry.max.backoff.ms", 10000, integer(0, INT64_MAX),
        "KIP-1278: cap on the backoff before jitter, in milliseconds.")
    backoff_multiplier: float = setting(
        "status.storage.retry.backoff.multiplier", 2.0, number(1.0, 1e6), "KIP-1278: growth of the backoff per retry.")
    jitter_factor: float = setting(
        "status.storage.retry.jitter.factor", 0.25, number(0.0, 1.0),
        "KIP-1278: share of the backoff added as random jitter.")
    jitter_mode: JitterMode = setting(
        "status.storage.retry.jitter.mode", JitterMode.ADDITIVE, choice(JitterMode),
        "additive: KIP-1278 (jitter adds up to jitter.factor, so a delay may exceed max.backoff.ms by that share); "
        "symmetric: KIP-580, U[1-j,1+j) and never above the max; full: U[0, backoff), AWS full jitter.")
    mode: RetryMode = setting(
        "status.storage.retry.mode", RetryMode.PARTITION, choice(RetryMode),
        "partition: a write failing with a retriable error holds its partition; the partition's updates wait in "
        "order while one probe at a time (the oldest, at its latest value) tests it on the backoff schedule, capped "
        "at probe.max.backoff.ms (one probe for all while every partition is held); when a write gets through they "
        "are released in batches (2 per 25 ms, doubling while batches succeed, then growing slower, halved on a "
        "failure). An outage costs one probe per interval, and recovery about one probe interval. per-update "
        "(deprecated, removed in the next release; a warning at start): every update retries on its own backoff (the "
        "engine before partitions were held; the retry budget applies only here). See docs/operations.md.")
    probe_max_backoff_ms: int = setting(
        "status.storage.retry.probe.max.backoff.ms", 1000, integer(1, INT64_MAX),
        "partition mode: the longest wait between two probes of a held partition (the probes follow "
        "initial.backoff.ms, backoff.multiplier and jitter up to this, and never beyond max.backoff.ms). It bounds "
        "how long a recovered partition waits to be noticed.")
    max_pending: int = setting(
        "status.storage.retry.max.pending", 100000, integer(1, INT32_MAX),
        "Keys that may have status updates pending at once (in flight, waiting or parked); beyond it a write of "
        "another key is refused (HTTP 503 with Retry-After; WriteRejectedError from put), never dropped. A write of a "
        "key that has one pending takes no room (it waits behind the key's write in flight, or replaces its waiting "
        "value). About 1 KB of memory per pending update, at most two per key: see docs/operations.md.")
    timeout_ms: int | None = setting(
        "status.storage.retry.timeout.ms", None, integer(1, INT64_MAX),
        "Total time bound for one update across all its attempts, time held in a partition's line included (in "
        "the spirit of KIP-572). Unset: bounded by max.retries only.", example="120000")
    delivery_timeout_ms: int = setting(
        "status.storage.retry.delivery.timeout.ms", 3000, integer(1, INT32_MAX),
        "Bound on one attempt: how long the producer may hold a write (queued or in flight) before failing it back "
        "to the retry queue (which sends it again: a short bound costs an attempt, never the write). It is the "
        "sidecar's write bound, which a worker's agent waits out before writing through Connect (its fence, and so "
        "a stopping worker's wait with a hung sidecar). Keep it below status.storage.retry.timeout.ms.")
    budget_max_tokens: float = setting(
        "status.storage.retry.budget.max.tokens", 0.0, number(0.0, 1e6),
        "Deprecated with retry.mode=per-update, removed in the next release (a warning at start). "
        "Retry budget (gRPC-style retry throttling) for retry.mode=per-update: size of the token bucket, counted in "
        "attempts of one record. A failed attempt takes a token, a written one adds token.ratio; retries wait while "
        "half the bucket or less is left (none is dropped, none uses up a retry). 0: no budget. 10 suits a fleet of "
        "sidecars sharing a cluster (see docs/operations.md).")
    budget_token_ratio: float = setting(
        "status.storage.retry.budget.token.ratio", 0.5, number(0.001, 1e6),
        "Retry budget: tokens a written attempt adds back (0.5: retries keep going while fewer than about 1 attempt "
        "in 3 fails; gRPC's example, 0.1, reopens the bucket 5 times slower after an outage).")
    budget_min_retries_per_s: float = setting(
        "status.storage.retry.budget.min.retries.per.second", 1.0, number(0.001, 1e6),
        "Retry budget: retries let through per second whatever the bucket holds, so that no retry waits forever "
        "and the bucket refills once Kafka answers again.")

    @property
    def budget(self) -> BudgetSettings:
        """The retry budget's settings (``max_tokens == 0``: no budget)."""
        return BudgetSettings(self.budget_max_tokens, self.budget_token_ratio, self.budget_min_retries_per_s)

    def policy(self, rng: Random, budgeted: bool) -> RetryPolicy:
        """The retry queue's policy from these settings; the status queue (``budgeted``) has the budget and the
        bound on pending updates, the event topics neither."""
        def backoff(max_ms: int) -> Backoff:
            return backoff_policy(self.jitter_mode, self.initial_backoff_ms, max_ms, self.backoff_multiplier,
                                  self.jitter_factor, rng)

        budget = RetryBudget(self.budget) if budgeted and self.budget.enabled else None
        timeout = self.timeout_ms / 1000 if self.timeout_ms is not None else None
        probe_ms = min(self.max_backoff_ms, max(self.initial_backoff_ms, self.probe_max_backoff_ms))
        return RetryPolicy(backoff(self.max_backoff_ms), self.max_retries, timeout, budget, self.mode,
                           backoff(probe_ms), self.max_pending if budgeted else None)
