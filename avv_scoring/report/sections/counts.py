"""Counts, excluded and missing (report section, report.md only): per model and vendor the registry's ``count=True``
metrics (items, failures, excluded pairs…) and the IRF inputs it lacks."""

from __future__ import annotations

from avv_core.frame_rows import frame_records
from avv_core.measures import is_missing
from avv_scoring.metrics.registry import count_metrics
from avv_scoring.report.escape import markdown_table
from avv_scoring.report.format import Column, fmt
from avv_scoring.report.section import ModelSection, Table
from avv_scoring.score import ScoreResult

#: The registry's ``count=True`` metrics (header, column, format).
COUNT_LAYOUT: tuple[Column, ...] = tuple(Column(m.header, m.column, m.fmt) for m in count_metrics())


def _cell(value: object, column: Column) -> str:
    if column.kind == "text":  # e.g. error_kinds: empty when there is nothing to list
        return "" if is_missing(value) else str(value)
    return fmt(value, column.kind)


def model_counts(result: ScoreResult, model: str) -> Table:
    rows = frame_records(result.model_scores(model))
    headers = ("Vendor", *(c.header for c in COUNT_LAYOUT), "Missing IRF inputs")
    body = tuple(
        (str(row["vendor"]), *(_cell(row.get(c.column), c) for c in COUNT_LAYOUT),
         ", ".join(m for m in result.irf_metrics if is_missing(row.get(m))) or "none")
        for row in rows
    )
    return Table(headers, body)


def markdown(part: Table) -> list[str]:
    return ["Counts (excluded and missing):", markdown_table(part.headers, part.rows)]


SECTION = ModelSection("counts", "Counts (excluded and missing)", 60, model_counts, markdown)
