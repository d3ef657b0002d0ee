"""Scoring's fixed cost on small runs: the CPU time of ``score_frame`` and its top-level steps on a few shapes.

    python bench/score_small.py                                   # 32×4, 128×4, 1600×4, 400×1 records × vendors
    python bench/score_small.py --before /tmp/before --rounds 3    # the same-run ratio against another checkout
    python bench/score_small.py --profile --shapes 32x4            # cProfile's top 20 (tottime) of score_frame
    python bench/score_small.py --run RUN_DIR                      # also a real run folder (a Locust run)

Every Locust run scores its records in-process at its end, and many tests score small frames: on a few dozen
records the time is pandas' per-call overhead spread over every metric, not work per record. A shape ``RxV`` is R
records in all over V vendors (one model, the first vendor the baseline, ``--repeats`` repeats), built like
``bench/score_scale.py``'s run (real tool schemas, calls, flips, failures; :func:`score_scale.build_run`) into a
temporary run folder once, then read as ``avv-score`` reads it (``read_inputs``, ``load_tools``). Each checkout is
timed in a child process of its own (the checkout first on ``sys.path``): per shape one warm-up, then
``--repeats-timed`` calls of ``score_frame`` (the arguments ``avv-score`` passes, the collector thresholds it sets),
each on a fresh copy of the records; printed is the best (least) ``time.process_time`` of the calls, for the whole
call and for each top-level step (inclusive; sub-steps indented under their step). With ``--before`` the
checkouts alternate ``--rounds`` times and the table shows before, after and after / before; on a shared machine
compare only the ratios of one run. Time is CPU time of this process: other processes' load moves it less than
wall time, but caches and frequency still do.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHAPES = "32x4,128x4,1600x4,400x1"

#: score_frame's steps (names in avv_scoring.score) and their sub-steps, timed inclusively when the checkout has
#: them; a name a checkout lacks is skipped.
STEPS: tuple[tuple[str, str | None], ...] = (
    ("dedupe_latest", None),
    ("_sample_file_warnings", None),
    ("resolve_baselines", None),
    ("conformance_table", None),
    ("_without_probes", None),
    ("_annotated", None),
    ("annotate_tool_calls", "_annotated"),
    ("summarise_trajectories", "_annotated"),
    ("comparable_items", "_annotated"),
    ("_score_vendors", None),
    ("vendor_tables", "_score_vendors"),
    ("vendor_sums", "_score_vendors"),
    ("vendor_evidence", "_score_vendors"),
    ("repeat_summary", "_score_vendors"),
    ("per_tool", "_score_vendors"),
    ("disagreements", "_score_vendors"),
    ("trajectory_disagreements", "_score_vendors"),
    ("_add_model_metrics", None),
    ("billing_warnings", None),
    ("irf_scores", None),
    ("_judged_bounds", None),
    ("_decisions", None),
    ("decision_columns", None),
    ("_in_irf_order", None),
    ("_client_load", None),
    ("_in_score_order", None),
)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        records, _, vendors = part.strip().lower().partition("x")
        out.append((int(records), int(vendors or 1)))
    return out


def build_runs(folder: Path, shapes: list[tuple[int, int]], repeats: int) -> dict[str, str]:
    """Shape name → a run folder of that shape (made with bench/score_scale.py's builder)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from score_scale import build_run  # the bench's own synthetic run (not part of the packages)

    runs = {}
    for records, vendors in shapes:
        name = f"{records}x{vendors}"
        (folder / name).mkdir(parents=True)
        runs[name] = str(build_run(folder / name, records, repeats, vendors))
    return runs


# ------------------------------------------------------------------------------------------ the child: one checkout


def load_checkout(tree: str) -> None:
    """Import the packages from ``tree`` (before any of them is imported)."""
    sys.path.insert(0, tree)
    import avv_scoring

    found = Path(avv_scoring.__file__).resolve()
    if Path(tree).resolve() not in found.parents:
        raise SystemExit(f"avv_scoring came from {found}, not from {tree}")


class StepClock:
    """Wraps the step functions named in avv_scoring.score with a CPU clock (inclusive time per call)."""

    def __init__(self) -> None:
        import avv_scoring.score  # noqa: F401  (the package's ``score`` attribute is the function of that name)

        score_module = sys.modules["avv_scoring.score"]
        self.spent: dict[str, float] = {}
        self.present: list[tuple[str, str | None]] = []
        for name, parent in STEPS:
            function = getattr(score_module, name, None)
            if callable(function):
                setattr(score_module, name, self._clocked(name, function))
                self.present.append((name, parent))

    def _clocked(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.process_time() - t0
        return clocked


def scoring_call(run: str) -> Callable[[], Any]:
    """``score_frame`` on a copy of the run's records, with the arguments avv-score passes (no stress, no files)."""
    from avv_scoring.entrypoints import collect_rarely
    from avv_scoring.load import load_tools, read_inputs, resolve_inputs
    from avv_scoring.score import score_frame

    inputs = resolve_inputs([run])
    records = read_inputs(inputs, [])
    tools = load_tools(inputs, None)

    def call() -> Any:
        with collect_rarely():
            return score_frame(records.copy(), tools.tools_by_sample, gold_by_sample=tools.gold_by_sample,
                               sample_sets=tools.sample_sets, probes=tools.probes)
    return call


def time_checkout(runs: dict[str, str], timed: int) -> dict[str, Any]:
    """Per shape: the best CPU seconds of score_frame and of each step; the checkout's avv_scoring path."""
    import avv_scoring

    clock = StepClock()
    out: dict[str, Any] = {"tree": str(Path(avv_scoring.__file__).parents[1]), "shapes": {}}
    for name, run in runs.items():
        call = scoring_call(run)
        call()  # warm-up: lazy imports, caches
        best: dict[str, float] = {}
        for _ in range(timed):
            gc.collect()
            clock.spent = {}
            t0 = time.process_time()
            call()
            spent = {"score_frame": time.process_time() - t0, **clock.spent}
            for step, seconds in spent.items():
                best[step] = min(best.get(step, seconds), seconds)
        out["shapes"][name] = {"best": best, "steps": clock.present}
    return out


def profile_checkout(runs: dict[str, str], top: int) -> str:
    """cProfile of one score_frame call per shape (after a warm-up): the top functions by tottime."""
    text = io.StringIO()
    for name, run in runs.items():
        call = scoring_call(run)
        call()
        profiler = cProfile.Profile()
        profiler.enable()
        call()
        profiler.disable()
        text.write(f"--- {name}: score_frame, top {top} by tottime\n")
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def run_child(tree: Path, runs: dict[str, str], timed: int) -> dict[str, Any]:
    """:func:`time_checkout` of ``tree`` in a child process (its own imports)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import benchlib  # here, in the parent only: the child must import nothing of this checkout's

    return benchlib.child_result(__file__, tree, runs, timed)


# ------------------------------------------------------------------------------------------ the parent


def merge_best(into: dict[str, Any], result: dict[str, Any]) -> None:
    """Keep the least time of every (shape, step) over rounds."""
    for shape, found in result["shapes"].items():
        kept = into.setdefault(shape, {"best": {}, "steps": found["steps"]})
        for step, seconds in found["best"].items():
            kept["best"][step] = min(kept["best"].get(step, seconds), seconds)


def print_table(shape: str, after: dict[str, Any], before: dict[str, Any] | None) -> None:
    print(f"\n{shape} records × vendors" if "x" in shape else f"\n{shape}")
    header = f"{'step':<32} {'after ms':>9}" if before else f"{'step':<32} {'CPU ms':>9}"
    print(header + (f" {'before ms':>10} {'after/before':>13}" if before else ""))
    rows = [("score_frame", None), *after["steps"]]
    if before:  # steps only the before-tree has
        rows += [s for s in before["steps"] if s not in rows]
    for step, parent in rows:
        label = ("  " if parent else "") + step
        a = after["best"].get(step)
        line = f"{label:<32} {a * 1000 if a is not None else float('nan'):>9.1f}"
        if before:
            b = before["best"].get(step)
            ratio = a / b if a is not None and b else float("nan")
            line += f" {b * 1000 if b is not None else float('nan'):>10.1f} {ratio:>13.2f}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"records x vendors, comma-separated "
                        f"(default {DEFAULT_SHAPES})")
    parser.add_argument("--repeats", type=int, default=1, help="repeats of each sample in the built runs (default 1, "
                        "as a Locust run)")
    parser.add_argument("--run", action="append", default=[], metavar="DIR",
                        help="also time this run folder (records.csv + run.json), e.g. a Locust run; repeatable")
    parser.add_argument("--repeats-timed", type=int, default=5, metavar="N", help="timed calls per shape (best of N; "
                        "default 5)")
    parser.add_argument("--before", metavar="CHECKOUT", help="also time this checkout (e.g. `git worktree add "
                        "/tmp/before e31dbd8`), alternating with this one: after / before of one run")
    parser.add_argument("--rounds", type=int, default=1, help="with --before: alternate this many times (default 1)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions (tottime) of one "
                        "score_frame call per shape, this checkout, instead of the timings")
    parser.add_argument("--top", type=int, default=20, help="with --profile: how many functions (default 20)")
    parser.add_argument("--child", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--child-runs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        load_checkout(args.child)
        print(json.dumps(time_checkout(json.loads(args.child_runs), args.repeats_timed)))
        return
    print("$ python bench/score_small.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
    folder = Path(tempfile.mkdtemp(prefix="avv-small-"))
    try:
        runs = build_runs(folder, parse_shapes(args.shapes), args.repeats)
        runs.update({f"run {Path(r).name}": str(Path(r).resolve()) for r in args.run})
        if args.profile:
            load_checkout(str(ROOT))
            print(profile_checkout(runs, args.top))
            return
        trees = ([Path(args.before).resolve()] if args.before else []) + [ROOT]
        best: dict[Path, dict[str, Any]] = {}
        for _ in range(max(1, args.rounds)):
            for tree in trees:  # alternating: each round times every checkout once
                merge_best(best.setdefault(tree, {}), run_child(tree, runs, args.repeats_timed))
        print(f"best of {args.repeats_timed} calls × {max(1, args.rounds)} round(s), CPU ms "
              f"(time.process_time); this checkout: {ROOT}" + (f"; before: {args.before}" if args.before else ""))
        for shape in runs:
            print_table(shape, best[ROOT][shape], best[trees[0]][shape] if args.before else None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
