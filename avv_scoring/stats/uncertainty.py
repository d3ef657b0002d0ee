"""Is the difference real? Intervals, tests against the baseline, the baseline's noise floor, rank stability and
sample size, per model (scoring layer, pure over pandas/numpy; the math is in :mod:`.stats`).

One registered model-level function (:func:`uncertainty`, ``@produces`` with ``model_table``) fills every
column declared here; :mod:`.score` calls it once per model with a :class:`ModelTable`. Definitions
(docs/scoring.md, "Is the difference real?"):

- **Units.** The bootstrap resamples *sample ids* of the model; each sample keeps all its repeats, for every
  vendor at once (the resamples are paired across vendors). Per sample the records are reduced once to sums
  (:func:`unit_sums`): items, successes, TP/FP/FN/TN of the trigger pairs, valid and checkable calls, call pairs
  with equal tools / equal calls, TTFT, TPS and token sums and counts.
- **Intervals** ``<m>_ci_low`` / ``<m>_ci_high`` (95 %, percentile bootstrap, ``resamples`` resamples, seeded) for
  :data:`CI_METRICS`; each resampled value is the metric's own formula on the resampled sums (TTFT p50: the
  weighted percentile), so with every weight 1 it is the metric itself.
- **Noise floor** ``baseline_self_*``: the baseline against itself, repeat i vs repeat j over all pairs i < j of
  one sample's successful repeats (trigger F1 and agreement; tool and argument match over pairs where both
  repeats called a tool). Missing with fewer than two repeats.
- **McNemar** ``mcnemar_p``: exact sign test over samples of the discordant trigger pairs (vendor vs baseline,
  same sample and repeat): a sample counts "more" when its pairs where only the vendor called outnumber those
  where only the baseline called, "fewer" for the reverse (ties drop out); with one repeat this is McNemar's
  exact test on the discordant pairs. It answers: does the vendor call tools *more or less often* than the
  baseline on the same prompts (asymmetric disagreement)? Flips that add as many calls as they drop leave it
  silent.
- **Noise test** ``noise_p`` (trigger), ``tool_match_noise_p``, ``args_match_noise_p``: one-sided paired
  bootstrap test that the vendor's disagreement rate with the baseline exceeds the baseline's disagreement
  with itself (:func:`avv_scoring.stats.tests.bootstrap_p_greater`). It answers: do they disagree *more often* than
  the official API disagrees with itself?
- **Sample size**: ``<m>_detectable_gap`` = 2.80 × the bootstrap standard error (α = 0.05 two-sided, 80 %
  power), ``<m>_samples_2pt`` = samples a 2-point gap would need, for F1 and schema accuracy.
- **Rank stability**: IRF on every resample (the IRF inputs' resampled values; an input without a resampling
  formula keeps its observed value); ``p_rank_first`` and ``rank_shares`` (``rank:share;…``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from avv_scoring.load import is_success
from avv_scoring.metrics.calls import CALLED, SIG_CALLS, SIG_TOOLS, TC_INVALID, TC_N, TC_VALID, positive
from avv_scoring.metrics.headline import compared_rows
from avv_scoring.metrics.registry import Metric, baseline_columns, metric, produces
from avv_scoring.stats.tests import (
    average_ranks,
    bootstrap_p_greater,
    detectable_gap,
    holm,
    percentile_interval,
    proportion_se,
    rank_shares,
    ratio,
    resample_counts,
    samples_for_gap,
    sign_test_p,
    standard_error,
    weighted_percentiles,
)
from avv_scoring.verdict import FAIL, PASS, Thresholds, verdict

NAN = float("nan")
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 17
VERDICT_MODES = ("threshold", "statistical")
#: The gap the sample-size columns are for (2 points of a rate).
GAP = 0.02


@dataclass(frozen=True)
class StatsSettings:
    """How intervals and tests are computed (``avv-score --bootstrap N --seed S --verdict MODE``)."""

    resamples: int = DEFAULT_RESAMPLES  # bootstrap resamples; 0 = no intervals, noise tests or rank stability
    seed: int = DEFAULT_SEED  # numpy.random.default_rng(seed): the same seed gives the same intervals
    level: float = 0.95  # interval coverage
    alpha: float = 0.05  # test level of the statistical verdict
    power: float = 0.80  # power of the detectable gap
    verdict: str = "threshold"  # "threshold" (fixed bounds) or "statistical" (agreement against the noise floor)

    def __post_init__(self) -> None:
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int) or self.resamples < 0:
            raise ValueError(f"resamples must be a non-negative integer, got {self.resamples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("level", "alpha", "power"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie strictly between 0 and 1, got {getattr(self, name)!r}")
        if self.verdict not in VERDICT_MODES:
            raise ValueError(f"verdict must be one of {', '.join(VERDICT_MODES)}, got {self.verdict!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ModelTable:
    """One model's rows and what the model-level functions need besides."""

    model: str
    baseline: str  # the baseline vendor's name
    records: pd.DataFrame  # every vendor's rows of the model, de-duplicated and annotated (call helper columns)
    scores: Mapping[str, Mapping[str, Any]]  # vendor → its per-vendor metrics (point values), in output order
    settings: StatsSettings = field(default_factory=StatsSettings)
    irf_metrics: Mapping[str, bool] = field(default_factory=dict)  # IRF inputs: column → higher is better


