"""Each vendor's metrics over the runs of a history, and the changes between runs (scoring layer, above
:mod:`.db` and :mod:`.regression`; rendered by :mod:`.render`).

Runs are ordered by ``started_at`` (then run id). For every run of a vendor, its **previous comparable run** is
the latest earlier run of that vendor with the same sample-set hash (``samples_sha256``); when there is none, the
latest earlier run of that vendor, compared on the sample ids both hold (the change rows say how many). The
paired tests are :func:`avv_scoring.history.regression.compare`. The regressions that ``--fail-on-regression``
gates on are those of each vendor's latest run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_scoring.history.regression import ALPHA, RESAMPLES, SEED, compare, outcomes
from avv_scoring.metrics.registry import interval_metrics, is_metric

ITEM_COLUMNS = ["vendor", "sample_id", "repeat", "success", "called", "tools_sig", "schema_valid", "ttft_ms", "tps"]
CHANGE_COLUMNS = ["model", "vendor", "run_id", "run_index", "previous_run_id", "compared_on", "common_samples",
                  "test", "n", "before", "after", "effect", "relative", "p", "p_holm", "flagged", "direction"]


def default_metrics() -> tuple[str, ...]:
    """The metrics a trend shows unless ``--metric`` says otherwise: every registry metric with an interval."""
    return tuple(m.column for m in interval_metrics())


@dataclass(frozen=True)
class TrendOptions:
    """What ``avv-score trend`` selects and how it tests."""

    model: str | None = None  # only this model
    vendor: str | None = None  # only this vendor
    metrics: tuple[str, ...] = field(default_factory=default_metrics)  # registry columns shown
    since: str | None = None  # runs started on or after this ISO date
    resamples: int = RESAMPLES  # bootstrap resamples of the between-run tests
    seed: int = SEED
    alpha: float = ALPHA


@dataclass(frozen=True)
class Trend:
    """What :func:`compute_trend` found."""

    #: One row per run in the window, oldest first, with ``run_index`` (1-based).
    runs: pd.DataFrame
    #: One row per (run, model, vendor, metric): value, text, ci_low, ci_high, verdict, is_baseline.
    series: pd.DataFrame
    #: One row per (run, model, vendor, test) with a previous comparable run: :data:`CHANGE_COLUMNS`.
    changes: pd.DataFrame
    metrics: tuple[str, ...]
    options: TrendOptions

    def flagged(self) -> pd.DataFrame:
        return self.changes[self.changes["flagged"].astype(bool)] if len(self.changes) else self.changes

    def latest_regressions(self) -> pd.DataFrame:
        """The regressions of each vendor's latest run (what ``--fail-on-regression`` gates on)."""
        if self.changes.empty:
            return self.changes
        last = self.series.groupby(["model", "vendor"])["run_index"].max().rename("last").reset_index()
        rows = self.changes.merge(last, on=["model", "vendor"])
        rows = rows[(rows["run_index"] == rows["last"]) & (rows["direction"] == "regression")]
        return rows.drop(columns="last")


def _check_metrics(metrics: Sequence[str]) -> None:
    unknown = [m for m in metrics if not is_metric(m)]
    if unknown:
        raise InputError(f"--metric: unknown metric(s) {', '.join(unknown)} (avv-score metrics lists them)")


def _where(options: TrendOptions, table: str = "v") -> tuple[str, list[str]]:
    clauses, params = [], []
    if options.model:
        clauses.append(f"{table}.model = ?")
        params.append(options.model)
    if options.vendor:
        clauses.append(f"{table}.vendor = ?")
        params.append(options.vendor)
    return "".join(f" AND {c}" for c in clauses), params


def load_runs(conn: sqlite3.Connection, since: str | None = None) -> pd.DataFrame:
    query = "SELECT * FROM runs" + (" WHERE started_at >= ?" if since else "") + " ORDER BY started_at, run_id"
    runs = pd.read_sql_query(query, conn, params=[since] if since else [])
    runs.insert(0, "run_index", range(1, len(runs) + 1))
    return runs


def load_series(conn: sqlite3.Connection, runs: pd.DataFrame, options: TrendOptions) -> pd.DataFrame:
    where, params = _where(options)
    marks = ",".join("?" * len(options.metrics))
    query = (f"SELECT m.run_id, m.model, m.vendor, m.metric, m.value, m.text, m.ci_low, m.ci_high, v.verdict, "
             f"v.is_baseline FROM metrics m JOIN vendors v ON v.run_id = m.run_id AND v.model = m.model AND "
             f"v.vendor = m.vendor WHERE m.metric IN ({marks}){where}")
    series = pd.read_sql_query(query, conn, params=[*options.metrics, *params])
    series = series.merge(runs[["run_id", "run_index", "started_at"]], on="run_id")
    return series.sort_values(["model", "vendor", "run_index"], kind="stable").reset_index(drop=True)


