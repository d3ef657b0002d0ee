"""Per-vendor metrics on hand-built records with hand-computed answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from avv_scoring import score_frame
from avv_scoring.load import dedupe_latest
from avv_scoring.metrics import headline as M
from avv_scoring.metrics import vendor_table as VT
from avv_scoring.testing import call, records_frame

TC = "tool_calls"
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]

# Baseline triggers on 1, 2, 5; the vendor on 1, 3, 5 → TP 2 (1, 5), FP 1 (3), FN 1 (2), TN 1 (4).
BASE_FINISH = {"1": TC, "2": TC, "3": "stop", "4": "stop", "5": TC}
VENDOR_FINISH = {"1": TC, "2": "stop", "3": TC, "4": "stop", "5": TC}


def _rows(vendor, finishes, **extra):
    out = []
    for sid, finish in finishes.items():
        calls = [call("f", {"x": 1})] if finish == TC else []
        out.append(
            {"vendor": vendor, "sample_id": sid, "finish_reason": finish, "tool_calls": calls, **extra}
        )
    return out


def _frames(base_rows, vendor_rows):
    frame = records_frame(base_rows + vendor_rows)
    return frame[frame["vendor"] == "base"], frame[frame["vendor"] == "ven"]


def test_f1_joins_on_sample_id_and_repeat_not_position():
    base, ven = _frames(_rows("base", BASE_FINISH), _rows("ven", VENDOR_FINISH))
    expected = {"tp": 2, "fp": 1, "fn": 1, "tn": 1, "f1_pairs": 5, "f1_excluded": 0, "f1_unmatched": 0}
    got = M.trigger_f1(ven, base)
    assert {k: got[k] for k in expected} == expected
    assert got["precision"] == pytest.approx(2 / 3)
    assert got["recall"] == pytest.approx(2 / 3)
    assert got["f1"] == pytest.approx(4 / 6)  # 2·TP / (2·TP + FP + FN)
    # Shuffling either side changes nothing (pairing by position would).
    shuffled = M.trigger_f1(ven.iloc[[4, 2, 0, 3, 1]], base.iloc[[1, 3, 0, 4, 2]])
    assert shuffled == got


def test_f1_joins_repeats_separately():
    base_rows = [
        {"vendor": "base", "sample_id": "1", "repeat": 1, "finish_reason": TC},
        {"vendor": "base", "sample_id": "1", "repeat": 2, "finish_reason": "stop"},
    ]
    ven_rows = [
        {"vendor": "ven", "sample_id": "1", "repeat": 2, "finish_reason": "stop"},
        {"vendor": "ven", "sample_id": "1", "repeat": 1, "finish_reason": TC},
        {"vendor": "ven", "sample_id": "1", "repeat": 3, "finish_reason": TC},
    ]
    base, ven = _frames(base_rows, ven_rows)
    got = M.trigger_f1(ven, base)
    assert (got["tp"], got["tn"], got["fp"], got["fn"]) == (1, 1, 0, 0)
    assert got["f1_unmatched"] == 1  # repeat 3 has no baseline counterpart
    assert got["f1"] == 1.0


def test_failures_are_excluded_from_f1_and_lower_success_rate():
    base_rows = _rows("base", BASE_FINISH)
    ven_rows = _rows("ven", VENDOR_FINISH)
    ven_rows[1] = {"vendor": "ven", "sample_id": "2", "status": "failed", "error_kind": "http_5xx"}  # was FN
    base_rows[2] = {"vendor": "base", "sample_id": "3", "status": "failed"}  # pair 3 was FP
    base, ven = _frames(base_rows, ven_rows)
    got = M.trigger_f1(ven, base)
    # Remaining pairs 1 (TP), 4 (TN), 5 (TP); the failed vendor item is NOT a true negative.
    assert (got["tp"], got["fp"], got["fn"], got["tn"]) == (2, 0, 0, 1)
    assert got["f1_pairs"] == 3 and got["f1_excluded"] == 2
    assert got["f1"] == 1.0
    sr = M.success_rate(ven)
    assert sr == {"items": 5, "successes": 4, "failures": 1, "success_rate": 0.8}
    assert M.error_breakdown(ven) == {"error_kinds": "http_5xx:1"}


def test_precision_and_recall_zero_do_not_crash():
    base, ven = _frames(_rows("base", {"1": TC, "2": "stop"}), _rows("ven", {"1": "stop", "2": TC}))
    got = M.trigger_f1(ven, base)
    assert (got["tp"], got["fp"], got["fn"], got["tn"]) == (0, 1, 1, 0)
    assert got["precision"] == 0.0 and got["recall"] == 0.0
    assert got["f1"] == 0.0


def test_f1_edge_cases_no_pairs_is_missing_and_all_negative_is_one():
    base, ven = _frames(_rows("base", {"1": "stop", "2": "stop"}), _rows("ven", {"1": "stop", "2": "stop"}))
    got = M.trigger_f1(ven, base)
    assert got["f1"] == 1.0 and got["tn"] == 2
    assert math.isnan(got["precision"]) and math.isnan(got["recall"])
    dead = records_frame([{"vendor": "ven", "sample_id": s, "status": "failed"} for s in ("1", "2")])
    got = M.trigger_f1(dead, base)
    assert got["f1_pairs"] == 0 and got["f1_excluded"] == 2
    assert math.isnan(got["f1"])  # never 1.0 by default


def test_success_and_attempt_success_rate():
    frame = records_frame(
        [
            {"sample_id": "1", "attempts": 1},
            {"sample_id": "2", "attempts": 3, "status": "failed", "error_kind": "http_429"},
            {"sample_id": "3", "attempts": 2},
            {"sample_id": "4", "attempts": None},  # empty counts as one attempt
        ]
    )
    assert M.success_rate(frame)["success_rate"] == 0.75
    got = M.attempt_success_rate(frame)
    assert got == {"attempts": 7, "attempt_success_rate": 3 / 7}


def test_missing_usage_gives_missing_avg_tokens_not_zero():
    none = records_frame([{"sample_id": "1"}, {"sample_id": "2"}])
    got = M.avg_tokens(none)
    assert math.isnan(got["avg_tokens"]) and got["usage_rows"] == 0
    some = records_frame(
        [
            {"sample_id": "1", "total_tokens": 100},
            {"sample_id": "2"},  # not reported: left out, not 0
            {"sample_id": "3", "total_tokens": 300},
            {"sample_id": "4", "total_tokens": 5000, "status": "failed"},  # failed rows do not count
        ]
    )
    assert M.avg_tokens(some) == {"avg_tokens": 200.0, "usage_rows": 2}


def test_ttft_and_tps_stats_over_successful_rows():
    frame = records_frame(
        [
            {"sample_id": "1", "ttft_ms": 100, "tps": 10},
            {"sample_id": "2", "ttft_ms": 200, "tps": 20},
            {"sample_id": "3", "ttft_ms": 300, "tps": 60},
            {"sample_id": "4", "ttft_ms": 400},
            {"sample_id": "5"},
            {"sample_id": "6", "ttft_ms": 1, "tps": 1000, "status": "failed"},
        ]
    )
    got = M.ttft_stats(frame)
    assert got["avg_ttft_ms"] == 250.0 and got["ttft_rows"] == 4
    assert got["ttft_p50_ms"] == 250.0
    assert got["ttft_p90_ms"] == pytest.approx(370.0)  # 300 + 0.7 · 100
    assert got["ttft_p99_ms"] == pytest.approx(397.0)
    assert M.tps_stats(frame) == {"tps": 30.0, "tps_p50": 20.0, "tps_rows": 3}
    empty = M.ttft_stats(records_frame([{"status": "failed"}]))
    assert math.isnan(empty["avg_ttft_ms"]) and empty["ttft_rows"] == 0


def test_finish_tool_calls_rate_and_reasoning_only_rate():
    frame = records_frame(
        [
            {
                "sample_id": "1",
                "finish_reason": TC,
                "tool_calls": [call("f", {})],
                "reasoning_chars": 5,
                "content": "",
            },
            {"sample_id": "2", "finish_reason": TC, "tool_calls": [call("f", {})]},
            {"sample_id": "3", "reasoning_chars": 10, "content": ""},  # reasoning only
            {"sample_id": "4", "reasoning_chars": 10, "content": "  \n"},  # blank content: reasoning only
            {"sample_id": "5", "reasoning_chars": 10, "content": "answer"},
            {"sample_id": "6", "reasoning_chars": 0, "content": ""},
            {"sample_id": "7", "status": "failed", "finish_reason": TC, "reasoning_chars": 3},
        ]
    )
    assert M.finish_tool_calls_rate(frame) == {"finish_tool_calls": 2, "finish_tool_calls_rate": 2 / 7}
    assert M.reasoning_only_rate(frame) == {"reasoning_only": 2, "reasoning_only_rate": 2 / 6}
    annotated = M.annotate_tool_calls(frame, {str(i): TOOLS for i in range(1, 8)})
    assert M.reasoning_only_rate(annotated) == {"reasoning_only": 2, "reasoning_only_rate": 2 / 6}


def test_repeats_mean_and_std():
    rows = [
        {"vendor": "base", "is_baseline": True, "sample_id": s, "repeat": r} for s in "12" for r in (1, 2)
    ]
    rows += [
        {"vendor": "ven", "sample_id": "1", "repeat": 1, "ttft_ms": 100},
        {"vendor": "ven", "sample_id": "2", "repeat": 1, "ttft_ms": 300},
        {"vendor": "ven", "sample_id": "1", "repeat": 2, "ttft_ms": 400},
        {"vendor": "ven", "sample_id": "2", "repeat": 2, "status": "failed"},
    ]
    result = score_frame(records_frame(rows), {"1": TOOLS, "2": TOOLS})
    ven = result.scores.set_index("vendor").loc["ven"]
    assert ven["n_repeats"] == 2
    assert ven["success_rate"] == 0.75
    assert ven["success_rate_mean"] == 0.75  # (1.0 + 0.5) / 2
    assert ven["success_rate_std"] == pytest.approx(math.sqrt(0.125))  # sample std of {1, 0.5}
    assert ven["avg_ttft_ms"] == pytest.approx(800 / 3)  # pooled
    assert ven["avg_ttft_ms_mean"] == 300.0  # mean of per-repeat means 200 and 400
    by_rep = result.by_repeat[result.by_repeat["vendor"] == "ven"].set_index("repeat")
    assert by_rep.loc[1, "success_rate"] == 1.0 and by_rep.loc[2, "success_rate"] == 0.5
    assert by_rep.loc[1, "f1"] == 1.0 and by_rep.loc[2, "f1"] == 1.0


def test_latest_row_wins():
    frame = records_frame(
        [
            {"sample_id": "1", "status": "failed", "started_at": "2025-01-01T10:00:00+00:00"},
            {"sample_id": "1", "status": "success", "started_at": "2025-01-01T11:00:00+00:00"},
            # later in file but earlier in time: the earlier start loses
            {"sample_id": "2", "status": "success", "started_at": "2025-01-01T12:00:00Z"},
            {"sample_id": "2", "status": "failed", "started_at": "2025-01-01T09:00:00Z"},
            # same time: file order decides
            {"sample_id": "3", "status": "success", "started_at": "2025-01-01T09:00:00Z"},
            {"sample_id": "3", "status": "failed", "started_at": "2025-01-01T09:00:00Z"},
            # no time at all: file order decides
            {"sample_id": "4", "status": "failed"},
            {"sample_id": "4", "status": "success"},
        ]
    )
    latest = dedupe_latest(frame).set_index("sample_id")["status"].to_dict()
    assert latest == {"1": "success", "2": "success", "3": "failed", "4": "success"}


def test_score_frame_baseline_f1_is_one_and_dead_vendor_ranks_last():
    rows = _rows("base", BASE_FINISH, is_baseline=True, ttft_ms=500, tps=20, total_tokens=900)
    rows += _rows("ven", VENDOR_FINISH, ttft_ms=100, tps=90, total_tokens=500)
    rows += [{"vendor": "dead", "sample_id": s, "status": "failed"} for s in BASE_FINISH]
    result = score_frame(records_frame(rows), {s: TOOLS for s in BASE_FINISH})
    scores = result.scores.set_index("vendor")
    assert result.baselines == {"m": "base"}
    assert scores.loc["base", "f1"] == 1.0 and bool(scores.loc["base", "is_baseline"])
    assert scores.loc["ven", "f1"] == pytest.approx(2 / 3)
    assert scores.loc["dead", "success_rate"] == 0.0
    for col in ("f1", "schema_accuracy", "avg_tokens", "avg_ttft_ms", "tps"):
        assert math.isnan(scores.loc["dead", col])
    # dead: only success rate contributes, rank 3 → 1/8.
    assert scores.loc["dead", "irf"] == pytest.approx(1 / 8)
    assert list(result.scores["vendor"]) == ["ven", "base", "dead"]  # sorted by IRF
    # ven: f1 2nd, success tie 1.5, schema tie 1.5, tps 1st, tokens 1st, ttft 1st.
    assert scores.loc["ven", "irf"] == pytest.approx(1 / 7 + 2 / 6.5 + 3 / 6)
    assert scores.loc["base", "irf"] == pytest.approx(1 / 6 + 2 / 6.5 + 3 / 7)
    assert scores.loc["dead", "verdict"] == "FAIL"
    assert scores.loc["dead", "verdict_reasons"].startswith("success_rate 0 [0, ")  # its interval, below 0.99


def test_score_frame_without_tools_leaves_schema_missing_and_warns():
    rows = _rows("base", BASE_FINISH, is_baseline=True) + _rows("ven", VENDOR_FINISH)
    result = score_frame(records_frame(rows), None)
    assert result.scores["schema_accuracy"].isna().all()
    assert (result.scores["schema_uncheckable_calls"] == [3, 3]).all()
    assert any("schema accuracy not computed" in w for w in result.warnings)


def test_unknown_status_counts_as_failure():
    frame = records_frame([{"sample_id": "1"}, {"sample_id": "2", "status": "weird"}])
    assert M.success_rate(frame)["success_rate"] == 0.5


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_vectorised_per_repeat_equals_the_per_repeat_loop():
    """The groupby per-repeat table equals calling every metric on each repeat's rows (issue 16)."""
    import random

    rng = random.Random(5)
    rows = []
    for vendor in ("base", "ven", "odd"):
        for rep in range(1, 6):
            for sid in range(1, 13):
                ok = rng.random() > (0.05 if vendor != "odd" else 0.3)
                calls = rng.random() < 0.5
                rows.append({
                    "vendor": vendor, "is_baseline": vendor == "base", "sample_id": str(sid), "repeat": rep,
                    "status": "success" if ok else "failed", "attempts": rng.randint(1, 4),
                    "finish_reason": ("tool_calls" if calls else rng.choice(["stop", "length"])) if ok else None,
                    "tool_calls": [call("get_weather", {"city": "Paris"} if rng.random() < 0.8 else {"c": 1})]
                    if calls and ok else [],
                    "ttft_ms": rng.uniform(50, 500) if ok and rng.random() < 0.9 else None,
                    "tps": rng.uniform(10, 90) if ok and rng.random() < 0.9 else None,
                    "total_tokens": rng.randint(10, 900) if ok and rng.random() < 0.8 else None,
                    "reasoning_chars": rng.choice([0, 0, 5]), "content": rng.choice(["", "an answer"]),
                })
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    frame = M.annotate_tool_calls(records_frame(rows), {str(i): tools for i in range(1, 13)})
    base = frame[frame["vendor"] == "base"]
    for vendor in ("base", "ven", "odd"):
        mine = frame[frame["vendor"] == vendor]
        fast, slow = VT.per_repeat(mine, base), VT.per_repeat_loop(mine, base)
        pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
        assert fast["f1"].notna().all() and len(fast) == 5


