"""Measurement accuracy of the harness versus the simulator's server-side truth, per concurrency level.

For each level N: one simulated vendor (slow streams, so N streams really are concurrent), N Locust users
in ONE headless Locust process, ~``--per-user`` requests per user, no retries. Each record is joined to
its truth line (tag run/model/vendor/sample/repeat/attempt) and we report:

- ``ttft_err``  = (t0_monotonic + ttft_ms/1000) − truth.t_first_token: how late the client saw the first
  token after the server wrote it (loopback + parsing + gevent scheduling), ms;
- ``lat_err``   = (t0_monotonic + latency_ms/1000) − truth.t_last_byte: the same for the last byte, ms;
- ``send``      = ttft_ms − (truth.t_first_token − truth.t_arrival)·1000: measured TTFT minus the server's
  TTFT, i.e. the send path (t0 → handler start: connect, request write, server accept) plus ``ttft_err``, ms;
- ``events/s``  = Σ chunks / (max(t0 + latency) − min t0): SSE data events consumed per second;
- ``steady/s``  = the same inside the window where all N users are busy (the N-th first t0 to the N-th last
  end), each record's chunks spread evenly over [t0 + ttft, t0 + latency] and pro-rated by overlap;
- ``offered/s`` = N · events per answer / server duration of an answer: what the simulator would send if
  the client kept up (upper bound; ramp-up and the tail lower the achievable average);
- ``locust CPU%`` = CPU s (user+system) of the Locust process alone over the streaming phase / phase length;
  ``sim CPU%`` the same for the simulator (a child of Locust). 100 % = one core;
- ``µs/event``  = Locust CPU s over the streaming phase / Σ chunks consumed;
- ``lag``       = p50 / p99 of the records' ``client_lag_ms`` (the harness's own estimate, no truth needed), and
  ``lag≥err %`` = share of joined records with ttft_err ≤ client_lag_ms + 1 ms: does the estimate bound the
  true client delay at each level?

    python bench/measure.py --levels 1,50,200,500 --json /tmp/avv-bench/measure.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import benchlib as bl


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bl.add_sim_options(p, ttft_ms=200.0, tokens_per_s=20.0, output_tokens=40)
    p.add_argument("--levels", default="1,50,200,500", help="Comma-separated concurrency levels (streams).")
    p.add_argument("--out", default="/tmp/avv-bench", help="Work folder (a measure-<time> folder is made in it).")
    p.add_argument("--pin", action="store_true",
                   help="Locust on CPU 0, the simulator on CPU 1 (as a remote vendor would be: not competing).")
    return p.parse_args(argv)


def levels_of(text: str) -> list[int]:
    levels = [int(x) for x in text.split(",") if x.strip()]
    if not levels or min(levels) < 1:
        raise SystemExit("--levels: give positive integers, e.g. 1,50,200")
    return levels


def prepare_level(args: argparse.Namespace, work: Path, level: int) -> list[str]:
    """Write sim.yaml, vendors.yaml and the sample subset for one level; return the Locust command."""
    work.mkdir(parents=True, exist_ok=True)
    profile = bl.sim_profile(args.ttft_ms, args.tokens_per_s, args.output_tokens, args.tokens_per_chunk,
                             args.ttft_jitter_ms)
    bl.write_yaml(work / "sim.yaml", {"profiles": {bl.PROFILE: profile}})
    bl.write_yaml(work / "vendors.yaml", bl.vendor_config(level))
    n_samples, repeats = bl.plan_items(level, args.per_user, bl.count_samples(Path(args.samples)))
    samples = bl.subset_samples(Path(args.samples), work / "samples.jsonl", n_samples)
    return bl.locust_command(work, samples, repeats, client=args.client)


def offered_events_per_s(args: argparse.Namespace, level: int) -> float:
    """N · events per answer / (ttft + (tokens − 1) / tokens_per_s)."""
    events = bl.events_per_request(args.output_tokens, args.tokens_per_chunk)
    return level * events / bl.request_seconds(args.ttft_ms, args.tokens_per_s, args.output_tokens)


def analyse(args: argparse.Namespace, level: int, work: Path, run: bl.Monitored) -> dict[str, Any]:
    """One result row for a level (see the module docstring for each formula)."""
    frame = bl.load_records(work)
    records = bl.record_dicts(frame)
    errs = bl.errors_ms(records, bl.load_truth(bl.run_dir(work) / "sim_truth.jsonl"))
    start, end = bl.streaming_phase(frame)
    result: dict[str, Any] = {
        "level": level, "requests": len(records), "failed": sum(r["status"] != "success" for r in records),
        "joined": len(errs["ttft_err"]), "phase_s": end - start,
        "events_per_s": bl.events_per_second(frame), "steady_events_per_s": bl.steady_events_per_second(frame, level),
        "offered_events_per_s": offered_events_per_s(args, level),
        "locust_cpu_pct": bl.cpu_percent(run, run.pids("locust"), start, end),
        "sim_cpu_pct": bl.cpu_percent(run, run.pids("sim"), start, end),
        "locust_cpu_life_pct": bl.lifetime_cpu_percent(run, run.pids("locust")[0]),
        "returncode": run.returncode, "work": str(work),
    }
    lag = errs.pop("lag")
    result.update(bl.lag_tracking(errs["ttft_err"], lag))
    cpu_s = bl.cpu_seconds(run, run.pids("locust"), start, end)
    events = float(frame["chunks"].sum()) if "chunks" in frame else 0.0
    result["locust_us_per_event"] = 1e6 * cpu_s / events if cpu_s is not None and events else None
    for name, values in errs.items():
        for q in (50, 99):
            result[f"{name}_p{q}_ms"] = bl.pct(values, q)
        result[f"{name}_max_ms"] = max(values) if values else None
    return result


def run_level(args: argparse.Namespace, base: Path, level: int) -> dict[str, Any]:
    work = base / f"level-{level}"
    cmd = prepare_level(args, work, level)
    expected = bl.request_seconds(args.ttft_ms, args.tokens_per_s, args.output_tokens) * (args.per_user + 1)
    env_extra = None
    if args.pin:
        cmd = ["taskset", "-c", "0", *cmd]
        env_extra = {"AVV_SIM_CPUS": "1"}
    print(f"\n[level {level}] $ {'AVV_SIM_CPUS=1 ' if args.pin else ''}{' '.join(cmd)}", flush=True)
    run = bl.run_monitored(cmd, work, work / "locust.log", timeout=120 + 10 * expected, interval=args.interval,
                           env_extra=env_extra)
    if run.returncode != 0:
        print(f"[level {level}] locust exited with status {run.returncode}; log tail:\n{run.log_tail()}", flush=True)
    if not (bl.run_dir(work) / "records.csv").exists():
        return {"level": level, "requests": 0, "returncode": run.returncode, "work": str(work)}
    result = analyse(args, level, work, run)
    print(f"[level {level}] {result['requests']} requests ({result['failed']} failed) in "
          f"{result['phase_s']:.1f} s of streaming; locust exit {run.returncode}", flush=True)
    return result


HEADERS = ["level", "requests", "failed", "ttft_err p50", "p99", "lat_err p50", "p99", "send p50", "p99",
           "events/s", "steady/s", "offered/s", "locust CPU%", "µs/event", "sim CPU%", "lag p50", "p99", "lag≥err %"]


def table_row(r: dict[str, Any]) -> list[str]:
    g = r.get
    return [str(r["level"]), str(r["requests"]), str(g("failed", "-")),
            bl.fmt(g("ttft_err_p50_ms"), 2), bl.fmt(g("ttft_err_p99_ms"), 2),
            bl.fmt(g("lat_err_p50_ms"), 2), bl.fmt(g("lat_err_p99_ms"), 2),
            bl.fmt(g("send_p50_ms"), 2), bl.fmt(g("send_p99_ms"), 2),
            bl.fmt(g("events_per_s"), 0), bl.fmt(g("steady_events_per_s"), 0), bl.fmt(g("offered_events_per_s"), 0),
            bl.fmt(g("locust_cpu_pct"), 0), bl.fmt(g("locust_us_per_event"), 0), bl.fmt(g("sim_cpu_pct"), 0),
            bl.fmt(g("lag_p50_ms"), 2), bl.fmt(g("lag_p99_ms"), 2), bl.fmt(g("lag_covers_pct"), 0)]


LEGEND = """\
times in ms. ttft_err = client saw first token − server wrote it; lat_err = client saw end of body − server
sent last byte; send = measured TTFT − server TTFT (= send path t0→handler + ttft_err). events/s = Σ chunks /
streaming phase (min t0 → max end, ramp-up and tail included); steady/s = events/s while all users are busy
(chunks pro-rated); offered/s = N · events per answer / answer duration, what the simulator sends if the client
keeps up. CPU% over the streaming phase, user+system, 100 = one core; locust = the Locust process alone.
µs/event = Locust CPU s over the phase / Σ chunks. lag = the records' client_lag_ms (the client's own estimate
of its delay, no truth needed); lag≥err % = share of records whose ttft_err ≤ client_lag_ms + 1 ms."""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ttft_jitter_ms is None:
        args.ttft_jitter_ms = bl.spread_jitter_ms(args.tokens_per_s, args.tokens_per_chunk)
    print(f"$ {bl.command_line()}", flush=True)
    print(bl.machine_line(), flush=True)
    print(f"simulator: ttft_ms={args.ttft_ms:g} tokens_per_s={args.tokens_per_s:g} "
          f"output_tokens={args.output_tokens} tokens_per_chunk={args.tokens_per_chunk} "
          f"ttft_jitter_ms=±{args.ttft_jitter_ms:g}; "
          f"~{args.per_user} requests per user; one Locust process", flush=True)
    base = Path(args.out) / time.strftime("measure-%Y%m%d-%H%M%S")
    results = [run_level(args, base, level) for level in levels_of(args.levels)]
    print("\n" + bl.table(HEADERS, [table_row(r) for r in results]))
    print(LEGEND)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": bl.command_line(), "machine": bl.machine_line(), "options": vars(args),
                   "levels": results}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results: {args.json}")
    return 0 if all(r.get("returncode") == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
