"""Is it the same model? (report section): per model, each vendor's identity result against the baseline — ``same``,
``differs`` or ``untested`` with why — its p-value, the prompts compared, the statistic and how often its repeats were
alike, then the baseline against itself (the earlier against the later half of its answers: the test's noise floor)
and what a result means. The columns are :mod:`avv_scoring.metrics.identity`'s; the method is docs/scoring.md's "Is
it the same model?".

A rejection is worded "answers differ from the baseline's": the test sees answers, not weights, so it never names
another model. When every vendor of a model is untested for one reason, the part is that one line. report.md,
report.html and the terminal show the same table and lines; the terminal leaves out a model none of whose vendors
could be tested for want of repeats (a run without ``--avv-repeats``: the default), so that run's output is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.frame_rows import Cell, frame_records
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.metrics.identity import DIFFERS, MIN_PROMPTS, SAME, UNTESTED
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import Column, html_table, metric_column, terminal_table, vendor_label
from avv_scoring.report.section import ModelSection, Parts
from avv_scoring.score import ScoreResult
from avv_scoring.stats.identity import PERMUTATIONS, TEXT_CHARS

TITLE = "Is it the same model? Answers against the baseline"
COLUMNS: tuple[Column, ...] = tuple(metric_column(c) for c in (
    "identity", "identity_p", "identity_prompts", "identity_mmd", "identity_alike", "identity_reason"))
#: A baseline whose repeats are alike on at least this share of prompts looks cached or greedy.
ALIKE_WARNING = 0.9


@dataclass(frozen=True)
class ModelIdentity:
    """One model's part: its score rows (None: one line says it all) and the lines under them."""

    rows: tuple[JSONMapping, ...] | None
    lines: tuple[str, ...]
    no_repeats: bool  # every vendor untested for want of repeats (the terminal leaves the model out)


def method_line(alpha: float) -> str:
    return (f"Two-sample test per vendor, on the prompts both answered at least twice: MMD² over the first "
            f"{TEXT_CHARS} characters of the content, the call decision, the tools, the arguments, the finish reason "
            f"and the length; the labels permuted within each prompt (≤ {PERMUTATIONS:,} permutations); "
            f"α = {alpha:g}. `same` means not rejected at this sample size, not proven equal; the result is "
            "informative, not a verdict bound. Method: docs/scoring.md (\"Is it the same model?\").")


def _pvalue(value: Cell) -> str:
    """``p = 0.31``, or ``p ≤ 0.002`` at the smallest p-value the permutations can give."""
    smallest = 1 / (PERMUTATIONS + 1)
    return f"p ≤ {smallest:.1g}" if float(value) <= smallest * (1 + 1e-9) else f"p = {float(value):.3g}"


def _noise_floor(base: JSONMapping, alpha: float) -> list[str]:
    self_p: Cell = base.get("identity_self_p")
    lines = []
    if is_missing(self_p):
        lines.append(f"The baseline against itself (the earlier against the later half of each prompt's answers): not "
                     f"computed (fewer than {MIN_PROMPTS} prompts with 4 answers or more).")
    elif float(self_p) < alpha:
        lines.append(f"The baseline against itself (the earlier against the later half of each prompt's answers): "
                     f"{_pvalue(self_p)} — its own answers drift between the halves, so no vendor "
                     "was tested against it.")
    else:
        lines.append(f"The baseline against itself (the earlier against the later half of each prompt's answers): "
                     f"{_pvalue(self_p)} — no drift seen.")
    alike: Cell = base.get("identity_alike")
    if not is_missing(alike) and float(alike) >= ALIKE_WARNING:
        lines.append(f"The baseline's repeats are all alike on {float(alike):.0%} of its prompts: above temperature 0 "
                     "that means cached or greedy answers, and a vendor that samples differs from them.")
    return lines


def model_identity(result: ScoreResult, model: str) -> ModelIdentity | None:
    """None when the scores carry no identity column (a stress-only result)."""
    if not result.scored or "identity" not in result.scores.columns:
        return None
    rows = tuple(frame_records(result.model_scores(model)))
    vendors = [r for r in rows if not r.get("is_baseline")]
    base = next((r for r in rows if r.get("is_baseline")), None)
    if not vendors or base is None:
        return None
    alpha = result.stats.alpha
    reasons = {str(r.get("identity_reason")) for r in vendors}
    if all(r.get("identity") == UNTESTED for r in vendors) and len(reasons) == 1:
        reason = reasons.pop()
        return ModelIdentity(None, (f"Not tested: {reason}.",), reason.startswith("no repeats"))
    lines = [method_line(alpha)]
    for r in vendors:
        if r.get("identity") == DIFFERS:
            lines.append(f"{r['vendor']}: answers differ from the baseline's ({_pvalue(r['identity_p'])}, "
                         f"{int(r['identity_prompts'])} prompts).")
        elif r.get("identity") == SAME:
            lines.append(f"{r['vendor']}: no difference from the baseline's answers found ("
                         f"{_pvalue(r['identity_p'])}, {int(r['identity_prompts'])} prompts).")
    return ModelIdentity(rows, tuple(lines + _noise_floor(base, alpha)), False)


def _table(part: ModelIdentity) -> tuple[list[str], list[list[str]]]:
    assert part.rows is not None
    return (["Vendor", *(c.header for c in COLUMNS)],
            [[vendor_label(r), *(c.cell(r) for c in COLUMNS)] for r in part.rows])


def markdown(part: ModelIdentity) -> list[str]:
    if part.rows is None:
        return [f"{TITLE}: " + markdown_text(part.lines[0])]
    return [f"{TITLE}:", markdown_table(*_table(part)), "\n".join(markdown_text(line) + "  " for line in part.lines)]


def html(parts: Parts[ModelIdentity], _palette: object) -> str:
    blocks = []
    for model, part in parts:
        body = "" if part.rows is None else html_table(*_table(part))
        blocks.append(f"<h3>{html_text(model)}</h3>" + body
                      + "".join(f"<p class=meta>{html_text(line)}</p>" for line in part.lines))
    return "".join(blocks)


def terminal(parts: Parts[ModelIdentity]) -> list[str]:
    out: list[str] = []
    for model, part in parts:
        if part.no_repeats:
            continue
        out.append(f"{model}  is it the same model?")
        if part.rows is not None:
            out += terminal_table(*_table(part))
        out += [*part.lines[1 if part.rows is not None else 0:], ""]
    return out


SECTION = ModelSection("identity", TITLE, 22, model_identity, markdown, html, terminal)
