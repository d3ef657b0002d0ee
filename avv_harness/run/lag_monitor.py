"""The client's own delay: a lag monitor per Locust process, and the client-load summary.

A greenlet sleeps a short fixed interval and measures how late it wakes. When it wakes ``lag`` seconds
late, the process could not run greenlets for that long (CPU saturated, a blocking call, a GC pause),
so any stream event that arrived meanwhile was read late by up to that much. For one record,
``client_lag_ms`` = the largest lag whose blocked span overlaps [t0, first token]: an upper bound on how
much of its TTFT is the client's own delay. The monitor also samples the process CPU once a second
(``client_cpu_pct`` on each record).

Thresholds (README "Client load"): a process whose lag p99 exceeds :data:`LAG_P99_BOUND_MS` or whose
CPU passes :data:`CPU_BOUND_PCT` is *client-bound*: its TTFT and TPS figures are partly its own delay.
:func:`client_bound_cause` tells a busy load generator from a busy machine by the process's own CPU.
"""

from __future__ import annotations

import gc
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from avv_core.measures import is_missing, percentile

INTERVAL_S = 0.005  # how often the monitor wakes
HORIZON_S = 300.0  # how far back lag samples are kept (longer than any TTFT we care about)
LAG_P99_BOUND_MS = 5.0
CPU_BOUND_PCT = 85.0
# With a high lag, own CPU at or above this (% of one core, the max of the 1 s samples) means the process's own
# work can explain it; below, the machine's other load does (see client_bound_cause)
CPU_OWN_LOAD_PCT = 50.0
# Collector thresholds while users run (bench/README.md "500 streams": p99 TTFT error ~4x lower at 500 streams)
LOAD_GC_THRESHOLD = (5000, 50, 1000)


class LagMonitor:
    """Wake-up lag samples of this process (gevent). ``start()`` spawns the greenlet; pure queries."""

    def __init__(self, interval_s: float = INTERVAL_S, horizon_s: float = HORIZON_S):
        self.interval_s = interval_s
        self._keep = int(horizon_s / interval_s)
        self._wakes: list[float] = []  # plain lists (bisect is O(log n)); trimmed in halves
        self._lags: list[float] = []
        self.cpu_pct: float | None = None
        self._started: float | None = None
        self._greenlets: list[Any] = []

    def start(self, spawn: Any = None) -> LagMonitor:
        """Spawn the watcher greenlets (with ``spawn``, e.g. a runner's greenlet group, so they end with it)."""
        import gevent

        spawn = spawn or gevent.spawn
        self._started = time.monotonic()
        self._greenlets = [spawn(self._watch), spawn(self._cpu)]
        return self

    def stop(self) -> None:
        for greenlet in self._greenlets:
            greenlet.kill(block=False)
        self._greenlets = []

    def _watch(self) -> None:
        import gevent

        while True:
            expected = time.monotonic() + self.interval_s
            gevent.sleep(self.interval_s)
            now = time.monotonic()
            self.add(now, max(0.0, now - expected))

    def _cpu(self) -> None:
        import gevent
        import psutil

        process = psutil.Process()
        process.cpu_percent(None)
        while True:
            gevent.sleep(1.0)
            self.cpu_pct = process.cpu_percent(None)

    def add(self, wake_s: float, lag_s: float) -> None:
        self._wakes.append(wake_s)
        self._lags.append(lag_s)
        if len(self._wakes) > 2 * self._keep:
            del self._wakes[: self._keep], self._lags[: self._keep]

    def max_lag_ms(self, start_s: float, end_s: float, now_s: float | None = None) -> float:
        """Largest lag (ms) whose blocked span [wake − lag, wake] overlaps [start, end]; 0 when none did.

        A stall still in progress counts too: when the monitor is overdue (it has not woken since
        ``interval`` before now, because the caller itself kept the loop busy), that pending lag is taken
        as a sample waking now."""
        last = self._wakes[-1] if self._wakes else self._started
        if last is None or end_s < start_s:
            return 0.0
        wakes, lags = self._wakes, self._lags
        now = time.monotonic() if now_s is None else now_s
        pending = now - (last + self.interval_s)
        worst = pending if pending > 0 and now - pending <= end_s and now >= start_s else 0.0
        i = bisect_left(wakes, start_s)
        n = len(wakes)
        while i < n:
            wake, lag = wakes[i], lags[i]
            if wake > end_s + 1.0:  # a stall that began before `end` shows at the next wake; look 1 s past it
                break
            if wake - lag <= end_s and lag > worst:
                worst = lag
            i += 1
        return worst * 1000.0


