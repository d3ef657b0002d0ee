"""Confidence intervals a verdict can rest on (scoring layer, statistics; pure Python and numpy, no pandas).

The decision (:mod:`avv_scoring.decision`, docs/explanation/decision.md) judges each bound with one of these:

- **A proportion** (successes / items, valid calls / calls, TP / (TP + FP + FN)…): the **Wilson score interval**
  on an *effective* number of trials. Unlike a percentile bootstrap it does not collapse to [1, 1] when no
  failure was seen: 32 successes in 32 items give [0.89, 1], not [1, 1]. The unit is the sample id, as in the
  bootstrap: repeats of one prompt (and several calls of one response) tend to agree, so they are not
  independent trials. The **design effect** counts each sample id's trials as one piece of evidence unless the
  data show they disagree more than that::

      clustered   = Σ_s n_s² / n                                  (every trial of a sample id alike: Kish)
      var_samples = S / (S − 1) · Σ_s (x_s − p · n_s)² / n²       (the ratio estimator's variance over the S
                                                                   sample ids: what the bootstrap estimates)
      deff        = max(1, clustered, var_samples / (p (1 − p) / n))
      n_eff       = n / deff,   x_eff = p · n_eff

  and the interval is Wilson's on (x_eff, n_eff). So three identical repeats of every item give the interval of
  one copy, 100 samples × 3 repeats with no failure count as 100 samples, and n_eff never depends on where the
  failures fell in a way that could let a vendor gain by failing: it is at most the clustered count.
- **A defect** (one occurrence proves it): none seen in n gives the exact one-sided upper bound
  ``1 − (1 − confidence)^(1/n)`` ("rate < 3/n at 95 %", Hanley's rule of three).
- **A difference of two proportions** (a non-inferiority margin against the baseline): Newcombe's hybrid score
  interval from the two Wilson intervals.

And how many samples would decide an undecided bound: the project's power estimate (:func:`samples_for_gap`,
80 % power, the distance to the limit as the gap) with the interval's own standard error, ``(high − low) / 2z``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from avv_scoring.stats.tests import samples_for_gap

NAN = float("nan")


def z_two_sided(level: float) -> float:
    """``z_{(1 + level)/2}``: 1.96 for a 95 % interval."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def wilson(successes: float, trials: float, level: float = 0.95) -> tuple[float, float]:
    """The two-sided Wilson score interval of ``successes / trials`` (both may be fractional: effective counts);
    (0, 1) with no trial."""
    if trials <= 0:
        return 0.0, 1.0
    z = z_two_sided(level)
    p = min(max(successes / trials, 0.0), 1.0)
    z2n = z * z / trials
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / trials + z2n / (4.0 * trials)) / (1.0 + z2n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if p == 0.0 else low), (1.0 if p == 1.0 else high)  # exact at the ends (no 0.99999999)


@dataclass(frozen=True)
class Proportion:
    """A proportion counted per sample id: ``hits[s]`` of ``trials[s]`` (only samples with a trial are kept)."""

    hits: np.ndarray
    trials: np.ndarray

    @classmethod
    def of(cls, hits: Sequence[float] | np.ndarray, trials: Sequence[float] | np.ndarray) -> Proportion:
        h, t = np.asarray(hits, dtype=float), np.asarray(trials, dtype=float)
        keep = t > 0
        return cls(h[keep], t[keep])

    @property
    def x(self) -> float:
        return float(self.hits.sum())

    @property
    def n(self) -> float:
        return float(self.trials.sum())

    @property
    def samples(self) -> int:
        """Sample ids with at least one trial."""
        return int(self.trials.size)

    @property
    def value(self) -> float:
        return self.x / self.n if self.n > 0 else NAN

    def design_effect(self) -> float:
        """``max(1, Σ n_s² / n, var_samples / var_binomial)`` (module docstring)."""
        n, s = self.n, self.samples
        if n <= 0:
            return 1.0
        clustered = max(1.0, float((self.trials ** 2).sum()) / n)
        p = self.x / n
        if s < 2 or p <= 0.0 or p >= 1.0:
            return clustered
        var_samples = s / (s - 1.0) * float(((self.hits - p * self.trials) ** 2).sum()) / (n * n)
        return max(clustered, var_samples / (p * (1.0 - p) / n))

    def effective(self) -> tuple[float, float]:
        """``(x_eff, n_eff)``: the counts the interval is Wilson's of."""
        n_eff = self.n / self.design_effect()
        return self.value * n_eff if n_eff > 0 else 0.0, n_eff

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        return wilson(*self.effective(), level) if self.n > 0 else (0.0, 1.0)

    def more_samples(self, limit: float, level: float = 0.95, power: float = 0.80) -> int | None:
        """About how many more sample ids would decide a bound at ``limit`` if the proportion stays where it is
        (:func:`trials_to_decide` on the effective trials, scaled to sample ids); None when it sits on the limit."""
        x_eff, n_eff = self.effective()
        need = trials_to_decide(self.value, limit, level, power)
        if need is None or n_eff <= 0 or self.samples <= 0:
            return None
        return max(1, math.ceil(self.samples * need / n_eff) - self.samples)

    def standard_error(self, level: float = 0.95) -> float:
        """The interval's half-width in standard errors: ``(high − low) / (2 z)`` (never 0: the interval does not
        collapse)."""
        if self.n <= 0:
            return NAN
        low, high = self.interval(level)
        return (high - low) / (2.0 * z_two_sided(level))


