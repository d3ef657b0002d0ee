"""avv_scoring: per-vendor metrics, the IRF fusion score, verdicts and reports from records.csv files. It imports
only :mod:`avv_core` (no HTTP client, no Locust): writing a run as K2VV files needs the harness to rebuild its
requests, so ``export_run`` is :func:`avv_harness.export_run`.

Folders and top-level modules, lowest first (:data:`LAYERS`; a module imports only from its own folder and the ones
before it, and ``bench/import_graph.py`` fails on an upward import): :mod:`.stats` (pure statistics over arrays:
intervals, tests, sequential tests, the identity test) → :mod:`.probes` (a conformance run's probe lines) → :mod:`.load`
(input: records.csv, run.json, the samples) → :mod:`.baseline_choice` (each model's baseline vendor) → :mod:`.metrics`
(the registry, every metric declared once with its additive form and interval, the modules that declare them, the
bootstrap and noise floor over those forms, IRF) → :mod:`.conformance` (the conformance suite's checks) →
:mod:`.verdict` / :mod:`.decision` (a verdict per vendor) → :mod:`.stress` (stress-mode tables) → :mod:`.score` (records
→ a frozen :class:`ScoreResult`) → :mod:`.report` (csv/json/md/html outputs from sections declared once; every text a
person opens escaped by the rules of :mod:`.report.escape`) → :mod:`.entrypoints` (score and write) → :mod:`.history` →
:mod:`.cli`. Rule throughout: a vendor's failure never improves its score. See docs/scoring.md.
"""

from __future__ import annotations

from avv_scoring.baseline_results import BaselineResults
from avv_scoring.entrypoints import ScoreRequest, score, score_paths, stress_only
from avv_scoring.load import load_records
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.irf import add_irf, irf_scores
from avv_scoring.metrics.registry import METRICS, metric, render_metric_table
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.presets import load_thresholds, resolve_thresholds
from avv_scoring.report.escape import (
    control_characters,
    markdown_cell,
    markdown_table,
    markdown_text,
    neutralise_cell,
    neutralise_frame,
    restore_cell,
    restore_frame,
    terminal_text,
)
from avv_scoring.report.markdown import render_markdown
from avv_scoring.report.outputs import write_stress_outputs
from avv_scoring.report.sections.decision import decision_lines
from avv_scoring.report.terminal import render_tables
from avv_scoring.run_outcome import BrokenVendor, broken_vendors, decision_exit_status
from avv_scoring.score import SCORE_COLUMNS, ScoreResult, score_frame
from avv_scoring.settle_bounds import item_parts, records_frame, settle_bounds
from avv_scoring.stats.sequential import (
    BoundTest,
    RatioBound,
    check_bound,
    confidence_interval,
    settle_verdict,
    split_alpha,
)
from avv_scoring.stress import StressResult, stress_tables
from avv_scoring.verdict import Thresholds

#: The folders and top-level modules of this package, lowest first (read by bench/import_graph.py).
LAYERS = (
    "stats", "probes", "load", "baseline_choice", "baseline_results", "metrics", "conformance", "arg_normalise",
    "verdict", "statistical_verdict", "presets", "decision", "settle_bounds", "stress", "score", "run_outcome",
    "live_scores", "report", "irf_command", "entrypoints", "history", "cli", "testing",
)

__all__ = [
    "BaselineResults",
    "BoundTest",
    "METRICS",
    "SCORE_COLUMNS",
    "Metric",
    "RatioBound",
    "ScoreResult",
    "StatsSettings",
    "StressResult",
    "Thresholds",
    "add_irf",
    "check_bound",
    "confidence_interval",
    "control_characters",
    "irf_scores",
    "item_parts",
    "load_records",
    "load_thresholds",
    "markdown_cell",
    "markdown_table",
    "markdown_text",
    "metric",
    "neutralise_cell",
    "neutralise_frame",
    "records_frame",
    "render_markdown",
    "render_metric_table",
    "render_tables",
    "resolve_thresholds",
    "restore_cell",
    "restore_frame",
    "score_frame",
    "BrokenVendor",
    "ScoreRequest",
    "broken_vendors",
    "decision_exit_status",
    "decision_lines",
    "score",
    "score_paths",
    "settle_bounds",
    "settle_verdict",
    "split_alpha",
    "stress_only",
    "stress_tables",
    "terminal_text",
    "write_stress_outputs",
]
