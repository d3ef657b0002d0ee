"""Outputs (scoring layer, top; only :mod:`.cli` and the harness call it): scores.csv, scores_by_repeat.csv,
scores.json, report.md, report.html (rendered by :mod:`.report_html`), the stress files, and plain-text
terminal tables.

Table layouts come from the metric registry (:mod:`avv_scoring.metrics.registry`): the headline table shows the
``table=True`` metrics, the count table the ``count=True`` ones, the correctness table the ``group="correctness"``
ones, each with its registered header and format.

report.md has one writer, :func:`write_outputs`, and is assembled by :func:`render_markdown` from sections:
each entry of :data:`REPORT_SECTIONS` is a function ``(result) -> list of Markdown blocks``, and each entry of
:data:`MODEL_SECTIONS` a function ``(result, model, rows) -> blocks`` run once per model. An empty list leaves
the section out. A new section (per-tool table, disagreements, confidence intervals…) is one such function
added to one of the two tuples; nothing appends to report.md afterwards.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from avv_core.client_load import CPU_BOUND_PCT, LAG_P99_BOUND_MS, client_bound_advice
from avv_core.measures import is_missing
from avv_scoring.metrics.breakdown import DISAGREEMENT_COLUMNS, KINDS
from avv_scoring.metrics.registry import count_metrics, group_metrics, table_metrics
from avv_scoring.report import trajectory as trajectory_report
from avv_scoring.report.escape import markdown_table, markdown_text, neutralise_frame, terminal_text
from avv_scoring.score import REPEAT_COLUMNS, SCORE_COLUMNS, ScoreResult
from avv_scoring.stress import render_stress_markdown, render_stress_terminal, write_stress_files

MISSING = "n/a"

#: The headline table (the published layout): (header, column, format). Vendor and IRF, then the
#: registry's ``table=True`` metrics.
TABLE_LAYOUT: tuple[tuple[str, str, str], ...] = (
    ("Vendor", "vendor", "text"),
    ("IRF", "irf", "irf"),
    *((m.header, m.column, m.fmt) for m in table_metrics()),
)
#: The "Counts (excluded and missing)" table: the registry's ``count=True`` metrics (header, column, format).
COUNT_LAYOUT: tuple[tuple[str, str, str], ...] = tuple((m.header, m.column, m.fmt) for m in count_metrics())
#: The "Tool-call correctness" table: the registry's ``group="correctness"`` metrics (header, column, format).
CORRECTNESS_LAYOUT: tuple[tuple[str, str, str], ...] = tuple(
    (m.header, m.column, m.fmt) for m in group_metrics("correctness"))
#: The per-tool table (header, column of :data:`~avv_scoring.metrics.breakdown.PER_TOOL_COLUMNS`, format).
TOOL_LAYOUT: tuple[tuple[str, str, str], ...] = (
    ("Tool", "tool", "text"), ("Vendor", "vendor", "text"), ("Calls", "calls", "int"),
    ("Schema valid", "schema_valid", "rate"), ("Pairs", "pairs", "int"), ("Tool match", "tool_match", "rate"),
    ("Args match", "args_match", "rate"), ("Gold items", "gold_items", "int"), ("Gold acc", "gold_accuracy", "rate"),
)
#: Tools shown per model in report.md (those with the most calls; every tool is in scores.json).
REPORT_TOOLS = 20
#: Disagreement rows shown per model in report.md (every row is in disagreements.csv).
REPORT_DISAGREEMENTS = 20
CELL_CHARS = 90  # calls and expected values are cut to this many characters in report.md

Rows = list[dict[str, Any]]
#: A report section: the result → Markdown blocks (joined by blank lines; [] = left out).
Section = Callable[[ScoreResult], list[str]]
#: A per-model section: (result, model, that model's score rows) → Markdown blocks.
ModelSection = Callable[[ScoreResult, str, Rows], list[str]]


def fmt(value: Any, kind: str) -> str:
    """Format a cell like the published tables: rates with 4 decimals (1 as ``1``), IRF with 4 decimals,
    integers in full, other numbers with 4 significant digits (≥ 1000 in full); text as is."""
    if is_missing(value):
        return MISSING
    if kind == "text":
        return str(value)
    v = float(value)
    if kind == "irf":
        return f"{v:.4f}"
    if kind == "rate":
        return f"{v:.0f}" if v in (0, 1) else f"{v:.4f}"
    if kind == "int" or abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.4g}"


def _vendor_label(row: dict[str, Any]) -> str:
    return f"{row['vendor']} (baseline)" if row.get("is_baseline") else str(row["vendor"])


def _missing_inputs(result: ScoreResult, row: dict[str, Any]) -> list[str]:
    return [m for m in result.irf_metrics if is_missing(row.get(m))]


def _verdict_line(row: dict[str, Any], name: Callable[[Any], str] = str) -> str:
    """``vendor: PASS`` or ``vendor: FAIL (reasons)``; ``name`` escapes the vendor for its output."""
    if row["verdict"] == "pass":
        return f"{name(row['vendor'])}: PASS"
    return f"{name(row['vendor'])}: FAIL ({row['verdict_reasons']})"


def _repeat_line(row: dict[str, Any], name: Callable[[Any], str] = str) -> str | None:
    if not row.get("n_repeats") or row["n_repeats"] < 2:
        return None
    parts = []
    for header, col, kind in TABLE_LAYOUT[2:]:
        mean, std = row.get(f"{col}_mean"), row.get(f"{col}_std")
        if is_missing(mean):
            continue
        parts.append(f"{header} {fmt(mean, kind)} ± {fmt(std, 'num' if kind == 'num' else 'irf')}")
    return f"{name(row['vendor'])} over {row['n_repeats']} repeats (mean ± std): " + ", ".join(parts)


def _md_escape(text: Any) -> str:
    """Names and lines outside tables (headings, bullets): :func:`~avv_scoring.report.escape.markdown_text`."""
    return markdown_text(text)


def _md_table(headers: list[str], body: list[list[str]]) -> str:
    """Every table of report.md: :func:`~avv_scoring.report.escape.markdown_table` (each cell's ``|``, line breaks
    and HTML escaped). Cells are passed as plain text, never pre-escaped."""
    return markdown_table(headers, body)


def _irf_text(result: ScoreResult) -> str:
    higher = [c for c, up in result.irf_metrics.items() if up]
    lower = [c for c, up in result.irf_metrics.items() if not up]
    over = "; ".join(
        part
        for part in (
            f"{', '.join(higher)} (higher better)" if higher else "",
            f"{', '.join(lower)} (lower better)" if lower else "",
        )
        if part
    )
    return f"IRF = Σ 1/(rank + 5) over {over}; ties share the average rank; a missing value adds nothing."


def _thresholds_text(result: ScoreResult) -> str:
    return f"preset `{result.thresholds.name}`: {result.thresholds.text()}"


# ----------------------------------------------------------------------------------------- report sections


def _header(result: ScoreResult) -> list[str]:
    lines = []
    if result.inputs:
        lines.append("Inputs: " + ", ".join(f"`{p}`" for p in result.inputs) + "  ")
    if result.sample_files:
        lines.append("Sample file: " + ", ".join(f"`{p}`" for p in result.sample_files) + "  ")
    if result.scored:
        lines.append("Thresholds: " + _thresholds_text(result) + "  ")
        lines.append(_irf_text(result))
    else:
        lines.append("Per-vendor scores were not computed (stress tables only).")
    return ["# avv-score report", "\n".join(lines)]


def _model_heading(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    return [f"## {_md_escape(model)}", f"Baseline: {_md_escape(result.baselines.get(model, MISSING))}"]


def _scores_table(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    body = [[_vendor_label(row)] + [fmt(row.get(c), k) for _, c, k in TABLE_LAYOUT[1:]] for row in rows]
    return [_md_table([h for h, _, _ in TABLE_LAYOUT], body)]


def _verdicts(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    return ["Verdicts:", "\n".join(f"- {_verdict_line(row, _md_escape)}" for row in rows)]


def _repeats(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    lines = [r for r in (_repeat_line(row, _md_escape) for row in rows) if r]
    return ["Repeats:", "\n".join(f"- {r}" for r in lines)] if lines else []


def _count_cell(value: Any, kind: str) -> str:
    if kind == "text":  # e.g. error_kinds: empty when there is nothing to list
        return "" if is_missing(value) else str(value)
    return fmt(value, kind)


def _counts(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    headers = ["Vendor", *(h for h, _, _ in COUNT_LAYOUT), "Missing IRF inputs"]
    body = [
        [str(row["vendor"])]
        + [_count_cell(row.get(c), k) for _, c, k in COUNT_LAYOUT]
        + [", ".join(_missing_inputs(result, row)) or "none"]
        for row in rows
    ]
    return ["Counts (excluded and missing):", _md_table(headers, body)]


def _correctness(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    if not any(not is_missing(row.get(c)) and row.get(c) != 0 for row in rows for _, c, _ in CORRECTNESS_LAYOUT):
        return []
    headers = ["Vendor", *(h for h, _, _ in CORRECTNESS_LAYOUT)]
    body = [[_vendor_label(row)] + [fmt(row.get(c), k) for _, c, k in CORRECTNESS_LAYOUT] for row in rows]
    return ["Tool-call correctness (against the baseline over call pairs, and against the samples' gold labels; "
            "definitions in docs/scoring.md):", _md_table(headers, body)]


def _cut(text: Any, chars: int = CELL_CHARS) -> str:
    """A table cell's text on one line, cut to ``chars`` (escaped later, by :func:`_md_table`)."""
    if is_missing(text) or text is None:
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _per_tool(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    table = result.per_tool[result.per_tool["model"] == model]
    if table.empty:
        return []
    calls = table.groupby("tool", sort=False)["calls"].sum()
    activity = table.groupby("tool", sort=False)[["calls", "pairs", "gold_items"]].sum().sum(axis=1)
    order = sorted(calls.index, key=lambda t: (-calls[t], -activity[t], t))
    shown = order[:REPORT_TOOLS]
    vendors = [row["vendor"] for row in rows]
    body = []
    for tool in shown:
        part = table[table["tool"] == tool].set_index("vendor")
        for vendor in (v for v in vendors if v in part.index):
            r = {"tool": tool, "vendor": vendor, **part.loc[vendor].to_dict()}
            body.append([_cut(r[c], 48) if k == "text" else fmt(r[c], k) for _, c, k in TOOL_LAYOUT])
    rest = len(order) - len(shown)
    more = f" ({rest} more tool{'s' if rest > 1 else ''} in scores.json)" if rest > 0 else ""
    return [f"Per tool, the {len(shown)} most called{more}:", _md_table([h for h, _, _ in TOOL_LAYOUT], body)]


def _disagreements(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    table = result.disagreements[result.disagreements["model"] == model]
    if table.empty:
        return ["Disagreements: none (no item differs from the baseline or from gold)."]
    counts = table.groupby(["vendor", "kind"], sort=False).size()
    summary = "; ".join(
        f"{_md_escape(vendor)}: "
        + ", ".join(f"{kind} {counts[(vendor, kind)]}" for kind in KINDS if (vendor, kind) in counts)
        for vendor in dict.fromkeys(table["vendor"])
    )
    headers = ["Vendor", "Sample", "Repeat", "Kind", "Against", "Baseline", "Vendor's answer", "Expected"]
    body = []
    for r in table.head(REPORT_DISAGREEMENTS).to_dict("records"):
        vendor_side = r["vendor_calls"] or (f"as text: {r['vendor_content']}" if r["vendor_content"] else "no call")
        base_side = r["baseline_calls"] or "no call"
        body.append([
            str(r["vendor"]), str(r["sample_id"]), str(r["repeat"]), r["kind"], r["against"],
            _cut(f"{r['baseline_finish']}: {base_side}" if isinstance(r["baseline_finish"], str) else ""),
            _cut(f"{r['vendor_finish']}: {vendor_side}"), _cut(r["expected"]),
        ])
    shown = min(len(table), REPORT_DISAGREEMENTS)
    return [f"Disagreements ({len(table)} items differ from the baseline or from gold — {summary}; "
            f"the first {shown} below, all in disagreements.csv):", _md_table(headers, body)]


def _statistics(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    """Intervals, tests against the baseline and its noise floor, rank stability, sample size (:mod:`.report_stats`)."""
    from avv_scoring.report.stats_sections import markdown_section  # imports this module

    return markdown_section(result, model, rows)


#: Sections rendered once per model, in this order.
MODEL_SECTIONS: tuple[ModelSection, ...] = (_model_heading, _scores_table, _verdicts, _repeats, _statistics, _counts,
                                            _correctness, trajectory_report.markdown_section, _per_tool,
                                            _disagreements)


def _models(result: ScoreResult) -> list[str]:
    if not result.scored:
        return []
    blocks: list[str] = []
    for model in result.models:
        rows = result.model_scores(model).to_dict("records")
        for section in MODEL_SECTIONS:
            blocks += section(result, model, rows)
    return blocks


def _warnings(result: ScoreResult) -> list[str]:
    return ["## Warnings", "\n".join(f"- {_md_escape(w)}" for w in result.warnings)] if result.warnings else []


def _stress(result: ScoreResult) -> list[str]:
    return [render_stress_markdown(result.stress)] if result.stress is not None else []


def _client_load(result: ScoreResult) -> list[str]:
    """Per Locust process: the client's own event-loop lag and CPU, and whether it was client-bound."""
    load = result.client_load
    if not load:
        return []
    body = []
    for worker, entry in load.items():
        for vendor, lag in entry["vendors"].items():
            body.append([str(worker), str(vendor), fmt(lag["lag_p50_ms"], "num"),
                         fmt(lag["lag_p99_ms"], "num"), fmt(entry["cpu_mean_pct"], "num"),
                         fmt(entry["cpu_max_pct"], "num"), "**yes**" if entry["client_bound"] else "no"])
    lines = ["## Client load",
             f"`client_lag_ms` bounds the client's own delay inside each TTFT; a process is client-bound when its lag "
             f"p99 exceeds {LAG_P99_BOUND_MS:g} ms or its CPU {CPU_BOUND_PCT:g} %.",
             _md_table(["Process", "Vendor", "Lag p50 (ms)", "Lag p99 (ms)", "CPU mean %", "CPU max %",
                        "Client-bound"], body)]
    advice = client_bound_advice(load)
    if advice:
        # our own sentences about our own processes (their ">" is text, not markup): only "|" escaped, as before
        advice = [line.replace("|", "\\|") for line in advice]
        lines.append("\n".join(f"- **{line}**" for line in advice))
    return lines


#: Sections of report.md, in this order.
REPORT_SECTIONS: tuple[Section, ...] = (_header, _models, _warnings, _client_load, _stress)


def render_markdown(result: ScoreResult) -> str:
    """report.md: the sections of :data:`REPORT_SECTIONS` (header; per model the table in the seeds' layout
    sorted by IRF, verdicts, repeats and counts; warnings; the stress section), joined by blank lines."""
    blocks = [block for section in REPORT_SECTIONS for block in section(result)]
    return "\n\n".join(blocks) + "\n"


# ---------------------------------------------------------------------------------------------- terminal


def _terminal_scores(result: ScoreResult) -> list[str]:
    if result.scores.empty:
        return ["avv-score: no records to score"]
    out: list[str] = []
    for model in result.models:
        table = result.model_scores(model).to_dict("records")
        header = [h for h, _, _ in TABLE_LAYOUT]
        body = [[terminal_text(_vendor_label(row))] + [fmt(row.get(c), k) for _, c, k in TABLE_LAYOUT[1:]]
                for row in table]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

        def line(cells: list[str], widths: list[int] = widths) -> str:
            return "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )

        out.append(f"{model}  (baseline: {result.baselines.get(model, MISSING)})")
        out.append(line(header))
        out.append("  ".join("-" * w for w in widths))
        out.extend(line(r) for r in body)
        for row in table:
            extra = []
            if row.get("f1_excluded"):
                extra.append(f"{row['f1_excluded']} F1 pair(s) excluded")
            missing = _missing_inputs(result, row)
            if missing:
                extra.append("missing: " + ", ".join(missing))
            out.append("  " + _verdict_line(row) + (f"  [{'; '.join(extra)}]" if extra else ""))
        differing = result.disagreements[result.disagreements["model"] == model]["vendor"].value_counts()
        if len(differing):
            out.append("  tool-call disagreements (disagreements.csv): "
                       + ", ".join(f"{vendor} {n}" for vendor, n in differing.items()))
        out.append("")
    return out + trajectory_report.terminal_lines(result)


def render_tables(result: ScoreResult, client_advice: bool = True) -> str:
    """Plain-text tables for the terminal: one per model (seeds' layout, by IRF) plus verdicts, the
    warnings (with ``client_advice``, the client-bound advice too: the harness prints its own once per run,
    after the tables), and the stress capacity table when ``result.stress`` is set.

    Names, warnings and anything else from configs or vendors show control characters escaped
    (:func:`~avv_scoring.report.escape.terminal_text`): an ANSI / OSC sequence in a vendor name is printed, not run."""
    out: list[str] = _terminal_scores(result) if result.scored else []
    if result.scored and not result.scores.empty:
        out.extend(f"warning: {warning}" for warning in result.warnings)
        if client_advice:
            out.extend(f"warning: {line}" for line in client_bound_advice(result.client_load))
    if result.stress is not None:
        if out and out[-1] != "":
            out.append("")
        out.append(render_stress_terminal(result.stress))
    return "\n".join(terminal_text(line, keep_newlines=True) for line in out).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------- files


def _jsonable(value: Any) -> Any:
    """A JSON value: missing or not finite → null (JSON has no NaN or Infinity), numpy scalars → Python."""
    if is_missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file next to it, then renamed over it,
    so an interrupted or failed scoring never leaves a truncated output (a half-written scores.json)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame.astype("object").to_dict("records")]


def result_dict(result: ScoreResult) -> dict[str, Any]:
    """The content of scores.json."""
    data: dict[str, Any] = {
        "inputs": result.inputs,
        "sample_files": result.sample_files,
        "thresholds": result.thresholds.to_dict(),
        "thresholds_preset": result.thresholds.name,
        "irf_metrics": list(result.irf_metrics),
        "statistics": result.stats.to_dict(),
        "baselines": result.baselines,
        "warnings": result.warnings,
        "columns": list(SCORE_COLUMNS),
        "models": [
            {
                "model": model,
                "baseline": result.baselines.get(model),
                "vendors": _records(result.model_scores(model)),
                "tools": _records(result.per_tool[result.per_tool["model"] == model].drop(columns="model")),
                "disagreements": _records(
                    result.disagreements[result.disagreements["model"] == model]
                    .groupby(["vendor", "kind"], sort=False).size().rename("items").reset_index()
                ),
            }
            for model in result.models
        ],
        "by_repeat": _records(result.by_repeat.reindex(columns=list(REPEAT_COLUMNS))),
    }
    if result.stress is not None:
        settings = result.stress.settings
        data["stress"] = {
            "levels": list(settings.levels),
            "step_s": settings.step_s,
            "slo_ttft_p95_ms": settings.slo_ttft_p95_ms,
            "slo_error_rate": settings.slo_error_rate,
            "capacity": _records(result.stress.capacity),
        }
    return data


def _csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as a CSV a person opens: booleans as true/false, text cells neutralised against formula
    injection (:func:`~avv_scoring.report.escape.neutralise_frame`, OWASP's rule; reversible)."""
    out = frame.copy()
    if "is_baseline" in out.columns:
        out["is_baseline"] = out["is_baseline"].map(
            lambda v: "" if is_missing(v) else ("true" if v else "false")
        )
    return neutralise_frame(out)


def write_outputs(result: ScoreResult, out_dir: str | os.PathLike[str], html: bool = True) -> dict[str, str]:
    """Write scores.csv, scores_by_repeat.csv, scores.json, disagreements.csv (when scores were computed),
    report.md, report.html (:mod:`.report_html`) and, when ``result.stress`` is set, stress.csv, capacity.csv
    and the two plots; return name → path."""
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    names = (("scores.csv", "scores_by_repeat.csv", "scores.json", "disagreements.csv", "report.md") if result.scored
             else ("report.md",))
    paths = {name: os.path.join(out_dir, name) for name in names}
    if result.scored:
        _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(paths["scores.csv"], index=False)
        _csv_frame(result.by_repeat.reindex(columns=list(REPEAT_COLUMNS))).to_csv(paths["scores_by_repeat.csv"],
                                                                                    index=False)
        _csv_frame(result.disagreements.reindex(columns=list(DISAGREEMENT_COLUMNS))).to_csv(
            paths["disagreements.csv"], index=False)
        write_text(paths["scores.json"], json.dumps(result_dict(result), indent=2, ensure_ascii=False,
                                                    allow_nan=False) + "\n")
    if result.stress is not None:
        paths.update(write_stress_files(result.stress, out_dir))
    write_text(paths["report.md"], render_markdown(result))
    if html:  # the figures take ~2 s (matplotlib); --no-html / --avv-no-html skip them
        from avv_scoring.report.html import write_html  # imports this module

        paths.update(write_html(result, out_dir))
    return paths


def scores_csv_text(result: ScoreResult) -> str:
    """scores.csv's content for ``result`` (the web UI's download of the scores so far)."""
    return _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(index=False)
