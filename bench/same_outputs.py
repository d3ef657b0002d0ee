"""Same records, same outputs: score the demo, BFCL, agent, dialects and stress runs with two versions of the code
and compare every output byte for byte (scores.csv, scores_by_repeat.csv, scores.json, disagreements.csv,
report.md, report.html, stress.csv, capacity.csv, the stress plots). A restructuring must not change a byte.

    python bench/same_outputs.py check --before REV [--work DIR]   # everything below, REV = a git revision
    python bench/same_outputs.py make DIR                           # the five runs (records), once
    python bench/same_outputs.py score RUNS OUT [--code CHECKOUT]   # score every run of RUNS into OUT
    python bench/same_outputs.py compare OUT_A OUT_B                # byte-compare two scorings

The records are made once (with this checkout) and scored by both versions: timings differ from run to run,
scores of the same records must not. The one line that legitimately differs — report.html's footer with the
time it was written and how long it took — is masked before comparing. Exit status 0 = identical.

``--columns-may-move`` (for a change that only reorders columns, such as scores.csv's interval columns next to
their metric): CSV files are compared as tables (the same columns, each with the same cells, in any order) and JSON
files as parsed values (a ``columns`` list in any order); every other file still byte for byte.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILE = ROOT / "locustfiles" / "vendors.py"

#: name → the options of its run (on the embedded simulator; each bounded and stopping by itself).
RUNS: dict[str, list[str]] = {
    "demo": [],
    "bfcl": ["--avv-samples", str(ROOT / "samples" / "bfcl-mini.jsonl")],
    "agent": ["--avv-samples", str(ROOT / "samples" / "agent-demo.jsonl")],
    "dialects": ["--avv-config", str(ROOT / "configs" / "dialects-demo.yaml")],
    "stress": ["--avv-config", str(ROOT / "configs" / "stress-demo.yaml"), "--avv-mode", "stress",
               "--avv-stress-levels", "1,2,4,8", "--avv-stress-step-s", "3", "--avv-slo-ttft-p95-ms", "500"],
}
OUTPUTS = ("scores.csv", "scores_by_repeat.csv", "scores.json", "disagreements.csv", "report.md", "report.html",
           "stress.csv", "capacity.csv", "stress_ttft_p95.png", "stress_tokens_per_s.png")
#: report.html's footer: when it was written and how long it took.
_FOOTER = re.compile(rb"<p class=meta>Written by avv-score at [^<]*</p>")


def make(runs_dir: Path) -> None:
    runs_dir.mkdir(parents=True, exist_ok=True)
    for name, extra in RUNS.items():
        if (runs_dir / name / "records.csv").is_file():
            continue
        command = ["locust", "-f", str(LOCUSTFILE), "--headless", "--avv-out", str(runs_dir), "--avv-run-id", name,
                   "--avv-no-score", *extra]
        print(f"run {name}: {' '.join(command[3:])}", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        if not (runs_dir / name / "records.csv").is_file():
            sys.exit(f"run {name} wrote no records (exit {done.returncode}):\n{done.stderr[-2000:]}")


def score(runs_dir: Path, out_dir: Path, code: Path = ROOT) -> None:
    """Score each run of ``runs_dir`` with the code of checkout ``code`` into ``out_dir/<run>/``."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    for name in RUNS:
        target = out_dir / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        command = [sys.executable, "-c", "import sys; from avv_scoring.cli import main; sys.exit(main())",
                   str(runs_dir / name), "--out", str(target), "-q"]
        done = subprocess.run(command, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True,
                              timeout=900)
        if not (target / "report.md").is_file():
            sys.exit(f"scoring {name} with {code} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def compare(a: Path, b: Path, columns_may_move: bool = False) -> list[str]:
    """The outputs that differ between two scorings (an empty list: byte-identical; with ``columns_may_move``, CSV
    and JSON outputs the same up to the order of their columns)."""
    differ = []
    for name in RUNS:
        for output in OUTPUTS:
            left, right = a / name / output, b / name / output
            if not left.exists() and not right.exists():
                continue
            if not (left.exists() and right.exists()):
                differ.append(f"{name}/{output}: only in {'the first' if left.exists() else 'the second'}")
            elif _masked(left) == _masked(right):
                continue
            elif columns_may_move and left.suffix in (".csv", ".json") and _unordered(left) == _unordered(right):
                differ_only_in_order.append(f"{name}/{output}")
            else:
                differ.append(f"{name}/{output}: differs")
    return differ


#: Outputs that :func:`compare` found equal only up to the order of their columns (``--columns-may-move``).
differ_only_in_order: list[str] = []


def _unordered(path: Path) -> object:
    """A CSV as {column: its cells}; a JSON file parsed, with its ``columns`` lists sorted."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            return {}
        return {column: [row[i] for row in rows[1:]] for i, column in enumerate(rows[0])}

    def sort_columns(value: object) -> object:
        if isinstance(value, dict):
            return {k: sorted(v) if k == "columns" and isinstance(v, list) else sort_columns(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [sort_columns(v) for v in value]
        return value

    return sort_columns(json.loads(text))


def _masked(path: Path) -> bytes:
    data = path.read_bytes()
    return _FOOTER.sub(b"<p class=meta>Written by avv-score</p>", data) if path.suffix == ".html" else data


def check(before: str, work: Path, columns_may_move: bool = False) -> int:
    runs = work / "runs"
    make(runs)
    old_code = work / "before-code"
    if not old_code.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_code), before], check=True,
                       capture_output=True)
    score(runs, work / "before", old_code)
    score(runs, work / "after", ROOT)
    differ = compare(work / "before", work / "after", columns_may_move)
    counted = sum(1 for name in RUNS for o in OUTPUTS if (work / "after" / name / o).exists())
    if differ or not counted:
        print("outputs differ:\n  " + "\n  ".join(differ or ["nothing was scored"]))
        return 1
    moved = len(differ_only_in_order)
    print(f"{counted} outputs of {len(RUNS)} runs the same between {before} and this checkout: "
          f"{counted - moved} byte-identical" + (f", {moved} only in the order of their columns "
                                                  f"({', '.join(differ_only_in_order)})" if moved else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check")
    p.add_argument("--before", required=True, help="git revision whose scoring is the reference")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "avv-same-outputs")
    p.add_argument("--columns-may-move", action="store_true",
                   help="CSV and JSON outputs may differ in the order of their columns only")
    p = sub.add_parser("make")
    p.add_argument("runs", type=Path)
    p = sub.add_parser("score")
    p.add_argument("runs", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--code", type=Path, default=ROOT)
    p = sub.add_parser("compare")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--columns-may-move", action="store_true",
                   help="CSV and JSON outputs may differ in the order of their columns only")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check(args.before, args.work, args.columns_may_move)
    if args.command == "make":
        make(args.runs)
    elif args.command == "score":
        score(args.runs, args.out, args.code)
    else:
        differ = compare(args.a, args.b, args.columns_may_move)
        moved = (f" (up to the order of the columns of {', '.join(differ_only_in_order)})" if differ_only_in_order
                 else "")
        print("\n".join(differ) or f"identical{moved}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
