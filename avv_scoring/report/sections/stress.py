"""Stress: capacity per vendor (report section; stress runs only): the SLO and the ladder, the capacity table and
the per-level table, both declared once here (:data:`CAPACITY_TABLE`, :data:`LEVEL_TABLE`: columns, headers,
formats; the web UI's Stress levels tab shows the same); the tables themselves are :mod:`avv_scoring.stress`.

report.md: both tables, links to the two plots (stress_ttft_p95.png, stress_tokens_per_s.png) and the notes.
report.html: both tables and a figure (TTFT p95, 429 share and output tokens/s against the level). Terminal: the
capacity table.
"""

from __future__ import annotations

from avv_core.frame_rows import frame_records
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import (
    Column,
    Palette,
    figure,
    headers_of,
    html_table,
    note,
    png,
    rows_of,
    terminal_table,
)
from avv_scoring.report.section import Section
from avv_scoring.score import ScoreResult
from avv_scoring.stress import TOKENS_PLOT, TTFT_PLOT, StressResult

TITLE = "Stress: capacity per vendor"

#: The capacity table every output shows (report.md, report.html, the terminal): header, column, format.
CAPACITY_TABLE: tuple[Column, ...] = (
    Column("Vendor", "vendor", "text"), Column("Capacity", "capacity", "int"),
    Column("First 429 level", "first_429_level", "int"), Column("Peak tokens/s", "peak_tokens_per_s", "num"),
    Column("Stopped after level", "stopped_after_level", "int"),
)
#: The per-level table every output shows (report.md, report.html, the web UI's Stress levels tab): header, column,
#: format. A registered metric (success_rate, ttft_p95_ms) prints in its registry format (format None).
LEVEL_TABLE: tuple[Column, ...] = (
    Column("Vendor", "vendor", "text"), Column("Level", "level", "int"), Column("Requests", "requests", "int"),
    Column("Success", "success_rate"), Column("429 share", "rate_429", "rate"), Column("TTFT p95 (ms)", "ttft_p95_ms"),
    Column("Latency p95 (ms)", "latency_p95_ms", "num"), Column("Tokens/s", "tokens_per_s", "num"),
    Column("SLO met", "meets_slo", "yes_no"),
)


def stress(result: ScoreResult) -> StressResult | None:
    return result.stress


def _capacity(result: StressResult) -> tuple[list[str], list[list[str]]]:
    return headers_of(CAPACITY_TABLE), rows_of(CAPACITY_TABLE, frame_records(result.capacity))


def _levels(result: StressResult) -> tuple[list[str], list[list[str]]]:
    return headers_of(LEVEL_TABLE), rows_of(LEVEL_TABLE, frame_records(result.levels))


def markdown(result: StressResult) -> list[str]:
    s = result.settings
    ladder = ", ".join(str(level) for level in s.levels) or "from the records"
    blocks = [f"SLO: TTFT p95 ≤ {s.slo_ttft_p95_ms:g} ms and error share ≤ {s.slo_error_rate:g}. "
              f"Ladder: {ladder} users per vendor, {s.step_s:g} s per level; tokens/s uses each level's measured "
              "duration.", markdown_table(*_capacity(result)), markdown_table(*_levels(result))]
    if len(result.levels):
        blocks.append(f"![TTFT p95]({TTFT_PLOT}) ![tokens/s]({TOKENS_PLOT})")
    if result.notes:
        blocks.append("\n".join(f"- {markdown_text(n)}" for n in result.notes))
    return blocks


def render_stress_markdown(result: StressResult) -> str:
    """The stress section of report.md, heading included (no trailing newline)."""
    return "\n\n".join([f"## {TITLE}", *markdown(result)])


def _figure(result: StressResult, palette: Palette) -> str:
    levels, s = result.levels, result.settings
    fig, axes = figure(1, 3, height=3.4, width=12)
    panels = (("ttft_p95_ms", "TTFT p95 (ms)", s.slo_ttft_p95_ms), ("rate_429", "429 share", None),
              ("tokens_per_s", "output tokens/s (all users)", None))
    for ax, (column, label, slo) in zip(axes[0], panels, strict=True):
        if levels.empty:
            note(ax, "no levels recorded")
        for vendor, group in levels.groupby("vendor", sort=True):
            ax.plot(group["level"], group[column], marker="o", label=str(vendor), color=palette.get(str(vendor)))
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
    return png(fig, "stress: TTFT p95, 429 share and tokens/s against the level")


def html(result: StressResult, palette: Palette) -> str:
    s = result.settings
    return (f"<p class=meta>SLO: TTFT p95 ≤ {s.slo_ttft_p95_ms:g} ms and error share ≤ {s.slo_error_rate:g}; "
            f"ladder {', '.join(map(str, s.levels))} users per vendor, {s.step_s:g} s per level.</p>"
            + _figure(result, palette) + html_table(*_capacity(result)) + html_table(*_levels(result))
            + "".join(f"<p class=meta>{html_text(n)}</p>" for n in result.notes))


def terminal(result: StressResult) -> list[str]:
    return ["", TITLE, *terminal_table(*_capacity(result))]


def render_stress_terminal(result: StressResult) -> str:
    """The terminal's capacity table (no trailing newline)."""
    return "\n".join(terminal(result)[1:])


SECTION = Section("stress", TITLE, 950, stress, markdown, html, terminal)

__all__ = ["SECTION", "render_stress_markdown", "render_stress_terminal"]
