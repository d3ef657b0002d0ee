"""The statistics primitives (avv_scoring.stats.tests): bootstrap weights, weighted percentiles, the exact sign test,
the paired-bootstrap p-value, Holm, power and ranks — each against a brute-force or textbook computation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from avv_scoring.metrics.irf import metric_ranks
from avv_scoring.stats import tests as stats


def weights(units: int, resamples: int, seed: int) -> np.ndarray:
    return np.vstack(list(stats.resample_counts(units, resamples, seed)))


def test_resample_counts_are_seeded_multinomial_rows():
    w = weights(37, 300, seed=4)
    assert w.shape == (300, 37) and (w.sum(axis=1) == 37).all() and (w >= 0).all()
    assert np.array_equal(w, weights(37, 300, seed=4))  # reruns reproduce
    assert not np.array_equal(w, weights(37, 300, seed=5))
    # each unit is drawn once per resample on average, and about 1 − 1/e of the units appear in a resample
    assert w.mean() == pytest.approx(1.0)
    assert (w > 0).mean() == pytest.approx(1 - (1 - 1 / 37) ** 37, abs=0.02)
    assert list(stats.resample_counts(0, 10, 1)) == [] and list(stats.resample_counts(5, 0, 1)) == []


def test_ratio_is_missing_on_a_zero_denominator():
    out = stats.ratio(np.array([1.0, 2.0, 0.0]), np.array([2.0, 0.0, 0.0]))
    assert out[0] == 0.5 and math.isnan(out[1]) and math.isnan(out[2])


@pytest.mark.parametrize("q", [0, 2.5, 50, 90, 100])
def test_weighted_percentile_equals_numpy_on_the_expanded_values(q):
    rng = np.random.default_rng(3)
    values = rng.normal(100, 20, size=80).round(1)  # ties on purpose
    units = rng.integers(0, 12, size=80)
    w = weights(12, 200, seed=9)
    w[0] = 0  # a resample drawing no unit with values: missing
    got = stats.weighted_percentiles(values, units, w, q)
    assert math.isnan(got[0])
    for b in range(1, 200):
        expanded = np.repeat(values, w[b, units].astype(int))
        assert got[b] == pytest.approx(np.percentile(expanded, q), abs=1e-9)
    ones = np.ones((1, 12))
    assert stats.weighted_percentiles(values, units, ones, q)[0] == pytest.approx(np.percentile(values, q))


@pytest.mark.parametrize("window", [1, 6, 30, 10_000])
@pytest.mark.parametrize("q", [0, 10, 50, 97.5, 100])
def test_weighted_percentile_window_gives_the_same_numbers(monkeypatch, window, q):
    """The cumulative counts built over a window around the observed percentile (resamples whose percentile falls
    outside it computed over every value) give exactly the numbers of the counts over every value."""
    rng = np.random.default_rng(11)
    values = rng.gamma(2.0, 30.0, size=400).round(0)  # many ties
    units = rng.integers(0, 40, size=400)
    w = weights(40, 150, seed=3)
    w[0] = 0
    monkeypatch.setattr(stats, "PERCENTILE_WINDOW", window)
    spied = []
    everywhere = stats._percentiles_everywhere
    monkeypatch.setattr(stats, "_percentiles_everywhere", lambda *a: spied.append(len(a[2])) or everywhere(*a))
    got = stats.weighted_percentiles(values, units, w, q)
    order = np.argsort(values, kind="stable")
    expected = everywhere(values[order], units[order], w.astype(np.int32), q, np.int32)
    assert np.array_equal(got, expected, equal_nan=True)
    if window == 1:
        assert sum(spied) > 0  # the fallback ran
    if window == 10_000:
        assert not spied  # the window holds every value


def test_weighted_percentile_chunks_long_value_lists(monkeypatch):
    monkeypatch.setattr(stats, "PERCENTILE_CELLS", 50)  # one resample at a time
    rng = np.random.default_rng(1)
    values, units = rng.random(40), rng.integers(0, 5, size=40)
    w = weights(5, 7, seed=2)
    expected = [np.percentile(np.repeat(values, w[b, units].astype(int)), 50) for b in range(7)]
    assert stats.weighted_percentiles(values, units, w, 50) == pytest.approx(expected)


def test_percentile_interval_and_standard_error_skip_missing_draws():
    draws = np.concatenate([np.arange(1, 101, dtype=float), [np.nan] * 10])
    low, high = stats.percentile_interval(draws, 0.95)
    assert (low, high) == pytest.approx(tuple(np.percentile(np.arange(1, 101), [2.5, 97.5])))
    assert stats.standard_error(draws) == pytest.approx(np.arange(1, 101).std(ddof=1))
    assert all(math.isnan(v) for v in stats.percentile_interval(np.array([np.nan]), 0.95))
    assert math.isnan(stats.standard_error(np.array([1.0])))


def brute_sign_test(more: int, fewer: int) -> float:
    n, k = more + fewer, min(more, fewer)
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


@pytest.mark.parametrize("more,fewer", [(0, 0), (1, 0), (3, 3), (8, 32), (32, 8), (20, 25), (0, 12), (480, 560)])
def test_sign_test_is_the_exact_binomial_tail(more, fewer):
    assert stats.sign_test_p(more, fewer) == pytest.approx(brute_sign_test(more, fewer), rel=1e-9)
    assert stats.sign_test_p(more, fewer) == stats.sign_test_p(fewer, more)
    with pytest.raises(ValueError):
        stats.sign_test_p(-1, 2)


def test_bootstrap_p_greater_counts_resamples_where_the_difference_vanishes():
    draws = np.array([0.1, 0.2, -0.05, 0.0, 0.3, np.nan, 0.15, 0.12, 0.11, 0.2, 0.25])
    assert stats.bootstrap_p_greater(draws, 0.12) == pytest.approx((1 + 2) / (1 + 10))
    assert stats.bootstrap_p_greater(np.full(999, 0.2), 0.2) == pytest.approx(1 / 1000)  # the floor 1/(B + 1)
    assert stats.bootstrap_p_greater(draws, -0.01) == 1.0 and stats.bootstrap_p_greater(draws, 0.0) == 1.0
    assert math.isnan(stats.bootstrap_p_greater(draws, float("nan")))
    assert math.isnan(stats.bootstrap_p_greater(np.array([np.nan]), 0.1))


def test_holm_step_down():
    adjusted = stats.holm([0.01, 0.04, float("nan"), 0.03])
    assert adjusted[0] == pytest.approx(0.03) and adjusted[1] == pytest.approx(0.06)
    assert math.isnan(adjusted[2]) and adjusted[3] == pytest.approx(0.06)
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0] and stats.holm([0.9, 0.3]) == [0.9, 0.6]  # capped, monotone
    assert stats.holm([]) == []


def test_power_formulas():
    assert stats.z_sum() == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert stats.detectable_gap(0.01) == pytest.approx(0.028016, abs=1e-5)
    # a 2-point gap with se 0.01 on 400 samples: 400 · (2.8016 · 0.01 / 0.02)² = 785.0 → 786 samples
    assert stats.samples_for_gap(400, 0.01, 0.02) == math.ceil(400 * (stats.z_sum() * 0.01 / 0.02) ** 2)
    assert math.isnan(stats.samples_for_gap(0, 0.01, 0.02)) and math.isnan(stats.detectable_gap(float("nan")))
    assert stats.proportion_se(100, 100) == pytest.approx(math.sqrt((102 / 104) * (2 / 104) / 104))
    assert math.isnan(stats.proportion_se(0, 0))


def test_average_ranks_equal_the_irf_ranks_row_by_row():
    rng = np.random.default_rng(7)
    values = rng.integers(0, 4, size=(50, 5)).astype(float)
    values[rng.random((50, 5)) < 0.2] = np.nan
    for higher in (True, False):
        got = stats.average_ranks(values, higher)
        for row, ranks in zip(values, got, strict=True):
            expected = metric_ranks(pd.Series(row), higher).to_numpy()
            assert np.allclose(ranks, expected, equal_nan=True)


def test_rank_shares_split_ties_and_sum_to_one():
    scores = np.array([[1.0, 2.0, 2.0], [3.0, 1.0, 0.0], [0.5, 0.5, 0.5]])
    shares = stats.rank_shares(scores)
    third = 1 / 3
    assert shares[0] == pytest.approx([(0 + 1 + third) / 3, (0 + 0 + third) / 3, (1 + 0 + third) / 3])
    assert shares.sum(axis=1) == pytest.approx(np.ones(3)) and shares.sum(axis=0) == pytest.approx(np.ones(3))
