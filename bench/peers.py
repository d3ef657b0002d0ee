"""avv-locust next to its peers guidellm and aiperf (issue 39.5): the same paced and instant SSE servers, each tool's
own CPU over its whole process tree, and each tool's TTFT against the server's truth.

Optional: the peers are never installed by the project nor run in CI. Install each into a venv of its own
(bench/README.md) and give its executable by option or environment variable (``--guidellm`` /
``AVV_BENCH_GUIDELLM``, ``--aiperf`` / ``AVV_BENCH_AIPERF``; else the name on ``PATH``); a peer that is absent
is skipped with a line saying so.

For every round (``--rounds``), scenario (``instant``, then ``paced``) and tool, in the order A B C in even rounds
and C B A in odd ones, the script starts a fresh simulator (``avv_sim``, one profile, its own truth log) and runs
the tool against it, headless, with the same requests (unique prompts, one user message each):

- ``instant``: ttft 0, ~10⁶ tokens/s (every answer written at once), ``--instant-requests`` requests over
  ``--instant-streams`` concurrent streams;
- ``paced``: ``--ttft-ms`` (200) then ``--output-tokens`` (40) tokens at ``--tokens-per-s`` (20), TTFT jitter ± half an
  event interval (as ``measure.py``), ``--paced-streams`` (500) concurrent streams × ``--per-stream`` (3) requests.

avv-locust: headless Locust on ``locustfiles/vendors.py``, one vendor at the simulator, one user per stream
(``--avv-no-score``); guidellm: ``guidellm run`` with the ``concurrent`` profile (streams = the streams asked) and
a ``max_requests`` constraint, a JSON file of the prompts, the JSON output; aiperf: ``aiperf profile --streaming
--concurrency N --request-count R`` on a ``single_turn`` input file, sampled in order, server token counts and a
word-level tokenizer made here (its builtin one downloads an encoding; nothing here does).

``--cpu N`` pins each tool (and every process it starts) to CPU N with ``taskset``, the simulator and this
script to the other CPUs. Per run (CPU and times from one clock, ``time.monotonic()``):

- ``phase`` = the server's view of the run: the first request's arrival to the last answer's last byte (truth log);
- ``CPU/event`` = the tool's CPU seconds (user + system, every process of its tree, sampled every ``--interval`` s
  with psutil and interpolated to the phase's ends) over the phase / SSE data events the server wrote for it
  (role + token chunks + finish + usage per answer). Start-up, reports and shutdown fall outside the phase; the
  raw lines also give the whole life (``getrusage`` of the waited-for tree) per event;
- ``TTFT error`` = (the tool's request start + its TTFT) − the server's ``t_first_token``: how late the tool saw
  the first token after the server wrote it, per request joined to its truth line (avv-locust by its
  ``X-AVV-Item`` tag, a peer by ``request_hash`` of the body it reports). The peers stamp wall-clock time; it is
  turned into monotonic time by the offset ``time.time() − time.monotonic()`` read around the run (its drift is
  printed). ``ttft − server`` = the tool's TTFT − the server's (``t_first_token − t_arrival``): the send path plus
  the error, no clock conversion;
- ``in flight`` = streams open at the server (arrival → last byte), p50 and max over time between the first
  answer's end and the last request's arrival (ramp-up and tail left out).

    python bench/peers.py --cpu 1 --rounds 2 --guidellm /opt/peers/guidellm/bin/guidellm \\
        --aiperf /opt/peers/aiperf/bin/aiperf --json /tmp/avv-bench/peers.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import benchlib as bl

from avv_core.items import truth_tag
from avv_sim import read_truth_log, start_simulator
from avv_sim.request import request_hash

SCENARIOS = ("instant", "paced")
TOOLS = ("avv", "guidellm", "aiperf")
PEER_ENV = {"guidellm": "AVV_BENCH_GUIDELLM", "aiperf": "AVV_BENCH_AIPERF"}
PROMPT = "Peer bench request {i}: say something about the number {i}."
#: the peers' own environment: no colour codes in their logs
PEER_ENV_EXTRA = {"NO_COLOR": "1", "TERM": "dumb"}
#: guidellm: no hub look-ups (it needs no tokenizer here). Not for aiperf: offline, it reads a tokenizer path as a
#: hub name and fails (aiperf 0.13.0, common/tokenizer.py)
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# ----------------------------------------------------------------------------------------------- options


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", default=",".join(TOOLS), help="Comma-separated tools, in the order of even rounds.")
    p.add_argument("--guidellm", default=None, help=f"guidellm executable (else ${PEER_ENV['guidellm']}, else PATH).")
    p.add_argument("--aiperf", default=None, help=f"aiperf executable (else ${PEER_ENV['aiperf']}, else PATH).")
    p.add_argument("--guidellm-args", default="", help="Extra arguments for guidellm run (one shell-quoted string).")
    p.add_argument("--aiperf-args", default="", help="Extra arguments for aiperf profile (one shell-quoted string).")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="Comma-separated: instant, paced.")
    p.add_argument("--rounds", type=int, default=2, help="Rounds; odd rounds run the tools in reverse order.")
    p.add_argument("--cpu", type=int, default=None,
                   help="Pin every tool to this CPU (taskset), the simulator and this script to the others.")
    p.add_argument("--paced-streams", type=int, default=500, help="Concurrent streams asked of each tool, paced.")
    p.add_argument("--per-stream", type=int, default=3, help="Requests per stream, paced.")
    p.add_argument("--instant-streams", type=int, default=50, help="Concurrent streams, instant server.")
    p.add_argument("--instant-requests", type=int, default=2000, help="Requests, instant server.")
    p.add_argument("--ttft-ms", type=float, default=200.0, help="Paced server: time to the first token.")
    p.add_argument("--tokens-per-s", type=float, default=20.0, help="Paced server: tokens per second.")
    p.add_argument("--output-tokens", type=int, default=40, help="Tokens per answer (both servers).")
    p.add_argument("--ttft-jitter-ms", type=float, default=None,
                   help="Paced server: TTFT jitter (±); default half an event interval (measure.py's).")
    p.add_argument("--client", default="lean", choices=["lean", "requests"], help="avv-locust's wire client.")
    p.add_argument("--interval", type=float, default=0.2, help="CPU sampling interval, s.")
    p.add_argument("--out", default="/tmp/avv-bench", help="Work folder (a peers-<time> folder is made in it).")
    p.add_argument("--json", default="", help="Also write every run's figures to this JSON file.")
    args = p.parse_args(argv)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(args.tools) - set(TOOLS)) + sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown or not args.tools or not args.scenarios or args.rounds < 1:
        p.error(f"--tools from {','.join(TOOLS)}, --scenarios from {','.join(SCENARIOS)}, --rounds ≥ 1"
                + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    if args.ttft_jitter_ms is None:
        args.ttft_jitter_ms = bl.spread_jitter_ms(args.tokens_per_s)
    return args


@dataclass(frozen=True)
class Scenario:
    """One server and the load asked of every tool on it."""

    name: str
    profile: dict[str, Any]
    streams: int
    requests: int

    @property
    def expected_s(self) -> float:
        """Server time of the whole load if the tool keeps ``streams`` open: waves × one answer."""
        p = self.profile
        answer = bl.request_seconds(p["ttft_ms"], p["tokens_per_s"], p["output_tokens"])
        return answer * math.ceil(self.requests / self.streams)


def scenarios_of(args: argparse.Namespace) -> list[Scenario]:
    made = {
        "instant": Scenario("instant", bl.sim_profile(0.0, 1e6, args.output_tokens), args.instant_streams,
                            args.instant_requests),
        "paced": Scenario("paced", bl.sim_profile(args.ttft_ms, args.tokens_per_s, args.output_tokens,
                                                  ttft_jitter_ms=args.ttft_jitter_ms),
                          args.paced_streams, args.paced_streams * args.per_stream),
    }
    return [made[name] for name in args.scenarios]


def round_order(tools: list[str], round_index: int) -> list[str]:
    """A B C in even rounds, C B A in odd ones: every tool sees the machine early and late."""
    return list(tools) if round_index % 2 == 0 else list(reversed(tools))


# -------------------------------------------------------------------------------------- client records


@dataclass(frozen=True)
class ClientRecord:
    """One successful request as the tool reports it: the key its truth line is found by, when the tool says it
    started it (monotonic seconds) and its TTFT."""

    key: str
    start: float
    ttft_ms: float


def body_hash(body: dict[str, Any]) -> str:
    """The simulator's ``request_hash`` of a body (model, stream and stream_options left out)."""
    return request_hash(body)


