"""The field's figures (report section): per model and vendor the numbers buyers meet elsewhere, from the registry's
``group="field"`` metrics — billing honesty (prompt tokens against the baseline's on the same items: median, IQR,
and whether it is past the model's tolerance), OpenRouter's tool-call error classes (per call and per request) next
to our schema accuracy, and gpt-oss's pass@k / pass^k next to the success rate. Definitions: docs/scoring.md.
report.md and report.html show the table; the terminal only for a model with a vendor flagged on billing.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_scoring.metrics.billing import flagged
from avv_scoring.metrics.registry import group_metrics
from avv_scoring.report.escape import html_text, markdown_table
from avv_scoring.report.format import Column, Palette, html_table, metric_column, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts
from avv_scoring.score import ScoreResult

TITLE = "Billing honesty, OpenRouter error classes, pass@k"
#: Our figures shown beside the field's (their definitions differ: docs/scoring.md).
BESIDE: tuple[str, ...] = ("success_rate", "schema_accuracy")
NOTE = ("prompt tokens against the baseline's on the same items (flagged past the model's tolerance); tool calls as "
        "OpenRouter classes them (Draft 7), beside our schema accuracy; gpt-oss's pass@k and pass^k over the k "
        "repeats, beside the success rate")


#: The columns the terminal shows (the table is wide): the field's rates and the billing figures.
TERMINAL: tuple[str, ...] = ("pass_at_k", "pass_hat_k", "openrouter_call_error_rate", "openrouter_request_error_rate",
                             "prompt_tokens_ratio")


@dataclass(frozen=True)
class ModelField:
    """One model's part: the table and the billing tolerance of the model."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    tolerance: float
    flagged: tuple[str, ...]  # vendors past the tolerance
    terminal_columns: tuple[int, ...]  # the positions of the columns the terminal shows


def _layout() -> tuple[Column, ...]:
    return (*(metric_column(c) for c in BESIDE), *(Column(m.header, m.column, m.fmt) for m in group_metrics("field")))


def _billing_cell(row: JSONMapping, tolerance: float) -> str:
    if row.get("is_baseline"):
        return "reference"
    return "FLAGGED" if flagged(row.get("prompt_tokens_ratio"), tolerance) else "ok"


def model_field(result: ScoreResult, model: str) -> ModelField | None:
    rows = frame_records(result.model_scores(model))
    if not rows:
        return None
    layout, tolerance = _layout(), result.billing.of(model)
    body = tuple((vendor_label(r), *(c.cell(r) for c in layout), _billing_cell(r, tolerance)) for r in rows)
    headers = ("Vendor", *(c.header for c in layout), f"Billing ±{tolerance:.0%}")
    shown = (0, *(i + 1 for i, c in enumerate(layout) if c.column in TERMINAL), len(headers) - 1)
    return ModelField(headers, body, tolerance,
                      tuple(str(r["vendor"]) for r in rows if _billing_cell(r, tolerance) == "FLAGGED"), shown)


def _flags(part: ModelField) -> str:
    if not part.flagged:
        return ""
    return f" Billing flagged: {', '.join(part.flagged)} (prompt tokens past ±{part.tolerance:.0%} of the baseline's)."


def markdown(part: ModelField) -> list[str]:
    return [f"{TITLE} ({NOTE}).{_flags(part)}", markdown_table(part.headers, part.rows)]


def html(parts: Parts[ModelField], palette: Palette) -> str:
    return "".join(f"<h3>{html_text(model)}</h3><p class=meta>{html_text(NOTE.capitalize() + '.' + _flags(part))}</p>"
                   + html_table(part.headers, part.rows) for model, part in parts)


def terminal(parts: Parts[ModelField]) -> list[str]:
    """Only a model with a vendor flagged on billing: the terminal ends with the decision and keeps only what a
    person must act on (every figure is in report.md and report.html)."""
    out: list[str] = []
    for model, part in parts:
        if not part.flagged:
            continue
        pick = part.terminal_columns
        out += [f"{model}  pass@k, OpenRouter's error classes, billing (all columns: report.md){_flags(part)}",
                *terminal_table([part.headers[i] for i in pick], [[row[i] for i in pick] for row in part.rows]), ""]
    return out


SECTION = ModelSection("field_figures", TITLE, 45, model_field, markdown, html, terminal)
