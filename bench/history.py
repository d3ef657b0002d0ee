"""The run history at scale: the time to add a big run to the history and to compute a trend over many runs.

    python bench/history.py --records 1000000 --repeats 10 --runs 30
    python bench/history.py --records 20000 --repeats 2 --runs 5        (a quick look)

The run is bench/score_scale.py's synthetic run (``--vendors`` vendors, the first the baseline; flips, other
calls, failures). Timed, in this process: scoring it as ``avv-score history add`` does (``score_inputs``, no
outputs written: the harness's ``--avv-history`` skips this, it stores the result it has just scored), adding the
scored run to a new history database (``add_result``: one transaction, every registry metric and one row per
item), then the history is filled up to ``--runs`` runs by copying that run in SQL (each copy with 2 % of its
items' trigger decisions flipped and TTFT jittered by ±5 %, so the tests have work to do; not timed) and
``compute_trend`` over all of them (the default metrics; every run's paired tests against the previous one,
``--trend-bootstrap`` resamples) is timed. Printed: the three times, the database size and the peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from score_scale import VENDORS, build_run  # noqa: E402

from avv_core.manifest import read_manifest  # noqa: E402
from avv_scoring.entrypoints import score_inputs  # noqa: E402
from avv_scoring.history import TrendOptions, add_result, compute_trend, connect  # noqa: E402
from avv_scoring.history.regression import RESAMPLES  # noqa: E402
from avv_scoring.metrics.uncertainty import StatsSettings  # noqa: E402


def copy_run(conn: sqlite3.Connection, source: str, run_id: str, day: int) -> None:
    """Another run in the history: ``source``'s rows under ``run_id``, started ``day`` days later, 2 % of the
    trigger decisions flipped and TTFT jittered by ±5 % (SQLite's random(), so each copy differs)."""
    with conn:
        conn.execute("INSERT INTO runs SELECT ?, datetime(started_at, ?), datetime(ended_at, ?), added_at, mode, "
                     "completed, stop_reason, config_identity, config_sha256, samples_sha256, sample_ids_sha256, "
                     "samples_count, harness_version, thresholds, verdict_mode, bootstrap, seed, records, source "
                     "FROM runs WHERE run_id = ?", (run_id, f"+{day} days", f"+{day} days", source))
        conn.execute("INSERT INTO vendors SELECT ?, model, vendor, model_id, endpoint, url, is_baseline, baseline, "
                     "verdict, verdict_reasons, irf FROM vendors WHERE run_id = ?", (run_id, source))
        conn.execute("INSERT INTO metrics SELECT ?, model, vendor, metric, value, text, ci_low, ci_high "
                     "FROM metrics WHERE run_id = ?", (run_id, source))
        conn.execute("INSERT INTO items SELECT ?, model, vendor, sample_id, repeat, success, "
                     "CASE WHEN abs(random()) % 50 = 0 AND success = 1 THEN 1 - called ELSE called END, tools_sig, "
                     "calls_sig, schema_valid, ttft_ms * (0.95 + (abs(random()) % 1000) / 10000.0), tps "
                     "FROM items WHERE run_id = ?", (run_id, source))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--vendors", type=int, default=3, choices=range(1, len(VENDORS) + 1))
    parser.add_argument("--runs", type=int, default=30, help="runs in the history for the trend (default 30)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="resamples of the stored intervals (default 1000, as avv-score)")
    parser.add_argument("--trend-bootstrap", type=int, default=RESAMPLES, metavar="N",
                        help=f"resamples of the between-run tests (default {RESAMPLES}, as avv-score trend)")
    parser.add_argument("--keep", metavar="DIR", help="build the run and the database here and keep them")
    args = parser.parse_args()
    print("$ python bench/history.py " + " ".join(sys.argv[1:]), flush=True)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="avv-history-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    run = build_run(folder, args.records, args.repeats, args.vendors)
    db = folder / "history.sqlite"
    if db.exists():
        db.unlink()

    started = time.perf_counter()
    result = score_inputs([run], stats=StatsSettings(resamples=args.bootstrap))
    scored = time.perf_counter() - started
    conn = connect(db)
    started = time.perf_counter()
    added = add_result(conn, result, read_manifest(run / "run.json"), str(run))
    add_s = time.perf_counter() - started
    del result
    print(f"records: {args.records:,} ({args.vendors} vendors, {args.repeats} repeats); items stored: {added.items:,}")
    print(f"score the run (avv-score history add; --avv-history reuses the run's own scores): {scored:.2f} s")
    print(f"add the scored run to the history: {add_s:.2f} s")

    for k in range(2, args.runs + 1):
        copy_run(conn, added.run_id, f"{added.run_id}-{k:03d}", k - 1)
    started = time.perf_counter()
    trend = compute_trend(conn, TrendOptions(resamples=args.trend_bootstrap))
    trend_s = time.perf_counter() - started
    conn.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"trend over {len(trend.runs)} runs ({len(trend.changes):,} tests, {len(trend.flagged())} flagged): "
          f"{trend_s:.2f} s")
    print(f"database: {os.path.getsize(db) / 1e6:.1f} MB; peak RSS {peak_mb:.0f} MB; folder {folder}")


if __name__ == "__main__":
    main()
