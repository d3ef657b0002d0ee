"""Scores of a real Locust run against the simulator equal the values computed independently from the
simulator's truth log."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from avv_core.exit_status import ExitStatus
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.locust_runs import DEMO_SAMPLES, only_run_dir, run_locust
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

BASE = {"ttft_ms": 30, "tokens_per_s": 400, "output_tokens": 12, "tool_call_rate": 0.5}
PROFILES = {
    "official": BASE,
    "mirror": {**BASE, "seed": 1},
    "drifty": {**BASE, "flip_rate": 0.3, "bad_args_rate": 0.3, "seed": 7},
    "broken": {**BASE, "error_rate": 1.0},
}


def _cut(call: dict) -> bool:
    try:
        json.loads(call["arguments"])
    except json.JSONDecodeError:
        return True
    return False


def expected_from_truth(truth: dict) -> dict[str, dict[str, float]]:
    """F1 and schema accuracy from what the simulator says it did (not from our records)."""
    by_vendor: dict[str, dict[tuple[str, str], dict]] = {}
    for tag, line in truth.items():
        _, _, vendor, sample, repeat, _ = tag.split("/")
        by_vendor.setdefault(vendor, {})[(sample, repeat)] = line  # one attempt per item (no retries)
    base = by_vendor["official"]
    out = {}
    for vendor, items in by_vendor.items():
        tp = fp = fn = 0
        for key, line in items.items():
            if line["finish_reason"] is None or base[key]["finish_reason"] is None:
                continue  # a failed side: excluded
            b, v = base[key]["finish_reason"] == "tool_calls", line["finish_reason"] == "tool_calls"
            tp, fp, fn = tp + (b and v), fp + (v and not b), fn + (b and not v)
        # every call of every answered response, whatever its finish_reason (a call cut by max_tokens too)
        calls = [c for line in items.values() if line["finish_reason"] is not None for c in line["tool_calls"]]
        valid = [c for c in calls if not c["broken"] and not _cut(c)]
        # the K2VV / MiniMax reading: tool_calls responses whose every call is valid
        responses = [line for line in items.values() if line["finish_reason"] == "tool_calls"]
        whole = [line for line in responses if not any(c["broken"] or _cut(c) for c in line["tool_calls"])]
        out[vendor] = {
            "f1": 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else None,
            "schema_accuracy": len(valid) / len(calls) if calls else None,
            "schema_response_accuracy": len(whole) / len(responses) if responses else None,
        }
    return out


def test_scores_equal_truth(tmp_path):
    write_yaml(tmp_path / "sim.yaml", sim_config(PROFILES))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", list(PROFILES), "official"))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", str(DEMO_SAMPLES), "--avv-repeats", "2", "--avv-out", "out",
                       "--avv-retries", "0"], cwd=tmp_path)
    assert proc.returncode == ExitStatus.VENDOR_BROKEN, proc.stderr[-3000:]  # "broken" fails every item: exit 6
    run_dir = only_run_dir(tmp_path / "out")
    expected = expected_from_truth(truth_by_tag(run_dir / "sim_truth.jsonl"))
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    for vendor in ("official", "mirror", "drifty"):
        assert scores.loc[vendor, "f1"] == pytest.approx(expected[vendor]["f1"]), vendor
        for column in ("schema_accuracy", "schema_response_accuracy"):
            assert scores.loc[vendor, column] == pytest.approx(expected[vendor][column]), (vendor, column)
    assert expected["drifty"]["f1"] < 0.95 and expected["drifty"]["schema_accuracy"] < 0.95  # the test has teeth
    assert scores.loc["mirror", "f1"] == 1.0 and scores.loc["mirror", "schema_accuracy"] == 1.0
    # every request of "broken" failed: success 0, no F1 pairs, ranked last
    assert scores.loc["broken", "success_rate"] == 0 and pd.isna(scores.loc["broken", "f1"])
    assert scores["irf"].idxmin() == "broken"
    # avv-score on the run folder reproduces the same table
    again = tmp_path / "again"
    cli = subprocess.run([sys.executable, "-m", "avv_scoring.cli", str(run_dir), "--out", str(again), "--no-html"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == ExitStatus.VENDOR_BROKEN, cli.stderr  # "broken" is named as a broken setup
    assert "vendor broken (m) is a broken setup" in cli.stderr
    rescored = pd.read_csv(again / "scores.csv").set_index("vendor")
    pd.testing.assert_series_equal(rescored["irf"], scores["irf"])
