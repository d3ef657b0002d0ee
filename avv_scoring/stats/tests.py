"""Statistics for "is the difference real?" (scoring layer, pure numpy + stdlib, no pandas, no I/O).

Everything here takes arrays and returns numbers; :mod:`avv_scoring.metrics.uncertainty` turns records into the arrays.

**Bootstrap over units.** A *unit* is a sample id: every record of one sample (all its repeats, every vendor)
stays together, so the repeats of a prompt — which tend to agree with each other — are never counted as
independent evidence. One resample draws ``S`` units with replacement out of the ``S`` units; resample ``b`` is a
row of counts ``W[b, s]`` (how often unit ``s`` was drawn; ``Σ_s W[b, s] = S``). A metric that is a ratio of
sums over items, ``m = Σ_i num_i / Σ_i den_i``, is on resample ``b``::

    m*_b = Σ_s W[b, s]·NUM_s / Σ_s W[b, s]·DEN_s          NUM_s = Σ_{i in unit s} num_i (same for DEN)

so one matrix product ``W @ X`` (``X`` = the per-unit sums of every numerator and denominator) evaluates every
ratio metric of every vendor on every resample (:func:`resample_counts`, :func:`ratio`). With all weights 1
the formula is the metric itself. A percentile of per-item values (TTFT p50) is the percentile of the
resampled multiset, in which each item of unit ``s`` appears ``W[b, s]`` times (:func:`weighted_percentiles`).

**Interval.** The 95 % interval is the percentile interval of the resampled values: the 2.5th and 97.5th
percentiles of ``m*_1 … m*_B`` (resamples where the metric is missing — e.g. a zero denominator — are left
out; none left → missing) (:func:`percentile_interval`).

**Tests.** :func:`sign_test_p` (McNemar's exact test), :func:`bootstrap_p_greater` (the paired bootstrap test
of the noise floor) and :func:`holm` (several tests of one vendor) — formulas in their docstrings.

**Power.** :func:`detectable_gap` and :func:`samples_for_gap` — formulas in their docstrings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

NAN = float("nan")
#: Resamples per chunk: the weight matrix is built and used ``CHUNK`` rows at a time (memory ∝ CHUNK · units).
#: Fixed, because the random stream (hence every interval) depends on it.
CHUNK = 128
#: Most resample × item cells of one percentile step: small enough that a step's cumulative counts stay in
#: the CPU cache (500 k int32 cells ran 3× faster than 2 M float64 ones at 1 M records).
PERCENTILE_CELLS = 500_000
#: Sorted values around the observed percentile over which a resample's cumulative counts are built (see
#: :func:`weighted_percentiles`; a resample whose percentile falls outside is computed over every value).
PERCENTILE_WINDOW = 8192


# ------------------------------------------------------------------------------------------------ bootstrap


def resample_counts(n_units: int, n_resamples: int, seed: int, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The bootstrap weight matrix, ``chunk`` rows at a time: each row holds how often each of ``n_units`` units
    is drawn in one resample of ``n_units`` draws with replacement (a multinomial(n_units, 1/n_units) vector).

    Seeded (``numpy.random.default_rng(seed)``), so the same (units, resamples, seed) give the same rows.
    Rows are float64, ready for ``W @ X``.
    """
    if n_units <= 0 or n_resamples <= 0:
        return
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, chunk):
        k = min(chunk, n_resamples - start)
        drawn = rng.integers(0, n_units, size=(k, n_units))
        drawn += np.arange(k, dtype=drawn.dtype)[:, None] * n_units  # row r counts into cells r·n … r·n + n − 1
        yield np.bincount(drawn.ravel(), minlength=k * n_units).reshape(k, n_units).astype(np.float64)


def per_unit_sums(units: np.ndarray, weights: ArrayLike, n: int) -> np.ndarray:
    """``NUM_s``: the sum of ``weights`` over the items of each unit ``s`` (0 … n − 1), in item order."""
    return np.bincount(units, weights=np.asarray(weights, dtype=float), minlength=n)[:n]


