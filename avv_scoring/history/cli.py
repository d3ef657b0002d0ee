"""``avv-score history add|trend|show`` (scoring layer, top: parses arguments and calls :mod:`.store`, :mod:`.trend`
and :mod:`.render`; :mod:`avv_scoring.cli` dispatches to :func:`main_history`).

    avv-score history add RUN... --db PATH [--bootstrap N] [--seed S] [--lock-timeout S]
    avv-score history trend --db PATH [--model M] [--vendor V] [--metric A,B ...] [--since DATE] [--out DIR]
                            [--no-html] [--fail-on-regression] [--lock-timeout S] [-q]
    avv-score history show --db PATH [--since DATE]

``avv-score trend`` is the earlier spelling of ``history trend`` (kept for one release).

Exit status: 0 done; 2 bad input (a run folder, an option, or the database: not a history, locked by another
process longer than ``--lock-timeout``, read-only, disk full, corrupted — the message says which and what to do);
5 ``--fail-on-regression`` and a vendor's latest run has a flagged regression or its verdict became FAIL
(:data:`EXIT_REGRESSION`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import date

from avv_core.command_line import command_parser
from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus
from avv_core.frame_rows import frame_records
from avv_core.suggest import did_you_mean
from avv_scoring.history.db import BUSY_TIMEOUT_S, open_history
from avv_scoring.history.regression import RESAMPLES, SEED
from avv_scoring.history.render import render_terminal, summary_line, write_trend
from avv_scoring.history.store import add_run_folders
from avv_scoring.history.trend import TrendOptions, compute_trend, default_metrics, load_runs
from avv_scoring.metrics.uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED, StatsSettings, non_negative_int

PROG = "avv-score"
#: Exit status of ``avv-score trend --fail-on-regression`` when a vendor's latest run has a flagged regression.
EXIT_REGRESSION = int(ExitStatus.REGRESSION)




def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def _lock_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lock-timeout", type=_seconds, default=BUSY_TIMEOUT_S, metavar="S",
                   help=f"how long to wait for another process that holds the database (default {BUSY_TIMEOUT_S:g} "
                   "s: long enough for another process to add a large run)")


def _day(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


#: ``avv-score history ACTION``: action → (its one line for --help, its entry point); filled below.
ACTIONS: dict[str, tuple[str, Callable[[Sequence[str]], int]]] = {}


def main_history(argv: Sequence[str]) -> int:
    """``avv-score history ACTION ...``: :data:`ACTIONS` (``--help`` lists them)."""
    if argv and argv[0] in ACTIONS:
        return int(ACTIONS[argv[0]][1](argv[1:]))
    width = max(map(len, ACTIONS))
    p = command_parser(f"{PROG} history", "The run history: a SQLite file of scored runs (docs/history.md).",
                       epilog="actions:\n" + "".join(f"  {name:<{width}}  {line}\n"
                                                     for name, (line, _) in ACTIONS.items()),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", metavar="ACTION", help="|".join(ACTIONS))
    args, _ = p.parse_known_args(argv)
    raise InputError(f"history {args.action}: not an action ({', '.join(ACTIONS)})"
                     f"{did_you_mean(args.action, ACTIONS)}")


def main_history_add(argv: Sequence[str]) -> int:
    p = command_parser(f"{PROG} history add", "Add run folders to a history database (SQLite, created when "
                       "missing): each is scored as 'avv-score RUN' scores it and its metrics, verdicts and per-item "
                       "outcomes are stored. A run already in the history (same run id) adds nothing.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s) (or records.csv)")
    p.add_argument("--db", required=True, metavar="PATH", help="the history database file")
    p.add_argument("--bootstrap", type=non_negative_int, default=DEFAULT_RESAMPLES, metavar="N",
                   help=f"bootstrap resamples of the stored intervals (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=non_negative_int, default=DEFAULT_SEED, metavar="S", help=f"(default {DEFAULT_SEED})")
    _lock_timeout(p)
    args = p.parse_args(argv)
    for run in args.runs:
        if not os.path.exists(run):
            raise InputError(f"{run}: no such run folder or records.csv")
    with open_history(args.db, timeout_s=args.lock_timeout) as conn:
        for added in add_run_folders(conn, args.runs, StatsSettings(resamples=args.bootstrap, seed=args.seed)):
            what = f"added ({added.items} items)" if added.added else "already in the history: nothing added"
            print(f"{added.source}: run {added.run_id} {what}", flush=True)
    return 0


def _metrics(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main_trend(argv: Sequence[str]) -> int:
    p = command_parser(f"{PROG} history trend", "Each vendor's metrics over the runs of a history, and the changes "
                       "between a run and the vendor's previous comparable run (paired by sample: McNemar on trigger "
                       "and tool-match flips, a paired bootstrap on rates and TTFT / TPS medians; flagged when "
                       "significant and large enough). Prints the tables and writes trend.md and trend.html.")
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
    _lock_timeout(p)
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the tables")
    args = p.parse_args(argv)
    metrics = tuple(m for group in args.metric for m in group) or default_metrics()
    options = TrendOptions(model=args.model, vendor=args.vendor, metrics=metrics, since=args.since,
                           resamples=args.bootstrap, seed=args.seed)
    with open_history(args.db, create=False, timeout_s=args.lock_timeout) as conn:
        trend = compute_trend(conn, options)
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


def main_show(argv: Sequence[str]) -> int:
    """``avv-score history show``: one line per run the history holds, oldest first, with its vendors' verdicts."""
    p = command_parser(f"{PROG} history show", "List the runs a history database holds, oldest first: run id, start, "
                       "mode, items scored and each vendor's verdict.")
    p.add_argument("--db", required=True, metavar="PATH", help="the history database file")
    p.add_argument("--since", type=_day, metavar="DATE", help="only runs started on or after DATE (YYYY-MM-DD)")
    args = p.parse_args(argv)
    with open_history(args.db, create=False) as conn:
        runs = load_runs(conn, args.since)
        verdicts: dict[str, list[str]] = {}
        for run_id, model, vendor, verdict in conn.execute(
                "SELECT run_id, model, vendor, verdict FROM vendors ORDER BY run_id, model, vendor"):
            verdicts.setdefault(run_id, []).append(f"{model}/{vendor} {str(verdict or 'n/a').upper()}")
    if runs.empty:
        print(f"{args.db}: no runs" + (f" since {args.since}" if args.since else ""))
        return 0
    for run in frame_records(runs):
        print(f"#{run['run_index']} {run['run_id']}  {run['started_at'] or '?'}  {run['mode'] or '?'}  "
              f"{run['records'] if run['records'] is not None else '?'} items  "
              f"{', '.join(verdicts.get(run['run_id'], [])) or 'no vendors'}")
    return 0


ACTIONS.update({
    "add": ("add scored run folders to the history (--db PATH)", main_history_add),
    "trend": ("each vendor's metrics over the runs, and the changes between runs", main_trend),
    "show": ("list the runs the history holds, with their vendors' verdicts", main_show),
})

__all__ = ["ACTIONS", "EXIT_REGRESSION", "main_history", "main_history_add", "main_show", "main_trend"]
