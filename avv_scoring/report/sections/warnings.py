"""Warnings (report section): what the reader must know about the inputs and the scoring (skipped sample lines,
incomplete runs, rows left out…). report.md: a list under its heading; terminal: ``warning:`` lines under the score
tables (none when no vendor was scored). report.html shows them in its header (:mod:`avv_scoring.report.html`)."""

from __future__ import annotations

from dataclasses import dataclass

from avv_scoring.report.escape import markdown_text
from avv_scoring.report.section import Section
from avv_scoring.score import ScoreResult


@dataclass(frozen=True)
class Warnings:
    lines: tuple[str, ...]  # one warning each
    under_tables: bool  # the terminal shows score tables (so the warnings under them)


def warnings(result: ScoreResult) -> Warnings | None:
    if not result.warnings:
        return None
    return Warnings(tuple(result.warnings), result.scored and not result.scores.empty)


def markdown(content: Warnings) -> list[str]:
    return ["\n".join(f"- {markdown_text(w)}" for w in content.lines)]


def terminal(content: Warnings) -> list[str]:
    return [f"warning: {w}" for w in content.lines] if content.under_tables else []


SECTION = Section("warnings", "Warnings", 900, warnings, markdown, terminal=terminal)
