"""``avv-score irf TABLE.csv`` and the ``--irf-metrics`` option (scoring layer, top: parses arguments, reads a
metrics table, calls :mod:`avv_scoring.stats.irf`). Moved out of :mod:`avv_scoring.cli` unchanged."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import pandas as pd

from avv_core.command_line import command_parser
from avv_core.errors import InputError
from avv_scoring.report.escape import neutralise_frame, restore_frame
from avv_scoring.stats.irf import irf_scores, irf_table_columns, resolve_irf_metrics

PROG = "avv-score"


def irf_metrics_arg(text: str) -> list[str]:
    """``--irf-metrics a,b,c`` → the columns, checked against the registry (unknown → usage error)."""
    columns = [part.strip() for part in text.split(",") if part.strip()]
    try:
        resolve_irf_metrics(columns)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return columns


def add_irf_metrics_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--irf-metrics",
        type=irf_metrics_arg,
        default=None,
        metavar="A,B,...",
        help="metric columns IRF fuses (default: " + ",".join(resolve_irf_metrics()) + ")",
    )


def irf_parser() -> argparse.ArgumentParser:
    p = command_parser(
        f"{PROG} irf",
        "Add an 'irf' column to a per-vendor metrics table (CSV with columns "
        f"{', '.join(irf_table_columns())}, or model, vendor and the --irf-metrics columns; an empty cell = "
        "missing) and print it as CSV.",
    )
    p.add_argument("table", metavar="TABLE.csv")
    p.add_argument("--digits", type=int, default=4, help="decimals of the irf column (default 4)")
    add_irf_metrics_option(p)
    return p


def read_irf_table(path: str, metrics: Sequence[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the table as text cells, the numeric metric columns). Raises InputError naming file/line/column.

    ``metrics`` = the IRF input columns the table must have (default: the registry's IRF inputs). Cells that
    avv-score neutralised against formula injection (a scores.csv) are restored first
    (:func:`~avv_scoring.report.escape.restore_frame`)."""
    required = irf_table_columns(metrics)
    try:
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: cannot read CSV ({str(exc).strip().splitlines()[0]})") from None
    text.columns = [str(c).strip() for c in text.columns]
    text = restore_frame(text)
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
    args = irf_parser().parse_args(argv)
    text, numeric = read_irf_table(args.table, args.irf_metrics)
    out = text.copy()
    out["irf"] = [f"{v:.{max(args.digits, 0)}f}" for v in irf_scores(numeric, args.irf_metrics)]
    neutralise_frame(out).to_csv(sys.stdout, index=False, lineterminator="\n")  # safe to open in a spreadsheet
    return 0


__all__ = ["add_irf_metrics_option", "irf_metrics_arg", "irf_parser", "main_irf", "read_irf_table"]