def test_vendor_tables_equal_vendor_metrics_and_per_repeat():
    rows = [{"vendor": "base", "is_baseline": True, "sample_id": str(s), "repeat": r,
             "finish_reason": "tool_calls" if s % 2 else "stop", "ttft_ms": 10.0 * s + r,
             "tool_calls": [call("f", {"a": s})] if s % 2 else []} for s in range(1, 6) for r in (1, 2)]
    rows += [{"vendor": "ven", "sample_id": str(s), "repeat": r, "status": "failed" if s == 3 else "success",
              "finish_reason": "tool_calls" if s % 3 else "stop", "ttft_ms": 5.0 * s, "tps": 20.0 + s,
              "tool_calls": [call("f", {"a": s + r})] if s % 3 else []} for s in range(1, 6) for r in (1, 2)]
    frame = M.annotate_tool_calls(records_frame(rows), {str(i): TOOLS for i in range(1, 6)})
    ven, base = frame[frame["vendor"] == "ven"], frame[frame["vendor"] == "base"]
    pooled, by_repeat = VT.vendor_tables(ven, base)
    assert pooled.keys() == VT.vendor_metrics(ven, base).keys()
    for key, value in VT.vendor_metrics(ven, base).items():
        assert value == pooled[key] or (value != value and pooled[key] != pooled[key]), key
    pd.testing.assert_frame_equal(by_repeat, VT.per_repeat_loop(ven, base), check_dtype=False)


