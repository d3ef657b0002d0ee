"""Is the difference real? The bootstrap behind the intervals, tests against the baseline's noise floor, rank
stability and the statistical verdict, per model (scoring layer, pure over pandas/numpy; the math is in
:mod:`avv_scoring.stats.tests`, the columns in :mod:`avv_scoring.metrics.model_level`).

Definitions (docs/scoring.md, "Is the difference real?"):

- **Units.** The bootstrap resamples *sample ids* of the model; each sample keeps all its repeats, for every
  vendor at once (the resamples are paired across vendors). Per sample each vendor's rows are reduced once to
  sums (:func:`vendor_sums`, from the very features its point values were computed from; :func:`unit_sums` puts
  the vendors on the model's units): the sums of the additive form (:mod:`avv_scoring.metrics.additive`) of
  every resampled metric — those with ``interval=True`` and the default IRF inputs (:func:`resampled_metrics`) —,
  each form's ``resampled`` sums, in the order of those metrics; and the per-item values of their percentiles.
- **Resampled values.** A resample's value of a metric is the metric's own ``combine`` on its sums weighted by
  how often each unit was drawn (:meth:`UnitSums.resample`; a percentile: the weighted percentile), so with every
  weight 1 it is the metric itself. Every resample of every vendor is one matrix product.
- **Noise floor** ``baseline_self_*``: the baseline against itself, repeat i vs repeat j over all pairs i < j of
  one sample's successful repeats (trigger F1 and agreement; tool and argument match over pairs where both
  repeats called a tool): :data:`~avv_scoring.metrics.noise_floor.SELF_SUMS`, per unit.
- **Noise tests** (:data:`NOISE_TESTS`): the vendor's disagreement rate with the baseline against the baseline's
  disagreement with itself, on the same resamples (:func:`avv_scoring.stats.tests.bootstrap_p_greater`).
- **Rank stability**: IRF on every resample (the IRF inputs' resampled values; an input that is not resampled
  keeps its observed value).

The statistical verdict that reads the noise tests is :mod:`avv_scoring.statistical_verdict`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from avv_core.decision_options import DEFAULT_CONFIDENCE
from avv_core.decision_options import OLD_VERDICT_MODES as _OLD_VERDICT_MODES
from avv_core.decision_options import VERDICT_MODES as _VERDICT_MODES
from avv_core.frame_rows import Cell
from avv_core.json_types import JSONObject
from avv_scoring.metrics.additive import Additive, Amount, Sums
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.irf import IRF_K, IRF_TIES
from avv_scoring.metrics.noise_floor import DISAGREEMENT, SELF_SUM_INPUTS, SELF_SUMS, self_sums
from avv_scoring.metrics.registry import (
    MetricFunction,
    function_of,
    interval_metrics,
    irf_inputs,
    noise_test_metrics,
    power_metrics,
)
from avv_scoring.metrics.vendor_table import FeatureFrames
from avv_scoring.stats.intervals import Proportion
from avv_scoring.stats.tests import (
    average_ranks,
    per_unit_sums,
    resample_counts,
    weighted_percentiles,
)

NAN = float("nan")
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 17


def non_negative_int(text: str) -> int:
    """The command-line type of ``--bootstrap`` and ``--seed`` (avv-score, avv-score trend): a whole number ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value
#: ``--verdict`` (:mod:`avv_core.decision_options`; what each mode means: :mod:`avv_scoring.decision`).
VERDICT_MODES = _VERDICT_MODES
OLD_VERDICT_MODES = _OLD_VERDICT_MODES
#: The gap the sample-size columns are for (2 points of a rate).
GAP = 0.02