def quiet_gc_for_load() -> Callable[[], None]:
    """Make the cyclic garbage collector pause the event loop less while users stream; returns the undo.

    Every collection stops all greenlets. With Python's defaults (700, 10, 10) a process streaming 500
    answers collects the young generation ~20 times a second, and the objects of in-flight requests, which
    live for seconds, are rescanned by older-generation collections that also walk every object made at
    start-up (modules, the sample file): pauses of 20–60 ms, seen as TTFT error. So: collect once, move
    everything alive now into the permanent generation (``gc.freeze``: never scanned again), and raise the
    young threshold so most request objects are freed by reference counting before any collection runs.
    Memory is still freed by reference counting; only cycles wait longer."""
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*LOAD_GC_THRESHOLD)

    def undo() -> None:
        gc.unfreeze()
        gc.set_threshold(*previous)

    return undo


def client_load(rows: Iterable[Mapping[str, Any]] | None = None, *, columns: Mapping[str, Sequence[Any]] | None
                = None) -> dict[str, Any]:
    """Per process (``worker``) and vendor: lag p50 / p99 over records, the process CPU (mean and max of the
    samples the records carry), and whether the process was client-bound. Pure: used by the harness (for
    run.json and the terminal) and by scoring (the report), so both say the same. Give ``rows`` (dicts) or
    ``columns`` (worker, vendor, client_lag_ms, client_cpu_pct as sequences). Big tables are grouped by the
    caller and handed to :func:`summarise_load`."""
    if columns is not None:
        zipped = zip(columns["worker"], columns["vendor"], columns["client_lag_ms"], columns["client_cpu_pct"],
                     strict=True)
    else:
        zipped = ((r.get("worker"), r.get("vendor"), r.get("client_lag_ms"), r.get("client_cpu_pct"))
                  for r in rows or ())
    groups: dict[str, LoadGroup] = {}
    for worker, vendor, lag, cpu in zipped:
        entry = groups.setdefault(process_name(worker), LoadGroup({}, []))
        if not is_missing(lag):
            entry.lags.setdefault(str(vendor), []).append(float(lag))
        if not is_missing(cpu):
            entry.cpu.append(float(cpu))
    return summarise_load(groups)


class LoadGroup(NamedTuple):
    """One process's samples: lags (ms) per vendor and its CPU samples (%), missing values left out."""

    lags: Mapping[str, Sequence[float]]
    cpu: Sequence[float]


def process_name(worker: Any) -> str:
    """The process a record came from; "?" when the record does not say."""
    return "?" if is_missing(worker) or worker == "" else str(worker)


