"""The decision (report section, first in report.md and report.html, last on the terminal): one line per vendor —
its verdict (PASS / FAIL / INCONCLUSIVE) and why, each number in its metric's format, with the confidence and the
thresholds it was reached with (:mod:`avv_scoring.decision`; docs/explanation/decision.md).

:func:`decision_lines` is the terminal block: the harness prints it at the end of a run, ``avv-score`` after its
tables. A vendor whose every item failed is named as a broken setup (:mod:`avv_scoring.run_outcome`).
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_scoring.decision import FAIL, INCONCLUSIVE, PASS
from avv_scoring.report.escape import html_text, markdown_text
from avv_scoring.report.format import Palette
from avv_scoring.report.section import Section
from avv_scoring.run_outcome import broken_vendors
from avv_scoring.score import ScoreResult

#: Where the rule is explained for a buyer (relative to the repository's docs/).
RULE_PAGE = "docs/explanation/decision.md"
VERDICT_CLASS = {PASS: "pass", FAIL: "fail", INCONCLUSIVE: "open"}


@dataclass(frozen=True)
class DecisionLine:
    """One vendor's line."""

    model: str
    vendor: str
    baseline: bool
    verdict: str
    reason: str


@dataclass(frozen=True)
class DecisionBlock:
    """Every vendor's line, and how they were decided."""

    how: str  # "95 % confidence, thresholds avv (interval rule)"
    lines: tuple[DecisionLine, ...]
    several_models: bool


def decision_block(result: ScoreResult) -> DecisionBlock | None:
    """The decision of every scored vendor, in score order (None: nothing scored)."""
    if not result.scored or result.scores.empty:
        return None
    broken = {(b.model, b.vendor): b for b in broken_vendors(result)}
    lines = []
    for row in result.scores.to_dict("records"):
        key = (str(row["model"]), str(row["vendor"]))
        decision = result.decision(*key)
        reason = decision.reason() if decision is not None else str(row.get("verdict_reasons") or "")
        if key in broken:
            reason = broken[key].reason()
        verdict = str(row.get("verdict") or "")
        lines.append(DecisionLine(key[0], key[1], bool(row.get("is_baseline")), verdict, reason))
    return DecisionBlock(how_decided(result), tuple(lines), len(result.models) > 1)


def how_decided(result: ScoreResult) -> str:
    """``95 % confidence, thresholds avv`` (or the peers' point rule, or the statistical verdict)."""
    stats = result.stats
    rule = {"interval": f"{stats.level * 100:g} % confidence",
            "point": "point values against the bounds (--verdict point: the peers' rule)",
            "statistical": f"{stats.level * 100:g} % confidence, agreement against the baseline's noise floor"}
    return f"{rule.get(stats.verdict, stats.verdict)}, thresholds {result.thresholds.name}"


def _name(line: DecisionLine, several: bool) -> str:
    name = f"{line.model}/{line.vendor}" if several else line.vendor
    return f"{name} (baseline)" if line.baseline else name


def decision_lines(result: ScoreResult) -> list[str]:
    """The decision block as plain lines (not escaped: :func:`avv_scoring.report.terminal.render_tables` escapes
    them, as every terminal line): a heading, then one line per vendor — name, verdict, reason. Empty when nothing
    was scored."""
    block = decision_block(result)
    return terminal(block) if block is not None else []


def terminal(block: DecisionBlock) -> list[str]:
    names = [_name(line, block.several_models) for line in block.lines]
    width = max(len(n) for n in names)
    out = ["", f"Decision ({block.how}):"]
    out += [f"  {name:<{width}}  {line.verdict:<12}  {line.reason}".rstrip()
            for name, line in zip(names, block.lines, strict=True)]
    return out + [""]


def markdown(block: DecisionBlock) -> list[str]:
    rows = [f"- {markdown_text(_name(line, block.several_models))}: **{line.verdict}** — {markdown_text(line.reason)}"
            for line in block.lines]
    return [f"Decided at {markdown_text(block.how)} (the rule: [{RULE_PAGE}]({RULE_PAGE})).", "\n".join(rows)]


def html(block: DecisionBlock, palette: Palette) -> str:
    rows = "".join(
        f'<tr><td class="l">{html_text(_name(line, block.several_models))}</td>'
        f'<td class="l {VERDICT_CLASS.get(line.verdict, "")}">{html_text(line.verdict)}</td>'
        f'<td class="l reasons-wide">{html_text(line.reason)}</td></tr>' for line in block.lines)
    return (f"<p class=meta>Decided at {html_text(block.how)}: PASS when every bound holds with that confidence, "
            "FAIL when one is broken with it (or a defect was seen), INCONCLUSIVE otherwise.</p>"
            f'<table><thead><tr><th class="l">Vendor</th><th class="l">Verdict</th><th class="l">Why</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")


SECTION = Section("decision", "Decision", 1, decision_block, markdown, html, terminal, terminal_order=999,
                  leads=True)
