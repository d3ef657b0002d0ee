"""One master's ceiling: how many records/s a Locust master takes in from real workers (issue 27).

For each offered rate R (records/s) it starts a real headless Locust master and ``--workers`` real worker
processes on loopback with ``bench/ingest_locustfile.py``: the real plugin and item protocol, but each worker
user replays a canned record (~1 KB of CSV) instead of calling a vendor — ask for an item, wait ``--answer-s``
(the answer's duration), send the record. Users = R × answer-s (concurrent streams), split over two vendors and
the workers; items = R × ``--duration-s``. The master does its whole job: checks each record, the ledger,
records.csv and (unless ``--no-live-board``) the live board of a watched run (``--avv-metrics-port``: the board
that feeds the web UI and /avv/metrics, re-scoring the rows so far in a thread); no scoring at the end.

Printed per rate (the steady window = first to last row written):

- ``kept/s``: rows written / window; ``offered/s``: R. The master keeps up while kept/s ≈ R.
- ``CPU µs/rec``: the master process's CPU time (user + system, all threads) in the window / rows.
- ``send→row p50/p99``: from a worker's send (``t0_monotonic`` stamped just before ``avv_record``) to the row
  written on the master (its record hook), ms.
- ``hand-out p50/p99``: a worker's ``avv_want`` → ``avv_items`` (only asks that found the inbox empty), ms.
- ``RSS MB/100k``: growth of the master's resident memory per 100,000 rows over the second half of the window
  (the first half holds one-off growth: the imports of the first scoring). The live board keeps up to
  ``--avv-live-rows`` rows in memory, as records.csv holds them.
- ``workers CPU%`` (all workers, 100 = one core) and ``empty asks`` (a worker user's ask that came back without
  an item: it then sleeps 0.25 s), to tell a master limit from a worker one.

    python bench/master_ingest.py --rates 500,1000,2000 --workers 2 --answer-s 1 --duration-s 10
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import benchlib as bl
import psutil

HERE = Path(__file__).resolve().parent
LOCUSTFILE = HERE / "ingest_locustfile.py"
VENDORS = ("ref", "other")
N_SAMPLES = 200


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="500,1000,2000", help="Offered records/s, comma-separated (one run each).")
    p.add_argument("--workers", type=int, default=2, help="Worker processes.")
    p.add_argument("--answer-s", type=float, default=1.0, help="Seconds each canned answer takes (per user).")
    p.add_argument("--duration-s", type=float, default=10.0, help="Seconds of records per rate (items = rate × this).")
    p.add_argument("--no-live-board", action="store_true", help="Master without the live board (an unwatched run).")
    p.add_argument("--live-rows", type=int, default=None, help="The master's --avv-live-rows (default: its default).")
    p.add_argument("--code", default="", help="Measure the avv_harness of this checkout instead (e.g. `git archive "
                   "main | tar -x -C /tmp/main` for a before / after); it needs no live board (--no-live-board) when "
                   "it predates --avv-metrics-port.")
    p.add_argument("--out", default="/tmp/avv-bench", help="Work folder (an ingest-<time> folder is made in it).")
    p.add_argument("--json", default="", help="Also write the results as JSON here.")
    return p.parse_args(argv)


def write_inputs(work: Path, items: int) -> tuple[Path, Path, int]:
    """vendors.yaml (two vendors on an unused URL: nothing is called) and N_SAMPLES small samples; the repeats
    that make ``items`` items in all."""
    work.mkdir(parents=True, exist_ok=True)
    vendors = [{"name": v, "model_id": bl.MODEL, "url": "http://127.0.0.1:9/v1", "concurrency": 1,
                "is_baseline": v == VENDORS[0], "timeout_s": 30} for v in VENDORS]
    bl.write_yaml(work / "vendors.yaml", {bl.MODEL: {"vendors": vendors}})
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    with (work / "samples.jsonl").open("w") as fh:
        for i in range(N_SAMPLES):
            body = {"messages": [{"role": "user", "content": f"Open src/module_{i}.py and explain it. " * 6}],
                    "tools": [tool], "max_tokens": 256}
            fh.write(json.dumps(body) + "\n")
    return work / "vendors.yaml", work / "samples.jsonl", max(1, math.ceil(items / (N_SAMPLES * len(VENDORS))))


def set_concurrency(path: Path, users: int) -> None:
    import yaml

    config = yaml.safe_load(path.read_text())
    per_vendor = max(1, users // len(VENDORS))
    for vendor in config[bl.MODEL]["vendors"]:
        vendor["concurrency"] = per_vendor
    bl.write_yaml(path, config)


class Sampler(threading.Thread):
    """(monotonic time, CPU seconds, RSS bytes) of one process every ``interval`` s."""

    def __init__(self, pid: int, interval: float = 0.25):
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.samples: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with self.proc.oneshot():
                    t = self.proc.cpu_times()
                    self.samples.append((time.monotonic(), t.user + t.system, self.proc.memory_info().rss))
            except psutil.Error:
                return
            self.stop.wait(self.interval)

    def at(self, when: float) -> tuple[float, float] | None:
        """CPU seconds and RSS at ``when``, from the nearest samples (linear interpolation of the CPU)."""
        s = self.samples
        if len(s) < 2:
            return None
        before = max((x for x in s if x[0] <= when), default=s[0], key=lambda x: x[0])
        after = min((x for x in s if x[0] >= when), default=s[-1], key=lambda x: x[0])
        if after[0] == before[0]:
            return before[1], before[2]
        share = (when - before[0]) / (after[0] - before[0])
        return before[1] + share * (after[1] - before[1]), before[2] + share * (after[2] - before[2])


def run_rate(args: argparse.Namespace, rate: float, work: Path) -> dict[str, Any]:
    items = int(rate * args.duration_s)
    users = max(1, round(rate * args.answer_s))
    config, samples, repeats = write_inputs(work, items)
    set_concurrency(config, users)
    measured = work / "measured"
    env = {**bl.clean_env(), "AVV_BENCH_ANSWER_S": str(args.answer_s), "AVV_BENCH_OUT": str(measured),
           "LOCUST_AVV_NO_HTML": "true"}
    if args.code:
        env["AVV_BENCH_CODE"] = str(Path(args.code).resolve())
        env["PYTHONPATH"] = env["AVV_BENCH_CODE"]
    port = _free_port()
    common = ["-f", str(LOCUSTFILE), "--avv-config", str(config)]
    master_cmd = [sys.executable, "-m", "locust", *common, "--headless", "--master", "--expect-workers",
                  str(args.workers), "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                  "--avv-samples", str(samples), "--avv-repeats", str(repeats), "--avv-out", str(work / "out"),
                  "--avv-run-id", "run", "--avv-no-score", "--avv-retries", "0",
                  "--avv-start-jitter-s", str(args.answer_s)]
    # the vendors' URL is a closed port (the workers' users answer in-process): no pre-flight request can answer,
    # so it is off (code from before --avv-preflight has none)
    options = (Path(args.code) if args.code else bl.ROOT) / "avv_harness/run/options.py"
    if options.is_file() and "avv-preflight" in options.read_text(encoding="utf-8", errors="replace"):
        master_cmd += ["--avv-preflight", "off"]
    if not args.no_live_board:
        master_cmd += ["--avv-metrics-port", str(_free_port()), "--web-host", "127.0.0.1"]
        if args.live_rows is not None:
            master_cmd += ["--avv-live-rows", str(args.live_rows)]
    # the users run on the workers: each reads its own --avv-start-jitter-s (without it, all users would start
    # within 1 s: 20,000 asks in one second, and 20,000 records one answer later)
    worker_cmd = [sys.executable, "-m", "locust", *common, "--worker", "--master-host", "127.0.0.1",
                  "--master-port", str(port), "--avv-start-jitter-s", str(args.answer_s)]
    log = (work / "master.log").open("w")
    master = subprocess.Popen(master_cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    sampler = Sampler(master.pid)
    sampler.start()
    workers = [subprocess.Popen(worker_cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                                stderr=(work / f"worker-{i}.log").open("w")) for i in range(args.workers)]
    worker_samplers = [Sampler(w.pid) for w in workers]
    for ws in worker_samplers:
        ws.start()
    timeout = args.duration_s * 6 + 120
    try:
        code = master.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        master.kill()
        code = None
    finally:
        sampler.stop.set()
        for ws in worker_samplers:
            ws.stop.set()
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
    return analyse(rate, users, N_SAMPLES * len(VENDORS) * repeats, code, measured, sampler, args.answer_s,
                   worker_samplers)


def analyse(rate: float, users: int, items: int, code: int | None, measured: Path, sampler: Sampler,
            ramp_s: float, worker_samplers: list[Sampler]) -> dict[str, Any]:
    master = [json.loads(p.read_text()) for p in measured.glob("master-*.json")]
    workers = [json.loads(p.read_text()) for p in measured.glob("worker-*.json")]
    handout = [x for w in workers for x in w["handout_s"]]
    rows = sorted(tuple(r) for m in master for r in m["rows"])
    out: dict[str, Any] = {"offered_per_s": rate, "users": users, "items": items, "rows": len(rows),
                           "master_exit": code, "empty_asks": sum(w.get("empty_asks", 0) for w in workers)}
    if len(rows) < 2:
        return out
    # the steady window: without the first and last ``ramp_s`` (users start spread over one answer, and the
    # last answers end spread over one)
    start, end = rows[0][0] + ramp_s, rows[-1][0] - ramp_s
    if end <= start:
        start, end = rows[0][0], rows[-1][0]
    steady = [r for r in rows if start <= r[0] <= end]
    out["window_s"] = end - start
    out["kept_per_s"] = len(steady) / (end - start) if end > start else None
    delays = [d * 1000 for _, d in rows]
    out["send_to_row_p50_ms"], out["send_to_row_p99_ms"] = bl.pct(delays, 50), bl.pct(delays, 99)
    out["handout_p50_ms"] = bl.pct([h * 1000 for h in handout], 50)
    out["handout_p99_ms"] = bl.pct([h * 1000 for h in handout], 99)
    a, b = sampler.at(start), sampler.at(end)
    if a and b:
        out["cpu_us_per_record"] = (b[0] - a[0]) / len(steady) * 1e6
        out["cpu_pct"] = (b[0] - a[0]) / (end - start) * 100 if end > start else None
        out["rss_mb_end"] = b[1] / 2**20
    # memory over the second half of the window: the first holds one-off growth (imports for the first scoring)
    middle = (start + end) / 2
    m = sampler.at(middle)
    later = sum(1 for r in steady if r[0] >= middle)
    if m and b and later:
        out["rss_mb_per_100k"] = (b[1] - m[1]) / later * 100_000 / 2**20
    spans = [(ws.at(start), ws.at(end)) for ws in worker_samplers]
    if spans and all(a and b for a, b in spans):
        out["workers_cpu_pct"] = sum(b[0] - a[0] for a, b in spans) / (end - start) * 100  # type: ignore[index]
    out["live_board_rows"] = next((m.get("live_board_rows") for m in master), None)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(bl.command_line())
    print(bl.machine_line())
    base = Path(args.out) / f"ingest-{time.strftime('%Y%m%d-%H%M%S')}"
    results = []
    for rate in (float(r) for r in args.rates.split(",") if r.strip()):
        result = run_rate(args, rate, base / f"rate-{rate:g}")
        results.append(result)
        print(f"  rate {rate:g}/s: {result.get('rows')} rows, master exit {result.get('master_exit')}", flush=True)
    headers = ["offered/s", "users", "kept/s", "CPU µs/rec", "master CPU%", "send→row p50", "p99 ms",
               "hand-out p50", "p99 ms", "RSS MB/100k", "workers CPU%", "empty asks", "exit"]
    table = [[bl.fmt(r["offered_per_s"], 0), str(r["users"]), bl.fmt(r.get("kept_per_s"), 0),
              bl.fmt(r.get("cpu_us_per_record"), 0), bl.fmt(r.get("cpu_pct"), 0),
              bl.fmt(r.get("send_to_row_p50_ms")), bl.fmt(r.get("send_to_row_p99_ms")),
              bl.fmt(r.get("handout_p50_ms")), bl.fmt(r.get("handout_p99_ms")), bl.fmt(r.get("rss_mb_per_100k")),
              bl.fmt(r.get("workers_cpu_pct"), 0), str(r["empty_asks"]),
              str(r.get("master_exit"))] for r in results]
    print(f"workers {args.workers}, answer {args.answer_s:g} s, {args.duration_s:g} s of records per rate, live board "
          f"{'off' if args.no_live_board else 'on'}; work folder {base}")
    print(bl.table(headers, table))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0 if all(r.get("master_exit") == 0 for r in results) else 1


if __name__ == "__main__":
    os.chdir(HERE.parent)
    sys.exit(main())