def ratio(num: ArrayLike, den: ArrayLike) -> np.ndarray:
    """``num / den`` elementwise, missing (NaN) where ``den == 0``."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def weighted_percentiles(values: np.ndarray, units: np.ndarray, weights: np.ndarray, q: float) -> np.ndarray:
    """The ``q``-th percentile (0–100, linear interpolation as :func:`numpy.percentile`) of ``values`` on each
    resample, where item ``i`` (of unit ``units[i]``) counts ``weights[b, units[i]]`` times in resample ``b``.

    With counts ``c_i`` of the values sorted ascending and ``N = Σ c_i``, the resampled multiset's sorted
    element ``j`` (0-based) is the value ``v_i`` with the smallest ``i`` such that ``c_1 + … + c_i > j``; the
    percentile is ``x[lo] + f·(x[lo + 1] − x[lo])`` with ``p = q/100·(N − 1)``, ``lo = ⌊p⌋``, ``f = p − lo``.
    Missing where ``N = 0``. Equals ``numpy.percentile(numpy.repeat(values, counts), q)``.

    How: a resample's percentile lies near the observed one, so the cumulative counts are built only over a
    window of the sorted values around it (``PERCENTILE_WINDOW``), starting from the count below the window (one
    integer product of the weights with each unit's number of values there). A resample whose ``lo`` or ``lo + 1``
    falls outside the window is computed over every value (:func:`_percentiles_everywhere`). Integer counts
    throughout: the same positions, hence the same numbers, as the cumulative counts over every value.
    """
    order = np.argsort(values, kind="stable")  # values sorted once upstream: a linear pass
    sorted_values = np.asarray(values, dtype=float)[order]
    sorted_units = np.asarray(units)[order]
    n, rows = sorted_values.size, weights.shape[0]
    out = np.full(rows, np.nan)
    if n == 0:
        return out
    # integer counts: a resample holds at most n · max(weight) values
    exact = np.int32 if n * float(weights.max(initial=0.0)) < 2**31 else np.int64
    counts = weights.astype(exact)
    n_units = counts.shape[1]
    half = max(PERCENTILE_WINDOW // 2, 1)
    centre = int(round(q / 100.0 * (n - 1)))
    first_in, last_in = max(0, centre - half), min(n - 1, centre + half)  # the window, inclusive
    # counts below, in and above the window: float products (BLAS) of whole numbers below 2**53, so exact
    whole = counts.astype(float)
    below = whole @ np.bincount(sorted_units[:first_in], minlength=n_units).astype(float)  # cum[first_in − 1]
    inside = sorted_units[first_in:last_in + 1]
    up_to_end = below + whole @ np.bincount(inside, minlength=n_units).astype(float)  # cum[last_in]
    total = up_to_end + whole @ np.bincount(sorted_units[last_in + 1:], minlength=n_units).astype(float)
    pos = q / 100.0 * np.maximum(total - 1, 0)
    lo = np.floor(pos)
    frac = pos - lo
    hi = np.minimum(lo + 1, np.maximum(total - 1, 0))
    fits = (below <= lo) & ((last_in == n - 1) | (up_to_end > hi))
    step = max(1, PERCENTILE_CELLS // inside.size)
    at = np.flatnonzero(fits)
    for start in range(0, at.size, step):
        r = at[start:start + step]
        cum = np.cumsum(counts[r][:, inside], axis=1, dtype=np.int64) + below[r].astype(np.int64)[:, None]
        first = first_in + np.count_nonzero(cum <= lo[r][:, None], axis=1)  # searchsorted(side="right") per row
        second = first_in + np.count_nonzero(cum <= hi[r][:, None], axis=1)
        first, second = np.minimum(first, n - 1), np.minimum(second, n - 1)
        value = sorted_values[first] + frac[r] * (sorted_values[second] - sorted_values[first])
        out[r] = np.where(total[r] > 0, value, np.nan)
    rest = np.flatnonzero(~fits)
    if rest.size:
        out[rest] = _percentiles_everywhere(sorted_values, sorted_units, counts[rest], q, exact)
    return out


def _percentiles_everywhere(sorted_values: np.ndarray, sorted_units: np.ndarray, counts: np.ndarray, q: float,
                            exact: type) -> np.ndarray:
    """:func:`weighted_percentiles` over every sorted value (the cumulative counts of whole rows)."""
    n, rows = sorted_values.size, counts.shape[0]
    out = np.full(rows, np.nan)
    step = max(1, PERCENTILE_CELLS // n)
    for start in range(0, rows, step):
        cum: np.ndarray = np.cumsum(counts[start:start + step][:, sorted_units], axis=1, dtype=exact)  # (k, n)
        total = cum[:, -1].astype(float)
        pos = q / 100.0 * np.maximum(total - 1, 0)
        lo = np.floor(pos)
        frac = pos - lo
        hi = np.minimum(lo + 1, np.maximum(total - 1, 0))
        first = np.array([np.searchsorted(cum[r], lo[r], side="right") for r in range(len(cum))], dtype=np.int64)
        second = np.array([np.searchsorted(cum[r], hi[r], side="right") for r in range(len(cum))], dtype=np.int64)
        first, second = np.minimum(first, n - 1), np.minimum(second, n - 1)
        value = sorted_values[first] + frac * (sorted_values[second] - sorted_values[first])
        out[start:start + len(cum)] = np.where(total > 0, value, np.nan)
    return out


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """``(low, high)``: the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the present draws (linear
    interpolation); missing when no draw is present."""
    present = np.asarray(draws, dtype=float)
    present = present[~np.isnan(present)]
    if not present.size:
        return NAN, NAN
    low, high = np.percentile(present, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(low), float(high)


def standard_error(draws: np.ndarray) -> float:
    """Sample standard deviation (ddof 1) of the present draws: the bootstrap standard error; missing with < 2."""
    present = np.asarray(draws, dtype=float)
    present = present[~np.isnan(present)]
    return float(present.std(ddof=1)) if present.size >= 2 else NAN


# ---------------------------------------------------------------------------------------------------- tests


def _log_binom_pmf(i: int, n: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2.0)


def sign_test_p(more: int, fewer: int) -> float:
    """Exact two-sided sign test (McNemar's exact test) of ``more`` against ``fewer`` discordant units.

    Under the null each discordant unit leans either way with probability ½, so with ``n = more + fewer`` and
    ``k = min(more, fewer)``::

        p = min(1, 2 · Σ_{i=0..k} C(n, i) / 2ⁿ)

    (``p = 1`` when ``n = 0``). With one pair per unit this is McNemar's exact test on the discordant pairs
    ``b`` (vendor calls, baseline does not) and ``c`` (the reverse). Summed in log space, exact to ~1e-12.
    """
    more, fewer = int(more), int(fewer)
    if more < 0 or fewer < 0:
        raise ValueError("counts must be non-negative")
    n = more + fewer
    if n == 0:
        return 1.0
    k = min(more, fewer)
    logs = [_log_binom_pmf(i, n) for i in range(k + 1)]
    top = max(logs)
    tail = math.exp(top) * sum(math.exp(v - top) for v in logs)
    return min(1.0, 2.0 * tail)


def bootstrap_p_greater(draws: np.ndarray, observed: float) -> float:
    """One-sided paired-bootstrap p-value for "the true difference is > 0", from the resampled differences
    ``d*_1 … d*_B`` (both sides of each difference computed on the same resample)::

        p = (1 + #{b : d*_b ≤ 0}) / (1 + B')          B' = resamples where d* is present

    i.e. the share of resamples in which the difference vanishes or reverses (the +1 keeps p > 0: with B
    resamples the smallest p is 1/(B + 1)). p < α exactly when the one-sided (1 − α) percentile bound of the
    difference lies above 0. Missing when the observed difference is missing or no draw is present; 1 when
    the observed difference is ≤ 0.
    """
    if observed is None or math.isnan(observed):
        return NAN
    present = np.asarray(draws, dtype=float)
    present = present[~np.isnan(present)]
    if not present.size:
        return NAN
    if observed <= 0:
        return 1.0
    return float((1 + np.count_nonzero(present <= 0)) / (1 + present.size))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (missing ones stay missing and do not count in ``m``).

    With the ``m`` present p-values sorted ascending ``p_(1) ≤ … ≤ p_(m)``::

        adj_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))

    Rejecting where ``adj < α`` keeps the chance of any false rejection among the ``m`` tests ≤ α.
    """
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p))
    m = len(present)
    out = [NAN] * len(pvalues)
    running = 0.0
    for j, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out


# ---------------------------------------------------------------------------------------------------- power


def z_sum(alpha: float = 0.05, power: float = 0.80) -> float:
    """``z_{1−α/2} + z_{power}`` (1.96 + 0.84 = 2.80 for α = 0.05, 80 % power)."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


def proportion_se(successes: float, trials: float) -> float:
    """Agresti–Coull standard error ``√(p̃(1 − p̃)/(n + 4))``, ``p̃ = (x + 2)/(n + 4)``: never 0, so a rate
    observed at exactly 0 or 1 still gets a finite detectable gap. Missing with no trial."""
    if not trials:
        return NAN
    p = (successes + 2.0) / (trials + 4.0)
    return math.sqrt(p * (1.0 - p) / (trials + 4.0))


def detectable_gap(se: float, alpha: float = 0.05, power: float = 0.80) -> float:
    """The smallest shift of a metric that a run with standard error ``se`` detects with probability
    ``power`` in a two-sided test at level ``alpha`` (normal approximation)::

        gap = (z_{1−α/2} + z_{power}) · se          (2.80 · se at α = 0.05, power 0.8)
    """
    return NAN if se is None or math.isnan(se) else z_sum(alpha, power) * se


def samples_for_gap(n_units: int, se: float, gap: float, alpha: float = 0.05, power: float = 0.80) -> float:
    """Units (samples) needed to detect ``gap`` when ``n_units`` units gave standard error ``se``; the standard
    error falls as 1/√n, so::

        n_needed = ⌈ n_units · ((z_{1−α/2} + z_{power}) · se / gap)² ⌉

    Missing without a standard error or units."""
    if not n_units or se is None or math.isnan(se) or gap <= 0:
        return NAN
    return float(math.ceil(n_units * (z_sum(alpha, power) * se / gap) ** 2))


# ---------------------------------------------------------------------------------------------------- ranks


def average_ranks(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ranks per row (1 = best) of a ``(rows, vendors)`` array, ties sharing their average rank, missing values
    unranked (NaN) — :func:`avv_scoring.metrics.irf.metric_ranks` for every row at once::

        rank_v = 1 + #{u present : u better than v} + ½ · #{u ≠ v present : u equal to v}
    """
    x = np.asarray(values, dtype=float)
    a, b = x[:, :, None], x[:, None, :]  # a = vendor v, b = the other vendor u
    better = (b > a) if higher_is_better else (b < a)
    equal = (b == a)
    n = x.shape[1]
    equal = equal & ~np.eye(n, dtype=bool)[None, :, :]
    ranks = 1.0 + better.sum(axis=2) + 0.5 * equal.sum(axis=2)
    return np.where(np.isnan(x), np.nan, ranks)


def rank_shares(scores: np.ndarray) -> np.ndarray:
    """``shares[v, k]`` = share of rows (resamples) in which vendor ``v`` holds rank ``k + 1`` by ``scores``
    (higher is better). Vendors tied on a row split the ranks they span evenly (two tied for first each get ½
    of rank 1 and ½ of rank 2), so every row of ``shares`` and every column sums to 1."""
    x = np.asarray(scores, dtype=float)
    rows, n = x.shape
    if rows == 0 or n == 0:
        return np.zeros((n, n))
    greater = (x[:, None, :] > x[:, :, None]).sum(axis=2)  # vendors strictly above v
    tied = (x[:, None, :] == x[:, :, None]).sum(axis=2)  # v and the vendors equal to it
    shares = np.zeros((n, n))
    for k in range(n):  # rank k + 1 is held when greater ≤ k < greater + tied, with weight 1 / tied
        holds = (greater <= k) & (k < greater + tied)
        shares[:, k] = (holds / tied).sum(axis=0) / rows
    return shares


__all__ = [
    "CHUNK",
    "average_ranks",
    "bootstrap_p_greater",
    "detectable_gap",
    "holm",
    "per_unit_sums",
    "percentile_interval",
    "proportion_se",
    "rank_shares",
    "ratio",
    "resample_counts",
    "samples_for_gap",
    "sign_test_p",
    "standard_error",
    "weighted_percentiles",
    "z_sum",
]