@dataclass(frozen=True)
class StatsSettings:
    """How intervals and tests are computed (``avv-score --bootstrap N --seed S --verdict MODE``)."""

    resamples: int = DEFAULT_RESAMPLES  # bootstrap resamples; 0 = no intervals, noise tests or rank stability
    seed: int = DEFAULT_SEED  # numpy.random.default_rng(seed): the same seed gives the same intervals
    level: float = DEFAULT_CONFIDENCE  # interval coverage = the verdict's confidence (--confidence)
    alpha: float = 0.05  # test level of the statistical verdict
    power: float = 0.80  # power of the detectable gap
    verdict: str = "interval"  # interval (three-way), point (peers' rule) or statistical (noise-floor tests)
    irf_ties: str = "statistical"  # "statistical" (irf_statistical orders the vendors) or "published" (AVV's IRF)

    def __post_init__(self) -> None:
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int) or self.resamples < 0:
            raise ValueError(f"resamples must be a non-negative integer, got {self.resamples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("level", "alpha", "power"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie strictly between 0 and 1, got {getattr(self, name)!r}")
        if self.verdict in OLD_VERDICT_MODES:
            object.__setattr__(self, "verdict", OLD_VERDICT_MODES[self.verdict])
        if self.verdict not in VERDICT_MODES:
            raise ValueError(f"verdict must be one of {', '.join(VERDICT_MODES)}, got {self.verdict!r}")
        if self.irf_ties not in IRF_TIES:
            raise ValueError(f"irf_ties must be one of {', '.join(IRF_TIES)}, got {self.irf_ties!r}")

    def to_dict(self) -> JSONObject:
        return asdict(self)


@dataclass(frozen=True)
class ModelTable:
    """One model's rows and what the model-level functions need besides."""

    model: str
    baseline: str  # the baseline vendor's name
    records: pd.DataFrame  # every vendor's rows of the model, de-duplicated and annotated (call helper columns)
    scores: Mapping[str, Mapping[str, Cell]]  # vendor → its per-vendor metrics (point values), in output order
    settings: StatsSettings = field(default_factory=StatsSettings)
    irf_metrics: Mapping[str, bool] = field(default_factory=dict)  # IRF inputs: column → higher is better
    #: Vendor → its sums per sample id, computed with its point values (:func:`vendor_sums`); a vendor missing
    #: here is summed from ``records``.
    vendor_sums: Mapping[str, VendorSums] = field(default_factory=dict)
    #: Vendor → metric → the proportion a metric with a ratio form is, per sample id (its interval is Wilson's on
    #: effective trials: :mod:`..stats.intervals`); a metric missing here gets the percentile bootstrap interval.
    proportions: Mapping[str, Mapping[str, Proportion]] = field(default_factory=dict)
    #: The model's conformance results (conformance.csv's rows: vendor, check, result, evidence); empty without a
    #: conformance run.
    conformance: pd.DataFrame = field(default_factory=pd.DataFrame)


# ------------------------------------------------------------------------------------------- what is resampled


def resampled_metrics() -> tuple[Metric, ...]:
    """The metrics every bootstrap resample computes: those with an interval (in interval order), then the
    default IRF inputs (in order), each once. An IRF input outside them keeps its observed value on a resample."""
    return tuple({m.column: m for m in (*interval_metrics(), *irf_inputs())}.values())


#: A noise test: (the metric whose form's sums give the vendor's disagreement rate with the baseline, that rate, the
#: baseline's disagreement rate with itself from :data:`~.noise_floor.SELF_SUMS`), on summed sums.
NoiseTest = tuple[str, Callable[[Sums], Amount], Callable[[Sums], Amount]]
#: A power estimate: (successes, trials) of its Agresti–Coull fallback standard error, on the sums of its form.
PowerEstimate = tuple[Callable[[Sums], Amount], Callable[[Sums], Amount]]


def noise_tests() -> dict[str, NoiseTest]:
    """Noise tests: test column → :data:`NoiseTest`, from the metrics that declare one
    (:func:`~avv_scoring.metrics.registry.noise_test_metrics`) and their rates in :data:`~.noise_floor.DISAGREEMENT`."""
    out: dict[str, NoiseTest] = {}
    for m in noise_test_metrics():
        if m.column not in DISAGREEMENT:
            raise ValueError(f"{m.column} declares a noise test but avv_scoring/metrics/noise_floor.py DISAGREEMENT "
                             "has no rates for it")
        assert m.noise_floor is not None
        out[m.noise_floor.test] = (m.column, *DISAGREEMENT[m.column])
    return out


def power_estimates() -> dict[str, PowerEstimate]:
    """Sample-size columns: metric (``power=True``) → :data:`PowerEstimate`, its ratio form's numerator and
    denominator."""
    return {m.column: _power_estimate(m) for m in power_metrics()}


def _power_estimate(m: Metric) -> PowerEstimate:
    form = m.ratio
    if form is None:  # power=True needs a ratio form (checked by Metric)
        raise ValueError(f"{m.column}: a power estimate needs a ratio form")

    def successes(sums: Sums) -> Amount:
        return form.totals(sums)[0]

    def trials(sums: Sums) -> Amount:
        return form.totals(sums)[1]

    return successes, trials


