"""Scores and verdicts (report section): per model the headline table (Vendor | IRF with statistical ties, the
default ranking, when computed | the published IRF | the registry's ``table=True`` metrics, in ranking order), what
was not judged, and each vendor's spread over repeats. The verdicts themselves open the report (section
``decision``); here the HTML table shows them in colour.

report.md: the table, the repeats (mean ± std). report.html: the table with the verdict in colour, each metric's
threshold under its header, every cell whose bound FAILs marked (an INCONCLUSIVE one shaded); figure: IRF per
vendor, coloured by verdict. Terminal: the table, what was left out, the vendors' disagreement counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

import pandas as pd

from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.decision import FAIL, INCONCLUSIVE, PASS
from avv_scoring.metrics.declaration import Limit
from avv_scoring.metrics.registry import limit_text, table_metrics
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import MISSING, Column, Palette, figure, fmt, png, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.report.sections.decision import VERDICT_CLASS
from avv_scoring.score import ScoreResult

#: The headline table (the published layout): Vendor and IRF, then the registry's ``table=True`` metrics.
TABLE_LAYOUT: tuple[Column, ...] = (
    Column("Vendor", "vendor", "text"),
    Column("IRF", "irf", "irf"),
    *(Column(m.header, m.column, m.fmt) for m in table_metrics()),
)
#: Shown first when the vendors are ranked with statistical ties (the default): the IRF that orders them.
TIES_COLUMN = Column("IRF (ties)", "irf_statistical", "irf")
PASS_COLOUR, FAIL_COLOUR, OPEN_COLOUR = "#1e8e3e", "#d93025", "#e37400"
VERDICT_COLOURS = {PASS: PASS_COLOUR, FAIL: FAIL_COLOUR, INCONCLUSIVE: OPEN_COLOUR}

Row = JSONMapping


@dataclass(frozen=True)
class ModelScores:
    """One model's part: its score rows (by IRF) and what each output shows of them."""

    baseline: str  # the baseline vendor's name
    rows: tuple[Row, ...]  # the score rows, in ranking order
    layout: tuple[Column, ...]  # the table's columns (TABLE_LAYOUT, with TIES_COLUMN second when computed)
    cells: tuple[tuple[str, ...], ...]  # per row: its vendor label, then the layout[1:] cells
    missing_inputs: tuple[tuple[str, ...], ...]  # per row: the IRF inputs it lacks
    limits: Mapping[str, Limit]  # metric column → its verdict limit
    disagreements: tuple[tuple[str, int], ...]  # (vendor, items that differ from the baseline or gold), most first
    not_judged: tuple[str, ...] = ()  # bounds left out of this model's verdicts, each "column (why)"
    states: tuple[Mapping[str, str], ...] = ()  # per row: metric column → its worst bound state (the decision)


def table_layout(rows: tuple[Row, ...]) -> tuple[Column, ...]:
    """:data:`TABLE_LAYOUT`, with the IRF over statistical ties first when the rows have it (the default)."""
    if any(not is_missing(row.get(TIES_COLUMN.column)) for row in rows):
        return (TABLE_LAYOUT[0], TIES_COLUMN, *TABLE_LAYOUT[1:])
    return TABLE_LAYOUT


def _states(result: ScoreResult, row: Row) -> dict[str, str]:
    """Metric column → the state of its bound (a band's worse end) in ``row``'s decision."""
    decision = result.decision(str(row["model"]), str(row["vendor"]))
    out: dict[str, str] = {}
    rank = {PASS: 0, INCONCLUSIVE: 1, FAIL: 2}
    for bound in decision.bounds if decision is not None else ():
        if rank[bound.state] >= rank.get(out.get(bound.column, PASS), 0):
            out[bound.column] = bound.state
    return out


def model_scores(result: ScoreResult, model: str) -> ModelScores:
    rows = tuple(frame_records(result.model_scores(model)))
    layout = table_layout(rows)
    differing = of_model(result.disagreements, model).get("vendor", pd.Series(dtype=object)).value_counts()
    return ModelScores(
        baseline=str(result.baselines.get(model, MISSING)),
        rows=rows,
        layout=layout,
        cells=tuple((vendor_label(row), *(c.cell(row) for c in layout[1:])) for row in rows),
        missing_inputs=tuple(tuple(m for m in result.irf_metrics if is_missing(row.get(m))) for row in rows),
        limits={column: cast(Limit, (kind, bound)) for column, kind, bound in result.thresholds.checks()},
        disagreements=tuple((str(vendor), int(n)) for vendor, n in differing.items()),
        not_judged=tuple(result.not_judged.get(model, ())),
        states=tuple(_states(result, row) for row in rows),
    )


