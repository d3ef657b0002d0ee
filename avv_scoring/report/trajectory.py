"""The agent-trajectory parts of the outputs (scoring layer, beside :mod:`.report` and :mod:`.report_html`): a
report.md section per model, a terminal table and a report.html section, each shown only when the run has agent
tasks; and the step-by-step view of one trajectory (``avv-score trajectory``).

The tables show the registry's ``group="agent"`` metrics (:mod:`avv_scoring.metrics.trajectories`) with their registered
headers and formats. :mod:`.report` and :mod:`.report_html` import this module; it imports them only inside its
functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from avv_core.measures import is_missing
from avv_scoring.metrics.registry import group_metrics
from avv_scoring.metrics.trajectories import ENDS, TJ, TJ_END, TJ_STEPS, step_numbers
from avv_scoring.report.escape import terminal_text

#: Columns of the terminal table (header, column, format): the headline trajectory metrics.
TERMINAL_COLUMNS = ("task_completion_rate", "avg_steps", "steps_delta", "recovery_rate", "loop_rate",
                    "avg_task_tokens", "avg_task_wall_s", "trajectory_ends")
CONTENT_SHOWN = 160  # characters of a tool answer or a final answer in the step-by-step view


def agent_layout(columns: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
    """(header, column, format) of the agent metrics, in registry order (only ``columns`` when given)."""
    return [(m.header, m.column, m.fmt) for m in group_metrics("agent") if columns is None or m.column in columns]


def has_trajectories(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(not is_missing(r.get("trajectories")) and r.get("trajectories") for r in rows)


def markdown_section(result: Any, model: str, rows: list[dict[str, Any]]) -> list[str]:
    """report.md, per model: the agent metrics of every vendor (nothing when the model has no agent task)."""
    from avv_scoring.report.outputs import _md_table, _vendor_label, fmt

    if not has_trajectories(rows):
        return []
    layout = agent_layout()
    body = [[_vendor_label(row)] + [fmt(row.get(c), k) for _, c, k in layout] for row in rows]
    return ["Agent trajectories (one per agent task and repeat; per-item metrics above read each task's first step; "
            "definitions in docs/scoring.md, tasks that end otherwise than the baseline's in disagreements.csv):",
            _md_table(["Vendor", *(h for h, _, _ in layout)], body)]


def terminal_lines(result: Any) -> list[str]:
    """The terminal's agent table per model that has agent tasks (left out otherwise)."""
    from avv_scoring.report.outputs import _vendor_label, fmt

    out: list[str] = []
    layout = agent_layout(TERMINAL_COLUMNS)
    for model in result.models:
        rows = result.model_scores(model).to_dict("records")
        if not has_trajectories(rows):
            continue
        header = ["Vendor", *(h for h, _, _ in layout)]
        body = [[terminal_text(_vendor_label(row))] + [fmt(row.get(c), k) for _, c, k in layout] for row in rows]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        out.append(f"{terminal_text(model)}  agent trajectories")
        for cells in [header, ["-" * w for w in widths], *body]:
            out.append("  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip())
        out.append("")
    return out


def html_section(result: Any, palette: dict[str, Any]) -> str | None:
    """report.html: per model the agent table and a figure (completion, recovery and loop rate per vendor; the
    steps of each completed task per vendor). None without agent tasks."""
    from avv_scoring.report.html import _figure, _note, _png, _section, _table, esc
    from avv_scoring.report.outputs import fmt

    if not result.scored or result.scores.empty or not has_trajectories(result.scores.to_dict("records")):
        return None
    layout = agent_layout()
    records = result.records
    parts = []
    for model in result.models:
        rows = result.model_scores(model).to_dict("records")
        if not has_trajectories(rows):
            continue
        body = [[str(row["vendor"]) + (" (baseline)" if row.get("is_baseline") else "")]
                + [fmt(row.get(c), k) for _, c, k in layout] for row in rows]
        fig, axes = _figure(1, 2, height=3.2, width=11)
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
        tj = pd.DataFrame()
        if records is not None and TJ in records.columns:
            tj = records[(records["model"].astype(str) == model) & records[TJ].astype(bool)]
        if tj.empty:
            _note(ax, "no trajectories")
        else:
            for i, vendor in enumerate(vendors):
                steps = tj[(tj["vendor"].astype(str) == vendor) & (tj[TJ_END] == "completed")][TJ_STEPS]
                ys = pd.to_numeric(steps, errors="coerce").dropna().tolist()
                ax.scatter([i + (j % 7 - 3) * 0.04 for j in range(len(ys))], ys, s=14, color=palette.get(vendor))
            ax.set_xticks(range(len(vendors)), vendors, fontsize=8)
            ax.set_ylabel("steps")
            ax.set_ylim(bottom=0)
            ax.set_title("steps of each completed task", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        parts.append(f"<h3>{esc(model)}</h3>" + _table(["Vendor", *(h for h, _, _ in layout)], body)
                     + _png(fig, f"{model}: agent trajectories"))
    intro = ("<p class=meta>One trajectory per agent task and repeat, followed step by step; the per-item tables above "
             "read each task's first step. Ends: " + ", ".join(ENDS) + " (docs/scoring.md). Tasks that end otherwise "
             "than the baseline's are in disagreements.csv.</p>")
    return _section("agent", "Agent trajectories", intro + "".join(parts)) if parts else None


# ------------------------------------------------------------------------------------------ one trajectory


def _cut(text: Any, chars: int = CONTENT_SHOWN) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def trajectory_steps(frame: pd.DataFrame, vendor: str, sample_id: str, repeat: int = 1) -> pd.DataFrame:
    """The step rows of one trajectory (the latest one of the item), ordered by step."""
    from avv_scoring.load import dedupe_latest

    rows = frame[(frame["vendor"].astype(str) == vendor) & (frame["sample_id"].astype(str) == str(sample_id))
                 & (pd.to_numeric(frame["repeat"].astype("object"), errors="coerce").fillna(1) == repeat)]
    rows = dedupe_latest(rows)
    return rows.assign(_s=step_numbers(rows)).sort_values("_s", kind="stable").drop(columns="_s")


def render_trajectory(steps: pd.DataFrame, end: str | None = None) -> str:
    """One trajectory step by step: status, finish, latency, tokens, the calls made and the answers played back;
    ``end`` = how it ended (:func:`avv_scoring.metrics.trajectories.summarise`), printed last."""
    if steps.empty:
        return "no such trajectory\n"
    first = steps.iloc[0]
    lines = [f"{first['model']}/{first['vendor']} · sample {first['sample_id']} · repeat {first['repeat']} · "
             f"{len(steps)} step(s)"]
    for row in steps.to_dict("records"):
        step = "-" if is_missing(row.get("step")) else int(row["step"])
        tokens = "n/a" if is_missing(row.get("total_tokens")) else int(row["total_tokens"])
        latency = "n/a" if is_missing(row.get("latency_ms")) else f"{float(row['latency_ms']):.0f} ms"
        head = (f"step {step}: {row.get('status')}" + (f" ({row.get('error_kind')})" if row.get("status") != "success"
                                                        else f", finish {row.get('finish_reason')}")
                + f", {latency}, {tokens} tokens, {int(row.get('attempts') or 1)} attempt(s)")
        lines.append(head)
        try:
            calls = json.loads(row.get("tool_calls") or "[]")
        except (TypeError, json.JSONDecodeError):
            calls = []
        try:
            answers = json.loads(row.get("tool_results") or "[]") if isinstance(row.get("tool_results"), str) else []
        except json.JSONDecodeError:
            answers = []
        for i, call in enumerate(calls):
            lines.append(f"  call   {call.get('name')}({_cut(call.get('arguments'), 120)})")
            if i < len(answers):
                a = answers[i]
                source = a.get("source") + (f" #{a['index']}" if a.get("index") is not None else "")
                lines.append(f"  result [{source}] {_cut(a.get('content'))}")
        content = row.get("content")
        if not calls and isinstance(content, str) and content:
            lines.append(f"  answer {_cut(content)}")
        if row.get("status") != "success" and row.get("error_detail"):
            lines.append(f"  error  {_cut(row.get('error_detail'))}")
    if end:
        lines.append(f"end: {end}")
    # vendor answers and names reach the terminal: control characters shown escaped, never run
    return "\n".join(terminal_text(line) for line in lines) + "\n"


__all__ = ["agent_layout", "html_section", "markdown_section", "render_trajectory", "terminal_lines",
           "trajectory_steps"]
