"""IRF (Inverse Rank Fusion): the AVV fusion score over per-vendor metrics (scoring layer, pure).

The inputs are the registry's ``irf=True`` metrics (:data:`IRF_METRICS`; today six, see
:mod:`avv_scoring.metrics.registry`), or any list of registered metrics with a direction. For each model separately
and for each input metric m, the vendors that have a value
for m are ranked (1 = best: descending for F1, success rate, schema accuracy and TPS; ascending for
avg tokens and avg TTFT). Tied vendors all get the **average** of the ranks they span (standard
fractional ranking: two vendors tied for first both get 1.5). Then::

    IRF(vendor) = Σ_m 1 / (rank_m(vendor) + k),   k = 5

summed over the metrics where the vendor has a value: a missing value contributes nothing, which is
worse than the last rank. With the six default metrics IRF lies in (0, 1]. Averaged ties reproduce all eight
tables published by Agent Vendor Verifier exactly (to 4 decimals); competition ("1224"), dense,
max and ordinal ranking do not.

**Statistical ties** (``--irf-ties statistical``, opt-in; the published IRF above stays the default): IRF ranks
positions, not differences, so a vendor that wins a metric by 0.5 % of noise gets the same rank step as one that
wins by half. With statistical ties, two vendors are *separated* on a metric when the 95 % paired bootstrap interval
of their difference (resampling sample ids, as every interval of the report) excludes 0, and *tied* otherwise
(a metric that is not resampled: tied only when the values are equal). Each vendor's rank is then::

    rank_v = 1 + #{u separated from v and better} + ½ · #{u ≠ v tied with v}

which is the published average rank when "tied" means "equal" (a group of tied vendors shares the average of the
ranks it spans), and ``irf_statistical`` is the IRF sum over these ranks (:func:`statistical_irf`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_scoring.metrics.registry import irf_inputs, is_metric, metric

IRF_K = 5.0
#: ``--irf-ties``: ``published`` (AVV's IRF alone) or ``statistical`` (also ``irf_statistical``).
IRF_TIES: tuple[str, ...] = ("published", "statistical")


def default_irf_metrics() -> dict[str, bool]:
    """Metric column → True when higher is better: the default IRF inputs (registry ``irf=True``), in order."""
    return {m.column: m.higher_is_better for m in irf_inputs()}


def __getattr__(name: str) -> object:
    # read lazily (importing this module does not read the registry, which may still be loading)
    if name == "IRF_METRICS":
        return default_irf_metrics()
    if name == "IRF_TABLE_COLUMNS":
        return ("model", "vendor", *default_irf_metrics())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: metric column → True when higher is better: the default IRF inputs (registry ``irf=True``), in order (lazy).
IRF_METRICS: dict[str, bool]
#: Column order of the ``avv-score irf`` input table (lazy).
IRF_TABLE_COLUMNS: tuple[str, ...]

#: What callers may pass as ``metrics``: None (the default inputs) or registered metric columns.
MetricsSpec = Sequence[str] | None


def resolve_irf_metrics(metrics: MetricsSpec = None) -> dict[str, bool]:
    """Column → higher-is-better for the IRF inputs: the registry's ``irf=True`` metrics when ``metrics`` is
    None, else the given registered columns, each ranked in its registry direction.

    An unknown column, a metric without a direction (``better="none"``), a repeated column or an empty list
    raises :class:`~avv_core.errors.InputError` (it is user input: ``--irf-metrics``).
    """
    if metrics is None:
        return default_irf_metrics()
    if isinstance(metrics, str):
        raise TypeError("metrics: pass a list of columns, not one string")
    columns = list(metrics)
    if not columns:
        raise InputError("IRF metrics: name at least one metric")
    out: dict[str, bool] = {}
    for column in columns:
        if not is_metric(column):
            raise InputError(f"IRF metrics: {column!r} is not a metric column")
        if column in out:
            raise InputError(f"IRF metrics: {column!r} is named twice")
        m = metric(column)
        if m.better == "none":
            raise InputError(f"IRF metrics: {column!r} has no better direction (it is a count or a neutral rate)")
        out[column] = m.higher_is_better
    return out


def irf_table_columns(metrics: MetricsSpec = None) -> tuple[str, ...]:
    """Required columns of an ``avv-score irf`` table for these IRF inputs."""
    return ("model", "vendor", *resolve_irf_metrics(metrics))


def metric_ranks(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Ranks (1 = best) of the present values, ties averaged; missing values stay missing."""
    numeric = pd.to_numeric(values, errors="coerce").astype(float)
    return numeric.rank(method="average", ascending=not higher_is_better, na_option="keep")


