"""What a metric declaration is (scoring layer, below the registry): :class:`Metric`, its :class:`Ratio` form,
the formats, directions and verdict limits it may take, and what a sample set must hold for it (:data:`NEEDS`).

A declaration that contradicts itself raises :class:`RegistryError` when it is made (at import of the declaring
module). :mod:`.registry` collects the declarations; the metric modules import these names from there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast, get_args

from avv_core.frame_rows import Cell

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

Fmt = Literal["rate", "num", "int", "text", "irf"]
Better = Literal["higher", "lower", "none"]
Kind = Literal["min", "max"]
#: A verdict limit: ("min", x) = the metric must be ≥ x; ("max", x) = ≤ x.
Limit = tuple[Kind, float]

FMTS: tuple[str, ...] = get_args(Fmt)
BETTER: tuple[str, ...] = get_args(Better)
KINDS: tuple[str, ...] = get_args(Kind)

_COLUMN_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: What a missing value prints as.
MISSING = "n/a"


def fmt(value: Cell, kind: str) -> str:
    """A value as every output prints it, by its format (a metric's :data:`Fmt`, or ``yes_no`` for a flag): rates
    with 4 decimals (0 and 1 as ``0`` / ``1``), IRF with 4 decimals, integers in full, other numbers with 4
    significant digits (≥ 1000 in full), flags as yes / no; text as is; missing (None, NaN) as ``n/a``. Declared
    here, with the formats, so that a verdict's reasons print a metric as its tables do."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if kind == "text":
        return str(value)
    if kind == "yes_no":
        return "yes" if value else "no"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return MISSING
    if kind == "irf":
        return f"{v:.4f}"
    if kind == "rate":
        return f"{v:.0f}" if v in (0, 1) else f"{v:.4f}"
    if kind == "int" or abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.4g}"


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
    #: The metric is the Dice coefficient 2x / (x + n) of a proportion x / n, written as 2x / (2x + (n − x)) —
    #: F1 = 2·TP / (2·TP + FP + FN) of TP / (TP + FP + FN): its interval is that proportion's, mapped (a proportion's
    #: interval does not collapse at 1; :mod:`avv_scoring.stats.intervals`).
    dice: bool = False

    def parts(self, features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per item of ``features`` (the additive form's per-item frame): the numerator and the denominator, as
        float arrays."""
        return _terms(features, self.numerator), _terms(features, self.denominator)

    def share_parts(self, features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per item: the hits and trials of the proportion the metric is (its numerator and denominator, or for a
        Dice form the Jaccard share's TP and TP + FP + FN)."""
        a, b = self.parts(features)
        return (a / 2.0, b - a / 2.0) if self.dice else (a, b)

    def totals(self, sums: Mapping[str, float | np.ndarray]) -> tuple[float | np.ndarray, float | np.ndarray]:
        """The numerator and the denominator on summed sums (each sum's name → its total: a number or an array):
        the successes and trials of a power estimate's standard error."""
        return _weighted(sums, self.numerator), _weighted(sums, self.denominator)


def _weighted(sums: Mapping[str, float | np.ndarray], terms: Terms) -> float | np.ndarray:
    """``Σ weight · sums[name]``."""
    total: float | np.ndarray = 0.0
    for name, weight in terms:
        total = total + weight * sums[name]
    return total


def _terms(features: pd.DataFrame, terms: Terms) -> np.ndarray:
    """``Σ weight · features[name]`` per item (terms are never empty: checked by :class:`Metric`)."""
    total: float | np.ndarray = 0.0
    for name, weight in terms:
        total = total + weight * features[name].to_numpy(dtype=float)
    return cast("np.ndarray", total)  # an array: at least one term


@dataclass(frozen=True)
class NoiseFloor:
    """The baseline against itself for a metric (its repeats, all pairs i < j of one sample): where the report puts it
    beside the vendor's value and which noise test compares the two (docs/scoring.md, "Is the difference real?").
    The baseline's own value and the test are model-level columns (:mod:`avv_scoring.metrics.model_level`); how the
    test's two disagreement rates are summed is :data:`avv_scoring.metrics.noise_floor.DISAGREEMENT`."""

    column: str  # the baseline's own value, e.g. "baseline_self_f1"
    #: The noise test's column: one-sided p that the vendor disagrees with the baseline more often than the baseline
    #: with itself (1 − metric vs 1 − column); "" = none. The statistical verdict reads every declared test.
    test: str = ""
    what: str = ""  # the disagreement in the statistical verdict's reasons ("trigger disagreement")
    #: True: the report's agreement line shows the floor beside the value ("F1 0.93 (baseline vs itself 0.95)");
    #: False: only the test's words show it (trigger agreement: "trigger disagreement 0.07 vs the baseline's own …").
    beside: bool = True


#: How the history compares two runs of a vendor on a metric (:mod:`avv_scoring.history.regression`).
RegressionKind = Literal["mcnemar", "rate", "median"]
REGRESSION_KINDS: tuple[str, ...] = get_args(RegressionKind)


@dataclass(frozen=True)
class Regression:
    """A between-run test of the history (``avv-score trend``) on a metric, on the per-item outcomes the history's
    ``items`` table stores (docs/history.md): ``mcnemar`` — the item agrees with the run's baseline on ``item``
    (both successful, both non-null), McNemar over samples; ``rate`` — the mean of ``item`` over items where it is
    not null, a paired bootstrap; ``median`` — the median of ``item`` over successful items where it is not null,
    a paired bootstrap."""

    kind: RegressionKind
    item: str  # the items-table column the outcome is read from ("success", "called", "ttft_ms", …)
    min_effect: float  # the smallest change flagged: a rate difference, or (medians) a share of the earlier median
    min_abs: float = 0.0  # medians: the absolute floor as well (ms for TTFT)
    speaks_for: tuple[str, ...] = ()  # other registry metrics whose "changed" marks (trend.html) it sets


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
    #: A defect check: what one occurrence proves ("call written as text"). The metric is a rate whose ratio form
    #: counts occurrences per item; its bound ``≤ 0`` FAILs on one occurrence, naming the sample, and never rests on
    #: an interval (docs/explanation/decision.md). Other sessions add defect checks by declaring this.
    defect: str = ""
    #: What the statistics and the live outputs derive from the declaration (docs/reference/metrics.md, "Statistics
    #: per metric"): the baseline's noise floor, the sample-size columns ``<column>_detectable_gap`` /
    #: ``_samples_2pt`` (a ratio form's proportion), the history's between-run test, the position on the web UI's
    #: Vendors tab after the headline metrics (``None``: not there unless ``table``; a metric that ``needs`` agent
    #: tasks shows only in a run that has them), and the Prometheus gauge ``avv_<column>`` (its HELP line; "" = none).
    noise_floor: NoiseFloor | None = None
    power: bool = False
    regression: Regression | None = None
    web: int | None = None
    prometheus: str = ""

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
        if self.defect and (self.ratio is None or self.better != "lower"):
            raise RegistryError(f"{where}: a defect check is a rate (lower is better) with a ratio form counting "
                                "occurrences per item")
        if self.power and (self.ratio is None or not self.interval):
            raise RegistryError(f"{where}: a power estimate needs an interval (the bootstrap's standard error) and a "
                                "ratio form (its proportion's, when the bootstrap has none)")
        floor = self.noise_floor
        if floor is not None and (self.fmt != "rate" or (floor.test and not floor.what)):
            raise RegistryError(f"{where}: a noise floor is a rate's; a noise test says what disagreement it tests")
        if self.regression is not None and (self.better == "none" or self.regression.kind not in REGRESSION_KINDS):
            raise RegistryError(f"{where}: a regression test needs a direction and a kind of "
                                f"{', '.join(REGRESSION_KINDS)}")
        if self.prometheus and self.fmt == "text":
            raise RegistryError(f"{where}: a Prometheus gauge needs a number, not fmt 'text'")
        if "\n" in self.doc:
            raise RegistryError(f"{where}: doc is one line (the full formula belongs in the docstring)")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


def check_limit(metric: Metric, limit: object) -> Limit:
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