def test_failing_the_expensive_items_does_not_make_a_vendor_cheaper_or_faster():
    """A vendor that fails exactly the long, slow requests must not rank better on tokens or TTFT: cost and
    speed are compared on the items every vendor of the model answered (the rule behind every metric)."""
    rows = []
    for s in range(1, 11):
        long = s > 5
        for vendor, fails in (("base", False), ("honest", False), ("dodger", long)):
            rows.append({"vendor": vendor, "is_baseline": vendor == "base", "sample_id": str(s),
                         "status": "failed" if fails else "success",
                         "total_tokens": None if fails else (5000 if long else 500),
                         "ttft_ms": None if fails else (900.0 if long else 100.0)})
    scores = score_frame(records_frame(rows), None).scores.set_index("vendor")
    # per-vendor means would give dodger 500 tokens / 100 ms against honest's 2750 / 500: a failure rewarded
    assert scores.loc["dodger", "avg_tokens"] == scores.loc["honest", "avg_tokens"] == 500
    assert scores.loc["dodger", "avg_ttft_ms"] == scores.loc["honest", "avg_ttft_ms"] == 100
    assert scores.loc["honest", "usage_rows"] == 5  # compared on the five items everyone answered
    assert scores.loc["dodger", "success_rate"] == 0.5
    assert scores.loc["honest", "irf"] > scores.loc["dodger", "irf"]


