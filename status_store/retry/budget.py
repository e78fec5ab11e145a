"""The retry budget: a success-weighted token bucket that holds retries back while most attempts fail.

Why: backoff and jitter space out one sidecar's retries, but a fleet of sidecars still multiplies the
load on a cluster that is recovering: every sidecar keeps retrying all its keys whatever the others
see. The budget makes each sidecar's retries depend on how its recent attempts fared, in the spirit
of gRPC's retry throttling (gRFC A6) with a floor in the spirit of Finagle's ``minRetriesPerSec``.

The bucket (gRPC's arithmetic):

- it starts full, at ``max_tokens``;
- an attempt that fails with a retriable error takes one token (never below 0); a fatal error says
  nothing about the cluster's load and takes none;
- a written attempt adds ``token_ratio``, up to ``max_tokens``;
- a retry may go while ``tokens > max_tokens / 2``. First attempts always go (they are not retries),
  and their outcomes count like any other.

Two changes for this queue:

- **Retries in flight count as failed until they settle.** gRPC's retries leave one at a time; ours
  leave in bursts, because retry times are aligned to a 100 ms tick so that many keys share a
  Produce request. Checking the bucket alone would let a whole tick's burst through on one spare
  token. So a retry may go while ``tokens - retries_in_flight > max_tokens / 2``: at most the
  bucket's spare tokens are at stake at any time.
- **A floor, so that no retry waits forever.** In an outage retries are the only traffic, so no
  success refills the bucket. A retry the bucket refuses takes a place in a line served at
  ``min_retries_per_s``, first come first served (``floor_slot``): it goes at its place at the
  latest, sooner if the bucket reopens first. Places are handed out in order, so every refused
  retry gets one, however many keys compete and however alike their backoffs are (a floor that let
  through whichever retry came due first would starve the keys that always come due later). These
  retries are also what refills the bucket once the cluster answers again.

The unit is one attempt of one status update: one record, one delivery report. Retries of many keys
share Produce requests, but how many share one depends on partitions, timing and librdkafka's
batching; the records are what the sidecar sees settle, what a broker appends (or refuses), and what
``RetryQueue.attempts_total`` counts. A failed tick of 100 keys therefore takes 100 tokens: one bad
tick is enough to close the bucket, which is the cautious side.

Pure: no asyncio, no Kafka; the caller passes the time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    """The budget's settings; ``max_tokens == 0`` turns it off."""

    max_tokens: float = 0.0
    token_ratio: float = 0.5
    min_retries_per_s: float = 1.0

    @property
    def enabled(self) -> bool:
        """True when retries are budgeted at all."""
        return self.max_tokens > 0


class RetryBudget:
    """One store's retry budget: the token bucket, the retries in flight, and the floor's line."""

    def __init__(self, settings: BudgetSettings, now: float = 0.0) -> None:
        if not settings.enabled:
            raise ValueError("a retry budget needs max_tokens > 0")
        if settings.token_ratio <= 0 or settings.min_retries_per_s <= 0:
            raise ValueError(f"token_ratio and min_retries_per_s must be > 0: {settings}")
        self.settings = settings
        self.tokens = settings.max_tokens
        self.retries_in_flight = 0
        # The floor's next free place in line.
        self._next_slot = now

    @property
    def threshold(self) -> float:
        """Retries go only while the tokens not at stake stay above this (gRPC: half the bucket)."""
        return self.settings.max_tokens / 2

    def admit(self) -> bool:
        """May a retry go now by the bucket? (A retry whose floor place has come goes anyway.)"""
        return self.tokens - self.retries_in_flight > self.threshold

    def floor_slot(self, now: float) -> float:
        """A place in the floor's line for a refused retry: the time at which it may go whatever the
        bucket holds. Places are ``1 / min_retries_per_s`` apart and never in the past."""
        slot = max(now, self._next_slot)
        self._next_slot = slot + 1 / self.settings.min_retries_per_s
        return slot

    def sent(self, retry: bool) -> None:
        """An attempt left; a retry is at stake until it settles."""
        if retry:
            self.retries_in_flight += 1

    def settled(self, retry: bool, written: bool | None) -> None:
        """An attempt ended: written (True), failed with a retriable error (False), or neither (None:
        a fatal error, or not sent at all), which leaves the bucket as it was."""
        if retry:
            self.retries_in_flight = max(0, self.retries_in_flight - 1)
        if written is True:
            self.tokens = min(self.settings.max_tokens, self.tokens + self.settings.token_ratio)
        elif written is False:
            self.tokens = max(0.0, self.tokens - 1)
