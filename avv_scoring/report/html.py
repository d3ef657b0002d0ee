"""report.html (scoring layer, report): one self-contained page to hand to someone.

Everything is inside the file: the CSS is inline and every figure is a PNG drawn with matplotlib (Agg, no pyplot
state) and embedded as a ``data:`` URI, so the page opens offline in any browser and fetches nothing.

The page is a header (inputs, thresholds, the IRF formula, a link to each section, the warnings), then every
section that has an HTML rendering (:mod:`.section`), in ``html_order``, each a ``<section id="<key>">`` under its
``<h2>`` title: scores and verdicts, "Is the difference real?", latency and throughput, errors and anomalies,
repeats, tools, agent trajectories, stress (:mod:`avv_scoring.report.sections`). Every text is escaped
(:func:`~avv_scoring.report.escape.html_text`); figure text is drawn as written (no TeX math).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import cast

from avv_scoring.metrics.declaration import Limit
from avv_scoring.metrics.registry import limit_text
from avv_scoring.report.escape import html_text
from avv_scoring.report.format import Palette, palette_for, plain_figure_text
from avv_scoring.report.section import AnySection, ModelSection, html_sections
from avv_scoring.score import ScoreResult

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#202124;
background:#fafafa;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px;background:#fff;box-shadow:0 0 4px rgba(0,0,0,.08)}
h1{font-size:1.7em;margin:.2em 0 .4em}h2{font-size:1.3em;margin:1.6em 0 .5em;border-bottom:2px solid #e8eaed;
padding-bottom:.2em}h3{font-size:1.08em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border:1px solid #dadce0;padding:4px 8px;
text-align:right;white-space:nowrap}th{background:#f1f3f4}td.l,th.l{text-align:left}tr.limits th{background:#fff;
font-weight:normal;color:#5f6368;font-size:.85em}td.bad{background:#fce8e6;color:#a50e0e}td.undecided{background:#fef7e0;color:#8a5300}
.pass{background:#e6f4ea;color:#137333;font-weight:600}.fail{background:#fce8e6;color:#a50e0e;font-weight:600}
.open{background:#fef7e0;color:#8a5300;font-weight:600}.reasons-wide{white-space:normal;max-width:760px}
.reasons{font-size:.85em;color:#5f6368;white-space:normal;max-width:260px}
figure{margin:.6em 0 1.2em}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#5f6368}nav a{margin-right:1em}code{background:#f1f3f4;padding:0 3px}
.meta{color:#5f6368;font-size:.9em}.wrap{overflow-x:auto}
"""




def _header(result: ScoreResult, sections: list[AnySection]) -> str:
    lines = []
    if result.inputs:
        lines.append("Inputs: " + ", ".join(f"<code>{html_text(p)}</code>" for p in result.inputs))
    if result.sample_files:
        lines.append("Sample file: " + ", ".join(f"<code>{html_text(p)}</code>" for p in result.sample_files))
    if result.scored:
        checks = ", ".join(f"{html_text(c)} {html_text(limit_text(cast(Limit, (k, v))))}"
                           for c, k, v in result.thresholds.checks())
        lines.append(f"Thresholds: {checks or 'none'}")
        irf = ", ".join(f"{html_text(c)} ({'higher' if up else 'lower'} better)"
                        for c, up in result.irf_metrics.items())
        lines.append(f"IRF = Σ 1/(rank + 5) over {irf}; ties share the average rank; a missing value adds nothing.")
    nav = "".join(f'<a href="#{s.key}">{html_text(s.title)}</a>' for s in sections)
    warnings = ""
    if result.warnings:
        warnings = ("<details open><summary>Warnings</summary><ul>"
                    + "".join(f"<li>{html_text(w)}</li>" for w in result.warnings) + "</ul></details>")
    return "<h1>avv-score report</h1><p class=meta>" + "<br>".join(lines) + f"</p><nav>{nav}</nav>{warnings}"


def _palette(result: ScoreResult) -> Palette:
    vendors = [str(v) for v in result.scores["vendor"]] if result.scored else []
    if result.stress is not None:
        vendors += [str(v) for v in result.stress.capacity["vendor"]]
    return palette_for(vendors)


def _body(section: AnySection, result: ScoreResult, palette: Palette) -> str | None:
    """The section's HTML body, or None when it has nothing to show."""
    if isinstance(section, ModelSection):
        parts = section.parts(result)
        return section.html(parts, palette) if parts is not None and section.html is not None else None
    content = section.content(result)
    return section.html(content, palette) if content is not None and section.html is not None else None


def render_html(result: ScoreResult) -> str:
    """The whole page (see the module docstring)."""
    started = time.perf_counter()
    palette = _palette(result)
    shown: list[tuple[AnySection, str]] = []
    with plain_figure_text():
        for section in html_sections():
            body = _body(section, result, palette)
            if body:
                shown.append((section, body))
    blocks = "".join(f'<section id="{s.key}"><h2>{html_text(s.title)}</h2>{body}</section>' for s, body in shown)
    took = time.perf_counter() - started
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    footer = f"<p class=meta>Written by avv-score at {stamp} UTC in {took:.2f} s; self-contained, no network.</p>"
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width, initial-scale=1\">"
            f"<title>avv-score report</title><style>{CSS}</style></head><body><main>"
            + _header(result, [s for s, _ in shown]) + blocks + footer + "</main></body></html>\n")


__all__ = ["render_html"]
