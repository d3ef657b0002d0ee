"""Cost metrics (scoring layer): what an item cost each vendor, on the items every vendor answered, and what the
run spent on it. A record's ``cost`` is its usage at its vendor's price (:mod:`avv_core.pricing`); without prices
every cost metric is missing, never 0. The report's Cost section shows them (:mod:`avv_scoring.report.sections.cost`).
"""

from __future__ import annotations

import pandas as pd

from avv_scoring.load import numeric
from avv_scoring.metrics.additive import NAN, Columns, Sums, additive, count, rate
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.headline import mean_features
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.trajectories import TJ, TJ_SPENT


@produces(
    Metric("avg_cost", "Cost / Item", "num", "lower", order=405,
           doc="mean cost over compared items (successful for every vendor of the model) that have one (a price and "
               "usage); an agent task's first step; missing without a price"),
    Metric("cost_rows", "Cost rows", "int", "none", order=406, doc="compared items with a cost"),
)
@additive(lambda rows: mean_features(rows, "cost"))
def avg_cost(sums: Sums) -> Columns:
    """Mean cost per item, in the vendors' price currency (the record's ``cost``: its usage at its vendor's price).

    ``avg_cost = mean(cost)`` over the *compared* items whose ``cost`` is present (``cost_rows``), like
    ``avg_tokens``: items every vendor of the model answered, so a vendor cannot look cheap by failing the long
    requests. Missing (never 0) for a vendor without a price or without usage.
    """
    n = count(sums["present"])
    return {"avg_cost": rate(sums["value"], n), "cost_rows": n}


@produces(
    Metric("cost_spent", "Spent", "num", "none", order=407,
           doc="Σ cost of every scored row: failed items and every step of an agent task included (what the vendor "
               "billed for the scored items); missing when no row has a cost"),
)
def cost_spent(rows: pd.DataFrame) -> Columns:
    """``cost_spent = Σ cost`` over the vendor's scored rows: each single request's row (failed ones too: a vendor
    bills what it streamed) and every step of each agent task (``_tj_spent``). Not a ranking (a vendor that answered
    more items spent more), so it has no direction. Missing when no row has a cost (no price)."""
    single = numeric(rows["cost"]) if "cost" in rows.columns \
        else pd.Series(NAN, index=rows.index)
    if TJ in rows.columns:
        steps = numeric(rows[TJ_SPENT])
        single = single.where(~rows[TJ].astype(bool), steps)
    present = single.dropna()
    return {"cost_spent": float(present.sum()) if len(present) else NAN}
