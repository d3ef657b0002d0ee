"""Interop against the simulator (in-process Locust, the simulator as a process): language following measured
by the harness equals the simulator's own drift decisions (truth log), and a run exported to K2VV files and
scored with one exported file as ``--baseline-results`` gives the same F1 and schema accuracy as direct scoring."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from avv_core.items import truth_tag
from avv_core.language import MINIMAX_NO_CYRILLIC
from avv_core.record_file import read_records
from avv_harness.exports import export_run
from avv_harness.run.controller import EXIT_OK
from avv_scoring.baseline_results import BaselineResults, read_results
from avv_scoring.entrypoints import score_paths
from tests.builders import sim_config, sim_url, write_inputs, write_yaml
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import DEMO_SAMPLES
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 8}
PROMPTS = [  # (prompt, the language check the harness infers from it)
    ("日本ではどのような時にお年玉を渡しますか？", "ja"),
    ("富士山の山頂にある神社の名前は?", "ja"),
    ("Какая погода будет завтра в Москве?", "Cyrillic"),
    ("Сколько стоит билет на поезд?", "Cyrillic"),
    ("Τι καιρό θα κάνει αύριο στην Αθήνα;", "Greek"),
    ("서울에서 가장 유명한 음식은 무엇인가요?", "ko"),
    ("北京今天的天气怎么样？", "zh"),
    ("ما هو أفضل وقت لزيارة القاهرة؟", "Arabic"),
    ("מה מזג האוויר בירושלים היום?", "Hebrew"),
    ("दिल्ली में आज मौसम कैसा है?", "Devanagari"),
    ("วันนี้อากาศที่กรุงเทพเป็นอย่างไร", "Thai"),
    ("What is the capital of Australia?", "Latin"),
]


def _run(tmp_path, profiles: dict, lines: list[dict], *extra: str):
    write_yaml(tmp_path / "sim.yaml", sim_config(profiles))
    vendors = {name: {"url": sim_url(name), "concurrency": 4, "timeout_s": 15} for name in profiles}
    config, samples = write_inputs(tmp_path, vendors, sample_lines=lines)
    args = options(tmp_path, config, samples, "--avv-sim-config", str(tmp_path / "sim.yaml"), "--avv-retries", "0",
                   *extra)
    env, ctl = make_env(args, real_http=True)
    assert run_to_end(env, timeout=120) == EXIT_OK
    return ctl.run_dir


def test_language_following_rate_equals_the_simulators_drift_decisions(tmp_path):
    lines = [{"data_index": f"l{i}", "messages": [{"role": "user", "content": text}],
              "check_type": "language_following"} for i, (text, _) in enumerate(PROMPTS * 3)]
    lines += [{"data_index": f"mm{i}", "messages": [{"role": "user", "content": PROMPTS[i][0]}],
               "check_type": ["contains_russian_characters_unicode"]} for i in range(2)]  # MiniMax's own rule
    profiles = {"steady": FAST, "drifty": {**FAST, "language_drift_rate": 0.4, "seed": 11}}
    run_dir = _run(tmp_path, profiles, lines)
    frame = read_records(run_dir / "records.csv")
    truth = truth_by_tag(run_dir / "sim_truth.jsonl")
    assert (frame["status"] == "success").all()
    expected = {f"l{i}": spec for i, (_, spec) in enumerate(PROMPTS * 3)} | {"mm0": MINIMAX_NO_CYRILLIC,
                                                                           "mm1": MINIMAX_NO_CYRILLIC}
    assert dict(zip(frame["sample_id"], frame["expected_language"], strict=True)) == expected
    scores = score_paths([run_dir], write=False).scores.set_index("vendor")
    for vendor in profiles:
        rows = frame[frame["vendor"] == vendor]
        lines_of = [truth[truth_tag(r)] for r in rows.to_dict("records")]
        assert all(t["content_script"] is not None and t["content_tokens"] > 0 for t in lines_of)
        followed = [not t["language_drift"] for t in lines_of]
        assert scores.loc[vendor, "language_following_checked"] == len(rows)
        assert scores.loc[vendor, "language_following_rate"] == pytest.approx(sum(followed) / len(followed))
    drifted = [t for t in truth.values() if t["language_drift"]]
    assert drifted and all(t["profile"] == "drifty" for t in drifted)  # the test has teeth
    assert scores.loc["steady", "language_following_rate"] == 1.0
    assert 0.2 < scores.loc["drifty", "language_following_rate"] < 0.9
    # the export counts the same: MiniMax's language_following_* summary fields
    export_run(run_dir, out_dir=tmp_path / "k2vv")
    summary = json.loads((tmp_path / "k2vv" / "drifty_summary.json").read_text())
    assert summary["language_following_checked_count"] == len(lines)
    assert summary["language_following_invalid_count"] == len(drifted)


def test_round_trip_export_then_baseline_results_gives_the_same_f1_and_schema_accuracy(tmp_path):
    profiles = {
        "reference": {**FAST, "tool_call_rate": 0.6},
        "mirror": {**FAST, "tool_call_rate": 0.6, "seed": 1},
        "drifty": {**FAST, "tool_call_rate": 0.6, "flip_rate": 0.25, "bad_args_rate": 0.2, "parallel_rate": 0.5,
                   "error_rate": 0.1, "seed": 7},
    }
    lines = [json.loads(line) for line in DEMO_SAMPLES.read_text().splitlines() if line.strip()]
    run_dir = _run(tmp_path, profiles, lines)
    direct = score_paths([run_dir], write=False).scores.set_index("vendor")
    export = export_run(run_dir, out_dir=tmp_path / "k2vv")
    assert len(export.files) == 3 * 2 + 2  # results + summary per vendor, compare for the two others
    official = read_results(tmp_path / "k2vv" / "reference_results.jsonl")
    assert len(official) == len(lines)
    imported = score_paths([run_dir], baseline_results=[BaselineResults(str(tmp_path / "k2vv" /
                                                                             "reference_results.jsonl"))],
                           write=False)
    assert imported.baselines == {"m": "official"}
    via_file = imported.scores.set_index("vendor")
    columns = ["f1", "precision", "recall", "tp", "fp", "fn", "tn", "f1_pairs", "f1_excluded", "schema_accuracy",
               "schema_response_accuracy", "multi_call_similarity"]
    for vendor in ("mirror", "drifty"):
        pd.testing.assert_series_equal(via_file.loc[vendor, columns], direct.loc[vendor, columns], check_names=False)
        compare = json.loads((tmp_path / "k2vv" / f"{vendor}_compare.json").read_text())
        assert compare["tool_call_trigger_similarity"]["f1"] == round(direct.loc[vendor, "f1"], 4)
    # the imported baseline scores as the reference itself on what the file carries
    for column in ("success_rate", "schema_accuracy", "avg_tokens", "finish_tool_calls_rate"):
        assert via_file.loc["official", column] == pytest.approx(direct.loc["reference", column])
    assert direct.loc["drifty", "f1"] < 0.95 and direct.loc["drifty", "schema_accuracy"] < 0.95  # teeth
    assert direct.loc["drifty", "f1_excluded"] > 0  # its failures are left out on both paths
