"""The terminal tables (scoring layer, report): every section that has terminal lines (:mod:`.section`), in the
terminal's order: per model the score table, the agent trajectories, the warnings, the client-bound advice, the
stress capacity table, and last the decision block (:func:`avv_scoring.report.sections.decision.decision_lines`).

A section ends a block with a blank line or starts one with it, as it likes: runs of blank lines print as one, and
none at the start or the end. Names, warnings and anything else from configs or vendors show control characters
escaped (:func:`~avv_scoring.report.escape.terminal_text`): an ANSI / OSC sequence in a vendor name is printed, not
run.
"""

from __future__ import annotations

from avv_scoring.report.escape import terminal_text
from avv_scoring.report.section import ModelSection, terminal_sections
from avv_scoring.report.sections.client_load import KEY as CLIENT_LOAD
from avv_scoring.report.sections.decision import SECTION as DECISION_SECTION
from avv_scoring.score import ScoreResult

NO_RECORDS = "avv-score: no records to score"
DECISION = DECISION_SECTION.key


def _lines(result: ScoreResult, client_advice: bool, decision: bool) -> list[str]:
    out: list[str] = [NO_RECORDS] if result.scored and result.scores.empty else []
    for section in terminal_sections():
        if section.terminal is None or (section.key == CLIENT_LOAD and not client_advice) or \
                (section.key == DECISION and not decision):
            continue
        if isinstance(section, ModelSection):
            parts = section.parts(result)
            if parts is not None:
                out += section.terminal(parts)
        else:
            content = section.content(result)
            if content is not None:
                out += section.terminal(content)
    return out


def render_tables(result: ScoreResult, client_advice: bool = True, decision: bool = True) -> str:
    """Plain-text tables for the terminal: one per model (seeds' layout, ranked), the agent trajectories, the
    warnings (with ``client_advice``, the client-bound advice too: the harness prints its own once per run, after
    the tables), the stress capacity table when ``result.stress`` is set, and last (with ``decision``) the decision
    block — the harness prints that one itself, last (:func:`~.sections.decision.decision_lines`)."""
    out: list[str] = []
    for line in _lines(result, client_advice, decision):
        if line or (out and out[-1]):  # no blank line first, none twice
            out.append(terminal_text(line, keep_newlines=True))
    return "\n".join(out).rstrip("\n") + "\n"


__all__ = ["render_tables"]