def guidellm_records(report: dict[str, Any], wall_offset: float) -> list[ClientRecord]:
    """guidellm's benchmarks JSON: ``benchmarks[].requests.successful[]`` with ``request_args`` (the JSON of the
    request: its ``body``), ``info.timings.request_start`` (wall-clock s) and ``time_to_first_token_ms``."""
    out = []
    for bench in report.get("benchmarks", []):
        for req in bench.get("requests", {}).get("successful", []):
            ttft = req.get("time_to_first_token_ms")
            start = (req.get("info", {}).get("timings") or {}).get("request_start")
            if ttft is None or start is None:
                continue
            args = req["request_args"]
            body = (json.loads(args) if isinstance(args, str) else args)["body"]
            out.append(ClientRecord(body_hash(body), float(start) - wall_offset, float(ttft)))
    return out


def aiperf_records(export_lines: Iterable[str], inputs: dict[str, Any], wall_offset: float) -> list[ClientRecord]:
    """aiperf's ``profile_export.jsonl`` (one line per request: ``metadata.conversation_id`` / ``turn_index`` /
    ``request_start_ns`` wall-clock ns, ``metrics.time_to_first_token.value`` ms) joined to ``inputs.json``
    (``data[].session_id`` → ``payloads[turn]``: the body sent)."""
    payloads = {entry["session_id"]: entry["payloads"] for entry in inputs.get("data", [])}
    out = []
    for line in export_lines:
        if not line.strip():
            continue
        row = json.loads(line)
        meta, metrics = row.get("metadata", {}), row.get("metrics", {})
        ttft = (metrics.get("time_to_first_token") or {}).get("value")
        turns = payloads.get(meta.get("conversation_id"))
        if ttft is None or turns is None or row.get("error") or meta.get("benchmark_phase", "profiling") != "profiling":
            continue
        body = turns[int(meta.get("turn_index", 0))]
        out.append(ClientRecord(body_hash(body), meta["request_start_ns"] / 1e9 - wall_offset, float(ttft)))
    return out


