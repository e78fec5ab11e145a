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
  success refills the bucket. A small reserve that refills with time (``min_retries_per_s``, at most
  one second's worth) lets a retry through now and then whatever the bucket holds; those probes
  are what refill the bucket once the cluster answers again.

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
    token_ratio: float = 0.1
    min_retries_per_s: float = 1.0

    @property
    def enabled(self) -> bool:
        """True when retries are budgeted at all."""
        return self.max_tokens > 0


class RetryBudget:
    """One store's retry budget: the token bucket, the floor's reserve and the retries in flight."""

    def __init__(self, settings: BudgetSettings, now: float = 0.0) -> None:
        if not settings.enabled:
            raise ValueError("a retry budget needs max_tokens > 0")
        if settings.token_ratio <= 0 or settings.min_retries_per_s <= 0:
            raise ValueError(f"token_ratio and min_retries_per_s must be > 0: {settings}")
        self.settings = settings
        self.tokens = settings.max_tokens
        self.retries_in_flight = 0
        # The floor: refills at min_retries_per_s, holds at most a second's worth (and at least one retry).
        self._reserve_cap = max(1.0, settings.min_retries_per_s)
        self._reserve = self._reserve_cap
        self._refilled_at = now

    @property
    def threshold(self) -> float:
        """Retries go only while the tokens not at stake stay above this (gRPC: half the bucket)."""
        return self.settings.max_tokens / 2

    def admit(self, now: float) -> bool:
        """May a retry go now? Yes if the bucket has spare tokens, else if the floor's reserve has one
        retry (which it then spends). The caller reports the retry with ``sent`` if it goes."""
        if self.tokens - self.retries_in_flight > self.threshold:
            return True
        self._refill(now)
        if self._reserve >= 1:
            self._reserve -= 1
            return True
        return False

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

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._refilled_at)
        self._refilled_at = now
        self._reserve = min(self._reserve_cap, self._reserve + elapsed * self.settings.min_retries_per_s)
