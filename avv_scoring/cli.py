"""``avv-score`` (scoring layer, top: parses arguments, calls :mod:`.score` / :mod:`.report` / :mod:`.irf`):
score runs, and the subcommands of :data:`SUBCOMMANDS` (``avv-score --help`` lists them, one line each).

    avv-score RUN_OR_CSV... [--baseline NAME | --baseline MODEL=VENDOR ...] [--samples FILE] [--out DIR]
                            [--baseline-results [MODEL=]FILE.jsonl ...] [--baseline-name NAME]
                            [--thresholds PRESET|FILE.yaml]
                            [--min-success X] [--min-f1 X] [--min-schema X] [--max-reasoning-only X]
                            [--min-attempt-success X] [--irf-metrics A,B,...]
                            [--strict [--allow-inconclusive]] [-q]
                            [--bootstrap N] [--seed S] [--verdict interval|point|statistical] [--confidence P]
                            [--arg-normalise default|none|FILE.yaml] [--ftr-band LOW:HIGH]
                            [--irf-ties statistical|published]
    avv-score stress RUN [--no-score] [same options as above]
    avv-score export RUN [--format k2vv] [--out DIR] [--samples FILE] [--baseline NAME | MODEL=VENDOR]
    avv-score trajectory RUN --vendor NAME --sample ID [--repeat N] [--samples FILE]   (one agent task, step by step)
    avv-score irf TABLE.csv [--digits N] [--irf-metrics A,B,...]
    avv-score metrics                       (the registry's metric table, as in the README)
    avv-score thresholds [PRESET|FILE.yaml] (a threshold preset as YAML, ready to copy and edit)
    avv-score history add RUN... --db PATH  (add runs to a history database; see avv_scoring/history)
    avv-score history trend --db PATH [--model M] [--vendor V] [--metric A,B] [--since DATE] [--fail-on-regression]
    avv-score history show --db PATH        (the runs a history holds)
    avv-score --version                     (avv-locust's version, then Locust's)

``avv-score trend`` (before: the spelling of ``history trend``) still works for one release, with a note.

Bad input prints one message naming the file and field and exits with status 2 (no traceback). Exit status
(:mod:`avv_core.exit_status`; the most serious wins): 0 scored; 2 bad input; 4 scored, but rows holding a number no
record can hold were left out (each named on stderr and in report.md); 5 ``history trend --fail-on-regression`` and a
vendor's latest run regressed; 6 a vendor is a broken setup (every one of its items failed: named on stderr,
whatever ``--strict``); 7 ``--strict`` and a vendor FAILs (or nothing to score; before: 1); 8 ``--strict``, no
vendor FAILs but one is INCONCLUSIVE (0 with ``--allow-inconclusive``). Ctrl-C or SIGTERM stops it at once, with one
line and status 128 + the signal (130, 143), no traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from avv_core.command_line import command_parser
from avv_core.decision_options import DEFAULT_CONFIDENCE, VERDICT_MODES, parse_confidence, parse_verdict_mode
from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus
from avv_core.stop_signals import Interrupted, interrupt_on_signals
from avv_core.suggest import did_you_mean
from avv_scoring.arg_normalise import resolve_arg_normalise
from avv_scoring.baseline_results import DEFAULT_BASELINE_NAME, BaselineResults
from avv_scoring.entrypoints import ScoreRequest, score, stress_only
from avv_scoring.irf_command import add_irf_metrics_option, main_irf, read_irf_table  # noqa: F401 (re-exported)
from avv_scoring.metrics.billing import BillingTolerance, parse_tolerances
from avv_scoring.metrics.registry import render_metric_table
from avv_scoring.presets import PRESETS, resolve_thresholds, thresholds_yaml
from avv_scoring.report.escape import terminal_text
from avv_scoring.report.terminal import render_tables
from avv_scoring.run_outcome import broken_vendors
from avv_scoring.score import ScoreResult
from avv_scoring.stats.irf import IRF_TIES
from avv_scoring.stats.uncertainty import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    StatsSettings,
    non_negative_int,
)
from avv_scoring.stress import stress_tables
from avv_scoring.verdict import DEFAULT_PRESET, Thresholds

PROG = "avv-score"
#: Exit status when the run was scored without some of its rows (each named): the scores are not the whole run's.
EXIT_ROWS_LEFT_OUT = int(ExitStatus.SCORING)


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


def confidence(text: str) -> float:
    """``--confidence``: a level in (0.5, 1) or a percentage: ``0.95`` or ``95``."""
    try:
        return parse_confidence(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def verdict_mode(text: str) -> str:
    """``--verdict``: interval, point or statistical (``threshold``: the old name of point)."""
    try:
        return parse_verdict_mode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _band(text: str) -> tuple[float, float]:
    """``--ftr-band 0.775:0.825`` → (0.775, 0.825)."""
    low, sep, high = text.partition(":")
    try:
        band = (float(low), float(high)) if sep else None
    except ValueError:
        band = None
    if band is None or not all(math.isfinite(b) for b in band) or band[0] > band[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is not LOW:HIGH (two numbers, LOW ≤ HIGH)")
    return band


def _score_parser() -> argparse.ArgumentParser:
    p = command_parser(
        PROG,
        "Score avv-locust runs: per-vendor metrics, IRF and verdicts (avv-score RUN_OR_CSV...), or run one of the "
        "subcommands below (avv-score COMMAND --help for its options).",
        usage=f"{PROG} RUN_OR_CSV... [options]\n       {PROG} COMMAND ...",
        epilog=subcommands_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="RUN_OR_CSV", help="run folder(s) or records.csv file(s)")
    _add_score_options(p)
    return p


def _stress_parser() -> argparse.ArgumentParser:
    p = command_parser(
        f"{PROG} stress",
        "Re-render a stress run folder: stress.csv, capacity.csv, the plots and report.md with its "
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


#: The single-metric threshold flags: flag → (dest, bound keyword). They override --thresholds.
THRESHOLD_FLAGS: tuple[tuple[str, str, str, str], ...] = (
    ("--min-success", "min_success", "min_success_rate", "minimum success rate"),
    ("--min-f1", "min_f1", "min_f1", "minimum trigger F1"),
    ("--min-schema", "min_schema", "min_schema_accuracy", "minimum schema accuracy"),
    ("--max-reasoning-only", "max_reasoning_only", "max_reasoning_only_rate", "maximum reasoning-only rate"),
    ("--min-attempt-success", "min_attempt_success", "min_attempt_success_rate", "minimum per-attempt success rate"),
)


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
        "--baseline-results",
        action="append",
        default=[],
        type=BaselineResults.parse,
        metavar="[MODEL=]FILE.jsonl",
        help="a K2VV / MiniMax results.jsonl as the baseline vendor (joined by data_index; its failed rows count "
        "as failures); repeat for the repeats of one model, MODEL= for one of several models",
    )
    p.add_argument(
        "--baseline-name",
        default=None,
        metavar="NAME",
        help=f"vendor name of --baseline-results rows (default {DEFAULT_BASELINE_NAME})",
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
        "--thresholds",
        default=None,
        metavar="PRESET|FILE.yaml",
        help=f"verdict thresholds: a preset ({'|'.join(PRESETS)}) or a YAML file (default {DEFAULT_PRESET}); "
        "the flags below override single bounds",
    )
    for flag, dest, keyword, text in THRESHOLD_FLAGS:
        kind, _, column = keyword.partition("_")
        default = next((limit for k, limit in defaults.get(column, ()) if k == kind), None)
        p.add_argument(
            flag,
            dest=dest,
            type=_threshold,
            default=argparse.SUPPRESS,
            metavar="X",
            help=f"{text} (avv default {'not checked' if default is None else f'{default:g}'}; 'off' disables)",
        )
    p.add_argument(
        "--ftr-band", type=_band, default=None, metavar="LOW:HIGH",
        help="judge finish_tool_calls_rate within this band on any samples (the minimax preset's 0.775:0.825 band "
        "is otherwise judged only on samples marked _sample_set: minimax)",
    )
    add_irf_metrics_option(p)
    p.add_argument(
        "--bootstrap", type=non_negative_int, default=DEFAULT_RESAMPLES, metavar="N",
        help="bootstrap resamples for the 95 %% intervals, noise tests and rank stability "
        f"(default {DEFAULT_RESAMPLES}; 0 = none)",
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=DEFAULT_SEED, metavar="S",
        help=f"seed of the bootstrap (default {DEFAULT_SEED}; the same seed reproduces every interval)",
    )
    p.add_argument(
        "--verdict", type=verdict_mode, default=VERDICT_MODES[0], metavar="|".join(VERDICT_MODES),
        help="interval (default): each bound PASSes when its whole confidence interval holds it, FAILs when the "
        "interval breaks it, else INCONCLUSIVE (defect checks FAIL on one occurrence); point: the peers' rule, point "
        "values against the bounds (reproduces K2VV / MiniMax tables; 'threshold' is its old name); statistical: as "
        "interval, with the bounds on agreement with the baseline replaced by tests against its repeat-to-repeat "
        "noise (needs ≥ 2 repeats)",
    )
    p.add_argument(
        "--confidence", type=confidence, default=DEFAULT_CONFIDENCE, metavar="P",
        help="confidence of the verdicts and of every interval (default 0.95; 95 also works)",
    )
    p.add_argument(
        "--arg-normalise", default="default", metavar="default|none|FILE.yaml",
        help="argument normalisers applied before args_match, args_f1 and gold_args_f1 compare values (dates, "
        "numbers, booleans, enum/ID case; docs/scoring.md): default = all, none = exact values, or a YAML file "
        "naming them (gold_args_accuracy always compares exact values)",
    )
    p.add_argument(
        "--irf-ties", choices=IRF_TIES, default="statistical",
        help="statistical (default): vendors whose 95 %% bootstrap interval of the difference contains 0 share "
        "their rank on that metric; irf_statistical orders the vendors and the published IRF stays a column; "
        "published: order by AVV's IRF alone (reproduces its tables)",
    )
    p.add_argument(
        "--strict", action="store_true",
        help="exit with status 7 when a vendor FAILs (or there is nothing to score) and 8 when one is INCONCLUSIVE "
        "(before: 1); a vendor whose every item failed exits 6 with or without it",
    )
    p.add_argument(
        "--allow-inconclusive", action="store_true",
        help="with --strict: an INCONCLUSIVE vendor does not change the exit status (only FAIL does)",
    )
    p.add_argument(
        "--prompt-tokens-tolerance", action="append", default=None, metavar="[MODEL=]X",
        help="billing honesty: the largest relative difference of a vendor's prompt tokens from the baseline's "
        "(median over the same items) that is not flagged, and conformance's token checks' bound (default 0.05; "
        "MODEL=X for one model, repeatable; a model's prompt_tokens_tolerance in the vendor config is the default)",
    )
    p.add_argument("--no-html", action="store_true", help="do not write report.html (its figures take ~2 s)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print the tables")




def _billing(args: argparse.Namespace) -> BillingTolerance | None:
    """``--prompt-tokens-tolerance``; None when not given (the vendor config's per model, else the default)."""
    given = getattr(args, "prompt_tokens_tolerance", None)
    return parse_tolerances(given) if given else None


def _stats(args: argparse.Namespace) -> StatsSettings:
    return StatsSettings(resamples=args.bootstrap, seed=args.seed, verdict=args.verdict, irf_ties=args.irf_ties,
                         level=args.confidence)


def score_request(args: argparse.Namespace, inputs: Sequence[str]) -> ScoreRequest:
    """The :class:`ScoreRequest` of ``avv-score``'s options (scoring and ``stress``)."""
    return ScoreRequest(
        tuple(inputs),
        baseline=baseline_arg(args.baseline),
        samples=args.samples,
        out_dir=args.out,
        thresholds=_thresholds(args),
        irf_metrics=args.irf_metrics,
        baseline_results=tuple(args.baseline_results),
        baseline_name=args.baseline_name,
        stats=_stats(args),
        html=not args.no_html,
        arg_normalise=resolve_arg_normalise(args.arg_normalise),
        billing=_billing(args),
        strict=args.strict,
        allow_inconclusive=args.allow_inconclusive,
    )


def baseline_arg(values: Sequence[str]) -> str | dict[str, str] | None:
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


def _thresholds(args: argparse.Namespace) -> Thresholds:
    """``--thresholds`` (a preset or YAML file), then each single-bound flag that was given."""
    base = resolve_thresholds(args.thresholds)
    given = [(flag, keyword, getattr(args, dest)) for flag, dest, keyword, _ in THRESHOLD_FLAGS if hasattr(args, dest)]
    out = base
    for _, keyword, value in given:
        kind, _, column = keyword.partition("_")
        out = out.with_bound(column, kind, value)
    if args.ftr_band is not None:  # an explicit band holds on any samples
        out = out.without("finish_tool_calls_rate").with_bound("finish_tool_calls_rate", "min", args.ftr_band[0])
        out = out.with_bound("finish_tool_calls_rate", "max", args.ftr_band[1])
    if given or args.ftr_band is not None:
        flags = " ".join([*(f"{flag} {'off' if value is None else f'{value:g}'}" for flag, _, value in given),
                          *([f"--ftr-band {args.ftr_band[0]:g}:{args.ftr_band[1]:g}"] if args.ftr_band else [])])
        out = out.named(f"{base.name} with {flags}")
    return out


def _report(result: ScoreResult, request: ScoreRequest, quiet: bool) -> int:
    """Print the tables, the decision and what was written; name each broken vendor; the exit status."""
    if not quiet:
        sys.stdout.write(render_tables(result))
        if result.outputs:
            folder = os.path.dirname(next(iter(result.outputs.values()))) or "."
            sys.stdout.write(
                f"wrote {', '.join(os.path.basename(p) for p in result.outputs.values())} to {folder}\n"
            )
    if result.excluded_rows:
        sys.stderr.write(f"{PROG}: warning: {len(result.excluded_rows)} row(s) left out, the rest scored:\n")
        sys.stderr.write("".join(f"  {terminal_text(line)}\n" for line in result.excluded_rows))
    for broken in broken_vendors(result):
        sys.stderr.write(f"{PROG}: {terminal_text(broken.line())}\n")
    if request.strict and result.scored and result.scores.empty:
        sys.stderr.write(f"{PROG}: --strict: no records to score, so no vendor passed\n")
        return int(ExitStatus.VERDICT_FAIL)
    return request.exit_status(result)


def main_score(argv: Sequence[str]) -> int:
    args = _score_parser().parse_args(argv)
    request = score_request(args, args.inputs)
    return _report(score(request), request, args.quiet)


def main_stress(argv: Sequence[str]) -> int:
    args = _stress_parser().parse_args(argv)
    if not os.path.isdir(args.run):
        raise InputError(f"{args.run}: no such run folder")
    request = score_request(args, [args.run])
    if args.no_score:
        return _report(stress_only(args.run, out_dir=args.out), request, args.quiet)
    if stress_tables(args.run) is None:  # checked before anything is written
        raise InputError(f"{args.run}: not a stress run (run.json mode is not 'stress')")
    return _report(score(request), request, args.quiet)


def main_trajectory(argv: Sequence[str]) -> int:
    """Print one agent task's trajectory step by step (calls, the answers played back, the final answer, the end)."""
    from avv_scoring.load import load_tools, read_inputs, resolve_inputs
    from avv_scoring.metrics.headline import annotate_tool_calls
    from avv_scoring.metrics.trajectories import TJ_END, TJ_STEPS, summarise
    from avv_scoring.report.trajectory import render_trajectory, trajectory_steps

    p = command_parser(f"{PROG} trajectory", "Show one agent task's trajectory of a run step by step: each "
                       "request's outcome, the calls made, the tool answers played back (matched / default / "
                       "injected_error), the final answer and how the task ended.")
    p.add_argument("run", metavar="RUN", help="a run folder or records.csv")
    p.add_argument("--vendor", required=True, help="vendor name")
    p.add_argument("--sample", required=True, help="sample id (data_index)")
    p.add_argument("--repeat", type=int, default=1, help="repeat (default 1)")
    p.add_argument("--samples", metavar="FILE", help="sample JSONL (default: from run.json), for the gold end")
    args = p.parse_args(argv)
    inputs = resolve_inputs([args.run])
    steps = trajectory_steps(read_inputs(inputs), args.vendor, args.sample, args.repeat)
    if steps.empty:
        raise InputError(f"{args.run}: no records of vendor {args.vendor!r}, sample {args.sample!r}, "
                         f"repeat {args.repeat}")
    try:
        source = load_tools(inputs, args.samples)
        tools, gold = source.tools_by_sample, source.gold_by_sample
    except InputError as exc:  # still show the steps; the end is judged without the gold end
        sys.stderr.write(f"{PROG}: warning: {terminal_text(exc, keep_newlines=True)}\n")
        tools, gold = None, None
    summary = summarise(annotate_tool_calls(steps, tools, gold))
    end = None
    if len(summary) and summary.iloc[0].get(TJ_END):
        end = f"{summary.iloc[0][TJ_END]} after {int(summary.iloc[0][TJ_STEPS])} step(s)"
    sys.stdout.write(render_trajectory(steps, end))
    return 0


def main_thresholds(argv: Sequence[str]) -> int:
    p = command_parser(f"{PROG} thresholds", "Print a threshold preset (or a thresholds YAML file, resolved) as "
                       "YAML that --thresholds FILE.yaml reads back.")
    p.add_argument("preset", nargs="?", default=DEFAULT_PRESET, metavar="PRESET|FILE.yaml",
                   help=f"a preset ({'|'.join(PRESETS)}; default {DEFAULT_PRESET}) or a thresholds YAML file")
    args = p.parse_args(argv)
    sys.stdout.write(thresholds_yaml(resolve_thresholds(args.preset)))
    return 0


#: A subcommand's entry point: argv after its name → exit status.
Command = Callable[[Sequence[str]], int]


def _export_needs_the_harness(argv: Sequence[str]) -> int:
    raise InputError("avv-score export rebuilds the requests with the harness: run the avv-score command")


def _history(argv: Sequence[str]) -> int:
    from avv_scoring.history.cli import main_history

    return main_history(argv)


def _trend_alias(argv: Sequence[str]) -> int:
    from avv_scoring.history.cli import main_trend

    print(f"{PROG}: note: '{PROG} trend' is now '{PROG} history trend' (the old spelling works until the next "
          "release)", file=sys.stderr)
    return main_trend(argv)


def _metrics_table(argv: Sequence[str]) -> int:
    command_parser(f"{PROG} metrics", "Print the registry's metric table (as in the docs).").parse_args(argv)
    sys.stdout.write(render_metric_table() + "\n")
    return 0


@dataclass(frozen=True)
class Subcommand:
    """One ``avv-score`` subcommand, declared once: ``--help`` lists it and :func:`main` dispatches to it."""

    name: str  # the word after avv-score
    summary: str  # one line for avv-score --help
    run: Command  # its entry point (argv after the name → exit status)
    aliases: tuple[str, ...] = ()  # old spellings still accepted (each kept for one release)


#: Every subcommand, in the order ``--help`` lists them. ``export`` is supplied by the ``avv-score`` console script
#: (:func:`avv_harness.cli.score_main`): it rebuilds the requests with the harness.
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("stress", "re-render a stress run: stress.csv, capacity.csv, the plots, report.md",
               lambda argv: main_stress(argv)),
    Subcommand("export", "write a run as K2-Vendor-Verifier / MiniMax-Provider-Verifier files",
               _export_needs_the_harness),
    Subcommand("trajectory", "show one agent task of a run, step by step", lambda argv: main_trajectory(argv)),
    Subcommand("irf", "add IRF to a ready per-vendor metrics table (CSV)", lambda argv: main_irf(argv)),
    Subcommand("metrics", "print the metric table of the registry (every scores.csv column)", _metrics_table),
    Subcommand("thresholds", "print a threshold preset as YAML, ready to copy and edit",
               lambda argv: main_thresholds(argv)),
    Subcommand("history", "the run history: history add RUN... | history trend | history show (--db PATH)",
               _history),
    Subcommand("trend", "old spelling of 'history trend' (kept for one release)", _trend_alias),
)


