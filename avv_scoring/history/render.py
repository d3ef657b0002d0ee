"""A trend as people read it (scoring layer, report side of :mod:`.trend`): the terminal tables, trend.md and
trend.html, all from the same rows. Numbers print in their registry format and every text is escaped by the
report's rules (:mod:`avv_scoring.report.format`, :mod:`avv_scoring.report.escape`); trend.html is one
self-contained page like report.html (the same CSS, figures as embedded PNGs): one figure per metric, each
vendor's value and 95 % interval per run, markers coloured by the run's verdict, flagged changes marked.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone

import pandas as pd

from avv_core.decision_options import FAIL, INCONCLUSIVE, PASS
from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping
from avv_scoring.history.regression import ALPHA, NEAR_MISS, regression_tests, tests_of
from avv_scoring.history.trend import Trend
from avv_scoring.metrics.registry import metric
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import (
    CellFormat,
    Palette,
    figure,
    fmt,
    html_table,
    note,
    palette_for,
    plain_figure_text,
    png,
    terminal_table,
)
from avv_scoring.report.html import CSS

#: Verdict → marker colour of trend.html (the report's PASS / FAIL / INCONCLUSIVE colours).
VERDICT_COLOURS = {PASS: "#137333", FAIL: "#a50e0e", INCONCLUSIVE: "#e37400"}
OTHER_VERDICT = "#9aa0a6"
ARROWS = {"regression": "▼", "improvement": "▲"}
CHANGE_HEADERS = ["model", "vendor", "run", "previous run", "compared on", "test", "n", "before", "after",
                  "change", "p (Holm)", "flag"]
VERDICT_HEADERS = ["model", "vendor", "run", "previous run", "verdict", "why"]


def _number(value: object, kind: CellFormat) -> str:
    return fmt(None if value is None or (isinstance(value, float) and math.isnan(value)) else value, kind)


def _cell(row: JSONMapping, column: str, interval: bool) -> str:
    m = metric(column)
    if m.fmt == "text":
        return str(row.get("text") or "n/a")
    text = _number(row.get("value"), m.fmt)
    if interval and m.interval and row.get("ci_low") is not None and not pd.isna(row.get("ci_low")):
        text += f" [{_number(row['ci_low'], m.fmt)}, {_number(row['ci_high'], m.fmt)}]"
    return text


def _change_text(change: JSONMapping) -> str:
    return f"{ARROWS.get(str(change['direction']), '')} {change['test']} {_effect(change)}".strip()


def _effect(change: JSONMapping) -> str:
    if not pd.isna(change.get("relative")):
        return f"{change['effect']:+.4g} ({change['relative']:+.0%})"
    return f"{change['effect']:+.4f}"


def vendor_tables(trend: Trend, interval: bool) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per (model, vendor): one row per run — index, run id, date, verdict, each metric,
    the flagged changes against the previous comparable run."""
    out = []
    flagged = trend.flagged()
    for (model, vendor), rows in trend.series.groupby(["model", "vendor"], sort=False):
        headers = ["#", "run", "started", "verdict", *(metric(m).header for m in trend.metrics), "changes"]
        body = []
        for run_index, run_rows in rows.groupby("run_index", sort=True):
            by_metric = {r["metric"]: r for r in frame_records(run_rows)}
            first = run_rows.iloc[0]
            changes = flagged[(flagged["model"] == model) & (flagged["vendor"] == vendor)
                              & (flagged["run_index"] == run_index)]
            body.append([str(run_index), str(first["run_id"]), str(first["started_at"] or "")[:10],
                         str(first["verdict"] or "n/a"),
                         *(_cell(by_metric.get(m, {}), m, interval) for m in trend.metrics),
                         "; ".join(_change_text(c) for c in frame_records(changes)) or "-"])
        baseline = " (baseline)" if bool(rows["is_baseline"].iloc[0]) else ""
        out.append((f"{model} / {vendor}{baseline}", headers, body))
    return out


def _p(value: float) -> str:
    return f"{value:.2g}" if value > 0 else "< 1e-15"  # a Wald p below the float's resolution


def change_rows(trend: Trend, changes: pd.DataFrame | None = None) -> list[list[str]]:
    """The rows of the flagged changes (or of ``changes``: the near-misses)."""
    chosen = trend.flagged() if changes is None else changes
    return [[str(c["model"]), str(c["vendor"]), f"{c['run_index']} {c['run_id']}", str(c["previous_run_id"]),
             str(c["compared_on"]), str(c["test"]), str(c["n"]), f"{c['before']:.4g}", f"{c['after']:.4g}",
             _effect(c), _p(c["p_holm"]), str(c["direction"])] for c in frame_records(chosen)]


