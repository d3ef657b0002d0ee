"""The output files (scoring layer, report; only :mod:`avv_scoring.cli`, the entry points and the harness call it):
scores.csv, scores_by_repeat.csv, scores.json, disagreements.csv, report.md (:mod:`.markdown`), report.html
(:mod:`.html`) and the stress files (:func:`write_stress_files`, the tables of :mod:`avv_scoring.stress`). Every file
is written whole or not at all (:func:`write_text`); every CSV a person opens has its text cells neutralised
(:mod:`.escape`).
"""

from __future__ import annotations

import json
import math
import os

import pandas as pd

from avv_core.errors import InputError
from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONObject, JSONValue
from avv_core.measures import is_missing
from avv_scoring.conformance.suite import CONFORMANCE_COLUMNS
from avv_scoring.metrics.breakdown import DISAGREEMENT_COLUMNS
from avv_scoring.report.escape import neutralise_frame
from avv_scoring.report.format import plain_figure_text
from avv_scoring.report.html import render_html
from avv_scoring.report.markdown import render_markdown
from avv_scoring.report.sections.stress import render_stress_terminal
from avv_scoring.score import REPEAT_COLUMNS, SCORE_COLUMNS, ScoreResult
from avv_scoring.stress import CAPACITY_CSV, STRESS_CSV, TOKENS_PLOT, TTFT_PLOT, StressResult, stress_tables

REPORT_MD, REPORT_HTML = "report.md", "report.html"
#: The conformance checks of a conformance run: one row per (model, vendor, check).
CONFORMANCE_CSV = "conformance.csv"


def _jsonable(value: object) -> JSONValue:
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


def _records(frame: pd.DataFrame) -> list[JSONObject]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame_records(frame.astype("object"))]


def result_dict(result: ScoreResult) -> JSONObject:
    """The content of scores.json."""
    data: JSONObject = {
        "inputs": result.inputs,
        "sample_files": result.sample_files,
        "thresholds": result.thresholds.to_dict(),
        "thresholds_preset": result.thresholds.name,
        "irf_metrics": list(result.irf_metrics),
        "statistics": result.stats.to_dict(),
        "arg_normalise": result.arg_normalise.to_dict(),
        "not_judged": {model: list(skipped) for model, skipped in result.not_judged.items()},
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
        "prompt_tokens_tolerance": {"default": result.billing.default, "per_model": dict(result.billing.per_model)},
    }
    if not result.conformance.empty:
        data["conformance"] = _records(result.conformance.reindex(columns=list(CONFORMANCE_COLUMNS)))
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
    conformance.csv (when a conformance run was scored), report.md, report.html (unless ``html`` is False) and, when
    ``result.stress`` is set, stress.csv, capacity.csv and the two plots; return name → path."""
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    names = (("scores.csv", "scores_by_repeat.csv", "scores.json", "disagreements.csv", REPORT_MD) if result.scored
             else (REPORT_MD,))
    paths = {name: os.path.join(out_dir, name) for name in names}
    if result.scored:
        _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(paths["scores.csv"], index=False)
        _csv_frame(result.by_repeat.reindex(columns=list(REPEAT_COLUMNS))).to_csv(paths["scores_by_repeat.csv"],
                                                                                    index=False)
        _csv_frame(result.disagreements.reindex(columns=list(DISAGREEMENT_COLUMNS))).to_csv(
            paths["disagreements.csv"], index=False)
        write_text(paths["scores.json"], json.dumps(result_dict(result), indent=2, ensure_ascii=False,
                                                    allow_nan=False) + "\n")
    if result.scored and not result.conformance.empty:
        paths[CONFORMANCE_CSV] = os.path.join(out_dir, CONFORMANCE_CSV)
        _csv_frame(result.conformance.reindex(columns=list(CONFORMANCE_COLUMNS))).to_csv(paths[CONFORMANCE_CSV],
                                                                                          index=False)
    if result.stress is not None:
        paths.update(write_stress_files(result.stress, out_dir))
    write_text(paths[REPORT_MD], render_markdown(result))
    if html:  # the figures take ~2 s (matplotlib); --no-html / --avv-no-html skip them
        paths[REPORT_HTML] = os.path.join(out_dir, REPORT_HTML)
        write_text(paths[REPORT_HTML], render_html(result))
    return paths


def scores_csv_text(result: ScoreResult) -> str:
    """scores.csv's content for ``result`` (the web UI's download of the scores so far)."""
    return _csv_frame(result.scores.reindex(columns=list(SCORE_COLUMNS))).to_csv(index=False)


def write_stress_outputs(run_dir: str | os.PathLike[str]) -> str:
    """Re-render stress.csv, capacity.csv and the two PNGs of a stress run folder; return the terminal table.

    report.md is not touched (it has one writer, :func:`write_outputs`). InputError when the folder is not a stress
    run.
    """
    result = stress_tables(run_dir)
    if result is None:
        raise InputError(f"{os.fspath(run_dir)}: not a stress run (run.json mode is not 'stress')")
    write_stress_files(result, run_dir)
    return render_stress_terminal(result)


def plot(levels: pd.DataFrame, column: str, ylabel: str, path: str, slo: float | None = None) -> None:
    """One line per vendor of ``column`` over the levels (log2 x axis), saved as PNG at ``path``."""
    from matplotlib.figure import Figure  # here: matplotlib costs ~0.4 s to import, and most scorings draw nothing
    from matplotlib.ticker import ScalarFormatter

    with plain_figure_text():
        fig = Figure(figsize=(7, 4.2), dpi=110)
        ax = fig.subplots()
        for vendor, group in levels.groupby("vendor", sort=True):
            ax.plot(group["level"], group[column], marker="o", label=vendor)
        if slo is not None:
            ax.axhline(slo, color="grey", linestyle="--", linewidth=1, label="SLO")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(levels["level"].unique()))
        ax.get_xaxis().set_major_formatter(ScalarFormatter())
        ax.set_xlabel("concurrency (users per vendor)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)


def write_stress_files(result: StressResult, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write stress.csv, capacity.csv and (when there are levels) the two PNGs; return name → path."""
    folder = os.fspath(out_dir)
    os.makedirs(folder, exist_ok=True)
    paths = {name: os.path.join(folder, name) for name in (STRESS_CSV, CAPACITY_CSV)}
    # text cells neutralised against formula injection (avv_scoring.report.escape, OWASP's rule)
    neutralise_frame(result.levels).to_csv(paths[STRESS_CSV], index=False, float_format="%.3f")
    neutralise_frame(result.capacity).to_csv(paths[CAPACITY_CSV], index=False, float_format="%.3f")
    if len(result.levels):
        paths[TTFT_PLOT] = os.path.join(folder, TTFT_PLOT)
        paths[TOKENS_PLOT] = os.path.join(folder, TOKENS_PLOT)
        plot(result.levels, "ttft_p95_ms", "TTFT p95 (ms)", paths[TTFT_PLOT], result.settings.slo_ttft_p95_ms)
        plot(result.levels, "tokens_per_s", "aggregate output tokens/s", paths[TOKENS_PLOT])
    return paths
