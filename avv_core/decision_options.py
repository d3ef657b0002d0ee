"""A verdict's words and options, shared by ``avv-score`` and the harness (core: nothing else of ours is imported,
so the harness reads them without loading scoring): the verdicts (PASS / FAIL / INCONCLUSIVE), the verdict modes
(``--verdict`` / ``--avv-verdict``) and the confidence (``--confidence`` / ``--avv-confidence``). What they mean is
:mod:`avv_scoring.decision`."""

from __future__ import annotations

import math

#: A vendor's verdict, and each bound's state: the bound holds, is broken, or the data do not tell yet.
PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
VERDICTS: tuple[str, ...] = (PASS, FAIL, INCONCLUSIVE)
#: ``interval`` (three-way, on each bound's confidence interval; the default), ``point`` (the peers' rule: point
#: values against the bounds) or ``statistical`` (agreement bounds replaced by noise-floor tests).
VERDICT_MODES: tuple[str, ...] = ("interval", "point", "statistical")
#: Earlier names of the modes, still accepted.
OLD_VERDICT_MODES: dict[str, str] = {"threshold": "point"}
DEFAULT_CONFIDENCE = 0.95


def parse_verdict_mode(text: str) -> str:
    """A verdict mode (an old name gives today's); ValueError naming the choices otherwise."""
    mode = OLD_VERDICT_MODES.get(str(text).strip(), str(text).strip())
    if mode not in VERDICT_MODES:
        raise ValueError(f"{text!r} is not one of {', '.join(VERDICT_MODES)}")
    return mode


def parse_confidence(text: str | float) -> float:
    """A confidence in (0.5, 1), given as a level (``0.95``) or a percentage (``95``, ``95%``); ValueError
    otherwise."""
    try:
        value = float(str(text).strip().rstrip("%"))
    except ValueError:
        raise ValueError(f"{text!r} is not a number (e.g. 0.95 or 95)") from None
    if value >= 1.0:
        value /= 100.0
    if math.isnan(value) or not 0.5 < value < 1.0:
        raise ValueError(f"{text!r}: a confidence lies between 50 % and 100 % (e.g. 0.95 or 95)")
    return value


__all__ = ["DEFAULT_CONFIDENCE", "FAIL", "INCONCLUSIVE", "OLD_VERDICT_MODES", "PASS", "VERDICTS", "VERDICT_MODES",
           "parse_confidence", "parse_verdict_mode"]
