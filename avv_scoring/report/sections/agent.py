"""Agent trajectories (report section; runs with agent tasks only): per model the registry's ``group="agent"``
metrics (:mod:`avv_scoring.metrics.trajectories`) of every vendor.

report.md and report.html: the whole table; report.html adds a figure (completion, recovery and loop rate per
vendor; the steps of each completed task). Terminal: the headline columns (:data:`TERMINAL_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.metrics.registry import group_metrics
from avv_scoring.metrics.trajectories import ENDS, TJ, TJ_END, TJ_STEPS
from avv_scoring.report.escape import html_text, markdown_table
from avv_scoring.report.format import Column, Palette, figure, html_table, note, png, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

TITLE = "Agent trajectories"
#: Columns of the terminal table: the headline trajectory metrics.
TERMINAL_COLUMNS = ("task_completion_rate", "avg_steps", "steps_delta", "recovery_rate", "loop_rate",
                    "avg_task_tokens", "avg_task_wall_s", "trajectory_ends")

Row = JSONMapping


def agent_layout(columns: Sequence[str] | None = None) -> list[Column]:
    """The agent metrics' columns, in registry order (only ``columns`` when given)."""
    return [Column(m.header, m.column, m.fmt) for m in group_metrics("agent") if columns is None or m.column in columns]


def has_trajectories(rows: Sequence[Row]) -> bool:
    return any(not is_missing(r.get("trajectories")) and r.get("trajectories") for r in rows)


@dataclass(frozen=True)
class ModelAgent:
    """One model's part: its score rows and the step counts of every completed task."""

    rows: tuple[Row, ...]  # the model's score rows
    completed_steps: Mapping[str, list[float]] | None  # vendor → steps of each completed task; None: no trajectory


def model_agent(result: ScoreResult, model: str) -> ModelAgent | None:
    """None when the model has no agent task."""
    rows = tuple(frame_records(result.model_scores(model)))
    if not has_trajectories(rows):
        return None
    records = result.records
    tj = pd.DataFrame()
    if records is not None and TJ in records.columns:
        mine = of_model(records, model)
        tj = mine[mine[TJ].astype(bool)]
    steps = None
    if not tj.empty:
        steps = {}
        for vendor in (str(r["vendor"]) for r in rows):
            done = tj[(tj["vendor"].astype(str) == vendor) & (tj[TJ_END] == "completed")][TJ_STEPS]
            steps[vendor] = pd.to_numeric(done, errors="coerce").dropna().tolist()
    return ModelAgent(rows, steps)


def _table(part: ModelAgent, layout: Sequence[Column]) -> tuple[list[str], list[list[str]]]:
    return (["Vendor", *(c.header for c in layout)],
            [[vendor_label(row), *(c.cell(row) for c in layout)] for row in part.rows])


def markdown(part: ModelAgent) -> list[str]:
    return [f"{TITLE} (one per agent task and repeat; per-item metrics above read each task's first step; "
            "definitions in docs/scoring.md, tasks that end otherwise than the baseline's in disagreements.csv):",
            markdown_table(*_table(part, agent_layout()))]


def terminal(parts: Parts[ModelAgent]) -> list[str]:
    out: list[str] = []
    layout = agent_layout(TERMINAL_COLUMNS)
    for model, part in parts:
        headers, body = _table(part, layout)
        out += [f"{model}  {TITLE.lower()}", *terminal_table(headers, body, left=(0, len(headers) - 1)), ""]
    return out


def _figure(model: str, part: ModelAgent, palette: Palette) -> str:
    rows = part.rows
    fig, axes = figure(1, 2, height=3.2, width=11)
    vendors = [str(r["vendor"]) for r in rows]
    rates = (("task_completion_rate", "completion"), ("recovery_rate", "recovery"), ("loop_rate", "loops"))
    width = 0.8 / len(rates)
    for i, (column, label) in enumerate(rates):
        values = [0.0 if is_missing(r.get(column)) else float(r[column]) for r in rows]
        axes[0][0].bar([x + i * width for x in range(len(vendors))], values, width, label=label)
    axes[0][0].set_xticks([x + width for x in range(len(vendors))], vendors, fontsize=8)
    axes[0][0].set_ylim(0, 1.05)
    axes[0][0].set_title(f"{model}: completion, recovery, loops (missing shown as 0)", fontsize=10)
    axes[0][0].legend(fontsize=8)
    ax = axes[0][1]
    if part.completed_steps is None:
        note(ax, "no trajectories")
    else:
        xs: list[float] = []
        ys: list[float] = []
        colours = []
        for i, vendor in enumerate(vendors):  # one collection of points for every vendor
            steps = list(part.completed_steps[vendor])
            xs += [i + (j % 7 - 3) * 0.04 for j in range(len(steps))]
            ys += steps
            colours += [palette.get(vendor, "#444")] * len(steps)
        if xs:
            ax.scatter(xs, ys, s=14, color=colours)
        ax.set_xticks(range(len(vendors)), vendors, fontsize=8)
        ax.set_ylabel("steps")
        ax.set_ylim(bottom=0)
        ax.set_title("steps of each completed task", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    return png(fig, f"{model}: agent trajectories")


def html(parts: Parts[ModelAgent], palette: Palette) -> str:
    layout = agent_layout()
    intro = ("<p class=meta>One trajectory per agent task and repeat, followed step by step; the per-item tables above "
             "read each task's first step. Ends: " + ", ".join(ENDS) + " (docs/scoring.md). Tasks that end otherwise "
             "than the baseline's are in disagreements.csv.</p>")
    return intro + "".join(f"<h3>{html_text(model)}</h3>" + html_table(*_table(part, layout))
                           + _figure(model, part, palette) for model, part in parts)


SECTION = ModelSection("agent", TITLE, 80, model_agent, markdown, html, terminal)
