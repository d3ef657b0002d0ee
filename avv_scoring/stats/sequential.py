"""Anytime-valid tests of a verdict bound (scoring layer, statistics; pure numpy, no pandas, no harness).

Used by ``--avv-settle`` (the run controller looks at the records as they arrive and stops a vendor once its
verdict is settled) and by ``bench/settle.py``. The formulas and why are in docs/scoring.md ("Settling a
verdict early").

**Every bound is a sign test on a per-item score.** A verdict metric with a ratio form is ``Σa / Σb`` over the
items (success rate: successes / items; F1: 2·TP / (2·TP + FP + FN); schema accuracy: valid calls / checked
calls). For a limit ``c`` and ``Σb > 0``::

    Σa / Σb ≥ c   ⇔   mean(z) ≥ 0   with   z_i = a_i − c·b_i

so "F1 ≥ 0.8" is "the mean of z = 0.4·[TP] − 0.8·([FP] + [FN]) is ≥ 0": one bounded per-item score, exact, with
no union over F1's components. ``z`` lies in ``[−c·b_max, a_max]``.

**Testing by betting** (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", 2023;
Shafer 2021). Two capital processes start at 1::

    K⁺_t = Π_{i≤t} (1 + λ⁺_i · z_i)      a bet that mean(z) > 0      (a nonnegative supermartingale if mean(z) ≤ 0)
    K⁻_t = Π_{i≤t} (1 − λ⁻_i · z_i)      a bet that mean(z) < 0      (… if mean(z) ≥ 0)

with bets ``λ_i`` chosen from ``z_1 … z_{i−1}`` only (predictable): aGRAPA, ``λ⁺ = μ̂ / (μ̂² + σ̂²)`` clipped to
``[0, CAP / |z_min|]`` (and ``λ⁻`` mirrored), where ``μ̂`` and ``σ̂²`` are the running mean and variance of the
earlier scores shrunk towards 0 and a wide prior. By Ville's inequality ``P(sup_t K_t ≥ 1/α) ≤ α`` under the
null, so the test may be looked at after every item (or every N), forever, and stop at any look: a bound is
settled *passed* once its pass-side capital has reached ``1/α``, *broken* once the other side's has.
``1 / max K`` is an anytime-valid p-value: the error rate the decision spent.

**Zero tolerance.** A bound at the edge of a rate's range (reasoning-only rate ≤ 0) is broken by a single item
against it — the whole set's metric can no longer meet it, so that FAIL is exact and spends no error. It is never
passed before the end (no sample shows that the rest has no such item) — unless it is a *defect check* with a
tolerance: then it is passed once none was seen in n trials and the exact upper bound ``1 − α^(1/n)`` (≈ 3/n at
α = 0.05) is below the tolerance, i.e. once ``n ≥ ln α / ln(1 − tolerance)``. That n does not depend on the data, so
stopping there is a fixed-sample test: a vendor whose rate is at least the tolerance shows no occurrence in n
trials with probability ≤ (1 − tolerance)^n ≤ α.

**Interval.** The values ``c`` not rejected on either side form a confidence sequence for the metric
(test inversion on a grid of ``c``); each end holds with probability ≥ 1 − α at every time at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

Kind = Literal["min", "max"]
PASSED, BROKEN = "passed", "broken"
#: Largest bet as a share of the largest bet that keeps the capital positive (1 would allow ruin on one item).
CAP = 0.9
#: The running mean and second moment start from this many pseudo-items at mean 0 and variance
#: PRIOR_VAR · |z_min| · z_max (the largest variance of a mean-0 score in [z_min, z_max] is |z_min| · z_max).
PRIOR_ITEMS = 1.0
PRIOR_VAR = 0.25
#: Grid step of the interval's test inversion (rate metrics live in [0, 1]).
GRID_STEP = 0.0025


@dataclass(frozen=True)
class RatioBound:
    """One verdict bound on a metric ``Σa / Σb``: ``kind`` min (metric ≥ limit) or max (≤ limit); each item's
    ``a`` lies in [0, a_max] and ``b`` in [0, b_max]."""

    column: str  # the metric (registry column)
    kind: Kind  # "min": the metric must be ≥ limit; "max": ≤ limit
    limit: float  # the bound c
    a_max: float = 1.0  # largest numerator part of one item
    b_max: float = 1.0  # largest denominator part of one item
    a_within_b: bool = True  # each item's a ≤ b (a rate: the numerator counts part of the denominator)
    tolerance: float | None = None  # a defect check (limit 0): passed once none seen and its upper bound < this

    @property
    def z_range(self) -> tuple[float, float]:
        """The range of ``z = a − limit·b``: with a ≤ b the largest is ``(1 − limit)·min(a_max, b_max)``."""
        hi = (1 - self.limit) * min(self.a_max, self.b_max) if self.a_within_b else self.a_max
        return -self.limit * self.b_max, max(hi, 0.0)


@dataclass(frozen=True)
class BoundTest:
    """Where one bound stands after ``n`` items: settled (``PASSED`` / ``BROKEN``) or not (None)."""

    bound: RatioBound
    n: int  # items tested
    state: str | None  # PASSED, BROKEN or None (not settled)
    p_value: float  # anytime-valid p-value of the settled side (1 / its largest capital); 1.0 when not settled
    at: int | None  # the item at which the settling capital first reached 1/α


def bets(z: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Predictable aGRAPA bets (λ⁺, λ⁻) for each item of ``z`` (last axis = time), from the items before it."""
    z = np.asarray(z, dtype=float)
    width = max(hi - lo, 1e-12)
    prior = PRIOR_VAR * max(-lo * hi, 1e-6 * width * width)
    n = np.arange(z.shape[-1], dtype=float)
    before = np.cumsum(z, axis=-1) - z
    before_sq = np.cumsum(z * z, axis=-1) - z * z
    mean = before / (n + PRIOR_ITEMS)
    second = (PRIOR_ITEMS * prior + before_sq) / (n + PRIOR_ITEMS)
    var = np.maximum(second - mean * mean, 1e-12)
    lam = mean / (var + mean * mean)
    up_cap = CAP / -lo if lo < 0 else 1e3 / width  # z ≥ 0 always: any bet is safe, keep it finite
    down_cap = CAP / hi if hi > 0 else 1e3 / width
    return np.clip(lam, 0.0, up_cap), np.clip(-lam, 0.0, down_cap)


