"""Tools: per-tool table and disagreements (report section): per model the per-tool table
(:data:`~avv_scoring.metrics.breakdown.PER_TOOL_COLUMNS`) and the items that differ from the baseline or from gold
(:data:`~avv_scoring.metrics.breakdown.DISAGREEMENT_COLUMNS`; all of them are in disagreements.csv).

report.md: the :data:`REPORT_TOOLS` most called tools in :data:`TOOL_LAYOUT`, a count of the disagreements per
vendor and kind and the first :data:`REPORT_DISAGREEMENTS`. report.html: every column of both tables (the first
:data:`TOOLS_SHOWN` tools and :data:`DISAGREEMENTS_SHOWN` disagreements) and a figure of a per-tool rate. No
terminal lines (the scores' terminal table counts each vendor's disagreements). report.html shows this section
before the agent trajectories, report.md after them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from avv_core.frame_rows import frame_records
from avv_core.measures import is_missing
from avv_scoring.metrics.breakdown import KINDS
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import MISSING, Column, Palette, figure, fmt, html_table, note, one_line, png
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

#: The per-tool table of report.md (header, column of PER_TOOL_COLUMNS, format).
TOOL_LAYOUT: tuple[Column, ...] = (
    Column("Tool", "tool", "text"), Column("Vendor", "vendor", "text"), Column("Calls", "calls", "int"),
    Column("Schema valid", "schema_valid", "rate"), Column("Pairs", "pairs", "int"),
    Column("Tool match", "tool_match", "rate"), Column("Args match", "args_match", "rate"),
    Column("Gold items", "gold_items", "int"), Column("Gold acc", "gold_accuracy", "rate"),
)
#: Tools shown per model in report.md (those with the most calls; every tool is in scores.json).
REPORT_TOOLS = 20
#: Disagreement rows shown per model in report.md.
REPORT_DISAGREEMENTS = 20
CELL_CHARS = 90  # calls and expected values are cut to this many characters in report.md
#: Rows of the per-tool table shown per model in report.html.
TOOLS_SHOWN = 60
#: Rows of the disagreement list shown per model in report.html.
DISAGREEMENTS_SHOWN = 20


@dataclass(frozen=True)
class ModelTools:
    """One model's part: its rows of the per-tool table and of the disagreements."""

    tools: pd.DataFrame  # the model's rows of ScoreResult.per_tool
    disagreements: pd.DataFrame  # the model's rows of ScoreResult.disagreements
    vendors: tuple[str, ...]  # the model's vendors, in score order


def model_tools(result: ScoreResult, model: str) -> ModelTools:
    return ModelTools(of_model(result.per_tool, model), of_model(result.disagreements, model),
                      tuple(str(v) for v in result.model_scores(model)["vendor"]))


# ------------------------------------------------------------------------------------------------ report.md


def _per_tool_md(part: ModelTools) -> list[str]:
    table = part.tools
    if table.empty:
        return []
    calls = table.groupby("tool", sort=False)["calls"].sum()
    activity = table.groupby("tool", sort=False)[["calls", "pairs", "gold_items"]].sum().sum(axis=1)
    order = sorted(calls.index, key=lambda t: (-calls[t], -activity[t], t))
    shown = order[:REPORT_TOOLS]
    body = []
    for tool in shown:
        rows = table[table["tool"] == tool].set_index("vendor")
        for vendor in (v for v in part.vendors if v in rows.index):
            r = {"tool": tool, "vendor": vendor, **rows.loc[vendor].to_dict()}
            body.append([one_line(r[c.column], 48) if c.kind == "text" else c.cell(r) for c in TOOL_LAYOUT])
    rest = len(order) - len(shown)
    more = f" ({rest} more tool{'s' if rest > 1 else ''} in scores.json)" if rest > 0 else ""
    return [f"Per tool, the {len(shown)} most called{more}:", markdown_table([c.header for c in TOOL_LAYOUT], body)]


