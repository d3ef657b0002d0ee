"""Shared pieces of the benchmark scripts: configs, running Locust under a CPU monitor, joining records
with the simulator's truth log, percentiles and table formatting.

Clock: the harness (``t0_monotonic``, ``ttft_ms``, ``latency_ms``), the simulator's truth log
(``t_arrival``, ``t_first_token``, ``t_last_byte``) and this module's CPU samples all use
``time.monotonic()`` (CLOCK_MONOTONIC, one clock per machine), so their differences are meaningful.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from avv_core.items import truth_tag
from avv_core.measures import is_missing, percentile
from avv_sim.tls import make_certificate  # noqa: F401  (the benches' self-signed certificate)

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = ROOT / "locustfiles" / "vendors.py"
DEMO_SAMPLES = ROOT / "samples" / "demo.jsonl"
MODEL = "bench"
PROFILE = "sim"
RUN_ID = "run"


# ------------------------------------------------------------------------------------------ configs


def clean_env() -> dict[str, str]:
    """This environment without LOCUST_* / AVV_* variables (AVV_SIM_URL would bypass our simulator)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "AVV_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def add_sim_options(p: Any, ttft_ms: float, tokens_per_s: float, output_tokens: int, per_user: int = 3) -> None:
    """The simulator-workload options shared by the benchmark scripts."""
    p.add_argument("--per-user", type=int, default=per_user, help="Requests per Locust user (at least).")
    p.add_argument("--ttft-ms", type=float, default=ttft_ms, help="Simulator ttft_ms.")
    p.add_argument("--tokens-per-s", type=float, default=tokens_per_s, help="Simulator tokens_per_s.")
    p.add_argument("--output-tokens", type=int, default=output_tokens, help="Simulator output_tokens.")
    p.add_argument("--tokens-per-chunk", type=int, default=1, help="Simulator tokens_per_chunk.")
    p.add_argument("--ttft-jitter-ms", type=float, default=None,
                   help="Simulator ttft_jitter_ms (±). Default: half an event interval, so streams are out of "
                        "phase; 0 = all streams in lockstep (worst-case bursts).")
    p.add_argument("--samples", default=str(DEMO_SAMPLES), help="Sample JSONL (request bodies).")
    p.add_argument("--json", default="", help="Also write the results to this JSON file.")
    p.add_argument("--interval", type=float, default=0.2, help="CPU sampling interval, s.")
    p.add_argument("--client", default="lean", choices=["lean", "requests"],
                   help="The harness's wire client (--avv-client; issue 28): lean (default) or requests.")


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def sim_profile(ttft_ms: float, tokens_per_s: float, output_tokens: int, tokens_per_chunk: int = 1,
                ttft_jitter_ms: float = 0.0) -> dict[str, Any]:
    """One simulator profile: content-only answers (``tool_call_rate`` 0), no faults."""
    return {"ttft_ms": ttft_ms, "ttft_jitter_ms": ttft_jitter_ms, "tokens_per_s": tokens_per_s,
            "output_tokens": output_tokens, "tokens_per_chunk": tokens_per_chunk, "tool_call_rate": 0.0}


def spread_jitter_ms(tokens_per_s: float, tokens_per_chunk: int = 1) -> float:
    """TTFT jitter (±) that spreads the streams' phases over one event interval: ½ · chunk / tokens_per_s.

    Without it every stream started in the same spawn wave sends its events in the same millisecond
    (lockstep), and the client has to work through N events (and at the end N tails + N new requests)
    in one burst."""
    return 500.0 * tokens_per_chunk / tokens_per_s


def vendor_config(concurrency: int, timeout_s: float = 120.0) -> dict[str, Any]:
    """ONE vendor (the baseline) on the simulator's ``PROFILE``, with ``concurrency`` Locust users."""
    vendor = {"name": PROFILE, "model_id": MODEL, "url": "{sim}/" + PROFILE + "/v1", "concurrency": concurrency,
              "timeout_s": timeout_s, "is_baseline": True}
    return {MODEL: {"vendors": [vendor]}}