# ------------------------------------------------------------------------------------------ resampled formulas

Sums = Mapping[str, Any]  # name → per-unit sums summed over units (arrays of resamples × vendors, or scalars)


def _f1(s: Sums) -> Any:
    """2·TP / (2·TP + FP + FN); 1 when there are pairs but no positive; missing with no pair (as trigger_f1)."""
    den = 2 * s["tp"] + s["fp"] + s["fn"]
    return np.where(den > 0, ratio(2 * s["tp"], den), np.where(np.asarray(s["pairs"]) > 0, 1.0, np.nan))


#: Metric column → its formula on summed per-unit statistics (the point value with every weight 1).
FORMULAS: dict[str, Callable[[Sums], Any]] = {
    "success_rate": lambda s: ratio(s["successes"], s["items"]),
    "f1": _f1,
    "trigger_agreement": lambda s: ratio(s["tp"] + s["tn"], s["pairs"]),
    "schema_accuracy": lambda s: ratio(s["schema_valid"], s["schema_calls"]),
    "tool_match": lambda s: ratio(s["tool_eq"], s["call_pairs"]),
    "args_match": lambda s: ratio(s["args_eq"], s["call_pairs"]),
    "tps": lambda s: ratio(s["tps_sum"], s["tps_n"]),
    "avg_ttft_ms": lambda s: ratio(s["ttft_sum"], s["ttft_n"]),
    "avg_tokens": lambda s: ratio(s["tok_sum"], s["tok_n"]),
}
#: Percentile metrics: column → (q, the value list of :class:`UnitSums`).
PERCENTILES: dict[str, tuple[float, str]] = {"ttft_p50_ms": (50.0, "ttft")}
#: Metrics with ``<m>_ci_low`` / ``<m>_ci_high`` columns.
CI_METRICS: tuple[str, ...] = ("success_rate", "f1", "trigger_agreement", "schema_accuracy", "tool_match",
                               "args_match", "ttft_p50_ms", "tps")
#: Per-unit sums of one vendor, in this order (columns of the matrix the weights multiply).
VENDOR_SUMS: tuple[str, ...] = ("items", "successes", "tp", "fp", "fn", "tn", "pairs", "schema_valid", "schema_calls",
                                "call_pairs", "tool_eq", "args_eq", "ttft_sum", "ttft_n", "tps_sum", "tps_n",
                                "tok_sum", "tok_n")