def avv_records(rows: list[dict[str, Any]]) -> list[ClientRecord]:
    """avv-locust's records.csv rows: the ``X-AVV-Item`` tag, ``t0_monotonic`` and ``ttft_ms`` (successful rows)."""
    return [ClientRecord(truth_tag(r), float(r["t0_monotonic"]), float(r["ttft_ms"]))
            for r in rows if r["status"] == "success" and r.get("ttft_ms") is not None]


# ------------------------------------------------------------------------------------- truth and figures


def join(records: list[ClientRecord], truth: list[dict[str, Any]], key_field: str
         ) -> list[tuple[ClientRecord, dict[str, Any]]]:
    """Pairs (record, truth line) by ``key_field``; records and lines that share a key pair up in time order."""
    lines: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in sorted(truth, key=lambda t: t["t_arrival"]):
        if line.get(key_field) is not None and line.get("t_first_token") is not None:
            lines[line[key_field]].append(line)
    mine: dict[str, list[ClientRecord]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: r.start):
        mine[rec.key].append(rec)
    return [pair for key, recs in mine.items() for pair in zip(recs, lines.get(key, []), strict=False)]


def ttft_errors_ms(pairs: list[tuple[ClientRecord, dict[str, Any]]]) -> dict[str, list[float]]:
    """``ttft_err`` = start + ttft − t_first_token; ``ttft_vs_server`` = ttft − (t_first_token − t_arrival); ms."""
    return {"ttft_err": [(r.start + r.ttft_ms / 1000.0 - t["t_first_token"]) * 1000.0 for r, t in pairs],
            "ttft_vs_server": [r.ttft_ms - (t["t_first_token"] - t["t_arrival"]) * 1000.0 for r, t in pairs]}


def events_written(line: dict[str, Any], tokens_per_chunk: int = 1) -> int:
    """SSE data events the server wrote for one answer: role chunk, token chunks, finish chunk, usage chunk."""
    if line.get("t_first_token") is None:
        return 0
    tokens = int(line.get("completion_tokens") or 0)
    return 1 + math.ceil(tokens / tokens_per_chunk) + (line.get("finish_reason") is not None) + bool(
        line.get("usage_sent"))


