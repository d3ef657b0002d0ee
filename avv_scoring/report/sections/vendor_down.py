"""Vendors stopped (report section): the vendors the harness's circuit breaker stopped during the run (run.json
``vendor_down``): the hard fault their last items all ended with, after how many items, an example of the vendor's
message, the items skipped (``vendor_down``: not sent, not in records.csv, so ``--avv-resume RUN`` sends them) and what
to check. Such a vendor's scores cover only the items it was sent; its run's exit status is 6 (a broken setup, not a
verdict). docs/how-to/broken-vendors.md explains the breaker.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.json_types import JSONMapping
from avv_scoring.report.escape import markdown_table, markdown_text
from avv_scoring.report.format import html_table
from avv_scoring.report.section import Section
from avv_scoring.score import ScoreResult

TITLE = "Vendors stopped (circuit breaker)"
HEADERS = ("Vendor", "Model", "Stopped by", "After items", "Items skipped", "Example", "Check")


@dataclass(frozen=True)
class VendorDown:
    rows: tuple[tuple[str, ...], ...]  # one per stopped vendor
    lines: tuple[str, ...]  # one sentence per stopped vendor


def _row(entry: JSONMapping) -> tuple[str, ...]:
    return (str(entry.get("vendor", "")), str(entry.get("model", "")),
            f"{entry.get('what', '')} ({entry.get('fault', '')})", str(entry.get("after_items", "")),
            str(entry.get("skipped", "")), str(entry.get("example", ""))[:200], str(entry.get("check", "")))


def vendor_down(result: ScoreResult) -> VendorDown | None:
    entries = [entry for found in result.vendor_down.values() for entry in found]
    if not entries:
        return None
    lines = tuple(f"{e.get('vendor')} ({e.get('model')}) was stopped by the circuit breaker: its last "
                  f"{e.get('after_items')} items ended with {e.get('what')}; {e.get('skipped')} items were not sent "
                  "(vendor_down: --avv-resume RUN sends them once it is fixed)" for e in entries)
    return VendorDown(tuple(_row(e) for e in entries), lines)


def markdown(content: VendorDown) -> list[str]:
    return [markdown_table(HEADERS, content.rows),
            markdown_text("Their scores cover only the items they were sent; the run's exit status is 6 (a broken "
                          "setup, not a verdict).")]


def html(content: VendorDown, palette: object) -> str:
    return (html_table(HEADERS, content.rows)
            + "<p class=meta>Their scores cover only the items they were sent; the run's exit status is 6 (a broken "
              "setup, not a verdict).</p>")


def terminal(content: VendorDown) -> list[str]:
    return [f"warning: {line}" for line in content.lines]


SECTION = Section("vendor_down", TITLE, 902, vendor_down, markdown, html, terminal)
