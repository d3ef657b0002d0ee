"""The run history (avv_scoring/history): the schema and its versions, adding runs (idempotent, read back equal to
avv-score), the between-run tests on a synthetic history with two known changes, the trend outputs, the
``--fail-on-regression`` exit status, and the README's ad-hoc queries. Unit tier: no subprocess."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from avv_core.errors import InputError
from avv_core.manifest import RunManifest
from avv_scoring.cli import main as score_main
from avv_scoring.history import (
    SCHEMA_VERSION,
    TrendOptions,
    add_result,
    compute_trend,
    connect,
    render_markdown,
    render_terminal,
)
from avv_scoring.history import db as history_db
from avv_scoring.history.regression import inner_join
from avv_scoring.history.store import item_frame
from avv_scoring.metrics.registry import METRICS
from avv_scoring.score import ScoreResult
from tests import history_records as hr
from tests.builders import numbered_samples, write_jsonl, write_run
from tests.sim_records import TOOLS

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _scored(run: int, samples: int = 30) -> tuple[ScoreResult, RunManifest]:
    """Run ``run`` of history seed 0 (no intervals), scored once per session for the tests that only store it (none
    changes the result or the manifest it gets: a test that does scores its own)."""
    return hr.scored_run(0, run, samples=samples, resamples=0)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """Six small runs of history seed 0 (the changes from run 5 on; no intervals), in one database. The exact
    flags of the full-size history are tests/test_history_integration.py's."""
    path = tmp_path_factory.mktemp("history") / "h.sqlite"
    conn = connect(path)
    for run in range(1, 7):
        assert add_result(conn, *_scored(run)).added
    conn.close()
    return path


# ------------------------------------------------------------------------------------------- the schema


def test_a_new_file_gets_the_current_schema_and_every_table(tmp_path):
    conn = connect(tmp_path / "h.sqlite")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"schema_version", "runs", "vendors", "metrics", "items"}
    assert history_db.schema_version(conn) == SCHEMA_VERSION


