"""--avv-settle, unit tier: the anytime-valid test (avv_scoring.stats.sequential), the ratio forms (exactly the
score's sums), the ledger's skipped items, the hand-out order, and the report section. No Locust run."""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd
import pytest

import avv_harness.locust.plugin  # noqa: F401  (registers the --avv-* options on Locust's parser)
from avv_core.errors import InputError
from avv_core.items import ItemKey, VendorId
from avv_harness.run.ledger import Ledger
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.run.settle import SETTLED, hand_out_order
from avv_scoring import item_parts, records_frame, settle_bounds
from avv_scoring.metrics.registry import METRICS
from avv_scoring.report.sections.settle import settle as settle_section
from avv_scoring.score import ScoreResult, score_frame
from avv_scoring.stats.sequential import (
    BROKEN,
    PASSED,
    RatioBound,
    check_bound,
    confidence_interval,
    log_capitals,
    scores,
    settle_verdict,
    split_alpha,
)
from avv_scoring.testing import record

F1 = RatioBound("f1", "min", 0.8, 2.0, 2.0)


def f1_items(rng: np.random.Generator, n: int, tp: float, fp: float, fn: float) -> tuple[np.ndarray, np.ndarray]:
    u = rng.random(n)
    is_tp, is_fp = u < tp, (u >= tp) & (u < tp + fp)
    is_fn = (u >= tp + fp) & (u < tp + fp + fn)
    return 2.0 * is_tp, 2.0 * is_tp + is_fp + is_fn


def test_f1_bound_is_a_sign_test_on_one_score():
    a, b = np.array([2.0, 0.0, 0.0, 2.0]), np.array([2.0, 1.0, 1.0, 2.0])  # TP, FP, FN, TP: F1 = 4/6
    z = scores(a, b, 0.8)
    assert np.allclose(z, [0.4, -0.8, -0.8, 0.4]) and (z.mean() < 0) == (a.sum() / b.sum() < 0.8)
    assert F1.z_range == pytest.approx((-1.6, 0.4))


def test_a_clear_fail_and_a_clear_pass_settle_fast_and_right():
    rng = np.random.default_rng(1)
    bad = check_bound(*f1_items(rng, 400, 0.30, 0.25, 0.25), F1, 0.05)  # F1 0.55
    good = check_bound(*f1_items(rng, 400, 0.55, 0.02, 0.02), F1, 0.05)  # F1 ≈ 0.96
    assert bad.state == BROKEN and bad.at is not None and bad.at < 100 and bad.p_value <= 0.05
    assert good.state == PASSED and good.at is not None and good.at < 150


def test_error_rate_at_the_bound_is_at_most_alpha():
    """F1 exactly 0.8 (TP 0.4, FP = FN 0.1): broken (a wrong FAIL) in at most α of 400 runs of 1,000 items."""
    rng = np.random.default_rng(2)
    a, b = f1_items(rng, 400 * 1000, 0.4, 0.1, 0.1)
    lo, hi = F1.z_range
    _, log_down = log_capitals(scores(a, b, 0.8).reshape(400, 1000), lo, hi)
    wrong = (log_down.max(axis=1) >= np.log(1 / 0.05)).mean()
    assert wrong <= 0.05


def test_interval_covers_the_truth_and_shrinks():
    rng = np.random.default_rng(3)
    a, b = f1_items(rng, 1500, 0.35, 0.15, 0.15)  # F1 = 0.7
    low, high = confidence_interval(a[:200], b[:200], F1, 0.05)
    low2, high2 = confidence_interval(a, b, F1, 0.05)
    assert low <= 0.7 <= high and low2 <= 0.7 <= high2 and (high2 - low2) < (high - low)


def test_zero_tolerance_bound_can_break_but_never_pass():
    bound = RatioBound("reasoning_only_rate", "max", 0.0)
    clean = check_bound(np.zeros(5000), np.ones(5000), bound, 0.05)
    dirty = check_bound(np.r_[np.zeros(10), np.ones(3)], np.ones(13), bound, 0.05)
    assert clean.state is None and (dirty.state, dirty.at, dirty.p_value) == (BROKEN, 11, 0.0)


def test_vendor_verdict_fail_on_any_pass_on_all():
    rng = np.random.default_rng(4)
    broken = check_bound(*f1_items(rng, 300, 0.2, 0.3, 0.3), F1, 0.05)
    passed = check_bound(*f1_items(rng, 300, 0.6, 0.0, 0.0), F1, 0.05)
    open_ = check_bound(np.zeros(0), np.zeros(0), F1, 0.05)
    assert settle_verdict([broken, open_]) == "fail" and settle_verdict([passed, open_]) is None
    assert settle_verdict([passed, passed]) == "pass" and split_alpha(0.05, 4) == pytest.approx(0.0125)


def test_default_bounds_have_ratio_forms():
    tested, untested = settle_bounds()
    defects = {"reasoning_only_rate", "tool_call_as_text_rate", "tool_call_truncated_rate", "invalid_json_call_rate"}
    assert {b.column for b in tested} == {"success_rate", "f1", "schema_accuracy", *defects}
    assert {b.column for b in tested if b.tolerance is not None} == {m.column for m in METRICS if m.defect}
    assert untested == [] and all(m.fmt == "rate" for m in METRICS if m.ratio is not None)