#: The metric whose form's FP and FN give McNemar's discordant pairs.
MCNEMAR_OF = "f1"


def __getattr__(name: str) -> object:
    # read lazily from the registry (every metric module loaded)
    if name == "CI_METRICS":  # the registry's interval=True metrics
        return tuple(m.column for m in interval_metrics())
    if name == "NOISE_TESTS":
        return noise_tests()
    if name == "POWER_METRICS":
        return power_estimates()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Metrics with ``<m>_ci_low`` / ``<m>_ci_high`` columns: the registry's ``interval=True`` metrics (lazy).
CI_METRICS: tuple[str, ...]
NOISE_TESTS: dict[str, NoiseTest]  # :func:`noise_tests` (lazy)
POWER_METRICS: dict[str, PowerEstimate]  # :func:`power_estimates` (lazy)


@dataclass(frozen=True)
class Block:
    """One resampled form's columns in the per-vendor sums of :class:`UnitSums`."""

    function: MetricFunction
    form: Additive
    sums: tuple[str, ...]  # every sum of the form's features (its combine reads them all; the others are 0)
    resampled: tuple[str, ...]  # the sums in the matrix, in order
    start: int  # their first column


# ------------------------------------------------------------------------------------------------- unit sums


@dataclass(frozen=True)
class UnitSums:
    """Per-unit (sample id) sums of one model: the sufficient statistics of every resampled value."""

    units: list[str]  # the sample ids, in unit order
    vendors: list[str]
    blocks: tuple[Block, ...]  # the resampled forms, in the order of :func:`resampled_metrics`
    sums: np.ndarray  # (units, vendors, Σ resampled sums of the blocks)
    self_sums: np.ndarray  # (units, len(SELF_SUMS)): the baseline against itself
    values: dict[str, list[tuple[np.ndarray, np.ndarray]]]  # percentile column → per vendor (values, their units)

    def block_of(self, column: str) -> Block:
        """The block whose form computes ``column``."""
        name = function_of(column).name
        return next(b for b in self.blocks if b.function.name == name)

    def unit_sums_of(self, column: str) -> dict[str, np.ndarray]:
        """Per unit and vendor, the resampled sums of the form that computes ``column``."""
        block = self.block_of(column)
        return {name: self.sums[:, :, block.start + i] for i, name in enumerate(block.resampled)}

    def totals(self, vendor: int) -> Totals:
        """Every sum over all units (every weight 1) of one vendor (by position)."""
        total = self.sums.sum(axis=0)
        self_total = self.self_sums.sum(axis=0)
        return Totals(self, total[vendor], {name: float(self_total[i]) for i, name in enumerate(SELF_SUMS)})

    def resample(self, weights: np.ndarray) -> Resample:
        """The sums of every resample (a row of ``weights``: how often each unit is drawn), all vendors at once."""
        k = weights.shape[0]
        n_units, n_vendors, width = self.sums.shape
        summed = (weights @ self.sums.reshape(n_units, -1)).reshape(k, n_vendors, width)
        self_summed = weights @ self.self_sums
        return Resample(self, weights, summed, {name: self_summed[:, i][:, None] for i, name in enumerate(SELF_SUMS)})


@dataclass(frozen=True)
class Totals:
    """One vendor's sums over all units (the observed values)."""

    unit_sums: UnitSums
    vendor_sums: np.ndarray  # (Σ resampled sums,)
    self_sums: dict[str, float]

    def sums_of(self, column: str) -> dict[str, Amount]:
        block = self.unit_sums.block_of(column)
        return _with_zeros(block, {name: self.vendor_sums[block.start + i] for i, name in enumerate(block.resampled)})


