"""The run history database (scoring layer, below :mod:`.store` and :mod:`.trend`): one SQLite file, its
versioned schema, opening (create / migrate / refuse) and the queries the trend reads. SQLite because it is in
the standard library: no new dependency, one file a cron job can copy, and a 1 M-item run is written in a few
seconds (bench/history.py). docs/history.md documents every table and column.

Tables (schema version :data:`SCHEMA_VERSION`):

- ``schema_version(version)`` — one row: the schema this file was written with.
- ``runs`` — one row per run: ids, times, hashes, the harness version and how it was scored.
- ``vendors`` — one row per (run, model, vendor): identity (keys never stored), baseline, verdict, IRF.
- ``metrics`` — one row per (run, model, vendor, registry metric): its value (or text), and for a metric with
  an interval its 95 % bounds (the ``<m>_ci_low`` / ``_ci_high`` columns are rows of their own as well).
- ``items`` — one row per (run, model, vendor, sample, repeat): the per-item outcomes the paired tests read.

Opening a file of an older schema applies :data:`MIGRATIONS` in order; a version with no migration path, or a
newer one, is refused with an :class:`~avv_core.errors.InputError` that says what to do.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping

from avv_core.errors import InputError

#: The schema this version writes. Raise it with every change, and add the step from the previous one to
#: :data:`MIGRATIONS`.
SCHEMA_VERSION = 1

SCHEMA: tuple[str, ...] = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,          -- the run folder's name
        started_at TEXT,                  -- ISO 8601 UTC (run.json)
        ended_at TEXT,
        added_at TEXT NOT NULL,           -- when it entered the history
        mode TEXT,                        -- verify | stress
        completed INTEGER,                -- 1 when every item was recorded
        stop_reason TEXT,
        config_identity TEXT,             -- hash of (model, vendor, url) of every vendor (run.json)
        config_sha256 TEXT,               -- sha256 of the redacted vendor config as run.json holds it
        samples_sha256 TEXT,              -- the sample-set hash: comparable runs share it
        sample_ids_sha256 TEXT,
        samples_count INTEGER,
        harness_version TEXT,             -- avv-locust's version that scored it
        thresholds TEXT,                  -- the thresholds preset (name) the verdicts checked
        verdict_mode TEXT,                -- threshold | statistical
        bootstrap INTEGER,                -- resamples of the intervals
        seed INTEGER,
        records INTEGER,                  -- items scored
        source TEXT                       -- the run folder (or records.csv) it was read from
    )""",
    """CREATE TABLE vendors (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        model TEXT NOT NULL, vendor TEXT NOT NULL,
        model_id TEXT, endpoint TEXT, url TEXT,     -- identity (no key, no header value)
        is_baseline INTEGER, baseline TEXT,
        verdict TEXT, verdict_reasons TEXT, irf REAL,
        PRIMARY KEY (run_id, model, vendor)
    )""",
    """CREATE TABLE metrics (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        model TEXT NOT NULL, vendor TEXT NOT NULL,
        metric TEXT NOT NULL,             -- a registry column (avv-score metrics)
        value REAL,                       -- NULL when missing or a text metric
        text TEXT,                        -- a text metric's value (error_kinds, …)
        ci_low REAL, ci_high REAL,        -- the 95 % interval, for interval metrics
        PRIMARY KEY (run_id, model, vendor, metric)
    )""",
    """CREATE TABLE items (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        model TEXT NOT NULL, vendor TEXT NOT NULL, sample_id TEXT NOT NULL, repeat INTEGER NOT NULL,
        success INTEGER NOT NULL,         -- status == success
        called INTEGER NOT NULL,          -- successful and finished with tool_calls (the trigger positive)
        tools_sig TEXT,                   -- hash of the sorted called names (equal = tool match); NULL: no call
        calls_sig TEXT,                   -- hash of the sorted (name, canonical arguments) (equal = args match)
        schema_valid INTEGER,             -- every call valid against the schema; NULL: no call or uncheckable
        ttft_ms REAL, tps REAL,
        PRIMARY KEY (run_id, model, vendor, sample_id, repeat)
    ) WITHOUT ROWID""",  # clustered on its key: the key is not stored twice (as an index)
    "CREATE INDEX metrics_by_metric ON metrics (model, vendor, metric)",
)

#: version → the function that brings a connection of that version to version + 1. Empty at version 1.
MIGRATIONS: Mapping[int, Callable[[sqlite3.Connection], None]] = {}


def connect(path: str | os.PathLike[str], create: bool = True) -> sqlite3.Connection:
    """The history at ``path``, created (``create``) when missing, migrated when older. InputError when it is not
    a history database, is newer than this version, or is older without a migration path."""
    name = os.fspath(path)
    if not create and not os.path.exists(name):
        raise InputError(f"{name}: no such history database (create it with avv-score history add RUN --db {name})")
    try:
        conn = sqlite3.connect(name)
        conn.execute("PRAGMA foreign_keys = ON")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{name}: not a history database ({exc})") from None
    if not tables:
        with conn:
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        return conn
    if "schema_version" not in tables:
        conn.close()
        raise InputError(f"{name}: not an avv-locust history database (no schema_version table)")
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        conn.close()
        raise InputError(f"{name}: written by a newer avv-locust (history schema {version}; this version reads "
                         f"up to {SCHEMA_VERSION}): upgrade avv-locust to read it")
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            conn.close()
            raise InputError(f"{name}: history schema {version} cannot be migrated to {SCHEMA_VERSION}: re-import "
                             f"the run folders into a new file (avv-score history add RUN... --db NEW.sqlite)")
        with conn:
            step(conn)
            conn.execute("UPDATE schema_version SET version = ?", (version + 1,))
        version += 1
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row else 0


__all__ = ["MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "connect", "schema_version"]
