"""IRF with statistical ties (report section; ``avv-score --irf-ties statistical``): per model, when the IRF over
statistically tied ranks orders or scores the vendors otherwise than the published IRF, both side by side with each
vendor's rank by either and the vendors it is tied with per metric (definition: :mod:`avv_scoring.stats.irf`).
Nothing is shown when both agree. Not on the terminal: its score table already shows both IRFs (the ties first)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from avv_core.measures import is_missing
from avv_scoring.report.format import fmt, vendor_label
from avv_scoring.report.section import Table, table_section
from avv_scoring.score import ScoreResult

INTRO = ("IRF with statistical ties (the default ranking): on each IRF input, vendors whose 95 % bootstrap "
         "interval of the difference contains 0 share their (average) rank; the published IRF ranks every "
         "difference, however small. Both are shown because they differ")


def _ranks(values: Sequence[float]) -> list[str]:
    ranks = pd.Series(values, dtype=float).rank(method="average", ascending=False)
    return [f"{r:g}" for r in ranks]


def model_irf_ties(result: ScoreResult, model: str) -> Table | None:
    rows = result.model_scores(model).to_dict("records")
    if not rows or all(is_missing(r.get("irf_statistical")) for r in rows):
        return None
    published = [float(r["irf"]) for r in rows]
    statistical = [float(r["irf_statistical"]) for r in rows]
    by_published, by_statistical = _ranks(published), _ranks(statistical)
    if by_published == by_statistical and all(abs(a - b) < 5e-5 for a, b in zip(published, statistical, strict=True)):
        return None
    return Table(("Vendor", "IRF", "Rank", "IRF (statistical ties)", "Rank (statistical ties)", "Tied with"),
                 tuple((vendor_label(r), fmt(r["irf"], "irf"), rp, fmt(r["irf_statistical"], "irf"), rs,
                        str(r.get("irf_tied_with") or "").replace(";", "; ") or "-")
                       for r, rp, rs in zip(rows, by_published, by_statistical, strict=True)))


SECTION = table_section("irf_ties", "IRF with statistical ties", 25, model_irf_ties, intro=INTRO, on_terminal=False)
