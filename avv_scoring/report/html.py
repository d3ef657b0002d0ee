"""report.html (scoring layer, an output beside :mod:`.report`): one self-contained page to hand to someone.

Everything is inside the file: the CSS is inline and every figure is a PNG drawn with matplotlib (Agg, no
pyplot state) and embedded as a ``data:`` URI, so the page opens offline in any browser and fetches nothing.

The page is a header (inputs, thresholds, the IRF formula, warnings) followed by sections; each entry of
:data:`HTML_SECTIONS` is a function ``(result, palette) -> HTML of one <section> or None`` (None leaves it
out), and each section holds a figure:

- **Scores**: per model the headline table (the registry's ``table=True`` metrics, as in report.md), the
  verdict of each vendor in colour, the threshold of each metric under its header and every cell that breaks
  its threshold marked; figure: IRF per vendor, coloured by verdict.
- **Is the difference real?**: per model the 95 % intervals, each vendor's agreement next to the baseline's
  agreement with itself with McNemar's and the noise-floor p-values, IRF rank stability and sample size; figure:
  value and interval per vendor and rate metric, the noise floor dashed (:mod:`.report_stats`).
- **Latency and throughput**: per vendor the distribution (empirical CDF) of TTFT and of per-request TPS over
  successful items.
- **Errors and anomalies**: failed items per ``error_kind`` and anomaly flags per kind, per vendor.
- **Repeats**: each per-repeat metric per vendor, one point per repeat (the spread across repeats).
- **Tools** (when the result has a per-tool table): the per-tool table and the first disagreements.
- **Agent trajectories** (runs with agent tasks, :mod:`.trajectory_report`): the agent metrics per vendor;
  figure: completion, recovery and loop rate per vendor, and the steps of each completed task.
- **Stress** (stress runs): TTFT p95, 429 share and output tokens/s against the level, capacity and levels.
"""

from __future__ import annotations

import base64
import html
import io
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from avv_core.measures import is_missing
from avv_core.records import ANOMALIES, ERROR_KINDS
from avv_scoring.load import is_success
from avv_scoring.metrics.registry import limit_text, metric, per_repeat_metrics
from avv_scoring.report import trajectory as trajectory_report
from avv_scoring.report.outputs import MISSING, TABLE_LAYOUT, fmt, write_text
from avv_scoring.score import ScoreResult
from avv_scoring.stress import plain_figure_text

REPORT_HTML = "report.html"
#: Rows of the disagreement list shown per model (all of them are in disagreements.csv).
DISAGREEMENTS_SHOWN = 20
#: Rows of the per-tool table shown per model.
TOOLS_SHOWN = 60
PASS_COLOUR, FAIL_COLOUR = "#1e8e3e", "#d93025"