def server_phase(truth: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(first arrival, last byte) over the truth lines."""
    if not truth:
        return None
    ends = [t["t_last_byte"] or t["t_arrival"] for t in truth]
    return min(t["t_arrival"] for t in truth), max(ends)


def in_flight(truth: list[dict[str, Any]], points: int = 2000) -> dict[str, float | None]:
    """Streams open at the server (t_arrival → t_last_byte) over time: p50 and max, between the first answer's
    end and the last arrival (the whole phase when that window is empty), sampled at ``points`` instants."""
    spans = [(t["t_arrival"], t["t_last_byte"] or t["t_arrival"]) for t in truth]
    if not spans:
        return {"in_flight_p50": None, "in_flight_max": None}
    a, b = min(end for _, end in spans), max(start for start, _ in spans)
    if b <= a:
        a, b = min(s for s, _ in spans), max(e for _, e in spans)
    times = [a + (b - a) * i / (points - 1) for i in range(points)] if b > a else [a]
    starts, ends = sorted(s for s, _ in spans), sorted(e for _, e in spans)
    counts = [bisect_right(starts, t) - bisect_right(ends, t) for t in times]  # open: start ≤ t < end
    return {"in_flight_p50": statistics.median(counts), "in_flight_max": float(max(counts))}


# ------------------------------------------------------------------------------------------------ tools


@dataclass
class Job:
    """One tool run: where it works, its command, and how its records are read back."""

    command: list[str]
    key_field: str  # the truth-log field its records are joined by
    read: Callable[[float], list[ClientRecord]]  # wall-clock offset → its successful requests
    env: dict[str, str] = field(default_factory=dict)


def prompts(count: int) -> list[str]:
    return [PROMPT.format(i=i) for i in range(count)]


def avv_job(args: argparse.Namespace, work: Path, scenario: Scenario, url: str) -> Job:
    """Headless Locust, one vendor at the simulator's profile URL (literal: the harness starts no simulator)."""
    samples = work / "samples.jsonl"
    samples.write_text("".join(json.dumps({"messages": [{"role": "user", "content": p}]}) + "\n"
                               for p in prompts(scenario.requests)), encoding="utf-8")
    bl.write_yaml(work / "sim.yaml", {"profiles": {bl.PROFILE: scenario.profile}})
    vendor = {"name": bl.PROFILE, "model_id": bl.MODEL, "url": url, "concurrency": scenario.streams,
              "timeout_s": 120.0, "is_baseline": True}
    bl.write_yaml(work / "vendors.yaml", {bl.MODEL: {"vendors": [vendor]}})

    def read(_offset: float) -> list[ClientRecord]:
        path = bl.run_dir(work) / "records.csv"
        return avv_records(bl.record_dicts(bl.load_records(work))) if path.exists() else []

    return Job(bl.locust_command(work, samples, 1, client=args.client), "client_tag", read)


def guidellm_job(exe: str, work: Path, scenario: Scenario, url: str, extra: list[str]) -> Job:
    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts(scenario.requests)), encoding="utf-8")
    report = work / "guidellm.json"
    target = url.removesuffix("/v1")
    command = [exe, "run", "--backend", f"kind=openai_http,target={target},model={bl.MODEL},validate_backend=false",
               "--profile", f"kind=concurrent,streams={scenario.streams}",
               "--constraint", f"kind=max_requests,count={scenario.requests}",
               "--data", f"kind=json_file,path={data}", "--output", f"kind=json,path={report}",
               "--disable-console-interactive", *extra]

    def read(offset: float) -> list[ClientRecord]:
        return guidellm_records(json.loads(report.read_text(encoding="utf-8")), offset) if report.exists() else []

    return Job(command, "request_hash", read, {**PEER_ENV_EXTRA, **OFFLINE})