def plan_items(concurrency: int, per_user: int, available: int) -> tuple[int, int]:
    """(samples, repeats) with samples · repeats ≥ wanted = concurrency · per_user: exactly wanted when it has
    a divisor in [available / 2, available] (every user then does the same number of requests), else
    samples = min(available, wanted) and repeats = ⌈wanted / samples⌉."""
    wanted = max(1, concurrency * per_user)
    top = max(1, min(available, wanted))
    for samples in range(top, max(1, top // 2) - 1, -1):
        if wanted % samples == 0:
            return samples, wanted // samples
    return top, math.ceil(wanted / top)


def subset_samples(src: Path, dest: Path, count: int) -> Path:
    """The first ``count`` non-empty lines of a sample JSONL."""
    lines = [line for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    dest.write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
    return dest


def count_samples(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def events_per_request(output_tokens: int, tokens_per_chunk: int) -> int:
    """SSE data events of one content answer: role chunk + ⌈tokens / per chunk⌉ + finish chunk + usage chunk."""
    return 1 + math.ceil(output_tokens / tokens_per_chunk) + 2


def request_seconds(ttft_ms: float, tokens_per_s: float, output_tokens: int) -> float:
    """Server-side duration of one answer: ttft + (tokens − 1) / tokens_per_s."""
    return ttft_ms / 1000.0 + max(0, output_tokens - 1) / tokens_per_s


def locust_command(work: Path, samples: Path, repeats: int, extra: list[str] | None = None,
                   client: str = "lean") -> list[str]:
    """Headless Locust on our locustfile with the vendor/sim configs written in ``work``; no pre-flight request,
    so the simulator's truth log holds exactly the items measured."""
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", *(extra or []), "--avv-client", client,
            "--avv-preflight", "off",
            "--avv-config", str(work / "vendors.yaml"), "--avv-sim-config", str(work / "sim.yaml"),
            "--avv-samples", str(samples), "--avv-repeats", str(repeats), "--avv-out", str(work / "out"),
            "--avv-run-id", RUN_ID, "--avv-no-score", "--avv-retries", "0"]


# ------------------------------------------------------------------------------------------------ TLS


def tls_env(cert: Path, key: Path) -> dict[str, str]:
    """The environment that makes a Locust run start its simulator over TLS and trust its certificate."""
    return {"AVV_SIM_TLS_CERT": str(cert), "AVV_SIM_TLS_KEY": str(key), "REQUESTS_CA_BUNDLE": str(cert)}


# ------------------------------------------------------------------------------- the floor: json.loads


def sse_data_lines(body: bytes) -> list[bytes]:
    """The JSON data lines of an SSE body (``[DONE]`` left out)."""
    lines = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    return [line for line in lines if line and line != b"[DONE]"]


def fetch_events(url: str, body: bytes, verify: Any = True) -> list[bytes]:
    """One answer's data lines, read whole with requests (the floor's events: what the client decodes)."""
    import requests

    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    return sse_data_lines(requests.post(url, data=body, headers=headers, timeout=30, verify=verify).content)


def json_loads_us(events: list[bytes], min_cpu_s: float = 0.2) -> float:
    """CPU µs of one ``json.loads`` of an event, averaged over ``events`` (decoded from bytes, as the client
    receives them) repeated for at least ``min_cpu_s`` of CPU: the physical floor of reading one event."""
    loads = json.loads
    n = 0
    start = time.process_time()
    while True:
        for data in events:
            loads(data)
        n += len(events)
        spent = time.process_time() - start
        if spent >= min_cpu_s:
            return 1e6 * spent / n


def child_result(script: str, tree: Path, runs: dict[str, str], timed: int) -> dict[str, Any]:
    """Run ``script --child TREE`` (a same-run ``--before`` comparison's timing of one checkout, in a process of
    its own so that it imports only that checkout's code) and return the JSON of its last output line."""
    cmd = [sys.executable, script, "--child", str(tree), "--child-runs", json.dumps(runs),
           "--repeats-timed", str(timed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tree)
    if proc.returncode != 0:
        raise SystemExit(f"child for {tree} failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def command_line() -> str:
    """This script's exact command line (interpreter included)."""
    return shlex.join([sys.executable, *sys.argv])


# -------------------------------------------------------------------------------------- CPU monitor


@dataclass
class CpuSample:
    t: float  # time.monotonic()
    cpu: dict[int, float]  # pid → user + system CPU seconds of that process alone (children excluded)


@dataclass
class Monitored:
    """A finished process tree run: exit status, wall span and CPU samples of every process seen."""

    returncode: int
    t_start: float
    t_end: float
    samples: list[CpuSample] = field(default_factory=list)
    roles: dict[int, str] = field(default_factory=dict)  # pid → "locust" | "worker" | "sim"
    log: Path | None = None

    def pids(self, role: str) -> list[int]:
        return [pid for pid, r in self.roles.items() if r == role]

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log and self.log.exists() else ""


def _own_cpu(proc: psutil.Process) -> float | None:
    """user + system seconds of the process itself (psutil keeps children_* apart)."""
    try:
        times = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return times.user + times.system


def _role(proc: psutil.Process) -> str:
    try:
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return "other"
    return "sim" if "avv_sim" in cmdline else "worker"


def _sample(root: psutil.Process, roles: dict[int, str], known: dict[int, psutil.Process]) -> CpuSample:
    now = time.monotonic()
    cpu: dict[int, float] = {}
    value = _own_cpu(root)
    if value is not None:
        cpu[root.pid] = value
    try:
        children = root.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        children = []
    for child in children:
        proc = known.setdefault(child.pid, child)
        if roles.get(child.pid, "worker") == "worker":  # a child caught between fork and exec looks like locust
            role = _role(child)
            if child.pid not in roles or role == "sim":
                roles[child.pid] = role
        value = _own_cpu(proc)
        if value is not None:
            cpu[child.pid] = value
    return CpuSample(now, cpu)


def _exited(pid: int) -> bool:
    """Has the child exited? (``WNOWAIT``: it stays a zombie, so its final CPU times can still be read.)"""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def run_monitored(cmd: list[str], cwd: Path, log: Path, timeout: float, interval: float = 0.2,
                  env_extra: dict[str, str] | None = None) -> Monitored:
    """Run ``cmd`` (stdout+stderr → ``log``), sampling the CPU times of it and its descendants every
    ``interval`` s until it exits; the last sample is taken from the zombie, i.e. the final totals."""
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**clean_env(), **(env_extra or {})}, stdout=out,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    t_start = time.monotonic()
    root = psutil.Process(proc.pid)
    roles, known = {proc.pid: "locust"}, {}
    samples: list[CpuSample] = []
    try:
        while not _exited(proc.pid):
            samples.append(_sample(root, roles, known))
            if time.monotonic() - t_start > timeout:
                proc.kill()
                break
            time.sleep(interval)
        samples.append(_sample(root, roles, known))
    finally:
        returncode = proc.wait()
    return Monitored(returncode, t_start, time.monotonic(), samples, roles, log)


def cpu_at(samples: list[CpuSample], pid: int, t: float) -> float:
    """CPU seconds of ``pid`` at time ``t``, linearly interpolated between samples (clamped to the
    first / last sample in which the process was seen)."""
    points = [(s.t, s.cpu[pid]) for s in samples if pid in s.cpu]
    if not points:
        return 0.0
    if t <= points[0][0]:
        return points[0][1]
    for (ta, ca), (tb, cb) in zip(points, points[1:], strict=False):
        if t <= tb:
            return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
    return points[-1][1]


def cpu_percent(run: Monitored, pids: list[int], start: float, end: float) -> float | None:
    """Σ over ``pids`` of (CPU s at end − CPU s at start) / (end − start) · 100 (100 = one core busy)."""
    if not pids or end <= start:
        return None
    used = sum(cpu_at(run.samples, pid, end) - cpu_at(run.samples, pid, start) for pid in pids)
    return 100.0 * used / (end - start)


def lifetime_cpu_percent(run: Monitored, pid: int) -> float | None:
    """Whole-life CPU of one process: final CPU s / (last sample − process start) · 100."""
    final = cpu_at(run.samples, pid, math.inf)
    span = (run.samples[-1].t if run.samples else run.t_end) - run.t_start
    return 100.0 * final / span if span > 0 else None


# --------------------------------------------------------------------------------- records & truth


def run_dir(work: Path) -> Path:
    return work / "out" / RUN_ID


def load_records(work: Path) -> Any:
    """records.csv of the run as a typed DataFrame."""
    from avv_core.record_file import read_records

    return read_records(run_dir(work) / "records.csv")


def load_truth(path: Path) -> dict[str, dict[str, Any]]:
    """Truth lines by ``client_tag`` (the harness's ``X-AVV-Item``)."""
    out: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("client_tag"):
                out[row["client_tag"]] = row
    return out


def streaming_phase(frame: Any) -> tuple[float, float]:
    """(min t0, max end) over all records, end = t0_monotonic + latency_ms / 1000."""
    ends = frame["t0_monotonic"] + frame["latency_ms"].fillna(0) / 1000.0
    return float(frame["t0_monotonic"].min()), float(ends.max())


def events_per_second(frame: Any) -> float | None:
    """Σ chunks / (max end − min t0): SSE data events consumed per second of the streaming phase."""
    if len(frame) == 0:
        return None
    start, end = streaming_phase(frame)
    return float(frame["chunks"].fillna(0).sum()) / (end - start) if end > start else None


def record_dicts(frame: Any) -> list[dict[str, Any]]:
    """Rows of a records frame as dicts, missing values (NaN / pd.NA) as None."""
    return [{k: (None if is_missing(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


def errors_ms(records: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> dict[str, list[float]]:
    """Per successful record joined to a truth line with a first token, in ms:

    - ``ttft_err`` = (t0 + ttft_ms/1000) − t_first_token   (client saw the first token − server wrote it)
    - ``lat_err``  = (t0 + latency_ms/1000) − t_last_byte  (client saw the end − server sent the last bytes)
    - ``send``     = ttft_ms − (t_first_token − t_arrival)·1000   (measured TTFT − server TTFT)
    - ``arrival``  = t_arrival − t0   (send path alone: t0 → the server's handler starts)
    - ``lag``      = the record's own ``client_lag_ms`` (NaN when absent), aligned with ``ttft_err``
    """
    out: dict[str, list[float]] = {"ttft_err": [], "lat_err": [], "send": [], "arrival": [], "lag": []}
    for rec in records:
        line = truth.get(truth_tag(rec))
        if rec["status"] != "success" or not line or line.get("t_first_token") is None or rec["ttft_ms"] is None:
            continue
        t0 = rec["t0_monotonic"]
        lag = rec.get("client_lag_ms")
        out["lag"].append(float(lag) if lag is not None and lag == lag else float("nan"))
        out["ttft_err"].append((t0 + rec["ttft_ms"] / 1000.0 - line["t_first_token"]) * 1000.0)
        out["lat_err"].append((t0 + rec["latency_ms"] / 1000.0 - line["t_last_byte"]) * 1000.0)
        out["send"].append(rec["ttft_ms"] - (line["t_first_token"] - line["t_arrival"]) * 1000.0)
        out["arrival"].append((line["t_arrival"] - t0) * 1000.0)
    return out


def steady_window(frame: Any, users: int) -> tuple[float, float] | None:
    """(a, b): a = the ``users``-th smallest t0 (every user has started), b = the ``users``-th largest end
    (after it fewer than ``users`` requests remain): the part of the run without ramp-up and tail."""
    t0s = sorted(frame["t0_monotonic"].tolist())
    ends = sorted((frame["t0_monotonic"] + frame["latency_ms"].fillna(0) / 1000.0).tolist())
    if len(t0s) < users or users < 1:
        return None
    a, b = t0s[users - 1], ends[-users]
    return (a, b) if b > a else None


def steady_events_per_second(frame: Any, users: int) -> float | None:
    """Events/s inside :func:`steady_window`: each record's chunks are spread evenly over its streaming span
    [t0 + ttft, t0 + latency] and pro-rated by its overlap with the window; Σ / window length."""
    window = steady_window(frame, users)
    if window is None:
        return None
    a, b = window
    total = 0.0
    for t0, ttft, latency, chunks in zip(frame["t0_monotonic"], frame["ttft_ms"], frame["latency_ms"],
                                         frame["chunks"], strict=True):
        if is_missing(latency) or is_missing(chunks) or not chunks:
            continue
        start = t0 + (0.0 if is_missing(ttft) else ttft / 1000.0)
        end = t0 + latency / 1000.0
        overlap = max(0.0, min(b, end) - max(a, start))
        total += chunks * (overlap / (end - start) if end > start else float(a <= end <= b))
    return total / (b - a)


# ---------------------------------------------------------------------------------------- numbers


def pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (:func:`avv_core.measures.percentile`: linear interpolation between closest
    ranks); None for no values."""
    value = percentile([v for v in values if v is not None], q)
    return None if math.isnan(value) else value


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Right-aligned plain-text table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def machine_line() -> str:
    from importlib.metadata import version

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"machine: {os.cpu_count()} CPUs, load average {load}; Python {sys.version.split()[0]}, "
            f"locust {version('locust')}")


def lag_tracking(ttft_err: list[float], lag: list[float], slack_ms: float = 1.0) -> dict[str, float | None]:
    """How well ``client_lag_ms`` bounds the true client delay, over records with both:

    - ``lag_covers_pct``: % of records with ttft_err ≤ client_lag_ms + ``slack_ms`` (the bound holds; the
      slack covers the loopback + parsing floor, ~0.3 ms, which is delay but not lag);
    - ``lag_p50_ms`` / ``lag_p99_ms``: the column's own percentiles, to set beside ttft_err's;
    - ``lag_err_corr``: Pearson correlation of lag and ttft_err (does lag rise where the error rises?).
    """
    pairs = [(e, g) for e, g in zip(ttft_err, lag, strict=True) if g == g]
    if not pairs:
        return {"lag_covers_pct": None, "lag_p50_ms": None, "lag_p99_ms": None, "lag_err_corr": None}
    errs, lags = [e for e, _ in pairs], [g for _, g in pairs]
    covered = sum(e <= g + slack_ms for e, g in pairs)
    return {"lag_covers_pct": 100.0 * covered / len(pairs), "lag_p50_ms": pct(lags, 50), "lag_p99_ms": pct(lags, 99),
            "lag_err_corr": _correlation(errs, lags)}


def _correlation(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def cpu_seconds(run: Monitored, pids: list[int], start: float, end: float) -> float | None:
    """Σ over ``pids`` of CPU s (user+system) spent between ``start`` and ``end``."""
    if not pids or end <= start:
        return None
    return sum(cpu_at(run.samples, pid, end) - cpu_at(run.samples, pid, start) for pid in pids)
