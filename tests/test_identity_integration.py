"""The identity test on a real Locust run against the simulator: ``--avv-repeats`` at ``--avv-temperature 0.7``,
twins of the baseline (one profile under another seed) and a vendor whose content answers come from another word
distribution (``answer_shift_rate`` 1). records.csv holds the temperature sent, the truth log the words sampled and
the answers shifted, and scores.csv says ``same`` for the twin and ``differs`` for the shifted vendor."""

from __future__ import annotations

import pandas as pd
import pytest

from avv_core.record_file import read_records
from tests.builders import numbered_samples, sim_config, sim_vendors, write_jsonl, write_yaml
from tests.locust_runs import only_run_dir, run_locust
from tests.sim_records import TOOLS, truth_lines

pytestmark = pytest.mark.integration

BASE = {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 24, "tool_call_rate": 0.5, "follow_gold": False,
        "sampling_rate": 0.1, "self_flip_rate": 0.05}
PROFILES = {
    "official": {**BASE, "seed": 1},
    "twin": {**BASE, "seed": 2},
    "shifted": {**BASE, "seed": 3, "answer_shift_rate": 1.0},
}
SAMPLES, REPEATS = 16, 4


def test_twins_are_same_and_a_shifted_vendor_differs(tmp_path):
    write_yaml(tmp_path / "sim.yaml", sim_config(PROFILES))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", list(PROFILES), "official"))
    lines = numbered_samples(SAMPLES, content="tell me about topic {i}")
    for i, line in enumerate(lines):  # half the prompts offer tools: answers are calls or text
        if i % 2 == 0:
            line["tools"] = TOOLS
    write_jsonl(tmp_path / "samples.jsonl", lines)
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", "samples.jsonl", "--avv-repeats", str(REPEATS), "--avv-temperature", "0.7",
                       "--avv-out", "out", "--avv-retries", "0"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    records = read_records(run_dir / "records.csv")
    assert len(records) == SAMPLES * REPEATS * len(PROFILES) and (records["temperature"] == 0.7).all()
    truth = truth_lines(run_dir / "sim_truth.jsonl")
    texts = [line for line in truth if line["content_script"] is not None]
    assert any(line["sampled_words"] > 0 for line in texts)
    assert all(line["answer_shifted"] == (line["profile"] == "shifted") for line in texts)
    official = records[(records["vendor"] == "official") & (records["content"].fillna("") != "")]
    assert (official.groupby("sample_id")["content"].nunique() > 1).any()  # repeats are samples, not copies
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    assert scores.loc["twin", "identity"] == "same" and scores.loc["twin", "identity_p"] >= 0.05
    assert scores.loc["shifted", "identity"] == "differs" and scores.loc["shifted", "identity_p"] < 0.01
    assert scores.loc["twin", "identity_prompts"] == SAMPLES
    assert scores.loc["official", "identity"] == "untested"
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "shifted: answers differ from the baseline's" in report and "another model" not in report
