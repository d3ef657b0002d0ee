"""The verdict modes (scoring layer, pure): ``threshold`` checks every bound; ``statistical`` replaces the bounds
on agreement with the baseline by the noise-floor tests of :mod:`avv_scoring.metrics.model_level` (docs/scoring.md,
"Is the difference real?")."""

from __future__ import annotations

import math
from collections.abc import Sequence

from avv_core.frame_rows import Cell
from avv_core.json_types import JSONMapping
from avv_scoring.metrics.registry import baseline_columns, noise_test_metrics
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.stats.tests import holm
from avv_scoring.verdict import FAIL, PASS, Thresholds, verdict

NAN = float("nan")


def verdict_thresholds(thresholds: Thresholds, settings: StatsSettings) -> Thresholds:
    """The thresholds a verdict mode checks: all of them (``threshold``), or — ``statistical`` — only those on
    the vendor's own behaviour (success rate, schema accuracy, reasoning-only…): every bound on a column that
    compares the vendor with the baseline (:func:`avv_scoring.metrics.registry.baseline_columns`: F1, tool_match…) is
    replaced by the noise-floor tests of :func:`statistical_reasons`."""
    if settings.verdict != "statistical":
        return thresholds
    agreement = set(baseline_columns())
    out = thresholds
    for column in [c for c in thresholds if c in agreement]:
        out = out.without(column)
    return out.named(f"{thresholds.name}, agreement bounds replaced by the statistical verdict "
                     f"(α = {settings.alpha:g})")


def judge(row: JSONMapping, thresholds: Thresholds, settings: StatsSettings) -> tuple[str, list[str]]:
    """``(verdict, reasons)`` of one vendor: the thresholds (:func:`avv_scoring.verdict.verdict`), plus in
    ``statistical`` mode the noise-floor reasons."""
    outcome, reasons = verdict(row, thresholds)
    if settings.verdict == "statistical":
        reasons = [*reasons, *statistical_reasons(row, settings.alpha)]
    return (FAIL if reasons else PASS), reasons


#: A noise test of the statistical verdict: (its column, what it tests, the metric, the baseline's own value).
VerdictTest = tuple[str, str, str, str]


def verdict_tests() -> tuple[VerdictTest, ...]:
    """The noise tests of the statistical verdict, with the rates they compare (vendor's, baseline's own) for
    reasons: every noise test a metric declares (``NoiseFloor(test=...)``), in interval order."""
    return tuple((m.noise_floor.test, m.noise_floor.what, m.column, m.noise_floor.column)
                 for m in noise_test_metrics() if m.noise_floor is not None)


def __getattr__(name: str) -> object:
    if name == "VERDICT_TESTS":  # read lazily from the registry (every metric module loaded)
        return verdict_tests()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


VERDICT_TESTS: tuple[VerdictTest, ...]  # :func:`verdict_tests` (lazy)


def _p_value(value: Cell) -> float:
    return NAN if value is None else float(value)


def statistical_reasons(row: JSONMapping, alpha: float) -> list[str]:
    """Why a vendor is worse than the baseline's noise floor (empty: it is not shown to be).

    The noise tests of the row (:func:`verdict_tests`) are Holm-adjusted together (:func:`stats.holm`);
    each with an adjusted p < ``alpha`` is a reason. The first (``noise_p``) missing (no baseline repeat pairs, or no
    trigger pair) is a reason too: without a measured noise floor the vendor cannot pass. The baseline itself
    is the noise floor: no reason.
    """
    if row.get("is_baseline"):
        return []
    tests = verdict_tests()
    ps: Sequence[float] = [_p_value(row.get(column)) for column, *_ in tests]
    if math.isnan(ps[0]):
        return [f"{tests[0][0]} missing (the baseline's noise floor needs ≥ 2 repeats with trigger pairs)"]
    reasons = []
    for (column, what, agreement, self_agreement), p, adjusted in zip(tests, ps, holm(ps), strict=True):
        if not math.isnan(adjusted) and adjusted < alpha:
            mine, floor = 1.0 - float(row[agreement]), 1.0 - float(row[self_agreement])
            reasons.append(f"{what} {mine:.4g} > baseline's own {floor:.4g} ({column} {p:.3g}, Holm-adjusted "
                           f"{adjusted:.3g} < {alpha:g})")
    return reasons


__all__ = ["VERDICT_TESTS", "judge", "verdict_tests", "statistical_reasons", "verdict_thresholds"]
