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

Several processes may use one file at once (a nightly ``--avv-history`` run, a ``history add``, a ``trend``):
the schema is created, each migration step runs and each run is added in one transaction that takes SQLite's
write lock first (``BEGIN IMMEDIATE``), and a process waits up to :data:`BUSY_TIMEOUT_S` for another's lock.
Every SQLite error (locked, read-only, disk full, corrupted) is an InputError naming the file and what to do
(:func:`database_error`; :func:`open_history` applies it).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

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

#: How long (seconds) a process waits for another process's lock on the history before it gives up (SQLite's busy
#: timeout). The longest lock anyone holds is one run being added (:func:`~avv_scoring.history.store.add_result`,
#: one transaction): about 10 µs per item (bench/history.py: 20,000 items in 0.14–0.31 s on a loaded machine), so
#: ~15 s for a 1 M-item run, and a writer may queue behind one or two of them. A ``trend`` only reads (a writer
#: waits for it at most one query). Five minutes covers a 10 M-item run on a slow disk; a lock held longer is a
#: stuck process (a ``sqlite3`` shell left in a transaction) that a person has to see, not wait out. SQLite's and
#: Python's default, 5 s, is shorter than adding a big run: the second writer failed and its run was left out.
BUSY_TIMEOUT_S = 300.0

# SQLite's primary result codes (https://sqlite.org/rescode.html) that say what is wrong with the file.
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 3, 5, 6, 8, 10, 11, 13, 14, 26
#: Each code's message text (Python < 3.11 has no ``sqlite_errorcode``; the text is SQLite's own, stable).
_CODE_OF_TEXT = {"database is locked": _BUSY, "database table is locked": _LOCKED,
                 "attempt to write a readonly database": _READONLY, "disk i/o error": _IOERR,
                 "database disk image is malformed": _CORRUPT, "database or disk is full": _FULL,
                 "unable to open database file": _CANTOPEN, "file is not a database": _NOTADB,
                 "access permission denied": _PERM}
#: Runs already in the history add nothing, so running the same command again is safe.
_AGAIN = "try again (a run already in the history adds nothing)"
#: Re-import advice: what a person does with a history that cannot be read.
_NEW_FILE = "re-import the run folders into a new file (avv-score history add RUN... --db NEW.sqlite)"


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF  # an extended code's primary code
    text = str(exc).lower()
    return next((c for t, c in _CODE_OF_TEXT.items() if t in text), None)


def database_error(path: str, exc: sqlite3.Error, timeout_s: float | None = None) -> InputError:
    """The :class:`InputError` for a SQLite error on the history ``path``: which file, what is wrong with it
    (locked by another process, read-only, disk full, corrupted, cannot be opened) and what to do."""
    code, detail = _code(exc), str(exc)
    timeout_s = BUSY_TIMEOUT_S if timeout_s is None else timeout_s
    if code in (_BUSY, _LOCKED):
        return InputError(f"{path}: the history database is locked by another process (waited {timeout_s:g} s): "
                          f"another 'avv-score history add' or '--avv-history' run is writing it, or a program "
                          f"holds it in a transaction (a sqlite3 shell?). What was being written was rolled back; "
                          f"{_AGAIN} once that process has finished (avv-score history/trend --lock-timeout S waits "
                          f"longer)")
    if code in (_READONLY, _PERM):
        return InputError(f"{path}: the history database is read-only for this user ({detail}): make the file and "
                          f"its folder writable (SQLite writes a journal file beside it), or pass another --db")
    if code == _FULL:
        return InputError(f"{path}: the disk holding the history database is full ({detail}): what was being "
                          f"written was rolled back; free space, then {_AGAIN}")
    if code == _CORRUPT:
        return InputError(f"{path}: the history database is corrupted ({detail}): restore it from a copy, or "
                          f"recover what can be read ('sqlite3 {path} .recover | sqlite3 NEW.sqlite'), or "
                          f"{_NEW_FILE}")
    if code == _NOTADB:
        return InputError(f"{path}: not a history database ({detail}: not an SQLite file, or its header is "
                          f"corrupted): pass the right --db, or move the file away and {_NEW_FILE}")
    if code == _CANTOPEN:
        return InputError(f"{path}: the history database or its journal cannot be opened ({detail}): its folder "
                          f"must exist and be writable (SQLite writes a journal file beside it)")
    if code == _IOERR:
        return InputError(f"{path}: the disk reported an I/O error on the history database ({detail}): check the "
                          f"disk and its free space, then {_AGAIN}")
    return InputError(f"{path}: the history database failed ({type(exc).__name__}: {detail})")