def word_tokenizer(folder: Path) -> Path:
    """A word-level Hugging Face tokenizer (every word one token) for aiperf, whose builtin tokenizer downloads an
    encoding. With ``--use-server-token-count`` aiperf counts tokens from the server's usage; this one only loads."""
    folder.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1_000_000}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def aiperf_job(exe: str, work: Path, scenario: Scenario, url: str, extra: list[str]) -> Job:
    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps({"text": p}) + "\n" for p in prompts(scenario.requests)), encoding="utf-8")
    artifacts = work / "artifacts"
    command = [exe, "profile", "--model", bl.MODEL, "--url", url.removesuffix("/v1"), "--endpoint-type", "chat",
               "--streaming", "--concurrency", str(scenario.streams), "--request-count", str(scenario.requests),
               "--input-file", str(data), "--custom-dataset-type", "single_turn",
               "--dataset-sampling-strategy", "sequential", "--tokenizer", str(word_tokenizer(work / "tokenizer")),
               "--use-server-token-count", "--no-server-metrics", "--no-gpu-telemetry", "--ui", "none",
               "--output-artifact-dir", str(artifacts), *extra]

    def read(offset: float) -> list[ClientRecord]:
        export, inputs = artifacts / "profile_export.jsonl", artifacts / "inputs.json"
        if not export.exists() or not inputs.exists():
            return []
        with open(export, encoding="utf-8") as lines:
            return aiperf_records(lines, json.loads(inputs.read_text(encoding="utf-8")), offset)

    return Job(command, "request_hash", read, dict(PEER_ENV_EXTRA))


def find_peer(name: str, given: str | None) -> tuple[str | None, str]:
    """(executable, how it was found) or (None, why not): the option, else the environment variable, else PATH."""
    source = given if given is not None else os.environ.get(PEER_ENV[name])
    if source is not None:
        path = shutil.which(source) if source else None
        how = "--" + name if given is not None else "$" + PEER_ENV[name]
        return (path, how) if path else (None, f"{how}={source!r} is not an executable")
    path = shutil.which(name)
    return (path, "PATH") if path else (None, f"not on PATH; give --{name} or ${PEER_ENV[name]}")


def tool_label(tool: str, exe: str | None, client: str) -> str:
    """The tool's name and version as its table column says it."""
    if tool == "avv":
        return f"avv-locust {package_version('avv-locust')} ({client})"
    try:
        said = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120,
                              env={**bl.clean_env(), **PEER_ENV_EXTRA}).stdout
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    found = re.findall(r"\d+\.\d+(?:\.\d+)?\S*", said)
    return f"{tool} {found[-1]}" if found else tool


# -------------------------------------------------------------------------------------------------- runs


def wall_offset() -> float:
    """time.time() − time.monotonic(): the wall-clock stamps of a peer, minus this, are monotonic."""
    return time.time() - time.monotonic()