#: Per-unit sums of the baseline against itself (all pairs of repeats i < j).
SELF_SUMS: tuple[str, ...] = ("self_pairs", "self_disc", "self_tp", "self_call_pairs", "self_tool_eq", "self_args_eq")
#: Noise tests: column → (vendor's disagreement rate, the baseline's self-disagreement rate), on summed sums.
NOISE_TESTS: dict[str, tuple[Callable[[Sums], Any], Callable[[Sums], Any]]] = {
    "noise_p": (lambda s: ratio(s["fp"] + s["fn"], s["pairs"]), lambda s: ratio(s["self_disc"], s["self_pairs"])),
    "tool_match_noise_p": (lambda s: 1.0 - ratio(s["tool_eq"], s["call_pairs"]),
                           lambda s: 1.0 - ratio(s["self_tool_eq"], s["self_call_pairs"])),
    "args_match_noise_p": (lambda s: 1.0 - ratio(s["args_eq"], s["call_pairs"]),
                           lambda s: 1.0 - ratio(s["self_args_eq"], s["self_call_pairs"])),
}
#: Sample-size columns: metric → (successes, trials) of its Agresti–Coull fallback standard error.
POWER_METRICS: dict[str, tuple[Callable[[Sums], float], Callable[[Sums], float]]] = {
    "f1": (lambda s: 2 * s["tp"], lambda s: 2 * s["tp"] + s["fp"] + s["fn"]),
    "schema_accuracy": (lambda s: s["schema_valid"], lambda s: s["schema_calls"]),
}


# ----------------------------------------------------------------------------------------------- declarations


def _declarations() -> tuple[Metric, ...]:
    out = [
        Metric("trigger_agreement", "Trigger Agreement", "rate", "higher", order=800,
               doc="(TP + TN) / f1_pairs: share of pairs where vendor and baseline make the same trigger decision"),
    ]
    order = 810
    for column in CI_METRICS:
        base = out[0] if column == "trigger_agreement" else metric(column)
        for end, word in (("low", "lower"), ("high", "upper")):
            out.append(Metric(f"{column}_ci_{end}", f"{base.header} CI {end}", base.fmt, "none", order=order,
                              doc=f"{word} end of the 95 % bootstrap interval of {column} (resampling sample ids)"))
            order += 1
    out += [
        Metric("baseline_self_f1", "Baseline self F1", "rate", "none", order=840,
               doc="trigger F1 of the baseline against itself over all pairs of repeats i < j of a sample "
                   "(the noise floor of f1); missing with < 2 repeats"),
        Metric("baseline_self_agreement", "Baseline self agreement", "rate", "none", order=841,
               doc="share of the baseline's repeat pairs (i < j, both successful) with the same trigger decision"),
        Metric("baseline_self_pairs", "Baseline self pairs", "int", "none", order=842,
               doc="pairs of successful repeats (i < j) of one sample of the baseline"),
        Metric("baseline_self_tool_match", "Baseline self tool match", "rate", "none", order=843,
               doc="tool_match of the baseline against itself over repeat pairs where both called a tool"),
        Metric("baseline_self_args_match", "Baseline self args match", "rate", "none", order=844,
               doc="args_match of the baseline against itself over repeat pairs where both called a tool"),
        Metric("baseline_self_call_pairs", "Baseline self call pairs", "int", "none", order=845,
               doc="repeat pairs (i < j) of one sample where both baseline repeats called a tool"),
        Metric("mcnemar_p", "McNemar p", "num", "none", order=850,
               doc="exact two-sided sign test of mcnemar_more vs mcnemar_fewer (McNemar's exact test with one "
                   "repeat): does the vendor call tools more or less often than the baseline?"),
        Metric("mcnemar_more", "Samples calling more", "int", "none", order=851,
               doc="samples whose pairs where only the vendor called outnumber those where only the baseline did"),
        Metric("mcnemar_fewer", "Samples calling less", "int", "none", order=852,
               doc="samples whose pairs where only the baseline called outnumber those where only the vendor did"),
        Metric("noise_p", "Noise p", "num", "none", order=853,
               doc="one-sided paired bootstrap p: vendor–baseline trigger disagreement > the baseline's "
                   "disagreement with itself; missing with < 2 repeats"),
        Metric("tool_match_noise_p", "Tool noise p", "num", "none", order=854,
               doc="the same test for 1 − tool_match against 1 − baseline_self_tool_match"),
        Metric("args_match_noise_p", "Args noise p", "num", "none", order=855,
               doc="the same test for 1 − args_match against 1 − baseline_self_args_match"),
    ]
    order = 860
    for column in POWER_METRICS:
        header = metric(column).header
        out += [
            Metric(f"{column}_detectable_gap", f"{header} detectable gap", "rate", "none", order=order,
                   doc=f"(z₀.₉₇₅ + z₀.₈) × standard error of {column}: the smallest shift this run detects with 80 % "
                       "power at α = 0.05"),
            Metric(f"{column}_samples_2pt", f"{header} samples for 2 pt", "int", "none", order=order + 1,
                   doc=f"samples needed to detect a 0.02 gap in {column}: ⌈samples × (detectable gap / 0.02)²⌉"),
        ]
        order += 2
    out += [
        Metric("p_rank_first", "P(rank 1)", "rate", "none", order=870,
               doc="share of bootstrap resamples in which the vendor ranks first by IRF (ties split evenly)"),
        Metric("rank_shares", "Rank shares", "text", "none", order=871,
               doc="share of resamples in which the vendor holds each IRF rank, as rank:share;… (ties split)"),
    ]
    return tuple(out)