def summarise_load(groups: Mapping[str, LoadGroup]) -> dict[str, Any]:
    """:func:`client_load`'s table from samples already grouped by process (see :class:`LoadGroup`)."""
    out: dict[str, Any] = {}
    for worker, entry in sorted(groups.items()):
        lags = {v: np.asarray(values, dtype=float) for v, values in entry.lags.items() if len(values)}
        cpu = np.asarray(entry.cpu, dtype=float)
        all_lags = np.concatenate(list(lags.values())) if lags else np.zeros(0)
        if not all_lags.size and not cpu.size:
            continue  # records made without a lag monitor
        lag_p99 = percentile(all_lags, 99)
        cpu_max = float(cpu.max()) if cpu.size else None
        bound = (lag_p99 == lag_p99 and lag_p99 > LAG_P99_BOUND_MS) or (cpu_max is not None and cpu_max > CPU_BOUND_PCT)
        out[worker] = {
            "vendors": {v: {"lag_p50_ms": _round(percentile(values, 50)), "lag_p99_ms": _round(percentile(values, 99)),
                            "records": int(values.size)} for v, values in sorted(lags.items())},
            "lag_p50_ms": _round(percentile(all_lags, 50)), "lag_p99_ms": _round(lag_p99),
            "cpu_mean_pct": _round(float(cpu.mean())) if cpu.size else None,
            "cpu_max_pct": _round(cpu_max), "client_bound": bool(bound),
        }
    return out


def client_bound_cause(entry: Mapping[str, Any]) -> str | None:
    """Which condition made a process client-bound (one :func:`client_load` entry), or None when it was not:

    - ``own_load``: lag p99 > :data:`LAG_P99_BOUND_MS` and its own CPU reached :data:`CPU_OWN_LOAD_PCT` or more —
      the process itself is too busy: the load generator is the bottleneck;
    - ``machine_busy``: lag p99 high but its own CPU stayed below :data:`CPU_OWN_LOAD_PCT` — its own work cannot
      explain the delay: the machine is busy with something else (another process, e.g. a vendor or the
      simulator on the same host, or too few cores for everything running);
    - ``cpu``: CPU max > :data:`CPU_BOUND_PCT` with a lag p99 within bound;
    - ``lag``: lag p99 high and the CPU not measured."""
    lag, cpu = entry.get("lag_p99_ms"), entry.get("cpu_max_pct")
    lag_high = lag is not None and lag == lag and lag > LAG_P99_BOUND_MS
    if lag_high:
        if cpu is None:
            return "lag"
        return "own_load" if cpu >= CPU_OWN_LOAD_PCT else "machine_busy"
    return "cpu" if cpu is not None and cpu > CPU_BOUND_PCT else None


def client_bound_advice(load: Mapping[str, Any]) -> list[str]:
    """One line per client-bound process: which condition fired (:func:`client_bound_cause`), what it means for
    its TTFT / TPS, and what to do."""
    lines = []
    for worker, entry in load.items():
        cause = client_bound_cause(entry)
        if cause is None:
            continue
        lag = f"event-loop lag p99 {entry['lag_p99_ms']} ms > {LAG_P99_BOUND_MS:g} ms"
        cpu = entry.get("cpu_max_pct")
        lines.append({
            "own_load": f"{worker} was client-bound: {lag} with its own CPU up to {cpu} %, so the load generator is "
                        "the bottleneck and its TTFT / TPS include its own delay. Add worker processes "
                        "(--processes N) or workers on other machines, or lower the concurrency.",
            "machine_busy": f"{worker} was delayed by its machine: {lag} while its own CPU stayed at most {cpu} % "
                            f"(< {CPU_OWN_LOAD_PCT:g} %), so the machine is busy with something else (another process, "
                            "e.g. a vendor or the simulator on the same host) and the measured TTFT includes the "
                            "machine's delay. Move the load generator or the other load to another machine; more "
                            "processes here would not help.",
            "cpu": f"{worker} was client-bound: its CPU reached {cpu} % > {CPU_BOUND_PCT:g} % (lag p99 "
                   f"{entry['lag_p99_ms']} ms), so its TTFT / TPS may include its own delay. Add worker processes "
                   "(--processes N) or workers on other machines, or lower the concurrency.",
            "lag": f"{worker} was client-bound: {lag} (its CPU was not measured): its own work or other load on the "
                   "machine delayed it, and its TTFT / TPS include that delay. Add worker processes or move other "
                   "load off the machine.",
        }[cause])
    return lines


def _round(value: float | None) -> float | None:
    return None if value is None or value != value else round(float(value), 3)
