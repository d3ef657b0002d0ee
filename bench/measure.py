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
- ``× loads``   = µs/event / the CPU µs of one ``json.loads`` of the same answer's events, measured in the same
  run (the floor of reading an event: ``benchlib.json_loads_us``, on an answer fetched from a simulator with
  the same profile after the levels).

``--transports plain,tls`` runs every level twice, over plain TCP and over HTTPS (the run's simulator serving a
self-signed certificate made at start, trusted through ``REQUESTS_CA_BUNDLE``), the order alternating from level to
level, and prints them side by side (``× plain`` = µs/event over the same level's plain run).

    python bench/measure.py --levels 1,50,200,500 --json /tmp/avv-bench/measure.json
    python bench/measure.py --levels 50,500 --transports plain,tls              # plain vs TLS
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
    p.add_argument("--transports", default="plain",
                   help="Comma-separated: plain, tls (HTTPS with a self-signed certificate made at start).")
    args = p.parse_args(argv)
    args.transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if not args.transports or set(args.transports) - set(TRANSPORTS):
        raise SystemExit(f"--transports: some of {', '.join(TRANSPORTS)}")
    return args


TRANSPORTS = ("plain", "tls")


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


def analyse(args: argparse.Namespace, level: int, transport: str, work: Path, run: bl.Monitored) -> dict[str, Any]:
    """One result row for a level (see the module docstring for each formula)."""
    frame = bl.load_records(work)
    records = bl.record_dicts(frame)
    errs = bl.errors_ms(records, bl.load_truth(bl.run_dir(work) / "sim_truth.jsonl"))
    start, end = bl.streaming_phase(frame)
    result: dict[str, Any] = {
        "level": level, "transport": transport, "requests": len(records),
        "failed": sum(r["status"] != "success" for r in records),
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


def run_level(args: argparse.Namespace, base: Path, level: int, transport: str,
              certificate: tuple[Path, Path] | None) -> dict[str, Any]:
    work = base / f"level-{level}-{transport}"
    cmd = prepare_level(args, work, level)
    expected = bl.request_seconds(args.ttft_ms, args.tokens_per_s, args.output_tokens) * (args.per_user + 1)
    env_extra: dict[str, str] = {}
    if args.pin:
        cmd = ["taskset", "-c", "0", *cmd]
        env_extra["AVV_SIM_CPUS"] = "1"
    if transport == "tls":
        assert certificate is not None
        env_extra.update(bl.tls_env(*certificate))
    shown = " ".join(f"{k}={v}" for k, v in env_extra.items())
    print(f"\n[level {level} {transport}] $ {shown + ' ' if shown else ''}{' '.join(cmd)}", flush=True)
    run = bl.run_monitored(cmd, work, work / "locust.log", timeout=120 + 10 * expected, interval=args.interval,
                           env_extra=env_extra)
    if run.returncode != 0:
        print(f"[level {level} {transport}] locust exited with status {run.returncode}; log tail:\n"
              f"{run.log_tail()}", flush=True)
    if not (bl.run_dir(work) / "records.csv").exists():
        return {"level": level, "transport": transport, "requests": 0, "returncode": run.returncode,
                "work": str(work)}
    result = analyse(args, level, transport, work, run)
    print(f"[level {level} {transport}] {result['requests']} requests ({result['failed']} failed) in "
          f"{result['phase_s']:.1f} s of streaming; locust exit {run.returncode}", flush=True)
    return result


def json_loads_floor_us(args: argparse.Namespace) -> float:
    """CPU µs of one ``json.loads`` of an answer's events, the answer fetched from a simulator with the runs'
    profile (started for this, after the levels: nothing else runs)."""
    from avv_sim import start_simulator

    profile = bl.sim_profile(0.0, 1e6, args.output_tokens, args.tokens_per_chunk)
    with start_simulator(profiles={bl.PROFILE: profile}) as sim:
        body = json.dumps({"model": bl.MODEL, "messages": [{"role": "user", "content": "the floor"}],
                           "stream": True, "stream_options": {"include_usage": True}}).encode()
        events = bl.fetch_events(sim.base_url(bl.PROFILE) + "/chat/completions", body)
    return bl.json_loads_us(events, min_cpu_s=0.5)


HEADERS = ["level", "transport", "requests", "failed", "ttft_err p50", "p99", "lat_err p50", "p99", "send p50", "p99",
           "events/s", "steady/s", "offered/s", "locust CPU%", "µs/event", "sim CPU%", "lag p50", "p99", "lag≥err %",
           "× loads", "× plain"]


def table_row(r: dict[str, Any]) -> list[str]:
    g = r.get
    return [str(r["level"]), r["transport"], str(r["requests"]), str(g("failed", "-")),
            bl.fmt(g("ttft_err_p50_ms"), 2), bl.fmt(g("ttft_err_p99_ms"), 2),
            bl.fmt(g("lat_err_p50_ms"), 2), bl.fmt(g("lat_err_p99_ms"), 2),
            bl.fmt(g("send_p50_ms"), 2), bl.fmt(g("send_p99_ms"), 2),
            bl.fmt(g("events_per_s"), 0), bl.fmt(g("steady_events_per_s"), 0), bl.fmt(g("offered_events_per_s"), 0),
            bl.fmt(g("locust_cpu_pct"), 0), bl.fmt(g("locust_us_per_event"), 0), bl.fmt(g("sim_cpu_pct"), 0),
            bl.fmt(g("lag_p50_ms"), 2), bl.fmt(g("lag_p99_ms"), 2), bl.fmt(g("lag_covers_pct"), 0),
            bl.fmt(g("x_json_loads"), 2), bl.fmt(g("x_plain"), 2)]


def compare(results: list[dict[str, Any]], loads_us: float) -> None:
    """Each row's µs/event over the floor (``x_json_loads``) and over the same level's plain run (``x_plain``)."""
    plain = {r["level"]: r.get("locust_us_per_event") for r in results if r["transport"] == "plain"}
    for r in results:
        us = r.get("locust_us_per_event")
        r["x_json_loads"] = us / loads_us if us is not None else None
        r["x_plain"] = us / plain[r["level"]] if us is not None and plain.get(r["level"]) else None


LEGEND = """\
times in ms. ttft_err = client saw first token − server wrote it; lat_err = client saw end of body − server
sent last byte; send = measured TTFT − server TTFT (= send path t0→handler + ttft_err). events/s = Σ chunks /
streaming phase (min t0 → max end, ramp-up and tail included); steady/s = events/s while all users are busy
(chunks pro-rated); offered/s = N · events per answer / answer duration, what the simulator sends if the client
keeps up. CPU% over the streaming phase, user+system, 100 = one core; locust = the Locust process alone.
µs/event = Locust CPU s over the phase / Σ chunks. lag = the records' client_lag_ms (the client's own estimate
of its delay, no truth needed); lag≥err % = share of records whose ttft_err ≤ client_lag_ms + 1 ms.
× loads = µs/event / one json.loads of an event (the floor, measured in this run); × plain = µs/event over the
same level's plain-TCP run (transport tls: HTTPS, a self-signed certificate)."""


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
    certificate = bl.make_certificate(base / "tls") if "tls" in args.transports else None
    results = []
    for index, level in enumerate(levels_of(args.levels)):
        order = args.transports if index % 2 == 0 else args.transports[::-1]  # neither always runs first
        results += sorted((run_level(args, base, level, transport, certificate) for transport in order),
                          key=lambda r: args.transports.index(r["transport"]))
    loads_us = json_loads_floor_us(args)
    compare(results, loads_us)
    print("\n" + bl.table(HEADERS, [table_row(r) for r in results]))
    print(f"json.loads of one event (the floor): {loads_us:.2f} µs")
    print(LEGEND)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": bl.command_line(), "machine": bl.machine_line(), "options": vars(args),
                   "json_loads_us": loads_us, "levels": results}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results: {args.json}")
    return 0 if all(r.get("returncode") == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
