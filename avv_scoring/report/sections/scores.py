"""Scores and verdicts (report section): per model the headline table in the published layout (Vendor | IRF | the
registry's ``table=True`` metrics, sorted by IRF), each vendor's verdict, and its spread over repeats.

report.md: the table, the verdicts, the repeats (mean ± std). report.html: the table with the verdict in colour, each
metric's threshold under its header and every cell that breaks it marked; figure: IRF per vendor, coloured by
verdict. Terminal: the table, the verdicts with what was left out, the vendors' disagreement counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from avv_core.measures import is_missing
from avv_scoring.metrics.declaration import Limit
from avv_scoring.metrics.registry import limit_text, table_metrics
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import MISSING, Column, Palette, figure, fmt, png, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

#: The headline table (the published layout): Vendor and IRF, then the registry's ``table=True`` metrics.
TABLE_LAYOUT: tuple[Column, ...] = (
    Column("Vendor", "vendor", "text"),
    Column("IRF", "irf", "irf"),
    *(Column(m.header, m.column, m.fmt) for m in table_metrics()),
)
PASS_COLOUR, FAIL_COLOUR = "#1e8e3e", "#d93025"

Row = Mapping[str, Any]


@dataclass(frozen=True)
class ModelScores:
    """One model's part: its score rows (by IRF) and what each output shows of them."""

    baseline: str  # the baseline vendor's name
    rows: tuple[Row, ...]  # the score rows, by IRF
    cells: tuple[tuple[str, ...], ...]  # per row: its vendor label, then the TABLE_LAYOUT[1:] cells
    missing_inputs: tuple[tuple[str, ...], ...]  # per row: the IRF inputs it lacks
    limits: Mapping[str, Limit]  # metric column → its verdict limit
    disagreements: tuple[tuple[str, int], ...]  # (vendor, items that differ from the baseline or gold), most first
    not_judged: tuple[str, ...] = ()  # bounds left out of this model's verdicts, each "column (why)"


def model_scores(result: ScoreResult, model: str) -> ModelScores:
    rows = tuple(result.model_scores(model).to_dict("records"))
    differing = of_model(result.disagreements, model).get("vendor", pd.Series(dtype=object)).value_counts()
    return ModelScores(
        baseline=str(result.baselines.get(model, MISSING)),
        rows=rows,
        cells=tuple((vendor_label(row), *(c.cell(row) for c in TABLE_LAYOUT[1:])) for row in rows),
        missing_inputs=tuple(tuple(m for m in result.irf_metrics if is_missing(row.get(m))) for row in rows),
        limits={column: cast(Limit, (kind, bound)) for column, kind, bound in result.thresholds.checks()},
        disagreements=tuple((str(vendor), int(n)) for vendor, n in differing.items()),
        not_judged=tuple(result.not_judged.get(model, ())),
    )


def not_judged_line(part: ModelScores) -> str | None:
    """``Not judged (reported without a verdict): …`` when the model's verdicts left bounds out."""
    return ("Not judged (reported without a verdict): " + "; ".join(part.not_judged)) if part.not_judged else None


def verdict_line(row: Row, name: Callable[[Any], str] = str) -> str:
    """``vendor: PASS`` or ``vendor: FAIL (reasons)``; ``name`` escapes the vendor for its output."""
    if row["verdict"] == "pass":
        return f"{name(row['vendor'])}: PASS"
    return f"{name(row['vendor'])}: FAIL ({row['verdict_reasons']})"


def repeat_line(row: Row, name: Callable[[Any], str] = str) -> str | None:
    """``vendor over N repeats (mean ± std): …`` for a vendor scored over two repeats or more."""
    if not row.get("n_repeats") or row["n_repeats"] < 2:
        return None
    parts = []
    for column in TABLE_LAYOUT[2:]:
        mean, std = row.get(f"{column.column}_mean"), row.get(f"{column.column}_std")
        if is_missing(mean):
            continue
        kind = column.kind
        parts.append(f"{column.header} {fmt(mean, kind)} ± {fmt(std, 'num' if kind == 'num' else 'irf')}")
    return f"{name(row['vendor'])} over {row['n_repeats']} repeats (mean ± std): " + ", ".join(parts)


