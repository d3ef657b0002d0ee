"""Hostile histories (issue 33, F21 and F22): two processes creating or writing one history database at once, a
writer locked out by another process, and a corrupted, read-only, locked or full database. Every case ends in
one InputError line (exit status 2) that names the file, what is wrong and what to do, and nothing already in the
history is lost. The unit tier makes the real SQLite errors in this process (a second connection's lock, a
read-only connection, ``max_page_count``, overwritten pages); the integration tier runs real processes: the racing
writers, the process that holds the lock and the shipped avv-score script it locks out; a command that waits on
that process's lock or meets a read-only or full file system runs in this process (what it meets is real)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from avv_core.errors import InputError
from avv_core.manifest import RunManifest
from avv_harness.run.folder import append_to_history
from avv_scoring.cli import main as score_main
from avv_scoring.history import SCHEMA_VERSION, add_result, connect, open_history
from avv_scoring.history import db as history_db
from avv_scoring.history.trend import load_runs
from avv_scoring.score import ScoreResult
from tests import history_records as hr
from tests.builders import write_jsonl, write_run
from tests.sim_records import TOOLS

TABLES = {"schema_version", "runs", "vendors", "metrics", "items"}
#: What a user reads for each failure: (file named, what is wrong, what to do).
LOCKED = ("locked by another process", "try again")
READ_ONLY = ("read-only for this user", "make the file and its folder writable")
FULL = ("disk holding the history database is full", "free space")
CORRUPTED = ("history database is corrupted", ".recover", "history add RUN... --db NEW.sqlite")
NOT_SQLITE = ("not a history database", "not an SQLite file, or its header is corrupted")


@functools.cache
def _scored(run: int) -> tuple[ScoreResult, RunManifest]:
    """Run ``run`` of history seed 0 (20 samples, no intervals), scored once per session: every test here only
    reads it (add_result and append_to_history store it, they do not change it)."""
    return hr.scored_run(0, run, samples=20, resamples=0)


#: runs → the bytes of a history holding runs 1 … runs, built once (through open_history and add_result, as
#: _history did for each test); a test's file is a copy, so what a test does to it stays in that test.
_BUILT: dict[int, bytes] = {}


def _history(path: Path, runs: int = 2) -> Path:
    if runs not in _BUILT:
        with open_history(path) as conn:
            for run in range(1, runs + 1):
                assert add_result(conn, *_scored(run)).added
        _BUILT[runs] = path.read_bytes()
    else:
        path.write_bytes(_BUILT[runs])
    assert _run_ids(path) == [f"s0-r{run}" for run in range(1, runs + 1)]
    return path


def _run_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return [r[0] for r in raw.execute("SELECT run_id FROM runs ORDER BY run_id")]


def _corrupt(path: Path, offset: int) -> Path:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xde\xad\xbe\xef" * 1024)
    return path


def _says(text: str, path: Path, parts: tuple[str, ...]) -> None:
    assert str(path) in text and all(part in text for part in parts), text
    assert "Traceback" not in text and "sqlite3." not in text, text


# ------------------------------------------------------------------ unit: each SQLite failure, made for real


def test_a_writer_locked_out_gets_an_input_error_that_says_locked_and_the_history_is_unchanged(tmp_path):
    path = _history(tmp_path / "h.sqlite", runs=1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing (here: another connection, same effect)
    try:
        with pytest.raises(InputError) as caught, open_history(path, timeout_s=0.05) as conn:
            add_result(conn, *_scored(2))
        _says(str(caught.value), path, (*LOCKED, "waited 0.05 s", "--lock-timeout"))
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert _run_ids(path) == ["s0-r1"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_write_through_a_read_only_handle_says_read_only(tmp_path):
    path = _history(tmp_path / "h.sqlite", runs=1)
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # what SQLite falls back to on a 0444 file
    try:
        with pytest.raises(InputError) as caught, history_db.database_errors(path):
            add_result(read_only, *_scored(2))
    finally:
        read_only.close()
    _says(str(caught.value), path, READ_ONLY)
    assert _run_ids(path) == ["s0-r1"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_full_disk_says_full_and_rolls_the_run_back(tmp_path):
    path = _history(tmp_path / "h.sqlite", runs=1)
    with pytest.raises(InputError) as caught, open_history(path) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own SQLITE_FULL, as on a full disk
        add_result(conn, *_scored(2))
    _says(str(caught.value), path, FULL)
    assert _run_ids(path) == ["s0-r1"]  # the failed run left nothing behind, the first one is intact
    with open_history(path) as conn:  # and it is added once there is room
        assert add_result(conn, *_scored(2)).added
    assert _run_ids(path) == ["s0-r1", "s0-r2"]


def _page_of(path: Path, table: str) -> int:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
@pytest.mark.parametrize("where, parts", [("runs", CORRUPTED), ("header", NOT_SQLITE)])
def test_a_corrupted_history_fails_trend_and_add_with_exit_2_and_what_to_do(tmp_path, capsys, where, parts):
    """The runs table's page overwritten (both commands read it first), or the file's header."""
    path = _history(tmp_path / "h.sqlite")
    _corrupt(path, (_page_of(path, "runs") - 1) * 4096 if where == "runs" else 0)
    run = write_run(tmp_path / "run", hr.run_rows(2, 5, samples=20), samples=write_jsonl(
        tmp_path / "samples.jsonl", [{"data_index": str(i), "messages": [{"role": "user", "content": f"q{i}"}],
                                      "tools": TOOLS} for i in range(20)]))
    assert score_main(["trend", "--db", str(path), "--out", str(tmp_path / "out"), "-q", "--no-html"]) == 2
    _says(capsys.readouterr().err, path, parts)
    assert score_main(["history", "add", str(run), "--db", str(path)]) == 2
    _says(capsys.readouterr().err, path, parts)


def test_an_error_pandas_wraps_is_translated_too(tmp_path):
    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE runs (run_id TEXT, started_at TEXT)")
        raw.executemany("INSERT INTO runs VALUES (?, ?)", [(f"r{i}", "x" * 3000) for i in range(50)])
    _corrupt(path, 3 * 4096)  # a page of runs overwritten: read_sql meets it and raises pandas' own error
    conn = sqlite3.connect(path)
    with pytest.raises(InputError) as caught, history_db.database_errors(path):
        load_runs(conn)
    conn.close()
    _says(str(caught.value), path, CORRUPTED)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_run_left_out_of_the_history_is_a_closing_line_problem_not_a_traceback(tmp_path, monkeypatch, caplog):
    path = _history(tmp_path / "h.sqlite", runs=1)
    result, manifest = _scored(2)
    monkeypatch.setattr(history_db, "BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        problem = append_to_history(str(path), tmp_path / "s0-r2", manifest, result)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert problem is not None and "InputError" in problem and "locked by another process" in problem
    assert f"add it with: avv-score history add {tmp_path / 's0-r2'} --db {path}" in caplog.text
    assert append_to_history(str(path), tmp_path / "s0-r2", manifest, result) is None
    assert _run_ids(path) == ["s0-r1", "s0-r2"]


def test_a_schema_without_a_version_row_is_named_not_called_schema_0(tmp_path):
    path = tmp_path / "h.sqlite"
    connect(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("DELETE FROM schema_version")
    with pytest.raises(InputError, match="schema_version table holds no version.*re-import"):
        connect(path)


def test_trend_on_an_empty_file_says_empty_and_writes_nothing(tmp_path):
    path = tmp_path / "h.sqlite"
    path.touch()
    with pytest.raises(InputError, match="an empty history database: add runs"):
        connect(path, create=False)
    assert path.stat().st_size == 0


def test_every_sqlite_primary_code_has_its_words():
    """Python < 3.11 has no ``sqlite_errorcode``: the message text alone gives the same answer."""
    for text, parts in [("database is locked", LOCKED), ("attempt to write a readonly database", READ_ONLY),
                        ("database or disk is full", FULL), ("database disk image is malformed", CORRUPTED),
                        ("file is not a database", NOT_SQLITE), ("unable to open database file", ("journal",)),
                        ("disk I/O error", ("I/O error",))]:
        _says(str(history_db.database_error("h.sqlite", sqlite3.OperationalError(text))), Path("h.sqlite"), parts)


# ------------------------------------------------------------------ integration: real processes on one file


def _started(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _together(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[int, str, str]]:
    """Wait until every process printed ``ready`` (imports done), then send them one start time."""
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
    start = f"{time.time() + 0.5}\n"
    outs = []
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(start)
        proc.stdin.close()
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        outs.append((proc.returncode, out, err))
    return outs


#: One process: creates each of argv's files at the same instant as the other process (round i at start + i·0.3 s).
CREATE_ROUNDS = """
import json, sys, time
from avv_scoring.history import connect
print("ready", flush=True)
start = float(sys.stdin.readline())
errors = []
for i, path in enumerate(sys.argv[1:]):
    time.sleep(max(0.0, start + 0.3 * i - time.time() - 0.005))  # asleep until 5 ms before, then spin: the two
    while time.time() < start + 0.3 * i:                           # processes still call connect in the same
        pass                                                       # instant, without spinning 6 s each
    try:
        connect(path).close()
    except Exception as exc:
        errors.append(f"{path}: {type(exc).__name__}: {exc}")
