"""Each vendor's metrics over the runs of a history, and the changes between runs (scoring layer, above
:mod:`.db` and :mod:`.regression`; rendered by :mod:`.render`).

Runs are ordered by ``started_at`` (then run id). For every run of a vendor, its **previous comparable run** is
the latest earlier run of that vendor with the same sample-set hash (``samples_sha256``); when there is none, the
latest earlier run of that vendor, compared on the sample ids both hold (the change rows say how many). The
paired tests are :func:`avv_scoring.history.regression.compare`; a large change whose p falls just short is a
near-miss. A run whose verdict (PASS / FAIL / INCONCLUSIVE, the rule of :mod:`avv_scoring.decision`, stored with
the run) differs from its previous comparable run's is a verdict change. What ``--fail-on-regression`` gates on:
each vendor's latest run's flagged regressions, and its verdict becoming FAIL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.decision_options import FAIL
from avv_core.errors import InputError
from avv_core.frame_rows import frame_records
from avv_scoring.decision import verdict_of
from avv_scoring.history.regression import ALPHA, RESAMPLES, SEED, compare, outcomes
from avv_scoring.metrics.registry import interval_metrics, is_metric

ITEM_COLUMNS = ["vendor", "sample_id", "repeat", "success", "called", "tools_sig", "schema_valid", "ttft_ms", "tps"]
CHANGE_COLUMNS = ["model", "vendor", "run_id", "run_index", "previous_run_id", "compared_on", "common_samples",
                  "test", "n", "before", "after", "effect", "relative", "p", "p_holm", "flagged", "direction",
                  "near_miss"]
VERDICT_CHANGE_COLUMNS = ["model", "vendor", "run_id", "run_index", "previous_run_id", "before", "after",
                          "reasons", "regression"]


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
    #: :meth:`verdict_changes`, found on its first call (the outputs ask for it several times); read-only frames
    _found: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    def flagged(self) -> pd.DataFrame:
        return self.changes[self.changes["flagged"].astype(bool)] if len(self.changes) else self.changes

    def near_misses(self) -> pd.DataFrame:
        """Large changes whose p fell just short of the flag (:data:`~.regression.NEAR_MISS`), with their p."""
        return self.changes[self.changes["near_miss"].astype(bool)] if len(self.changes) else self.changes

    def verdict_changes(self) -> pd.DataFrame:
        """Every run whose verdict differs from the vendor's previous comparable run's (:data:`VERDICT_CHANGE_COLUMNS`;
        ``regression``: it became FAIL)."""
        if "verdict_changes" not in self._found:
            self._found["verdict_changes"] = verdict_changes(self.series, self.changes)
        return self._found["verdict_changes"].copy(deep=False)

    def latest_verdict_regressions(self) -> pd.DataFrame:
        """The verdict changes to FAIL of each vendor's latest run (``--fail-on-regression`` gates on them too)."""
        changes = self.verdict_changes()
        if changes.empty:
            return changes
        last = self.series.groupby(["model", "vendor"])["run_index"].max().rename("last").reset_index()
        rows = changes.merge(last, on=["model", "vendor"])
        return rows[(rows["run_index"] == rows["last"]) & rows["regression"].astype(bool)].drop(columns="last")

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
             f"v.verdict_reasons, v.is_baseline FROM metrics m JOIN vendors v ON v.run_id = m.run_id AND "
             f"v.model = m.model AND v.vendor = m.vendor WHERE m.metric IN ({marks}){where}")
    series = pd.read_sql_query(query, conn, params=[*options.metrics, *params])
    series["verdict"] = series["verdict"].map(verdict_of)  # runs scored before the three-way rule: pass / fail
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


def verdict_changes(series: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """Per vendor, each run whose verdict (PASS / FAIL / INCONCLUSIVE; older runs' ``pass`` / ``fail`` read as
    such) differs from its previous comparable run's — the run :func:`compute_changes` compared it with, else the
    vendor's previous run in the window."""
    if series.empty:
        return pd.DataFrame(columns=VERDICT_CHANGE_COLUMNS)
    runs = series.drop_duplicates(["model", "vendor", "run_index"]).sort_values(["model", "vendor", "run_index"])
    previous = {(c["model"], c["vendor"], c["run_id"]): c["previous_run_id"]
                for c in frame_records(changes[["model", "vendor", "run_id", "previous_run_id"]])}
    rows: list[dict[str, object]] = []
    for (model, vendor), part in runs.groupby(["model", "vendor"], sort=False):
        said = {r["run_id"]: (verdict_of(r["verdict"]), r) for r in frame_records(part)}
        order = list(part["run_id"])
        for i, run_id in enumerate(order):
            before_id = previous.get((model, vendor, run_id)) or (order[i - 1] if i else None)
            if before_id is None or before_id not in said:
                continue
            before, after = said[before_id][0], said[run_id][0]
            if before and after and before != after:
                row = said[run_id][1]
                rows.append({"model": model, "vendor": vendor, "run_id": run_id, "run_index": row["run_index"],
                             "previous_run_id": before_id, "before": before, "after": after,
                             "reasons": str(row.get("verdict_reasons") or ""), "regression": after == FAIL})
    return pd.DataFrame(rows, columns=VERDICT_CHANGE_COLUMNS)


def compute_trend(conn: sqlite3.Connection, options: TrendOptions | None = None) -> Trend:
    """Each vendor's metrics over the runs of the history, and the between-run changes."""
    options = options or TrendOptions()
    _check_metrics(options.metrics)
    runs = load_runs(conn, options.since)
    series = load_series(conn, runs, options)
    changes = compute_changes(conn, runs, series, options)
    return Trend(runs, series, changes, tuple(options.metrics), options)


__all__ = ["CHANGE_COLUMNS", "VERDICT_CHANGE_COLUMNS", "Trend", "TrendOptions", "compute_changes", "compute_trend",
           "default_metrics", "load_items", "load_runs", "load_series", "verdict_changes"]
