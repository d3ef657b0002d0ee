"""Events/s of one vs several Locust worker processes against the simulator, as a ratio (issue 5).

The same workload — one simulated vendor with fast, small events, ``--concurrency`` users, ~``--per-user``
requests each, no retries — is run twice with real headless Locust:

(a) one local process;  (b) ``--processes N`` (a master plus N forked workers; the master hands out items
    and writes the records, the workers stream).

For each: events/s = Σ chunks / (max(t0 + latency) − min t0) over all records (SSE data events consumed per
second of the streaming phase), steady/s = the same while all users are busy (see ``measure.py``), the
same per worker process (its own records and phase), the first-token
error versus the truth log (ms, as in ``measure.py``), and CPU% over the streaming phase of the Locust
master/local process, of the workers together and of the simulator (100 = one core).
ratio = events/s of (b) / events/s of (a).

    python bench/workers.py --concurrency 200 --json /tmp/avv-bench/workers.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import benchlib as bl


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bl.add_sim_options(p, ttft_ms=50.0, tokens_per_s=50.0, output_tokens=50)
    p.add_argument("--concurrency", type=int, default=200, help="Locust users (concurrent streams).")
    p.add_argument("--processes", type=int, default=2, help="Worker processes of run (b).")
    p.add_argument("--out", default="/tmp/avv-bench", help="Work folder (a workers-<time> folder is made in it).")
    return p.parse_args(argv)


def prepare(args: argparse.Namespace, work: Path, processes: int) -> list[str]:
    """Write the configs of one run; the Locust command (``--processes`` only when processes > 1)."""
    work.mkdir(parents=True, exist_ok=True)
    profile = bl.sim_profile(args.ttft_ms, args.tokens_per_s, args.output_tokens, args.tokens_per_chunk,
                             args.ttft_jitter_ms)
    bl.write_yaml(work / "sim.yaml", {"profiles": {bl.PROFILE: profile}})
    bl.write_yaml(work / "vendors.yaml", bl.vendor_config(args.concurrency))
    n_samples, repeats = bl.plan_items(args.concurrency, args.per_user, bl.count_samples(Path(args.samples)))
    samples = bl.subset_samples(Path(args.samples), work / "samples.jsonl", n_samples)
    extra = ["--processes", str(processes)] if processes > 1 else []
    return bl.locust_command(work, samples, repeats, extra, client=args.client)


def per_worker_events(frame: Any) -> dict[str, float | None]:
    """events/s of each worker process: Σ its chunks / (its max end − its min t0)."""
    return {str(name): bl.events_per_second(group) for name, group in frame.groupby("worker")}


def analyse(work: Path, run: bl.Monitored, processes: int, users: int) -> dict[str, Any]:
    frame = bl.load_records(work)
    records = bl.record_dicts(frame)
    errs = bl.errors_ms(records, bl.load_truth(bl.run_dir(work) / "sim_truth.jsonl"))
    start, end = bl.streaming_phase(frame)
    return {
        "processes": processes, "requests": len(records), "failed": sum(r["status"] != "success" for r in records),
        "phase_s": end - start, "events_per_s": bl.events_per_second(frame),
        "steady_events_per_s": bl.steady_events_per_second(frame, users),
        "per_worker_events_per_s": per_worker_events(frame),
        "ttft_err_p50_ms": bl.pct(errs["ttft_err"], 50), "ttft_err_p99_ms": bl.pct(errs["ttft_err"], 99),
        "locust_cpu_pct": bl.cpu_percent(run, run.pids("locust"), start, end),
        "workers_cpu_pct": bl.cpu_percent(run, run.pids("worker"), start, end),
        "sim_cpu_pct": bl.cpu_percent(run, run.pids("sim"), start, end),
        "returncode": run.returncode, "work": str(work),
    }


def run_mode(args: argparse.Namespace, base: Path, processes: int) -> dict[str, Any]:
    label = "local" if processes <= 1 else f"processes-{processes}"
    work = base / label
    cmd = prepare(args, work, processes)
    print(f"\n[{label}] $ {' '.join(cmd)}", flush=True)
    expected = bl.request_seconds(args.ttft_ms, args.tokens_per_s, args.output_tokens) * (args.per_user + 1)
    run = bl.run_monitored(cmd, work, work / "locust.log", timeout=120 + 20 * expected, interval=args.interval)
    if run.returncode != 0:
        print(f"[{label}] locust exited with status {run.returncode}; log tail:\n{run.log_tail()}", flush=True)
    if not (bl.run_dir(work) / "records.csv").exists():
        return {"processes": processes, "requests": 0, "returncode": run.returncode, "work": str(work)}
    result = analyse(work, run, processes, args.concurrency)
    print(f"[{label}] {result['requests']} requests ({result['failed']} failed) in {result['phase_s']:.1f} s "
          f"of streaming; per worker events/s: "
          + ", ".join(f"{w}: {bl.fmt(v, 0)}" for w, v in result["per_worker_events_per_s"].items()), flush=True)
    return result


HEADERS = ["run", "requests", "failed", "events/s", "steady/s", "ttft_err p50", "p99", "master/local CPU%",
           "workers CPU%", "sim CPU%"]


def table_row(r: dict[str, Any]) -> list[str]:
    g = r.get
    name = "1 process" if r["processes"] <= 1 else f"{r['processes']} workers"
    return [name, str(r["requests"]), str(g("failed", "-")), bl.fmt(g("events_per_s"), 0),
            bl.fmt(g("steady_events_per_s"), 0), bl.fmt(g("ttft_err_p50_ms"), 2), bl.fmt(g("ttft_err_p99_ms"), 2),
            bl.fmt(g("locust_cpu_pct"), 0), bl.fmt(g("workers_cpu_pct"), 0), bl.fmt(g("sim_cpu_pct"), 0)]


def ratio(single: dict[str, Any], multi: dict[str, Any], key: str = "events_per_s") -> float | None:
    """events/s with N workers / events/s with one process (``key``: events_per_s or steady_events_per_s)."""
    a, b = single.get(key), multi.get(key)
    return b / a if a and b else None


def cores_note(processes: int) -> str:
    cpus = os.cpu_count() or 1
    note = (f"note: this machine has {cpus} CPU(s). The simulator (one asyncio process, ~40-50 µs of CPU per "
            f"event) and the Locust master run on the same cores as the {processes} workers")
    if cpus <= processes + 1:
        note += (", so the workers cannot each have a core to themselves: the ratio measured here is a lower "
                 "bound of what separate machines (or a separate simulator host) would show")
    return note + ". Other sessions on the machine also compete (see the load average above)."


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ttft_jitter_ms is None:
        args.ttft_jitter_ms = bl.spread_jitter_ms(args.tokens_per_s, args.tokens_per_chunk)
    print(f"$ {bl.command_line()}", flush=True)
    print(bl.machine_line(), flush=True)
    offered = args.concurrency * bl.events_per_request(args.output_tokens, args.tokens_per_chunk) / (
        bl.request_seconds(args.ttft_ms, args.tokens_per_s, args.output_tokens))
    print(f"simulator: ttft_ms={args.ttft_ms:g} tokens_per_s={args.tokens_per_s:g} "
          f"output_tokens={args.output_tokens} tokens_per_chunk={args.tokens_per_chunk} "
          f"ttft_jitter_ms=±{args.ttft_jitter_ms:g}; concurrency "
          f"{args.concurrency}, ~{args.per_user} requests per user; offered ≈ {offered:.0f} events/s", flush=True)
    base = Path(args.out) / time.strftime("workers-%Y%m%d-%H%M%S")
    single = run_mode(args, base, 1)
    multi = run_mode(args, base, args.processes)
    print("\n" + bl.table(HEADERS, [table_row(single), table_row(multi)]))
    value, steady = ratio(single, multi), ratio(single, multi, "steady_events_per_s")
    print(f"\nratio events/s ({args.processes} workers / 1 process) = {bl.fmt(value, 2)}"
          f"   (steady-state events/s: {bl.fmt(steady, 2)}; offered ≈ {offered:.0f} events/s — a ratio near 1 with "
          "both runs near the offered rate means the client was not the bottleneck)")
    print(cores_note(args.processes))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": bl.command_line(), "machine": bl.machine_line(), "options": vars(args),
                   "offered_events_per_s": offered, "single": single, "multi": multi,
                   "ratio": value, "steady_ratio": steady}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results: {args.json}")
    return 0 if single.get("returncode") == 0 and multi.get("returncode") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
