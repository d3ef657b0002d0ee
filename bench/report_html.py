"""report.html's cost: the CPU time of ``render_html`` and of each section's HTML (its figures drawn) on a run.

    python bench/report_html.py                                   # a tiny Locust run it makes (8 samples × 4 vendors)
    python bench/report_html.py --demo                            # also the demo (400 samples × 4 vendors)
    python bench/report_html.py --run RUN_DIR                     # a run folder of yours (records.csv + run.json)
    python bench/report_html.py --before /tmp/before --rounds 3   # the same-run ratio against another checkout
    python bench/report_html.py --before ab6258d                  # a git revision: checked out into a temp worktree
    python bench/report_html.py --profile                         # cProfile's top 25 (cumulative) of one render

Every scoring that writes report.html (each Locust run at its end, ``avv-score``, the demo, the tutorials, the tests
that read the page) draws its figures with matplotlib: on small runs they cost several times the scoring itself.
The tiny run is real: headless Locust on the embedded simulator with the first 8 lines of samples/demo.jsonl
(``--avv-no-score``), made once into a temporary folder; ``--demo`` adds the whole demo file. Each checkout is timed
in a child process of its own (the checkout first on ``sys.path``): the run is scored once (``score_inputs``, as
``avv-score`` does, not timed), then ``render_html`` is called ``--repeats-timed`` times after a first call; printed
are the first call (what one ``avv-score`` process pays: matplotlib's import and font set-up included) and the best
(least) ``time.process_time`` of the others, for the whole page, for each section's body (its content and its
HTML with the figures, ``report.html._body``) and for the figures' PNG output alone (``format.png``, inclusive:
layout, draw, encoding). ``scoring`` is ``score_inputs`` alone, best of the same calls: what avv-score costs with
``--no-html``. With ``--before`` the checkouts alternate ``--rounds`` times; on a shared machine compare only the
ratios of one run.
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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TINY_SAMPLES = 8


# ------------------------------------------------------------------------------------------ the runs


def make_run(folder: Path, name: str, samples: Path | None) -> str:
    """A headless Locust run on the embedded simulator into ``folder/name`` (records only, not scored)."""
    command = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "vendors.py"), "--headless",
               "--avv-out", str(folder), "--avv-run-id", name, "--avv-no-score"]
    command += ["--avv-samples", str(samples)] if samples is not None else []
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    run = folder / name
    if not (run / "records.csv").is_file():
        raise SystemExit(f"the {name} run wrote no records (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return str(run)


def tiny_samples(folder: Path) -> Path:
    lines = (ROOT / "samples" / "demo.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path = folder / "tiny.jsonl"
    path.write_text("".join(lines[:TINY_SAMPLES]), encoding="utf-8")
    return path


def checkout(before: str, folder: Path) -> Path:
    """``before`` as a folder: itself when it is one, else a git revision checked out (detached) under ``folder``."""
    if Path(before).is_dir():
        return Path(before).resolve()
    tree = folder / f"before-{before}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), before], check=True,
                   capture_output=True)
    return tree


# ------------------------------------------------------------------------------------------ the child: one checkout


def load_checkout(tree: str) -> None:
    """Import the packages from ``tree`` (before any of them is imported)."""
    sys.path.insert(0, tree)
    import avv_scoring

    found = Path(avv_scoring.__file__).resolve()
    if Path(tree).resolve() not in found.parents:
        raise SystemExit(f"avv_scoring came from {found}, not from {tree}")


class PageClock:
    """Wraps report.html's ``_body`` (per section key) and ``format.png`` (wherever a section imported it) with a
    CPU clock (inclusive time per call, summed over a render)."""

    def __init__(self) -> None:
        from avv_scoring.report import format as formatting
        from avv_scoring.report import html as page
        from avv_scoring.report.section import html_sections

        # html_sections imports every section module, so that their ``png`` can be wrapped
        self.keys = [s.key for s in html_sections()]
        self.spent: dict[str, float] = {}
        body = page._body
        page._body = self._clocked(lambda args: f"section {args[0].key}", body)  # type: ignore[assignment]
        png = formatting.png
        clocked_png = self._clocked(lambda args: "figures: format.png", png)
        for name, module in list(sys.modules.items()):
            if name.startswith("avv_scoring.report") and getattr(module, "png", None) is png:
                module.png = clocked_png  # type: ignore[attr-defined]

    def _clocked(self, label: Callable[[tuple[Any, ...]], str], function: Callable[..., Any]) -> Callable[..., Any]:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                key = label(args)
                self.spent[key] = self.spent.get(key, 0.0) + time.process_time() - t0
        return clocked


def time_checkout(runs: dict[str, str], timed: int) -> dict[str, Any]:
    """Per run: the first render's CPU seconds and the best of ``timed`` more, per line; the checkout's path."""
    import avv_scoring
    from avv_scoring.entrypoints import score_inputs
    from avv_scoring.report.html import render_html

    clock = PageClock()
    out: dict[str, Any] = {"tree": str(Path(avv_scoring.__file__).parents[1]), "runs": {}}
    for name, run in runs.items():
        result = score_inputs([run])
        best: dict[str, float] = {}
        first: dict[str, float] = {}
        for call in range(timed + 1):
            gc.collect()
            clock.spent = {}
            t0 = time.process_time()
            render_html(result)
            spent = {"report.html": time.process_time() - t0, **clock.spent}
            t0 = time.process_time()
            score_inputs([run])
            spent["scoring (--no-html)"] = time.process_time() - t0
            if call == 0:
                first = spent
                continue
            for line, seconds in spent.items():
                best[line] = min(best.get(line, seconds), seconds)
        out["runs"][name] = {"best": best, "first": first["report.html"]}
    out["keys"] = clock.keys
    return out


def profile_checkout(runs: dict[str, str], top: int) -> str:
    """cProfile of one render_html per run (after a first one): the top functions by cumulative time."""
    from avv_scoring.entrypoints import score_inputs
    from avv_scoring.report.html import render_html

    text = io.StringIO()
    for name, run in runs.items():
        result = score_inputs([run])
        render_html(result)
        profiler = cProfile.Profile()
        profiler.enable()
        render_html(result)
        profiler.disable()
        text.write(f"--- {name}: render_html, top {top} by cumulative time\n")
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def run_child(tree: Path, runs: dict[str, str], timed: int) -> dict[str, Any]:
    """:func:`time_checkout` of ``tree`` in a child process (its own imports)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import benchlib  # here, in the parent only: the child must import nothing of this checkout's

    return benchlib.child_result(__file__, tree, runs, timed)


