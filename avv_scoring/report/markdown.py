"""report.md (scoring layer, report): the header, the decision (a section that ``leads``), one chapter per model
holding every model section's part in order, then every other whole-result section under its ``## <title>``
heading (:mod:`.section`), joined by blank lines.

Text from configs, samples and vendors is escaped by :mod:`.escape`'s Markdown rules.
"""

from __future__ import annotations

from avv_scoring.report.escape import markdown_text
from avv_scoring.report.format import MISSING
from avv_scoring.report.section import ModelSection, Section, sections
from avv_scoring.score import ScoreResult


def irf_text(result: ScoreResult) -> str:
    """``IRF = Σ 1/(rank + 5) over …`` with the IRF inputs of ``result`` and their directions."""
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


def header(result: ScoreResult) -> list[str]:
    """The title and what was scored: inputs, sample files, thresholds and the IRF formula."""
    lines = []
    if result.inputs:
        lines.append("Inputs: " + ", ".join(f"`{p}`" for p in result.inputs) + "  ")
    if result.sample_files:
        lines.append("Sample file: " + ", ".join(f"`{p}`" for p in result.sample_files) + "  ")
    if result.scored:
        lines.append(f"Thresholds: preset `{result.thresholds.name}`: {result.thresholds.text()}  ")
        lines.append(irf_text(result))
    else:
        lines.append("Per-vendor scores were not computed (stress tables only).")
    return ["# avv-score report", "\n".join(lines)]


def chapters(result: ScoreResult) -> list[str]:
    """Per model: its heading and baseline, then each model section's part."""
    if not result.scored:
        return []
    shown = [s for s in sections() if isinstance(s, ModelSection) and s.markdown is not None]
    blocks: list[str] = []
    for model in result.models:
        blocks += [f"## {markdown_text(model)}", f"Baseline: {markdown_text(result.baselines.get(model, MISSING))}"]
        for section in shown:
            part = section.content(result, model)
            if part is not None and section.markdown is not None:
                blocks += section.markdown(part)
    return blocks


def whole_result_sections(result: ScoreResult, leading: bool = False) -> list[str]:
    """Each whole-result section under its heading (left out when it has nothing to show): those that lead the
    report (``leading``: the decision) or the others."""
    blocks: list[str] = []
    for section in sections():
        if isinstance(section, Section) and section.markdown is not None and section.leads == leading:
            content = section.content(result)
            body = section.markdown(content) if content is not None else []
            if body:
                blocks += [f"## {markdown_text(section.title)}", *body]
    return blocks


def render_markdown(result: ScoreResult) -> str:
    """report.md: the header, the decision, the model chapters, the whole-result sections (warnings, client load,
    stress)."""
    return "\n\n".join(header(result) + whole_result_sections(result, leading=True) + chapters(result)
                       + whole_result_sections(result)) + "\n"


__all__ = ["header", "irf_text", "render_markdown"]