print(json.dumps(errors))
"""


@pytest.mark.integration
def test_two_processes_creating_the_same_new_history_20_times_both_succeed(tmp_path):
    paths = [str(tmp_path / f"h{i}.sqlite") for i in range(20)]
    outs = _together([_started(CREATE_ROUNDS, *paths) for _ in range(2)])
    for status, out, err in outs:
        assert status == 0 and json.loads(out.splitlines()[-1]) == [], (out, err)
    for path in paths:
        with sqlite3.connect(path) as raw:
            assert raw.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
            assert {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == TABLES


#: One process: ``avv-score history add RUN --db DB`` (in this process) at the start time.
ADD_RUN = """
import sys, time
from avv_scoring.cli import main
print("ready", flush=True)
start = float(sys.stdin.readline())
time.sleep(max(0.0, start - time.time()))
sys.exit(main(["history", "add", *sys.argv[1:]]))
"""


def _run_folder(tmp_path: Path, run: int = 5) -> Path:
    samples = write_jsonl(tmp_path / "samples.jsonl", [
        {"data_index": str(i), "messages": [{"role": "user", "content": f"q{i}"}], "tools": TOOLS}
        for i in range(20)])
    return write_run(tmp_path / f"run{run}", hr.run_rows(2, run, samples=20), samples=samples)


@pytest.mark.integration
def test_two_processes_adding_the_same_run_to_a_new_history_add_it_once(tmp_path):
    run, db = _run_folder(tmp_path), tmp_path / "h.sqlite"
    outs = _together([_started(ADD_RUN, str(run), "--db", str(db)) for _ in range(2)])
    assert [status for status, _, _ in outs] == [0, 0], outs
    said = sorted("already in the history" in out for _, out, _ in outs)
    assert said == [False, True], outs  # one added it, the other found it there
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
        assert raw.execute("SELECT COUNT(DISTINCT run_id) FROM items").fetchone() == (1,)


#: Holds the write lock of argv[1] for argv[2] seconds (BEGIN EXCLUSIVE: readers wait too), then commits.
HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
print("released", flush=True)
"""


