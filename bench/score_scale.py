"""Scoring at scale: build a realistic synthetic run and time ``avv-score`` against pandas' own read_csv.

    python bench/score_scale.py --records 1000000 --repeats 10
    python bench/score_scale.py --records 100000 --repeats 100 --vendors 3

The run folder holds records.csv (several vendors, many samples, repeats, tool calls — the first vendor is the
baseline; the others flip the trigger on 5 % · v of the items, make other calls on 8 % · v (some with invalid
arguments) and fail 1 % · v; the pool of calls per sample template holds a few invalid ones, so the baseline
too is sometimes invalid), run.json and the sample file (the demo samples cycled under new ids, so every
record's tools are real schemas). Timed, each in a fresh process (one core: ``taskset -c 0`` when available):
``pandas.read_csv`` of records.csv and ``avv-score RUN`` (validation, every metric, reports). Printed: the wall
and CPU seconds of both, their ratios (best of ``--rounds``), and the peak RSS. ``--before CHECKOUT`` also times
another checkout's avv-score on the same run, alternating with this one (on a shared machine compare only
figures of one run: the machine's load moves them all). Then the bootstrap's own time (``--bootstrap N``
resamples, default 1000, as avv-score runs it): the records read, de-duplicated and annotated as ``avv-score``
does, then per model the reduction to per-sample sums (:func:`avv_scoring.metrics.uncertainty.unit_sums`) and the
resampling (:func:`avv_scoring.metrics.uncertainty.bootstrap`: intervals, noise tests, IRF ranks), each timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avv_core.records import COLUMN_NAMES, encode_rows  # noqa: E402
from avv_core.samples import load_samples  # noqa: E402
from avv_sim import schema_args  # noqa: E402

DEMO = ROOT / "avv_harness" / "data" / "demo.jsonl"
VENDORS = ("reference", "faithful", "flaky", "reseller", "cheap")


def call_pool(tools: list[dict], seed: str, n_valid: int = 12, n_invalid: int = 3) -> list[tuple[str, str]]:
    """(name, arguments) pool for one sample template: mostly valid, a few broken."""
    pool = []
    for t, tool in enumerate(tools):
        fn = tool.get("function") or {}
        schema = fn.get("parameters") or {}
        for i in range(n_valid):
            pool.append((fn["name"], schema_args.dumps_arguments(schema_args.generate(schema, f"{seed}:{t}:{i}"))))
        for i in range(n_invalid):
            args = schema_args.generate(schema, f"{seed}:{t}:bad{i}")
            text, _ = schema_args.break_arguments(args, schema, schema_args.BREAK_KINDS[i % 3])
            pool.append((fn["name"], text))
    return pool


def build_run(folder: Path, n_records: int, repeats: int, n_vendors: int, seed: int = 7) -> Path:
    """Write <folder>/run (records.csv, run.json) and <folder>/samples.jsonl; return the run folder."""
    rng = random.Random(seed)
    demo = load_samples(DEMO)
    templates = [s for s in demo.samples if s.tools] or demo.samples
    vendors = VENDORS[:n_vendors]
    n_samples = math.ceil(n_records / (len(vendors) * repeats))
    samples_path = folder / "samples.jsonl"
    with open(samples_path, "w", encoding="utf-8") as fh:
        for i in range(n_samples):
            body = dict(templates[i % len(templates)].body)
            fh.write(json.dumps({"data_index": i + 1, **body}, ensure_ascii=False) + "\n")
    pools = [call_pool(t.tools, f"t{j}") if t.tools else [] for j, t in enumerate(templates)]
    run = folder / "run"
    run.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(run / "records.csv", "wb") as out:
        out.write((",".join(COLUMN_NAMES) + "\n").encode())
        batch = []
        for rep in range(1, repeats + 1):
            for i in range(n_samples):
                pool = pools[i % len(templates)]
                reference_calls = (i * 2654435761 + rep) % 10 < 6  # the reference calls a tool on 60 %
                # the reference's calls for this (sample, repeat); other vendors mostly make the same ones
                picks = [(i * 7 + rep * 3 + k) % max(1, len(pool)) for k in range(2 if (i + rep) % 7 == 0 else 1)]
                for v, vendor in enumerate(vendors):
                    if written >= n_records:
                        break
                    written += 1
                    flip = v > 0 and rng.random() < 0.05 * v
                    calls = reference_calls != flip and bool(pool)
                    ok = rng.random() > 0.01 * v
                    deviate = v > 0 and rng.random() < 0.08 * v  # other arguments (some of them invalid)
                    chosen = [pool[rng.randrange(len(pool)) if deviate else p] for p in picks] if pool else []
                    tool_calls = [{"id": f"call_{k}", "name": n, "arguments": a} for k, (n, a) in enumerate(chosen)]
                    batch.append({
                        "run_id": "scale", "model": "m", "vendor": vendor, "is_baseline": v == 0,
                        "sample_id": str(i + 1), "repeat": rep, "worker": "bench:1",
                        "started_at": "2026-11-26T00:00:00.000+00:00", "t0_monotonic": 1000.0 + written / 1000,
                        "status": "success" if ok else "failed", "error_kind": None if ok else "http_5xx",
                        "http_status": 200 if ok else 503, "attempts": 1 if ok else 4,
                        "ttft_ms": 120.0 + rng.random() * 80 if ok else None,
                        "latency_ms": 600.0 + rng.random() * 400, "decode_ms": 400.0,
                        "prompt_tokens": 1200, "completion_tokens": 48, "total_tokens": 1248,
                        "usage_reported": True, "tps": 110.0 + rng.random() * 30 if ok else None,
                        "finish_reason": ("tool_calls" if calls else "stop") if ok else None,
                        "saw_tool_call_delta": calls and ok, "tool_calls": tool_calls if calls and ok else [],
                        "tool_call_count": len(tool_calls) if calls and ok else 0,
                        "content": "" if calls else "a short answer of a few words", "reasoning_chars": 0,
                        "client_lag_ms": rng.random(), "client_cpu_pct": 40.0, "stale_conn_retries": 0,
                    })
                    if len(batch) >= 20000:
                        out.write(encode_rows(batch))
                        batch = []
        out.write(encode_rows(batch))
    sha = hashlib.sha256(samples_path.read_bytes()).hexdigest()
    (run / "run.json").write_text(json.dumps({
        "run_id": "scale", "mode": "verify", "completed": True,
        "samples": {"path": str(samples_path), "sha256": sha, "count": n_samples},
    }))
    return run


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of a child process (pinned to one core when
    taskset exists). The peak is read with ``/usr/bin/time`` when it exists: ``RUSAGE_CHILDREN``'s maximum is
    over every child so far, so a second, smaller child would show the first one's peak."""
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    report = None
    if os.path.exists("/usr/bin/time"):
        report = tempfile.NamedTemporaryFile(prefix="avv-scale-time-", delete=False).name
        cmd = ["/usr/bin/time", "-o", report, "-f", "%M", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if report is not None:
        peak_kb = float(Path(report).read_text().split()[-1])
        os.unlink(report)
    else:
        peak_kb = max(after.ru_maxrss, before.ru_maxrss)
    return wall, cpu, peak_kb / 1024.0


def time_bootstrap(run: Path, resamples: int) -> None:
    """Print the bootstrap's own time on a run folder (run in a child process by :func:`main`)."""
    from avv_scoring.baseline_choice import resolve_baselines
    from avv_scoring.load import dedupe_latest, load_tools, read_inputs, resolve_inputs
    from avv_scoring.metrics.headline import annotate_tool_calls
    from avv_scoring.metrics.irf import resolve_irf_metrics
    from avv_scoring.metrics.uncertainty import ModelTable, StatsSettings, bootstrap, unit_sums

    inputs = resolve_inputs([str(run)])
    records = dedupe_latest(read_inputs(inputs))
    records = annotate_tool_calls(records, load_tools(inputs, None).tools_by_sample)
    settings, irf = StatsSettings(resamples=resamples), resolve_irf_metrics()
    sums_s = boot_s = 0.0
    for model, baseline in resolve_baselines(records).items():
        rows = records[records["model"].astype(str) == model]
        vendors = list(dict.fromkeys(rows["vendor"].astype(str)))
        table = ModelTable(model, baseline, rows, {v: {} for v in vendors}, settings, irf)
        t0 = time.perf_counter()
        sums = unit_sums(table)
        t1 = time.perf_counter()
        bootstrap(sums, settings, irf)  # every default IRF input has a resampling formula
        t2 = time.perf_counter()
        sums_s, boot_s = sums_s + t1 - t0, boot_s + t2 - t1
        print(f"bootstrap {model}: {len(rows)} records, {len(sums.units)} samples, {len(vendors)} vendors")
    print(f"{'bootstrap: unit sums':<22} {sums_s:>8.2f}")
    print(f"{f'bootstrap: {resamples} resamples':<22} {boot_s:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--vendors", type=int, default=3, choices=range(1, len(VENDORS) + 1))
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="resamples (default 1000)")
    parser.add_argument("--keep", metavar="DIR", help="build the run here and keep it (an existing run there is "
                        "reused when it has the same records × repeats × vendors)")
    parser.add_argument("--before", metavar="CHECKOUT", action="append", default=[],
                        help="also time avv-score of this checkout (a git worktree of another revision; repeatable), "
                        "on the same run, alternating with this one: the same-run before/after ratio")
    parser.add_argument("--rounds", type=int, default=1, help="time each avv-score this many times (default 1)")
    parser.add_argument("--time-bootstrap", metavar="RUN", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.time_bootstrap:
        time_bootstrap(Path(args.time_bootstrap), args.bootstrap)
        return
    print("$ python bench/score_scale.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
    folder = Path(args.keep or tempfile.mkdtemp(prefix="avv-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    shape = f"{args.records} {args.repeats} {args.vendors}"
    marker = folder / "built.txt"
    if marker.is_file() and marker.read_text() == shape and (folder / "run" / "records.csv").is_file():
        run = folder / "run"
    else:
        run = build_run(folder, args.records, args.repeats, args.vendors)
        marker.write_text(shape)
    size = (run / "records.csv").stat().st_size / 1e6
    print(f"built {args.records} records ({size:.0f} MB) in {time.perf_counter() - t0:.1f} s: {run}")
    rows: list[tuple[str, float, float, float]] = []
    reads: list[tuple[float, float]] = []
    scores: dict[str, list[tuple[float, float]]] = {}
    codes = [(f"before {i + 1}" if len(args.before) > 1 else "before", Path(c).resolve()) for i, c in
             enumerate(args.before)] + [("avv-score", ROOT)]
    for _ in range(max(1, args.rounds)):
        wall, cpu, mb = timed([sys.executable, "-c", f"import pandas; pandas.read_csv({str(run / 'records.csv')!r})"])
        rows.append(("pandas.read_csv", wall, cpu, mb))
        reads.append((wall, cpu))
        for name, code in codes:  # alternating: each round times every checkout once
            env = {**os.environ, "PYTHONPATH": str(code)}
            wall, cpu, mb = timed([sys.executable, "-m", "avv_scoring.cli", str(run), "--out",
                                   str(folder / f"scores-{code.name}"), "-q", "--bootstrap", str(args.bootstrap)],
                                  env=env, cwd=code)  # python -m imports from the working folder first
            rows.append((name if code == ROOT or not args.before else f"{name} ({code})", wall, cpu, mb))
            scores.setdefault(name, []).append((wall, cpu))
    print(f"{'what':<22} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12}")
    for name, wall, cpu, mb in rows:
        print(f"{name:<22} {wall:>8.1f} {cpu:>8.1f} {mb:>12.0f}")
    read_wall, read_cpu = min(w for w, _ in reads), min(c for _, c in reads)
    for name, times in scores.items():  # best of the rounds: the least disturbed by other work
        wall, cpu = min(w for w, _ in times), min(c for _, c in times)
        print(f"ratio {name} / read_csv = {wall / read_wall:.1f} (wall), {cpu / read_cpu:.1f} (CPU)")
    child = subprocess.run(
        ["taskset", "-c", "0"] * bool(shutil.which("taskset"))
        + [sys.executable, __file__, "--time-bootstrap", str(run), "--bootstrap", str(args.bootstrap)],
        capture_output=True, text=True)
    if child.returncode != 0:
        raise SystemExit(f"bootstrap timing failed:\n{child.stderr[-3000:]}")
    sys.stdout.write(child.stdout)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
