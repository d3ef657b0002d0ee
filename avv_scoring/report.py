"""Outputs (scoring layer, top; only :mod:`.cli` and the harness call it): scores.csv, scores_by_repeat.csv,
scores.json, report.md, report.html (rendered by :mod:`.report_html`), the stress files, and plain-text
terminal tables.

Table layouts come from the metric registry (:mod:`avv_scoring.registry`): the headline table shows the
``table=True`` metrics, the count table the ``count=True`` ones, each with its registered header and format.

report.md has one writer, :func:`write_outputs`, and is assembled by :func:`render_markdown` from sections:
each entry of :data:`REPORT_SECTIONS` is a function ``(result) -> list of Markdown blocks``, and each entry of
:data:`MODEL_SECTIONS` a function ``(result, model, rows) -> blocks`` run once per model. An empty list leaves
the section out. A new section (per-tool table, disagreements, confidence intervals…) is one such function
added to one of the two tuples; nothing appends to report.md afterwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from avv_harness.measures import is_missing

from .registry import count_metrics, limit_text, table_metrics
from .score import REPEAT_COLUMNS, SCORE_COLUMNS, ScoreResult
from .stress import render_stress_markdown, render_stress_terminal, write_stress_files

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


def _verdict_line(row: dict[str, Any]) -> str:
    if row["verdict"] == "pass":
        return f"{row['vendor']}: PASS"
    return f"{row['vendor']}: FAIL ({row['verdict_reasons']})"


def _repeat_line(row: dict[str, Any]) -> str | None:
    if not row.get("n_repeats") or row["n_repeats"] < 2:
        return None
    parts = []
    for header, col, kind in TABLE_LAYOUT[2:]:
        mean, std = row.get(f"{col}_mean"), row.get(f"{col}_std")
        if is_missing(mean):
            continue
        parts.append(f"{header} {fmt(mean, kind)} ± {fmt(std, 'num' if kind == 'num' else 'irf')}")
    return f"{row['vendor']} over {row['n_repeats']} repeats (mean ± std): " + ", ".join(parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(headers: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


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
    parts = [f"{metric} {limit_text((kind, limit))}" for metric, kind, limit in result.thresholds.checks()]
    return ", ".join(parts) or "none"


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
    return [f"## {model}", f"Baseline: {result.baselines.get(model, MISSING)}"]


def _scores_table(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    body = [[_md_escape(_vendor_label(row))] + [fmt(row.get(c), k) for _, c, k in TABLE_LAYOUT[1:]] for row in rows]
    return [_md_table([h for h, _, _ in TABLE_LAYOUT], body)]


def _verdicts(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    return ["Verdicts:", "\n".join(f"- {_md_escape(_verdict_line(row))}" for row in rows)]


def _repeats(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    lines = [r for r in (_repeat_line(row) for row in rows) if r]
    return ["Repeats:", "\n".join(f"- {_md_escape(r)}" for r in lines)] if lines else []


def _count_cell(value: Any, kind: str) -> str:
    if kind == "text":  # e.g. error_kinds: empty when there is nothing to list
        return "" if is_missing(value) else _md_escape(str(value))
    return fmt(value, kind)


def _counts(result: ScoreResult, model: str, rows: Rows) -> list[str]:
    headers = ["Vendor", *(h for h, _, _ in COUNT_LAYOUT), "Missing IRF inputs"]
    body = [
        [_md_escape(str(row["vendor"]))]
        + [_count_cell(row.get(c), k) for _, c, k in COUNT_LAYOUT]
        + [", ".join(_missing_inputs(result, row)) or "none"]
        for row in rows
    ]
    return ["Counts (excluded and missing):", _md_table(headers, body)]


#: Sections rendered once per model, in this order.
MODEL_SECTIONS: tuple[ModelSection, ...] = (_model_heading, _scores_table, _verdicts, _repeats, _counts)


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
    return ["## Warnings", "\n".join(f"- {w}" for w in result.warnings)] if result.warnings else []


def _stress(result: ScoreResult) -> list[str]:
    return [render_stress_markdown(result.stress)] if result.stress is not None else []


#: Sections of report.md, in this order.
REPORT_SECTIONS: tuple[Section, ...] = (_header, _models, _warnings, _stress)


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
        body = [[_vendor_label(row)] + [fmt(row.get(c), k) for _, c, k in TABLE_LAYOUT[1:]] for row in table]
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
        out.append("")
    return out


def render_tables(result: ScoreResult) -> str:
    """Plain-text tables for the terminal: one per model (seeds' layout, by IRF) plus verdicts, the
    warnings, and the stress capacity table when ``result.stress`` is set."""
    out: list[str] = _terminal_scores(result) if result.scored else []
    if result.scored and not result.scores.empty:
        out.extend(f"warning: {warning}" for warning in result.warnings)
    if result.stress is not None:
        if out and out[-1] != "":
            out.append("")
        out.append(render_stress_terminal(result.stress))
    return "\n".join(out).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------- files


def _jsonable(value: Any) -> Any:
    if is_missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame.astype("object").to_dict("records")]


def result_dict(result: ScoreResult) -> dict[str, Any]:
    """The content of scores.json."""
    data: dict[str, Any] = {
        "inputs": result.inputs,
        "sample_files": result.sample_files,
        "thresholds": result.thresholds.to_dict(),
        "irf_metrics": list(result.irf_metrics),
        "baselines": result.baselines,
        "warnings": result.warnings,
        "columns": list(SCORE_COLUMNS),
        "models": [
            {
                "model": model,
                "baseline": result.baselines.get(model),
                "vendors": _records(result.model_scores(model)),
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
    out = frame.copy()
    if "is_baseline" in out.columns:
        out["is_baseline"] = out["is_baseline"].map(
            lambda v: "" if is_missing(v) else ("true" if v else "false")
        )
    return out


def write_outputs(result: ScoreResult, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write scores.csv, scores_by_repeat.csv, scores.json (when scores were computed), report.md, report.html
    (:mod:`.report_html`) and, when ``result.stress`` is set, stress.csv, capacity.csv and the two plots;
    return name → path."""
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    names = ("scores.csv", "scores_by_repeat.csv", "scores.json", "report.md") if result.scored else ("report.md",)
    paths = {name: os.path.join(out_dir, name) for name in names}
    if result.scored:
        _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(paths["scores.csv"], index=False)
        result.by_repeat.reindex(columns=list(REPEAT_COLUMNS)).to_csv(paths["scores_by_repeat.csv"], index=False)
        with open(paths["scores.json"], "w", encoding="utf-8") as fh:
            json.dump(result_dict(result), fh, indent=2, ensure_ascii=False, allow_nan=False)
            fh.write("\n")
    if result.stress is not None:
        paths.update(write_stress_files(result.stress, out_dir))
    with open(paths["report.md"], "w", encoding="utf-8") as fh:
        fh.write(render_markdown(result))
    from .report_html import write_html  # imports this module

    paths.update(write_html(result, out_dir))
    return paths


def scores_csv_text(result: ScoreResult) -> str:
    """scores.csv's content for ``result`` (the web UI's download of the scores so far)."""
    return _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(index=False)
