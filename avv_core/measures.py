"""Small pure helpers shared by the harness (during a run) and by scoring (after it): one percentile,
one missing-value test and one SLO rule, so the two sides can never disagree.

No I/O, no Locust, no pandas (numpy only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

NAN = float("nan")


def is_missing(value: object) -> bool:
    """True for None, NaN, pandas' NA / NaT and anything that is not a number-like value present.

    Strings are present (an empty string is a value, not a missing one); only ``None``-like and NaN-like
    values are missing.
    """
    if value is None:
        return True
    if isinstance(value, (str, bytes, bool)):
        return False
    try:
        return bool(value != value)  # NaN, pd.NA (raises TypeError in bool), NaT
    except TypeError:
        return True


def percentile(values: Sequence[float] | Iterable[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation between closest ranks (numpy's default,
    equal to pandas' ``quantile(q / 100)``). Missing values are ignored; NaN when nothing is left."""
    array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    array = array[~np.isnan(array)]
    return float(np.percentile(array, q)) if array.size else NAN


def meets_slo(outcomes: Iterable[tuple[bool, float | None]], slo_ttft_p95_ms: float, slo_error_rate: float) -> bool:
    """The stress-mode SLO for one vendor at one level, used during the run and in the report.

    ``outcomes`` = (success, ttft_ms) per request that started in the level. The level meets the SLO when
    error share = failed / requests ≤ ``slo_error_rate`` and TTFT p95 over successes ≤ ``slo_ttft_p95_ms``.
    A level with no finished request, or no success with a TTFT, does not meet it.
    """
    outcomes = list(outcomes)
    if not outcomes:
        return False
    errors = sum(1 for ok, _ in outcomes if not ok) / len(outcomes)
    ttfts = [t for ok, t in outcomes if ok and t is not None and not (isinstance(t, float) and math.isnan(t))]
    if errors > slo_error_rate or not ttfts:
        return False
    return percentile(ttfts, 95) <= slo_ttft_p95_ms
