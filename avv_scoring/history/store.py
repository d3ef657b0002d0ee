"""Putting a scored run into the history (scoring layer, above :mod:`.db`, beside :mod:`.trend`): a
:class:`~avv_scoring.score.ScoreResult` and its run.json → one ``runs`` row, its ``vendors``, every registry
metric of every vendor (``metrics``) and the per-item outcomes (``items``). Idempotent by run id: a run already
in the history adds nothing. The harness calls :func:`add_result` with the result it has just scored;
``avv-score history add`` calls :func:`add_run_folder`, which scores the folder as ``avv-score`` does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_core.frame_rows import Cell, frame_records
from avv_core.manifest import RunManifest
from avv_core.version import project_version
from avv_scoring.entrypoints import score_inputs
from avv_scoring.load import OK_COL, resolve_inputs
from avv_scoring.metrics.calls import SIG_CALLS, SIG_TOOLS, TC_INVALID, TC_N, TC_UNCHECKABLE, TOOL_CALLS
from avv_scoring.metrics.registry import METRICS
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.score import ScoreResult

#: Rows written per executemany batch (memory stays flat at 1 M items).
BATCH = 50_000


@dataclass(frozen=True)
class Added:
    """What :func:`add_result` did with one run."""

    run_id: str
    added: bool  # False: the run id was already in the history (nothing written)
    items: int  # item rows written
    source: str


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def signature(sig: object) -> str | None:
    """A short stable hash of a call signature (the sorted names, or sorted (name, canonical arguments)); None
    for an item without calls."""
    if not isinstance(sig, tuple) or not sig:
        return None
    return hashlib.sha256(repr(sig).encode()).hexdigest()[:16]


def run_id_of(result: ScoreResult, manifest: RunManifest | None) -> str:
    """The run id: run.json's, else the records' single ``run_id`` (InputError when they hold several)."""
    if manifest is not None and manifest.run_id:
        return manifest.run_id
    ids = sorted({str(v) for v in result.records["run_id"].dropna()}) if result.records is not None else []
    if len(ids) != 1:
        raise InputError(f"{', '.join(result.inputs) or 'records'}: a history entry is one run; these records "
                         f"hold {len(ids)} run ids ({', '.join(ids[:5])})")
    return ids[0]


def _number(value: Cell) -> float | None:
    if value is None or isinstance(value, str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)


#: One row of the metrics table: (run, model, vendor, metric, value, text, ci_low, ci_high).
MetricRow = tuple[str, str, str, str, float | None, str | None, float | None, float | None]


def metric_rows(run_id: str, scores: pd.DataFrame) -> Iterator[MetricRow]:
    """(run, model, vendor, metric, value, text, ci_low, ci_high) for every registry metric of every vendor."""
    for row in frame_records(scores):
        for m in METRICS:
            value = row.get(m.column)
            number = None if m.fmt == "text" else _number(value)
            low = _number(row.get(f"{m.column}_ci_low")) if m.interval else None
            high = _number(row.get(f"{m.column}_ci_high")) if m.interval else None
            yield (run_id, str(row["model"]), str(row["vendor"]), m.column, number,
                   _text(value) if m.fmt == "text" else None, low, high)


def item_frame(records: pd.DataFrame) -> pd.DataFrame:
    """The per-item outcomes of annotated, de-duplicated records (one row per model, vendor, sample, repeat; an
    agent task's last step): success, called (the trigger positive), the two call signatures, schema valid,
    TTFT, TPS."""
    if records is None or records.empty:
        return pd.DataFrame(columns=["model", "vendor", "sample_id", "repeat", "success", "called", "tools_sig",
                                     "calls_sig", "schema_valid", "ttft_ms", "tps"])
    ok = records[OK_COL].astype(bool).to_numpy()
    finish = (records["finish_reason"].astype("object") == TOOL_CALLS).fillna(False).to_numpy(dtype=bool)
    n_calls = pd.to_numeric(records[TC_N], errors="coerce").fillna(0).to_numpy()
    invalid = pd.to_numeric(records[TC_INVALID], errors="coerce").fillna(0).to_numpy()
    unchecked = pd.to_numeric(records[TC_UNCHECKABLE], errors="coerce").fillna(0).to_numpy()
    with_calls = ok & ((n_calls > 0) | finish)
    # schema_valid: the registry's schema_response_accuracy per item — a successful tool_calls response is valid
    # when every call is (a tool_calls finish without a call is not); uncheckable or not such a response: NULL
    responses = ok & finish
    valid = np.where(responses & ((invalid > 0) | (n_calls == 0)), 0.0, 1.0)
    valid = np.where(~responses | ((unchecked > 0) & (valid == 1.0)), np.nan, valid)
    sigs: dict[Hashable, str | None] = {}  # equal signatures are hashed once

    def hashed(values: pd.Series) -> list[str | None]:
        out: list[str | None] = []
        for sig, keep in zip(values.tolist(), with_calls, strict=True):
            if not keep:
                out.append(None)
                continue
            if sig not in sigs:
                sigs[sig] = signature(sig)
            out.append(sigs[sig])
        return out

    frame = pd.DataFrame({
        "model": records["model"].astype(str).to_numpy(), "vendor": records["vendor"].astype(str).to_numpy(),
        "sample_id": records["sample_id"].astype(str).to_numpy(),
        "repeat": pd.to_numeric(records["repeat"], errors="coerce").fillna(1).astype(int).to_numpy(),
        "success": ok.astype(int), "called": (ok & finish).astype(int),
        "tools_sig": hashed(records[SIG_TOOLS]), "calls_sig": hashed(records[SIG_CALLS]),
        "schema_valid": valid,
        "ttft_ms": pd.to_numeric(records["ttft_ms"], errors="coerce").to_numpy(),
        "tps": pd.to_numeric(records["tps"], errors="coerce").to_numpy(),
    })
    return frame.drop_duplicates(["model", "vendor", "sample_id", "repeat"], keep="last")


def _cell(value: object) -> object:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def has_run(conn: sqlite3.Connection, run_id: str) -> bool:
    return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None


def add_result(conn: sqlite3.Connection, result: ScoreResult, manifest: RunManifest | None,
               source: str = "") -> Added:
    """Add one scored run (one transaction); nothing when its run id is already in the history. The transaction
    takes the write lock before it looks for the run id, so two processes adding the same run add it once."""
    run_id = run_id_of(result, manifest)
    if has_run(conn, run_id):
        return Added(run_id, False, 0, source)
    m = manifest or RunManifest(run_id=run_id)
    samples = m.samples or {}
    items = item_frame(result.records) if result.records is not None else item_frame(pd.DataFrame())
    identity = {(v.get("model"), v.get("name")): v for v in m.vendors}
    with conn:
        conn.execute("BEGIN IMMEDIATE")  # waits (db.BUSY_TIMEOUT_S) for another writer, then holds the file
        if has_run(conn, run_id):
            return Added(run_id, False, 0, source)
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, m.started_at or None, m.ended_at, datetime.now(timezone.utc).isoformat(timespec="seconds"),
             m.mode, int(bool(m.completed)) if manifest is not None else None, m.stop_reason,
             m.config_identity or None, _sha256(m.vendors) if m.vendors else None, samples.get("sha256"),
             samples.get("ids_sha256"), samples.get("count"), project_version(), result.thresholds.name,
             result.stats.verdict, result.stats.resamples, result.stats.seed, len(items), source))
        vendor_rows = []
        for row in frame_records(result.scores):
            ident = identity.get((row["model"], row["vendor"]), {})
            vendor_rows.append((run_id, str(row["model"]), str(row["vendor"]), ident.get("model_id"),
                                ident.get("endpoint"), ident.get("url"), int(bool(row.get("is_baseline"))),
                                _text(row.get("baseline")), _text(row.get("verdict")),
                                _text(row.get("verdict_reasons")), _number(row.get("irf"))))
        conn.executemany("INSERT INTO vendors VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", vendor_rows)
        conn.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?)", metric_rows(run_id, result.scores))
        columns = [items[c].to_numpy(dtype=object) for c in items.columns]
        for start in range(0, len(items), BATCH):
            chunk = [c[start:start + BATCH] for c in columns]
            conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             ((run_id, *map(_cell, values)) for values in zip(*chunk, strict=True)))
    return Added(run_id, True, len(items), source)


def add_run_folder(conn: sqlite3.Connection, path: str | os.PathLike[str], stats: StatsSettings | None = None,
                   **score_options: object) -> Added:
    """Score a run folder (or records.csv) as ``avv-score`` does, without writing its outputs, and add it. A run
    already in the history is not scored again."""

    name = os.fspath(path)
    (run_input,) = resolve_inputs([name])
    manifest = run_input.manifest
    if manifest is not None and manifest.run_id and has_run(conn, manifest.run_id):
        return Added(manifest.run_id, False, 0, name)
    result = score_inputs([name], stats=stats, **score_options)
    return add_result(conn, result, manifest, name)


def add_run_folders(conn: sqlite3.Connection, paths: Sequence[str], stats: StatsSettings | None = None,
                    **score_options: object) -> list[Added]:
    return [add_run_folder(conn, path, stats, **score_options) for path in paths]


__all__ = ["Added", "add_result", "add_run_folder", "add_run_folders", "has_run", "item_frame",
           "metric_rows", "run_id_of", "signature"]
