"""avv_scoring: per-vendor metrics, the IRF fusion score, verdicts and reports from records.csv files.

Layers: :mod:`.load` (input) → :mod:`.metrics` (one pure function per metric, formula in its
docstring) → :mod:`.irf` → :mod:`.verdict` → :mod:`.report` (csv/json/md outputs) → :mod:`.cli`.
Rule throughout: a vendor's failure never improves its score. See docs/scoring.md.
"""

from __future__ import annotations

from .irf import add_irf, irf_scores
from .load import load_records
from .report import render_markdown, render_tables
from .score import SCORE_COLUMNS, ScoreResult, score_frame, score_paths
from .verdict import Thresholds

__all__ = [
    "SCORE_COLUMNS",
    "ScoreResult",
    "Thresholds",
    "add_irf",
    "irf_scores",
    "load_records",
    "render_markdown",
    "render_tables",
    "score_frame",
    "score_paths",
]