DECLARED: tuple[Metric, ...] = _declarations()


# ------------------------------------------------------------------------------------------------- unit sums


@dataclass
class UnitSums:
    """Per-unit (sample id) sums of one model: the sufficient statistics of every resampled formula."""

    units: list[str]  # the sample ids, in unit order
    vendors: list[str]
    sums: np.ndarray  # (units, vendors, len(VENDOR_SUMS))
    self_sums: np.ndarray  # (units, len(SELF_SUMS)): the baseline against itself
    values: dict[str, list[tuple[np.ndarray, np.ndarray]]]  # "ttft" → per vendor (values, unit of each value)
    net: np.ndarray  # (units, vendors): pairs only the vendor called − pairs only the baseline called

    def totals(self) -> dict[str, Any]:
        """Every sum over all units (weights 1): name → array over vendors (self sums: scalars)."""
        total = self.sums.sum(axis=0)
        out: dict[str, Any] = {name: total[:, i] for i, name in enumerate(VENDOR_SUMS)}
        self_total = self.self_sums.sum(axis=0)
        out.update({name: float(self_total[i]) for i, name in enumerate(SELF_SUMS)})
        return out


def _repeat(frame: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(frame["repeat"].astype("object"), errors="coerce").fillna(1).astype(int)


def _numbers(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column].astype("object"), errors="coerce").astype(float)


def _side(frame: pd.DataFrame, unit_of: pd.Series) -> pd.DataFrame:
    called = frame[CALLED].astype(bool).to_numpy()
    # the annotation's signatures (sorted names; sorted (name, canonical arguments)): equal exactly when
    # tools_equal / calls_equal; None where the row called no tool
    tool_key = np.where(called, frame[SIG_TOOLS].to_numpy(dtype=object), None)
    call_key = np.where(called, frame[SIG_CALLS].to_numpy(dtype=object), None)
    return pd.DataFrame({
        "unit": unit_of.loc[frame.index].to_numpy(),
        "repeat": _repeat(frame).to_numpy(),
        "ok": is_success(frame).to_numpy(),
        "pos": positive(frame).to_numpy(),
        "called": called,
        "tool_key": tool_key,
        "call_key": call_key,
    }, index=frame.index).drop_duplicates(subset=["unit", "repeat"], keep="last")


def _bincount(units: np.ndarray, weights: Any, n: int) -> np.ndarray:
    return np.bincount(units, weights=np.asarray(weights, dtype=float), minlength=n)[:n]