def _disagreements_md(part: ModelTools) -> list[str]:
    table = part.disagreements
    if table.empty:
        return ["Disagreements: none (no item differs from the baseline or from gold)."]
    counts = table.groupby(["vendor", "kind"], sort=False).size()
    summary = "; ".join(
        f"{markdown_text(vendor)}: "
        + ", ".join(f"{kind} {counts[(vendor, kind)]}" for kind in KINDS if (vendor, kind) in counts)
        for vendor in dict.fromkeys(table["vendor"])
    )
    headers = ["Vendor", "Sample", "Repeat", "Kind", "Against", "Baseline", "Vendor's answer", "Expected"]
    body = []
    for r in frame_records(table.head(REPORT_DISAGREEMENTS)):
        vendor_side = r["vendor_calls"] or (f"as text: {r['vendor_content']}" if r["vendor_content"] else "no call")
        base_side = r["baseline_calls"] or "no call"
        body.append([
            str(r["vendor"]), str(r["sample_id"]), str(r["repeat"]), r["kind"], r["against"],
            one_line(f"{r['baseline_finish']}: {base_side}" if isinstance(r["baseline_finish"], str) else "",
                     CELL_CHARS),
            one_line(f"{r['vendor_finish']}: {vendor_side}", CELL_CHARS), one_line(r["expected"], CELL_CHARS),
        ])
    shown = min(len(table), REPORT_DISAGREEMENTS)
    return [f"Disagreements ({len(table)} items differ from the baseline or from gold — {summary}; "
            f"the first {shown} below, all in disagreements.csv):", markdown_table(headers, body)]


def markdown(part: ModelTools) -> list[str]:
    return _per_tool_md(part) + _disagreements_md(part)


# ---------------------------------------------------------------------------------------------- report.html


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Every column but ``model``: numbers between 0 and 1 as rates, other numbers as numbers, text cut to 160."""
    headers = [c for c in frame.columns if c != "model"]
    body = []
    for row in frame[headers].astype("object").itertuples(index=False):
        cells = []
        for value in row:
            if is_missing(value):
                cells.append(MISSING)
            elif isinstance(value, float):
                cells.append(fmt(value, "rate" if 0 <= value <= 1 else "num"))
            else:
                text = str(value)
                cells.append(text if len(text) <= 160 else text[:157] + "…")
        body.append(cells)
    return headers, body


def _rate_figure(model: str, table: pd.DataFrame, palette: Palette) -> str:
    rate = next((c for c in ("tool_match", "args_match", "schema_valid") if c in table.columns), None)
    fig, axes = figure(1, 1, height=3.4)
    ax = axes[0][0]
    if rate is not None and "tool" in table.columns and "vendor" in table.columns:
        names = list(dict.fromkeys(table["tool"].astype(str)))[:20]
        vendors = list(dict.fromkeys(table["vendor"].astype(str)))
        width = 0.8 / max(len(vendors), 1)
        for i, vendor in enumerate(vendors):
            mine = table[table["vendor"].astype(str) == vendor]
            rows = mine.set_index(mine["tool"].astype(str))
            values = [float(rows.at[n, rate]) if n in rows.index and not is_missing(rows.at[n, rate]) else 0.0
                      for n in names]
            ax.bar(np.arange(len(names)) + i * width, values, width, label=vendor, color=palette.get(vendor, "grey"))
        # slanted and ending at their group: twenty long tool names side by side do not overlap
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=30, ha="right",
                      rotation_mode="anchor", fontsize=8)
        ax.set_ylabel(rate)
        ax.set_title(f"{model}: {rate} per tool", fontsize=10)
        ax.legend(fontsize=8)
    else:
        note(ax, "no per-tool rate to draw")
    return png(fig, f"{model}: per tool")


def html(parts: Parts[ModelTools], palette: Palette) -> str | None:
    blocks = []
    for model, part in parts:
        if part.tools.empty:
            continue
        headers, body = _cells(part.tools.head(TOOLS_SHOWN))
        block = (f"<h3>{html_text(model)}: per tool</h3>" + html_table(headers, body, left=2)
                 + _rate_figure(model, part.tools, palette))
        rows = part.disagreements
        if len(rows):
            headers, body = _cells(rows.head(DISAGREEMENTS_SHOWN))
            block += (f"<h3>{html_text(model)}: first disagreements ({min(len(rows), DISAGREEMENTS_SHOWN)} of "
                      f"{len(rows)}; all in disagreements.csv)</h3>" + html_table(headers, body, left=len(headers)))
        blocks.append(block)
    return "".join(blocks) or None


SECTION = ModelSection("tools", "Tools: per-tool table and disagreements", 90, model_tools, markdown, html,
                       html_order=75)
