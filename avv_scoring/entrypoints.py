"""The library's entry points (scoring layer, top, beside :mod:`.cli`): score run folders and write their outputs.
The CLI and the harness call them; :mod:`.score` computes, :mod:`.report.outputs` writes, neither imports the other
way."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from avv_scoring.report.outputs import write_outputs
from avv_scoring.score import BaselineSpec, ScoreResult, default_out_dir, score_inputs, stress_only_result
from avv_scoring.stats.irf import MetricsSpec
from avv_scoring.stats.uncertainty import StatsSettings
from avv_scoring.verdict import Thresholds


def score_paths(
    paths: Iterable[str | os.PathLike[str]],
    baseline: BaselineSpec = None,
    samples: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    thresholds: Thresholds | None = None,
    write: bool = True,
    irf_metrics: MetricsSpec = None,
    baseline_results: Sequence[Any] | None = None,
    baseline_name: str | None = None,
    stats: StatsSettings | None = None,
    html: bool = True,
) -> ScoreResult:
    """Load run folders / records.csv files, score them (:func:`avv_scoring.score.score_inputs`: the baseline,
    samples, baseline results and stress tables) and (``write=True``) write scores.csv, scores_by_repeat.csv,
    scores.json, disagreements.csv, report.md and (``html``) report.html into ``out_dir`` (default: the run folder
    when one was given, else ``./scores``); for a stress run also stress.csv, capacity.csv and the two plots.
    Raises :class:`avv_core.errors.InputError` on bad input."""
    names = [os.fspath(p) for p in paths]
    result = score_inputs(names, baseline, samples, thresholds, irf_metrics, baseline_results, baseline_name, stats)
    if write:
        target = os.fspath(out_dir) if out_dir is not None else default_out_dir(names)
        result.outputs = write_outputs(result, target, html=html)
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
        result.outputs = write_outputs(result, os.fspath(out_dir) if out_dir is not None else os.fspath(run_dir))
    return result


__all__ = ["score_paths", "stress_only"]
