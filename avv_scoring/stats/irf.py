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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from avv_core.errors import InputError
from avv_scoring.metrics.registry import irf_inputs, is_metric, metric

IRF_K = 5.0


def default_irf_metrics() -> dict[str, bool]:
    """Metric column → True when higher is better: the default IRF inputs (registry ``irf=True``), in order."""
    return {m.column: m.higher_is_better for m in irf_inputs()}


def __getattr__(name: str) -> Any:
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