def log_capitals(z: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Running log K⁺ and log K⁻ after each item (last axis = time)."""
    z = np.asarray(z, dtype=float)
    up, down = bets(z, lo, hi)
    return (np.cumsum(np.log1p(up * z), axis=-1), np.cumsum(np.log1p(-down * z), axis=-1))


def scores(a: np.ndarray, b: np.ndarray, limit: float) -> np.ndarray:
    """Each item's score ``z = a − limit · b``."""
    return np.asarray(a, dtype=float) - limit * np.asarray(b, dtype=float)


def check_bound(a: np.ndarray, b: np.ndarray, bound: RatioBound, alpha: float, looks: np.ndarray | None = None
               ) -> BoundTest:
    """The bound tested at level ``alpha`` on the items so far (in their random hand-out order). ``looks``: the
    item counts at which the caller looked; a crossing counts from the first look at or after it (default:
    every item). Broken wins if both sides crossed (it cannot happen below α = 0.5)."""
    lo, hi = bound.z_range
    n = int(np.asarray(a).shape[-1])
    if n == 0:
        return BoundTest(bound, 0, None, 1.0, None)
    if zero_tolerance(bound):  # one item against it decides the whole set's verdict: exact, no error spent
        against = np.flatnonzero(scores(a, b, bound.limit) > 0 if bound.kind == "max"
                                 else scores(a, b, bound.limit) < 0)
        if against.size:
            return BoundTest(bound, n, BROKEN, 0.0, int(against[0]) + 1)
        return _clean_enough(np.asarray(b, dtype=float), bound, alpha, n, looks)
    log_up, log_down = log_capitals(scores(a, b, bound.limit), lo, hi)
    above, below = (log_up, log_down) if bound.kind == "min" else (log_down, log_up)
    threshold = np.log(1.0 / alpha)
    for state, path in ((BROKEN, below), (PASSED, above)):
        crossed = np.flatnonzero(path >= threshold)
        if crossed.size:
            first = int(crossed[0]) + 1
            if looks is not None:
                seen = [int(k) for k in looks if k >= first]
                if not seen:
                    continue
            return BoundTest(bound, n, state, float(np.exp(-path.max())), first)
    return BoundTest(bound, n, None, 1.0, None)


def defect_trials(alpha: float, tolerance: float) -> int:
    """Trials with no occurrence after which a defect check is passed: the least n with (1 − tolerance)^n ≤ α,
    i.e. the exact upper bound 1 − α^(1/n) ≤ tolerance (299 at α = 0.05, tolerance 1 %)."""
    return int(np.ceil(np.log(alpha) / np.log1p(-tolerance)))


def _clean_enough(b: np.ndarray, bound: RatioBound, alpha: float, n: int, looks: np.ndarray | None) -> BoundTest:
    """A zero-tolerance bound with no item against it: passed when it is a defect check whose trials so far reach
    :func:`defect_trials` (at the first look after that), else open."""
    if bound.tolerance is None or bound.kind != "max":
        return BoundTest(bound, n, None, 1.0, None)
    need = defect_trials(alpha, bound.tolerance)
    reached = np.flatnonzero(np.cumsum(b) >= need)
    if not reached.size:
        return BoundTest(bound, n, None, 1.0, None)
    first = int(reached[0]) + 1
    if looks is not None and not any(int(k) >= first for k in looks):
        return BoundTest(bound, n, None, 1.0, None)
    return BoundTest(bound, n, PASSED, float((1.0 - bound.tolerance) ** float(b.sum())), first)


def zero_tolerance(bound: RatioBound) -> bool:
    """A bound at the edge of a rate's range (≤ 0, ≥ 1): broken by one item against it, passed only by them all."""
    return (bound.kind == "max" and bound.limit <= 0) or (bound.kind == "min" and bound.limit >= 1)


def confidence_interval(a: np.ndarray, b: np.ndarray, bound: RatioBound, alpha: float,
                        grid_step: float = GRID_STEP) -> tuple[float, float]:
    """The metric's confidence sequence at this point, by test inversion over a grid of limits in [0, 1]:
    (largest c whose "metric > c" side crossed 1/α, smallest c whose "metric < c" side did)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.size == 0:
        return 0.0, 1.0
    grid = np.arange(0.0, 1.0 + grid_step / 2, grid_step)
    threshold = np.log(1.0 / alpha)
    lower, upper = 0.0, 1.0
    for c in grid:  # one capital pair per c; the grid is short and each path vectorised
        lo, hi = replace(bound, limit=float(c)).z_range
        log_up, log_down = log_capitals(a - c * b, lo, hi)
        if log_up.max() >= threshold:
            lower = max(lower, float(c))
        if log_down.max() >= threshold and c < upper:
            upper = float(c)
    return lower, max(upper, lower)


def settle_verdict(tests: list[BoundTest]) -> str | None:
    """A vendor's verdict is settled FAIL once any bound is broken, PASS once every bound has passed (a bound
    without a test keeps it open), else None."""
    if any(t.state == BROKEN for t in tests):
        return "fail"
    if tests and all(t.state == PASSED for t in tests):
        return "pass"
    return None


def split_alpha(alpha: float, bounds: int) -> float:
    """Each bound's share of a vendor's error rate (a union bound: a wrong verdict needs one wrong bound)."""
    return alpha / max(bounds, 1)


__all__ = ["BROKEN", "CAP", "PASSED", "BoundTest", "RatioBound", "bets", "confidence_interval", "log_capitals",
           "scores", "settle_verdict", "split_alpha", "check_bound", "defect_trials", "zero_tolerance"]