def _vendor_sums(rows: pd.DataFrame, vendor: pd.DataFrame, base: pd.DataFrame, n: int,
                 unit_of: pd.Series) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    units = unit_of.loc[rows.index].to_numpy()
    ok = is_success(rows).to_numpy()
    out = {name: np.zeros(n) for name in VENDOR_SUMS}
    out["items"] = _bincount(units, np.ones(len(rows)), n)
    out["successes"] = _bincount(units, ok, n)
    joined = vendor.merge(base, on=["unit", "repeat"], how="inner", suffixes=("_v", "_b"))
    pairs = joined[joined["ok_v"] & joined["ok_b"]]
    u = pairs["unit"].to_numpy()
    pv, pb = pairs["pos_v"].to_numpy(bool), pairs["pos_b"].to_numpy(bool)
    out["tp"], out["fp"] = _bincount(u, pv & pb, n), _bincount(u, pv & ~pb, n)
    out["fn"], out["tn"] = _bincount(u, ~pv & pb, n), _bincount(u, ~pv & ~pb, n)
    out["pairs"] = _bincount(u, np.ones(len(pairs)), n)
    # schema accuracy (as metrics.schema_accuracy): calls of successful rows; a tool_calls finish without a call
    # counts as one invalid call
    empty = positive(rows).to_numpy() & (rows[TC_N].to_numpy() == 0)
    valid = np.where(ok, rows[TC_VALID].to_numpy(dtype=float), 0.0)
    invalid = np.where(ok, rows[TC_INVALID].to_numpy(dtype=float), 0.0) + empty
    out["schema_valid"], out["schema_calls"] = _bincount(units, valid, n), _bincount(units, valid + invalid, n)
    both = joined[joined["called_v"] & joined["called_b"]]
    u = both["unit"].to_numpy()
    out["call_pairs"] = _bincount(u, np.ones(len(both)), n)
    out["tool_eq"] = _bincount(u, (both["tool_key_v"] == both["tool_key_b"]).to_numpy(), n)
    out["args_eq"] = _bincount(u, (both["call_key_v"] == both["call_key_b"]).to_numpy(), n)
    kept: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    compared = compared_rows(rows).to_numpy(dtype=bool)  # cost and speed: the items every vendor answered
    for prefix, column in (("ttft", "ttft_ms"), ("tps", "tps"), ("tok", "total_tokens")):
        values = _numbers(rows, column).to_numpy()
        keep = compared & ~np.isnan(values)
        kept[prefix] = (values[keep], units[keep])
        out[f"{prefix}_sum"] = _bincount(units[keep], values[keep], n)
        out[f"{prefix}_n"] = _bincount(units[keep], np.ones(int(keep.sum())), n)
    return np.stack([out[name] for name in VENDOR_SUMS], axis=1), out["fp"] - out["fn"], kept["ttft"]