# ------------------------------------------------------------------------------------------ the parent


def merge_best(into: dict[str, Any], result: dict[str, Any]) -> None:
    """Keep the least time of every (run, line) over rounds, the first render's too."""
    into["keys"] = result["keys"]
    for run, found in result["runs"].items():
        kept = into.setdefault("runs", {}).setdefault(run, {"best": {}, "first": found["first"]})
        kept["first"] = min(kept["first"], found["first"])
        for line, seconds in found["best"].items():
            kept["best"][line] = min(kept["best"].get(line, seconds), seconds)


def lines_of(checkouts: list[dict[str, Any]], run: str) -> list[str]:
    """The table's lines: the page, its sections in report.html's order (those that cost anything), the figures."""
    keys: list[str] = []
    for found in checkouts:
        keys += [k for k in found["keys"] if k not in keys]
    drawn = {line for found in checkouts for line in found["runs"][run]["best"]}
    sections = [f"section {k}" for k in keys if f"section {k}" in drawn]
    return ["report.html", *sections, "figures: format.png", "scoring (--no-html)"]


def print_table(run: str, after: dict[str, Any], before: dict[str, Any] | None) -> None:
    print(f"\n{run}")
    header = f"{'CPU ms':<32} {'after':>9}" if before else f"{'CPU ms':<32} {'this':>9}"
    print(header + (f" {'before':>9} {'after/before':>13}" if before else ""))
    checkouts = [after] + ([before] if before else [])

    def row(label: str, a: float | None, b: float | None) -> None:
        line = f"{label:<32} {a * 1000 if a is not None else float('nan'):>9.1f}"
        if before:
            ratio = a / b if a is not None and b else float("nan")
            line += f" {b * 1000 if b is not None else float('nan'):>9.1f} {ratio:>13.2f}"
        print(line)

    for label in lines_of(checkouts, run):
        row(("  " if label.startswith("section") else "") + label, after["runs"][run]["best"].get(label),
            before["runs"][run]["best"].get(label) if before else None)
    row("report.html, first in process", after["runs"][run]["first"], before["runs"][run]["first"] if before else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], metavar="DIR",
                        help="time this run folder (records.csv + run.json) instead of the tiny run; repeatable")
    parser.add_argument("--demo", action="store_true", help="also make and time the demo run (400 samples × 4 "
                        "vendors on the simulator)")
    parser.add_argument("--repeats-timed", type=int, default=5, metavar="N", help="timed renders per run after the "
                        "first (best of N; default 5)")
    parser.add_argument("--before", metavar="CHECKOUT", help="also time this checkout (a folder, or a git revision "
                        "checked out into a temporary worktree), alternating with this one: after / before of one run")
    parser.add_argument("--rounds", type=int, default=1, help="with --before: alternate this many times (default 1)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions (cumulative) of one "
                        "render_html per run, this checkout, instead of the timings")
    parser.add_argument("--top", type=int, default=25, help="with --profile: how many functions (default 25)")
    parser.add_argument("--child", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--child-runs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        load_checkout(args.child)
        print(json.dumps(time_checkout(json.loads(args.child_runs), args.repeats_timed)))
        return
    print("$ python bench/report_html.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
    folder = Path(tempfile.mkdtemp(prefix="avv-report-html-"))
    before_tree: Path | None = None
    try:
        runs = {f"run {Path(r).name}": str(Path(r).resolve()) for r in args.run}
        if not args.run:
            runs[f"tiny: {TINY_SAMPLES} samples × 4 vendors"] = make_run(folder, "tiny", tiny_samples(folder))
        if args.demo:
            runs["demo: 400 samples × 4 vendors"] = make_run(folder, "demo", None)
        if args.profile:
            load_checkout(str(ROOT))
            print(profile_checkout(runs, args.top))
            return
        if args.before:
            before_tree = checkout(args.before, folder)
        trees = ([before_tree] if before_tree else []) + [ROOT]
        best: dict[Path, dict[str, Any]] = {}
        for _ in range(max(1, args.rounds)):
            for tree in trees:  # alternating: each round times every checkout once
                merge_best(best.setdefault(tree, {}), run_child(tree, runs, args.repeats_timed))
        print(f"best of {args.repeats_timed} renders × {max(1, args.rounds)} round(s) after a first one, CPU ms "
              f"(time.process_time); this checkout: {ROOT}" + (f"; before: {args.before}" if args.before else ""))
        for run in runs:
            print_table(run, best[ROOT], best[before_tree] if before_tree else None)
    finally:
        if before_tree is not None and before_tree.is_relative_to(folder):
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before_tree)],
                           capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
