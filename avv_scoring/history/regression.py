"""Is a vendor worse than in its previous run? The paired tests between two runs of one vendor (scoring layer,
pure over pandas / numpy; :mod:`.trend` picks the runs, :mod:`avv_scoring.stats.tests` does the math).

Per-item outcomes come from the history's ``items`` table (docs/history.md). The two runs are paired **by
sample**: only the sample ids both runs hold count, items by (sample, repeat), and every resample keeps a
sample's repeats together (as the intervals of one run do, docs/scoring.md "Is the difference real?").

The tests are declared on the metric registry (``Metric(regression=Regression(...))``, :mod:`avv_scoring.metrics`):
a test is named by its metric's column and header and reads one column of the ``items`` table; :func:`regression_tests`
collects them, in registry order:

- ``success_rate`` (item ``success``), ``schema_response_accuracy`` (item ``schema_valid``: a successful
  ``tool_calls`` response whose every call is valid) — a paired bootstrap
  (:func:`~avv_scoring.stats.tests.resample_counts`: the same resampled samples for both runs) of the rate
  difference (kind ``rate``).
- ``ttft_p50_ms``, ``tps_p50`` — a paired bootstrap of the difference of the medians of successful items
  (:func:`~avv_scoring.stats.tests.weighted_percentiles`; kind ``median``).
- ``tool_match`` — per item where the vendor and the baseline both called, the same multiset of tool names
  (item ``tools_sig``). McNemar's exact test (:func:`~avv_scoring.stats.tests.sign_test_p`) on the samples whose
  agreement went down against those whose agreement went up (per sample, Σ over its repeats of after − before;
  kind ``mcnemar``).
- ``trigger_agreement`` — per item, the vendor made the same call/no-call decision as the run's baseline (both
  successful; item ``called``). McNemar as above.

A bootstrap test is a Wald test on the bootstrap standard error: ``z = d / se(d*)``, ``p = 2·(1 − Φ(|z|))``
(``se = 0``: ``p = 0`` when ``d ≠ 0``, else 1), so p is not limited to ``1/(B + 1)``. The baseline vendor is the
reference of the McNemar tests (trigger, tool), so it gets only the others.

**Flagged** when, after Holm's adjustment over the vendor's tests of this comparison, ``p < ALPHA`` (0.001: a
nightly job compares every vendor every night, so each vendor's chance of one false flag per night is kept at
0.1 %) **and** the change is at least the test's minimum effect (its declaration: 5 points of a rate; 20 % of the
earlier median and 20 ms for TTFT; 20 % for TPS), so a change too small to matter never pages anyone. A flagged
change in the metric's worse direction is a **regression**, the other way an **improvement**. A change as large as
the minimum whose adjusted p lies in [ALPHA, :data:`NEAR_MISS`) is a **near-miss**: reported with its p-value,
never gated on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import pandas as pd

from avv_scoring.metrics.declaration import RegressionKind
from avv_scoring.metrics.registry import regression_metrics
from avv_scoring.metrics.row_codes import item_codes, positions_in
from avv_scoring.stats.tests import holm, ratio, resample_counts, sign_test_p, standard_error, weighted_percentiles

#: Family-wise level per vendor and comparison (Holm over its tests).
ALPHA = 0.001
#: Bootstrap resamples of the between-run tests, and their seed: a Wald test needs only the standard error, which
#: 200 resamples give within ~5 % (1/√(2B)); the medians' resamples cost B × items.
RESAMPLES = 200
SEED = 17

#: The medians' bootstrap costs resamples × items: it uses the first ``MEDIAN_CELLS // items`` resamples (at least
#: MEDIAN_MIN_RESAMPLES, at most all), so a run of 300 k items per vendor still takes well under a second per test.
MEDIAN_CELLS = 20_000_000
MEDIAN_MIN_RESAMPLES = 50

Kind = RegressionKind
KEYS = ["sample_id", "repeat"]


@dataclass(frozen=True)
class RegressionTest:
    """One between-run test: what it compares, how, and the smallest change it flags."""

    key: str  # the name in trend.md / the change rows: the metric's registry column
    header: str  # the metric's registry header
    kind: Kind
    better: Literal["higher", "lower"]
    item: str  # the items-table column its per-item outcome is read from
    min_effect: float  # an absolute difference of a rate, or (medians) a share of the earlier median
    min_abs: float = 0.0  # medians: the absolute floor as well (ms for TTFT)
    baseline_too: bool = True  # False: the baseline vendor is its own reference, not tested
    metrics: tuple[str, ...] = ()  # the registry metrics it speaks for (trend.html marks "changed" on these only)


def regression_tests() -> tuple[RegressionTest, ...]:
    """Every between-run test: one per metric declared with ``regression=Regression(...)``, in registry order; a
    McNemar test compares with the run's baseline, so the baseline vendor is not tested by it."""
    out = []
    for m in regression_metrics():
        r = m.regression
        assert r is not None and m.better != "none"  # checked by Metric
        out.append(RegressionTest(m.column, m.header, r.kind, "higher" if m.better == "higher" else "lower", r.item,
                                  r.min_effect, r.min_abs, baseline_too=r.kind != "mcnemar",
                                  metrics=(m.column, *r.speaks_for)))
    return tuple(out)


