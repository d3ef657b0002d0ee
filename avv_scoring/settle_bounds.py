"""Settling a vendor's verdict while its run goes on (scoring layer, pure: records in, numbers out; no I/O).

``--avv-settle`` asks two things of scoring, answered here from the registry so that the harness knows no
metric by name: which verdict bounds in force can be settled (:func:`settle_bounds`: those whose metric declares
a :class:`~avv_scoring.metrics.declaration.Ratio` form), and each item's numerator and denominator parts of such a
metric (:func:`item_parts`: the metric's own additive features, so the parts add up to exactly the sums the
score is computed from). The test itself is :mod:`avv_scoring.stats.sequential`; docs/scoring.md ("Settling a
verdict early") has the formulas.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from avv_core.json_types import JSONMapping
from avv_core.record_file import coerce_frame
from avv_core.records import COLUMN_NAMES, to_csv_row
from avv_scoring.decision import DEFECT_TOLERANCE
from avv_scoring.load import ToolsBySample
from avv_scoring.metrics.declaration import Ratio
from avv_scoring.metrics.headline import annotate_tool_calls
from avv_scoring.metrics.registry import function_of, metric
from avv_scoring.stats.sequential import RatioBound
from avv_scoring.verdict import Thresholds, margin_text


def settle_bounds(thresholds: Thresholds | None = None) -> tuple[list[RatioBound], list[str]]:
    """The bounds in force (``--avv-thresholds``; default: the registry's) that can be settled, and the text of
    those that cannot (no ratio form: they keep a PASS open until the end; a FAIL can still settle). A defect check
    (``Metric.defect``, bound ``≤ 0``) carries :data:`~avv_scoring.decision.DEFECT_TOLERANCE`: it is met once its
    upper bound is below it, so a clean vendor can settle."""
    thresholds = thresholds if thresholds is not None else Thresholds()
    tested: list[RatioBound] = []
    untested: list[str] = []
    for column, kind, limit in thresholds.checks():
        if metric(column).needs == "conformance":  # judged on a conformance run only, never in a verify run
            continue
        ratio = metric(column).ratio
        if ratio is None:
            untested.append(f"{column} {'≥' if kind == 'min' else '≤'} {limit:g}")
        else:
            defect = bool(metric(column).defect) and kind == "max" and limit <= 0
            tested.append(RatioBound(column, "min" if kind == "min" else "max", limit, ratio.item_max, ratio.item_max,
                                     tolerance=DEFECT_TOLERANCE if defect else None))
    untested += [margin_text(column, margin) for column, margin in thresholds.margins()]  # against the baseline
    return tested, untested


def records_frame(records: Iterable[JSONMapping]) -> pd.DataFrame:
    """Records (dicts of typed values) typed exactly as records.csv's reader types them (one row per record)."""
    rows = [to_csv_row(record) for record in records]
    frame = coerce_frame(pd.DataFrame(rows, columns=list(COLUMN_NAMES)))
    frame["repeat"] = frame["repeat"].fillna(1)
    return frame.reset_index(drop=True)


def item_parts(column: str, rows: pd.DataFrame, baseline_rows: pd.DataFrame,
               tools_by_sample: ToolsBySample | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``rows`` (one item each, in their order): the numerator and denominator parts ``(a, b)`` of
    ``column``'s ratio form, from the metric's additive features (with the baseline's rows when it needs them).
    An item whose denominator exceeds the form's ``item_max`` is weighted down to it (both parts scaled)."""
    ratio: Ratio | None = metric(column).ratio
    if ratio is None:
        raise ValueError(f"{column} has no ratio form")
    function = function_of(column)
    form = function.additive
    if form is None:
        raise ValueError(f"{column}: its function has no additive form")
    rows = annotate_tool_calls(rows, tools_by_sample)
    if function.inputs == "rows+baseline":
        features = form.features(rows, annotate_tool_calls(baseline_rows, tools_by_sample))
    else:
        features = form.features(rows)
    features = features.reindex(rows.index).fillna(0)
    a, b = ratio.parts(features)
    scale = np.where(b > ratio.item_max, ratio.item_max / np.maximum(b, 1e-12), 1.0)
    return a * scale, b * scale


__all__ = ["item_parts", "records_frame", "settle_bounds"]
