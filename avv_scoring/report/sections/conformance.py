"""Conformance (report section; conformance runs only): per model, every check of the suite (rows) for every vendor
(columns: pass / FAIL / n/a), then what each failed and not-applicable check showed (its evidence). A failed check
is a proven defect: ``conformance_failures`` fails the vendor's verdict. The checks and why they matter:
docs/how-to/conformance.md. report.md, report.html and the terminal show the same table; the terminal lists only
the failures' evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_scoring.conformance.checks import BY_NAME, CHECKS, FAIL, NOT_APPLICABLE, PASS
from avv_scoring.report.escape import html_text, markdown_table, markdown_text
from avv_scoring.report.format import Palette, html_table, one_line, terminal_table
from avv_scoring.report.section import ModelSection, Parts, of_model
from avv_scoring.score import ScoreResult

TITLE = "Conformance"
#: How a result prints in the table.
SHOWN = {PASS: "pass", FAIL: "FAIL", NOT_APPLICABLE: "n/a"}
#: Characters of evidence the terminal shows per failure.
TERMINAL_EVIDENCE = 160


@dataclass(frozen=True)
class ModelConformance:
    """One model's part: its vendors (baseline first), the table's rows and each failed / not-applicable result."""

    vendors: tuple[str, ...]  # headers: vendor names, the baseline marked
    rows: tuple[tuple[str, ...], ...]  # per check: its name, then each vendor's result
    failed: tuple[tuple[str, str, str], ...]  # (vendor, check, evidence)
    not_applicable: tuple[tuple[str, str, str], ...]  # (vendor, check, evidence)


def model_conformance(result: ScoreResult, model: str) -> ModelConformance | None:
    """None when the model has no conformance results."""
    table = of_model(result.conformance, model)
    if table.empty:
        return None
    baseline = result.baselines.get(model)
    vendors = list(dict.fromkeys(table["vendor"].astype(str)))
    vendors.sort(key=lambda v: v != baseline)
    cell = {(str(r["vendor"]), str(r["check"])): (str(r["result"]), str(r["evidence"]))
            for r in table.to_dict("records")}
    checks = [c.name for c in CHECKS if any((v, c.name) in cell for v in vendors)]
    rows = tuple((check, *(SHOWN.get(cell.get((v, check), ("", ""))[0], "") for v in vendors)) for check in checks)
    found = [(v, check, *cell[(v, check)]) for check in checks for v in vendors if (v, check) in cell]
    return ModelConformance(
        tuple(f"{v} (baseline)" if v == baseline else v for v in vendors), rows,
        tuple((v, c, e) for v, c, r, e in found if r == FAIL),
        tuple((v, c, e) for v, c, r, e in found if r == NOT_APPLICABLE))


def _count(part: ModelConformance) -> str:
    failing = sorted({v for v, _, _ in part.failed})
    return (f"{len(part.failed)} failed check(s) ({', '.join(failing)}: each a proven defect, the vendor fails)"
            if part.failed else "no vendor failed a check")


def markdown(part: ModelConformance) -> list[str]:
    blocks = [f"Conformance (does the vendor honour the request? the baseline is the reference; "
              f"docs/how-to/conformance.md): {_count(part)}:",
              markdown_table(("Check", *part.vendors), part.rows)]
    for label, found in (("Failed", part.failed), ("Not applicable", part.not_applicable)):
        if found:
            blocks.append(f"{label}:\n\n" + "\n".join(
                f"- {markdown_text(v)} · `{c}` ({markdown_text(BY_NAME[c].title)}): {markdown_text(e)}"
                for v, c, e in found))
    return blocks


def html(parts: Parts[ModelConformance], palette: Palette) -> str:
    blocks = []
    for model, part in parts:
        lists = "".join(
            f"<p class=meta>{label}:</p><ul>"
            + "".join(f"<li>{html_text(v)} · <code>{html_text(c)}</code>: {html_text(e)}</li>" for v, c, e in found)
            + "</ul>" for label, found in (("Failed", part.failed), ("Not applicable", part.not_applicable)) if found)
        blocks.append(f"<h3>{html_text(model)}</h3><p class=meta>{html_text(_count(part))}.</p>"
                      + html_table(("Check", *part.vendors), part.rows) + lists)
    return "".join(blocks)


def terminal(parts: Parts[ModelConformance]) -> list[str]:
    out: list[str] = []
    for model, part in parts:
        out += [f"{model}  conformance: {_count(part)}", *terminal_table(("Check", *part.vendors), part.rows)]
        out += [f"  FAIL {v} · {c}: {one_line(e, TERMINAL_EVIDENCE)}" for v, c, e in part.failed]
        out.append("")
    return out


SECTION = ModelSection("conformance", TITLE, 15, model_conformance, markdown, html, terminal)