def test_item_parts_add_up_to_the_scores_sums():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
    calls = {"good": '[{"name": "f", "arguments": "{\\"x\\": 1}"}]', "bad": '[{"name": "f", "arguments": "{}"}]'}
    rows, base = [], []
    for i, (v_calls, b_call, ok) in enumerate([("good", True, True), ("bad", True, True), (None, True, True),
                                               ("good", False, True), (None, False, False)]):
        sid = f"s{i}"
        base.append(record(vendor="base", sample_id=sid, is_baseline=True, finish_reason="tool_calls" if b_call
                           else "stop", tool_calls=calls["good"] if b_call else "[]"))
        rows.append(record(vendor="v", sample_id=sid, status="success" if ok else "failed",
                           finish_reason="tool_calls" if v_calls else "stop",
                           tool_calls=calls[v_calls] if v_calls else "[]"))
    frame, base_frame = records_frame(rows), records_frame(base)
    by_sample = {f"s{i}": tools for i in range(5)}
    scored = score_frame(pd.concat([base_frame, frame], ignore_index=True), by_sample).scores.set_index("vendor")
    for column in ("success_rate", "f1", "schema_accuracy"):
        a, b = item_parts(column, frame, base_frame, by_sample)
        assert a.sum() / b.sum() == pytest.approx(scored.loc["v", column]), column


def test_ledger_keeps_skipped_items_and_a_given_back_item_of_a_closed_vendor_is_skipped():
    vendor = VendorId("m", "v")
    ledger = Ledger.for_items([vendor], ["s1", "s2", "s3", "s4"], 1)
    (held,) = ledger.take(vendor, "local")
    assert ledger.skip_pending(vendor, SETTLED) == 3 and ledger.take(vendor, "local") == []
    assert not ledger.release(held) and ledger.skipped[held] == SETTLED and ledger.finished
    assert set(ledger.skipped) == {ItemKey.of(vendor, f"s{i}", 1) for i in range(1, 5)}
    base = VendorId("m", "base")
    ledger2 = Ledger.for_items([base], ["s1", "s2", "s3"], 1)
    assert ledger2.skip_pending(base, SETTLED, keep={("s2", 1)}, close=False) == 2
    assert ledger2.pending[base] == deque([ItemKey.of(base, "s2", 1)]) and ledger2.busy(base)


def test_hand_out_order_is_fixed_by_the_seed():
    ids = [f"s{i}" for i in range(50)]
    assert hand_out_order(ids, None) == ids and hand_out_order(ids, 3) == hand_out_order(ids, 3) != ids
    assert sorted(hand_out_order(ids, 3)) == sorted(ids)


def test_settle_options_are_checked():
    settled = RunOptions.from_parsed(preparse_options(["--avv-settle", "--avv-settle-alpha", "0.1"]))
    assert settled.settle is not None and settled.settle.alpha == 0.1 and settled.settle.seed is None
    assert RunOptions.from_parsed(preparse_options([])).settle is None
    with pytest.raises(InputError, match="--avv-settle-alpha"):
        RunOptions.from_parsed(preparse_options(["--avv-settle", "--avv-settle-alpha", "0"]))
    with pytest.raises(InputError, match="verify mode"):
        RunOptions.from_parsed(preparse_options(["--avv-settle", "--avv-mode", "stress"]))


def test_report_section_says_settled_after_n_of_n_and_warns_on_thin_tools():
    entry = {"verdict": "fail", "settled_after": 40, "of": 2000, "looks": 3, "alpha": 0.05, "alpha_spent": 0.004,
             "skipped": 1958, "floor_per_tool": 5, "thin_tools": {"get_time": 2},
             "bounds": [{"metric": "f1", "kind": "min", "limit": 0.8, "state": "broken", "value": 0.55,
                         "interval": [0.41, 0.72], "p_value": 0.004}]}
    run = {"seed": 7, "alpha": 0.05, "every": 20, "looks": 9, "bounds": ["f1 ≥ 0.8"], "untested_bounds": [],
           "vendors": {"bad": entry, "base": {"verdict": None, "baseline": True}}}
    result = ScoreResult(pd.DataFrame(), pd.DataFrame(), {}, None, settle={"runs/x": run})  # type: ignore[arg-type]
    content = settle_section(result)
    assert content is not None
    assert content.lines == ("bad: settled FAIL after 40 of 2000 samples — f1 0.5500 [0.4100, 0.7200] (≥ 0.8: "
                             "broken); 1958 items skipped (settled)",)
    assert content.rows[0][-2:] == ("3", "0.004 of 0.05") and "get_time (2)" in content.warnings[0]
    assert settle_section(ScoreResult(pd.DataFrame(), pd.DataFrame(), {}, None)) is None  # type: ignore[arg-type]


def test_bench_grid_points_meet_the_issue_bars():
    """bench/settle.py's own rule, 200 seeded runs (in-process, well under a second): at the bound the wrong-verdict
    rate stays ≤ 5 %; 10 points below the F1 bound, and 10 above it (F1 bound alone), settle on ≤ 25 % of 2,000."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import settle as bench  # type: ignore[import-not-found]

    def point(f1: float, schema: float | None) -> dict[str, float]:
        return bench.grid_point(np.random.default_rng(5), 200, 2000, 20, 0.05, f1, schema)

    at_bound, below, above = point(0.80, 0.98), point(0.70, 0.99), point(0.90, None)
    assert at_bound["wrong"] <= 0.05 and below["wrong"] <= 0.05 and above["wrong"] <= 0.05
    assert below["mean"] <= 500 and above["mean"] <= 500 and below["settled"] == above["settled"] == 1.0
