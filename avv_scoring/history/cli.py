"""``avv-score history add`` and ``avv-score trend`` (scoring layer, top: parses arguments and calls
:mod:`.store`, :mod:`.trend` and :mod:`.render`; :mod:`avv_scoring.cli` dispatches to them).

    avv-score history add RUN... --db PATH [--bootstrap N] [--seed S]
    avv-score trend --db PATH [--model M] [--vendor V] [--metric A,B ...] [--since DATE] [--out DIR] [--no-html]
                    [--fail-on-regression] [-q]

Exit status: 0 done; 2 bad input (a run folder, the database, an option); 5 ``--fail-on-regression`` and a
vendor's latest run has a flagged regression or its verdict became FAIL (:data:`EXIT_REGRESSION`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import date

from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus
from avv_scoring.history.db import connect
from avv_scoring.history.regression import RESAMPLES, SEED
from avv_scoring.history.render import render_terminal, summary_line, write_trend
from avv_scoring.history.store import add_run_folders
from avv_scoring.history.trend import TrendOptions, compute_trend, default_metrics
from avv_scoring.stats.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED, StatsSettings, non_negative_int

PROG = "avv-score"
#: Exit status of ``avv-score trend --fail-on-regression`` when a vendor's latest run has a flagged regression.
EXIT_REGRESSION = int(ExitStatus.REGRESSION)




def _day(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def main_history(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog=f"{PROG} history", description="Add run folders to a history database "
                                "(SQLite, created when missing): each is scored as 'avv-score RUN' scores it and its "
                                "metrics, verdicts and per-item outcomes are stored. A run already in the history "
                                "(same run id) adds nothing.")
    p.add_argument("action", choices=["add"])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s) (or records.csv)")
    p.add_argument("--db", required=True, metavar="PATH", help="the history database file")
    p.add_argument("--bootstrap", type=non_negative_int, default=DEFAULT_RESAMPLES, metavar="N",
                   help=f"bootstrap resamples of the stored intervals (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=non_negative_int, default=DEFAULT_SEED, metavar="S", help=f"(default {DEFAULT_SEED})")
    args = p.parse_args(argv)
    for run in args.runs:
        if not os.path.exists(run):
            raise InputError(f"{run}: no such run folder or records.csv")
    conn = connect(args.db)
    try:
        for added in add_run_folders(conn, args.runs, StatsSettings(resamples=args.bootstrap, seed=args.seed)):
            what = f"added ({added.items} items)" if added.added else "already in the history: nothing added"
            print(f"{added.source}: run {added.run_id} {what}")
    finally:
        conn.close()
    return 0


def _metrics(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main_trend(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog=f"{PROG} trend", description="Each vendor's metrics over the runs of a "
                                "history, and the changes between a run and the vendor's previous comparable run "
                                "(paired by sample: McNemar on trigger and tool-match flips, a paired bootstrap on "
                                "rates and TTFT / TPS medians; flagged when significant and large enough). Prints "
                                "the tables and writes trend.md and trend.html.")
    p.add_argument("--db", required=True, metavar="PATH", help="the history database file")
    p.add_argument("--model", help="only this model")
    p.add_argument("--vendor", help="only this vendor")
    p.add_argument("--metric", action="append", type=_metrics, default=[], metavar="A,B",
                   help="metric columns to show (repeatable; default: " + ",".join(default_metrics()) + ")")
    p.add_argument("--since", type=_day, metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD)")
    p.add_argument("--out", default=".", metavar="DIR", help="where trend.md and trend.html go (default .)")
    p.add_argument("--no-html", action="store_true", help="do not write trend.html")
    p.add_argument("--bootstrap", type=non_negative_int, default=RESAMPLES, metavar="N",
                   help=f"resamples of the between-run bootstrap tests (default {RESAMPLES})")
    p.add_argument("--seed", type=non_negative_int, default=SEED, metavar="S", help=f"(default {SEED})")
    p.add_argument("--fail-on-regression", action="store_true",
                   help=f"exit with status {EXIT_REGRESSION} when a vendor's latest run has a flagged regression or "
                   "its verdict became FAIL (from PASS or INCONCLUSIVE)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the tables")
    args = p.parse_args(argv)
    metrics = tuple(m for group in args.metric for m in group) or default_metrics()
    options = TrendOptions(model=args.model, vendor=args.vendor, metrics=metrics, since=args.since,
                           resamples=args.bootstrap, seed=args.seed)
    conn = connect(args.db, create=False)
    try:
        trend = compute_trend(conn, options)
    finally:
        conn.close()
    if trend.series.empty:
        raise InputError(f"{args.db}: no runs match (model {args.model or 'any'}, vendor {args.vendor or 'any'}, "
                         f"since {args.since or 'the first'})")
    outputs = write_trend(trend, args.out, html=not args.no_html)
    if not args.quiet:
        sys.stdout.write(render_terminal(trend))
        print(f"wrote {', '.join(outputs)} to {args.out}")
    if args.fail_on_regression and not (trend.latest_regressions().empty and trend.latest_verdict_regressions().empty):
        print(f"{PROG}: --fail-on-regression: a regression in the latest run ({summary_line(trend)})", file=sys.stderr)
        return EXIT_REGRESSION
    return 0


__all__ = ["EXIT_REGRESSION", "main_history", "main_trend"]