def verdict_rows(trend: Trend) -> list[list[str]]:
    """The verdict changes: ``PASS → FAIL`` and why, per run."""
    return [[str(c["model"]), str(c["vendor"]), f"{c['run_index']} {c['run_id']}", str(c["previous_run_id"]),
             f"{c['before']} → {c['after']}", str(c["reasons"]) or "-"]
            for c in frame_records(trend.verdict_changes())]


def summary_line(trend: Trend) -> str:
    latest = trend.latest_regressions()
    became_fail = trend.latest_verdict_regressions()
    flagged, near = trend.flagged(), trend.near_misses()
    runs = len(trend.runs)
    head = (f"{runs} run(s), {len(flagged)} flagged change(s), {len(trend.verdict_changes())} verdict change(s), "
            f"{len(near)} near-miss(es)")
    if latest.empty and became_fail.empty:
        return f"{head}; no regression in the latest run"
    names = [f"{r['vendor']} {r['test']}" for r in frame_records(latest)]
    names += [f"{r['vendor']} verdict {r['before']} → {r['after']}" for r in frame_records(became_fail)]
    return f"{head}; REGRESSION in the latest run: {', '.join(names)}"


def rule_text() -> str:
    mins = "; ".join(f"{t.key} ≥ {t.min_effect:g}" + (" of the earlier median" if t.kind == "median" else "")
                     + (f" and {t.min_abs:g} ms" if t.min_abs else "") for t in regression_tests())
    return (f"A change is flagged when its Holm-adjusted p < {ALPHA:g} (over the vendor's tests of one comparison) "
            f"and it is at least the minimum effect ({mins}); as large but with {ALPHA:g} ≤ p < {NEAR_MISS:g} it is a "
            "near-miss (reported, not gated on). Each run is compared with the vendor's previous run of the same "
            "sample set, else on the sample ids both hold; a verdict change is a run whose verdict (PASS / FAIL / "
            "INCONCLUSIVE) differs from that run's (docs/history.md).")


def render_terminal(trend: Trend) -> str:
    lines: list[str] = []
    for title, headers, body in vendor_tables(trend, interval=False):
        lines += [title, *terminal_table(headers, body, left=(1, 2, 3, len(headers) - 1)), ""]
    if len(trend.flagged()):
        lines += ["Flagged changes", *terminal_table(CHANGE_HEADERS, change_rows(trend), left=range(6)), ""]
    if len(trend.verdict_changes()):
        lines += ["Verdict changes", *terminal_table(VERDICT_HEADERS, verdict_rows(trend), left=range(6)), ""]
    if len(trend.near_misses()):
        lines += [f"Near-misses (large, {ALPHA:g} ≤ p < {NEAR_MISS:g}: not flagged)",
                  *terminal_table(CHANGE_HEADERS, change_rows(trend, trend.near_misses()), left=range(6)), ""]
    lines.append(summary_line(trend))
    return "\n".join(lines) + "\n"


def render_markdown(trend: Trend) -> str:
    parts = ["# avv-score trend", "", markdown_text(summary_line(trend)), "", markdown_text(rule_text()), ""]
    for title, headers, body in vendor_tables(trend, interval=True):
        parts += [f"## {markdown_text(title)}", "", markdown_table(headers, body), ""]
    parts += ["## Flagged changes", ""]
    parts += [markdown_table(CHANGE_HEADERS, change_rows(trend)) if len(trend.flagged()) else "None.", ""]
    parts += ["## Verdict changes", ""]
    parts += [markdown_table(VERDICT_HEADERS, verdict_rows(trend)) if len(trend.verdict_changes()) else "None.", ""]
    parts += ["## Near-misses", ""]
    near = trend.near_misses()
    parts += [markdown_table(CHANGE_HEADERS, change_rows(trend, near)) if len(near) else "None.", ""]
    return "\n".join(parts)


