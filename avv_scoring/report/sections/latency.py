"""Latency and throughput (report section, report.html only): per model and vendor the distribution (empirical CDF)
of TTFT and of per-request TPS over successful items, and the TTFT percentiles and TPS of the scores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_scoring.load import OK_COL, is_success
from avv_scoring.report.escape import html_text
from avv_scoring.report.format import (
    Column,
    Palette,
    figure,
    headers_of,
    html_table,
    metric_column,
    note,
    numbers,
    png,
    rows_of,
)
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: The table under the figure: the registered TTFT percentiles and TPS, in their registry formats.
COLUMNS: tuple[Column, ...] = (Column("Vendor", "vendor", "text"),
                               *(metric_column(c) for c in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p95_ms", "ttft_p99_ms",
                                                            "tps", "tps_p50")))
ECDF_POINTS = 2000  # a curve has at most this many steps (a million-record run draws as fast as a small one)


@dataclass(frozen=True)
class ModelLatency:
    """One model's part: per vendor the TTFT and TPS of its successful items, and its score rows."""

    samples: Mapping[str, tuple[np.ndarray, np.ndarray]]  # vendor → (TTFT ms, TPS) of its successful items
    rows: tuple[JSONMapping, ...]  # the model's score rows


def model_latency(result: ScoreResult, model: str) -> ModelLatency | None:
    if result.records is None or result.records.empty:
        return None
    records = of_model(result.records, model)
    records = records[[c for c in ("vendor", OK_COL, "status", "ttft_ms", "tps") if c in records.columns]]
    vendor_col = records["vendor"].astype(str)  # the few columns read, once: not every column per vendor
    samples = {}
    for vendor in (str(v) for v in result.model_scores(model)["vendor"]):
        rows = records[vendor_col == vendor]
        ok = rows[is_success(rows)]
        samples[vendor] = (numbers(ok["ttft_ms"]), numbers(ok["tps"]))
    return ModelLatency(samples, tuple(frame_records(result.model_scores(model))))


def _ecdf(ax: Axes, values: np.ndarray, label: str, colour: tuple[float, float, float, float]) -> None:
    if values.size:
        xs = np.sort(values)
        ys = np.arange(1, xs.size + 1) / xs.size
        if xs.size > ECDF_POINTS:  # the curve at evenly spaced quantiles: the same picture, bounded cost
            pick = np.linspace(0, xs.size - 1, ECDF_POINTS).round().astype(int)
            xs, ys = xs[pick], ys[pick]
        ax.step(xs, ys, where="post", label=f"{label} (n={values.size})", color=colour)


def html(parts: Parts[ModelLatency], palette: Palette) -> str:
    blocks = []
    headers = headers_of(COLUMNS)
    for model, part in parts:
        fig, axes = figure(1, 2)
        ttft_ax, tps_ax = axes[0]
        for vendor, (ttft, tps) in part.samples.items():
            _ecdf(ttft_ax, ttft, vendor, palette[vendor])
            _ecdf(tps_ax, tps, vendor, palette[vendor])
        for ax, title in ((ttft_ax, "TTFT (ms)"), (tps_ax, "TPS (tokens/s per request)")):
            ax.set_title(f"{model}: {title}, successful items", fontsize=10)
            ax.set_xlabel(title)
            ax.set_ylabel("share of items ≤ x")
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
            else:
                note(ax, "no successful item with a value")
        blocks.append(f"<h3>{html_text(model)}</h3>" + html_table(headers, rows_of(COLUMNS, part.rows))
                      + png(fig, f"{model}: TTFT and TPS distributions",
                            "Empirical CDF: the share of successful items at or below each value."))
    return "".join(blocks)


SECTION = ModelSection("latency", "Latency and throughput", 30, model_latency, html=html)