def test_per_repeat_with_a_repeat_the_baseline_lacks_and_multi_call_answers():
    """Slices from one sort (issue 16) give what boolean masks gave, also for a repeat only one side has."""
    rows = [{"vendor": "base", "is_baseline": True, "sample_id": str(s), "repeat": r, "finish_reason": "tool_calls",
             "tool_calls": [call("f", {"a": s})] * (1 + s % 2)} for s in range(1, 5) for r in (2, 1)]
    rows += [{"vendor": "ven", "sample_id": str(s), "repeat": r, "finish_reason": "tool_calls",
              "tool_calls": [call("f", {"a": s})] * (1 + (s + r) % 3)} for s in range(1, 5) for r in (3, 1, 2)]
    frame = M.annotate_tool_calls(records_frame(rows), {str(i): TOOLS for i in range(1, 5)})
    ven, base = frame[frame["vendor"] == "ven"], frame[frame["vendor"] == "base"]
    fast = VT.per_repeat(ven, base)
    pd.testing.assert_frame_equal(fast, VT.per_repeat_loop(ven, base), check_dtype=False)
    assert list(fast["repeat"]) == [1, 2, 3]
    assert fast["multi_call_similarity"].iloc[:2].notna().all() and pd.isna(fast["multi_call_similarity"].iloc[2])
