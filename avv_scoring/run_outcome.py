"""What a scored run means for a pipeline (scoring layer, above :mod:`.score`): the vendors that are a broken setup
rather than a verdict, and the exit status of the decision (``--strict`` / ``--avv-strict``).

One small function each, so that every command computes the same status from the same result: ``avv-score``,
the harness at the end of a run (which also has its own statuses: stopped early, records not written…), and the
circuit breaker of a run (a vendor stopped as broken): the caller takes :func:`avv_core.exit_status.most_serious`
of its statuses and :func:`decision_exit_status`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from avv_core.exit_status import ExitStatus, most_serious
from avv_scoring.decision import FAIL, INCONCLUSIVE
from avv_scoring.score import ScoreResult

#: Characters of an error detail quoted in a broken vendor's line.
DETAIL_CHARS = 160


@dataclass(frozen=True)
class BrokenVendor:
    """A vendor whose every item failed: a broken setup (wrong URL, port, path, key), not a verdict."""

    model: str
    vendor: str
    items: int
    errors: str  # the error kinds, ``kind ×count, …``
    detail: str  # the most frequent error detail (redacted in the records), shortened

    def reason(self) -> str:
        """``broken setup, not a verdict: every one of its 32 items failed (http_4xx ×32: …); check …``."""
        detail = f": {self.detail}" if self.detail else ""
        return (f"broken setup, not a verdict: every one of its {self.items} items failed ({self.errors}{detail}); "
                "check its url, key and model id")

    def line(self) -> str:
        """``vendor flaky (demo-model) is a broken setup, not a verdict: …`` (stderr, the closing lines)."""
        return f"vendor {self.vendor} ({self.model}) is a {self.reason()}"


def broken_vendors(result: ScoreResult) -> list[BrokenVendor]:
    """Every scored vendor with items and no success, in score order."""
    if not result.scored or result.scores.empty:
        return []
    out = []
    for row in result.scores.to_dict("records"):
        items = int(row.get("items") or 0)
        if items and not int(row.get("successes") or 0):
            kinds = [part.split(":") for part in str(row.get("error_kinds") or "").split(";") if ":" in part]
            errors = ", ".join(f"{kind} ×{n}" for kind, n in kinds) or "no error kind recorded"
            out.append(BrokenVendor(str(row["model"]), str(row["vendor"]), items, errors,
                                    _common_detail(result.records, str(row["model"]), str(row["vendor"]))))
    return out


def _common_detail(records: pd.DataFrame | None, model: str, vendor: str) -> str:
    if records is None or "error_detail" not in records.columns:
        return ""
    mine = records[(records["model"].astype(str) == model) & (records["vendor"].astype(str) == vendor)]
    details = mine["error_detail"].dropna().astype(str)
    details = details[details.str.strip() != ""]
    if details.empty:
        return ""
    text = " ".join(details.value_counts().index[0].split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"


def decision_exit_status(result: ScoreResult, strict: bool = False, allow_inconclusive: bool = False) -> int:
    """The exit status the decision asks for: 6 when a vendor is a broken setup (whatever ``strict``); with
    ``strict``, 7 when a vendor FAILs, 8 when one is INCONCLUSIVE (0 with ``allow_inconclusive``); else 0.
    A stress-only result (not scored) decides nothing: 0."""
    if not result.scored:
        return int(ExitStatus.OK)
    statuses: list[int] = []
    if broken_vendors(result):
        statuses.append(ExitStatus.VENDOR_BROKEN)
    if strict:
        verdicts = set(result.scores["verdict"].astype(str)) if not result.scores.empty else set()
        if FAIL in verdicts:
            statuses.append(ExitStatus.VERDICT_FAIL)
        elif INCONCLUSIVE in verdicts and not allow_inconclusive:
            statuses.append(ExitStatus.VERDICT_INCONCLUSIVE)
    return most_serious(statuses)


__all__ = ["BrokenVendor", "broken_vendors", "decision_exit_status"]
