"""The history's CPU on a small fixed history, and whether two checkouts write the same outputs from it.

    python bench/history_cost.py                                  # this checkout: CPU of add / regression / trend
    python bench/history_cost.py --before /tmp/before             # also another checkout; outputs compared
    python bench/history_cost.py --profile                        # cProfile's top 25 (tottime) of the trend

The history is ``--runs`` runs (default 6) of bench/score_scale.py's synthetic run (``--records`` records over
``--vendors`` vendors, run k built with seed k, run id ``r<k>``, started on day k), with two known changes from run
``--degraded-from`` (default 5) on: ``faithful`` answers 30 % of its tool calls with plain text (a trigger
agreement regression) and ``flaky``'s TTFT is 100 ms longer (a TTFT regression). The folders are built once and
every checkout reads the same ones, each in a child process of its own (the checkout first on ``sys.path``), and
does what the CLI does, in-process:

- **add**: ``avv-score history add`` of every run into a new database (:func:`add_run_folder`: score, then store);
- **regression**: the paired tests of :func:`compute_trend` (``outcomes`` and ``compare``, clocked inside it);
- **trend**: ``avv-score history trend --fail-on-regression`` on the whole history (exit 0: the last run keeps the
  changes) and on the history without its last run (exit 5), writing trend.md and trend.html.

Printed: the CPU seconds (``time.process_time``, best of ``--rounds``) of each, and with ``--before`` the same for
the other checkout and after / before. Compared between checkouts (``--before``): trend.md, trend.html (its
"Written by avv-score at ..." time stamp blanked), the terminal output and exit status of each trend command, and
every row of every table of the database (``runs.added_at``, the time of adding, left out). Exit status 1 when an
output differs. On a loaded machine compare only the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import io
import json
import os
import pstats
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAMP = re.compile(r"Written by avv-score at [^<]* UTC")


# ------------------------------------------------------------------------------------------ the fixed history


def build_history_runs(folder: Path, runs: int, records: int, vendors: int, degraded_from: int) -> list[str]:
    """Run folders r1 … r<runs> (records.csv, run.json) with the two known changes from ``degraded_from`` on."""
    sys.path.insert(0, str(ROOT / "bench"))
    import pandas as pd
    from score_scale import build_run  # the bench's own synthetic run

    out = []
    for k in range(1, runs + 1):
        (folder / f"r{k}").mkdir(parents=True, exist_ok=True)
        run = build_run(folder / f"r{k}", records, 1, vendors, seed=k)
        frame = pd.read_csv(run / "records.csv", dtype=str, keep_default_na=False)
        frame["run_id"] = f"r{k}"
        frame["started_at"] = f"2026-01-{k:02d}T03:00:00.000+00:00"
        if k >= degraded_from:
            calls = frame.index[(frame["vendor"] == "faithful") & (frame["finish_reason"] == "tool_calls")]
            text = calls[::3][: int(len(calls) * 0.3)]  # 30 % of its calls become a plain answer
            frame.loc[text, ["finish_reason", "tool_calls", "tool_call_count", "saw_tool_call_delta", "content"]] = \
                ["stop", "[]", "0", "False", "a short answer of a few words"]
            slow = (frame["vendor"] == "flaky") & (frame["ttft_ms"] != "")
            frame.loc[slow, "ttft_ms"] = (frame.loc[slow, "ttft_ms"].astype(float) + 100.0).map(repr)
        frame.to_csv(run / "records.csv", index=False)
        manifest = json.loads((run / "run.json").read_text())
        manifest.update(run_id=f"r{k}", started_at=f"2026-01-{k:02d}T03:00:00+00:00",
                        ended_at=f"2026-01-{k:02d}T03:05:00+00:00")
        (run / "run.json").write_text(json.dumps(manifest))
        out.append(str(run))
    return out


# ------------------------------------------------------------------------------------------ the child: one checkout


def load_checkout(tree: str) -> None:
    """Import the packages from ``tree`` (before any of them is imported)."""
    sys.path.insert(0, tree)
    import avv_scoring

    found = Path(avv_scoring.__file__).resolve()
    if Path(tree).resolve() not in found.parents:
        raise SystemExit(f"avv_scoring came from {found}, not from {tree}")


class Clock:
    """CPU seconds spent inside the functions wrapped with :meth:`wrap` (inclusive, not nested twice)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.depth = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            t0 = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.spent += time.process_time() - t0
        return clocked


def trend_command(argv: list[str]) -> tuple[int, str]:
    """``avv-score history trend ARGV`` in this process: exit status and what it printed (stdout, then stderr)."""
    from avv_core.errors import InputError
    from avv_scoring.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["history", "trend", *argv])
        except InputError as exc:  # as the CLI reports it
            status, _ = 2, err.write(f"{exc}\n")
    return status, out.getvalue() + "\n--- stderr\n" + err.getvalue()


def table_rows(db: Path) -> dict[str, list[list[Any]]]:
    """Every row of every table, sorted; ``runs.added_at`` (the time of adding) left out."""
    rows = {}
    with sqlite3.connect(db) as conn:
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "added_at"]
            found = conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            rows[table] = sorted((list(r) for r in found), key=repr)
    return rows