def load_items(conn: sqlite3.Connection, run_id: str, model: str, codes: dict[str, int] | None = None) -> pd.DataFrame:
    """The model's items of one run. With ``codes``, sample ids become integers (new ids get the next numbers), the
    same id the same number in every run, so the paired tests join and group integers."""
    rows = conn.execute(f"SELECT {', '.join(ITEM_COLUMNS)} FROM items WHERE run_id = ? AND model = ?",
                        (run_id, model)).fetchall()
    items = pd.DataFrame(rows, columns=ITEM_COLUMNS)
    if codes is not None:
        for sample in items["sample_id"].unique().tolist():
            codes.setdefault(sample, len(codes))
        items["sample_id"] = items["sample_id"].map(codes).astype(np.int64)
    return items


def _baselines(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """(run, model) → its baseline vendor."""
    rows = conn.execute("SELECT run_id, model, vendor FROM vendors WHERE is_baseline = 1").fetchall()
    return {(r, m): v for r, m, v in rows}


def compute_changes(conn: sqlite3.Connection, runs: pd.DataFrame, series: pd.DataFrame,
                    options: TrendOptions) -> pd.DataFrame:
    """The paired tests of every vendor's run against its previous comparable run (see the module docstring).
    Outcomes are kept only for the runs a later run can still be compared with (the latest per sample set)."""
    baselines = _baselines(conn)
    hashes = dict(zip(runs["run_id"], runs["samples_sha256"], strict=True))
    index = dict(zip(runs["run_id"], runs["run_index"], strict=True))
    present = series[["model", "vendor", "run_id"]].drop_duplicates()
    rows: list[dict[str, object]] = []
    for model in dict.fromkeys(present["model"]):
        wanted = set(present.loc[present["model"] == model, "vendor"])
        by_hash: dict[tuple[str, object], tuple[str, dict[str, pd.DataFrame], set[int]]] = {}
        latest: dict[str, tuple[str, dict[str, pd.DataFrame], set[int]]] = {}
        codes: dict[str, int] = {}
        for run_id in runs["run_id"]:
            run_vendors = set(present.loc[(present["model"] == model) & (present["run_id"] == run_id), "vendor"])
            if not run_vendors:
                continue
            items = load_items(conn, run_id, model, codes)
            base = baselines.get((run_id, model))
            groups = dict(tuple(items.groupby("vendor", sort=False)))
            base_items = groups.get(base) if base is not None else None
            for vendor in sorted(run_vendors & wanted):
                mine = groups.get(vendor, items.iloc[0:0])
                now = outcomes(mine, None if vendor == base or base_items is None else base_items)
                samples = set(mine["sample_id"].unique().tolist())
                previous = by_hash.get((vendor, hashes[run_id])) or latest.get(vendor)
                if previous is not None:
                    prev_id, before, prev_samples = previous
                    same = hashes[prev_id] == hashes[run_id] and hashes[run_id] is not None
                    common = len(samples & prev_samples)
                    for c in compare(before, now, vendor == base, options.resamples, options.seed, options.alpha):
                        rows.append({"model": model, "vendor": vendor, "run_id": run_id, "run_index": index[run_id],
                                     "previous_run_id": prev_id,
                                     "compared_on": "same sample set" if same else f"{common} common sample ids",
                                     "common_samples": common, **c.__dict__})
                entry = (run_id, now, samples)
                by_hash[(vendor, hashes[run_id])] = latest[vendor] = entry
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def compute_trend(conn: sqlite3.Connection, options: TrendOptions | None = None) -> Trend:
    """Each vendor's metrics over the runs of the history, and the between-run changes."""
    options = options or TrendOptions()
    _check_metrics(options.metrics)
    runs = load_runs(conn, options.since)
    series = load_series(conn, runs, options)
    changes = compute_changes(conn, runs, series, options)
    return Trend(runs, series, changes, tuple(options.metrics), options)


__all__ = ["CHANGE_COLUMNS", "Trend", "TrendOptions", "compute_changes", "compute_trend", "default_metrics",
           "load_items", "load_runs", "load_series"]