def markdown(part: ModelScores) -> list[str]:
    blocks = [markdown_table([c.header for c in TABLE_LAYOUT], part.cells),
              "Verdicts:", "\n".join(f"- {verdict_line(row, markdown_text)}" for row in part.rows)]
    skipped = not_judged_line(part)
    blocks += [markdown_text(skipped)] if skipped else []
    repeats = [line for line in (repeat_line(row, markdown_text) for row in part.rows) if line]
    return blocks + (["Repeats:", "\n".join(f"- {line}" for line in repeats)] if repeats else [])


def _breaks(value: Any, limit: Limit | None) -> bool:
    if limit is None:
        return False
    if is_missing(value):
        return True
    kind, bound = limit
    return float(value) < bound if kind == "min" else float(value) > bound


def html(parts: Parts[ModelScores], palette: Palette) -> str:
    columns = TABLE_LAYOUT[1:]  # IRF, then the registry's table metrics
    blocks: list[str] = []
    fig, axes = figure(1, len(parts), height=max(2.2, 0.55 * max(len(part.rows) for _, part in parts) + 1))
    for index, (model, part) in enumerate(parts):
        limits = part.limits
        head = ('<tr><th class="l">Vendor</th><th class="l">Verdict</th>'
                + "".join(f"<th>{html_text(c.header)}</th>" for c in columns) + "</tr>")
        limit_row = ('<tr class="limits"><th class="l">threshold</th><th></th>'
                     + "".join(f"<th>{html_text(limit_text(limits[c.column])) if c.column in limits else ''}</th>"
                               for c in columns) + "</tr>")
        body = []
        for row, (label, *cells) in zip(part.rows, part.cells, strict=True):
            ok = row["verdict"] == "pass"
            verdict = (f'<td class="l {"pass" if ok else "fail"}">{"PASS" if ok else "FAIL"}'
                       + ("" if ok else f'<div class="reasons">{html_text(row["verdict_reasons"])}</div>') + "</td>")
            tds = "".join(f'<td{" class=bad" if _breaks(row.get(c.column), limits.get(c.column)) else ""}>'
                          f"{html_text(cell)}</td>" for c, cell in zip(columns, cells, strict=True))
            body.append(f'<tr><td class="l">{html_text(label)}</td>{verdict}{tds}</tr>')
        blocks.append(f"<h3>{html_text(model)} <span class=meta>(baseline: {html_text(part.baseline)})</span></h3>"
                      f"<div class=wrap><table><thead>{head}{limit_row}</thead><tbody>{''.join(body)}"
                      "</tbody></table></div>"
                      + (f"<p class=meta>{html_text(not_judged_line(part))}</p>" if part.not_judged else ""))
        ax = axes[0][index]
        rows = part.rows[::-1]
        ax.barh([str(r["vendor"]) for r in rows], [0.0 if is_missing(r.get("irf")) else float(r["irf"]) for r in rows],
                color=[PASS_COLOUR if r["verdict"] == "pass" else FAIL_COLOUR for r in rows])
        ax.set_title(f"{model}: IRF (green = pass, red = fail)", fontsize=10)
        ax.set_xlabel("IRF (higher is better)")
        ax.grid(True, axis="x", alpha=0.3)
    intro = ("<p class=meta>Sorted by IRF within each model. A marked cell breaks its threshold (a missing value "
             "breaks it too); the verdict lists every broken threshold.</p>")
    return intro + "".join(blocks) + png(fig, "IRF per vendor")


def terminal(parts: Parts[ModelScores]) -> list[str]:
    out: list[str] = []
    for model, part in parts:
        out.append(f"{model}  (baseline: {part.baseline})")
        out += terminal_table([c.header for c in TABLE_LAYOUT], part.cells)
        for row, missing in zip(part.rows, part.missing_inputs, strict=True):
            extra = []
            if row.get("f1_excluded"):
                extra.append(f"{row['f1_excluded']} F1 pair(s) excluded")
            if missing:
                extra.append("missing: " + ", ".join(missing))
            out.append("  " + verdict_line(row) + (f"  [{'; '.join(extra)}]" if extra else ""))
        skipped = not_judged_line(part)
        if skipped:
            out.append("  " + skipped)
        if part.disagreements:
            out.append("  tool-call disagreements (disagreements.csv): "
                       + ", ".join(f"{vendor} {n}" for vendor, n in part.disagreements))
        out.append("")
    return out


SECTION = ModelSection("scores", "Scores and verdicts", 10, model_scores, markdown, html, terminal)