def tree_cpu_s() -> float:
    """user + system CPU of this process's waited-for descendants (their whole trees, once reaped)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(args: argparse.Namespace, tool: str, exe: str | None, scenario: Scenario, work: Path) -> dict[str, Any]:
    """Start a simulator for the scenario, run the tool against it under the CPU monitor, and compute its figures."""
    work.mkdir(parents=True, exist_ok=True)
    truth_path = work / "sim_truth.jsonl"
    with start_simulator(profiles={bl.PROFILE: scenario.profile}, truth_log=truth_path) as sim:
        url = sim.base_url(bl.PROFILE)
        if tool == "avv":
            job = avv_job(args, work, scenario, url)
        elif tool == "guidellm":
            job = guidellm_job(str(exe), work, scenario, url, shlex.split(args.guidellm_args))
        else:
            job = aiperf_job(str(exe), work, scenario, url, shlex.split(args.aiperf_args))
        command = (["taskset", "-c", str(args.cpu)] if args.cpu is not None else []) + job.command
        (work / "command.txt").write_text(" ".join(command) + "\n", encoding="utf-8")
        before_offset, before_cpu = wall_offset(), tree_cpu_s()
        run = bl.run_monitored(command, work, work / "tool.log", timeout=300 + 10 * scenario.expected_s,
                               interval=args.interval, env_extra=job.env)
        life_cpu = tree_cpu_s() - before_cpu
        after_offset = wall_offset()
    truth = read_truth_log(truth_path) if truth_path.exists() else []
    offset = (before_offset + after_offset) / 2
    records = job.read(offset)
    pairs = join(records, truth, job.key_field)
    errors = ttft_errors_ms(pairs)
    events = sum(events_written(t, scenario.profile["tokens_per_chunk"]) for t in truth)
    phase = server_phase(truth)
    pids = list(run.roles)
    cpu = bl.cpu_seconds(run, pids, *phase) if phase else None
    result: dict[str, Any] = {
        "tool": tool, "scenario": scenario.name, "streams_asked": scenario.streams, "requests_asked": scenario.requests,
        "exit": run.returncode, "work": str(work), "processes": len(pids),
        "answered": sum(t.get("http_status") == 200 and not t.get("client_disconnected") for t in truth),
        "server_lines": len(truth), "client_ok": len(records), "joined": len(pairs), "events": events,
        "phase_s": phase[1] - phase[0] if phase else None, "cpu_phase_s": cpu,
        "us_per_event": 1e6 * cpu / events if cpu is not None and events else None,
        "cpu_life_s": life_cpu, "us_per_event_life": 1e6 * life_cpu / events if events else None,
        "wall_s": run.t_end - run.t_start, "clock_drift_ms": 1000 * (after_offset - before_offset),
        **in_flight(truth),
    }
    for name, values in errors.items():
        for q in (50, 99):
            result[f"{name}_p{q}_ms"] = bl.pct(values, q)
    if abs(result["clock_drift_ms"]) > 1.0:
        print(f"  note: wall clock moved {result['clock_drift_ms']:+.1f} ms against the monotonic clock during the "
              "run; the peers' TTFT errors carry up to that much", flush=True)
    if run.returncode != 0:
        print(f"  {tool} exited with status {run.returncode}; log tail ({work / 'tool.log'}):\n{run.log_tail(1500)}",
              flush=True)
    return result


RAW_HEADERS = ["tool", "scenario", "round", "asked", "answered", "joined", "events", "phase s", "CPU s", "µs/event",
               "life µs/event", "ttft_err p50", "p99", "ttft−server p50", "p99", "in flight p50", "max", "procs",
               "exit"]


def raw_row(r: dict[str, Any]) -> list[str]:
    g = r.get
    return [r["label"], r["scenario"], str(r["round"]), f"{r['streams_asked']}×{r['requests_asked']}",
            str(r["answered"]), str(r["joined"]), str(r["events"]), bl.fmt(g("phase_s"), 1),
            bl.fmt(g("cpu_phase_s"), 2), bl.fmt(g("us_per_event"), 1), bl.fmt(g("us_per_event_life"), 1),
            bl.fmt(g("ttft_err_p50_ms"), 2), bl.fmt(g("ttft_err_p99_ms"), 2), bl.fmt(g("ttft_vs_server_p50_ms"), 2),
            bl.fmt(g("ttft_vs_server_p99_ms"), 2), bl.fmt(g("in_flight_p50"), 0), bl.fmt(g("in_flight_max"), 0),
            str(r["processes"]), str(r["exit"])]


def span(values: list[float | None], digits: int) -> str:
    """'a–b' over the rounds (one value: 'a'; none: '-')."""
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    low, high = bl.fmt(min(got), digits), bl.fmt(max(got), digits)
    return low if low == high else f"{low}–{high}"


def digits_for(values: list[float | None]) -> int:
    got = [abs(v) for v in values if v is not None]
    return 1 if got and max(got) < 10 else 0


def summary_table(results: list[dict[str, Any]], labels: dict[str, str]) -> str:
    """The issue's table (Markdown): a column per tool, each cell the range over the rounds."""
    tools = [t for t in labels if any(r["tool"] == t for r in results)]
    paced = next((r["streams_asked"] for r in results if r["scenario"] == "paced"), None)

    def cells(scenario: str, render: Callable[[list[dict[str, Any]]], str]) -> list[str]:
        return [render([r for r in results if r["tool"] == t and r["scenario"] == scenario]) for t in tools]

    def per_event(rows: list[dict[str, Any]]) -> str:
        values = [r.get("us_per_event") for r in rows]
        text = span(values, digits_for(values))
        return text if text == "-" else text + " µs"

    def two(low: str, high: str) -> Callable[[list[dict[str, Any]]], str]:
        def render(rows: list[dict[str, Any]]) -> str:
            p50, p99 = [r.get(low) for r in rows], [r.get(high) for r in rows]
            if all(v is None for v in p50 + p99):
                return "-"
            return f"{span(p50, digits_for(p50))} / {span(p99, digits_for(p99))} ms"
        return render

    def flight(rows: list[dict[str, Any]]) -> str:
        return span([r.get("in_flight_p50") for r in rows], 0)

    lines = ["| | " + " | ".join(labels[t] for t in tools) + " |", "|---|" + "---|" * len(tools)]
    if any(r["scenario"] == "instant" for r in results):
        lines.append("| CPU per streamed event, instant server | " + " | ".join(cells("instant", per_event)) + " |")
    if paced is not None:
        lines.append(f"| CPU per event, paced, {paced} streams | " + " | ".join(cells("paced", per_event)) + " |")
        lines.append(f"| TTFT error p50 / p99 at {paced} streams | "
                     + " | ".join(cells("paced", two("ttft_err_p50_ms", "ttft_err_p99_ms"))) + " |")
        lines.append(f"| TTFT − server TTFT p50 / p99 at {paced} streams | "
                     + " | ".join(cells("paced", two("ttft_vs_server_p50_ms", "ttft_vs_server_p99_ms"))) + " |")
        lines.append(f"| streams in flight, asked {paced} | " + " | ".join(cells("paced", flight)) + " |")
    return "\n".join(lines)


