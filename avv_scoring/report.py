"""Outputs: scores.csv, scores_by_repeat.csv, scores.json, report.md and plain-text terminal tables."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pandas as pd

from .irf import IRF_METRICS
from .score import REPEAT_COLUMNS, SCORE_COLUMNS, ScoreResult

MISSING = "n/a"

#: The seeds' table layout: (header, column, formatter kind).
TABLE_LAYOUT: tuple[tuple[str, str, str], ...] = (
    ("Vendor", "vendor", "name"),
    ("IRF", "irf", "irf"),
    ("Success Rate", "success_rate", "rate"),
    ("F1", "f1", "rate"),
    ("TPS", "tps", "num"),
    ("Schema Accuracy", "schema_accuracy", "rate"),
    ("TTFT (ms)", "avg_ttft_ms", "num"),
    ("Avg Token", "avg_tokens", "num"),
)

COUNT_LAYOUT: tuple[tuple[str, str], ...] = (
    ("Items", "items"),
    ("Failed", "failures"),
    ("F1 pairs", "f1_pairs"),
    ("F1 excluded", "f1_excluded"),
    ("F1 unmatched", "f1_unmatched"),
    ("Schema responses", "schema_responses"),
    ("Uncheckable calls", "schema_uncheckable_calls"),
    ("Calls under other finish", "tool_calls_other_finish"),
    ("Reasoning-only", "reasoning_only"),
)


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def fmt(value: Any, kind: str) -> str:
    """Format a cell like the published tables: rates with 4 decimals (1 as ``1``), IRF with 4
    decimals, other numbers with 4 significant digits (integers ≥ 1000 in full)."""
    if _missing(value):
        return MISSING
    if kind == "name":
        return str(value)
    v = float(value)
    if kind == "irf":
        return f"{v:.4f}"
    if kind == "rate":
        return f"{v:.0f}" if v in (0, 1) else f"{v:.4f}"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.4g}"


def _vendor_label(row: dict[str, Any]) -> str:
    return f"{row['vendor']} (baseline)" if row.get("is_baseline") else str(row["vendor"])


def _missing_inputs(row: dict[str, Any]) -> list[str]:
    return [m for m in IRF_METRICS if _missing(row.get(m))]


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
        if _missing(mean):
            continue
        parts.append(f"{header} {fmt(mean, kind)} ± {fmt(std, 'num' if kind == 'num' else 'irf')}")
    return f"{row['vendor']} over {row['n_repeats']} repeats (mean ± std): " + ", ".join(parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(result: ScoreResult) -> str:
    """report.md: one table per model in the seeds' layout, sorted by IRF, verdicts and counts below."""
    lines = ["# avv-score report", ""]
    if result.inputs:
        lines.append("Inputs: " + ", ".join(f"`{p}`" for p in result.inputs) + "  ")
    if result.sample_files:
        lines.append("Sample file: " + ", ".join(f"`{p}`" for p in result.sample_files) + "  ")
    lines.append("Thresholds: " + _thresholds_text(result) + "  ")
    lines.append(
        "IRF = Σ 1/(rank + 5) over F1, success rate, schema accuracy, TPS (higher better), avg tokens "
        "and TTFT (lower better); ties share the average rank; a missing value adds nothing."
    )
    lines.append("")
    for model in result.models:
        table = result.model_scores(model).to_dict("records")
        lines += [f"## {model}", "", f"Baseline: {result.baselines.get(model, MISSING)}", ""]
        lines.append("| " + " | ".join(h for h, _, _ in TABLE_LAYOUT) + " |")
        lines.append("|" + "---|" * len(TABLE_LAYOUT))
        for row in table:
            cells = [_md_escape(_vendor_label(row))] + [fmt(row.get(c), k) for _, c, k in TABLE_LAYOUT[1:]]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Verdicts:", ""]
        lines += [f"- {_md_escape(_verdict_line(row))}" for row in table]
        repeat_lines = [r for r in (_repeat_line(row) for row in table) if r]
        if repeat_lines:
            lines += ["", "Repeats:", ""] + [f"- {_md_escape(r)}" for r in repeat_lines]
        lines += ["", "Counts (excluded and missing):", ""]
        headers = ["Vendor", *(h for h, _ in COUNT_LAYOUT), "Errors", "Missing IRF inputs"]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "---|" * len(headers))
        for row in table:
            cells = [_md_escape(str(row["vendor"]))] + [fmt(row.get(c), "num") for _, c in COUNT_LAYOUT]
            cells += [row.get("error_kinds") or "", ", ".join(_missing_inputs(row)) or "none"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if result.warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in result.warnings] + [""]
    return "\n".join(lines)


def _thresholds_text(result: ScoreResult) -> str:
    parts = []
    for metric, kind, limit in result.thresholds.checks():
        parts.append(f"{metric} {'≥' if kind == 'min' else '≤'} {limit:g}")
    return ", ".join(parts) or "none"


def render_tables(result: ScoreResult) -> str:
    """Plain-text tables for the terminal: one per model (seeds' layout, by IRF) plus verdicts."""
    if result.scores.empty:
        return "avv-score: no records to score\n"
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
            missing = _missing_inputs(row)
            if missing:
                extra.append("missing: " + ", ".join(missing))
            out.append("  " + _verdict_line(row) + (f"  [{'; '.join(extra)}]" if extra else ""))
        out.append("")
    for warning in result.warnings:
        out.append(f"warning: {warning}")
    return "\n".join(out).rstrip("\n") + "\n"


def _jsonable(value: Any) -> Any:
    if _missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame.astype("object").to_dict("records")]


def result_dict(result: ScoreResult) -> dict[str, Any]:
    """The content of scores.json."""
    return {
        "inputs": result.inputs,
        "sample_files": result.sample_files,
        "thresholds": result.thresholds.to_dict(),
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


def _csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    if "is_baseline" in out.columns:
        out["is_baseline"] = out["is_baseline"].map(
            lambda v: "" if _missing(v) else ("true" if v else "false")
        )
    return out


def write_outputs(result: ScoreResult, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write scores.csv, scores_by_repeat.csv, scores.json and report.md; return their paths."""
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        name: os.path.join(out_dir, name)
        for name in ("scores.csv", "scores_by_repeat.csv", "scores.json", "report.md")
    }
    _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(paths["scores.csv"], index=False)
    result.by_repeat.reindex(columns=list(REPEAT_COLUMNS)).to_csv(paths["scores_by_repeat.csv"], index=False)
    with open(paths["scores.json"], "w", encoding="utf-8") as fh:
        json.dump(result_dict(result), fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    with open(paths["report.md"], "w", encoding="utf-8") as fh:
        fh.write(render_markdown(result))
    return paths
