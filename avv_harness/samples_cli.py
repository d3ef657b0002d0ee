"""``avv-samples``: make sample files (entry point; calls :mod:`avv_harness.inputs.bfcl`).

    avv-samples from-bfcl DIR --categories simple_python,multiple,parallel,... --out FILE [--per-category N]

Bad input prints one message naming the file (exit status 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from avv_core.command_line import command_parser
from avv_core.errors import InputError
from avv_core.samples import load_samples
from avv_harness.inputs.bfcl import convert, write_lines

PROG = "avv-samples"


def _parser() -> argparse.ArgumentParser:
    p = command_parser(PROG, "Make avv sample files (JSONL request bodies with gold).")
    sub = p.add_subparsers(dest="command", required=True)
    bfcl = sub.add_parser("from-bfcl", help="convert Berkeley Function Calling Leaderboard v4 questions",
                          description="Convert BFCL v4 questions (and their possible answers) into request bodies "
                          "with gold labels: expected_tool_call, expected_calls, tool_names.")
    bfcl.add_argument("folder", metavar="DIR", help="the BFCL data folder (BFCL_v4_<category>.json, possible_answer/)")
    bfcl.add_argument("--categories", required=True, metavar="A,B,...",
                      help="categories to convert, e.g. simple_python,multiple,parallel,irrelevance")
    bfcl.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write")
    bfcl.add_argument("--per-category", type=int, default=None, metavar="N",
                      help="at most N questions per category, spread evenly over its file (default: all)")
    return p


def main_from_bfcl(args: argparse.Namespace) -> int:
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    if not categories:
        raise InputError("--categories: name at least one category")
    if args.per_category is not None and args.per_category < 1:
        raise InputError("--per-category: must be at least 1")
    result = convert(args.folder, categories, args.per_category)
    if not result.lines:
        raise InputError(f"{args.folder}: no question converted")
    write_lines(result.lines, args.out)
    load_samples(args.out)  # what we wrote must load as a sample file
    for category in categories:
        skipped = result.skipped[category]
        note = f", {len(skipped)} skipped ({'; '.join(skipped[:3])}{' …' if len(skipped) > 3 else ''})" if skipped \
            else ""
        print(f"{category}: {result.written[category]} lines{note}")
    print(f"wrote {len(result.lines)} lines to {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return main_from_bfcl(args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
