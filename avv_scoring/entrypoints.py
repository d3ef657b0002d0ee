"""The library's entry points (scoring layer, top, beside :mod:`.cli`): read run folders, score them and write
their outputs. The CLI and the harness call them; :mod:`.score` computes from a records table (no file), and
:mod:`.report.outputs` writes; neither imports the other way."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pandas as pd

from avv_core.errors import InputError
from avv_scoring.baseline_results import DEFAULT_BASELINE_NAME, BaselineResults, add_baseline_results
from avv_scoring.load import RunInput, load_tools, read_inputs, resolve_inputs
from avv_scoring.metrics.billing import BillingTolerance, check_tolerance
from avv_scoring.metrics.normalisers import ArgNormalisation
from avv_scoring.report.outputs import write_outputs
from avv_scoring.score import REPEAT_COLUMNS, SCORE_COLUMNS, BaselineSpec, ScoreResult, score_frame
from avv_scoring.stats.irf import MetricsSpec
from avv_scoring.stats.uncertainty import StatsSettings
from avv_scoring.stress import STRESS_MODE, stress_tables
from avv_scoring.verdict import Thresholds


def score_paths(
    paths: Iterable[str | os.PathLike[str]],
    baseline: BaselineSpec = None,
    samples: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    thresholds: Thresholds | None = None,
    write: bool = True,
    irf_metrics: MetricsSpec = None,
    baseline_results: Sequence[BaselineResults] | None = None,
    baseline_name: str | None = None,
    stats: StatsSettings | None = None,
    html: bool = True,
    arg_normalise: ArgNormalisation | None = None,
    billing: BillingTolerance | None = None,
) -> ScoreResult:
    """Load run folders / records.csv files, score them (:func:`score_inputs`: the baseline, samples, baseline
    results and stress tables) and (``write=True``) write scores.csv, scores_by_repeat.csv, scores.json,
    disagreements.csv, report.md and (``html``) report.html into ``out_dir`` (default: the run folder when one was
    given, else ``./scores``); for a stress run also stress.csv, capacity.csv and the two plots.
    Raises :class:`avv_core.errors.InputError` on bad input."""
    names = [os.fspath(p) for p in paths]
    result = score_inputs(names, baseline, samples, thresholds, irf_metrics, baseline_results, baseline_name, stats,
                          arg_normalise, billing)
    if write:
        target = os.fspath(out_dir) if out_dir is not None else default_out_dir(names)
        result = replace(result, outputs=write_outputs(result, target, html=html))
    return result


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


@collect_rarely()
def score_inputs(
    paths: Iterable[str | os.PathLike[str]],
    baseline: BaselineSpec = None,
    samples: str | os.PathLike[str] | None = None,
    thresholds: Thresholds | None = None,
    irf_metrics: MetricsSpec = None,
    baseline_results: Sequence[BaselineResults] | None = None,
    baseline_name: str | None = None,
    stats: StatsSettings | None = None,
    arg_normalise: ArgNormalisation | None = None,
    billing: BillingTolerance | None = None,
) -> ScoreResult:
    """Load run folders / records.csv files and score them (:func:`avv_scoring.score.score_frame`; :func:`score_paths`
    also writes the outputs).

    ``baseline_results`` (:class:`avv_scoring.baseline_results.BaselineResults`, ``--baseline-results``) adds
    K2VV / MiniMax results files as the baseline vendor ``baseline_name`` (default ``official``) of their model;
    they replace ``baseline`` (giving both is an InputError).

    Tools come from ``samples`` when given, else from the sample file recorded in each run.json
    (sha256-checked). When exactly one run folder is scored and its run.json says ``"mode": "stress"``,
    ``result.stress`` holds its stress tables. A conformance run's probe file gives the probes (conformance.csv).
    ``billing``: the prompt-token tolerance (``--prompt-tokens-tolerance``); a model without one there takes the
    vendor config's ``prompt_tokens_tolerance`` recorded in run.json, else the default.
    Raises :class:`avv_core.errors.InputError` on bad input.
    """
    names = [os.fspath(p) for p in paths]
    inputs = resolve_inputs(names)
    excluded: list[str] = []
    records = read_inputs(inputs, excluded)
    tool_source = load_tools(inputs, samples)
    import_notes: list[str] = []
    if baseline_results:
        if baseline is not None:
            raise InputError("--baseline and --baseline-results both name the baseline; give one of them")
        records, baseline, import_notes = add_baseline_results(
            records, inputs, baseline_results, baseline_name or DEFAULT_BASELINE_NAME, samples
        )
        result_inputs = [*(i.csv_path for i in inputs), *(b.path for b in baseline_results)]
    else:
        result_inputs = [i.csv_path for i in inputs]
    result = score_frame(
        records, tool_source.tools_by_sample, baseline=baseline, thresholds=thresholds, irf_metrics=irf_metrics,
        gold_by_sample=tool_source.gold_by_sample, stats=stats, arg_normalise=arg_normalise,
        sample_sets=tool_source.sample_sets, probes=tool_source.probes,
        billing=(billing if billing is not None else BillingTolerance()).merged(_tolerances_of(inputs)),
    )
    stress_dir = _single_stress_run(inputs)
    return replace(
        result,
        warnings=(*tool_source.warnings, *_input_notes(inputs), *import_notes, *_excluded_notes(excluded),
                  *result.warnings),
        excluded_rows=tuple(excluded),
        inputs=tuple(result_inputs),
        sample_files=tuple(tool_source.sample_files),
        stress=stress_tables(stress_dir) if stress_dir is not None else None,
        settle=_settle_of(inputs),
        currencies=_currencies_of(inputs),
        vendor_down=_vendor_down_of(inputs),
    )


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


def _settle_of(inputs: Sequence[RunInput]) -> dict[str, Any]:
    """run.json's ``settle`` of each input made with ``--avv-settle`` (report section "Settled early")."""
    out: dict[str, Any] = {}
    for item in inputs:
        settle = item.manifest.extra.get("settle") if item.manifest is not None else None
        if isinstance(settle, dict) and isinstance(settle.get("vendors"), dict):
            out[item.run_dir or item.csv_path] = settle
    return out


def _vendor_down_of(inputs: Sequence[RunInput]) -> dict[str, Any]:
    """run.json's ``vendor_down`` of each input where the circuit breaker stopped a vendor (report section "Vendors
    stopped")."""
    out: dict[str, Any] = {}
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


__all__ = ["EXCLUDED_SHOWN", "SCORING_GC_THRESHOLD", "collect_rarely", "default_out_dir", "score_inputs",
           "score_paths", "stress_only", "stress_only_result"]