def subcommands_help() -> str:
    """The ``subcommands:`` block of ``avv-score --help``: each subcommand with its one line."""
    width = max(len(c.name) for c in SUBCOMMANDS)
    return "subcommands:\n" + "".join(f"  {c.name:<{width}}  {c.summary}\n" for c in SUBCOMMANDS)


def main(argv: Sequence[str] | None = None, commands: Mapping[str, Command] | None = None) -> int:
    """``avv-score``. ``commands`` supplies the entry points of subcommands that need more than scoring: the
    ``avv-score`` console script (:func:`avv_harness.cli.score_main`) gives ``export``, which rebuilds the requests
    with the harness."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with interrupt_on_signals():  # SIGTERM, like Ctrl-C, stops even a CPU-bound step, without a traceback
            return _dispatch(argv, commands or {})
    except Interrupted as exc:
        print(f"{PROG}: stopped by {exc.name}; the outputs being written may be incomplete: run it again",
              file=sys.stderr)
        return exc.exit_status


def _dispatch(argv: list[str], commands: Mapping[str, Command]) -> int:
    table = {name: command.run for command in SUBCOMMANDS for name in (command.name, *command.aliases)}
    table.update(commands)
    try:
        if argv and argv[0] in table:
            return table[argv[0]](argv[1:])
        if argv and not argv[0].startswith("-") and not os.path.exists(argv[0]) and did_you_mean(argv[0], table):
            raise InputError(f"{argv[0]}: no such run folder, records.csv or subcommand"
                             f"{did_you_mean(argv[0], table)}")
        return main_score(argv)
    except InputError as exc:
        print(f"{PROG}: error: {terminal_text(exc, keep_newlines=True)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
