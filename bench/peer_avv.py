"""CPU per sample of avv-locust next to the peer tool AVV (``agent-vendor-verifier`` 0.1.0) on the same instant SSE
server (issue 28).

The peer is installed into a venv of its own (``--venv``, default ``~/.cache/avv-locust/peer-avv-0.1.0``; made on
the first run with ``python -m venv`` and ``pip install agent-vendor-verifier==0.1.0`` from the package index pip
is configured with); when it cannot be installed the script says so and exits with status 3. One simulator
process (``avv_sim``, ttft 0, ~10⁶ tokens/s: every answer is written at once, ``--output-tokens`` tokens, i.e.
tokens + 3 SSE events) serves both tools. For each sample count S (``--samples``, default 400,1000):

- AVV: ``agent-vendor-verifier --test-file-path … --config-file-path … --request-concurrency C --retries 0``
  with one model and one (baseline) vendor at the simulator. The peer sends every sample twice (a streaming
  pass, then a non-streaming one: its design); its CPU per sample counts both, as a user of it pays both.
- avv-locust: headless Locust on ``locustfiles/vendors.py``, one vendor (concurrency C), S samples × 1 repeat,
  ``--avv-no-score --avv-retries 0``, with ``--client`` (default: both lean and requests).

CPU = user + system CPU seconds of the tool's whole process tree (``getrusage(RUSAGE_CHILDREN)`` around the run:
start-up and imports included), wall = its elapsed time. Printed per run: CPU s, CPU ms per sample, wall s; and
per tool the marginal CPU per sample between the two sample counts ((CPU(S₂) − CPU(S₁)) / (S₂ − S₁): start-up
cancels), and the ratio AVV / avv-locust of both. Target (issue 28): ≥ 20× less CPU per sample than AVV.

    python bench/peer_avv.py --samples 400,1000 --concurrency 20
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib as bl

from avv_sim import start_simulator

PEER = "agent-vendor-verifier==0.1.0"
DEFAULT_VENV = Path.home() / ".cache" / "avv-locust" / "peer-avv-0.1.0"
EXIT_NO_PEER = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", default="400,1000", help="Comma-separated sample counts (two or more: marginal CPU).")
    p.add_argument("--concurrency", type=int, default=20, help="Concurrent requests of each tool.")
    p.add_argument("--output-tokens", type=int, default=97, help="Tokens per answer (events = tokens + 3).")
    p.add_argument("--client", default="both", choices=["both", "lean", "requests"], help="avv-locust's client(s).")
    p.add_argument("--venv", default=str(DEFAULT_VENV), help="Where the peer's venv is (made if missing).")
    p.add_argument("--json", default="", help="Also write the results to this JSON file.")
    return p.parse_args(argv)


def ensure_peer(venv: Path) -> Path:
    """The peer's command in its own venv, installed on first use; exits EXIT_NO_PEER when it cannot be."""
    command = venv / "bin" / "agent-vendor-verifier"
    if command.exists():
        return command
    print(f"installing {PEER} into {venv} (first run) …", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", PEER], check=True, capture_output=True,
                       text=True, timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        tail = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()[-5:]
        print(f"peer_avv: cannot install {PEER} into {venv}: the package index pip uses does not provide it "
              "(or its dependencies); nothing to compare with.\n  " + "\n  ".join(tail), file=sys.stderr)
        raise SystemExit(EXIT_NO_PEER) from None
    if not command.exists():
        print(f"peer_avv: {PEER} installed but {command} is missing", file=sys.stderr)
        raise SystemExit(EXIT_NO_PEER)
    return command


def write_samples(path: Path, count: int) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            body = {"messages": [{"role": "user", "content": f"Say something about the number {i}."}],
                    "max_tokens": 512}
            out.write(json.dumps(body) + "\n")
    return path


def timed(cmd: list[str], cwd: Path, log: Path) -> tuple[float, float, int]:
    """(CPU s of the whole process tree, wall s, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.run(cmd, cwd=cwd, env=bl.clean_env(), stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL).returncode
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, code


def run_peer(command: Path, work: Path, samples: Path, url: str, concurrency: int) -> tuple[float, float, int]:
    config = {bl.MODEL: {"vendors": [{"name": "sim", "model_id": bl.MODEL, "api_key": "sk-bench", "url": url,
                                      "validator": "openai", "is_baseline": True}]}}
    bl.write_yaml(work / "peer.yaml", config)
    (work / "data").mkdir(exist_ok=True)  # the peer writes its results under ./data
    return timed([str(command), "--test-file-path", str(samples), "--config-file-path", str(work / "peer.yaml"),
                  "--request-concurrency", str(concurrency), "--retries", "0"], work, work / "peer.log")


def run_ours(work: Path, samples: Path, url: str, concurrency: int, client: str,
             profile: dict[str, Any]) -> tuple[float, float, int]:
    bl.write_yaml(work / "sim.yaml", {"profiles": {bl.PROFILE: profile}})  # not started: the URL is literal
    vendor = {"name": "sim", "model_id": bl.MODEL, "url": url, "concurrency": concurrency, "timeout_s": 60.0,
              "is_baseline": True}
    bl.write_yaml(work / "vendors.yaml", {bl.MODEL: {"vendors": [vendor]}})
    cmd = bl.locust_command(work, samples, 1, client=client)
    return timed(cmd, work, work / f"locust-{client}.log")


def successes(tool: str, work: Path) -> int | None:
    """Answers the tool counted as successful: the peer's summary (its streaming pass), our records.csv."""
    try:
        if tool == "avv":
            summary = json.loads((work / "data" / f"{bl.MODEL}_sim_summary.json").read_text(encoding="utf-8"))
            return int(summary["success_count"])
        with open(bl.run_dir(work) / "records.csv", encoding="utf-8", newline="") as handle:
            return sum(1 for row in csv.DictReader(handle) if row["status"] == "success")
    except (OSError, KeyError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"$ {bl.command_line()}")
    print(bl.machine_line(), flush=True)
    counts = [int(x) for x in args.samples.split(",") if x.strip()]
    peer = ensure_peer(Path(args.venv))
    clients = ["lean", "requests"] if args.client == "both" else [args.client]
    profile = {"ttft_ms": 0.0, "ttft_jitter_ms": 0.0, "tokens_per_s": 1e6, "output_tokens": args.output_tokens,
               "tokens_per_chunk": 1, "tool_call_rate": 0.0}
    print(f"instant SSE server: {args.output_tokens + 3} events per answer; concurrency {args.concurrency}; "
          f"samples {counts}", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="avv-peer-") as tmp, \
            start_simulator(profiles={bl.PROFILE: profile}) as sim:
        url = sim.base_url(bl.PROFILE)
        for count in counts:
            for tool in ["avv", *clients]:  # interleaved: each count runs every tool in turn
                work = Path(tmp) / f"{tool}-{count}"
                work.mkdir()
                samples = write_samples(work / "samples.jsonl", count)
                if tool == "avv":
                    cpu, wall, code = run_peer(peer, work, samples, url, args.concurrency)
                else:
                    cpu, wall, code = run_ours(work, samples, url, args.concurrency, tool, profile)
                row = {"tool": "AVV 0.1.0" if tool == "avv" else f"avv-locust ({tool})", "samples": count,
                       "cpu_s": cpu, "cpu_ms_per_sample": 1000 * cpu / count, "wall_s": wall, "exit": code,
                       "succeeded": successes(tool, work)}
                results.append(row)
                print(f"  {row['tool']:<24} S={count:<6} CPU {cpu:7.2f} s  {row['cpu_ms_per_sample']:7.2f} ms/sample"
                      f"  wall {wall:6.1f} s  succeeded {row['succeeded']}  exit {code}", flush=True)
    tools = list(dict.fromkeys(r["tool"] for r in results))
    marginal: dict[str, float | None] = {}
    for tool in tools:
        rows = sorted((r for r in results if r["tool"] == tool), key=lambda r: r["samples"])
        marginal[tool] = (1000 * (rows[-1]["cpu_s"] - rows[0]["cpu_s"]) / (rows[-1]["samples"] - rows[0]["samples"])
                          if len(rows) > 1 and rows[-1]["samples"] > rows[0]["samples"] else None)
    peer_name = tools[0]
    table = []
    for tool in tools:
        largest = max((r for r in results if r["tool"] == tool), key=lambda r: r["samples"])
        peer_largest = max((r for r in results if r["tool"] == peer_name), key=lambda r: r["samples"])
        ratio = peer_largest["cpu_s"] / largest["cpu_s"] if largest["cpu_s"] else None
        m, pm = marginal[tool], marginal[peer_name]
        table.append([tool, str(largest["samples"]), bl.fmt(largest["cpu_ms_per_sample"], 2),
                      bl.fmt(largest["wall_s"], 1), bl.fmt(m, 2), bl.fmt(ratio, 1),
                      bl.fmt(pm / m if m and pm else None, 1)])
    print("\nCPU per sample (whole process tree; ms). ratio = AVV / this tool (higher: this tool is leaner)")
    print(bl.table(["tool", "samples", "CPU/sample", "wall s", "marginal CPU/sample", "ratio", "marginal ratio"],
                   table))
    if args.json:
        Path(args.json).write_text(json.dumps({"command": bl.command_line(), "options": vars(args),
                                               "results": results, "marginal_ms": marginal}, indent=2) + "\n")
        print(f"results: {args.json}")
    return 0 if all(r["exit"] == 0 and r["succeeded"] == r["samples"] for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
