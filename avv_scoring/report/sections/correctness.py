"""Tool-call correctness (report section, report.md only): per model and vendor the registry's
``group="correctness"`` metrics (against the baseline over call pairs, and against the samples' gold labels), when
any of them is non-zero."""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.frame_rows import frame_records
from avv_core.measures import is_missing
from avv_scoring.metrics.registry import group_metrics
from avv_scoring.report.escape import markdown_table
from avv_scoring.report.format import Column, vendor_label
from avv_scoring.report.section import ModelSection, Table
from avv_scoring.score import ScoreResult

#: The registry's ``group="correctness"`` metrics (header, column, format).
CORRECTNESS_LAYOUT: tuple[Column, ...] = tuple(Column(m.header, m.column, m.fmt)
                                               for m in group_metrics("correctness"))


@dataclass(frozen=True)
class Correctness:
    """One model's table and the argument normalisers its values were compared with."""

    table: Table
    normalisers: str  # ArgNormalisation.text()


def model_correctness(result: ScoreResult, model: str) -> Correctness | None:
    """None when every correctness value of the model is missing or zero."""
    rows = frame_records(result.model_scores(model))
    values = [row.get(c.column) for row in rows for c in CORRECTNESS_LAYOUT]
    if not any(not is_missing(v) and v != 0 for v in values):
        return None
    return Correctness(Table(("Vendor", *(c.header for c in CORRECTNESS_LAYOUT)),
                             tuple((vendor_label(row), *(c.cell(row) for c in CORRECTNESS_LAYOUT)) for row in rows)),
                       result.arg_normalise.text())


def markdown(part: Correctness) -> list[str]:
    return ["Tool-call correctness (against the baseline over call pairs, and against the samples' gold labels; "
            "definitions in docs/scoring.md). Argument values normalised before Args Match, Args F1 and Gold Args "
            f"F1: {part.normalisers}; Gold Args Acc compares exact values:",
            markdown_table(part.table.headers, part.table.rows)]


SECTION = ModelSection("correctness", "Tool-call correctness", 70, model_correctness, markdown)
