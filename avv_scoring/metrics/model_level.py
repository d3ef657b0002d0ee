"""The model-level metrics of "Is the difference real?" (scoring layer, pure): one function, :func:`uncertainty`,
called once per model with every vendor's rows (:class:`~avv_scoring.metrics.uncertainty.ModelTable`), fills the
columns declared here; the resampling and the tests are :mod:`avv_scoring.metrics.uncertainty` and
:mod:`avv_scoring.stats.tests`. Definitions (docs/scoring.md, "Is the difference real?"):

- **Intervals** ``<m>_ci_low`` / ``<m>_ci_high`` (95 %, the verdict's confidence) for every metric declared with
  ``interval=True``: a metric with a ratio form (a proportion: success rate, F1 through its Jaccard share, trigger
  agreement, schema accuracy, tool and args match) gets the Wilson score interval on its effective trials over
  sample ids (:mod:`avv_scoring.stats.intervals`: it never collapses to [1, 1]), the others the percentile bootstrap
  (``resamples`` resamples, seeded, resampling sample ids). The verdict reads the same intervals
  (:mod:`avv_scoring.decision`). The columns follow from those declarations
  (:meth:`~avv_scoring.metrics.registry.Registry.produces_derived`), so a new metric with an interval is one
  declaration in its own module.
- **Noise floor** ``baseline_self_*``: the baseline against itself over all pairs of one sample's successful
  repeats; missing with fewer than two repeats.
- **McNemar** ``mcnemar_p``: exact sign test over samples of the discordant trigger pairs (vendor vs baseline,
  same sample and repeat): a sample counts "more" when its pairs where only the vendor called outnumber those
  where only the baseline called, "fewer" for the reverse (ties drop out); with one repeat this is McNemar's
  exact test on the discordant pairs. It answers: does the vendor call tools *more or less often* than the
  baseline on the same prompts (asymmetric disagreement)? Flips that add as many calls as they drop leave it
  silent.
- **Noise tests** ``noise_p`` (trigger), ``tool_match_noise_p``, ``args_match_noise_p``: one-sided paired
  bootstrap test that the vendor's disagreement rate with the baseline exceeds the baseline's disagreement
  with itself. It answers: do they disagree *more often* than the official API disagrees with itself?
- **Sample size**: ``<m>_detectable_gap`` = 2.80 × the bootstrap standard error (α = 0.05 two-sided, 80 %
  power), ``<m>_samples_2pt`` = samples a 2-point gap would need, for every metric declared with ``power=True``
  (F1 and schema accuracy; the proportion its ratio form is gives the fallback standard error).
- **Rank stability**: IRF on every resample; ``p_rank_first`` and ``rank_shares`` (``rank:share;…``).
- **IRF with statistical ties** (``--irf-ties statistical``): ``irf_statistical``, IRF over ranks where vendors whose
  paired 95 % interval of the difference contains 0 share their rank (:mod:`avv_scoring.metrics.irf`), and
  ``irf_tied_with``; missing with the published IRF alone (the default) or without resamples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from avv_scoring.metrics.additive import NAN, Columns
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.irf import statistical_irf
from avv_scoring.metrics.registry import interval_metrics, intervals_of, metric, power_metrics, produces_derived
from avv_scoring.metrics.uncertainty import (
    GAP,
    Draws,
    ModelTable,
    bootstrap,
    mcnemar_net,
    noise_tests,
    power_estimates,
    unit_sums,
)
from avv_scoring.stats.intervals import Proportion, dice
from avv_scoring.stats.tests import (
    bootstrap_p_greater,
    detectable_gap,
    percentile_interval,
    proportion_se,
    rank_shares,
    ratio,
    samples_for_gap,
    sign_test_p,
    standard_error,
)

#: Where the interval columns start in the column order (``order`` 810 + their position).
INTERVAL_ORDER = 810


def declarations(metrics: Sequence[Metric]) -> tuple[Metric, ...]:
    """The columns of :func:`uncertainty`, given every metric declared directly (``metrics``)."""
    out: list[Metric] = []
    order = INTERVAL_ORDER
    for base in intervals_of(metrics):
        for end, word in (("low", "lower"), ("high", "upper")):
            how = ("Wilson score interval on effective trials over sample ids" if base.ratio is not None
                   else "bootstrap interval (resampling sample ids)")
            doc = f"{word} end of the 95 % {how} of {base.column}"
            out.append(Metric(f"{base.column}_ci_{end}", f"{base.header} CI {end}", base.fmt, "none", order=order,
                              doc=doc))
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
    for base in power_metrics(metrics):
        column, header = base.column, base.header
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
        Metric("irf_statistical", "IRF (statistical ties)", "irf", "none", order=872,
               doc="--irf-ties statistical: IRF over ranks where vendors not separated by the 95 % paired bootstrap "
                   "interval of their difference share their (average) rank; missing otherwise"),
        Metric("irf_tied_with", "IRF ties", "text", "none", order=873,
               doc="--irf-ties statistical: per IRF input the vendors this one is tied with, as metric:a,b;…"),
    ]
    return tuple(out)


def _value(x: float | np.ndarray) -> float:
    x = float(x)
    return NAN if math.isnan(x) else x


def _count(x: float | np.ndarray) -> int:
    return int(round(float(x)))


def _self_columns(totals: Mapping[str, float]) -> Columns:
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


def proportion_interval(share: Proportion, level: float, is_dice: bool) -> tuple[float, float]:
    """The interval of a metric that is a proportion (or, ``is_dice``, the Dice coefficient of one: F1); missing
    with no trial."""
    if share.n <= 0:
        return NAN, NAN
    low, high = share.interval(level)
    return (dice(low), dice(high)) if is_dice else (low, high)


def _shares_text(shares: np.ndarray) -> str:
    return ";".join(f"{k + 1}:{share:.4f}" for k, share in enumerate(shares) if share > 0)


@produces_derived(declarations)
def uncertainty(model_table: ModelTable) -> dict[str, Columns]:
    """Every column of this module for each vendor of one model (definitions in the module docstring)."""
    table = model_table
    settings = table.settings
    sums = unit_sums(table)
    vendors = sums.vendors
    fixed = {c: np.array([_value(table.scores.get(v, {}).get(c, NAN)) for v in vendors]) for c in table.irf_metrics}
    draws = bootstrap(sums, settings, table.irf_metrics, fixed) if settings.resamples else None
    shares = rank_shares(draws.irf) if draws is not None and draws.irf.size else None
    net = mcnemar_net(sums)
    n_units = len(sums.units)
    intervals = [m.column for m in interval_metrics()]
    tests, powers = noise_tests(), power_estimates()
    out: dict[str, Columns] = {}
    for j, vendor in enumerate(vendors):
        totals = sums.totals(j)
        row: Columns = {}
        for column in intervals:
            share = table.proportions.get(vendor, {}).get(column)
            if share is not None:  # a proportion: Wilson's interval on effective trials (never collapses at 0 or 1)
                form = metric(column).ratio
                low, high = proportion_interval(share, settings.level, form is not None and form.dice)
            else:
                low, high = percentile_interval(draws.metrics[column][:, j], settings.level) if draws else (NAN, NAN)
            row[f"{column}_ci_low"], row[f"{column}_ci_high"] = low, high
        row.update(_self_columns(totals.self_sums))
        more, fewer = int((net[:, j] > 0).sum()), int((net[:, j] < 0).sum())
        row.update(mcnemar_p=sign_test_p(more, fewer), mcnemar_more=more, mcnemar_fewer=fewer)
        for column, (of, vendor_rate, self_rate) in tests.items():
            observed = _value(vendor_rate(totals.sums_of(of)) - self_rate(totals.self_sums))
            row[column] = bootstrap_p_greater(draws.noise[column][:, j], observed) if draws else NAN
        for column, (successes, trials) in powers.items():
            se = standard_error(draws.metrics[column][:, j]) if draws else NAN
            if math.isnan(se) or se == 0:
                own = totals.sums_of(column)
                se = proportion_se(float(successes(own)), float(trials(own)))
            gap = detectable_gap(se, settings.alpha, settings.power)
            row[f"{column}_detectable_gap"] = gap
            row[f"{column}_samples_2pt"] = samples_for_gap(n_units, se, GAP, settings.alpha, settings.power)
        row["p_rank_first"] = float(shares[j, 0]) if shares is not None else NAN
        row["rank_shares"] = _shares_text(shares[j]) if shares is not None else ""
        out[vendor] = row
    _add_statistical_irf(out, vendors, fixed, draws, table)
    return out


def _add_statistical_irf(out: dict[str, Columns], vendors: Sequence[str], fixed: Mapping[str, np.ndarray],
                         draws: Draws | None, table: ModelTable) -> None:
    """``irf_statistical`` and ``irf_tied_with`` of every vendor (missing unless ``--irf-ties statistical`` and
    resamples)."""
    wanted = table.settings.irf_ties == "statistical" and draws is not None and bool(table.irf_metrics)
    if wanted and draws is not None:  # (wanted implies draws)
        irf, tied_of = statistical_irf(fixed, {c: draws.metrics.get(c) for c in table.irf_metrics},
                                       table.irf_metrics, table.settings.level)
    for j, vendor in enumerate(vendors):
        if not wanted:
            out[vendor].update(irf_statistical=NAN, irf_tied_with="")
            continue
        ties = [f"{c}:{','.join(v for i, v in enumerate(vendors) if i != j and tied[j, i])}"
                for c, tied in tied_of.items() if tied[j].sum() > 1 and not math.isnan(fixed[c][j])]
        out[vendor].update(irf_statistical=float(irf[j]), irf_tied_with=";".join(ties))


__all__ = ["declarations", "proportion_interval", "uncertainty"]
