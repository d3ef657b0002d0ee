"""``avv-score`` (scoring layer, top: parses arguments, calls :mod:`.score` / :mod:`.report` / :mod:`.irf`):
score runs, re-render a stress run, or compute IRF over a ready metrics table.

    avv-score RUN_OR_CSV... [--baseline NAME | --baseline MODEL=VENDOR ...] [--samples FILE] [--out DIR]
                            [--min-success X] [--min-f1 X] [--min-schema X] [--max-reasoning-only X]
                            [--min-attempt-success X] [--irf-metrics A,B,...] [--strict] [-q]
    avv-score stress RUN [--no-score] [same options as above]
    avv-score irf TABLE.csv [--digits N] [--irf-metrics A,B,...]
    avv-score metrics                       (the registry's metric table, as in the README)

Bad input prints one message naming the file and field and exits with status 2 (no traceback).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence

import pandas as pd

from avv_harness.errors import InputError

from .irf import irf_scores, irf_table_columns, resolve_irf_metrics
from .registry import render_metric_table
from .report import render_tables
from .score import ScoreResult, score_paths, stress_only
from .stress import stress_tables
from .verdict import Thresholds

PROG = "avv-score"


def _threshold(text: str) -> float | None:
    if text.strip().lower() in ("off", "none", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (or 'off')") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("NaN is not a threshold")
    return value


def _irf_metrics_arg(text: str) -> list[str]:
    """``--irf-metrics a,b,c`` → the columns, checked against the registry (unknown → usage error)."""
    columns = [part.strip() for part in text.split(",") if part.strip()]
    try:
        resolve_irf_metrics(columns)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return columns


def _add_irf_metrics_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--irf-metrics",
        type=_irf_metrics_arg,
        default=None,
        metavar="A,B,...",
        help="metric columns IRF fuses (default: " + ",".join(resolve_irf_metrics()) + ")",
    )


def _score_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Score avv-locust runs: per-vendor metrics, IRF and verdicts. "
        f"Use '{PROG} stress RUN' to re-render a stress run, '{PROG} irf TABLE.csv' to compute IRF over a "
        "ready metrics table.",
    )
    p.add_argument("inputs", nargs="+", metavar="RUN_OR_CSV", help="run folder(s) or records.csv file(s)")
    _add_score_options(p)
    return p


def _stress_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} stress",
        description="Re-render a stress run folder: stress.csv, capacity.csv, the plots and report.md with its "
        "stress section (the run is scored as by 'avv-score RUN' unless --no-score).",
    )
    p.add_argument("run", metavar="RUN", help="a stress run folder (records.csv and run.json)")
    p.add_argument(
        "--no-score",
        action="store_true",
        help="skip per-vendor scoring: report.md then holds the stress section only",
    )
    _add_score_options(p)
    return p


def _add_score_options(p: argparse.ArgumentParser) -> None:
    defaults = Thresholds()
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="NAME|MODEL=VENDOR",
        help="baseline vendor (overrides is_baseline); repeat MODEL=VENDOR for several models",
    )
    p.add_argument(
        "--samples", metavar="FILE", help="sample JSONL with the request tools (default: from run.json)"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="output folder (default: the run folder when one is given, else ./scores)",
    )
    p.add_argument(
        "--min-success",
        type=_threshold,
        default=defaults.min_success_rate,
        metavar="X",
        help="minimum success rate (default %(default)s; 'off' disables)",
    )
    p.add_argument(
        "--min-f1",
        type=_threshold,
        default=defaults.min_f1,
        metavar="X",
        help="minimum trigger F1 (default %(default)s)",
    )
    p.add_argument(
        "--min-schema",
        type=_threshold,
        default=defaults.min_schema_accuracy,
        metavar="X",
        help="minimum schema accuracy (default %(default)s)",
    )
    p.add_argument(
        "--max-reasoning-only",
        type=_threshold,
        default=defaults.max_reasoning_only_rate,
        metavar="X",
        help="maximum reasoning-only rate (default %(default)s)",
    )
    p.add_argument(
        "--min-attempt-success",
        type=_threshold,
        default=defaults.min_attempt_success_rate,
        metavar="X",
        help="minimum per-attempt success rate (default: not checked)",
    )
    _add_irf_metrics_option(p)
    p.add_argument(
        "--strict", action="store_true",
        help="exit with status 1 when any vendor fails its verdict, or when there is nothing to score"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the tables")


def _irf_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} irf",
        description="Add an 'irf' column to a per-vendor metrics table (CSV with columns "
        f"{', '.join(irf_table_columns())}, or model, vendor and the --irf-metrics columns; an empty cell = "
        "missing) and print it as CSV.",
    )
    p.add_argument("table", metavar="TABLE.csv")
    p.add_argument("--digits", type=int, default=4, help="decimals of the irf column (default 4)")
    _add_irf_metrics_option(p)
    return p


def _baseline_arg(values: Sequence[str]) -> str | dict[str, str] | None:
    if not values:
        return None
    out: dict[str, str] = {}
    for value in values:
        model, sep, vendor = value.partition("=")
        if sep:
            if not model or not vendor:
                raise InputError(f"--baseline {value!r}: expected NAME or MODEL=VENDOR")
            out[model] = vendor
        else:
            if "*" in out and out["*"] != value:
                raise InputError(
                    f"--baseline given twice ({out['*']}, {value}); use MODEL=VENDOR for several"
                )
            out["*"] = value
    return out["*"] if list(out) == ["*"] else out


def read_irf_table(path: str, metrics: Sequence[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the table as text cells, the numeric metric columns). Raises InputError naming file/line/column.

    ``metrics`` = the IRF input columns the table must have (default: the registry's IRF inputs)."""
    required = irf_table_columns(metrics)
    try:
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: cannot read CSV ({str(exc).strip().splitlines()[0]})") from None
    text.columns = [str(c).strip() for c in text.columns]
    missing = [c for c in required if c not in text.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(required)})")
    numeric = pd.DataFrame(index=text.index)
    numeric["model"] = text["model"]
    numeric["vendor"] = text["vendor"]
    for col in required[2:]:
        values = []
        for line, cell in enumerate(text[col].tolist(), start=2):
            cell = cell.strip()
            if cell == "":
                values.append(float("nan"))
                continue
            try:
                value = float(cell)
            except ValueError:
                raise InputError(f"{path}:{line}: column {col!r}: {cell!r} is not a number") from None
            if math.isnan(value):
                raise InputError(f"{path}:{line}: column {col!r}: leave the cell empty for a missing value")
            values.append(value)
        numeric[col] = values
    return text, numeric