def _equal_pairs(units: np.ndarray, keys: list[Any], n: int) -> np.ndarray:
    """Per unit: pairs (i < j) of its rows with equal keys = Σ over distinct keys of C(count, 2)."""
    out = np.zeros(n)
    if not len(keys):
        return out
    ids: dict[Any, int] = {}
    codes = np.array([ids.setdefault(key, len(ids)) for key in keys], dtype=np.int64)
    combined = units.astype(np.int64) * len(ids) + codes
    cells, sizes = np.unique(combined, return_counts=True)
    np.add.at(out, cells // len(ids), sizes * (sizes - 1) / 2)
    return out


def _self_sums(base: pd.DataFrame, n: int) -> np.ndarray:
    """The baseline against itself: per unit, over pairs of successful repeats i < j (m repeats, k positive):
    pairs = C(m, 2), discordant = k·(m − k), TP = C(k, 2); over pairs of repeats that both called a tool (c of
    them): call pairs = C(c, 2), equal tools / calls = Σ over distinct keys of C(count, 2)."""
    ok = base[base["ok"]]
    m = _bincount(ok["unit"].to_numpy(), np.ones(len(ok)), n)
    k = _bincount(ok["unit"].to_numpy(), ok["pos"].to_numpy(), n)
    called = base[base["called"]]
    cu = called["unit"].to_numpy()
    c = _bincount(cu, np.ones(len(called)), n)
    columns = {
        "self_pairs": m * (m - 1) / 2, "self_disc": k * (m - k), "self_tp": k * (k - 1) / 2,
        "self_call_pairs": c * (c - 1) / 2,
        "self_tool_eq": _equal_pairs(cu, called["tool_key"].tolist(), n),
        "self_args_eq": _equal_pairs(cu, called["call_key"].tolist(), n),
    }
    return np.stack([columns[name] for name in SELF_SUMS], axis=1)


def unit_sums(table: ModelTable) -> UnitSums:
    """Reduce the model's records to per-unit sums (one pass; see :class:`UnitSums`)."""
    records = table.records if table.records.index.is_unique else table.records.reset_index(drop=True)
    codes, uniques = pd.factorize(records["sample_id"].astype("object").astype(str))  # in order of appearance
    units = [str(u) for u in uniques]
    unit_of = pd.Series(codes, index=records.index)
    n = len(units)
    vendor_col = records["vendor"].astype("object").astype(str)
    vendors = list(table.scores) or list(dict.fromkeys(vendor_col.tolist()))
    base_rows = records[vendor_col == table.baseline]
    base = _side(base_rows, unit_of)
    sums, net, ttft = [], [], []
    for vendor in vendors:
        rows = records[vendor_col == vendor]
        s, d, values = _vendor_sums(rows, _side(rows, unit_of), base, n, unit_of)
        sums.append(s)
        net.append(d)
        ttft.append(values)
    return UnitSums(units, vendors, np.stack(sums, axis=1) if sums else np.zeros((n, 0, len(VENDOR_SUMS))),
                    _self_sums(base, n), {"ttft": ttft},
                    np.stack(net, axis=1) if net else np.zeros((n, 0)))


# ------------------------------------------------------------------------------------------------- bootstrap


@dataclass
class Draws:
    """The resampled values of one model: metric → (resamples, vendors) array."""

    metrics: dict[str, np.ndarray]
    noise: dict[str, np.ndarray]  # noise test → (resamples, vendors) differences vendor − baseline-self
    irf: np.ndarray  # (resamples, vendors)


def _irf_draws(drawn: Mapping[str, np.ndarray], fixed: Mapping[str, np.ndarray], irf_metrics: Mapping[str, bool],
               rows: int, n_vendors: int) -> np.ndarray:
    from avv_scoring.stats.irf import IRF_K  # irf reads the registry at import, which imports this module

    total = np.zeros((rows, n_vendors))
    for column, higher in irf_metrics.items():
        values = drawn[column] if column in drawn else np.broadcast_to(fixed[column], (rows, n_vendors))
        ranks = average_ranks(values, higher)
        total += np.nan_to_num(1.0 / (ranks + IRF_K), nan=0.0)
    return total.round(12)


def bootstrap(sums: UnitSums, settings: StatsSettings, irf_metrics: Mapping[str, bool] | None = None,
              fixed: Mapping[str, np.ndarray] | None = None) -> Draws:
    """Every resampled value of one model, computed ``CHUNK`` resamples at a time (see :mod:`.stats`).

    ``fixed`` = observed values (over vendors) of IRF inputs without a resampling formula."""
    n_units, n_vendors = sums.sums.shape[0], sums.sums.shape[1]
    flat = sums.sums.reshape(n_units, -1)
    irf_metrics = dict(irf_metrics or {})
    wanted = tuple(dict.fromkeys([*CI_METRICS, *(c for c in irf_metrics if c in FORMULAS or c in PERCENTILES)]))
    metrics: dict[str, list[np.ndarray]] = {c: [] for c in wanted}
    noise: dict[str, list[np.ndarray]] = {c: [] for c in NOISE_TESTS}
    irf: list[np.ndarray] = []
    for weights in resample_counts(n_units, settings.resamples, settings.seed):
        k = weights.shape[0]
        summed = (weights @ flat).reshape(k, n_vendors, len(VENDOR_SUMS))
        s: dict[str, Any] = {name: summed[:, :, i] for i, name in enumerate(VENDOR_SUMS)}
        self_summed = weights @ sums.self_sums
        s.update({name: self_summed[:, i][:, None] for i, name in enumerate(SELF_SUMS)})
        drawn: dict[str, np.ndarray] = {}
        for column in wanted:
            if column in FORMULAS:
                drawn[column] = np.broadcast_to(FORMULAS[column](s), (k, n_vendors)).astype(float)
            else:
                q, source = PERCENTILES[column]
                drawn[column] = np.stack([weighted_percentiles(v, u, weights, q) for v, u in sums.values[source]],
                                         axis=1) if n_vendors else np.zeros((k, 0))
            metrics[column].append(drawn[column])
        for column, (vendor_rate, self_rate) in NOISE_TESTS.items():
            noise[column].append(np.asarray(vendor_rate(s) - self_rate(s), dtype=float))
        if irf_metrics:
            irf.append(_irf_draws(drawn, fixed or {}, irf_metrics, k, n_vendors))
    def stack(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, n_vendors))
    return Draws({c: stack(v) for c, v in metrics.items()}, {c: stack(v) for c, v in noise.items()}, stack(irf))


