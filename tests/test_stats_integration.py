"""A real Locust run against the simulator with sampling noise (``self_flip_rate``) and three repeats. The
simulator reads each request's repeat from the X-AVV-Item tag, and the noise floor and the McNemar counts of
the score table equal what its truth log implies."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations

import pandas as pd
import pytest

from avv_scoring.metrics.correctness import canonical_key
from avv_scoring.stats import tests as stats
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.locust_runs import DEMO_SAMPLES, only_run_dir, run_locust
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

BASE = {"ttft_ms": 20, "tokens_per_s": 500, "output_tokens": 8, "tool_call_rate": 0.5, "follow_gold": False}
PROFILES = {
    "official": {**BASE, "self_flip_rate": 0.3, "seed": 1},
    "twin": {**BASE, "self_flip_rate": 0.3, "seed": 2},
    "flipper": {**BASE, "flip_rate": 0.4, "seed": 3},
}


def calls_key(line: dict) -> tuple[Counter, Counter]:
    calls = [(c["name"], canonical_key(json.loads(c["arguments"]))) for c in line["tool_calls"]]
    return Counter(n for n, _ in calls), Counter(calls)


def test_noise_floor_and_mcnemar_equal_the_truth_log(tmp_path):
    write_yaml(tmp_path / "sim.yaml", sim_config(PROFILES))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", list(PROFILES), "official"))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", str(DEMO_SAMPLES), "--avv-repeats", "3", "--avv-out", "out",
                       "--avv-retries", "0"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    truth = truth_by_tag(run_dir / "sim_truth.jsonl")
    items: dict[str, dict[tuple[str, int], dict]] = {}
    for tag, line in truth.items():
        _, _, vendor, sample, repeat, _ = tag.split("/")
        assert (line["repeat"], line["repeat_source"]) == (int(repeat), "tag")  # the simulator read the tag
        if line["has_tools"]:
            assert line["decision"] == (line["reference_decision"] ^ line["flipped"] ^ line["self_flipped"])
        items.setdefault(vendor, {})[(sample, int(repeat))] = line
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")

    # the noise floor: the official profile's repeats against each other, all pairs i < j of a sample
    by_sample: dict[str, list[dict]] = {}
    for (sample, _), line in items["official"].items():
        by_sample.setdefault(sample, []).append(line)
    tp = disc = pairs = call_pairs = tools_equal = calls_equal = 0
    for lines in by_sample.values():
        for a, b in combinations(lines, 2):
            pa, pb = a["finish_reason"] == "tool_calls", b["finish_reason"] == "tool_calls"
            pairs, tp, disc = pairs + 1, tp + (pa and pb), disc + (pa != pb)
            if pa and pb:
                call_pairs += 1
                (ta, ca), (tb, cb) = calls_key(a), calls_key(b)
                tools_equal, calls_equal = tools_equal + (ta == tb), calls_equal + (ca == cb)
    row = scores.loc["twin"]
    assert row["baseline_self_pairs"] == pairs == 3 * len(by_sample)
    assert row["baseline_self_agreement"] == pytest.approx(1 - disc / pairs)
    assert row["baseline_self_f1"] == pytest.approx(2 * tp / (2 * tp + disc))
    assert row["baseline_self_call_pairs"] == call_pairs
    assert row["baseline_self_tool_match"] == pytest.approx(tools_equal / call_pairs)
    assert row["baseline_self_args_match"] == pytest.approx(calls_equal / call_pairs)
    assert disc > 0  # the sampling noise is there

    # McNemar: per sample, pairs where only the vendor called against pairs where only the official did
    for vendor in ("twin", "flipper"):
        net = Counter()
        for (sample, repeat), line in items[vendor].items():
            base = items["official"][(sample, repeat)]
            v, b = line["finish_reason"] == "tool_calls", base["finish_reason"] == "tool_calls"
            net[sample] += (v and not b) - (b and not v)
        more, fewer = sum(n > 0 for n in net.values()), sum(n < 0 for n in net.values())
        row = scores.loc[vendor]
        assert (row["mcnemar_more"], row["mcnemar_fewer"]) == (more, fewer), vendor
        assert row["mcnemar_p"] == pytest.approx(stats.sign_test_p(more, fewer))
        assert row["f1_ci_low"] <= row["f1"] <= row["f1_ci_high"]
    report = (run_dir / "report.md").read_text()
    assert "(baseline vs itself " in report and "noise p = " in report