def main_irf(argv: Sequence[str]) -> int:
    args = _irf_parser().parse_args(argv)
    text, numeric = read_irf_table(args.table, args.irf_metrics)
    out = text.copy()
    out["irf"] = [f"{v:.{max(args.digits, 0)}f}" for v in irf_scores(numeric, args.irf_metrics)]
    out.to_csv(sys.stdout, index=False, lineterminator="\n")
    return 0


def _thresholds(args: argparse.Namespace) -> Thresholds:
    return Thresholds(
        min_success_rate=args.min_success,
        min_f1=args.min_f1,
        min_schema_accuracy=args.min_schema,
        max_reasoning_only_rate=args.max_reasoning_only,
        min_attempt_success_rate=args.min_attempt_success,
    )


def _report(result: ScoreResult, args: argparse.Namespace) -> int:
    """Print the tables and what was written; the exit status (--strict)."""
    if not args.quiet:
        sys.stdout.write(render_tables(result))
        if result.outputs:
            folder = os.path.dirname(next(iter(result.outputs.values()))) or "."
            sys.stdout.write(
                f"wrote {', '.join(os.path.basename(p) for p in result.outputs.values())} to {folder}\n"
            )
    if args.strict and result.scored and result.scores.empty:
        sys.stderr.write(f"{PROG}: --strict: no records to score, so no vendor passed\n")
        return 1
    if args.strict and result.scored and not result.passed:
        return 1
    return 0


def main_score(argv: Sequence[str]) -> int:
    args = _score_parser().parse_args(argv)
    result = score_paths(
        args.inputs,
        baseline=_baseline_arg(args.baseline),
        samples=args.samples,
        out_dir=args.out,
        thresholds=_thresholds(args),
        irf_metrics=args.irf_metrics,
    )
    return _report(result, args)


def main_stress(argv: Sequence[str]) -> int:
    args = _stress_parser().parse_args(argv)
    if not os.path.isdir(args.run):
        raise InputError(f"{args.run}: no such run folder")
    if args.no_score:
        return _report(stress_only(args.run, out_dir=args.out), args)
    if stress_tables(args.run) is None:  # checked before anything is written
        raise InputError(f"{args.run}: not a stress run (run.json mode is not 'stress')")
    result = score_paths(
        [args.run],
        baseline=_baseline_arg(args.baseline),
        samples=args.samples,
        out_dir=args.out,
        thresholds=_thresholds(args),
        irf_metrics=args.irf_metrics,
    )
    return _report(result, args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "irf":
            return main_irf(argv[1:])
        if argv and argv[0] == "stress":
            return main_stress(argv[1:])
        if argv and argv[0] == "metrics":  # the README table, from the registry
            sys.stdout.write(render_metric_table() + "\n")
            return 0
        return main_score(argv)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