def __getattr__(name: str) -> object:
    if name == "TESTS":  # read lazily from the registry (every metric module loaded)
        return regression_tests()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TESTS: tuple[RegressionTest, ...]  # :func:`regression_tests` (lazy)
#: A change as large as its test's minimum effect whose Holm-adjusted p lies in [ALPHA, NEAR_MISS) is reported as a
#: near-miss (with its p-value): not flagged, not gated on, but worth a look (F1 1 → 0.72 at p = 0.002).
NEAR_MISS = 0.05


def tests_of(column: str) -> tuple[str, ...]:
    """The keys of the tests that speak for the registry metric ``column`` (its "changed" marks)."""
    return tuple(t.key for t in regression_tests() if column in t.metrics)


@dataclass(frozen=True)
class Change:
    """One test of one vendor between two runs."""

    test: str
    n: int  # paired items (McNemar, rates) or items of both runs (medians)
    before: float
    after: float
    effect: float  # after − before (a rate difference, or the median difference)
    relative: float  # effect / before (medians; NaN for rates)
    p: float
    p_holm: float
    flagged: bool
    direction: str  # "regression" | "improvement" | ""
    near_miss: bool = False  # large enough, Holm-adjusted p in [alpha, NEAR_MISS): reported, not flagged


def inner_join(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The row positions ``(ia, ib)`` of ``a.merge(b, on=KEYS)`` (an inner join on sample and repeat, in ``a``'s
    row order), found on scoring's integer item codes (:func:`~avv_scoring.metrics.row_codes.item_codes`): a pandas
    merge costs ~10 ms of fixed overhead and the history joins a few per vendor, test and run. The merge itself
    answers where the codes cannot say the same: key columns of different types, a missing sample id, or a key
    repeated in ``b`` (a row per match)."""
    sa, sb = a["sample_id"].to_numpy(), b["sample_id"].to_numpy()
    ra, rb = a["repeat"].to_numpy(), b["repeat"].to_numpy()
    if sa.dtype == sb.dtype and ra.dtype == rb.dtype:
        codes = item_codes(np.concatenate([sa, sb]), np.concatenate([ra, rb]), len(sa))
        if codes is not None and len(np.unique(codes[1])) == len(codes[1]):  # one match at most per ``a`` row
            at = positions_in(codes[0], codes[1])
            hit = at >= 0
            return np.flatnonzero(hit), at[hit]
    positions = a[KEYS].assign(_ia=np.arange(len(a))).merge(b[KEYS].assign(_ib=np.arange(len(b))), on=KEYS)
    return positions["_ia"].to_numpy(), positions["_ib"].to_numpy()


def _outcome(sample_id: np.ndarray, repeat: np.ndarray, value: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"sample_id": sample_id, "repeat": repeat, "value": value})


def outcomes(items: pd.DataFrame, baseline: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Per test, one run's (sample_id, repeat, value) of one vendor; ``baseline`` = the baseline's items of the same
    run (None for the baseline itself)."""
    out: dict[str, pd.DataFrame] = {}
    sample_id, repeat = items["sample_id"].to_numpy(), items["repeat"].to_numpy()
    ok = items["success"].to_numpy() == 1
    if baseline is not None:  # the items both the vendor and the baseline answered successfully, paired
        base_ok = baseline["success"].to_numpy() == 1
        ia, ib = inner_join(items[ok], baseline[base_ok])
        mine, theirs = np.flatnonzero(ok)[ia], np.flatnonzero(base_ok)[ib]
    for test in regression_tests():
        item = test.item
        values = items[item].to_numpy()
        if test.kind == "mcnemar":  # the same outcome as the baseline's, both successful and both present
            if baseline is not None:
                a, b = values[mine], baseline[item].to_numpy()[theirs]
                keep = ~(pd.isna(a) | pd.isna(b))
                rows = mine[keep]
                out[test.key] = _outcome(sample_id[rows], repeat[rows], (a[keep] == b[keep]).astype(float))
            continue
        present = ~pd.isna(values) & (True if test.kind == "rate" else ok)  # a median: of successful items
        out[test.key] = _outcome(sample_id[present], repeat[present], values[present].astype(float))
    return out


def _pairs(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paired items of two runs' outcomes (:func:`inner_join`): their sample ids, values before, after."""
    ia, ib = inner_join(a, b)
    return (a["sample_id"].to_numpy()[ia], a["value"].to_numpy(dtype=float)[ia],
            b["value"].to_numpy(dtype=float)[ib])


def _mcnemar(a: pd.DataFrame, b: pd.DataFrame) -> tuple[int, float, float, float]:
    samples, value_a, value_b = _pairs(a, b)
    if len(samples) == 0:
        return 0, math.nan, math.nan, math.nan
    codes, _ = pd.factorize(samples)
    net = np.bincount(codes, weights=value_b - value_a)  # per sample: Σ over its repeats of after − before
    p = sign_test_p(int((net > 0).sum()), int((net < 0).sum()))
    return len(samples), float(value_a.mean()), float(value_b.mean()), p


def _wald_p(observed: float, draws: np.ndarray) -> float:
    if math.isnan(observed):
        return math.nan
    se = standard_error(draws)
    if math.isnan(se) or se == 0.0:
        return 0.0 if observed != 0.0 else 1.0
    return 2.0 * (1.0 - NormalDist().cdf(abs(observed) / se))


class Resamples:
    """The bootstrap weights of one comparison, drawn once and shared by its tests: resample ``b`` draws the
    comparison's sample ids (both runs' together) with replacement; ``weights`` are the chunks of
    :func:`~avv_scoring.stats.tests.resample_counts`."""

    def __init__(self, sample_ids: np.ndarray, resamples: int, seed: int):
        self.ids = np.sort(sample_ids)  # unique ids; a unit is its position here
        self.weights = list(resample_counts(len(self.ids), resamples, seed))

    def units(self, sample_ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ids, sample_ids)

    def first(self, rows: int) -> list[np.ndarray]:
        """The weights of the first ``rows`` resamples."""
        out, left = [], rows
        for chunk in self.weights:
            if left <= 0:
                break
            out.append(chunk[:left])
            left -= len(chunk)
        return out


def _bootstrap_rate(a: pd.DataFrame, b: pd.DataFrame, draws: Resamples) -> tuple[int, float, float, float]:
    samples, value_a, value_b = _pairs(a, b)
    if len(samples) == 0:
        return 0, math.nan, math.nan, math.nan
    units, n = draws.units(samples), len(draws.ids)
    den = np.bincount(units, minlength=n).astype(float)
    num_a = np.bincount(units, weights=value_a, minlength=n)
    num_b = np.bincount(units, weights=value_b, minlength=n)
    before, after = num_a.sum() / den.sum(), num_b.sum() / den.sum()
    diffs = [ratio(w @ num_b - w @ num_a, w @ den) for w in draws.weights]
    return len(samples), float(before), float(after), _wald_p(after - before, np.concatenate(diffs) if diffs else
                                                             np.array([]))


def _bootstrap_median(a: pd.DataFrame, b: pd.DataFrame, draws: Resamples) -> tuple[int, float, float, float]:
    sa, sb = a["sample_id"].to_numpy(), b["sample_id"].to_numpy()
    codes, _ = pd.factorize(np.concatenate([sa, sb]))  # as Series.isin: any hashable id, NaN equal to NaN
    in_a, in_b = np.isin(codes[:len(sa)], codes[len(sa):]), np.isin(codes[len(sa):], codes[:len(sa)])
    if not in_a.any() or not in_b.any():
        return 0, math.nan, math.nan, math.nan
    va, vb = a["value"].to_numpy(dtype=float)[in_a], b["value"].to_numpy(dtype=float)[in_b]
    ua, ub = draws.units(sa[in_a]), draws.units(sb[in_b])
    before, after = float(np.median(va)), float(np.median(vb))
    rows = max(MEDIAN_MIN_RESAMPLES, MEDIAN_CELLS // max(len(va), len(vb)))
    diffs = [weighted_percentiles(vb, ub, w, 50.0) - weighted_percentiles(va, ua, w, 50.0) for w in draws.first(rows)]
    return len(va) + len(vb), before, after, _wald_p(after - before, np.concatenate(diffs) if diffs else np.array([]))


RUNNERS: dict[str, Callable[[pd.DataFrame, pd.DataFrame, Resamples], tuple[int, float, float, float]]] = {
    "mcnemar": lambda a, b, draws: _mcnemar(a, b),
    "rate": _bootstrap_rate,
    "median": _bootstrap_median,
}


def compare(before: dict[str, pd.DataFrame], after: dict[str, pd.DataFrame], is_baseline: bool,
            resamples: int = RESAMPLES, seed: int = SEED, alpha: float = ALPHA) -> list[Change]:
    """Every test of one vendor between two runs (:func:`outcomes` of each), Holm-adjusted, flagged as in the
    module docstring."""
    tests = [t for t in regression_tests()
             if t.key in before and t.key in after and (t.baseline_too or not is_baseline)]
    frames = [frame["sample_id"].to_numpy() for t in tests if t.kind != "mcnemar" for frame in (before[t.key],
                                                                                                  after[t.key])]
    draws = Resamples(pd.unique(np.concatenate(frames)) if frames else np.array([]), resamples, seed)
    raw = []
    for test in tests:
        n, x, y, p = RUNNERS[test.kind](before[test.key], after[test.key], draws)
        raw.append((test, n, x, y, p))
    adjusted = holm([p for *_, p in raw])
    changes = []
    for (test, n, x, y, p), p_holm in zip(raw, adjusted, strict=True):
        effect = y - x
        relative = effect / x if test.kind == "median" and x else math.nan
        if test.kind == "median":
            big = abs(relative) >= test.min_effect and abs(effect) >= test.min_abs
        else:
            big = abs(effect) >= test.min_effect
        flagged = bool(n) and not math.isnan(p_holm) and p_holm < alpha and big
        near = bool(n) and not flagged and big and not math.isnan(p_holm) and p_holm < max(NEAR_MISS, alpha)
        worse = effect < 0 if test.better == "higher" else effect > 0
        direction = ("regression" if worse else "improvement") if flagged or near else ""
        changes.append(Change(test.key, n, x, y, effect, relative, p, p_holm, flagged, direction, near))
    return changes


__all__ = ["ALPHA", "NEAR_MISS", "RESAMPLES", "SEED", "TESTS", "Change", "RegressionTest", "compare", "outcomes",
           "regression_tests", "tests_of"]