def _avv_score(*args: str) -> subprocess.CompletedProcess[str]:
    """The shipped ``avv-score`` script of this environment."""
    return subprocess.run([str(Path(sys.executable).parent / "avv-score"), *args], capture_output=True, text=True,
                          timeout=600)


def _avv_score_here(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``avv-score ARGS`` in this process (its main, as the script calls it), its exit status and output: where the
    lock is another process's or the file system refuses the write, the command itself need not be a process (the
    script's own start: :func:`_avv_score` above and tests/test_packaging.py)."""
    capsys.readouterr()
    status = score_main(list(args))
    said = capsys.readouterr()
    return subprocess.CompletedProcess(["avv-score", *args], status, said.out, said.err)


def _hold(db: Path, seconds: float) -> subprocess.Popen[str]:
    holder = _started(HOLD_LOCK, str(db), str(seconds))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.integration
def test_a_writer_locked_out_for_longer_than_5_s_waits_and_adds_its_run(tmp_path, capsys):
    db = _history(tmp_path / "h.sqlite", runs=1)
    run = _run_folder(tmp_path)
    holder = _hold(db, 8)  # SQLite's and Python's default busy timeout is 5 s: this outlasts it
    added = _avv_score_here(capsys, "history", "add", str(run), "--db", str(db))
    holder.communicate(timeout=60)
    assert added.returncode == 0 and "added (80 items)" in added.stdout, added.stderr
    assert len(_run_ids(db)) == 2


@pytest.mark.integration
def test_a_writer_locked_out_past_lock_timeout_exits_2_saying_locked(tmp_path):
    db = _history(tmp_path / "h.sqlite", runs=1)
    run = _run_folder(tmp_path)
    holder = _hold(db, 30)
    try:
        refused = _avv_score("history", "add", str(run), "--db", str(db), "--lock-timeout", "1")
        trend = _avv_score("trend", "--db", str(db), "--out", str(tmp_path), "-q", "--lock-timeout", "1")
    finally:
        holder.kill()
        holder.communicate()
    assert refused.returncode == 2 and trend.returncode == 2
    _says(refused.stderr, db, (*LOCKED, "waited 1 s"))
    _says(trend.stderr, db, (*LOCKED, "waited 1 s"))
    assert _run_ids(db) == ["s0-r1"]


@pytest.fixture
def tmpfs(tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root: mount); skipped where it cannot be mounted."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.decode().strip() or 'not root'})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.integration
def test_a_read_only_history_refuses_add_with_exit_2_and_trend_still_reads_it(tmp_path, tmpfs, capsys):
    db = tmpfs / "h.sqlite"
    shutil.copy(_history(tmp_path / "h.sqlite", runs=2), db)
    if os.geteuid() == 0:  # root writes a 0444 file: a read-only mount is what root cannot write
        remount = subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], capture_output=True)
        assert remount.returncode == 0, remount.stderr
    else:
        db.chmod(0o444)
    refused = _avv_score_here(capsys, "history", "add", str(_run_folder(tmp_path)), "--db", str(db))
    assert refused.returncode == 2
    _says(refused.stderr, db, READ_ONLY)
    trend = _avv_score_here(capsys, "trend", "--db", str(db), "--out", str(tmp_path / "out"), "-q", "--no-html")
    assert trend.returncode == 0, trend.stderr
    assert _run_ids(db) == ["s0-r1", "s0-r2"]


@pytest.mark.integration
def test_a_history_on_a_full_disk_exits_2_saying_full_and_keeps_its_runs(tmp_path, tmpfs, capsys):
    db = tmpfs / "h.sqlite"
    shutil.copy(_history(tmp_path / "h.sqlite", runs=1), db)
    free = shutil.disk_usage(tmpfs).free
    with open(tmpfs / "filler", "wb") as f:  # leave less room than the new run's pages
        f.write(b"\0" * max(0, free - 8 * 1024))
    refused = _avv_score_here(capsys, "history", "add", str(_run_folder(tmp_path)), "--db", str(db))
    assert refused.returncode == 2
    _says(refused.stderr, db, FULL)
    (tmpfs / "filler").unlink()
    assert _run_ids(db) == ["s0-r1"]
    added = _avv_score_here(capsys, "history", "add", str(_run_folder(tmp_path)), "--db", str(db))
    assert added.returncode == 0 and _run_ids(db) == ["run5", "s0-r1"], added.stderr
