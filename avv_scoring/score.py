"""Orchestration (scoring layer, between :mod:`.entrypoints` and metrics/IRF/verdict): records → per-vendor
metrics → IRF → verdicts (:func:`score_frame`) and what it returns (:class:`ScoreResult`); it reads no file: the entry
points that read run folders and write the outputs are :mod:`.entrypoints` (above the report, which reads
:class:`ScoreResult`).

Score columns are derived from the metric registry (:mod:`avv_scoring.metrics.registry`), never listed by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.client_load import LoadGroup, process_name, summarise_load
from avv_core.errors import InputError
from avv_core.frame_rows import TableRow, frame_records
from avv_core.json_types import JSONMapping, JSONObject
from avv_scoring.baseline_choice import BaselineSpec, resolve_baselines
from avv_scoring.conformance.suite import CONFORMANCE_COLUMNS, conformance_table
from avv_scoring.decision import Decisions, Evidence, VendorDecision, decide, vendor_evidence
from avv_scoring.load import (
    COMPARABLE_COL,
    REQUIRED_COLUMNS,
    GoldBySample,
    ToolsBySample,
    dedupe_latest,
    distinct_text,
    is_success,
    rows_where,
)
from avv_scoring.metrics.billing import BillingTolerance, flagged
from avv_scoring.metrics.breakdown import DISAGREEMENT_COLUMNS, PER_TOOL_COLUMNS, disagreements, per_tool
from avv_scoring.metrics.declaration import Metric, RegistryError
from avv_scoring.metrics.frame_memo import Store
from avv_scoring.metrics.headline import annotate_tool_calls
from avv_scoring.metrics.irf import MetricsSpec, default_irf_metrics, irf_scores, resolve_irf_metrics
from avv_scoring.metrics.normalisers import ArgNormalisation
from avv_scoring.metrics.registry import METRICS, model_functions
from avv_scoring.metrics.trajectories import summarise as summarise_trajectories
from avv_scoring.metrics.trajectories import trajectory_disagreements
from avv_scoring.metrics.uncertainty import ModelTable, StatsSettings, VendorSums, vendor_sums
from avv_scoring.metrics.vendor_table import REPEAT_METRICS, FeatureFrames, repeat_summary, vendor_tables
from avv_scoring.probes import Probe
from avv_scoring.statistical_verdict import verdict_thresholds
from avv_scoring.stress import StressResult
from avv_scoring.verdict import CONFORMANCE_ONLY, SET_MARK, Thresholds, judged_thresholds

#: Columns that say whose row it is and how it was judged (not metrics).
IDENTITY_COLUMNS: tuple[str, ...] = (
    "model",
    "vendor",
    "is_baseline",
    "baseline",
    "run_ids",
    "irf",
    "verdict",
    "verdict_reasons",
    "verdict_bounds",
    "samples_to_decide",
)


def metric_columns_in_order(metrics: Sequence[Metric]) -> tuple[str, ...]:
    """The metric columns of ``metrics`` in their (registry) order, each ``interval=True`` metric followed at once by
    its ``<m>_ci_low`` and ``<m>_ci_high`` (the interval columns are declared with orders of their own, which
    interleaved them with other metrics: ``tps_ci_low, loop_rate, tps_ci_high``)."""
    bounds = {m.column: (f"{m.column}_ci_low", f"{m.column}_ci_high") for m in metrics if m.interval}
    declared = {m.column for m in metrics}
    placed = {column for pair in bounds.values() for column in pair if column in declared}
    out: list[str] = []
    for m in metrics:
        if m.column in placed:
            continue
        out.append(m.column)
        out += [column for column in bounds.get(m.column, ()) if column in declared]
    return tuple(out)


#: Columns of scores.csv, in order: identity, every registered metric (registry order, each metric's 95 % interval
#: columns right after it; the six default IRF inputs first, with the same names as in the ``irf`` table), then
#: ``n_repeats`` and ``<m>_mean`` / ``<m>_std`` for each per-repeat metric.
SCORE_COLUMNS: tuple[str, ...] = (
    *IDENTITY_COLUMNS,
    *metric_columns_in_order(METRICS),
    "n_repeats",
    *(f"{m}_{stat}" for m in REPEAT_METRICS for stat in ("mean", "std")),
)
if len(set(SCORE_COLUMNS)) != len(SCORE_COLUMNS):  # a metric named like an identity or repeat column
    _dupes = sorted({c for c in SCORE_COLUMNS if SCORE_COLUMNS.count(c) > 1})
    raise RegistryError(f"score columns registered twice: {', '.join(_dupes)}")
#: Columns of the per-repeat table (scores.json "by_repeat" and scores_by_repeat.csv).
REPEAT_COLUMNS: tuple[str, ...] = ("model", "vendor", "repeat", *REPEAT_METRICS)



@dataclass(frozen=True)
class ScoreResult:
    """Everything :func:`score_frame` computed (frozen: a step that adds to it makes a copy with
    :func:`dataclasses.replace`; its tables and mappings are read-only by convention). ``scores`` has one row per
    (model, vendor) with :data:`SCORE_COLUMNS`, grouped by model (first-seen order) and sorted by IRF within a
    model."""

    #: One row per (model, vendor): :data:`SCORE_COLUMNS` (identity, every registered metric, repeat summaries).
    scores: pd.DataFrame
    #: One row per (model, vendor, repeat): :data:`REPEAT_COLUMNS`.
    by_repeat: pd.DataFrame
    #: Model → its baseline vendor.
    baselines: Mapping[str, str]
    #: The bounds the verdicts checked (after the verdict mode: see ``verdict_thresholds``).
    thresholds: Thresholds
    #: What the reader must know (inputs, unknown samples, unmatched items…), in the order shown.
    warnings: tuple[str, ...] = ()
    #: The records files (and baseline results files) scored.
    inputs: tuple[str, ...] = ()
    #: The sample files the tools and gold labels came from.
    sample_files: tuple[str, ...] = ()
    #: Output name → path of each file written (``scores.csv``, ``report.md``…); empty until written.
    outputs: Mapping[str, str] = field(default_factory=dict)
    #: The IRF inputs used (column → higher is better).
    irf_metrics: Mapping[str, bool] = field(default_factory=default_irf_metrics)
    #: Stress tables, when one stress run folder was scored (see :func:`score_paths`).
    stress: StressResult | None = None
    #: False for a stress-only result (:func:`stress_only`): no per-vendor scores were computed.
    scored: bool = True
    #: The client's own lag and CPU per process (avv_core.client_load.client_load); {} for older records.
    client_load: JSONMapping = field(default_factory=dict)
    #: Per (model, vendor, tool): :data:`~avv_scoring.metrics.breakdown.PER_TOOL_COLUMNS` (see :mod:`.breakdown`).
    per_tool: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PER_TOOL_COLUMNS)))
    #: Items that differ from the baseline or from gold: :data:`~avv_scoring.metrics.breakdown.DISAGREEMENT_COLUMNS`.
    disagreements: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(DISAGREEMENT_COLUMNS)))
    #: The records scored (one row per item after de-duplication, tool calls annotated): the report's figures.
    records: pd.DataFrame | None = None
    #: How intervals, tests and the verdict mode were computed (:mod:`avv_scoring.metrics.uncertainty`).
    stats: StatsSettings = field(default_factory=StatsSettings)
    #: Rows of the inputs left out because a cell held a number no record can hold, each named by file, line,
    #: item and cell (:func:`avv_core.record_file.read_records_checked`); the rest was scored.
    excluded_rows: tuple[str, ...] = ()
    #: The argument normalisers args_match, args_f1 and gold_args_f1 compared values with (``--arg-normalise``).
    arg_normalise: ArgNormalisation = field(default_factory=ArgNormalisation)
    #: Model → the bounds its verdicts did not judge, each "column (why)" (:func:`.verdict.judged_thresholds`).
    not_judged: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Runs made with ``--avv-settle``: input → run.json's ``settle`` (seed, rule, each vendor's outcome).
    settle: JSONMapping = field(default_factory=dict)
    #: Vendors the circuit breaker stopped: input → run.json's ``vendor_down`` (each vendor, its hard fault, the items
    #: it skipped; report section "Vendors stopped").
    vendor_down: JSONMapping = field(default_factory=dict)
    #: The vendors' price currencies in the inputs' run.json (``price.currency``), sorted: the Cost section's unit.
    currencies: tuple[str, ...] = ()
    #: The conformance checks of a conformance run's probes: one row per (model, vendor, check),
    #: :data:`~avv_scoring.conformance.suite.CONFORMANCE_COLUMNS` (conformance.csv); empty without one.
    conformance: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(CONFORMANCE_COLUMNS)))
    #: The tolerance of the prompt-token ratio per model (billing honesty, conformance's token checks).
    billing: BillingTolerance = field(default_factory=BillingTolerance)
    #: Each vendor's decision: its bounds judged, with intervals (:mod:`avv_scoring.decision`); the ``verdict``,
    #: ``verdict_reasons``, ``verdict_bounds`` and ``samples_to_decide`` columns of ``scores`` are its summary.
    decisions: Decisions = field(default_factory=Decisions)

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.scores["model"].tolist()))

    def model_scores(self, model: str) -> pd.DataFrame:
        return self.scores[self.scores["model"] == model]

    @property
    def passed(self) -> bool:
        """True when every vendor PASSes its verdict."""
        return bool((self.scores["verdict"] == "PASS").all())

    def decision(self, model: str, vendor: str) -> VendorDecision | None:
        """The decision of one vendor (None: not scored)."""
        return self.decisions.of(model, vendor)


def _check_frame(records: pd.DataFrame) -> None:
    missing = [c for c in (*REQUIRED_COLUMNS, "repeat") if c not in records.columns]
    if missing:
        raise InputError(f"records: missing column(s) {', '.join(missing)}")


def score_frame(
    records: pd.DataFrame,
    tools_by_sample: ToolsBySample | None,
    baseline: BaselineSpec = None,
    thresholds: Thresholds | None = None,
    irf_metrics: MetricsSpec = None,
    gold_by_sample: GoldBySample | None = None,
    stats: StatsSettings | None = None,
    arg_normalise: ArgNormalisation | None = None,
    sample_sets: Mapping[str, str] | None = None,
    probes: Mapping[str, Probe] | None = None,
    billing: BillingTolerance | None = None,
) -> ScoreResult:
    """Score a records table: one row per (model, vendor) with every metric, IRF and verdict, the per-tool
    breakdown and the disagreements.

    ``records`` uses the record schema (:func:`avv_core.record_file.coerce_frame` dtypes); duplicate
    items keep their latest row (see :func:`avv_scoring.load.dedupe_latest`). ``tools_by_sample`` maps
    sample id → the request's ``tools`` list; None leaves schema metrics missing (with a warning).
    ``gold_by_sample`` maps sample id → its :class:`~avv_core.samples.Gold` labels (None or missing ids:
    gold metrics missing). ``irf_metrics`` = the IRF input columns (default: the registry's ``irf=True``
    metrics). ``stats`` = bootstrap resamples, seed and verdict mode
    (:class:`~avv_scoring.metrics.uncertainty.StatsSettings`; default: 1000 resamples, seed 17, threshold verdicts).
    ``arg_normalise`` = the argument normalisers (:mod:`avv_scoring.metrics.normalisers`; default: all of them).
    ``sample_sets`` = sample id → its ``_sample_set`` mark: a bound tuned to a sample set is judged only when every
    scored sample of the model carries that mark; a bound on a metric the samples cannot produce is not judged
    (:func:`avv_scoring.verdict.judged_thresholds`).
    ``probes`` = sample id → its conformance probe (:mod:`avv_scoring.conformance`): the probes' rows give
    ``ScoreResult.conformance`` and ``conformance_failures``, and are left out of every other metric when rows of
    other samples are scored with them (a conformance run scored alone: its probes are all there is, and only
    ``conformance_failures`` is judged). ``billing`` = the prompt-token tolerance per model (flagged ratios are
    warnings; conformance's token checks).

    Why so many parameters: ``records`` and ``tools_by_sample`` are the input; the nine options, each with
    a default, come from three places once the files are read (the :class:`~avv_scoring.entrypoints.ScoreRequest`'s
    judging options, the sample file's tables, the baseline after imported results), and the live board
    (:func:`~avv_scoring.live_scores.score_live`) and the tests pass only the few they set.
    """
    stats = stats if stats is not None else StatsSettings()
    billing = billing if billing is not None else BillingTolerance()
    arg_normalise = arg_normalise if arg_normalise is not None else ArgNormalisation()
    thresholds = verdict_thresholds(thresholds if thresholds is not None else Thresholds(), stats)
    irf_inputs = resolve_irf_metrics(irf_metrics)
    _check_frame(records)
    records = dedupe_latest(records)
    if records.empty:
        return ScoreResult(pd.DataFrame(columns=list(SCORE_COLUMNS)), pd.DataFrame(columns=list(REPEAT_COLUMNS)), {},
                           thresholds, ("no records to score",), irf_metrics=irf_inputs, stats=stats,
                           arg_normalise=arg_normalise)
    warnings = _sample_file_warnings(records, tools_by_sample)
    baselines = resolve_baselines(records, baseline)
    conformance = conformance_table(records, probes or {}, baselines, billing.of)
    records, conformance_only = _without_probes(records, probes, conformance)
    records = _annotated(records, tools_by_sample, gold_by_sample, arg_normalise)
    vendors = _score_vendors(records, baselines)
    warnings += vendors.warnings
    _add_model_metrics(vendors.rows, records, baselines, stats, irf_inputs, vendors.sums_of, vendors.evidence_of,
                       conformance)
    warnings += billing_warnings(vendors.rows, billing)
    scores = pd.DataFrame(vendors.rows)
    scores["irf"] = irf_scores(scores, list(irf_inputs))
    judged = _judged_bounds(records, baselines, thresholds, gold_by_sample, sample_sets, conformance,
                            conformance_only)
    decisions = _decisions(scores, vendors.evidence_of, baselines, judged, stats)
    for column, values in decision_columns(decisions, zip(scores["model"], scores["vendor"], strict=True)).items():
        scores[column] = values
    scores = _in_irf_order(scores, stats.irf_ties).reindex(columns=list(SCORE_COLUMNS))
    by_repeat = pd.concat(vendors.repeat_frames, ignore_index=True).reindex(columns=list(REPEAT_COLUMNS))
    return ScoreResult(scores, by_repeat, baselines, thresholds, tuple(warnings), irf_metrics=irf_inputs, stats=stats,
                       client_load=_client_load(records),
                       per_tool=_in_score_order(vendors.tool_rows, PER_TOOL_COLUMNS, scores),
                       disagreements=_in_score_order(vendors.differing, DISAGREEMENT_COLUMNS, scores),
                       records=records, arg_normalise=arg_normalise,
                       not_judged={m: tuple(skipped) for m, (_, skipped) in judged.items() if skipped},
                       conformance=conformance, billing=billing, decisions=Decisions(decisions))


def _sample_file_warnings(records: pd.DataFrame, tools_by_sample: ToolsBySample | None) -> list[str]:
    """What the reader must know about the sample file: none given (no schema accuracy), or sample ids of the
    records it does not hold (their calls are not checkable)."""
    if tools_by_sample is None:
        return ["no request tool definitions: schema accuracy not computed (pass --samples FILE)"]
    unknown = sorted(distinct_text(records["sample_id"]) - set(tools_by_sample))
    if not unknown:
        return []
    return [f"{len(unknown)} sample id(s) not in the sample file, their tool calls are not "
            f"checkable: {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''}"]


def _without_probes(records: pd.DataFrame, probes: Mapping[str, Probe] | None,
                    conformance: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The records every metric but conformance scores, and whether the run is conformance only: the probes' rows
    are left out when rows of other samples are scored with them (the probes are no replay of the samples); a run
    of probes alone keeps them."""
    probe_rows = records["sample_id"].astype(str).isin(set(probes or ())).to_numpy(dtype=bool)
    conformance_only = bool(probe_rows.all()) and not conformance.empty
    if probe_rows.any() and not probe_rows.all():
        records = records.loc[~probe_rows]
    return records, conformance_only


def _annotated(records: pd.DataFrame, tools_by_sample: ToolsBySample | None, gold_by_sample: GoldBySample | None,
               arg_normalise: ArgNormalisation) -> pd.DataFrame:
    """The records every metric reads: tool calls annotated, one row per item (an agent task's first step with its
    summary), and the comparable-item mark of cost and speed."""
    records = annotate_tool_calls(records, tools_by_sample, gold_by_sample, arg_normalise)
    records = summarise_trajectories(records)
    records[COMPARABLE_COL] = comparable_items(records, records["model"].astype(str), records["vendor"].astype(str))
    return records


@dataclass
class VendorScores:
    """What :func:`_score_vendors` computed, vendor by vendor in first-seen order."""

    #: One dict per (model, vendor): identity, every per-vendor metric, repeat summaries.
    rows: list[TableRow] = field(default_factory=list)
    #: Per vendor, its per-repeat table (with its model and vendor).
    repeat_frames: list[pd.DataFrame] = field(default_factory=list)
    #: The per-tool breakdown rows and the items that differ from the baseline or gold.
    tool_rows: list[TableRow] = field(default_factory=list)
    differing: list[TableRow] = field(default_factory=list)
    #: Model → vendor → its sums per sample id (the bootstrap's, from the same features as the point values).
    sums_of: dict[str, dict[str, VendorSums]] = field(default_factory=dict)
    #: What each decision's intervals rest on.
    evidence_of: dict[tuple[str, str], dict[str, Evidence]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _score_vendors(records: pd.DataFrame, baselines: Mapping[str, str]) -> VendorScores:
    """Every per-vendor metric, table and breakdown, one (model, vendor) at a time against its model's baseline."""
    out = VendorScores()
    groups = records.groupby([records["model"].astype(str), records["vendor"].astype(str)], sort=False).groups
    base_of: dict[str, pd.DataFrame] = {}  # each model's baseline rows, selected once
    base_store: dict[str, Store] = {}  # what the metrics derive from them, kept for the model's next vendor
    for (model, vendor), index in groups.items():
        base_name = baselines[model]
        if model not in base_of:
            base_of[model] = records.loc[groups[(model, base_name)]] if (model, base_name) in groups \
                else records.iloc[0:0]
            base_store[model] = {}
        # one vendor's rows and features at a time: they go before the next vendor's are made (peak RSS)
        rows = base_of[model] if vendor == base_name else records.loc[index]  # the baseline: the same frame
        frames = FeatureFrames(rows, base_of[model], base_store[model])
        with frames.memo.opened():
            _score_vendor(out, model, vendor, frames, base_name)
    return out


def _score_vendor(out: VendorScores, model: str, vendor: str, frames: FeatureFrames, base_name: str) -> None:
    """One vendor's metrics, per-repeat table, sums, evidence, breakdowns and warnings, added to ``out``."""
    vendor_rows, base_rows = frames.rows, frames.baseline_rows
    metrics, by_rep = vendor_tables(vendor_rows, base_rows, frames)
    out.sums_of.setdefault(model, {})[vendor] = vendor_sums(frames)
    out.evidence_of[(model, vendor)] = vendor_evidence(frames)
    metrics.update(repeat_summary(by_rep))
    run_ids = (vendor_rows["run_id"].astype("object").dropna().unique().tolist()
               if "run_id" in vendor_rows.columns else [])
    is_base = vendor == base_name
    out.rows.append({"model": model, "vendor": vendor, "is_baseline": is_base, "baseline": base_name,
                     "run_ids": ";".join(map(str, run_ids)), **metrics})
    out.repeat_frames.append(by_rep.assign(model=model, vendor=vendor))
    out.tool_rows += [{"model": model, "vendor": vendor, **r} for r in per_tool(vendor_rows, base_rows)]
    out.differing += disagreements(model, vendor, vendor_rows, base_rows, is_base)
    out.differing += trajectory_disagreements(model, vendor, vendor_rows, base_rows, is_base)
    if metrics["f1_unmatched"] and not is_base:
        out.warnings.append(f"{model}/{vendor}: {metrics['f1_unmatched']} item(s) have no baseline item with the "
                            "same (sample_id, repeat); left out of F1")
    if is_base and metrics["successes"] == 0:
        out.warnings.append(f"{model}: the baseline {vendor} has no successful item; F1 is missing for every vendor")


def _judged_bounds(records: pd.DataFrame, baselines: Mapping[str, str], thresholds: Thresholds,
                   gold_by_sample: GoldBySample | None, sample_sets: Mapping[str, str] | None,
                   conformance: pd.DataFrame, conformance_only: bool) -> dict[str, tuple[Thresholds, list[str]]]:
    """Per model: the bounds its verdicts judge and those they skip (:func:`.verdict.judged_thresholds`), from what
    its samples hold."""
    model_col = records["model"].astype(str)
    conformance_models = set(conformance["model"].astype(str))
    return {model: judged_thresholds(thresholds, sample_holds(
        rows_where(records, model_col == model), gold_by_sample, sample_sets)
        | ({"conformance"} if model in conformance_models else set())
        | ({CONFORMANCE_ONLY} if conformance_only else set())) for model in baselines}


def _decisions(scores: pd.DataFrame, evidence_of: Mapping[tuple[str, str], Mapping[str, Evidence]],
               baselines: Mapping[str, str], judged: Mapping[str, tuple[Thresholds, list[str]]],
               stats: StatsSettings) -> dict[tuple[str, str], VendorDecision]:
    """Each vendor's decision on its model's judged bounds (margins against the baseline's row and evidence)."""
    by_key = {(row["model"], row["vendor"]): row for row in frame_records(scores)}

    def baseline_of(model: str, vendor: str) -> tuple[TableRow, Mapping[str, Evidence]] | None:
        """The model's baseline row and evidence, for margins (None: this vendor is the baseline)."""
        base = baselines[model]
        return None if vendor == base or (model, base) not in by_key else (by_key[(model, base)],
                                                                          evidence_of[(model, base)])

    return {key: decide(row, evidence_of[key], judged[key[0]][0], stats.verdict, stats.level, stats.alpha,
                        baseline_of(*key)) for key, row in by_key.items()}


def _in_irf_order(scores: pd.DataFrame, irf_ties: str) -> pd.DataFrame:
    """``scores`` by model (first-seen order), then IRF (best first; ``--irf-ties statistical``: the IRF with
    statistical ties first, then the published IRF), then vendor."""
    model_order = {m: i for i, m in enumerate(dict.fromkeys(scores["model"]))}
    by = ["_m", "irf_statistical", "irf", "vendor"] if irf_ties == "statistical" else ["_m", "irf", "vendor"]
    return (
        scores.assign(_m=scores["model"].map(model_order))
        .sort_values(by, ascending=[True] + [False] * (len(by) - 2) + [True], kind="stable", na_position="last")
        .drop(columns="_m")
        .reset_index(drop=True)
    )


def decision_columns(decisions: Mapping[tuple[str, str], VendorDecision],
                     keys: Iterable[tuple[str, str]]) -> dict[str, list[object]]:
    """The scores columns that summarise each decision, for the (model, vendor) ``keys`` in row order: ``verdict``
    (PASS / FAIL / INCONCLUSIVE), ``verdict_reasons`` (``; ``-joined, in each metric's format), ``verdict_bounds``
    (every bound's state) and ``samples_to_decide`` (INCONCLUSIVE: about how many more samples would decide it)."""
    out: dict[str, list[object]] = {"verdict": [], "verdict_reasons": [], "verdict_bounds": [], "samples_to_decide": []}
    for key in keys:
        found = decisions[key]
        out["verdict"].append(found.verdict)
        out["verdict_reasons"].append("; ".join(([found.settled] if found.settled else []) + found.reasons()))
        out["verdict_bounds"].append(found.states())
        more = found.more
        out["samples_to_decide"].append(float(more) if more is not None else np.nan)
    return out


def sample_holds(rows: pd.DataFrame, gold_by_sample: GoldBySample | None,
                 sample_sets: Mapping[str, str] | None) -> frozenset[str]:
    """What one model's scored samples hold (:func:`avv_scoring.verdict.judged_thresholds`): ``language`` (a row
    has a language check), ``gold`` / ``gold_calls`` / ``agent`` (a sample has a gold label / gold calls / is an
    agent task) and ``set:<name>`` when every sample is marked ``_sample_set: <name>``."""
    sids = distinct_text(rows["sample_id"])
    golds = [(gold_by_sample or {}).get(s) for s in sids]
    holds = {need for need, present in (
        ("language", "expected_language" in rows.columns and any(  # each distinct cell once
            isinstance(v, str) and bool(v) for v in pd.unique(rows["expected_language"].astype("object")))),
        ("gold", any(g is not None and g.labelled for g in golds)),
        ("gold_calls", any(g is not None and g.expected_calls is not None for g in golds)),
        ("agent", any(g is not None and g.agent is not None for g in golds))) if present}
    marks = {(sample_sets or {}).get(s) for s in sids}
    if len(marks) == 1 and None not in marks:
        holds.add(SET_MARK + str(marks.pop()))
    return frozenset(holds)


def comparable_items(records: pd.DataFrame, model_col: pd.Series, vendor_col: pd.Series) -> pd.Series:
    """Per row: its (sample_id, repeat) succeeded for every vendor of the model that succeeded at all.

    Cost and speed (avg_tokens, TTFT, TPS) are compared on these items only, so a vendor that fails the
    long or slow requests cannot look cheap or fast by it (its failures cost it success_rate instead). A
    vendor with no success is left out of the intersection (its cost and speed are missing anyway)."""
    ok = is_success(records).to_numpy(dtype=bool)
    samples, _ = pd.factorize(records["sample_id"].astype(str))
    repeat = records["repeat"]
    # an integer column's equal values are equal texts: factorized as numbers, not as a million new strings
    repeats, _ = pd.factorize(repeat, use_na_sentinel=False) if pd.api.types.is_integer_dtype(repeat.dtype) \
        else pd.factorize(repeat.astype(str))
    key = samples.astype(np.int64) * (int(repeats.max(initial=0)) + 1) + repeats  # one integer per item
    vendor_codes, _ = pd.factorize(vendor_col)
    out = np.zeros(len(records), dtype=bool)
    for model in model_col.unique():
        good = ok & (model_col == model).to_numpy(dtype=bool)
        pairs = pd.DataFrame({"key": key[good], "vendor": vendor_codes[good]}).drop_duplicates()
        vendors = pairs["vendor"].nunique()
        if not vendors:
            continue
        served = pairs["key"].value_counts()
        out |= good & np.isin(key, served.index[served.to_numpy() == vendors].to_numpy())
    return pd.Series(out, index=records.index)


def _add_model_metrics(rows: list[TableRow], records: pd.DataFrame, baselines: Mapping[str, str],
                       stats: StatsSettings, irf_inputs: Mapping[str, bool],
                       sums_of: Mapping[str, Mapping[str, VendorSums]],
                       evidence_of: Mapping[tuple[str, str], Mapping[str, Evidence]],
                       conformance: pd.DataFrame) -> None:
    """Add the columns of the model-level functions (registry ``model_table``) to each vendor's row."""
    model_col = records["model"].astype(str)
    for model in dict.fromkeys(row["model"] for row in rows):
        mine = [row for row in rows if row["model"] == model]
        table = ModelTable(model, baselines[model], rows_where(records, model_col == model),
                           {row["vendor"]: row for row in mine},
                           stats, dict(irf_inputs), sums_of.get(model, {}),
                           {row["vendor"]: {c: e.proportion for c, e in evidence_of[(model, row["vendor"])].items()}
                            for row in mine},
                           conformance[conformance["model"].astype(str) == model])
        for function in model_functions():
            columns = function.for_model(table)
            for row in mine:
                row.update(columns[row["vendor"]])


def billing_warnings(rows: Sequence[TableRow], billing: BillingTolerance) -> list[str]:
    """A warning for each vendor whose median prompt-token ratio to the baseline is past its model's tolerance
    (:mod:`avv_scoring.metrics.billing`)."""
    out = []
    for row in rows:
        ratio, tolerance = row.get("prompt_tokens_ratio"), billing.of(str(row["model"]))
        if not row.get("is_baseline") and flagged(ratio, tolerance):
            out.append(f"{row['model']}/{row['vendor']}: reports {ratio:.3g}× the baseline's prompt_tokens on the same "
                       f"items (median over {row.get('prompt_tokens_pairs')}; IQR "
                       f"{row.get('prompt_tokens_ratio_iqr', float('nan')):.3g}), past the ±{tolerance:.0%} tolerance "
                       "of billing honesty")
    return out


def _in_score_order(rows: list[TableRow], columns: Sequence[str], scores: pd.DataFrame) -> pd.DataFrame:
    """``rows`` as a frame, vendors in the order of ``scores`` (by model, then IRF), each vendor's rows kept in
    their order."""
    rank = {(m, v): i for i, (m, v) in enumerate(zip(scores["model"], scores["vendor"], strict=True))}
    ordered = sorted(enumerate(rows), key=lambda ir: (rank.get((ir[1]["model"], ir[1]["vendor"]), len(rank)), ir[0]))
    return pd.DataFrame([r for _, r in ordered], columns=list(columns))


def _client_load(records: pd.DataFrame) -> JSONObject:
    """Per process and vendor: the client's own lag and CPU (avv_core.client_load.client_load, as in
    run.json)."""
    needed = ("worker", "vendor", "client_lag_ms", "client_cpu_pct")
    if any(c not in records.columns for c in needed):
        return {}
    frame = pd.DataFrame({
        "worker": _per_distinct(records["worker"], process_name),
        "vendor": records["vendor"].astype("string").fillna("None"),
        "lag": pd.to_numeric(records["client_lag_ms"], errors="coerce").astype("float64"),
        "cpu": pd.to_numeric(records["client_cpu_pct"], errors="coerce").astype("float64")})
    groups: dict[str, LoadGroup] = {}
    for worker, rows in frame.groupby("worker", sort=False):
        lags = rows.dropna(subset=["lag"])
        groups[str(worker)] = LoadGroup(
            {str(v): part.to_numpy() for v, part in lags.groupby("vendor", sort=False)["lag"]},
            rows["cpu"].dropna().to_numpy())
    return summarise_load(groups)


def _per_distinct(column: pd.Series, function: Callable[[object], object]) -> np.ndarray:
    """``function`` of each cell, called once per distinct value (missing cells get ``function(None)``)."""
    codes, values = pd.factorize(column.astype("object"))
    return np.array([function(v) for v in values] + [function(None)], dtype=object)[codes]


__all__ = [
    "IDENTITY_COLUMNS",
    "SCORE_COLUMNS",
    "REPEAT_COLUMNS",
    "ScoreResult",
    "decision_columns",
    "score_frame",
]
