"""Calibration of the three-way decision against known truth (issue 34's "Done when"): 200 seeded runs per case
of bench/calibration.py's draws (in-process; each case well under a second), and the check that its per-sample
counts are the ones scoring reduces records to."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from avv_scoring import score_frame
from avv_scoring.decision import FAIL, PASS, vendor_evidence
from avv_scoring.metrics.headline import annotate_tool_calls
from avv_scoring.metrics.vendor_table import FeatureFrames
from avv_scoring.stats.uncertainty import StatsSettings
from avv_scoring.testing import call, records_frame
from tests.sim_records import TOOLS, sim_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import calibration as bench  # type: ignore[import-not-found]  # noqa: E402

RUNS = 200
CASES = {case.name: case for case in bench.CASES}


@pytest.mark.parametrize("name", [c.name for c in bench.CASES if c.truth == "at the bound"])
def test_a_vendor_exactly_at_a_bound_is_rarely_decided_either_way(name):
    shares = bench.run_case(CASES[name], RUNS)
    assert shares[PASS] <= 0.05 and shares[FAIL] <= 0.05, shares


@pytest.mark.parametrize("name", ["success rate 10 points better", "F1 10 points better"])
def test_a_vendor_10_points_better_passes_at_the_documented_sample_size(name):
    shares = bench.run_case(CASES[name], RUNS)
    assert shares[PASS] >= 0.80 and shares[FAIL] == 0.0, shares


@pytest.mark.parametrize("name", [c.name for c in bench.CASES if c.name.startswith("clearly")])
def test_pass_and_fail_never_flip_between_seeds_of_a_clearly_good_or_bad_vendor(name):
    case = CASES[name]
    shares = bench.run_case(case, RUNS)
    assert shares[case.truth] == 1.0, shares  # every seed decides it, and the right way


def test_the_draws_counts_are_what_scoring_reduces_records_to():
    """bench/calibration.py builds Proportions from counts; vendor_evidence builds them from records: on simulated
    records the two are the score's own counts (successes / items, TP / TP + FP + FN, valid / checked calls)."""
    frame, _ = sim_records({"ref": {}, "v": {"flip_rate": 0.2, "bad_args_rate": 0.1, "seed": 3}}, "ref", 60, 2)
    tools = {sid: TOOLS for sid in frame["sample_id"].astype(str).unique()}
    row = score_frame(frame, tools, stats=StatsSettings(resamples=0)).scores.set_index("vendor").loc["v"]
    rows = annotate_tool_calls(frame, tools)
    evidence = vendor_evidence(FeatureFrames(rows[rows["vendor"] == "v"], rows[rows["vendor"] == "ref"]))
    assert (evidence["success_rate"].proportion.x, evidence["success_rate"].proportion.n) == (row["successes"],
                                                                                             row["items"])
    f1 = evidence["f1"].proportion
    assert (f1.x, f1.n) == (row["tp"], row["tp"] + row["fp"] + row["fn"]) and evidence["f1"].dice
    schema = evidence["schema_accuracy"].proportion
    assert schema.x == row["schema_valid_calls"] and schema.n == row["schema_calls"] - row["schema_uncheckable_calls"]
    assert f1.samples <= 60 and evidence["f1"].units == 60  # per sample id, both repeats together


def test_a_vendor_that_leaks_one_call_as_text_fails_naming_the_sample():
    rows = []
    for i in range(1, 401):
        calling = i % 3 != 0
        for vendor in ("ref", "leaky"):
            r = {"vendor": vendor, "sample_id": str(i), "is_baseline": vendor == "ref"}
            if calling:
                r.update(finish_reason="tool_calls", tool_calls=[call("get_weather", {"city": "Oslo"})])
            if vendor == "leaky" and i == 217:  # the one leak: the call written into the content
                r.update(finish_reason="stop", tool_calls=[],
                         content='```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```')
            rows.append(r)
    result = score_frame(records_frame(rows), {str(i): TOOLS for i in range(1, 401)}, stats=StatsSettings(resamples=0))
    scores = result.scores.set_index("vendor")
    assert scores.loc["leaky", "verdict"] == FAIL and scores.loc["ref", "verdict"] == PASS
    reasons = scores.loc["leaky", "verdict_reasons"]
    assert reasons.startswith("a tool call written into the content as text") and "(sample 217)" in reasons
    assert "tool_call_as_text_rate≤0:FAIL" in scores.loc["leaky", "verdict_bounds"]
    clean = result.decision("m", "ref")
    assert clean is not None and "no defect in 400 responses" in clean.reason()
    defect = next(b for b in clean.bounds if b.column == "tool_call_as_text_rate")
    assert defect.text() == "tool_call_as_text_rate 0 in 400 (rate < 0.0075 at 95 %)"  # 1 − 0.05^(1/400) ≈ 3/400
    assert np.isclose(scores.loc["leaky", "tool_call_as_text_rate"], 1 / 400)