def irf_contributions(table: pd.DataFrame, metrics: MetricsSpec = None, *, k: float = IRF_K) -> pd.DataFrame:
    """Per-metric contributions ``1 / (rank + k)`` (0 where the value is missing), per model.

    ``table`` needs the IRF input columns (a missing column counts as all-missing) and optionally
    ``model`` (without it the whole table is one model).
    """
    inputs = resolve_irf_metrics(metrics)
    groups = (
        table.groupby("model", sort=False, dropna=False).groups
        if "model" in table.columns
        else {None: table.index}
    )
    out = pd.DataFrame(0.0, index=table.index, columns=list(inputs))
    for index in groups.values():
        part = table.loc[index]
        for column, higher in inputs.items():
            if column not in part.columns:
                continue
            ranks = metric_ranks(part[column], higher)
            out.loc[index, column] = (1.0 / (ranks + k)).fillna(0.0)
    return out


def irf_scores(table: pd.DataFrame, metrics: MetricsSpec = None, *, k: float = IRF_K) -> pd.Series:
    """IRF per row of a per-vendor metrics table (see the module docstring for the formula).

    ``metrics`` = the IRF input columns (default: the registry's ``irf=True`` metrics). Returns a float
    Series named ``irf`` aligned with ``table``'s index, rounded to 12 decimals so that equal scores reached
    through different sums compare (and sort) as equal.
    """
    return irf_contributions(table, metrics, k=k).sum(axis=1).round(12).rename("irf")


def add_irf(table: pd.DataFrame, metrics: MetricsSpec = None, *, k: float = IRF_K) -> pd.DataFrame:
    """Copy of ``table`` with an ``irf`` column appended (replaced when present)."""
    out = table.copy()
    out["irf"] = irf_scores(table, metrics, k=k)
    return out


# ------------------------------------------------------------------------------------------ statistical ties


def tied_by_bootstrap(values: np.ndarray, draws: np.ndarray | None, level: float = 0.95) -> np.ndarray:
    """``(vendors, vendors)`` bool: vendors u and v are tied on one metric (module docstring). ``values`` = the
    observed values; ``draws`` = ``(resamples, vendors)`` paired bootstrap values, or None (not resampled: tied only
    when equal). A pair without a present draw of its difference is tied only when equal."""
    x = np.asarray(values, dtype=float)
    equal = x[:, None] == x[None, :]
    if draws is None or not np.size(draws):
        return equal
    d = np.asarray(draws, dtype=float)
    diff = d[:, :, None] - d[:, None, :]  # (resamples, v, u)
    present = ~np.isnan(diff).all(axis=0)
    low = np.full(equal.shape, np.nan)
    high = np.full(equal.shape, np.nan)
    if present.any():
        cut = diff[:, present]
        low[present] = np.nanpercentile(cut, 50.0 * (1.0 - level), axis=0)
        high[present] = np.nanpercentile(cut, 50.0 * (1.0 + level), axis=0)
    return np.where(present, (low <= 0.0) & (high >= 0.0), equal)


def statistical_ranks(values: np.ndarray, tied: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ranks (1 = best) with statistical ties: ``1 + #{separated and better} + ½ · #{other tied}``; a missing value
    is unranked (NaN) and counts for no other vendor."""
    x = np.asarray(values, dtype=float)
    present = ~np.isnan(x)
    n = len(x)
    other = present[None, :] & ~np.eye(n, dtype=bool)
    better = (x[None, :] > x[:, None]) if higher_is_better else (x[None, :] < x[:, None])
    ties = tied & other
    ranks = 1.0 + (better & ~tied & other).sum(axis=1) + 0.5 * ties.sum(axis=1)
    return np.where(present, ranks, np.nan)


def statistical_irf(values: Mapping[str, np.ndarray], draws: Mapping[str, np.ndarray | None],
                    metrics: Mapping[str, bool], level: float = 0.95,
                    *, k: float = IRF_K) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """IRF over statistical ranks for one model's vendors (module docstring), and per metric the tie matrix.
    ``values`` / ``draws``: metric → the vendors' observed values / their paired bootstrap draws (None: not
    resampled); ``metrics`` = the IRF inputs (column → higher is better)."""
    total: np.ndarray | None = None
    tied_of: dict[str, np.ndarray] = {}
    for column, higher in metrics.items():
        x = np.asarray(values[column], dtype=float)
        tied_of[column] = tied = tied_by_bootstrap(x, draws.get(column), level)
        part = np.nan_to_num(1.0 / (statistical_ranks(x, tied, higher) + k), nan=0.0)
        total = part if total is None else total + part
    return (np.zeros(0) if total is None else total.round(12)), tied_of