def _sqlite_cause(exc: BaseException) -> sqlite3.Error | None:
    """``exc`` or the SQLite error it wraps (pandas' ``read_sql`` raises its own DatabaseError from it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, sqlite3.Error):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextmanager
def database_errors(path: str | os.PathLike[str], timeout_s: float | None = None) -> Iterator[None]:
    """Every SQLite error inside (also one wrapped by pandas) becomes :func:`database_error`'s InputError."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:
        cause = _sqlite_cause(exc)
        if cause is None:
            raise
        raise database_error(os.fspath(path), cause, timeout_s) from exc


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _create(conn: sqlite3.Connection) -> None:
    """The schema, in one transaction that takes the write lock first: of two processes creating the same new file,
    the second waits, then finds the tables and creates nothing (no "table already exists", no half schema)."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        if _tables(conn):
            return
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))


def _migrate(conn: sqlite3.Connection, name: str) -> None:
    """Bring the file to :data:`SCHEMA_VERSION`, one step per transaction, each under the write lock and from the
    version read under it (another process may have migrated it meanwhile)."""
    while True:
        version = _checked_version(conn, name)
        if version == SCHEMA_VERSION:
            return
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            version = _checked_version(conn, name)
            if version == SCHEMA_VERSION:
                return
            step = MIGRATIONS.get(version)
            if step is None:
                raise InputError(f"{name}: history schema {version} cannot be migrated to {SCHEMA_VERSION}: "
                                 f"{_NEW_FILE}")
            step(conn)
            conn.execute("UPDATE schema_version SET version = ?", (version + 1,))


def _checked_version(conn: sqlite3.Connection, name: str) -> int:
    version = schema_version(conn)
    if version is None:
        raise InputError(f"{name}: its schema_version table holds no version (not written by avv-locust, or "
                         f"damaged): {_NEW_FILE}")
    if version > SCHEMA_VERSION:
        raise InputError(f"{name}: written by a newer avv-locust (history schema {version}; this version reads "
                         f"up to {SCHEMA_VERSION}): upgrade avv-locust to read it")
    return version


def connect(path: str | os.PathLike[str], create: bool = True,
            timeout_s: float | None = None) -> sqlite3.Connection:
    """The history at ``path``, created (``create``) when missing, migrated when older; another process's lock is
    waited for up to ``timeout_s`` (default :data:`BUSY_TIMEOUT_S`). InputError when it is not a history database,
    is newer than this version, is older without a migration path, or SQLite fails (:func:`database_error`:
    locked, read-only, full, corrupted)."""
    name = os.fspath(path)
    timeout_s = BUSY_TIMEOUT_S if timeout_s is None else timeout_s
    if not create and not os.path.exists(name):
        raise InputError(f"{name}: no such history database (create it with avv-score history add RUN --db {name})")
    with database_errors(name, timeout_s):
        conn = sqlite3.connect(name, timeout=timeout_s)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            tables = _tables(conn)
            if not tables and not create:
                raise InputError(f"{name}: an empty history database: add runs with avv-score history add RUN "
                                 f"--db {name}")
            if not tables:
                _create(conn)
                tables = _tables(conn)
            if "schema_version" not in tables:
                raise InputError(f"{name}: not an avv-locust history database (no schema_version table)")
            _migrate(conn, name)
        except BaseException:
            conn.close()
            raise
    return conn


@contextmanager
def open_history(path: str | os.PathLike[str], create: bool = True,
                 timeout_s: float | None = None) -> Iterator[sqlite3.Connection]:
    """:func:`connect`, closed at the end; every SQLite error inside is an InputError (:func:`database_errors`).
    What ``avv-score history``, ``avv-score trend`` and ``--avv-history`` use."""
    with database_errors(path, timeout_s):
        conn = connect(path, create, timeout_s)
        try:
            yield conn
        finally:
            conn.close()


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The file's schema version; None when its ``schema_version`` table holds no row."""
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row else None


__all__ = ["BUSY_TIMEOUT_S", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "connect", "database_error",
           "database_errors", "open_history", "schema_version"]
