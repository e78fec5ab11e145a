"""Backoff policies (KIP-1278): exact sequences with a pinned random source, bounds for any."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from status_store.retry.backoff import AdditiveJitter, FullJitter, JitterMode, SymmetricJitter, backoff_policy


def fixed(*values: float) -> itertools.cycle[float]:
    return itertools.cycle(values)


def test_kip_1278_defaults_double_from_300_ms_to_the_10_s_cap() -> None:
    policy = AdditiveJitter(300, 10000, 2.0, 0.25, random=lambda: 0.0)
    assert [policy.delay(n) for n in range(8)] == [0.3, 0.6, 1.2, 2.4, 4.8, 9.6, 10.0, 10.0]


def test_additive_jitter_adds_up_to_the_factor_above_the_capped_value() -> None:
    values = fixed(0.5, 0.999)
    policy = AdditiveJitter(300, 10000, 2.0, 0.25, random=lambda: next(values))
    assert policy.delay(0) == pytest.approx(0.3 + 0.3 * 0.25 * 0.5)
    assert policy.delay(10) == pytest.approx(10 + 10 * 0.25 * 0.999)  # may exceed max by the jitter share


def test_symmetric_jitter_spreads_both_ways_and_never_exceeds_max() -> None:
    values = fixed(0.0, 0.5, 0.999)
    policy = SymmetricJitter(100, 1000, 2.0, 0.2, random=lambda: next(values))
    assert policy.delay(0) == pytest.approx(0.08)
    assert policy.delay(1) == pytest.approx(0.2)
    assert policy.delay(2) == pytest.approx(0.4 * 1.1996)
    assert policy.delay(3) == pytest.approx(0.8 * 0.8)
    assert policy.delay(9) == pytest.approx(1.0)


def test_full_jitter_draws_below_the_capped_value() -> None:
    values = fixed(0.0, 0.5)
    policy = FullJitter(300, 10000, 2.0, 0.0, random=lambda: next(values))
    assert [policy.delay(n) for n in range(2)] == [0.0, 0.3]


@pytest.mark.parametrize("mode", [JitterMode.SYMMETRIC])
def test_constant_backoff_without_jitter_when_initial_is_not_below_max(mode: JitterMode) -> None:
    policy = backoff_policy(mode, 2000, 1000, 2.0, 0.5, rng=lambda: 0.9)
    assert {policy.delay(n) for n in range(20)} == {1.0}


def test_additive_with_initial_above_max_is_capped_at_max() -> None:
    policy = backoff_policy(JitterMode.ADDITIVE, 2000, 1000, 2.0, 0.0)
    assert {policy.delay(n) for n in range(20)} == {1.0}


def test_huge_retry_counts_do_not_overflow() -> None:
    for mode in JitterMode:
        assert backoff_policy(mode, 300, 10000, 2.0, 0.25, rng=lambda: 0.5).delay(2**31 - 1) <= 12.5
        # A zero initial backoff stays zero, however many retries.
        assert backoff_policy(mode, 0, 10000, 2.0, 0.25, rng=lambda: 0.5).delay(5000) == 0


def test_shortest_and_longest_bound_each_policy() -> None:
    for mode in JitterMode:
        low = backoff_policy(mode, 300, 10000, 2.0, 0.25, rng=lambda: 0.0)
        high = backoff_policy(mode, 300, 10000, 2.0, 0.25, rng=lambda: 0.999999)
        for n in (0, 3, 10):
            assert low.shortest(n) == low.delay(n)
            assert high.delay(n) <= high.longest(n) <= high.delay(n) + 1e-5


settings = st.tuples(st.integers(0, 60000), st.integers(0, 60000), st.floats(1.0, 10.0), st.floats(0.0, 1.0),
                     st.integers(0, 2000), st.floats(0.0, 0.999999)).filter(lambda s: s[0] <= s[1])


@given(settings)
def test_bounds_hold_for_any_seed(case: tuple[int, int, float, float, int, float]) -> None:
    initial, maximum, multiplier, jitter, n, u = case
    try:
        capped = min(initial * multiplier**n, maximum)
    except OverflowError:
        capped = maximum if initial else 0
    additive = AdditiveJitter(initial, maximum, multiplier, jitter, random=lambda: u).delay(n) * 1000
    assert capped - 1e-6 <= additive <= capped * (1 + jitter) + 1e-6
    symmetric = SymmetricJitter(initial, maximum, multiplier, jitter, random=lambda: u).delay(n) * 1000
    assert 0 <= symmetric <= maximum + 1e-6
    full = FullJitter(initial, maximum, multiplier, jitter, random=lambda: u).delay(n) * 1000
    assert 0 <= full <= capped + 1e-6


def test_full_symmetric_jitter_drawing_zero_far_into_the_backoff_is_no_delay_not_nan() -> None:
    # initial * multiplier^n overflows to infinity; a factor of 0 must still give 0, not infinity * 0 = NaN
    # (a NaN delay would schedule the retry nowhere).
    policy = SymmetricJitter(1, 2, 10.0, 1.0, random=lambda: 0.0)
    assert policy.delay(309) == 0.0
    assert policy.shortest(309) == 0.0
