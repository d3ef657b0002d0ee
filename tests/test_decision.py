"""The decision (avv_scoring/decision.py, stats/intervals.py, run_outcome.py): three-way verdicts per bound and per
vendor, intervals that do not collapse, defect checks, "about N more samples", the exit status, avv-score's options
and the decision block."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from avv_core.decision_options import parse_confidence, parse_verdict_mode
from avv_core.exit_status import ExitStatus
from avv_scoring import ScoreRequest, decision_lines, score_frame, score_paths
from avv_scoring.cli import main
from avv_scoring.decision import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Evidence,
    VendorDecision,
    decide,
    judge_bound,
    settled_decision,
)
from avv_scoring.metrics.registry import METRICS
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.run_outcome import broken_vendors, decision_exit_status
from avv_scoring.stats.intervals import Proportion, defect_upper, dice, jaccard, newcombe, trials_to_decide, wilson
from avv_scoring.testing import call, records_frame
from avv_scoring.verdict import Thresholds
from tests.builders import numbered_samples, write_jsonl, write_run

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
FAST = StatsSettings(resamples=0)


def share(hits, trials) -> Evidence:
    return Evidence(Proportion.of(hits, trials), units=len(trials))


# ------------------------------------------------------------------------------------------------ intervals


def test_wilson_does_not_collapse_at_0_or_1_and_matches_its_formula():
    assert wilson(32, 32) == pytest.approx((0.8928, 1.0), abs=1e-4)  # 32 of 32: not [1, 1]
    assert wilson(0, 32) == pytest.approx((0.0, 0.1072), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)  # the textbook value
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(400, 400)[0] > 0.99 > wilson(379, 379)[0]  # ≥ 0.99 is shown after about 380 clean items


def test_the_unit_is_the_sample_id_repeats_never_narrow_an_interval():
    one = Proportion.of(np.r_[np.ones(70), np.zeros(10)], np.ones(80))
    three = Proportion.of(one.hits * 3, one.trials * 3)  # three identical repeats of every item
    assert three.interval() == pytest.approx(one.interval())
    clean = Proportion.of(np.ones(80) * 3, np.ones(80) * 3)
    assert clean.interval() == pytest.approx(wilson(80, 80))  # 80 samples × 3 clean repeats count as 80 samples
    spread = Proportion.of(np.r_[np.ones(79) * 3, [2]], np.ones(80) * 3)  # one failure more
    assert spread.effective()[1] <= clean.effective()[1]  # a failure never buys effective trials


def test_defect_upper_bound_is_the_rule_of_three_and_other_formulas():
    assert defect_upper(300) == pytest.approx(3 / 300, rel=0.01) and defect_upper(0) == 1.0
    assert dice(jaccard(0.8)) == pytest.approx(0.8) and jaccard(0.8) == pytest.approx(2 / 3)
    low, high = newcombe((0.9, *wilson(90, 100)), (0.95, *wilson(95, 100)))
    assert low < -0.05 < high < 0.05
    assert trials_to_decide(0.8, 0.8) is None
    assert 380 < trials_to_decide(1.0, 0.99) < 600  # 80 % power needs more than the bare 380


def test_confidence_and_mode_options():
    assert parse_confidence("95") == parse_confidence("0.95") == parse_confidence("95%") == 0.95
    for bad in ("1.5", "40", "x", "nan"):
        with pytest.raises(ValueError):
            parse_confidence(bad)
    assert parse_verdict_mode("threshold") == "point" and parse_verdict_mode("interval") == "interval"
    with pytest.raises(ValueError, match="interval, point, statistical"):
        parse_verdict_mode("strict")


# ------------------------------------------------------------------------------------------------ one bound


def test_a_proportion_bound_is_pass_fail_or_inconclusive_by_its_interval():
    row = {"success_rate": 1.0}
    assert judge_bound("success_rate", "min", 0.99, row, {"success_rate": share(np.ones(400), np.ones(400))}).state \
        == PASS
    small = judge_bound("success_rate", "min", 0.99, row, {"success_rate": share(np.ones(32), np.ones(32))})
    assert small.state == INCONCLUSIVE and small.more is not None and 300 < 32 + small.more < 700
    assert small.text() == (f"success_rate 1 [0.8928, 1] vs ≥ 0.99: about {small.more:,} more samples would decide "
                            "it")
    bad = judge_bound("success_rate", "min", 0.99, {"success_rate": 0.9},
                      {"success_rate": share(np.r_[np.ones(90), np.zeros(10)], np.ones(100))})
    assert bad.state == FAIL and bad.text() == "success_rate 0.9000 [0.8252, 0.9449] < 0.99"


def test_f1_is_judged_through_its_jaccard_share():
    # 38 TP, 0 FP/FN on 40 samples: F1 1, its interval [dice(Wilson low of 38/38)], not [1, 1]
    f1 = Evidence(Proportion.of(np.r_[np.ones(38), np.zeros(2)], np.r_[np.ones(38), np.zeros(2)]), dice=True, units=40)
    bound = judge_bound("f1", "min", 0.8, {"f1": 1.0}, {"f1": f1})
    assert bound.low == pytest.approx(dice(wilson(38, 38)[0])) and bound.high == 1.0 and bound.state == PASS


def test_a_defect_fails_on_one_occurrence_naming_it_and_none_seen_reads_the_rule_of_three():
    seen = Evidence(Proportion.of(np.r_[1, np.zeros(99)], np.ones(100)), found=1, items=("17",), units=100)
    failed = judge_bound("tool_call_as_text_rate", "max", 0.0, {"tool_call_as_text_rate": 0.01},
                         {"tool_call_as_text_rate": seen})
    assert failed.state == FAIL and failed.text() == ("a tool call written into the content as text instead of a "
                                                      "tool_calls delta: 1 in 100 responses (sample 17)")
    clean = judge_bound("tool_call_as_text_rate", "max", 0.0, {"tool_call_as_text_rate": 0.0},
                        {"tool_call_as_text_rate": share(np.zeros(10), np.ones(10))})
    assert clean.state == PASS and clean.text() == "tool_call_as_text_rate 0 in 10 (rate < 0.2589 at 95 %)"
    assert judge_bound("tool_call_as_text_rate", "max", 0.0, {}, {}).state == FAIL  # missing: no pass by no data


def test_point_mode_is_the_peers_rule_and_missing_metrics_fail():
    row = {"f1": 0.81}
    evidence = {"f1": Evidence(Proportion.of(np.ones(10), np.ones(10)), dice=True)}
    assert judge_bound("f1", "min", 0.8, row, evidence, mode="point").state == PASS
    assert judge_bound("f1", "min", 0.8, {"f1": 0.79}, evidence, mode="point").text() == "f1 0.7900 < 0.8"
    assert judge_bound("f1", "min", 0.8, {}, evidence).text() == "f1 missing"
    # a metric with neither a ratio form nor an interval: its point value, said so by the method
    point = judge_bound("avg_ttft_ms", "max", 500.0, {"avg_ttft_ms": 420.0}, {})
    assert point.state == PASS and point.method == "point"


# ------------------------------------------------------------------------------------------------ one vendor


def _decision(states: dict[str, tuple[str, int | None, float]]) -> VendorDecision:
    from avv_scoring.decision import BoundDecision

    bounds = tuple(BoundDecision(c, "min", 0.9, s, "wilson", value=v, low=0.85, high=0.95, more=m)
                   for c, (s, m, v) in states.items())
    return VendorDecision(next((s for s in (FAIL, INCONCLUSIVE) if s in {x for x, _, _ in states.values()}), PASS),
                          bounds)


def test_a_vendor_fails_on_any_bound_passes_on_all_and_says_how_many_samples_would_decide_it():
    both = _decision({"success_rate": (INCONCLUSIVE, 100, 0.95), "f1": (INCONCLUSIVE, 400, 0.93)})
    assert both.verdict == INCONCLUSIVE and both.more == 400  # both must hold: the larger
    leaning = _decision({"success_rate": (INCONCLUSIVE, 100, 0.88), "f1": (INCONCLUSIVE, 400, 0.93)})
    assert leaning.more == 100  # one leaning to FAIL decides the vendor alone
    evidence = {"success_rate": share(np.ones(400), np.ones(400)), "f1": share(np.ones(400), np.ones(400))}
    ok = decide({"success_rate": 1.0, "f1": 1.0}, evidence, Thresholds.none().with_bound("success_rate", "min", 0.99))
    assert ok.verdict == PASS and ok.reason() == "its bound holds; closest: success_rate 1 [0.9905, 1] ≥ 0.99"
    assert decide({}, {}, Thresholds.none()).reason() == "no bound in force"
    statistical = decide({"noise_p": None}, {}, Thresholds.none(), mode="statistical")
    assert statistical.verdict == INCONCLUSIVE and "noise_p missing" in statistical.reason()


def test_a_settled_vendor_keeps_the_sequential_verdict():
    base = decide({"f1": 0.95}, {"f1": Evidence(Proportion.of(np.ones(20), np.ones(20)), dice=True)},
                  Thresholds.none().with_bound("f1", "min", 0.8))
    entry = {"verdict": "pass", "settled_after": 150, "of": 600, "alpha": 0.05,
             "bounds": [{"metric": "f1", "kind": "min", "limit": 0.8, "state": "passed", "value": 0.95,
                         "interval": [0.86, 1.0]}]}
    settled = settled_decision(base, entry)
    assert settled.verdict == PASS and settled.bounds[0].method == "sequential"
    assert settled.reason().startswith("settled PASS early by --avv-settle after 150 of 600 samples")
    assert settled_decision(base, {"verdict": None}) is base


def test_every_defect_check_is_declared_with_a_ratio_form_and_a_zero_default_bound():
    defects = [m for m in METRICS if m.defect]
    assert {m.column for m in defects} == {"reasoning_only_rate", "tool_call_as_text_rate", "tool_call_truncated_rate",
                                           "invalid_json_call_rate"}
    assert all(m.ratio is not None and m.threshold == ("max", 0.0) and m.better == "lower" for m in defects)


def test_call_defects_are_counted_per_successful_response():
    rows = [{"vendor": "v", "sample_id": "1", "finish_reason": "length", "tool_calls": [call("f", '{"x": ')]},
            {"vendor": "v", "sample_id": "2", "finish_reason": "tool_calls", "tool_calls": [call("f", "{x: 1}")]},
            {"vendor": "v", "sample_id": "3", "content": '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'},
            {"vendor": "v", "sample_id": "4", "finish_reason": "tool_calls", "tool_calls": [call("f", {"x": 1})]},
            {"vendor": "v", "sample_id": "5", "status": "failed"}]
    rows = [{**r, "is_baseline": True} for r in rows]
    scores = score_frame(records_frame(rows), {str(i): TOOLS for i in range(1, 6)}, stats=FAST).scores.iloc[0]
    assert (scores["tool_call_truncated"], scores["invalid_json_calls"], scores["tool_call_as_text"]) == (1, 1, 1)
    assert scores["tool_call_as_text_rate"] == pytest.approx(1 / 4)  # of 4 successful responses
    assert scores["verdict"] == FAIL
    assert "cut off mid-arguments (finish_reason length): 1 in 4 responses (sample 1)" in scores["verdict_reasons"]


# ------------------------------------------------------------------------------------------- exit statuses


def _run(tmp_path, vendors: dict[str, str]):
    """A run folder: per vendor a behaviour ("good", "dead", "few") on 400 samples with a call each."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    samples = write_jsonl(tmp_path / "samples.jsonl", numbered_samples(400, TOOLS, index="{i}", first=0))
    rows = []
    for vendor, kind in vendors.items():
        for i in range(400 if kind != "few" else 40):
            r = {"vendor": vendor, "sample_id": str(i), "is_baseline": vendor == "base",
                 "finish_reason": "tool_calls", "tool_calls": [call("f", {"x": i})]}
            if kind == "dead":
                r = {"vendor": vendor, "sample_id": str(i), "status": "failed", "error_kind": "http_4xx",
                     "error_detail": "HTTP 401: invalid api key"}
            rows.append(r)
    return write_run(tmp_path / "run", rows, samples)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_exit_status_broken_fail_inconclusive_and_allowed(tmp_path, capsys):
    run = _run(tmp_path, {"base": "good", "dead": "dead", "few": "few"})
    result = score_paths([run], write=False, stats=FAST)
    assert [b.vendor for b in broken_vendors(result)] == ["dead"]
    assert "every one of its 400 items failed (http_4xx ×400: HTTP 401: invalid api key)" in \
        broken_vendors(result)[0].line()
    assert decision_exit_status(result) == ExitStatus.VENDOR_BROKEN  # without --strict too
    verdicts = result.scores.set_index("vendor")["verdict"].to_dict()
    assert verdicts == {"base": PASS, "dead": FAIL, "few": INCONCLUSIVE}
    assert main([str(run), "-q", "--no-html", "--bootstrap", "0"]) == 6
    assert "vendor dead (m) is a broken setup, not a verdict" in capsys.readouterr().err
    good = _run(tmp_path / "b", {"base": "good", "few": "few"})
    assert main([str(good), "-q", "--no-html", "--bootstrap", "0"]) == 0
    assert main([str(good), "-q", "--no-html", "--bootstrap", "0", "--strict"]) == 8
    assert main([str(good), "-q", "--no-html", "--bootstrap", "0", "--strict", "--allow-inconclusive"]) == 0
    assert main([str(good), "-q", "--no-html", "--bootstrap", "0", "--strict", "--verdict", "point"]) == 0
    assert main([str(good), "-q", "--no-html", "--bootstrap", "0", "--strict", "--min-success", "1.1"]) == 7
    data = json.loads((good / "scores.json").read_text())
    assert data["statistics"]["verdict"] == "interval" and data["statistics"]["level"] == 0.95


