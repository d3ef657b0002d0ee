"""The library's entry points (scoring layer, top, beside :mod:`.cli`): read run folders, score them and write
their outputs. The CLI and the harness call them; :mod:`.score` computes from a records table (no file), and
:mod:`.report.outputs` writes; neither imports the other way."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus, most_serious
from avv_core.json_types import JSONObject
from avv_scoring.baseline_choice import BaselineSpec
from avv_scoring.baseline_results import DEFAULT_BASELINE_NAME, BaselineResults, add_baseline_results
from avv_scoring.decision import Decisions, settled_decision
from avv_scoring.load import RunInput, load_tools, read_inputs, resolve_inputs
from avv_scoring.metrics.billing import BillingTolerance, check_tolerance
from avv_scoring.metrics.irf import MetricsSpec
from avv_scoring.metrics.normalisers import ArgNormalisation
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.report.outputs import write_outputs
from avv_scoring.run_outcome import decision_exit_status
from avv_scoring.score import REPEAT_COLUMNS, SCORE_COLUMNS, ScoreResult, decision_columns, score_frame
from avv_scoring.stress import STRESS_MODE, stress_tables
from avv_scoring.verdict import Thresholds


@dataclass(frozen=True)
class ScoreRequest:
    """Everything one scoring is asked to do: what to read, how to judge, what to write, how strict its exit status
    is. ``avv-score`` builds it from its options (:func:`avv_scoring.cli.score_request`), the harness from its
    ``--avv-*`` options at the end of a run, ``avv-score export`` for its run; :func:`score` carries it out."""

    inputs: tuple[str, ...]  # run folders and/or records.csv files
    baseline: BaselineSpec = None  # --baseline: a vendor name, or model → vendor ({"*": name} = any model)
    samples: str | None = None  # --samples: the sample file (default: each run.json's)
    out_dir: str | None = None  # --out (default: the run folder when one was given, else ./scores)
    thresholds: Thresholds | None = None  # --thresholds and the single-bound flags (None: the avv preset)
    write: bool = True  # write the outputs (scores.csv, scores.json, report.md, …)
    html: bool = True  # also report.html
    irf_metrics: MetricsSpec = None  # --irf-metrics (None: the registry's IRF inputs)
    baseline_results: tuple[BaselineResults, ...] = ()  # --baseline-results files (K2VV / MiniMax)
    baseline_name: str | None = None  # --baseline-name of those rows
    stats: StatsSettings = field(default_factory=StatsSettings)  # --bootstrap, --seed, --verdict, --confidence, ties
    arg_normalise: ArgNormalisation | None = None  # --arg-normalise (None: every normaliser)
    billing: BillingTolerance | None = None  # --prompt-tokens-tolerance (None: run.json's, else the default)
    strict: bool = False  # --strict: exit 7 when a vendor FAILs, 8 when one is INCONCLUSIVE
    allow_inconclusive: bool = False  # --allow-inconclusive: with --strict, INCONCLUSIVE exits 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(os.fspath(p) for p in self.inputs))
        object.__setattr__(self, "baseline_results", tuple(self.baseline_results or ()))
        for name in ("samples", "out_dir"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, os.fspath(value))

    def exit_status(self, result: ScoreResult) -> int:
        """The status this scoring asks for (:func:`avv_scoring.run_outcome.decision_exit_status`; 4 when rows
        were left out), the most serious first."""
        statuses = [decision_exit_status(result, self.strict, self.allow_inconclusive)]
        if result.excluded_rows:
            statuses.append(ExitStatus.SCORING)
        return most_serious(statuses)


def score(request: ScoreRequest) -> ScoreResult:
    """Load the request's run folders / records.csv files, score them (:func:`score_inputs`: the baseline, samples,
    baseline results and stress tables) and (``write``) write scores.csv, scores_by_repeat.csv, scores.json,
    disagreements.csv, report.md and (``html``) report.html into ``out_dir`` (default: the run folder when one was
    given, else ``./scores``); for a stress run also stress.csv, capacity.csv and the two plots.
    Raises :class:`avv_core.errors.InputError` on bad input."""
    result = _score_inputs(request)
    if request.write:
        target = request.out_dir if request.out_dir is not None else default_out_dir(list(request.inputs))
        result = replace(result, outputs=write_outputs(result, target, html=request.html))
    return result


def score_paths(paths: Iterable[str | os.PathLike[str]], **options: Any) -> ScoreResult:
    """:func:`score` of ``ScoreRequest(paths, **options)`` (the fields of :class:`ScoreRequest`)."""
    return score(ScoreRequest(tuple(os.fspath(p) for p in paths), **options))


def stress_only(
    run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, write: bool = True
) -> ScoreResult:
    """The stress tables of a stress run folder without per-vendor scoring: ``result.scored`` is False and
    (``write=True``) only stress.csv, capacity.csv, the plots and a report.md holding the stress section
    are written into ``out_dir`` (default: the run folder). InputError when the folder is not a stress run.
    """
    result = stress_only_result(run_dir)
    if write:
        target = os.fspath(out_dir) if out_dir is not None else os.fspath(run_dir)
        result = replace(result, outputs=write_outputs(result, target))
    return result


def default_out_dir(paths: Sequence[str]) -> str:
    """The run folder when exactly one run folder was given, else ``./scores``."""
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return paths[0]
    return "scores"


#: The collector's generation-0 threshold while scoring (Python's default is 700).
SCORING_GC_THRESHOLD = (100_000, 50, 1000)


@contextmanager
def collect_rarely() -> Iterator[None]:
    """Scoring builds millions of small lists and dicts (parsed calls, sample bodies) and leaves few reference
    cycles: with the default thresholds the collector re-scanned them over and over (~6 s of 42 at 1 M
    records, bench/score_scale.py). Restores the previous thresholds."""
    previous = gc.get_threshold()
    gc.set_threshold(*SCORING_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def score_inputs(paths: Iterable[str | os.PathLike[str]], **options: Any) -> ScoreResult:
    """Load run folders / records.csv files and score them, writing nothing (:func:`score` writes too):
    ``ScoreRequest(paths, **options)`` without its output fields."""
    return _score_inputs(ScoreRequest(tuple(os.fspath(p) for p in paths), write=False, **options))


@collect_rarely()
def _score_inputs(request: ScoreRequest) -> ScoreResult:
    """Score the request's inputs (:func:`avv_scoring.score.score_frame`).

    ``baseline_results`` (:class:`avv_scoring.baseline_results.BaselineResults`, ``--baseline-results``) adds
    K2VV / MiniMax results files as the baseline vendor ``baseline_name`` (default ``official``) of their model;
    they replace ``baseline`` (giving both is an InputError).

    Tools come from ``samples`` when given, else from the sample file recorded in each run.json
    (sha256-checked). When exactly one run folder is scored and its run.json says ``"mode": "stress"``,
    ``result.stress`` holds its stress tables. A conformance run's probe file gives the probes (conformance.csv).
    ``billing``: the prompt-token tolerance (``--prompt-tokens-tolerance``); a model without one there takes the
    vendor config's ``prompt_tokens_tolerance`` recorded in run.json, else the default. A vendor settled early by
    ``--avv-settle`` keeps the verdict the sequential test gave it (:func:`avv_scoring.decision.settled_decision`).
    Raises :class:`avv_core.errors.InputError` on bad input.
    """
    names = list(request.inputs)
    baseline, samples = request.baseline, request.samples
    inputs = resolve_inputs(names)
    excluded: list[str] = []
    records = read_inputs(inputs, excluded)
    tool_source = load_tools(inputs, samples)
    import_notes: list[str] = []
    if request.baseline_results:
        if baseline is not None:
            raise InputError("--baseline and --baseline-results both name the baseline; give one of them")
        records, baseline, import_notes = add_baseline_results(
            records, inputs, request.baseline_results, request.baseline_name or DEFAULT_BASELINE_NAME, samples
        )
        result_inputs = [*(i.csv_path for i in inputs), *(b.path for b in request.baseline_results)]
    else:
        result_inputs = [i.csv_path for i in inputs]
    result = score_frame(
        records, tool_source.tools_by_sample, baseline=baseline, thresholds=request.thresholds,
        irf_metrics=request.irf_metrics, gold_by_sample=tool_source.gold_by_sample, stats=request.stats,
        arg_normalise=request.arg_normalise, sample_sets=tool_source.sample_sets,
        probes=tool_source.probes,
        billing=(request.billing if request.billing is not None else BillingTolerance()).merged(_tolerances_of(inputs)),
    )
    stress_dir = _single_stress_run(inputs)
    settle = _settle_of(inputs)
    return with_settled(replace(
        result,
        warnings=(*tool_source.warnings, *_input_notes(inputs), *import_notes, *_excluded_notes(excluded),
                  *result.warnings),
        excluded_rows=tuple(excluded),
        inputs=tuple(result_inputs),
        sample_files=tuple(tool_source.sample_files),
        stress=stress_tables(stress_dir) if stress_dir is not None else None,
        settle=settle,
        currencies=_currencies_of(inputs),
        vendor_down=_vendor_down_of(inputs),
    ))


def with_settled(result: ScoreResult) -> ScoreResult:
    """``result`` with each vendor settled early by ``--avv-settle`` (run.json ``settle``) given the verdict of the
    sequential test (:func:`avv_scoring.decision.settled_decision`), and the summary columns redone."""
    entries: JSONObject = {}
    for settle in result.settle.values():
        for name, entry in (settle.get("vendors") or {}).items():
            if isinstance(entry, dict) and entry.get("verdict") in ("pass", "fail"):
                entries[str(name)] = entry
    if not entries or result.scores.empty:
        return result
    decisions = dict(result.decisions.by_vendor)
    for (model, vendor), decision in decisions.items():
        if vendor in entries:
            decisions[(model, vendor)] = settled_decision(decision, entries[vendor])
    scores = result.scores.copy()
    keys = list(zip(scores["model"].astype(str), scores["vendor"].astype(str), strict=True))
    for column, values in decision_columns(decisions, keys).items():
        scores[column] = values
    return replace(result, scores=scores, decisions=Decisions(decisions))


def _currencies_of(inputs: Sequence[RunInput]) -> tuple[str, ...]:
    """The ``price.currency`` of every priced vendor in the inputs' run.json (the Cost section names them)."""
    found: set[str] = set()
    for item in inputs:
        for vendor in item.manifest.vendors if item.manifest is not None else ():
            price = vendor.get("price") if isinstance(vendor, dict) else None
            if isinstance(price, dict) and isinstance(price.get("currency"), str):
                found.add(price["currency"])
    return tuple(sorted(found))


