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
"""

from __future__ import annotations

import argparse
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


def compare(a: Path, b: Path) -> list[str]:
    """The outputs that differ between two scorings (an empty list: byte-identical)."""
    differ = []
    for name in RUNS:
        for output in OUTPUTS:
            left, right = a / name / output, b / name / output
            if not left.exists() and not right.exists():
                continue
            if not (left.exists() and right.exists()):
                differ.append(f"{name}/{output}: only in {'the first' if left.exists() else 'the second'}")
            elif _masked(left) != _masked(right):
                differ.append(f"{name}/{output}: differs")
    return differ


def _masked(path: Path) -> bytes:
    data = path.read_bytes()
    return _FOOTER.sub(b"<p class=meta>Written by avv-score</p>", data) if path.suffix == ".html" else data


def check(before: str, work: Path) -> int:
    runs = work / "runs"
    make(runs)
    old_code = work / "before-code"
    if not old_code.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_code), before], check=True,
                       capture_output=True)
    score(runs, work / "before", old_code)
    score(runs, work / "after", ROOT)
    differ = compare(work / "before", work / "after")
    counted = sum(1 for name in RUNS for o in OUTPUTS if (work / "after" / name / o).exists())
    if differ or not counted:
        print("outputs differ:\n  " + "\n  ".join(differ or ["nothing was scored"]))
        return 1
    print(f"{counted} outputs of {len(RUNS)} runs byte-identical between {before} and this checkout")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check")
    p.add_argument("--before", required=True, help="git revision whose scoring is the reference")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "avv-same-outputs")
    p = sub.add_parser("make")
    p.add_argument("runs", type=Path)
    p = sub.add_parser("score")
    p.add_argument("runs", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--code", type=Path, default=ROOT)
    p = sub.add_parser("compare")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "check":
        return check(args.before, args.work)
    if args.command == "make":
        make(args.runs)
    elif args.command == "score":
        score(args.runs, args.out, args.code)
    else:
        differ = compare(args.a, args.b)
        print("\n".join(differ) or "identical")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