@dataclass(frozen=True)
class Resample:
    """The sums of ``k`` resamples (weights), every vendor at once."""

    unit_sums: UnitSums
    weights: np.ndarray  # (k, units)
    summed: np.ndarray  # (k, vendors, Σ resampled sums)
    self_sums: dict[str, np.ndarray]  # name → (k, 1)

    def sums_of(self, column: str) -> dict[str, Amount]:
        """The sums the form of ``column`` reads: its resampled ones as (k, vendors) arrays, the others 0."""
        block = self.unit_sums.block_of(column)
        return _with_zeros(block, {name: self.summed[:, :, block.start + i] for i, name in enumerate(block.resampled)})

    def value(self, column: str) -> np.ndarray:
        """``column`` on every resample and vendor, (k, vendors): its form's ``combine`` on the resampled sums, or
        a percentile of the values weighted by how often their unit was drawn."""
        k, n_vendors = self.weights.shape[0], self.summed.shape[1]
        form = self.unit_sums.block_of(column).form
        if form.quantiles is not None and column in form.quantiles.columns:
            q = form.quantiles.columns[column]
            pairs = self.unit_sums.values.get(column, [])
            return np.stack([weighted_percentiles(v, u, self.weights, q) for v, u in pairs],
                            axis=1) if pairs else np.zeros((k, 0))
        return np.broadcast_to(form.combine(self.sums_of(column))[column], (k, n_vendors)).astype(float)


def _with_zeros(block: Block, resampled: Mapping[str, Amount]) -> dict[str, Amount]:
    return {**dict.fromkeys(block.sums, 0), **resampled}


def _resampled_functions() -> list[tuple[MetricFunction, Additive]]:
    """The functions of :func:`resampled_metrics` with their forms, each once, in that order."""
    out: dict[str, tuple[MetricFunction, Additive]] = {}
    for m in resampled_metrics():
        function = function_of(m.column)
        form = function.additive
        if form is None:
            raise ValueError(f"{m.column} is resampled (an interval or an IRF input) but {function.name} has no "
                             "additive form")
        out.setdefault(function.name, (function, form))
    return list(out.values())


@dataclass(frozen=True)
class VendorSums:
    """What the bootstrap needs of one vendor's rows: the resampled sums of each of its sample ids, from the same
    features as its point values (:class:`~avv_scoring.metrics.vendor_table.FeatureFrames`)."""

    samples: pd.Index  # the vendor's sample ids, in order of appearance
    blocks: tuple[Block, ...]  # the resampled forms, in the order of :func:`resampled_metrics`
    sums: np.ndarray  # (samples, Σ resampled sums of the blocks)
    values: dict[str, tuple[np.ndarray, np.ndarray]]  # percentile column → (values, the sample of each value)


def vendor_sums(frames: FeatureFrames) -> VendorSums:
    """Reduce one vendor's features to sums per sample id (one ``bincount`` per resampled sum, in row order)."""
    samples = frames.samples()[1]  # in order of appearance
    n = len(samples)
    wanted = {m.column for m in resampled_metrics()}
    blocks: list[Block] = []
    columns: list[np.ndarray] = []
    values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for function, form in _resampled_functions():
        frame = frames.features(function, form)
        resampled = form.resampled_sums(frame)
        blocks.append(Block(function, form, tuple(frame.columns), resampled, len(columns)))
        at = frames.sample_codes(frame.index)
        columns += [per_unit_sums(at, frame[name].to_numpy(dtype=float), n) for name in resampled]
        if form.quantiles is not None and wanted & set(form.quantiles.columns):
            kept = frames.values(function, form.quantiles)
            for column in (c for c in form.quantiles.columns if c in wanted):
                values[column] = (kept.to_numpy(dtype=float), frames.sample_codes(kept.index))
    return VendorSums(pd.Index(samples), tuple(blocks), np.stack(columns, axis=1) if columns else np.zeros((n, 0)),
                      values)


def unit_sums(table: ModelTable) -> UnitSums:
    """The model's per-unit sums: each vendor's :class:`VendorSums` (``table.vendor_sums``, else computed from its
    records) placed on the model's units, and the baseline against itself (see :class:`UnitSums`)."""
    records = table.records if table.records.index.is_unique else table.records.reset_index(drop=True)
    codes, uniques = pd.factorize(records["sample_id"].astype("object").astype(str))  # in order of appearance
    units = pd.Index([str(u) for u in uniques])
    unit_of = pd.Series(codes, index=records.index)
    n = len(units)
    vendor_col = records["vendor"].astype("object").astype(str)
    vendors = list(table.scores) or list(dict.fromkeys(vendor_col.tolist()))
    is_base = (vendor_col == table.baseline).to_numpy(dtype=bool)

    def own(vendor: str | None) -> VendorSums:
        found = table.vendor_sums.get(vendor) if vendor is not None else None
        if found is not None:
            return found
        rows = records[vendor_col == vendor] if vendor is not None else records.iloc[:0]
        return vendor_sums(FeatureFrames(rows, records[is_base]))

    layout = own(vendors[0] if vendors else None).blocks
    width = sum(len(b.resampled) for b in layout)
    sums = np.zeros((n, len(vendors), width))
    values: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for j, vendor in enumerate(vendors):
        mine = own(vendor)
        unit = units.get_indexer(mine.samples)  # the model's unit of each of the vendor's sample ids
        sums[unit, j, :] = mine.sums
        for column, (kept, sample) in mine.values.items():
            order = np.argsort(kept, kind="stable")  # sorted once here, not on each chunk of resamples
            values.setdefault(column, []).append((kept[order], unit[sample][order]))
    base_rows = records.loc[is_base, [c for c in SELF_SUM_INPUTS if c in records.columns]]  # not every column
    return UnitSums(list(units), vendors, layout, sums, self_sums(base_rows, unit_of, n), values)