def test_score_request_is_one_frozen_object_and_the_confidence_reaches_the_intervals(tmp_path):
    run = _run(tmp_path, {"base": "good", "few": "few"})
    request = ScoreRequest((run,), write=False, stats=StatsSettings(resamples=0, level=0.80), strict=True)
    with pytest.raises(AttributeError):
        request.strict = False  # type: ignore[misc]
    from avv_scoring import score

    result = score(request)
    few = result.decision("m", "few")
    assert few is not None and few.level == 0.80 and all(b.level == 0.80 for b in few.bounds)
    assert request.exit_status(result) == (ExitStatus.VERDICT_INCONCLUSIVE if few.verdict == INCONCLUSIVE
                                           else ExitStatus.OK)
    assert request.inputs == (str(run),)


def test_the_decision_block_is_one_line_per_vendor_last_on_the_terminal(tmp_path):
    result = score_paths([_run(tmp_path, {"base": "good", "few": "few"})], write=False, stats=FAST)
    lines = decision_lines(result)
    assert lines[1] == "Decision (95 % confidence, thresholds avv):"
    assert lines[2].split()[:3] == ["base", "(baseline)", "PASS"]
    assert lines[3].split()[:2] == ["few", "INCONCLUSIVE"] and "more samples would decide it" in lines[3]
    assert len(lines) == 5 and not math.isnan(result.scores.set_index("vendor").loc["few", "samples_to_decide"])