def test_a_newer_schema_is_refused_and_an_older_one_migrated_or_refused(tmp_path, monkeypatch):
    path = tmp_path / "h.sqlite"
    connect(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(InputError, match="newer avv-locust"):
        connect(path)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = 0")
    with pytest.raises(InputError, match="cannot be migrated.*re-import"):
        connect(path)
    steps = []
    monkeypatch.setattr(history_db, "MIGRATIONS", {0: lambda conn: steps.append(conn.execute("SELECT 1"))})
    assert history_db.schema_version(connect(path)) == SCHEMA_VERSION and len(steps) == 1


def test_a_file_that_is_not_a_history_is_refused(tmp_path):
    (tmp_path / "x.sqlite").write_text("not a database " * 100)
    with pytest.raises(InputError, match="not a history database"):
        connect(tmp_path / "x.sqlite")
    with pytest.raises(InputError, match="no such history database"):
        connect(tmp_path / "missing.sqlite", create=False)


# ------------------------------------------------------------------------------------------- adding runs


def test_adding_the_same_run_twice_adds_nothing(tmp_path):
    conn = connect(tmp_path / "h.sqlite")
    result, manifest = _scored(1)
    first = add_result(conn, result, manifest)
    counts = [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("runs", "vendors", "metrics", "items")]
    again = add_result(conn, result, manifest)
    assert first.added and first.items == 4 * 30 * hr.REPEATS and not again.added and again.items == 0
    assert counts == [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("runs", "vendors", "metrics", "items")]
    assert counts == [1, 4, 4 * len(METRICS), 4 * 30 * hr.REPEATS]


def _run_folder(tmp_path: Path) -> Path:
    samples = write_jsonl(tmp_path / "samples.jsonl", numbered_samples(20, TOOLS, index="{i}", first=0))
    return write_run(tmp_path / "run", hr.run_rows(2, 5, samples=20), samples=samples)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_history_reads_back_the_scores_avv_score_writes_and_history_add_is_idempotent(tmp_path, capsys):
    run = _run_folder(tmp_path)
    db = tmp_path / "h.sqlite"
    assert score_main([str(run), "-q", "--no-html"]) == 0
    assert score_main(["history", "add", str(run), "--db", str(db)]) == 0
    assert score_main(["history", "add", str(run), "--db", str(db)]) == 0
    assert "already in the history: nothing added" in capsys.readouterr().out
    scores = pd.read_csv(run / "scores.csv", keep_default_na=False, dtype=str).set_index("vendor")
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT vendor, metric, value, text, ci_low, ci_high FROM metrics").fetchall()
    assert len(rows) == len(scores) * len(METRICS) and conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
    fmt = {m.column: m for m in METRICS}
    for vendor, column, value, text, low, high in rows:
        cell = scores.loc[vendor, column]
        if fmt[column].fmt == "text":
            assert (text or "") == cell, (vendor, column)
        elif cell == "":
            assert value is None, (vendor, column)
        else:
            assert value == pytest.approx(float(cell), rel=1e-9, abs=1e-12), (vendor, column)
        if fmt[column].interval:
            assert low == pytest.approx(float(scores.loc[vendor, f"{column}_ci_low"] or "nan"), nan_ok=True)
            assert high == pytest.approx(float(scores.loc[vendor, f"{column}_ci_high"] or "nan"), nan_ok=True)
    verdicts = dict(conn.execute("SELECT vendor, verdict FROM vendors").fetchall())
    assert verdicts == scores["verdict"].to_dict()


def test_no_key_reaches_the_history(tmp_path):
    result, manifest = hr.scored_run(1, 1, samples=10, resamples=0)
    manifest.vendors[0]["api_key"] = "sk-live-SECRET123"
    manifest.vendors[0]["headers"] = {"Authorization": "Bearer sk-live-SECRET123"}
    path = tmp_path / "h.sqlite"
    conn = connect(path)
    add_result(conn, result, manifest)
    conn.close()
    assert b"SECRET123" not in path.read_bytes()


def test_item_outcomes_follow_the_records():
    items = item_frame(hr.annotated(3, 1, samples=30))
    assert len(items) == 4 * 30 * hr.REPEATS and set(items["success"]) == {1}
    called = items["called"] == 1
    assert items.loc[called, "tools_sig"].notna().all() and items.loc[~called, "tools_sig"].isna().all()
    # the synthetic calls carry {} where the schema requires an argument: every call item is schema-invalid
    assert (items.loc[called, "schema_valid"] == 0).all() and items.loc[~called, "schema_valid"].isna().all()


# --------------------------------------------------------------------------- the tests between runs


@pytest.mark.parametrize("case", ["unique", "codes", "repeated in b", "missing ids", "types differ"])
def test_the_pairing_of_two_runs_is_the_merge_on_sample_and_repeat(case):
    """regression.inner_join pairs on integer codes; its rows are pandas' inner merge's, in the same order, in the
    cases the codes handle (unique keys, strings or codes) and those the merge answers (a key repeated in b, a
    missing id, different key types)."""
    rng = np.random.default_rng(5)
    ids = np.array([f"s{i}" for i in rng.integers(0, 40, 120)], dtype=object)
    a = pd.DataFrame({"sample_id": ids[:60], "repeat": rng.integers(1, 3, 60)}).drop_duplicates()
    b = pd.DataFrame({"sample_id": ids[60:], "repeat": rng.integers(1, 3, 60)}).drop_duplicates().iloc[::-1]
    if case == "codes":
        a, b = (f.assign(sample_id=f["sample_id"].str[1:].astype(np.int64)) for f in (a, b))
    elif case == "repeated in b":
        b = pd.concat([b, b.iloc[:5]])
    elif case == "missing ids":
        a.iloc[[1, 3], 0] = None
        b.iloc[[2, 4], 0] = None
    elif case == "types differ":
        b = b.assign(repeat=b["repeat"].astype(float))
    merged = a.assign(ia=np.arange(len(a))).merge(b.assign(ib=np.arange(len(b))), on=["sample_id", "repeat"])
    ia, ib = inner_join(a, b)
    assert len(merged) > 10 and ia.tolist() == merged["ia"].tolist() and ib.tolist() == merged["ib"].tolist()


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_other_sample_sets_are_compared_on_the_common_ids(tmp_path):
    conn = connect(tmp_path / "h.sqlite")
    for run, samples in ((1, 40), (2, 30)):
        result, manifest = _scored(run, samples)  # the paired tests read items, not intervals
        add_result(conn, result, manifest)
    trend = compute_trend(conn, TrendOptions(vendor="steady"))
    assert set(trend.changes["compared_on"]) == {"30 common sample ids"} and trend.flagged().empty


# ------------------------------------------------------------------------------------- outputs and CLI


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_trend_outputs_show_every_run_and_the_flagged_changes(history):
    trend = compute_trend(connect(history, create=False), TrendOptions(metrics=("f1", "ttft_p50_ms")))
    assert {(r["run_index"], r["vendor"], r["test"]) for r in trend.flagged().to_dict("records")} >= \
        {(5, "slow", "ttft_p50_ms")}
    text = render_terminal(trend)
    assert text.count("s0-r") >= 4 * 6 and "▼ ttft_p50_ms +" in text and "Flagged changes" in text
    assert "; no regression in the latest run" in text and "flagged change(s)" in text
    md = render_markdown(trend)
    assert "## m / official (baseline)" in md and "| 5 | s0-r5 | 2026-01-05 |" in md
    assert "p &lt; 0.001 (over the vendor" in md
    assert "| m | slow | 5 s0-r5 | s0-r4 | same sample set | ttft_p50_ms |" in md


def readme_queries() -> dict[str, str]:
    """The ```sql blocks of the run-history how-to (docs/how-to/run-history.md), by their first line's ``-- name``
    comment."""
    text = (ROOT / "docs" / "how-to" / "run-history.md").read_text()
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    return {b.splitlines()[0].removeprefix("-- ").strip(): b for b in blocks if b.startswith("-- ")}


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_readme_query_f1_per_week(history):
    query = readme_queries()["every vendor's F1 per week"]
    rows = sqlite3.connect(history).execute(query).fetchall()
    assert {r[2] for r in rows} == set(hr.VENDORS)
    weeks = {r[0] for r in rows}
    assert weeks == {"2026-00", "2026-01"}  # 1–6 January 2026: Thursday 1st opens week 00, Monday 5th week 01
    f1 = {(r[0], r[2]): r[3] for r in rows}
    assert f1[("2026-00", "official")] == 1.0


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_readme_query_samples_that_flipped(history):
    query = readme_queries()["the samples on which a vendor flipped between two runs"]
    rows = sqlite3.connect(history).execute(query, {"vendor": "flipper", "before": "s0-r4", "after": "s0-r5"}) \
        .fetchall()
    conn = connect(history, create=False)
    items = pd.read_sql_query("SELECT run_id, sample_id, repeat, called FROM items WHERE vendor = 'flipper'", conn)
    a = items[items["run_id"] == "s0-r4"].set_index(["sample_id", "repeat"])["called"]
    b = items[items["run_id"] == "s0-r5"].set_index(["sample_id", "repeat"])["called"]
    expected = sorted((s, r) for (s, r), v in a.items() if v != b[(s, r)])
    assert sorted((r[0], r[1]) for r in rows) == expected and len(expected) > 0.2 * len(a)


def test_readme_queries_are_all_tested():
    assert set(readme_queries()) == {"every vendor's F1 per week",
                                     "the samples on which a vendor flipped between two runs"}


def test_avv_sim_set_scopes_a_knob_to_one_profile():
    from avv_sim.profiles import ProfileError, apply_sets, load_profiles, split_set

    profiles = load_profiles({"a": {"seed": 1}, "b": {"seed": 2}})
    out = apply_sets(profiles, ["b:flip_rate=0.25", "ttft_ms=50", "b:ttft_ms=300"])
    assert (out["a"].flip_rate, out["a"].ttft_ms, out["a"].seed) == (0.0, 50.0, 1)
    assert (out["b"].flip_rate, out["b"].ttft_ms, out["b"].seed) == (0.25, 300.0, 2)
    assert split_set("ttft_ms=1") == (None, "ttft_ms=1") and split_set("x:seed=2") == ("x", "seed=2")
    with pytest.raises(ProfileError, match="no profile 'c'"):
        apply_sets(profiles, ["c:seed=1"])
    with pytest.raises(ProfileError, match="flip_rate"):
        apply_sets(profiles, ["a:flip_rate=2"])
    assert json.dumps(out["b"].to_knobs())  # still a plain profile


def test_readme_nightly_conf_sets_the_budget_and_the_history(tmp_path):
    import avv_harness.locust.plugin  # noqa: F401  (registers the --avv-* options)
    from avv_harness.run.options import RunOptions, preparse_options

    text = (ROOT / "docs" / "tutorials" / "nightly-ci.md").read_text()
    (block,) = re.findall(r"```ini\n(# /srv/avv/nightly.conf.*?)```", text, flags=re.S)
    conf = tmp_path / "nightly.conf"
    conf.write_text(block)
    options = RunOptions.from_parsed(preparse_options(["--config", str(conf)]))
    assert options.history == "history.sqlite" and options.max_total_tokens == 2_000_000 and options.repeats == 2


# ------------------------------------------------------------------------------------------ verdict changes


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_verdict_that_becomes_fail_is_reported_and_gated_on(tmp_path, capsys):
    """PASS (an older run's lower-case "pass"), PASS, then FAIL: trend reports the verdict change with its reasons,
    and --fail-on-regression exits 5 on it even with no flagged metric change."""
    from dataclasses import replace

    db = tmp_path / "h.sqlite"
    conn = connect(db)
    for run, said in ((1, "pass"), (2, "PASS"), (3, "FAIL")):
        result, manifest = _scored(run)
        scores = result.scores.copy()
        steady = scores["vendor"] == "steady"
        scores.loc[steady, "verdict"] = said
        scores.loc[steady, "verdict_reasons"] = "f1 0.7200 [0.6400, 0.7900] < 0.8" if said == "FAIL" else ""
        add_result(conn, replace(result, scores=scores), manifest)
    trend = compute_trend(conn, TrendOptions(vendor="steady", metrics=("f1",)))
    conn.close()
    changes = trend.verdict_changes()
    assert changes[["run_index", "before", "after", "regression"]].values.tolist() == [[3, "PASS", "FAIL", True]]
    assert len(trend.latest_verdict_regressions()) == 1 and trend.flagged().empty
    text = render_terminal(trend)
    assert "Verdict changes" in text and "PASS → FAIL" in text and "f1 0.7200 [0.6400, 0.7900] < 0.8" in text
    assert "REGRESSION in the latest run: steady verdict PASS → FAIL" in text
    assert "## Verdict changes" in render_markdown(trend) and "## Near-misses" in render_markdown(trend)
    assert score_main(["trend", "--db", str(db), "--out", str(tmp_path), "--no-html", "-q"]) == 0
    assert score_main(["trend", "--db", str(db), "--out", str(tmp_path), "--no-html", "-q",
                       "--fail-on-regression"]) == 5
    assert "verdict PASS → FAIL" in capsys.readouterr().err


def test_trend_html_marks_changed_only_on_the_metrics_of_the_changed_test():
    from avv_scoring.history.regression import TESTS, tests_of

    assert tests_of("ttft_p50_ms") == ("ttft_p50_ms",) and tests_of("f1") == ("trigger_agreement",)
    assert tests_of("success_rate") == ("success_rate",)
    assert tests_of("schema_accuracy") == ("schema_response_accuracy",)
    assert all(set(t.metrics) <= {m.column for m in METRICS} for t in TESTS)  # every mark lands on a metric