# ------------------------------------------------------------------------------------------------- the metric


def _value(x: Any) -> float:
    x = float(x)
    return NAN if math.isnan(x) else x


def _count(x: Any) -> int:
    return int(round(float(x)))


def _self_columns(totals: Mapping[str, Any]) -> dict[str, Any]:
    pairs, disc, tp = totals["self_pairs"], totals["self_disc"], totals["self_tp"]
    f1_den = 2 * tp + disc
    return {
        "baseline_self_f1": (2 * tp / f1_den) if f1_den else (1.0 if pairs else NAN),
        "baseline_self_agreement": 1.0 - disc / pairs if pairs else NAN,
        "baseline_self_pairs": _count(pairs),
        "baseline_self_tool_match": _value(ratio(totals["self_tool_eq"], totals["self_call_pairs"])),
        "baseline_self_args_match": _value(ratio(totals["self_args_eq"], totals["self_call_pairs"])),
        "baseline_self_call_pairs": _count(totals["self_call_pairs"]),
    }


def _shares_text(shares: np.ndarray) -> str:
    return ";".join(f"{k + 1}:{share:.4f}" for k, share in enumerate(shares) if share > 0)


@produces(*DECLARED)
def uncertainty(model_table: ModelTable) -> dict[str, dict[str, Any]]:
    """Every column of this module for each vendor of one model (definitions in the module docstring)."""
    table = model_table
    settings = table.settings
    sums = unit_sums(table)
    totals = sums.totals()
    vendors = sums.vendors
    fixed = {c: np.array([_value(table.scores.get(v, {}).get(c, NAN)) for v in vendors]) for c in table.irf_metrics}
    draws = bootstrap(sums, settings, table.irf_metrics, fixed) if settings.resamples else None
    shares = rank_shares(draws.irf) if draws is not None and draws.irf.size else None
    self_columns = _self_columns(totals)
    n_units = len(sums.units)
    out: dict[str, dict[str, Any]] = {}
    for j, vendor in enumerate(vendors):
        t = {name: (value[j] if isinstance(value, np.ndarray) else value) for name, value in totals.items()}
        row: dict[str, Any] = {"trigger_agreement": _value(FORMULAS["trigger_agreement"](t))}
        for column in CI_METRICS:
            low, high = percentile_interval(draws.metrics[column][:, j], settings.level) if draws else (NAN, NAN)
            row[f"{column}_ci_low"], row[f"{column}_ci_high"] = low, high
        row.update(self_columns)
        more, fewer = int((sums.net[:, j] > 0).sum()), int((sums.net[:, j] < 0).sum())
        row.update(mcnemar_p=sign_test_p(more, fewer), mcnemar_more=more, mcnemar_fewer=fewer)
        for column, (vendor_rate, self_rate) in NOISE_TESTS.items():
            observed = _value(vendor_rate(t) - self_rate(t))
            row[column] = bootstrap_p_greater(draws.noise[column][:, j], observed) if draws else NAN
        for column, (successes, trials) in POWER_METRICS.items():
            se = standard_error(draws.metrics[column][:, j]) if draws else NAN
            if math.isnan(se) or se == 0:
                se = proportion_se(float(successes(t)), float(trials(t)))
            gap = detectable_gap(se, settings.alpha, settings.power)
            row[f"{column}_detectable_gap"] = gap
            row[f"{column}_samples_2pt"] = samples_for_gap(n_units, se, GAP, settings.alpha, settings.power)
        row["p_rank_first"] = float(shares[j, 0]) if shares is not None else NAN
        row["rank_shares"] = _shares_text(shares[j]) if shares is not None else ""
        out[vendor] = row
    return out


