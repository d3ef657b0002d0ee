"""Settled early (report section): for a run made with ``--avv-settle`` (run.json ``settle``), each vendor's
"settled after n of N samples" with the bound that settled it and its interval at that point, the number of
looks and the error rate spent, the vendors still open at the end, and a warning for a vendor settled on fewer
items of a tool than the floor (the harness's ``FLOOR_PER_TOOL``, written to run.json). The
definitions are in docs/scoring.md ("Settling a verdict early"). report.md and report.html show the table and
the lines; the terminal shows the lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.json_types import JSONMapping
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import html_table
from avv_scoring.report.section import Section
from avv_scoring.score import ScoreResult

TITLE = "Settled early (--avv-settle)"
HEADERS = ("Vendor", "Verdict", "Samples", "Settled by (interval at that point)", "Looks", "Error rate spent")


@dataclass(frozen=True)
class Settle:
    rows: tuple[tuple[str, ...], ...]  # one per vendor of every run made with --avv-settle
    lines: tuple[str, ...]  # "settled after n of N samples …" per settled vendor
    notes: tuple[str, ...]  # the rule (seed, error rate, bounds) per run
    warnings: tuple[str, ...]  # settled on too few items of a tool; a resumed session


def _bound_text(bound: JSONMapping) -> str:
    low, high = bound.get("interval") or (None, None)
    value = bound.get("value")
    shown = f"{value:.4f}" if isinstance(value, (int, float)) else "—"
    sign = "≥" if bound.get("kind") == "min" else "≤"
    interval = f" [{low:.4f}, {high:.4f}]" if isinstance(low, (int, float)) and isinstance(high, (int, float)) else ""
    return f"{bound.get('metric')} {shown}{interval} ({sign} {bound.get('limit'):g}: {bound.get('state')})"


def _settling(entry: JSONMapping) -> list[JSONMapping]:
    state = "broken" if entry.get("verdict") == "fail" else "passed"
    return [b for b in entry.get("bounds") or [] if b.get("state") == state]


def settle(result: ScoreResult) -> Settle | None:
    if not result.settle:
        return None
    rows, lines, notes, warnings = [], [], [], []
    for source, run in result.settle.items():
        bounds = ", ".join(run.get("bounds") or []) or "none"
        notes.append(f"{source}: seed {run.get('seed')}, error rate {run.get('alpha')} per vendor split over its "
                     f"bounds ({bounds}), a look every {run.get('every')} records ({run.get('looks')} looks)."
                     + (f" Bounds without a test (they keep PASS open): {', '.join(run['untested_bounds'])}."
                        if run.get("untested_bounds") else ""))
        if run.get("resumed_session"):
            warnings.append(f"{source}: a resumed session settles no further; vendors settled before stayed settled")
        for name, entry in (run.get("vendors") or {}).items():
            verdict = entry.get("verdict")
            if verdict is None:
                what = "baseline: runs every item another vendor used" if entry.get("baseline") else "not settled"
                rows.append((name, "—", f"{entry.get('tested', '—')} tested, ran to the end", what, str(entry.get(
                    "looks", "—")), "—"))
                continue
            settling = "; ".join(_bound_text(b) for b in _settling(entry))
            samples = f"{entry.get('settled_after')} of {entry.get('of')}"
            spent = entry.get("alpha_spent")
            spent_text = f"{spent:.3g} of {entry.get('alpha')}" if isinstance(spent, (int, float)) else "—"
            rows.append((name, str(verdict).upper(), samples, settling, str(entry.get("looks")), spent_text))
            lines.append(f"{name}: settled {str(verdict).upper()} after {samples} samples — {settling}; "
                         f"{entry.get('skipped', 0)} items skipped (settled)")
            thin = entry.get("thin_tools") or {}
            if thin:
                listed = ", ".join(f"{tool} ({count})" for tool, count in thin.items())
                warnings.append(f"{name} was settled on fewer than {entry.get('floor_per_tool')} items of: {listed}; "
                                "its verdict says little about those tools")
    return Settle(tuple(rows), tuple(lines), tuple(notes), tuple(warnings))


def markdown(content: Settle) -> list[str]:
    blocks = [markdown_table(HEADERS, content.rows)]
    if content.lines:
        blocks.append("\n".join(f"- {markdown_text(line)}" for line in content.lines))
    blocks += [markdown_text(n) for n in content.notes]
    if content.warnings:
        blocks.append("\n".join(f"- **{markdown_text(w)}**" for w in content.warnings))
    return blocks


def html(content: Settle, palette: object) -> str:
    return (html_table(HEADERS, content.rows) + "".join(f"<p>{html_text(line)}</p>" for line in content.lines)
            + "".join(f"<p class=meta>{html_text(n)}</p>" for n in content.notes)
            + "".join(f"<p><strong>{html_text(w)}</strong></p>" for w in content.warnings))


def terminal(content: Settle) -> list[str]:
    return [*content.lines, *(f"warning: {w}" for w in content.warnings)]


SECTION = Section("settle", TITLE, 905, settle, markdown, html, terminal)
