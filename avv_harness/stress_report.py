"""Stress-mode outputs: per vendor × level table, capacity per vendor, plots, report section.

Formulas (per vendor and level, over records that *started* in the level):
- ``requests`` = records; ``success_rate`` = successes / requests;
- ``rate_429`` = records with error_kind http_429 / requests; ``rate_<kind>`` likewise for every error kind;
- ``ttft_p50_ms``/``ttft_p95_ms``/``ttft_p99_ms`` and ``latency_p50_ms``/``latency_p95_ms`` over successes;
- ``tokens_per_s`` = Σ completion_tokens of successes / level duration (aggregate output throughput);
- ``tps_p50`` = median per-request TPS.
Per vendor: ``capacity`` = highest level meeting the SLO (error share ≤ slo_error_rate and TTFT p95 ≤
slo_ttft_p95_ms); ``first_429_level`` = lowest level with rate_429 > 1 %; ``peak_tokens_per_s``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .records import ERROR_KINDS, read_records

STRESS_COLUMNS = [
    "vendor", "level", "requests", "success_rate", "rate_429", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms",
    "latency_p50_ms", "latency_p95_ms", "tokens_per_s", "tps_p50",
    *[f"rate_{k}" for k in ERROR_KINDS if k != "http_429"], "meets_slo",
]
CAPACITY_COLUMNS = ["vendor", "capacity", "first_429_level", "peak_tokens_per_s", "stopped_after_level"]


def level_table(records: Any, step_s: float, slo_ttft_p95_ms: float, slo_error_rate: float):
    """One row per (vendor, level) with the formulas in the module docstring."""
    import pandas as pd

    rows = []
    staged = records[records["level"].notna()]
    for (vendor, level), group in staged.groupby(["vendor", "level"], sort=True):
        ok = group[group["status"] == "success"]
        n = len(group)
        kinds = group["error_kind"].fillna("")
        row = {
            "vendor": vendor, "level": int(level), "requests": n,
            "success_rate": len(ok) / n, "rate_429": float((kinds == "http_429").mean()),
            "ttft_p50_ms": ok["ttft_ms"].quantile(0.50), "ttft_p95_ms": ok["ttft_ms"].quantile(0.95),
            "ttft_p99_ms": ok["ttft_ms"].quantile(0.99),
            "latency_p50_ms": ok["latency_ms"].quantile(0.50), "latency_p95_ms": ok["latency_ms"].quantile(0.95),
            "tokens_per_s": float(ok["completion_tokens"].fillna(0).sum()) / step_s,
            "tps_p50": ok["tps"].median(),
        }
        for kind in ERROR_KINDS:
            if kind != "http_429":
                row[f"rate_{kind}"] = float((kinds == kind).mean())
        error_share = 1.0 - row["success_rate"]
        row["meets_slo"] = bool(len(ok) and error_share <= slo_error_rate and row["ttft_p95_ms"] <= slo_ttft_p95_ms)
        rows.append(row)
    return pd.DataFrame(rows, columns=STRESS_COLUMNS)


def capacity_table(levels: Any, stopped_after: dict[str, int] | None = None):
    import pandas as pd

    rows = []
    for vendor, group in levels.groupby("vendor", sort=True):
        meeting = group[group["meets_slo"]]
        over_429 = group[group["rate_429"] > 0.01]
        rows.append({
            "vendor": vendor,
            "capacity": int(meeting["level"].max()) if len(meeting) else None,
            "first_429_level": int(over_429["level"].min()) if len(over_429) else None,
            "peak_tokens_per_s": float(group["tokens_per_s"].max()),
            "stopped_after_level": (stopped_after or {}).get(vendor),
        })
    frame = pd.DataFrame(rows, columns=CAPACITY_COLUMNS)
    for col in ("capacity", "first_429_level", "stopped_after_level"):
        frame[col] = frame[col].astype("Int64")
    return frame


def plot(levels: Any, column: str, ylabel: str, path: Path, slo: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for vendor, group in levels.groupby("vendor", sort=True):
        ax.plot(group["level"], group[column], marker="o", label=vendor)
    if slo is not None:
        ax.axhline(slo, color="grey", linestyle="--", linewidth=1, label="SLO")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(levels["level"].unique()))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("concurrency (users per vendor)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def markdown(capacity: Any, levels: Any, slo_ttft_p95_ms: float, slo_error_rate: float) -> str:
    def cell(value: Any, fmt: str = "{}") -> str:
        return "" if _missing(value) else fmt.format(value)

    lines = ["## Stress: capacity per vendor", "",
             f"SLO: TTFT p95 ≤ {slo_ttft_p95_ms:g} ms and error share ≤ {slo_error_rate:g}.", "",
             "| Vendor | Capacity | First 429 level | Peak tokens/s |", "|---|---|---|---|"]
    for row in capacity.itertuples(index=False):
        lines.append(f"| {row.vendor} | {cell(row.capacity)} | {cell(row.first_429_level)} | "
                     f"{cell(row.peak_tokens_per_s, '{:.1f}')} |")
    lines += ["", "| Vendor | Level | Requests | Success | 429 share | TTFT p95 (ms) | Latency p95 (ms) "
              "| Tokens/s | SLO |", "|---|---|---|---|---|---|---|---|---|"]
    for row in levels.itertuples(index=False):
        lines.append(f"| {row.vendor} | {row.level} | {row.requests} | {row.success_rate:.3f} | {row.rate_429:.3f} | "
                     f"{cell(row.ttft_p95_ms, '{:.0f}')} | {cell(row.latency_p95_ms, '{:.0f}')} | "
                     f"{row.tokens_per_s:.1f} | {'yes' if row.meets_slo else 'no'} |")
    lines += ["", "![TTFT p95](stress_ttft_p95.png) ![tokens/s](stress_tokens_per_s.png)", ""]
    return "\n".join(lines)


def terminal(capacity: Any) -> str:
    head = f"{'Vendor':<24} {'Capacity':>8} {'First 429':>9} {'Peak tok/s':>10}"
    lines = ["Stress: capacity per vendor", head, "-" * len(head)]
    for row in capacity.itertuples(index=False):
        def show(v: Any) -> str:
            return "-" if _missing(v) else str(v)

        lines.append(f"{row.vendor:<24} {show(row.capacity):>8} {show(row.first_429_level):>9} "
                     f"{row.peak_tokens_per_s:>10.1f}")
    return "\n".join(lines)


def _missing(value: Any) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


def write_stress_outputs(run_dir: Path, plan: Any) -> str:
    records = read_records(run_dir / "records.csv")
    levels = level_table(records, plan.step_s, plan.slo_ttft_p95_ms, plan.slo_error_rate)
    capacity = capacity_table(levels, getattr(plan, "stopped_after", None))
    levels.to_csv(run_dir / "stress.csv", index=False, float_format="%.3f")
    capacity.to_csv(run_dir / "capacity.csv", index=False, float_format="%.3f")
    if len(levels):
        plot(levels, "ttft_p95_ms", "TTFT p95 (ms)", run_dir / "stress_ttft_p95.png", plan.slo_ttft_p95_ms)
        plot(levels, "tokens_per_s", "aggregate output tokens/s", run_dir / "stress_tokens_per_s.png")
    report = run_dir / "report.md"
    section = markdown(capacity, levels, plan.slo_ttft_p95_ms, plan.slo_error_rate)
    existing = report.read_text(encoding="utf-8") if report.exists() else "# avv-locust report\n\n"
    report.write_text(existing.rstrip() + "\n\n" + section, encoding="utf-8")
    return terminal(capacity)