def _tolerances_of(inputs: Sequence[RunInput]) -> dict[str, float]:
    """Model → the ``prompt_tokens_tolerance`` its vendors were configured with (run.json's vendors)."""
    found: dict[str, float] = {}
    for item in inputs:
        for vendor in item.manifest.vendors if item.manifest is not None else ():
            value = vendor.get("prompt_tokens_tolerance") if isinstance(vendor, dict) else None
            if value is not None:
                found[str(vendor.get("model"))] = check_tolerance(value, f"{item.run_json_path}: "
                                                                         "prompt_tokens_tolerance")
    return found


def _settle_of(inputs: Sequence[RunInput]) -> JSONObject:
    """run.json's ``settle`` of each input made with ``--avv-settle`` (report section "Settled early")."""
    out: JSONObject = {}
    for item in inputs:
        settle = item.manifest.extra.get("settle") if item.manifest is not None else None
        if isinstance(settle, dict) and isinstance(settle.get("vendors"), dict):
            out[item.run_dir or item.csv_path] = settle
    return out


def _vendor_down_of(inputs: Sequence[RunInput]) -> JSONObject:
    """run.json's ``vendor_down`` of each input where the circuit breaker stopped a vendor (report section "Vendors
    stopped")."""
    out: JSONObject = {}
    for item in inputs:
        down = item.manifest.extra.get("vendor_down") if item.manifest is not None else None
        if isinstance(down, list) and down:
            out[item.run_dir or item.csv_path] = [d for d in down if isinstance(d, dict)]
    return out


