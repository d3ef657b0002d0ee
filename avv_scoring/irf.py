"""IRF (Inverse Rank Fusion): the AVV fusion score over six per-vendor metrics.

For each model separately and for each metric m of :data:`IRF_METRICS`, the vendors that have a value
for m are ranked (1 = best: descending for F1, success rate, schema accuracy and TPS; ascending for
avg tokens and avg TTFT). Tied vendors all get the **average** of the ranks they span (standard
fractional ranking: two vendors tied for first both get 1.5). Then::

    IRF(vendor) = Σ_m 1 / (rank_m(vendor) + k),   k = 5

summed over the metrics where the vendor has a value: a missing value contributes nothing, which is
worse than the last rank. With six metrics IRF lies in (0, 1]. Averaged ties reproduce all eight
tables published by Agent Vendor Verifier exactly (to 4 decimals); competition ("1224"), dense,
max and ordinal ranking do not.
"""

from __future__ import annotations

import pandas as pd

#: metric column → True when higher is better.
IRF_METRICS: dict[str, bool] = {
    "f1": True,
    "success_rate": True,
    "schema_accuracy": True,
    "tps": True,
    "avg_tokens": False,
    "avg_ttft_ms": False,
}
IRF_K = 5.0
#: Column order of the ``avv-score irf`` input table.
IRF_TABLE_COLUMNS = (
    "model",
    "vendor",
    "success_rate",
    "f1",
    "schema_accuracy",
    "avg_tokens",
    "avg_ttft_ms",
    "tps",
)


def metric_ranks(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Ranks (1 = best) of the present values, ties averaged; missing values stay missing."""
    numeric = pd.to_numeric(values, errors="coerce").astype(float)
    return numeric.rank(method="average", ascending=not higher_is_better, na_option="keep")


def irf_contributions(table: pd.DataFrame, k: float = IRF_K) -> pd.DataFrame:
    """Per-metric contributions ``1 / (rank + k)`` (0 where the value is missing), per model.

    ``table`` needs the :data:`IRF_METRICS` columns (a missing column counts as all-missing) and
    optionally ``model`` (without it the whole table is one model).
    """
    groups = (
        table.groupby("model", sort=False, dropna=False).groups
        if "model" in table.columns
        else {None: table.index}
    )
    out = pd.DataFrame(0.0, index=table.index, columns=list(IRF_METRICS))
    for index in groups.values():
        part = table.loc[index]
        for metric, higher in IRF_METRICS.items():
            if metric not in part.columns:
                continue
            ranks = metric_ranks(part[metric], higher)
            out.loc[index, metric] = (1.0 / (ranks + k)).fillna(0.0)
    return out


def irf_scores(table: pd.DataFrame, k: float = IRF_K) -> pd.Series:
    """IRF per row of a per-vendor metrics table (see the module docstring for the formula).

    Returns a float Series named ``irf`` aligned with ``table``'s index, rounded to 12 decimals so that
    equal scores reached through different sums compare (and sort) as equal.
    """
    return irf_contributions(table, k).sum(axis=1).round(12).rename("irf")


def add_irf(table: pd.DataFrame, k: float = IRF_K) -> pd.DataFrame:
    """Copy of ``table`` with an ``irf`` column appended (replaced when present)."""
    out = table.copy()
    out["irf"] = irf_scores(table, k)
    return out