def run_checkout(runs: list[str], work: Path, profile: bool) -> dict[str, Any]:
    """Build the history from ``runs`` in ``work`` and run the trend commands; CPU per part and the outputs."""
    import avv_scoring.history.trend as trend_module
    from avv_scoring.history import open_history
    from avv_scoring.history.store import add_run_folders
    from avv_scoring.metrics.uncertainty import StatsSettings

    regression = Clock()
    trend_module.outcomes = regression.wrap(trend_module.outcomes)  # type: ignore[assignment]
    trend_module.compare = regression.wrap(trend_module.compare)  # type: ignore[assignment]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.chdir(work)  # paths relative to it: the commands print them, and each checkout has its own folder
    db, short = Path("history.sqlite"), Path("history-without-last.sqlite")
    t0 = time.process_time()
    with open_history(db) as conn:
        add_run_folders(conn, runs, StatsSettings(resamples=200, seed=1))
    add_s = time.process_time() - t0
    shutil.copy(db, short)
    with sqlite3.connect(short) as raw:
        last = raw.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        for table in ("items", "metrics", "vendors", "runs"):
            raw.execute(f"DELETE FROM {table} WHERE run_id = ?", (last,))
    outputs: dict[str, str] = {}
    profiler = cProfile.Profile() if profile else None
    t0 = time.process_time()
    for name, path in (("all", db), ("without-last", short)):
        out = Path(f"trend-{name}")
        if profiler:
            profiler.enable()
        status, printed = trend_command(["--db", str(path), "--out", str(out), "--fail-on-regression"])
        if profiler:
            profiler.disable()
        outputs[f"trend {name}: exit status and terminal output"] = f"exit {status}\n{printed}"
        outputs[f"trend {name}: trend.md"] = (out / "trend.md").read_text()
        outputs[f"trend {name}: trend.html"] = STAMP.sub("Written by avv-score at (time) UTC",
                                                         (out / "trend.html").read_text())
    trend_s = time.process_time() - t0
    outputs["database rows"] = json.dumps(table_rows(db), default=repr)
    result: dict[str, Any] = {"cpu": {"add": add_s, "regression": regression.spent, "trend": trend_s},
                              "outputs": outputs}
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        result["profile"] = text.getvalue()
    return result


def run_child(tree: Path, runs: list[str], work: Path, profile: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(tree), "--child-runs", json.dumps(runs), "--child-work",
           str(work)] + (["--profile"] if profile else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tree)
    if proc.returncode != 0:
        raise SystemExit(f"child for {tree} failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------------------------------ the parent


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--records", type=int, default=600, help="records per run (default 600)")
    parser.add_argument("--vendors", type=int, default=3, choices=range(3, 6), help="vendors (default 3)")
    parser.add_argument("--degraded-from", type=int, default=5, help="the run the two changes start at (default 5)")
    parser.add_argument("--rounds", type=int, default=1, help="times each checkout runs (best CPU; default 1)")
    parser.add_argument("--before", metavar="CHECKOUT", help="also run this checkout (`git worktree add /tmp/before "
                        "main`) and compare its outputs")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25 of the two trend commands")
    parser.add_argument("--keep", metavar="DIR", help="build the runs and the histories here and keep them")
    parser.add_argument("--child", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--child-runs", help=argparse.SUPPRESS)
    parser.add_argument("--child-work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        load_checkout(args.child)
        print(json.dumps(run_checkout(json.loads(args.child_runs), Path(args.child_work), args.profile)))
        return 0
    print("$ python bench/history_cost.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
    folder = Path(args.keep or tempfile.mkdtemp(prefix="avv-history-cost-"))
    try:
        runs = build_history_runs(folder / "runs", args.runs, args.records, args.vendors, args.degraded_from)
        trees = {"after": ROOT, **({"before": Path(args.before).resolve()} if args.before else {})}
        best: dict[str, dict[str, float]] = {}
        outputs: dict[str, dict[str, str]] = {}
        for round_ in range(max(1, args.rounds)):
            for name, tree in reversed(trees.items()):  # alternating: before, then after, each round
                found = run_child(tree, runs, folder / f"{name}-{round_}", args.profile and name == "after")
                best[name] = {k: min(v, best.get(name, {}).get(k, v)) for k, v in found["cpu"].items()}
                outputs[name] = found["outputs"]
                if found.get("profile"):
                    print(found["profile"])
        print(f"history: {args.runs} runs × {args.records} records ({args.vendors} vendors), changes from run "
              f"{args.degraded_from}; CPU s (time.process_time), best of {max(1, args.rounds)}")
        print(f"{'part':<12} {'after':>8}" + (f" {'before':>8} {'after/before':>13}" if args.before else ""))
        for part in best["after"]:
            line = f"{part:<12} {best['after'][part]:>8.2f}"
            if args.before:
                b = best["before"][part]
                line += f" {b:>8.2f} {best['after'][part] / b if b else float('nan'):>13.2f}"
            print(line)
        print(f"exit statuses: {', '.join(v.split(chr(10))[0] for k, v in outputs['after'].items() if 'exit' in k)}")
        if not args.before:
            return 0
        differ = [k for k in outputs["after"] if outputs["after"][k] != outputs["before"].get(k)]
        for key, text in outputs["after"].items():
            print(f"{'DIFFERS' if key in differ else 'same   '} {key} ({len(text):,} chars, sha256 {digest(text)})")
        print("outputs identical" if not differ else f"{len(differ)} output(s) differ")
        return 1 if differ else 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