def _single_stress_run(inputs: Sequence[RunInput]) -> str | None:
    """The run folder when exactly one run folder is scored and its run.json says ``"mode": "stress"``."""
    if len(inputs) != 1 or inputs[0].run_dir is None:
        return None
    manifest = inputs[0].manifest
    return inputs[0].run_dir if manifest is not None and manifest.mode == STRESS_MODE else None


def stress_only_result(run_dir: str | os.PathLike[str]) -> ScoreResult:
    """The stress tables of a stress run folder without per-vendor scoring (``result.scored`` is False;
    :func:`stress_only` also writes them). InputError when the folder is not a stress run."""
    folder = os.fspath(run_dir)
    stress = stress_tables(folder)
    if stress is None:
        raise InputError(f"{folder}: not a stress run (run.json mode is not 'stress')")
    return ScoreResult(
        pd.DataFrame(columns=list(SCORE_COLUMNS)),
        pd.DataFrame(columns=list(REPEAT_COLUMNS)),
        {},
        Thresholds(),
        inputs=(os.path.join(folder, "records.csv"),),
        stress=stress,
        scored=False,
    )


#: Rows left out that are named one by one in the warnings (all of them are in ``ScoreResult.excluded_rows``).
EXCLUDED_SHOWN = 20


def _excluded_notes(excluded: list[str]) -> list[str]:
    if not excluded:
        return []
    more = f"; {len(excluded) - EXCLUDED_SHOWN} more not shown" if len(excluded) > EXCLUDED_SHOWN else ""
    return [f"{len(excluded)} row(s) left out because a cell held a number no record can hold (the other rows are "
            f"scored){more}:", *excluded[:EXCLUDED_SHOWN]]


def _input_notes(inputs: Sequence[RunInput]) -> list[str]:
    """What run.json says the reader must know: skipped sample lines, incomplete runs, a token or cost budget hit."""
    notes = []
    for item in inputs:
        run = item.manifest
        if run is None:
            continue
        skipped = (run.samples or {}).get("skipped_lines") or []
        if skipped:
            lines = ", ".join(str(line) for line, *_ in skipped[:20]) + (" …" if len(skipped) > 20 else "")
            notes.append(f"{item.csv_path}: {len(skipped)} malformed sample line(s) skipped (lines {lines})")
        if run.completed is False:
            why = f", {run.stop_reason}" if run.stop_reason else ""
            notes.append(f"{item.csv_path}: the run did not complete ({run.items_recorded} of "
                         f"{run.items_total} items recorded{why})")
        if (run.budget or {}).get("exhausted"):
            which = "cost" if (run.budget or {}).get("max_cost") and not run.budget.get("max_total_tokens") else "token"
            notes.append(f"{item.csv_path}: the {which} budget was reached; later items were not started")
    return notes


__all__ = ["EXCLUDED_SHOWN", "SCORING_GC_THRESHOLD", "ScoreRequest", "collect_rarely", "default_out_dir", "score",
           "score_inputs", "score_paths", "stress_only", "stress_only_result", "with_settled"]
