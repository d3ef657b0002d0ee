"""Tool-call correctness (report section, report.md only): per model and vendor the registry's
``group="correctness"`` metrics (against the baseline over call pairs, and against the samples' gold labels), when
any of them is non-zero."""

from __future__ import annotations

from avv_core.measures import is_missing
from avv_scoring.metrics.registry import group_metrics
from avv_scoring.report.escape import markdown_table
from avv_scoring.report.format import Column, vendor_label
from avv_scoring.report.section import ModelSection, Table
from avv_scoring.score import ScoreResult

#: The registry's ``group="correctness"`` metrics (header, column, format).
CORRECTNESS_LAYOUT: tuple[Column, ...] = tuple(Column(m.header, m.column, m.fmt)
                                               for m in group_metrics("correctness"))


def model_correctness(result: ScoreResult, model: str) -> Table | None:
    """None when every correctness value of the model is missing or zero."""
    rows = result.model_scores(model).to_dict("records")
    values = [row.get(c.column) for row in rows for c in CORRECTNESS_LAYOUT]
    if not any(not is_missing(v) and v != 0 for v in values):
        return None
    return Table(("Vendor", *(c.header for c in CORRECTNESS_LAYOUT)),
                 tuple((vendor_label(row), *(c.cell(row) for c in CORRECTNESS_LAYOUT)) for row in rows))


def markdown(part: Table) -> list[str]:
    return ["Tool-call correctness (against the baseline over call pairs, and against the samples' gold labels; "
            "definitions in docs/scoring.md):", markdown_table(part.headers, part.rows)]


SECTION = ModelSection("correctness", "Tool-call correctness", 70, model_correctness, markdown)