def defect_upper(n: float, level: float = 0.95) -> float:
    """The exact one-sided upper bound of a rate with no occurrence in ``n`` trials: ``1 − (1 − level)^(1/n)``
    (≈ 3/n at 95 %); 1 with no trial."""
    if n <= 0:
        return 1.0
    return 1.0 - (1.0 - level) ** (1.0 / n)


def newcombe(mine: tuple[float, float, float], theirs: tuple[float, float, float]) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``p1 − p2`` from each side's ``(p, low, high)`` Wilson interval
    (unpaired: conservative when both sides succeed on the same prompts)."""
    p1, l1, u1 = mine
    p2, l2, u2 = theirs
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def dice(q: float) -> float:
    """The Dice coefficient ``2q / (1 + q)`` of a Jaccard share ``q`` (F1 = 2TP / (2TP + FP + FN) of
    TP / (TP + FP + FN)): increasing, so an interval of ``q`` maps to one of F1."""
    return 2.0 * q / (1.0 + q) if not math.isnan(q) else NAN


def jaccard(f: float) -> float:
    """The inverse of :func:`dice`: ``f / (2 − f)``."""
    return f / (2.0 - f) if not math.isnan(f) else NAN


def trials_to_decide(p: float, limit: float, level: float = 0.95, power: float = 0.80) -> float | None:
    """The project's power estimate for a proportion: the fewest trials n at which a bound at ``limit`` is told
    from ``p`` with ``power`` at ``level`` — ``|p − limit| ≥ (z_{1−α/2} + z_{power}) · SE(n)`` — with z · SE(n) the
    distance from ``p`` to the end of its Wilson interval at (p, n) that faces the limit. Interior rates give the
    usual ``n ∝ 1/gap²``; a rate observed at 0 or 1, whose Wilson interval is one-sided and shrinks as 1/n, is not
    over-estimated by a 1/√n extrapolation. None when ``p`` sits on the limit."""
    gap = abs(p - limit)
    if math.isnan(gap) or gap < 1e-12:
        return None
    z = z_two_sided(level)
    k = (z + NormalDist().inv_cdf(power)) / z

    def decided(n: float) -> bool:
        low, high = wilson(p * n, n, level)
        return k * (p - low if p > limit else high - p) <= gap

    lo, hi = 1.0, 1.0
    while not decided(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return None
    for _ in range(60):  # bisection on a decreasing width
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if decided(mid) else (mid, hi)
    return hi


def more_samples(samples: int, se: float, value: float, limit: float, level: float = 0.95,
                 power: float = 0.80) -> int | None:
    """About how many more samples would decide a bound whose metric sits at ``value`` with standard error ``se``
    on ``samples`` samples (the project's power estimate, :func:`samples_for_gap`, with the distance to the
    limit as the gap); None when the value sits on the limit (no sample size decides it)."""
    gap = abs(value - limit)
    if samples <= 0 or math.isnan(se) or math.isnan(value) or gap < 1e-12:
        return None
    needed = samples_for_gap(samples, se, gap, 1.0 - level, power)
    if math.isnan(needed):
        return None
    return max(1, int(needed) - samples)


__all__ = ["Proportion", "defect_upper", "dice", "jaccard", "more_samples", "newcombe", "trials_to_decide", "wilson",
           "z_two_sided"]