def _metric_figure(trend: Trend, column: str, palette: Palette) -> str:
    m = metric(column)
    fig, axes = figure(1, 1, height=3.4)
    ax = axes[0][0]
    rows = trend.series[trend.series["metric"] == column]
    flagged = trend.flagged()
    if rows["value"].notna().sum() == 0:
        note(ax, "no values")
    for (model, vendor), part in rows.groupby(["model", "vendor"], sort=False):
        part = part.sort_values("run_index")
        label = f"{vendor}" if trend.series["model"].nunique() == 1 else f"{model}/{vendor}"
        x, y = part["run_index"].to_numpy(), part["value"].to_numpy(dtype=float)
        colour = palette[label]
        ax.plot(x, y, "-", color=colour, label=label, linewidth=1.2)
        low, high = part["ci_low"].to_numpy(dtype=float), part["ci_high"].to_numpy(dtype=float)
        has = ~pd.isna(low) & ~pd.isna(high)
        if has.any():
            ax.errorbar(x[has], y[has], yerr=[y[has] - low[has], high[has] - y[has]], fmt="none", ecolor=colour,
                        capsize=3, linewidth=1)
        markers = [VERDICT_COLOURS.get(str(v), OTHER_VERDICT) for v in part["verdict"]]
        ax.scatter(x, y, c=markers, edgecolors=[colour] * len(x), linewidths=1.5, s=42, zorder=3)
        mine = flagged[(flagged["model"] == model) & (flagged["vendor"] == vendor)
                       & flagged["test"].isin(tests_of(column))]  # only the tests that speak for this metric
        for run_index in sorted(set(mine["run_index"])):
            at = part[part["run_index"] == run_index]["value"]
            if len(at) and not pd.isna(at.iloc[0]):
                ax.annotate("changed", (run_index, at.iloc[0]), textcoords="offset points", xytext=(4, 8),
                            color="#a50e0e", fontsize=8)
    ax.set_title(f"{m.header} ({'higher' if m.better == 'higher' else 'lower' if m.better == 'lower' else 'no'} "
                 "is better)", fontsize=10)
    ax.set_xlabel("run #")
    if len(trend.runs):
        ax.set_xticks(trend.runs["run_index"].tolist())
    if len(rows):
        ax.legend(fontsize=8, loc="best")
    return png(fig, f"{m.header} per run", "value and 95 % interval per run; marker fill: green PASS, red FAIL, "
               "amber INCONCLUSIVE, grey no verdict; 'changed': a flagged change of this metric against the previous "
               "comparable run")


def render_html(trend: Trend) -> str:
    models = trend.series["model"].nunique()
    labels = [v if models <= 1 else f"{m}/{v}" for m, v in zip(trend.series["model"], trend.series["vendor"],
                                                                 strict=True)]
    palette = palette_for(labels)
    with plain_figure_text():
        figures = "".join(f'<section id="metric-{html_text(c)}"><h2>{html_text(metric(c).header)}</h2>'
                          f"{_metric_figure(trend, c, palette)}</section>" for c in trend.metrics)
    tables = "".join(f"<h3>{html_text(title)}</h3>{html_table(headers, body, left=4)}"
                     for title, headers, body in vendor_tables(trend, interval=True))
    changes = html_table(CHANGE_HEADERS, change_rows(trend), left=6) if len(trend.flagged()) else "<p>None.</p>"
    verdicts = (html_table(VERDICT_HEADERS, verdict_rows(trend), left=6) if len(trend.verdict_changes())
                else "<p>None.</p>")
    near = (html_table(CHANGE_HEADERS, change_rows(trend, trend.near_misses()), left=6) if len(trend.near_misses())
            else "<p>None.</p>")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width, initial-scale=1\">"
            f"<title>avv-score trend</title><style>{CSS}</style></head><body><main><h1>avv-score trend</h1>"
            f"<p class=meta>{html_text(summary_line(trend))}<br>{html_text(rule_text())}</p>{figures}"
            f'<section id="runs"><h2>Runs</h2>{tables}</section>'
            f'<section id="changes"><h2>Flagged changes</h2>{changes}</section>'
            f'<section id="verdicts"><h2>Verdict changes</h2>{verdicts}</section>'
            f'<section id="near-misses"><h2>Near-misses</h2>{near}</section>'
            f"<p class=meta>Written by avv-score at {stamp} UTC; self-contained, no network.</p>"
            "</main></body></html>\n")


def write_trend(trend: Trend, out_dir: str | os.PathLike[str], html: bool = True) -> dict[str, str]:
    """trend.md and (``html``) trend.html into ``out_dir``; name → path."""
    folder = os.fspath(out_dir)
    os.makedirs(folder, exist_ok=True)
    outputs = {"trend.md": os.path.join(folder, "trend.md")}
    with open(outputs["trend.md"], "w", encoding="utf-8") as f:
        f.write(render_markdown(trend))
    if html:
        outputs["trend.html"] = os.path.join(folder, "trend.html")
        with open(outputs["trend.html"], "w", encoding="utf-8") as f:
            f.write(render_html(trend))
    return outputs


__all__ = ["change_rows", "render_html", "render_markdown", "render_terminal", "summary_line", "vendor_tables",
           "verdict_rows", "write_trend"]
