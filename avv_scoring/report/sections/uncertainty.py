"""Is the difference real? (report section): per model, from the columns of :mod:`avv_scoring.metrics.uncertainty`, the
95 % intervals of :data:`~avv_scoring.metrics.uncertainty.CI_METRICS` ("0.93 [0.90, 0.96]"), each vendor's agreement
next to the baseline's agreement with itself ("F1 0.93 (baseline vs itself 0.95)") with McNemar's p and the
noise-floor p-values, IRF rank stability, and the sample size (the smallest F1 / schema-accuracy gap the run detects
at 80 % power, and the samples a 2-point gap needs).

report.md and report.html show the same tables and lines; report.html adds a figure (value and interval per vendor
and rate metric, the noise floor dashed). No terminal lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from avv_core.frame_rows import Cell, frame_records
from avv_core.measures import is_missing
from avv_scoring.metrics.registry import metric, noise_floor_metrics, noise_test_metrics, power_metrics
from avv_scoring.metrics.uncertainty import CI_METRICS, GAP
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import MISSING, Palette, figure, fmt, html_table, metric_cell, png
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

Row = Mapping[str, Cell]
Rows = tuple[Row, ...]
QUESTION = "Is the difference real?"


def interval(row: Row, column: str) -> str:
    """``0.9300 [0.9000, 0.9600]`` (the value as the tables format it; the interval left out when missing)."""
    kind = metric(column).fmt
    value, low, high = row.get(column), row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
    if is_missing(value):
        return MISSING
    if is_missing(low) or is_missing(high):
        return fmt(value, kind)
    return f"{fmt(value, kind)} [{fmt(low, kind)}, {fmt(high, kind)}]"


def noise_floors() -> dict[str, str]:
    """Metric → the column of the baseline's value against itself (its noise floor), from the registry's
    declarations (``noise_floor=NoiseFloor(...)``), in interval order."""
    return {m.column: m.noise_floor.column for m in noise_floor_metrics() if m.noise_floor is not None}


def agreement_pairs() -> tuple[tuple[str, str], ...]:
    """(metric, its noise floor's column) shown side by side in the agreement line (``NoiseFloor.beside``)."""
    return tuple((m.column, m.noise_floor.column) for m in noise_floor_metrics()
                 if m.noise_floor is not None and m.noise_floor.beside)


def pvalue(p: Cell) -> str:
    return MISSING if is_missing(p) else f"{float(p):.3g}"


def _settings_line(result: ScoreResult, units: int) -> str:
    s = result.stats
    if not s.resamples:
        return ("No bootstrap (--bootstrap 0): the rates' Wilson intervals are shown; the other intervals, noise "
                "tests, rank stability and detectable gaps are missing.")
    return (f"{s.level * 100:g} % intervals over {units} sample ids (each keeps all its repeats): for rates and F1 the "
            f"Wilson score interval on effective trials (the verdict's), for the others the percentile bootstrap "
            f"({s.resamples} resamples, seed {s.seed}, every vendor resampled together). Definitions: "
            "docs/scoring.md (\"Is the difference real?\", \"Verdicts\").")


def _units(result: ScoreResult, model: str) -> int:
    records = result.records
    if records is None:
        return 0
    return int(of_model(records, model)["sample_id"].astype(str).nunique())


def agreement_line(row: Row) -> str:
    """``F1 0.93 [0.90, 0.96] (baseline vs itself 0.95) · …; McNemar p … · noise p …`` for one vendor."""
    parts = []
    for column, self_column in agreement_pairs():
        if is_missing(row.get(column)):
            continue
        floor = row.get(self_column)
        parts.append(f"{metric(column).header} {interval(row, column)}"
                     + ("" if is_missing(floor) else f" (baseline vs itself {metric_cell(row, self_column)})"))
    text = " · ".join(parts) or "no pair with the baseline"
    if row.get("is_baseline"):
        return f"{row['vendor']} (baseline): {text}"
    more, fewer = metric_cell(row, "mcnemar_more"), metric_cell(row, "mcnemar_fewer")
    tests = [f"McNemar p = {pvalue(row.get('mcnemar_p'))} (calls more often on {more} samples, less often on {fewer})"]
    for m in noise_test_metrics():
        floor = m.noise_floor
        assert floor is not None
        label = metric(floor.test).header  # "Noise p", "Tool noise p"
        label = label[:1].lower() + label[1:]
        if floor.beside:  # its floor is in the agreement part: the test's p alone
            if not is_missing(row.get(floor.test)):
                tests.append(f"{label} = {pvalue(row.get(floor.test))}")
            continue
        value: Cell = row.get(m.column)
        own: Cell = row.get(floor.column)
        if not is_missing(value):
            base = "" if is_missing(own) else f" vs the baseline's own {fmt(1.0 - float(own), 'rate')}"
            tests.append(f"{label} = {pvalue(row.get(floor.test))} ({floor.what} {fmt(1.0 - float(value), 'rate')}"
                         f"{base})")
    return f"{row['vendor']}: {text}; " + " · ".join(tests)


def _ci_headers() -> list[str]:
    return ["Vendor", *(metric(c).header for c in CI_METRICS)]


def _ci_body(rows: Rows) -> list[list[str]]:
    return [[str(r["vendor"]) + (" (baseline)" if r.get("is_baseline") else "")]
            + [interval(r, c) for c in CI_METRICS] for r in rows]


def _rank_table(rows: Rows) -> tuple[list[str], list[list[str]]]:
    n = len(rows)
    headers = ["Vendor", "P(rank 1)", *(f"rank {k}" for k in range(1, n + 1))]
    body = []
    for r in rows:
        shares = dict(part.split(":") for part in str(r.get("rank_shares") or "").split(";") if part)
        body.append([str(r["vendor"]), metric_cell(r, "p_rank_first"),
                     *(fmt(float(shares[str(k)]), "rate") if str(k) in shares else "0" for k in range(1, n + 1))])
    return headers, body


def _power_table(rows: Rows) -> tuple[list[str], list[list[str]]]:
    headers = ["Vendor"]
    powers = [m.column for m in power_metrics()]
    for column in powers:
        header = metric(column).header
        headers += [f"{header} detectable gap", f"{header}: samples for a {GAP * 100:.0f}-point gap"]
    body = []
    for r in rows:
        cells = [str(r["vendor"])]
        for column in powers:
            cells += [metric_cell(r, f"{column}_detectable_gap"), metric_cell(r, f"{column}_samples_2pt")]
        body.append(cells)
    return headers, body


def _verdict_note(result: ScoreResult) -> str | None:
    if result.stats.verdict != "statistical":
        return None
    tests = [m.noise_floor.test for m in noise_test_metrics() if m.noise_floor is not None]
    return (f"Verdict mode: statistical — a vendor FAILs on agreement only where it is worse than the baseline's "
            f"noise floor at α = {result.stats.alpha:g} ({', '.join(tests)}, "
            f"Holm-adjusted together; {tests[0]} missing fails); the bounds on its own behaviour stay "
            f"({result.thresholds.text()}).")


@dataclass(frozen=True)
class ModelStatistics:
    """One model's part: its score rows and the sentences about how they were computed."""

    rows: Rows  # the score rows (by IRF), with the interval, test and power columns
    settings: str  # how the intervals were computed (or that they were not)
    verdict_note: str | None  # the statistical verdict mode's rule, when it is on


def model_statistics(result: ScoreResult, model: str) -> ModelStatistics | None:
    """None when the scores have no interval columns (no model-level metrics ran)."""
    rows = tuple(frame_records(result.model_scores(model)))
    if not rows or "mcnemar_p" not in rows[0]:
        return None
    return ModelStatistics(rows, _settings_line(result, _units(result, model)), _verdict_note(result))


def _has_ranks(rows: Rows) -> bool:
    return any(not is_missing(r.get("p_rank_first")) for r in rows)


def markdown(part: ModelStatistics) -> list[str]:
    rows = part.rows
    blocks = [f"**{QUESTION}** " + part.settings,
              "Intervals (value [95 % interval]):", markdown_table(_ci_headers(), _ci_body(rows))]
    blocks += ["Agreement with the baseline next to the baseline's agreement with itself (its repeats, all pairs), "
               "and the tests (McNemar: calls more or less often than the baseline; noise p: disagrees more often "
               "than the baseline with itself):",
               "\n".join(f"- {markdown_text(agreement_line(r))}" for r in rows)]
    if part.verdict_note:
        blocks.append(markdown_text(part.verdict_note))
    if _has_ranks(rows):
        blocks += ["IRF rank stability (share of resamples holding each rank):", markdown_table(*_rank_table(rows))]
    headers, body = _power_table(tuple(r for r in rows if not r.get("is_baseline")))
    if body:
        blocks += ["Sample size (80 % power, α = 0.05 two-sided; from the bootstrap standard error):",
                   markdown_table(headers, body)]
    return blocks


def _forest(model: str, rows: Rows, palette: Palette) -> str:
    """Each rate metric's value and interval per vendor, the baseline's self-agreement as a dashed line."""
    shown = [c for c in CI_METRICS if metric(c).fmt == "rate" and any(not is_missing(r.get(c)) for r in rows)]
    fig, axes = figure(1, max(1, len(shown)), height=max(2.2, 0.45 * len(rows) + 1.2),
                       width=max(6.0, 2.6 * len(shown)))
    names = [str(r["vendor"]) for r in rows][::-1]
    floors = noise_floors()
    for i, column in enumerate(shown):
        ax = axes[0][i]
        spans: list[tuple[int, float, float, object]] = []  # (y, low, high, colour): one collection of lines
        points: list[tuple[int, float, object]] = []  # (y, value, colour): one collection of points, over them
        for y, r in enumerate(rows[::-1]):
            value: Cell = r.get(column)
            low: Cell = r.get(f"{column}_ci_low")
            high: Cell = r.get(f"{column}_ci_high")
            if is_missing(value):
                continue
            colour = palette.get(str(r["vendor"]), "#444")
            if not (is_missing(low) or is_missing(high)):
                spans.append((y, float(low), float(high), colour))
            points.append((y, float(value), colour))
        if spans:
            ax.hlines([s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans],
                      colors=[s[3] for s in spans], linewidth=2)
        if points:
            ax.scatter([p[1] for p in points], [p[0] for p in points], s=36, color=[p[2] for p in points], zorder=3)
        floor = floors.get(column)
        if floor and not is_missing(rows[0].get(floor)):
            ax.axvline(float(rows[0][floor]), color="#5f6368", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(names)), names if i == 0 else [""] * len(names), fontsize=8)
        ax.set_title(metric(column).header, fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    return png(fig, f"{model}: 95 % intervals",
               "Value and 95 % bootstrap interval per vendor; dashed: the baseline against itself (noise floor).")


def html(parts: Parts[ModelStatistics], palette: Palette) -> str:
    blocks = []
    for model, part in parts:
        rows = part.rows
        blocks.append(f"<h3>{html_text(model)}</h3><p class=meta>{html_text(part.settings)}</p>")
        blocks.append(html_table(_ci_headers(), _ci_body(rows)))
        blocks.append("<ul>" + "".join(f"<li>{html_text(agreement_line(r))}</li>" for r in rows) + "</ul>")
        if part.verdict_note:
            blocks.append(f"<p>{html_text(part.verdict_note)}</p>")
        if _has_ranks(rows):
            blocks.append("<p class=meta>IRF rank stability (share of resamples holding each rank):</p>"
                          + html_table(*_rank_table(rows)))
        headers, body = _power_table(tuple(r for r in rows if not r.get("is_baseline")))
        if body:
            blocks.append("<p class=meta>Sample size (80 % power, α = 0.05 two-sided):</p>" + html_table(headers, body))
        blocks.append(_forest(model, rows, palette))
    return "".join(blocks)


SECTION = ModelSection("uncertainty", f"{QUESTION} Intervals and tests against the baseline", 20, model_statistics,
                       markdown, html)

__all__ = ["QUESTION", "SECTION", "agreement_line", "interval", "pvalue"]