def not_judged_line(part: ModelScores) -> str | None:
    """``Not judged (reported without a verdict): …`` when the model's verdicts left bounds out."""
    return ("Not judged (reported without a verdict): " + "; ".join(part.not_judged)) if part.not_judged else None


def repeat_line(row: Row, name: Callable[[str], str] = str) -> str | None:
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
    blocks = [markdown_table([c.header for c in part.layout], part.cells)]
    skipped = not_judged_line(part)
    blocks += [markdown_text(skipped)] if skipped else []
    repeats = [line for line in (repeat_line(row, markdown_text) for row in part.rows) if line]
    return blocks + (["Repeats:", "\n".join(f"- {line}" for line in repeats)] if repeats else [])


CELL_CLASS = {FAIL: " class=bad", INCONCLUSIVE: " class=undecided"}


def html(parts: Parts[ModelScores], palette: Palette) -> str:
    blocks: list[str] = []
    fig, axes = figure(1, len(parts), height=max(2.2, 0.55 * max(len(part.rows) for _, part in parts) + 1))
    for index, (model, part) in enumerate(parts):
        columns = part.layout[1:]  # the IRFs, then the registry's table metrics
        limits = part.limits
        head = ('<tr><th class="l">Vendor</th><th class="l">Verdict</th>'
                + "".join(f"<th>{html_text(c.header)}</th>" for c in columns) + "</tr>")
        limit_row = ('<tr class="limits"><th class="l">threshold</th><th></th>'
                     + "".join(f"<th>{html_text(limit_text(limits[c.column])) if c.column in limits else ''}</th>"
                               for c in columns) + "</tr>")
        body = []
        for row, states, (label, *cells) in zip(part.rows, part.states or ({},) * len(part.rows), part.cells,
                                                strict=True):
            said = str(row["verdict"])
            verdict = (f'<td class="l {VERDICT_CLASS.get(said, "")}">{html_text(said)}'
                       + ("" if said == PASS else f'<div class="reasons">{html_text(row["verdict_reasons"])}</div>')
                       + "</td>")
            tds = "".join(f'<td{CELL_CLASS.get(states.get(c.column, ""), "")}>'
                          f"{html_text(cell)}</td>" for c, cell in zip(columns, cells, strict=True))
            body.append(f'<tr><td class="l">{html_text(label)}</td>{verdict}{tds}</tr>')
        blocks.append(f"<h3>{html_text(model)} <span class=meta>(baseline: {html_text(part.baseline)})</span></h3>"
                      f"<div class=wrap><table><thead>{head}{limit_row}</thead><tbody>{''.join(body)}"
                      "</tbody></table></div>"
                      + (f"<p class=meta>{html_text(not_judged_line(part))}</p>" if part.not_judged else ""))
        ax = axes[0][index]
        rows = part.rows[::-1]
        ax.barh([str(r["vendor"]) for r in rows], [0.0 if is_missing(r.get("irf")) else float(r["irf"]) for r in rows],
                color=[VERDICT_COLOURS.get(str(r["verdict"]), OPEN_COLOUR) for r in rows])
        ax.set_title(f"{model}: IRF (green PASS, red FAIL, amber INCONCLUSIVE)", fontsize=10)
        ax.set_xlabel("IRF (higher is better)")
        ax.grid(True, axis="x", alpha=0.3)
    intro = ("<p class=meta>Ranked by IRF with statistical ties within each model (the published IRF next to it). A "
             "red cell's bound FAILs at the decision's confidence (a missing value FAILs too), an amber one is "
             "undecided; the verdict lists why.</p>")
    return intro + "".join(blocks) + png(fig, "IRF per vendor")


def terminal(parts: Parts[ModelScores]) -> list[str]:
    out: list[str] = []
    for model, part in parts:
        out.append(f"{model}  (baseline: {part.baseline})")
        out += terminal_table([c.header for c in part.layout], part.cells)
        for row, missing in zip(part.rows, part.missing_inputs, strict=True):
            extra = []
            if row.get("f1_excluded"):
                extra.append(f"{row['f1_excluded']} F1 pair(s) excluded")
            if missing:
                extra.append("missing: " + ", ".join(missing))
            if extra:
                out.append(f"  {row['vendor']}: {'; '.join(extra)}")
        skipped = not_judged_line(part)
        if skipped:
            out.append("  " + skipped)
        if part.disagreements:
            out.append("  tool-call disagreements (disagreements.csv): "
                       + ", ".join(f"{vendor} {n}" for vendor, n in part.disagreements))
        out.append("")
    return out


SECTION = ModelSection("scores", "Scores and verdicts", 10, model_scores, markdown, html, terminal)