# ---------------------------------------------------------------------------------------- non-inferiority


def test_a_margin_against_the_baseline_is_judged_on_the_difference():
    thresholds = Thresholds.none().with_margin("schema_accuracy", 0.02)
    assert thresholds.text() == "schema_accuracy ≥ baseline − 0.02" and thresholds.checks() == []
    with pytest.raises(ValueError, match="cannot take a margin"):
        thresholds.with_margin("f1", 0.05)  # F1 compares with the baseline already
    base_ev = {"schema_accuracy": share(np.r_[np.ones(960), np.zeros(40)], np.ones(1000))}  # 0.96: below 0.98 itself
    base = ({"schema_accuracy": 0.96}, base_ev)
    same = decide({"schema_accuracy": 0.96}, base_ev, thresholds, baseline=base)
    assert same.verdict == PASS and same.bounds[0].state_text() == "schema_accuracy≥baseline−0.02:PASS"
    worse = {"schema_accuracy": share(np.r_[np.ones(880), np.zeros(120)], np.ones(1000))}
    failed = decide({"schema_accuracy": 0.88}, worse, thresholds, baseline=base)
    assert failed.verdict == FAIL and failed.reason().startswith("schema_accuracy 0.8800 vs the baseline's 0.9600: "
                                                                 "−0.0800 [")
    small = {"schema_accuracy": share(np.r_[np.ones(47), np.zeros(3)], np.ones(50))}
    assert decide({"schema_accuracy": 0.94}, small, thresholds, baseline=base).verdict == INCONCLUSIVE
    assert decide({"schema_accuracy": 0.96}, base_ev, thresholds).bounds[0].text() == \
        "schema_accuracy ≥ baseline − 0.02: the baseline itself"
    from avv_scoring.presets import thresholds_from_data, thresholds_yaml

    parsed = thresholds_from_data({"base": "avv", "thresholds": {"schema_accuracy": {"margin": 0.02}}}, "f", "f")
    assert parsed.margins() == [("schema_accuracy", 0.02)] and "schema_accuracy" not in parsed  # replaces the bound
    assert "margin: 0.02" in thresholds_yaml(parsed)