def mcnemar_net(sums: UnitSums) -> np.ndarray:
    """Per unit and vendor: trigger pairs only the vendor called (FP) − pairs only the baseline called (FN)."""
    trigger = sums.unit_sums_of(MCNEMAR_OF)
    return np.asarray(trigger["fp"] - trigger["fn"])


# ------------------------------------------------------------------------------------------------- bootstrap


@dataclass(frozen=True)
class Draws:
    """The resampled values of one model: metric → (resamples, vendors) array."""

    metrics: dict[str, np.ndarray]
    noise: dict[str, np.ndarray]  # noise test → (resamples, vendors) differences vendor − baseline-self
    irf: np.ndarray  # (resamples, vendors)


def _irf_draws(drawn: Mapping[str, np.ndarray], fixed: Mapping[str, np.ndarray], irf_metrics: Mapping[str, bool],
               rows: int, n_vendors: int) -> np.ndarray:
    total = np.zeros((rows, n_vendors))
    for column, higher in irf_metrics.items():
        values = drawn[column] if column in drawn else np.broadcast_to(fixed[column], (rows, n_vendors))
        ranks = average_ranks(values, higher)
        total += np.nan_to_num(1.0 / (ranks + IRF_K), nan=0.0)
    return total.round(12)


def bootstrap(sums: UnitSums, settings: StatsSettings, irf_metrics: Mapping[str, bool] | None = None,
              fixed: Mapping[str, np.ndarray] | None = None) -> Draws:
    """Every resampled value of one model, computed ``CHUNK`` resamples at a time (see :mod:`..stats.tests`): the
    intervals' metrics, the IRF inputs that are resampled, the noise tests and IRF.

    ``fixed`` = observed values (over vendors) of IRF inputs that are not resampled."""
    n_units, n_vendors = sums.sums.shape[0], len(sums.vendors)
    irf_metrics = dict(irf_metrics or {})
    resampled = {m.column for m in resampled_metrics()}
    intervals = [m.column for m in interval_metrics()]
    wanted = tuple(dict.fromkeys([*intervals, *(c for c in irf_metrics if c in resampled)]))
    metrics: dict[str, list[np.ndarray]] = {c: [] for c in wanted}
    tests = noise_tests()
    noise: dict[str, list[np.ndarray]] = {c: [] for c in tests}
    irf: list[np.ndarray] = []
    for weights in resample_counts(n_units, settings.resamples, settings.seed):
        k = weights.shape[0]
        resample = sums.resample(weights)
        drawn = {column: resample.value(column) for column in wanted}
        for column in wanted:
            metrics[column].append(drawn[column])
        for column, (of, vendor_rate, self_rate) in tests.items():
            noise[column].append(np.asarray(vendor_rate(resample.sums_of(of)) - self_rate(resample.self_sums),
                                            dtype=float))
        if irf_metrics:
            irf.append(_irf_draws(drawn, fixed or {}, irf_metrics, k, n_vendors))

    def stack(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, n_vendors))

    return Draws({c: stack(v) for c, v in metrics.items()}, {c: stack(v) for c, v in noise.items()}, stack(irf))


__all__ = [
    "CI_METRICS",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "GAP",
    "NOISE_TESTS",
    "POWER_METRICS",
    "Block",
    "Draws",
    "ModelTable",
    "Resample",
    "StatsSettings",
    "Totals",
    "UnitSums",
    "OLD_VERDICT_MODES",
    "VERDICT_MODES",
    "VendorSums",
    "bootstrap",
    "mcnemar_net",
    "noise_tests",
    "power_estimates",
    "resampled_metrics",
    "unit_sums",
    "vendor_sums",
]
