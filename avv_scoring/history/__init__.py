"""The run history (scoring layer): a SQLite file of scored runs (:mod:`.db`, schema documented in
docs/history.md), adding runs to it (:mod:`.store`), each vendor's metrics over runs and the paired tests between
runs (:mod:`.trend`, :mod:`.regression`), their tables and pages (:mod:`.render`) and the ``avv-score history`` /
``avv-score trend`` commands (:mod:`.cli`). It imports no harness module: the harness calls :func:`add_result`
at the end of a run (``--avv-history``)."""

from __future__ import annotations

from avv_scoring.history.cli import EXIT_REGRESSION
from avv_scoring.history.db import BUSY_TIMEOUT_S, SCHEMA_VERSION, connect, open_history
from avv_scoring.history.regression import ALPHA, Change, compare, outcomes, regression_tests
from avv_scoring.history.render import render_html, render_markdown, render_terminal, write_trend
from avv_scoring.history.store import Added, add_result, add_run_folder, add_run_folders, item_frame
from avv_scoring.history.trend import Trend, TrendOptions, compute_trend

__all__ = [
    "ALPHA",
    "BUSY_TIMEOUT_S",
    "EXIT_REGRESSION",
    "SCHEMA_VERSION",
    "regression_tests",
    "Added",
    "Change",
    "Trend",
    "TrendOptions",
    "add_result",
    "add_run_folder",
    "add_run_folders",
    "compare",
    "compute_trend",
    "connect",
    "item_frame",
    "open_history",
    "outcomes",
    "render_html",
    "render_markdown",
    "render_terminal",
    "write_trend",
]
