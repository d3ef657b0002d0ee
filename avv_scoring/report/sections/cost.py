"""Cost (report section; runs with prices only): per model and vendor what it cost per item and per completed agent
task — the registry's ``avg_cost`` and ``avg_task_cost`` — and what the run spent on it (``cost_spent``): the one place
the report says what was spent. Amounts are in the vendors' price currency (the config's ``price.currency``, one per
config; run.json lists each vendor's price). report.md, report.html and the terminal show the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.report.escape import html_text, markdown_table
from avv_scoring.report.format import Column, html_table, metric_column, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts
from avv_scoring.score import ScoreResult

TITLE = "Cost"
NOTE = ("per item and per task over the items every vendor "
        "answered and the tasks it completed; spent: every scored row, failed ones and every agent step included")


@dataclass(frozen=True)
class ModelCost:
    """One model's part: its score rows, the cost columns it has values for and the prices' currency."""

    rows: tuple[JSONMapping, ...]
    columns: tuple[Column, ...]
    unit: str


def _unit(currencies: tuple[str, ...]) -> str:
    """How the amounts are named: the run.json currency, or where to look when it is absent or mixed."""
    if len(currencies) == 1:
        return f"amounts in {currencies[0]}"
    if currencies:
        return "amounts in the vendors' price currencies (" + ", ".join(currencies) + "; run.json: vendors[].price)"
    return "amounts in the vendors' price currency (run.json: vendors[].price)"


def model_cost(result: ScoreResult, model: str) -> ModelCost | None:
    """None when no vendor of the model has a cost (no prices)."""
    rows = tuple(frame_records(result.model_scores(model)))
    if all(is_missing(r.get("cost_spent")) for r in rows):
        return None
    wanted = ["avg_cost", "cost_rows"]
    if any(not is_missing(r.get("avg_task_cost")) for r in rows):
        wanted.append("avg_task_cost")
    wanted.append("cost_spent")
    return ModelCost(rows, tuple(metric_column(c) for c in wanted), _unit(result.currencies))


def _table(part: ModelCost) -> tuple[list[str], list[list[str]]]:
    return (["Vendor", *(c.header for c in part.columns)],
            [[vendor_label(row), *(c.cell(row) for c in part.columns)] for row in part.rows])


def markdown(part: ModelCost) -> list[str]:
    return [f"{TITLE} ({part.unit}; {NOTE}):", markdown_table(*_table(part))]


def html(parts: Parts[ModelCost], _palette: object) -> str:
    return "".join(f"<h3>{html_text(model)}</h3><p class=meta>{html_text(part.unit.capitalize())}; {NOTE}.</p>"
                   + html_table(*_table(part)) for model, part in parts)


def terminal(parts: Parts[ModelCost]) -> list[str]:
    out: list[str] = []
    for model, part in parts:
        headers, body = _table(part)
        out += [f"{model}  cost ({part.unit})", *terminal_table(headers, body), ""]
    return out


SECTION = ModelSection("cost", TITLE, 55, model_cost, markdown, html, terminal)