# --------------------------------------------------------------------------------------------------- verdicts


def verdict_thresholds(thresholds: Thresholds, settings: StatsSettings) -> Thresholds:
    """The thresholds a verdict mode checks: all of them (``threshold``), or — ``statistical`` — only those on
    the vendor's own behaviour (success rate, schema accuracy, reasoning-only…): every bound on a column that
    compares the vendor with the baseline (:func:`avv_scoring.metrics.registry.baseline_columns`: F1, tool_match…) is
    replaced by the noise-floor tests of :func:`statistical_reasons`."""
    if settings.verdict != "statistical":
        return thresholds
    agreement = set(baseline_columns())
    out = thresholds
    for column in [c for c in thresholds if c in agreement]:
        out = out.without(column)
    return out.named(f"{thresholds.name}, agreement bounds replaced by the statistical verdict "
                     f"(α = {settings.alpha:g})")


def judge(row: Mapping[str, Any], thresholds: Thresholds, settings: StatsSettings) -> tuple[str, list[str]]:
    """``(verdict, reasons)`` of one vendor: the thresholds (:func:`avv_scoring.verdict.verdict`), plus in
    ``statistical`` mode the noise-floor reasons."""
    outcome, reasons = verdict(row, thresholds)
    if settings.verdict == "statistical":
        reasons = [*reasons, *statistical_reasons(row, settings.alpha)]
    return (FAIL if reasons else PASS), reasons


#: Noise tests of the statistical verdict, with the rates they compare (vendor's, baseline's own) for reasons.
VERDICT_TESTS: tuple[tuple[str, str, str, str], ...] = (
    ("noise_p", "trigger disagreement", "trigger_agreement", "baseline_self_agreement"),
    ("tool_match_noise_p", "tool mismatch", "tool_match", "baseline_self_tool_match"),
    ("args_match_noise_p", "argument mismatch", "args_match", "baseline_self_args_match"),
)


def statistical_reasons(row: Mapping[str, Any], alpha: float) -> list[str]:
    """Why a vendor is worse than the baseline's noise floor (empty: it is not shown to be).

    The three noise tests of the row (:data:`VERDICT_TESTS`) are Holm-adjusted together (:func:`stats.holm`);
    each with an adjusted p < ``alpha`` is a reason. ``noise_p`` missing (no baseline repeat pairs, or no
    trigger pair) is a reason too: without a measured noise floor the vendor cannot pass. The baseline itself
    is the noise floor: no reason.
    """
    if row.get("is_baseline"):
        return []
    ps = [row.get(column) for column, *_ in VERDICT_TESTS]
    ps = [NAN if p is None else float(p) for p in ps]
    if math.isnan(ps[0]):
        return ["noise_p missing (the baseline's noise floor needs ≥ 2 repeats with trigger pairs)"]
    reasons = []
    for (column, what, agreement, self_agreement), p, adjusted in zip(VERDICT_TESTS, ps, holm(ps), strict=True):
        if not math.isnan(adjusted) and adjusted < alpha:
            mine, floor = 1.0 - float(row[agreement]), 1.0 - float(row[self_agreement])
            reasons.append(f"{what} {mine:.4g} > baseline's own {floor:.4g} ({column} {p:.3g}, Holm-adjusted "
                           f"{adjusted:.3g} < {alpha:g})")
    return reasons


__all__ = [
    "CI_METRICS",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "ModelTable",
    "StatsSettings",
    "UnitSums",
    "VERDICT_MODES",
    "bootstrap",
    "judge",
    "statistical_reasons",
    "uncertainty",
    "unit_sums",
    "verdict_thresholds",
]
