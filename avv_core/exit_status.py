"""Exit statuses of every avv command, declared once (``avv-locust``, ``locust -f …``, ``avv-score``).

Each status is one :class:`ExitStatus` member with the sentence a person reads in the docs and in ``--help``;
the docs table (docs/reference/exit-status.md) is rendered from :data:`EXIT_STATUSES`. When several apply to one
run, the most serious wins, in :data:`PRECEDENCE` order (a bad input outranks a failed write, which outranks a run
stopped early, and so on down to a verdict). Statuses 130 and 143 (Ctrl-C / SIGTERM while scoring) are 128 + the
signal, as a shell reports it, and are not listed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0  # every item recorded and scored; with --strict, every vendor PASSes
    INCOMPLETE = 1  # the run stopped early (Ctrl-C, SIGTERM, -t, a budget, every worker lost): resumable
    INPUT = 2  # bad input (config, samples, options, a folder that cannot be resumed, a vendor refused before load)
    WRITE = 3  # records could not be written (disk full, folder not writable) or an item's rows not stored
    SCORING = 4  # every item recorded, but the scores are missing or partial
    REGRESSION = 5  # `avv-score history trend --fail-on-regression`: a vendor's latest run regressed
    VENDOR_BROKEN = 6  # a vendor is a broken setup: every item failed, or the circuit breaker stopped it
    VERDICT_FAIL = 7  # --strict / --avv-strict: a vendor FAILs its verdict
    VERDICT_INCONCLUSIVE = 8  # --strict / --avv-strict: no vendor FAILs but one is INCONCLUSIVE


@dataclass(frozen=True)
class ExitStatusDoc:
    status: ExitStatus  # the number
    meaning: str  # one sentence for the docs table
    commands: str  # which commands can return it


#: Every status with its meaning, in numeric order (the docs table is rendered from this).
EXIT_STATUSES: tuple[ExitStatusDoc, ...] = (
    ExitStatusDoc(ExitStatus.OK, "every item was recorded and scored (with `--strict`: every vendor PASSes)",
                  "all"),
    ExitStatusDoc(ExitStatus.INCOMPLETE, "the run stopped early — Ctrl-C, SIGTERM, `-t/--run-time`, a token or cost "
                  "budget, every worker lost; the records so far are kept and scored and `--avv-resume RUN` "
                  "continues it", "avv-locust"),
    ExitStatusDoc(ExitStatus.INPUT, "bad input (config, samples, options, a run folder that cannot be resumed, a "
                  "vendor refused by the pre-flight check): one message naming the file and line or field, before "
                  "any load", "all"),
    ExitStatusDoc(ExitStatus.WRITE, "records could not be written (disk full, folder not writable), or an item's "
                  "rows could not be stored (an error while pricing, redacting or writing them; run.json's "
                  "`stop_reason` `store_failed`): records.csv holds only whole rows, that item is not counted as "
                  "recorded; fix the cause and resume", "avv-locust"),
    ExitStatusDoc(ExitStatus.SCORING, "every item was recorded, but the scores are missing or partial (scoring "
                  "failed, rows left out, or the history could not be written); `avv-score RUN` scores again",
                  "avv-locust, avv-score"),
    ExitStatusDoc(ExitStatus.REGRESSION, "`--fail-on-regression`: a vendor's latest run has a flagged regression "
                  "or its verdict became FAIL (from PASS or INCONCLUSIVE)", "avv-score history trend"),
    ExitStatusDoc(ExitStatus.VENDOR_BROKEN, "a vendor is a broken setup, not a verdict: every one of its items "
                  "failed, or the circuit breaker stopped it (its items are `skipped: vendor_down`, a resume sends "
                  "them); the closing line names the vendor and why", "avv-locust, avv-score"),
    ExitStatusDoc(ExitStatus.VERDICT_FAIL, "`--strict` / `--avv-strict`: a vendor FAILs its verdict",
                  "avv-locust, avv-score"),
    ExitStatusDoc(ExitStatus.VERDICT_INCONCLUSIVE, "`--strict` / `--avv-strict`: no vendor FAILs but one is "
                  "INCONCLUSIVE (more samples would decide it); `--allow-inconclusive` / "
                  "`--avv-allow-inconclusive` turn this into 0", "avv-locust, avv-score"),
)

#: When several statuses apply, the first of these that applies is the process's status.
PRECEDENCE: tuple[ExitStatus, ...] = (
    ExitStatus.INPUT,
    ExitStatus.WRITE,
    ExitStatus.INCOMPLETE,
    ExitStatus.VENDOR_BROKEN,
    ExitStatus.SCORING,
    ExitStatus.REGRESSION,
    ExitStatus.VERDICT_FAIL,
    ExitStatus.VERDICT_INCONCLUSIVE,
    ExitStatus.OK,
)


def most_serious(statuses: Iterable[int]) -> int:
    """The status that wins among ``statuses`` (0 when empty); a status outside the table (130, 143) wins over
    all of them, since it means the process was interrupted."""
    seen = set(statuses)
    for status in seen:
        if status not in ExitStatus.__members__.values():
            return status
    for status in PRECEDENCE:
        if status in seen:
            return int(status)
    return int(ExitStatus.OK)


def render_exit_table() -> str:
    """The Markdown table of :data:`EXIT_STATUSES` (docs)."""
    lines = ["| status | meaning | returned by |", "|---|---|---|"]
    lines += [f"| {d.status.value} | {d.meaning} | {d.commands} |" for d in EXIT_STATUSES]
    return "\n".join(lines) + "\n"


__all__ = ["EXIT_STATUSES", "PRECEDENCE", "ExitStatus", "ExitStatusDoc", "most_serious", "render_exit_table"]
