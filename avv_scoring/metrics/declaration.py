"""What a metric declaration is (scoring layer, below the registry): :class:`Metric`, its :class:`Ratio` form,
the formats, directions and verdict limits it may take, and what a sample set must hold for it (:data:`NEEDS`).

A declaration that contradicts itself raises :class:`RegistryError` when it is made (at import of the declaring
module). :mod:`.registry` collects the declarations; the metric modules import these names from there.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

Fmt = Literal["rate", "num", "int", "text", "irf"]
Better = Literal["higher", "lower", "none"]
Kind = Literal["min", "max"]
#: A verdict limit: ("min", x) = the metric must be ≥ x; ("max", x) = ≤ x.
Limit = tuple[Kind, float]

FMTS: tuple[str, ...] = get_args(Fmt)
BETTER: tuple[str, ...] = get_args(Better)
KINDS: tuple[str, ...] = get_args(Kind)

_COLUMN_RE = re.compile(r"^[a-z][a-z0-9_]*$")


#: What a sample set must hold for a metric to exist (``Metric.needs``) → how the report says it is absent. A bound on
#: such a metric is "not judged" when the scored samples lack it (:func:`avv_scoring.verdict.judged_thresholds`).
NEEDS: dict[str, str] = {
    "language": "no scored sample has a language check: expected_language or check_type",
    "gold": "no scored sample has a gold label: expected_tool_call",
    "gold_calls": "no scored sample has gold calls: expected_calls",
    "agent": "no scored sample is an agent task",
    "conformance": "no conformance run was scored (avv-locust --avv-mode conformance)",
}


class RegistryError(ValueError):
    """A metric declaration that contradicts the registry (raised at import of the declaring module)."""


#: A linear combination of an additive form's per-item sums: ((sum name, weight), …).
Terms = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Ratio:
    """A metric as Σ numerator / Σ denominator over the per-item sums of its additive form: what
    ``--avv-settle`` tests while the run goes on (:mod:`avv_scoring.stats.sequential`)."""

    numerator: Terms  # e.g. (("tp", 2.0),)
    denominator: Terms  # e.g. (("tp", 2.0), ("fp", 1.0), ("fn", 1.0)); each item's numerator ≤ its denominator
    item_max: float = 1.0  # largest denominator of one item; a larger item is weighted down to it


@dataclass(frozen=True)
class Metric:
    """One per-vendor score column and everything the outputs need to know about it."""

    column: str  # the one name: CSV, JSON, README, threshold key
    header: str  # e.g. "TTFT (ms)"
    fmt: Fmt  # "rate" | "num" | "int" | "text" | "irf"
    better: Better  # "higher" | "lower" | "none"
    irf: bool = False  # an input of the default IRF; requires better != "none"
    threshold: Limit | None = None  # default verdict limit, e.g. ("min", 0.99)
    table: bool = False  # shown in the headline table (terminal / markdown / web UI)
    count: bool = False  # shown in the "Counts (excluded and missing)" table
    per_repeat: bool = False  # also computed per repeat and summarised as <column>_mean / _std
    order: int = 1000  # position in SCORE_COLUMNS, the count table, the README table (ties: see the module doc)
    doc: str = ""  # the formula, one line
    table_order: int | None = None  # position in the headline table when it differs from ``order``
    group: str = ""  # report.md table that shows it besides the headline/count tables ("correctness")
    interval: bool = False  # a 95 % bootstrap interval <column>_ci_low / _ci_high (needs an additive form)
    interval_order: int | None = None  # position among the intervals when it differs from ``order``
    needs: str = ""  # what the sample set must hold for the metric to exist (a key of NEEDS); "" = nothing
    ratio: Ratio | None = None  # Σa / Σb over its additive form's items: a bound on it can be settled early

    def __post_init__(self) -> None:
        where = f"metric {self.column!r}"
        if not isinstance(self.column, str) or not _COLUMN_RE.match(self.column):
            raise RegistryError(f"{where}: column must be snake_case ([a-z][a-z0-9_]*)")
        if self.fmt not in FMTS:
            raise RegistryError(f"{where}: fmt {self.fmt!r} is not one of {', '.join(FMTS)}")
        if self.better not in BETTER:
            raise RegistryError(f"{where}: better {self.better!r} is not one of {', '.join(BETTER)}")
        if self.irf and self.better == "none":
            raise RegistryError(f"{where}: an IRF input needs a direction (better='higher' or 'lower')")
        if self.interval and self.fmt not in ("rate", "num"):
            raise RegistryError(f"{where}: an interval needs a rate or a number, not fmt {self.fmt!r}")
        if self.threshold is not None:
            check_limit(self, self.threshold)
        if self.needs and self.needs not in NEEDS:
            raise RegistryError(f"{where}: needs {self.needs!r} is not one of {', '.join(NEEDS)}")
        if self.ratio is not None and (self.fmt != "rate" or not self.ratio.numerator or not self.ratio.denominator
                                       or self.ratio.item_max <= 0):
            raise RegistryError(f"{where}: a ratio form needs a rate, terms on both sides and item_max > 0")
        if "\n" in self.doc:
            raise RegistryError(f"{where}: doc is one line (the full formula belongs in the docstring)")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


def check_limit(metric: Metric, limit: Any) -> Limit:
    """``limit`` as a valid :data:`Limit` for ``metric``; raises :class:`RegistryError` otherwise."""
    where = f"metric {metric.column!r}"
    if not (isinstance(limit, tuple) and len(limit) == 2):
        raise RegistryError(f"{where}: a threshold is ('min'|'max', number), got {limit!r}")
    kind, value = limit
    if kind not in KINDS:
        raise RegistryError(f"{where}: threshold kind {kind!r} is not 'min' or 'max'")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise RegistryError(f"{where}: threshold limit {value!r} is not a number")
    if metric.fmt == "text":
        raise RegistryError(f"{where}: a text column cannot have a threshold")
    return ("min" if kind == "min" else "max", float(value))
