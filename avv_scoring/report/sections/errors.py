"""Errors and anomalies (report section, report.html only): per model and vendor the failed items per
``error_kind`` (after retries) and the anomaly flags per kind (on any response, successful or not), counted from
the records; figure (when there is any): both as stacked bars."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_core.records import ANOMALIES, ERROR_KINDS
from avv_scoring.report.escape import html_text
from avv_scoring.report.format import Palette, figure, html_table, metric_cell, note, png
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class ModelErrors:
    """One model's part: per vendor (in score order) its items and its error and anomaly counts."""

    vendors: tuple[str, ...]
    rows: tuple[JSONMapping, ...]  # each vendor's score row
    errors: tuple[dict[str, int], ...]  # each vendor's failed items per error_kind
    anomalies: tuple[dict[str, int], ...]  # each vendor's anomaly flags per kind


def _kind_counts(rows: pd.DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    kinds = rows["error_kind"].astype("object").dropna().astype(str)
    errors = {k: int(v) for k, v in kinds[kinds != ""].value_counts().items()}
    anomalies: dict[str, int] = {}
    for cell in rows["anomalies"].astype("object").dropna().astype(str):
        for flag in filter(None, cell.split(";")):
            anomalies[flag] = anomalies.get(flag, 0) + 1
    return errors, anomalies


def model_errors(result: ScoreResult, model: str) -> ModelErrors | None:
    if result.records is None or result.records.empty:
        return None
    records = of_model(result.records, model)
    records = records[[c for c in ("vendor", "error_kind", "anomalies") if c in records.columns]]  # those read
    scores = frame_records(result.model_scores(model))
    vendors = tuple(str(r["vendor"]) for r in scores)
    vendor_col = records["vendor"].astype(str)
    counts = [_kind_counts(records[vendor_col == vendor]) for vendor in vendors]
    return ModelErrors(vendors, tuple(scores), tuple(e for e, _ in counts), tuple(a for _, a in counts))


def _stacked(ax: Axes, vendors: list[str], counts: Sequence[dict[str, int]], order: Sequence[str], title: str) -> None:
    kinds = [k for k in order if any(c.get(k) for c in counts)]
    kinds += sorted({k for c in counts for k in c} - set(kinds))
    if not kinds:
        note(ax, f"no {title.lower()}")
        ax.set_title(title, fontsize=10)
        return
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    left = np.zeros(len(vendors))
    for i, kind in enumerate(kinds):
        values = np.array([c.get(kind, 0) for c in counts], dtype=float)
        ax.barh(vendors[::-1], values[::-1], left=left[::-1], label=kind, color=cmap(i % 20))
        left += values
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("count")
    ax.legend(fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)


def html(parts: Parts[ModelErrors], palette: Palette) -> str:
    blocks = []
    for model, part in parts:
        vendors = list(part.vendors)
        error_kinds = sorted({k for c in part.errors for k in c}, key=lambda k: list(ERROR_KINDS).index(k)
                             if k in ERROR_KINDS else len(ERROR_KINDS))
        anomaly_kinds = sorted({k for c in part.anomalies for k in c})
        headers = ["Vendor", "Items", *(f"error: {k}" for k in error_kinds), *(f"anomaly: {k}" for k in anomaly_kinds)]
        body = [[v, metric_cell(row, "items"), *(str(e.get(k, 0)) for k in error_kinds),
                 *(str(a.get(k, 0)) for k in anomaly_kinds)]
                for v, row, e, a in zip(vendors, part.rows, part.errors, part.anomalies, strict=True)]
        if error_kinds or anomaly_kinds:
            fig, axes = figure(1, 2, height=max(2.4, 0.5 * len(vendors) + 1.2))
            _stacked(axes[0][0], vendors, part.errors, list(ERROR_KINDS), "Failed items by error_kind")
            _stacked(axes[0][1], vendors, part.anomalies, list(ANOMALIES), "Anomalies by kind")
            shown = png(fig, f"{model}: errors and anomalies",
                        "Failed items per error_kind (after retries); anomaly flags on responses, success or not.")
        else:  # two empty panels would say only this
            shown = "<p class=meta>No failed item and no anomaly flag.</p>"
        blocks.append(f"<h3>{html_text(model)}</h3>" + html_table(headers, body) + shown)
    return "".join(blocks)


SECTION = ModelSection("errors", "Errors and anomalies", 40, model_errors, html=html)
