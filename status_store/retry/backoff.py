"""Backoff policies: how long to wait before retry number ``n`` (pure, no I/O).

Each policy is a small object with one method, ``delay(retry_count) -> seconds``, and an injectable
random source returning floats in [0, 1), so tests can pin every value.

- ``additive`` (KIP-1278, the default): ``capped = min(initial * multiplier^n, max)``, then
  ``capped + capped * jitter * U[0,1)``. Jitter only adds, so a delay may exceed ``max`` by the
  jitter share.
- ``symmetric`` (KIP-580, as Kafka's clients back off): ``min(initial * multiplier^n * U[1-j, 1+j), max)``,
  never above ``max``; when ``initial >= max`` the delay is ``max``, constant, without jitter.
- ``full`` (AWS "full jitter"): ``U[0, capped)``, which spreads a herd of clients the most.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

Random = Callable[[], float]


class JitterMode(enum.StrEnum):
    """How random jitter is applied to the exponential backoff."""

    ADDITIVE = "additive"
    SYMMETRIC = "symmetric"
    FULL = "full"


class RetryMode(enum.StrEnum):
    """How the retry queue retries failed writes: by holding a failing partition behind one probe at a time,
    or each update on its own backoff."""

    PARTITION = "partition"
    PER_UPDATE = "per-update"


class Backoff(Protocol):
    """A backoff policy."""

    def delay(self, retry_count: int) -> float:
        """Seconds to wait before retry ``retry_count`` (0 for the first retry)."""
        ...

    def shortest(self, retry_count: int) -> float:
        """The least ``delay(retry_count)`` can be, whatever the random draw."""
        ...

    def longest(self, retry_count: int) -> float:
        """The most ``delay(retry_count)`` can be, whatever the random draw."""
        ...


def exponential(initial_ms: float, multiplier: float, retry_count: int) -> float:
    """``initial * multiplier^n`` in milliseconds; infinity instead of an overflow for huge ``n``."""
    if initial_ms == 0:
        return 0.0
    try:
        return initial_ms * multiplier**retry_count
    except OverflowError:
        return math.inf


def capped_exponential(initial_ms: float, max_ms: float, multiplier: float, retry_count: int) -> float:
    """``min(initial * multiplier^n, max)`` in milliseconds."""
    return min(exponential(initial_ms, multiplier, retry_count), max_ms)


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """The settings every policy shares; subclasses say how jitter applies."""

    initial_ms: float
    max_ms: float
    multiplier: float
    jitter: float
    random: Random = field(default=random.random, compare=False)

    def capped_ms(self, retry_count: int) -> float:
        """``min(initial * multiplier^n, max)`` in milliseconds."""
        return capped_exponential(self.initial_ms, self.max_ms, self.multiplier, retry_count)


@dataclass(frozen=True, slots=True)
class AdditiveJitter(ExponentialBackoff):
    """KIP-1278: ``capped + capped * jitter * U[0,1)``."""

    def delay(self, retry_count: int) -> float:
        capped = self.capped_ms(retry_count)
        return (capped + capped * self.jitter * self.random()) / 1000

    def shortest(self, retry_count: int) -> float:
        return self.capped_ms(retry_count) / 1000

    def longest(self, retry_count: int) -> float:
        return self.capped_ms(retry_count) * (1 + self.jitter) / 1000


@dataclass(frozen=True, slots=True)
class SymmetricJitter(ExponentialBackoff):
    """KIP-580: ``min(initial * multiplier^n * U[1-j, 1+j), max)``; constant ``max`` if ``initial >= max``."""

    def delay(self, retry_count: int) -> float:
        return self._spread(retry_count, 1 - self.jitter + 2 * self.jitter * self.random())

    def shortest(self, retry_count: int) -> float:
        return self._spread(retry_count, 1 - self.jitter)

    def longest(self, retry_count: int) -> float:
        return self._spread(retry_count, 1 + self.jitter)

    def _spread(self, retry_count: int, factor: float) -> float:
        if self.initial_ms >= self.max_ms:
            return self.max_ms / 1000
        # KIP-580 spreads the uncapped value, then caps: far into the backoff the delay is max. The uncapped
        # value may be infinite, and a factor of 0 (full jitter drawing 0) is still no delay, not inf * 0 = NaN.
        if factor <= 0:
            return 0.0
        return min(exponential(self.initial_ms, self.multiplier, retry_count) * factor, self.max_ms) / 1000


@dataclass(frozen=True, slots=True)
class FullJitter(ExponentialBackoff):
    """AWS full jitter: ``U[0, capped)`` (the whole range is random; ``jitter`` does not apply)."""

    def delay(self, retry_count: int) -> float:
        return self.capped_ms(retry_count) * self.random() / 1000

    def shortest(self, retry_count: int) -> float:
        return 0.0

    def longest(self, retry_count: int) -> float:
        return self.capped_ms(retry_count) / 1000


_POLICIES: dict[JitterMode, Callable[[float, float, float, float, Random], Backoff]] = {
    JitterMode.ADDITIVE: AdditiveJitter,
    JitterMode.SYMMETRIC: SymmetricJitter,
    JitterMode.FULL: FullJitter,
}


def backoff_policy(mode: JitterMode, initial_ms: float, max_ms: float, multiplier: float, jitter: float,
                   rng: Random = random.random) -> Backoff:
    """The policy for a jitter mode and KIP-1278's settings."""
    return _POLICIES[mode](initial_ms, max_ms, multiplier, jitter, rng)