Palette = dict[str, Any]
#: A section: (result, vendor → colour) → the HTML of one <section>, or None to leave it out.
HtmlSection = Callable[[ScoreResult, Palette], "str | None"]

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#202124;
background:#fafafa;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px;background:#fff;box-shadow:0 0 4px rgba(0,0,0,.08)}
h1{font-size:1.7em;margin:.2em 0 .4em}h2{font-size:1.3em;margin:1.6em 0 .5em;border-bottom:2px solid #e8eaed;
padding-bottom:.2em}h3{font-size:1.08em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border:1px solid #dadce0;padding:4px 8px;
text-align:right;white-space:nowrap}th{background:#f1f3f4}td.l,th.l{text-align:left}tr.limits th{background:#fff;
font-weight:normal;color:#5f6368;font-size:.85em}td.bad{background:#fce8e6;color:#a50e0e}
.pass{background:#e6f4ea;color:#137333;font-weight:600}.fail{background:#fce8e6;color:#a50e0e;font-weight:600}
.reasons{font-size:.85em;color:#5f6368;white-space:normal;max-width:260px}
figure{margin:.6em 0 1.2em}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#5f6368}nav a{margin-right:1em}code{background:#f1f3f4;padding:0 3px}
.meta{color:#5f6368;font-size:.9em}.wrap{overflow-x:auto}
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


# --------------------------------------------------------------------------------------------------- figures


def _figure(rows: int = 1, cols: int = 1, height: float = 3.2, width: float = 10.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no backend switch

    fig = Figure(figsize=(width, height * rows), dpi=90)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def _png(fig: Any, alt: str, caption: str = "") -> str:
    """The figure as an embedded PNG inside <figure>."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">{cap}</figure>'


def _note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#5f6368")
    ax.set_xticks([])
    ax.set_yticks([])


def _numbers(series: pd.Series) -> np.ndarray:
    values = pd.to_numeric(series.astype("object"), errors="coerce").to_numpy(dtype=float)
    return values[~np.isnan(values)]


def palette_for(vendors: Sequence[str]) -> Palette:
    """One colour per vendor, the same in every figure."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {vendor: cmap(i % 10) for i, vendor in enumerate(dict.fromkeys(vendors))}


# ------------------------------------------------------------------------------------------------ helpers


def _table(headers: Sequence[str], body: Sequence[Sequence[str]], left: int = 1, raw: bool = False) -> str:
    """An HTML table; the first ``left`` columns left-aligned; cells escaped unless ``raw``."""
    def cls(i: int) -> str:
        return ' class="l"' if i < left else ""

    head = "".join(f"<th{cls(i)}>{esc(h)}</th>" for i, h in enumerate(headers))
    rows = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{c if raw else esc(c)}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in body
    )
    return f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def _model_records(result: ScoreResult, model: str) -> pd.DataFrame | None:
    records = result.records
    if records is None or records.empty:
        return None
    return records[records["model"].astype(str) == model]


def _vendors(result: ScoreResult, model: str) -> list[str]:
    return [str(v) for v in result.model_scores(model)["vendor"]]


def _breaks(value: Any, limit: tuple[str, float] | None) -> bool:
    if limit is None:
        return False
    if is_missing(value):
        return True
    kind, bound = limit
    return float(value) < bound if kind == "min" else float(value) > bound


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{esc(title)}</h2>{body}</section>'


# ----------------------------------------------------------------------------------------------- sections


def _scores_section(result: ScoreResult, palette: Palette) -> str | None:
    if not result.scored or result.scores.empty:
        return None
    limits = {column: (kind, bound) for column, kind, bound in result.thresholds.checks()}
    columns = TABLE_LAYOUT[1:]  # IRF, then the registry's table metrics
    parts: list[str] = []
    models = result.models
    fig, axes = _figure(1, len(models), height=max(2.2, 0.55 * max(len(_vendors(result, m)) for m in models) + 1))
    for index, model in enumerate(models):
        rows = result.model_scores(model).to_dict("records")
        head = ('<tr><th class="l">Vendor</th><th class="l">Verdict</th>'
                + "".join(f"<th>{esc(h)}</th>" for h, _, _ in columns) + "</tr>")
        limit_row = ('<tr class="limits"><th class="l">threshold</th><th></th>'
                     + "".join(f"<th>{esc(limit_text(limits[c])) if c in limits else ''}</th>" for _, c, _ in columns)
                     + "</tr>")
        body = []
        for row in rows:
            label = f"{row['vendor']} (baseline)" if row.get("is_baseline") else str(row["vendor"])
            ok = row["verdict"] == "pass"
            verdict = (f'<td class="l {"pass" if ok else "fail"}">{"PASS" if ok else "FAIL"}'
                       + ("" if ok else f'<div class="reasons">{esc(row["verdict_reasons"])}</div>') + "</td>")
            cells = "".join(
                f'<td{" class=bad" if _breaks(row.get(c), limits.get(c)) else ""}>{esc(fmt(row.get(c), k))}</td>'
                for _, c, k in columns
            )
            body.append(f'<tr><td class="l">{esc(label)}</td>{verdict}{cells}</tr>')
        parts.append(f"<h3>{esc(model)} <span class=meta>(baseline: {esc(result.baselines.get(model, MISSING))})"
                     f"</span></h3><div class=wrap><table><thead>{head}{limit_row}</thead><tbody>{''.join(body)}"
                     "</tbody></table></div>")
        ax = axes[0][index]
        names = [str(r["vendor"]) for r in rows][::-1]
        irf = [0.0 if is_missing(r.get("irf")) else float(r["irf"]) for r in rows][::-1]
        colours = [PASS_COLOUR if r["verdict"] == "pass" else FAIL_COLOUR for r in rows][::-1]
        ax.barh(names, irf, color=colours)
        ax.set_title(f"{model}: IRF (green = pass, red = fail)", fontsize=10)
        ax.set_xlabel("IRF (higher is better)")
        ax.grid(True, axis="x", alpha=0.3)
    intro = ("<p class=meta>Sorted by IRF within each model. A marked cell breaks its threshold (a missing value "
             "breaks it too); the verdict lists every broken threshold.</p>")
    return _section("scores", "Scores and verdicts", intro + "".join(parts) + _png(fig, "IRF per vendor"))


ECDF_POINTS = 2000  # a curve has at most this many steps (a million-record run draws as fast as a small one)


def _ecdf(ax: Any, values: np.ndarray, label: str, colour: Any) -> None:
    if values.size:
        xs = np.sort(values)
        ys = np.arange(1, xs.size + 1) / xs.size
        if xs.size > ECDF_POINTS:  # the curve at evenly spaced quantiles: the same picture, bounded cost
            pick = np.linspace(0, xs.size - 1, ECDF_POINTS).round().astype(int)
            xs, ys = xs[pick], ys[pick]
        ax.step(xs, ys, where="post", label=f"{label} (n={values.size})", color=colour)


def _distributions_section(result: ScoreResult, palette: Palette) -> str | None:
    if result.records is None or result.records.empty:
        return None
    parts = []
    for model in result.models:
        records = _model_records(result, model)
        fig, axes = _figure(1, 2)
        ttft_ax, tps_ax = axes[0]
        drawn = False
        for vendor in _vendors(result, model):
            rows = records[records["vendor"].astype(str) == vendor]
            ok = rows[is_success(rows)]
            ttft, tps = _numbers(ok["ttft_ms"]), _numbers(ok["tps"])
            _ecdf(ttft_ax, ttft, vendor, palette[vendor])
            _ecdf(tps_ax, tps, vendor, palette[vendor])
            drawn = drawn or bool(ttft.size or tps.size)
        for ax, title in ((ttft_ax, "TTFT (ms)"), (tps_ax, "TPS (tokens/s per request)")):
            ax.set_title(f"{model}: {title}, successful items", fontsize=10)
            ax.set_xlabel(title)
            ax.set_ylabel("share of items ≤ x")
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
            else:
                _note(ax, "no successful item with a value")
        scores = result.model_scores(model).to_dict("records")
        columns = [metric(c) for c in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p95_ms", "ttft_p99_ms", "tps", "tps_p50")]
        body = [[str(r["vendor"])] + [fmt(r.get(m.column), m.fmt) for m in columns] for r in scores]
        parts.append(f"<h3>{esc(model)}</h3>" + _table(["Vendor", *(m.header for m in columns)], body)
                     + _png(fig, f"{model}: TTFT and TPS distributions",
                            "Empirical CDF: the share of successful items at or below each value."))
    return _section("latency", "Latency and throughput", "".join(parts))


def _kind_counts(rows: pd.DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    kinds = rows["error_kind"].astype("object").dropna().astype(str)
    errors = {k: int(v) for k, v in kinds[kinds != ""].value_counts().items()}
    anomalies: dict[str, int] = {}
    for cell in rows["anomalies"].astype("object").dropna().astype(str):
        for flag in filter(None, cell.split(";")):
            anomalies[flag] = anomalies.get(flag, 0) + 1
    return errors, anomalies


def _stacked(ax: Any, vendors: list[str], counts: list[dict[str, int]], order: Sequence[str], title: str) -> None:
    kinds = [k for k in order if any(c.get(k) for c in counts)]
    kinds += sorted({k for c in counts for k in c} - set(kinds))
    if not kinds:
        _note(ax, f"no {title.lower()}")
        ax.set_title(title, fontsize=10)
        return
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    left = np.zeros(len(vendors))
    for i, kind in enumerate(kinds):
        values = np.array([c.get(kind, 0) for c in counts], dtype=float)
        ax.barh(vendors[::-1], values[::-1], left=left[::-1], label=kind, color=cmap(i % 20))
        left += values
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("count")
    ax.legend(fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)


def _errors_section(result: ScoreResult, palette: Palette) -> str | None:
    if result.records is None or result.records.empty:
        return None
    parts = []
    for model in result.models:
        records = _model_records(result, model)
        vendors = _vendors(result, model)
        errors, anomalies = [], []
        for vendor in vendors:
            e, a = _kind_counts(records[records["vendor"].astype(str) == vendor])
            errors.append(e)
            anomalies.append(a)
        fig, axes = _figure(1, 2, height=max(2.4, 0.5 * len(vendors) + 1.2))
        _stacked(axes[0][0], vendors, errors, list(ERROR_KINDS), "Failed items by error_kind")
        _stacked(axes[0][1], vendors, anomalies, list(ANOMALIES), "Anomalies by kind")
        error_kinds = sorted({k for c in errors for k in c}, key=lambda k: list(ERROR_KINDS).index(k)
                             if k in ERROR_KINDS else len(ERROR_KINDS))
        anomaly_kinds = sorted({k for c in anomalies for k in c})
        headers = ["Vendor", "Items", *(f"error: {k}" for k in error_kinds), *(f"anomaly: {k}" for k in anomaly_kinds)]
        items = {str(r["vendor"]): r.get("items") for r in result.model_scores(model).to_dict("records")}
        body = [[v, fmt(items.get(v), "int"), *(str(e.get(k, 0)) for k in error_kinds),
                 *(str(a.get(k, 0)) for k in anomaly_kinds)]
                for v, e, a in zip(vendors, errors, anomalies, strict=True)]
        parts.append(f"<h3>{esc(model)}</h3>" + _table(headers, body)
                     + _png(fig, f"{model}: errors and anomalies",
                            "Failed items per error_kind (after retries); anomaly flags on responses, success or not."))
    return _section("errors", "Errors and anomalies", "".join(parts))


def _repeats_section(result: ScoreResult, palette: Palette) -> str | None:
    if not result.scored or result.by_repeat is None or result.by_repeat.empty:
        return None
    shown = [m for m in per_repeat_metrics() if m.column in {c for _, c, _ in TABLE_LAYOUT}]
    shown = shown or list(per_repeat_metrics())[:6]
    parts = []
    for model in result.models:
        table = result.by_repeat[result.by_repeat["model"].astype(str) == model]
        vendors = _vendors(result, model)
        cols = 3
        rows = (len(shown) + cols - 1) // cols
        fig, axes = _figure(rows, cols, height=2.6)
        for i, m in enumerate(shown):
            ax = axes[i // cols][i % cols]
            for x, vendor in enumerate(vendors):
                values = _numbers(table.loc[table["vendor"].astype(str) == vendor, m.column])
                if values.size:
                    ax.scatter(np.full(values.size, x), values, color=palette[vendor], alpha=0.8, s=22)
                    ax.hlines(values.mean(), x - 0.25, x + 0.25, color=palette[vendor])
            ax.set_xticks(range(len(vendors)), vendors, fontsize=8, rotation=20)
            ax.set_title(m.header, fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        for j in range(len(shown), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        scores = result.model_scores(model).to_dict("records")
        body = []
        for r in scores:
            cells = [str(r["vendor"]), fmt(r.get("n_repeats"), "int")]
            for m in shown:
                mean, std = r.get(f"{m.column}_mean"), r.get(f"{m.column}_std")
                cells.append(MISSING if is_missing(mean) else fmt(mean, m.fmt) if is_missing(std)
                             else f"{fmt(mean, m.fmt)} ± {fmt(std, 'num')}")
            body.append(cells)
        repeats = int(table["repeat"].nunique()) if len(table) else 0
        caption = ("One point per repeat, the line at their mean." if repeats > 1
                   else "One repeat: no spread to show (run with --avv-repeats N for it).")
        parts.append(f"<h3>{esc(model)}</h3>" + _table(["Vendor", "Repeats", *(m.header for m in shown)], body)
                     + _png(fig, f"{model}: per-repeat spread", caption))
    return _section("repeats", "Repeats: spread of each metric", "".join(parts))


def _frame_attr(result: ScoreResult, name: str) -> pd.DataFrame | None:
    """A table the result may carry (``per_tool``, ``disagreements``: tool-call correctness), or None."""
    value = getattr(result, name, None)
    return value if isinstance(value, pd.DataFrame) and not value.empty else None


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
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


def _tools_section(result: ScoreResult, palette: Palette) -> str | None:
    tools = _frame_attr(result, "per_tool")
    if tools is None:
        return None
    disagreements = _frame_attr(result, "disagreements")
    parts = []
    for model in result.models:
        table = tools[tools["model"].astype(str) == model] if "model" in tools.columns else tools
        if table.empty:
            continue
        rate = next((c for c in ("tool_match", "args_match", "schema_valid") if c in table.columns), None)
        fig, axes = _figure(1, 1, height=3.4)
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
                ax.bar(np.arange(len(names)) + i * width, values, width, label=vendor,
                       color=palette.get(vendor, "grey"))
            ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=25, fontsize=8)
            ax.set_ylabel(rate)
            ax.set_title(f"{model}: {rate} per tool", fontsize=10)
            ax.legend(fontsize=8)
        else:
            _note(ax, "no per-tool rate to draw")
        headers, body = _cells(table.head(TOOLS_SHOWN))
        block = f"<h3>{esc(model)}: per tool</h3>" + _table(headers, body, left=2) + _png(fig, f"{model}: per tool")
        if disagreements is not None:
            rows = (disagreements[disagreements["model"].astype(str) == model]
                    if "model" in disagreements.columns else disagreements)
            if len(rows):
                headers, body = _cells(rows.head(DISAGREEMENTS_SHOWN))
                block += (f"<h3>{esc(model)}: first disagreements ({min(len(rows), DISAGREEMENTS_SHOWN)} of "
                          f"{len(rows)}; all in disagreements.csv)</h3>"
                          + _table(headers, [[esc(c) for c in r] for r in body], left=len(headers), raw=True))
        parts.append(block)
    return _section("tools", "Tools: per-tool table and disagreements", "".join(parts)) if parts else None


def _stress_section(result: ScoreResult, palette: Palette) -> str | None:
    stress = result.stress
    if stress is None:
        return None
    levels, s = stress.levels, stress.settings
    fig, axes = _figure(1, 3, height=3.4, width=12)
    panels = (("ttft_p95_ms", "TTFT p95 (ms)", s.slo_ttft_p95_ms), ("rate_429", "429 share", None),
              ("tokens_per_s", "output tokens/s (all users)", None))
    for ax, (column, label, slo) in zip(axes[0], panels, strict=True):
        if levels.empty:
            _note(ax, "no levels recorded")
        for vendor, group in levels.groupby("vendor", sort=True):
            ax.plot(group["level"], group[column], marker="o", label=str(vendor),
                    color=palette.get(str(vendor)))
        if slo is not None and not levels.empty:
            ax.axhline(slo, color="grey", linestyle="--", linewidth=1, label="SLO")
        if not levels.empty:
            from matplotlib.ticker import ScalarFormatter

            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(levels["level"].unique()))
            ax.get_xaxis().set_major_formatter(ScalarFormatter())
            ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("concurrency (users per vendor)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
    capacity = [[str(r.vendor), fmt(r.capacity, "int"), fmt(r.first_429_level, "int"),
                 fmt(r.peak_tokens_per_s, "num"), fmt(r.stopped_after_level, "int")]
                for r in stress.capacity.itertuples(index=False)]
    level_rows = [[str(r.vendor), str(r.level), str(r.requests), fmt(r.success_rate, "rate"), fmt(r.rate_429, "rate"),
                   fmt(r.ttft_p95_ms, "num"), fmt(r.latency_p95_ms, "num"), fmt(r.tokens_per_s, "num"),
                   "yes" if r.meets_slo else "no"] for r in levels.itertuples(index=False)]
    body = (f"<p class=meta>SLO: TTFT p95 ≤ {s.slo_ttft_p95_ms:g} ms and error share ≤ {s.slo_error_rate:g}; "
            f"ladder {', '.join(map(str, s.levels))} users per vendor, {s.step_s:g} s per level.</p>"
            + _png(fig, "stress: TTFT p95, 429 share and tokens/s against the level")
            + _table(["Vendor", "Capacity", "First 429 level", "Peak tokens/s", "Stopped after level"], capacity)
            + _table(["Vendor", "Level", "Requests", "Success", "429 share", "TTFT p95 (ms)", "Latency p95 (ms)",
                      "Tokens/s", "SLO met"], level_rows)
            + "".join(f"<p class=meta>{esc(n)}</p>" for n in stress.notes))
    return _section("stress", "Stress: capacity per vendor", body)


def _uncertainty_section(result: ScoreResult, palette: Palette) -> str | None:
    """Intervals, tests against the baseline's noise floor, rank stability, sample size (:mod:`.report_stats`)."""
    from avv_scoring.report.stats_sections import html_section  # imports this module

    return html_section(result, palette)


#: Sections of report.html, in this order (each holds a figure; None leaves a section out).
HTML_SECTIONS: tuple[HtmlSection, ...] = (_scores_section, _uncertainty_section, _distributions_section,
                                         _errors_section, _repeats_section, _tools_section,
                                         trajectory_report.html_section, _stress_section)


# ------------------------------------------------------------------------------------------------- the page


def _header(result: ScoreResult, sections: list[tuple[str, str]]) -> str:
    lines = []
    if result.inputs:
        lines.append("Inputs: " + ", ".join(f"<code>{esc(p)}</code>" for p in result.inputs))
    if result.sample_files:
        lines.append("Sample file: " + ", ".join(f"<code>{esc(p)}</code>" for p in result.sample_files))
    if result.scored:
        checks = ", ".join(f"{esc(c)} {esc(limit_text((k, v)))}" for c, k, v in result.thresholds.checks())
        lines.append(f"Thresholds: {checks or 'none'}")
        irf = ", ".join(f"{esc(c)} ({'higher' if up else 'lower'} better)" for c, up in result.irf_metrics.items())
        lines.append(f"IRF = Σ 1/(rank + 5) over {irf}; ties share the average rank; a missing value adds nothing.")
    nav = "".join(f'<a href="#{key}">{esc(title)}</a>' for key, title in sections)
    warnings = ""
    if result.warnings:
        warnings = ("<details open><summary>Warnings</summary><ul>"
                    + "".join(f"<li>{esc(w)}</li>" for w in result.warnings) + "</ul></details>")
    return ("<h1>avv-score report</h1><p class=meta>" + "<br>".join(lines) + f"</p><nav>{nav}</nav>{warnings}")


def _palette(result: ScoreResult) -> Palette:
    vendors = [str(v) for v in result.scores["vendor"]] if result.scored else []
    if result.stress is not None:
        vendors += [str(v) for v in result.stress.capacity["vendor"]]
    return palette_for(vendors)


def render_html(result: ScoreResult) -> str:
    """The whole page (see the module docstring)."""
    started = time.perf_counter()
    palette = _palette(result)
    with plain_figure_text():
        rendered = [html_ for section in HTML_SECTIONS if (html_ := section(result, palette))]
    titles = []
    for block in rendered:
        key = block.split('id="', 1)[1].split('"', 1)[0]
        title = html.unescape(block.split("<h2>", 1)[1].split("</h2>", 1)[0])
        titles.append((key, title))
    took = time.perf_counter() - started
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    footer = f"<p class=meta>Written by avv-score at {stamp} UTC in {took:.2f} s; self-contained, no network.</p>"
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width, initial-scale=1\">"
            f"<title>avv-score report</title><style>{CSS}</style></head><body><main>"
            + _header(result, titles) + "".join(rendered) + footer + "</main></body></html>\n")


def write_html(result: ScoreResult, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write report.html into ``out_dir``; return {"report.html": path}."""
    path = os.path.join(os.fspath(out_dir), REPORT_HTML)
    write_text(path, render_html(result))
    return {REPORT_HTML: path}


__all__ = ["HTML_SECTIONS", "REPORT_HTML", "render_html", "write_html"]