LEGEND = """\
µs/event = the tool's CPU (every process of its tree) over the server's phase (first arrival → last byte) / SSE
events the server wrote; life µs/event = its whole life's CPU (getrusage, start-up and reports included) / the
same events. ttft_err = the tool's start + TTFT − the server's first-token write, ms (the table's TTFT error);
ttft−server = the tool's TTFT − the server's TTFT, ms (send path + error). in flight = streams open at the server,
p50 / max over time from the first answer's end to the last arrival. Ranges are over the rounds."""


def pin_here(cpu: int | None) -> None:
    """This script and the simulators it starts go to the CPUs the tools do not use."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    others = sorted(set(os.sched_getaffinity(0)) - {cpu}) or [cpu]
    os.sched_setaffinity(0, set(others))
    os.environ["AVV_SIM_CPUS"] = ",".join(map(str, others))  # read by the simulator as it starts (avv_sim.launcher)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"$ {bl.command_line()}")
    print(bl.machine_line(), flush=True)
    if args.cpu is not None and not shutil.which("taskset"):
        print("peers: --cpu needs taskset (util-linux)", file=sys.stderr)
        return 2
    pin_here(args.cpu)
    exes: dict[str, str | None] = {"avv": sys.executable}
    skipped: list[str] = []
    for tool in args.tools:
        if tool != "avv":
            exe, how = find_peer(tool, getattr(args, tool))
            if exe is None:
                skipped.append(f"{tool}: skipped ({how})")
                print(skipped[-1], flush=True)
            exes[tool] = exe
    tools = [t for t in args.tools if exes.get(t)]
    labels = {t: tool_label(t, exes[t], args.client) for t in tools}
    for tool in tools:
        print(f"{labels[tool]}: {exes[tool] if tool != 'avv' else 'python -m locust (this checkout)'}", flush=True)
    scenarios = scenarios_of(args)
    for s in scenarios:
        p = s.profile
        print(f"{s.name} server: ttft {p['ttft_ms']:g} ms ± {p['ttft_jitter_ms']:g}, {p['output_tokens']} tokens at "
              f"{p['tokens_per_s']:g}/s ({bl.events_per_request(p['output_tokens'], 1)} events per answer); "
              f"{s.streams} streams × {s.requests} requests", flush=True)
    print(f"CPU: tools on {'CPU ' + str(args.cpu) if args.cpu is not None else 'any CPU (no --cpu)'}", flush=True)
    base = Path(args.out) / time.strftime("peers-%Y%m%d-%H%M%S")
    results: list[dict[str, Any]] = []
    for round_index in range(args.rounds):
        for scenario in scenarios:
            for tool in round_order(tools, round_index):
                work = base / f"round-{round_index}" / scenario.name / tool
                print(f"\n[round {round_index} {scenario.name} {labels[tool]}] …", flush=True)
                result = measure(args, tool, exes[tool], scenario, work)
                result.update(round=round_index, label=labels[tool])
                results.append(result)
                print(bl.table(RAW_HEADERS, [raw_row(result)]), flush=True)
    print("\nAll runs:\n" + bl.table(RAW_HEADERS, [raw_row(r) for r in results]))
    print(LEGEND)
    print("\n" + summary_table(results, labels))
    for line in skipped:
        print(line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": bl.command_line(), "machine": bl.machine_line(), "options": vars(args),
                   "labels": labels, "skipped": skipped, "runs": results}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results: {args.json}")
    return 0 if all(r["exit"] == 0 and r["joined"] == r["requests_asked"] for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
