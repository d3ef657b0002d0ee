"""The client-load summary (core: pure, used by the harness for run.json and the terminal and by scoring for the
report, so both say the same): per Locust process, its event-loop lag and CPU over the records it made, whether it
was *client-bound*, why, and what to do.

Thresholds (README "Client load"): a process whose lag p99 exceeds :data:`LAG_P99_BOUND_MS` or whose CPU passes
:data:`CPU_BOUND_PCT` is client-bound: its TTFT and TPS figures are partly its own delay. :func:`client_bound_cause`
tells a busy load generator from a busy machine by the process's own CPU. The lag itself is measured by the
harness's lag monitor (:mod:`avv_harness.run.lag_monitor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.measures import is_missing, percentile

LAG_P99_BOUND_MS = 5.0
CPU_BOUND_PCT = 85.0
# With a high lag, own CPU at or above this (% of one core, the max of the 1 s samples) means the process's own
# work can explain it; below, the machine's other load does (see client_bound_cause)
CPU_OWN_LOAD_PCT = 50.0


def client_load(rows: Iterable[JSONMapping] | None = None, *, columns: Mapping[str, Sequence[JSONValue]] | None
                = None) -> JSONObject:
    """Per process (``worker``) and vendor: lag p50 / p99 over records, the process CPU (mean and max of the
    samples the records carry), and whether the process was client-bound. Pure: used by the harness (for
    run.json and the terminal) and by scoring (the report), so both say the same. Give ``rows`` (dicts) or
    ``columns`` (worker, vendor, client_lag_ms, client_cpu_pct as sequences). Big tables are grouped by the
    caller and handed to :func:`summarise_load`."""
    zipped: Iterable[tuple[JSONValue, JSONValue, JSONValue, JSONValue]]
    if columns is not None:
        zipped = zip(columns["worker"], columns["vendor"], columns["client_lag_ms"], columns["client_cpu_pct"],
                     strict=True)
    else:
        zipped = ((r.get("worker"), r.get("vendor"), r.get("client_lag_ms"), r.get("client_cpu_pct"))
                  for r in rows or ())
    lags: dict[str, dict[str, list[float]]] = {}  # per process: per vendor
    cpus: dict[str, list[float]] = {}  # per process
    for worker, vendor, lag, cpu in zipped:
        process = process_name(worker)
        process_lags, process_cpu = lags.setdefault(process, {}), cpus.setdefault(process, [])
        if not is_missing(lag):
            process_lags.setdefault(str(vendor), []).append(float(lag))
        if not is_missing(cpu):
            process_cpu.append(float(cpu))
    return summarise_load({process: LoadGroup(lags[process], cpus[process]) for process in lags})


class LoadGroup(NamedTuple):
    """One process's samples: lags (ms) per vendor and its CPU samples (%), missing values left out."""

    lags: Mapping[str, Sequence[float]]
    cpu: Sequence[float]


def process_name(worker: object) -> str:
    """The process a record came from; "?" when the record does not say."""
    return "?" if is_missing(worker) or worker == "" else str(worker)


def summarise_load(groups: Mapping[str, LoadGroup]) -> JSONObject:
    """:func:`client_load`'s table from samples already grouped by process (see :class:`LoadGroup`)."""
    out: JSONObject = {}
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


def client_bound_cause(entry: JSONMapping) -> str | None:
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


#: What a late event loop does to the times of the lean client, which times events by the kernel's arrival stamps.
STAMPED = ("the lean client on Linux times events by their arrival, so there only a late send or connect; each "
           "record's client_lag_ms bounds it")


def client_bound_advice(load: JSONMapping) -> list[str]:
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
                        f"the bottleneck and its TTFT / TPS may include its own delay ({STAMPED}). Add worker "
                        "processes (--processes N) or workers on other machines, or lower the concurrency.",
            "machine_busy": f"{worker} was delayed by its machine: {lag} while its own CPU stayed at most {cpu} % "
                            f"(< {CPU_OWN_LOAD_PCT:g} %), so the machine is busy with something else (another process, "
                            "e.g. a vendor or the simulator on the same host) and the measured TTFT may include the "
                            f"machine's delay ({STAMPED}). Move the load generator or the other load to another "
                            "machine; more processes here would not help.",
            "cpu": f"{worker} was client-bound: its CPU reached {cpu} % > {CPU_BOUND_PCT:g} % (lag p99 "
                   f"{entry['lag_p99_ms']} ms), so its TTFT / TPS may include its own delay. Add worker processes "
                   "(--processes N) or workers on other machines, or lower the concurrency.",
            "lag": f"{worker} was client-bound: {lag} (its CPU was not measured): its own work or other load on the "
                   f"machine delayed it, and its TTFT / TPS may include that delay ({STAMPED}). Add worker "
                   "processes or move other load off the machine.",
        }[cause])
    return lines


def _round(value: float | None) -> float | None:
    return None if value is None or value != value else round(float(value), 3)
