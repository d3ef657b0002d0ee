"""Repeats: spread of each metric (report section, report.html only): per model and vendor each per-repeat metric
of the headline table, mean ± std over the repeats; figure (two repeats or more): one point per repeat,
the line at their mean.
(report.md shows the same means and spreads as lines under its scores table: :mod:`.scores`.)"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import per_repeat_metrics
from avv_scoring.report.escape import html_text
from avv_scoring.report.format import MISSING, Palette, figure, fmt, html_table, numbers, png
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.report.sections.scores import TABLE_LAYOUT
from avv_scoring.score import ScoreResult


def shown_metrics() -> list[Metric]:
    """The per-repeat metrics of the headline table (else the first six per-repeat metrics)."""
    shown = [m for m in per_repeat_metrics() if m.column in {c.column for c in TABLE_LAYOUT}]
    return shown or list(per_repeat_metrics())[:6]


@dataclass(frozen=True)
class ModelRepeats:
    """One model's part: its per-repeat rows and its score rows (with each metric's ``_mean`` and ``_std``)."""

    by_repeat: pd.DataFrame  # the model's rows of ScoreResult.by_repeat
    rows: tuple[JSONMapping, ...]  # the model's score rows


def model_repeats(result: ScoreResult, model: str) -> ModelRepeats | None:
    if not result.scored or result.by_repeat is None or result.by_repeat.empty:
        return None
    return ModelRepeats(of_model(result.by_repeat, model), tuple(frame_records(result.model_scores(model))))


def _spread(row: JSONMapping, m: Metric) -> str:
    mean, std = row.get(f"{m.column}_mean"), row.get(f"{m.column}_std")
    if is_missing(mean):
        return MISSING
    return fmt(mean, m.fmt) if is_missing(std) else f"{fmt(mean, m.fmt)} ± {fmt(std, 'num')}"


def _figure(model: str, table: pd.DataFrame, vendors: list[str], shown: list[Metric], palette: Palette) -> str:
    """One axes per metric: a point per repeat and vendor (one collection), a line at each vendor's mean."""
    cols = 3
    rows = (len(shown) + cols - 1) // cols
    fig, axes = figure(rows, cols, height=2.6)
    vendor_col = table["vendor"].astype(str)
    for i, m in enumerate(shown):
        ax = axes[i // cols][i % cols]
        xs: list[float] = []
        ys: list[float] = []
        colours = []
        means = []
        for x, vendor in enumerate(vendors):
            values = numbers(table.loc[vendor_col == vendor, m.column])
            if values.size:
                xs += [x] * values.size
                ys += values.tolist()
                colours += [palette[vendor]] * values.size
                means.append((x, values.mean(), palette[vendor]))
        if xs:
            ax.scatter(xs, ys, color=colours, alpha=0.8, s=22)
            ax.hlines([y for _, y, _ in means], [x - 0.25 for x, _, _ in means], [x + 0.25 for x, _, _ in means],
                      colors=[c for _, _, c in means])
        ax.set_xticks(range(len(vendors)), vendors, fontsize=8, rotation=20)
        ax.set_title(m.header, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    for j in range(len(shown), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    return png(fig, f"{model}: per-repeat spread", "One point per repeat, the line at their mean.")


def html(parts: Parts[ModelRepeats], palette: Palette) -> str:
    shown = shown_metrics()
    blocks = []
    for model, part in parts:
        table = part.by_repeat
        vendors = [str(r["vendor"]) for r in part.rows]
        body = [[str(r["vendor"]), fmt(r.get("n_repeats"), "int"), *(_spread(r, m) for m in shown)]
                for r in part.rows]
        repeats = int(table["repeat"].nunique()) if len(table) else 0
        # one repeat: the points would only repeat the table's values, so no figure
        spread = (_figure(model, table, vendors, shown, palette) if repeats > 1 else
                  "<p class=meta>One repeat: no spread to show (run with --avv-repeats N for it).</p>")
        blocks.append(f"<h3>{html_text(model)}</h3>"
                      + html_table(["Vendor", "Repeats", *(m.header for m in shown)], body) + spread)
    return "".join(blocks)


SECTION = ModelSection("repeats", "Repeats: spread of each metric", 50, model_repeats, html=html)
