"""Interoperability with K2-Vendor-Verifier and MiniMax-Provider-Verifier (fast tier): the export's fields, hash,
summary and compare; a hand-written K2VV results file as the baseline; the MiniMax measures; threshold presets
with a vendor on either side of each bound; resume after an edited sample."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from avv_core.errors import InputError
from avv_core.items import ItemKey
from avv_core.manifest import RunManifest
from avv_core.record_file import RecordWriter
from avv_core.samples import body_hash, file_sha256, load_samples
from avv_harness.cli import score_main as main  # the avv-score console script (export included)
from avv_harness.exports import export_run
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import build_body
from avv_scoring.baseline_results import BaselineResults, baseline_record, read_results
from avv_scoring.entrypoints import score_paths
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.metrics.verifiers import QSR_MAX_ATTEMPTS, multi_call_similarity, query_success_rate
from avv_scoring.presets import PRESETS, load_thresholds, preset, resolve_thresholds, thresholds_yaml
from avv_scoring.report.k2vv import compare, k2vv_hash, summarize
from avv_scoring.score import score_frame
from avv_scoring.testing import call, record, records_frame
from avv_scoring.verdict import Thresholds, verdict
from tests.builders import write_yaml

DATA = Path(__file__).resolve().parent / "data"
K2VV_FILE = DATA / "k2vv_results.jsonl"
K2VV_SAMPLES = DATA / "k2vv_samples.jsonl"
#: The fields of a results row in the K2VV README, and the two more its ValidationResult has.
K2VV_README_FIELDS = {"data_index", "request", "response", "status", "finish_reason", "tool_calls_valid",
                      "duration_ms", "hash"}
SECRET = "sk-interop-secret-123"


def weather(city: str = "Paris") -> dict:
    return call("get_weather", {"city": city})


def make_run(tmp_path: Path, rows: list[dict], vendors: dict[str, dict] | None = None,
             samples: Path = K2VV_SAMPLES) -> Path:
    """A run folder as the harness writes it: records.csv, run.json with the redacted vendor config and the
    sample file's path and sha256."""
    run = tmp_path / "run"
    run.mkdir()
    local = run.parent / samples.name
    shutil.copy(samples, local)
    vendors = vendors or {"v": {}}
    configs = [Vendor(model="m", name=name, model_id=f"{name}-model", url=f"http://{name}.test/v1",
                      api_key=SECRET, is_baseline=i == 0, **extra) for i, (name, extra) in enumerate(vendors.items())]
    RunManifest(run_id="run", vendors=[v.redacted() for v in configs],
                samples={"path": str(local), "sha256": file_sha256(local), "count": 4}).write(run)
    writer = RecordWriter(run / "records.csv")
    writer.write_many([{k: v for k, v in record(**row).items()} for row in rows])
    writer.close()
    return run


# ------------------------------------------------------------------------------------- the K2VV results file


def test_hand_written_k2vv_file_has_the_readme_fields_and_k2vvs_hash():
    rows = read_results(K2VV_FILE)
    assert [r["data_index"] for r in rows] == [1, 2, 3, 4]
    for row in rows:
        assert K2VV_README_FIELDS <= set(row) and "last_run_at" in row
        # K2VV's compute_hash: md5 of json.dumps(sort_keys=True, ensure_ascii=False) — not our sha256 request_hash
        expected = hashlib.md5(json.dumps(row["request"], sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        assert k2vv_hash(row["request"]) == row["hash"] == expected
        assert row["hash"] != body_hash(row["request"])


def test_k2vv_rows_become_baseline_records():
    ok, stop, failed, bad = (baseline_record(r, ItemKey("m", "official", str(r["data_index"]), 1), "b", None)
                             for r in read_results(K2VV_FILE))
    assert ok["status"] == "success" and ok["finish_reason"] == "tool_calls" and ok["is_baseline"]
    assert json.loads(ok["tool_calls"]) == [{"id": "functions.get_weather:0", "name": "get_weather",
                                             "arguments": '{"city": "Paris"}'}]
    assert (ok["prompt_tokens"], ok["completion_tokens"], ok["total_tokens"]) == (96, 18, 114)
    assert ok["wall_ms"] == 1234.0 and ok["started_at"] == "2025-09-25T14:02:11.518204"
    assert stop["content"] == "Hello!" and stop["tool_call_count"] == 0
    assert failed["status"] == "failed" and failed["error_kind"] == "imported_failure"
    assert "engine overloaded" in failed["error_detail"] and failed["finish_reason"] is None
    assert bad["finish_reason"] == "tool_calls" and json.loads(bad["tool_calls"])[0]["arguments"] == '{"town": "Rome"}'


def test_bad_results_files_name_file_and_line(tmp_path):
    cases = {"[1]": "must be a JSON object", '{"data_index": "1", "status": "success"}': "'data_index' must be an",
             '{"data_index": 1}': "'status' is missing", "{nope": "not valid JSON"}
    for text, message in cases.items():
        path = tmp_path / "r.jsonl"
        path.write_text('{"data_index": 9, "status": "success"}\n' + text + "\n")
        with pytest.raises(InputError, match=rf"r\.jsonl:2: .*{message}"):
            read_results(path)


VENDOR_ROWS = [  # sample ids are the line numbers (the K2VV sample file has no data_index)
    {"sample_id": "1", "finish_reason": "tool_calls", "tool_calls": [weather()]},  # TP (baseline calls)
    {"sample_id": "2", "finish_reason": "tool_calls", "tool_calls": [weather("Oslo")]},  # FP (baseline stops)
    {"sample_id": "3", "finish_reason": "stop", "content": "Sunny."},  # the baseline failed: excluded
    {"sample_id": "4", "finish_reason": "stop", "content": "Sunny."},  # FN
]


def test_a_k2vv_file_as_baseline_scores_like_k2vv_compare(tmp_path):
    run = make_run(tmp_path, VENDOR_ROWS)
    result = score_paths([run], baseline_results=[BaselineResults(str(K2VV_FILE))], write=False)
    scores = result.scores.set_index("vendor")
    assert result.baselines == {"m": "official"} and bool(scores.loc["official", "is_baseline"])
    v, official = scores.loc["v"], scores.loc["official"]
    assert (v["tp"], v["fp"], v["fn"], v["tn"], v["f1_excluded"]) == (1, 1, 1, 0, 1)
    assert v["f1"] == pytest.approx(0.5)
    # the file's failed row counts as a failure; its invalid call (row 4) fails the schema check
    assert official["success_rate"] == 0.75 and official["failures"] == 1
    assert official["schema_accuracy"] == 0.5 and official["error_kinds"] == "imported_failure:1"
    # K2VV's own compare over the exported vendor rows gives the same F1
    export = export_run(run, out_dir=tmp_path / "k2vv")
    vendor_rows = read_results(tmp_path / "k2vv" / "v_results.jsonl")
    report = compare(read_results(K2VV_FILE), vendor_rows)
    assert report["tool_call_trigger_similarity"] == {"TP": 1, "FP": 1, "FN": 1, "TN": 0, "precision": 0.5,
                                                      "recall": 0.5, "f1": 0.5}
    assert (report["matched_success"], report["skipped_failures"], report["common_indices"]) == (3, 1, 4)
    assert [Path(f).name for f in export.files] == ["v_results.jsonl", "v_summary.json"]
    assert export.warnings and "no compare files" in export.warnings[0]  # the run alone has no baseline


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_baseline_results_options_and_errors(tmp_path):
    run = make_run(tmp_path, VENDOR_ROWS)
    named = score_paths([run], baseline_results=[BaselineResults.parse(f"m={K2VV_FILE}")], baseline_name="moonshot",
                        write=False)
    assert named.baselines == {"m": "moonshot"}
    with pytest.raises(InputError, match="give one of them"):
        score_paths([run], baseline="v", baseline_results=[BaselineResults(str(K2VV_FILE))], write=False)
    with pytest.raises(InputError, match="no records for model 'x'"):
        score_paths([run], baseline_results=[BaselineResults(str(K2VV_FILE), "x")], write=False)
    with pytest.raises(InputError, match="already has a vendor of that name"):
        score_paths([run], baseline_results=[BaselineResults(str(K2VV_FILE))], baseline_name="v", write=False)
    # rows from another sample set are flagged (same data_index, another prompt)
    other = tmp_path / "other.jsonl"
    rows = read_results(K2VV_FILE)
    rows[0]["request"]["messages"][-1]["content"] = "Something else entirely"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score_paths([run], baseline_results=[BaselineResults(str(other))], write=False)
    assert any("1 row(s) whose request's last user message differs" in w for w in result.warnings)
    assert main([str(run), "--baseline-results", str(K2VV_FILE), "--out", str(tmp_path / "s"), "-q",
                 "--no-html"]) == 0
    assert json.loads((tmp_path / "s" / "scores.json").read_text())["baselines"] == {"m": "official"}


# ------------------------------------------------------------------------------------------------ export


def test_export_writes_k2vv_and_minimax_fields_and_never_a_key(tmp_path):
    rows = [
        {"vendor": "base", "is_baseline": True, "sample_id": "1", "finish_reason": "tool_calls",
         "tool_calls": [weather()], "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
         "wall_ms": 812.4, "started_at": "2025-01-01T00:00:00.000+00:00", "reasoning": "Use the tool.",
         "reasoning_chars": 13},
        {"vendor": "base", "is_baseline": True, "sample_id": "2", "content": "Hello"},
        {"vendor": "base", "is_baseline": True, "sample_id": "3", "status": "failed", "error_kind": "http_5xx",
         "error_detail": "HTTP 503: busy", "attempts": 4},
        {"vendor": "base", "is_baseline": True, "sample_id": "4", "content": "", "reasoning": "hmm",
         "reasoning_chars": 3},
        {"vendor": "v", "sample_id": "1", "finish_reason": "tool_calls", "tool_calls": [weather(), weather("Nice")]},
        {"vendor": "v", "sample_id": "2", "finish_reason": "tool_calls", "tool_calls": [call("get_weather", {})]},
        {"vendor": "v", "sample_id": "3", "content": "Sunny", "expected_language": "en"},
        {"vendor": "v", "sample_id": "4", "content": "Солнечно", "expected_language": "en"},
    ]
    run = make_run(tmp_path, rows, vendors={"base": {"include_usage": True}, "v": {"extra_body": {"top_k": 40}}})
    assert main(["export", "--format", "k2vv", str(run), "-q"]) == 0
    out = run / "k2vv"
    assert sorted(p.name for p in out.iterdir()) == ["base_results.jsonl", "base_summary.json", "v_compare.json",
                                                      "v_results.jsonl", "v_summary.json"]
    for path in out.iterdir():
        assert SECRET not in path.read_text(encoding="utf-8")
    base = read_results(out / "base_results.jsonl")
    sample = load_samples(run.parent / K2VV_SAMPLES.name).by_id()["1"]
    vendor = Vendor(model="m", name="base", model_id="base-model", url="")
    assert base[0]["request"] == build_body(sample, vendor)  # the body as sent: _input → system, model, stream
    assert base[0]["request"]["messages"][0]["role"] == "system" and base[0]["request"]["stream"] is True
    assert base[0]["hash"] == k2vv_hash(base[0]["request"])
    assert K2VV_README_FIELDS | {"last_run_at"} <= set(base[0])
    message = base[0]["response"]["choices"][0]["message"]
    assert message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert message["reasoning_content"] == "Use the tool." and base[0]["response"]["object"] == "chat.completion"
    assert base[0]["response"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert (base[0]["tool_calls_valid"], base[0]["duration_ms"], base[0]["tool_calls_count"]) == (True, 812, 1)
    assert base[1]["tool_calls_valid"] is None and base[1]["finish_reason"] == "stop"
    assert base[2]["status"] == "failed" and base[2]["response"] == {"error": "HTTP 503: busy"}
    assert base[2]["finish_reason"] is None and base[2]["avv"]["error_kind"] == "http_5xx"
    assert base[3]["error_only_reasoning"] is True and base[0]["error_only_reasoning"] is False
    v = read_results(out / "v_results.jsonl")
    assert v[0]["request"]["top_k"] == 40 and v[0]["request"]["model"] == "v-model"
    assert v[1]["tool_calls_valid"] is False  # {} lacks the required city
    assert (v[2]["language_following_checked"], v[2]["language_following_valid"]) == (True, True)
    assert (v[3]["language_following_checked"], v[3]["language_following_valid"]) == (True, False)
    assert "language_following_checked" not in v[0]
    summary = json.loads((out / "base_summary.json").read_text())
    assert summary == {
        "model": "base-model", "success_count": 3, "failure_count": 1, "finish_stop": 2, "finish_tool_calls": 1,
        "finish_others": 0, "finish_others_detail": {}, "schema_validation_error_count": 0,
        "successful_tool_call_count": 1, "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        "all_count": 7, "tool_calls_finish_stop": 2, "tool_calls_finish_tool_calls": 1, "tool_calls_finish_others": 0,
        "tool_calls_finish_others_detail": {}, "tool_calls_schema_validation_error_count": 0,
        "tool_calls_successful_count": 1, "tool_calls_total_count": 1, "tool_calls_count_distribution": {"1": 1},
        "language_following_checked_count": 0, "language_following_valid_count": 0,
        "language_following_invalid_count": 0, "error_only_reasoning_checked_count": 4,
        "error_only_reasoning_count": 1, "error_only_reasoning_rate": 0.25, "success_rate": 0.43,
    }
    v_summary = json.loads((out / "v_summary.json").read_text())
    assert v_summary["tool_calls_count_distribution"] == {"1": 1, "2": 1}
    assert (v_summary["language_following_checked_count"], v_summary["language_following_valid_count"]) == (2, 1)
    comparison = json.loads((out / "v_compare.json").read_text())
    assert comparison["tool_call_trigger_similarity"]["f1"] == pytest.approx(2 / 3, abs=1e-4)
    assert comparison["tool_call_schema_accuracy"] == {"count_finish_reason_tool_calls": 2,
                                                       "count_successful_tool_call": 1, "schema_accuracy": "50.00%"}
    assert comparison["multi_tool_call_trigger_similarity"] == pytest.approx(1 / math.sqrt(2), abs=1e-4)


def test_export_needs_run_json_and_an_unchanged_sample_file(tmp_path):
    run = make_run(tmp_path, VENDOR_ROWS)
    (run.parent / K2VV_SAMPLES.name).write_text(K2VV_SAMPLES.read_text() + "\n")
    assert main(["export", "--format", "k2vv", str(run)]) == 2  # the sample file changed since the run
    (run / "run.json").unlink()
    with pytest.raises(InputError, match="needs a run folder with run.json"):
        export_run(run)


def test_summary_of_k2vv_rows_counts_like_k2vv():
    summary = summarize(read_results(K2VV_FILE), "kimi-k2-0905-preview")
    assert (summary["success_count"], summary["failure_count"], summary["finish_stop"]) == (3, 1, 1)
    assert (summary["finish_tool_calls"], summary["successful_tool_call_count"]) == (2, 1)
    assert summary["schema_validation_error_count"] == 1 and summary["usage"]["total_tokens"] == 114 + 83 + 98


# ------------------------------------------------------------------------------------------ MiniMax measures


def test_multi_call_similarity_is_the_cosine_of_normalised_histograms():
    def rows(*counts):
        return records_frame([{"sample_id": str(i), "finish_reason": "tool_calls",
                               "tool_calls": [weather()] * n} for i, n in enumerate(counts)])

    same = multi_call_similarity(rows(1, 1, 2), rows(1, 1, 1, 1, 2, 2))["multi_call_similarity"]
    assert same == pytest.approx(1.0)  # the same proportions (2:1)
    # vendor p = (1, 0), baseline p = (0.5, 0.5): cos = 0.5 / (1 · √0.5)
    assert multi_call_similarity(rows(1, 1), rows(1, 2))["multi_call_similarity"] == pytest.approx(1 / math.sqrt(2))
    assert math.isnan(multi_call_similarity(rows(), rows(1))["multi_call_similarity"])


def test_query_success_rate_counts_successes_within_ten_attempts():
    rows = records_frame([{"sample_id": "1", "attempts": 1}, {"sample_id": "2", "attempts": QSR_MAX_ATTEMPTS},
                          {"sample_id": "3", "attempts": QSR_MAX_ATTEMPTS + 1},
                          {"sample_id": "4", "status": "failed", "attempts": 4}])
    assert query_success_rate(rows) == {"query_success_rate": 0.5}


# -------------------------------------------------------------------------------------------- presets


def _bounds_of(name: str) -> list[tuple[str, str, float]]:
    return preset(name).checks()


def _passing(thresholds: Thresholds) -> dict[str, float]:
    """Metric values that meet every bound (exactly on a lone bound, in the middle of a band)."""
    out: dict[str, float] = {}
    for column, bounds in thresholds.items():
        kinds = dict(bounds)
        out[column] = (kinds["min"] + kinds["max"]) / 2 if len(kinds) == 2 else next(iter(kinds.values()))
    return out


CASES = [(name, column, kind, limit) for name in ("avv", "k2vv", "k2vv-thinking", "minimax")
         for column, kind, limit in _bounds_of(name)]


@pytest.mark.parametrize("name, column, kind, limit", CASES, ids=[f"{c[0]}-{c[2]}_{c[1]}" for c in CASES])
def test_each_preset_bound_with_a_vendor_on_either_side(name, column, kind, limit):
    thresholds = preset(name)
    inside = {**_passing(thresholds), column: limit}
    assert verdict(inside, thresholds) == ("pass", [])
    step = 0.001
    outside = {**inside, column: limit - step if kind == "min" else limit + step}
    sign = "<" if kind == "min" else ">"
    assert verdict(outside, thresholds) == ("fail", [f"{column} {outside[column]:.6g} {sign} {limit:g}"])


def test_presets_are_the_published_numbers():
    assert preset("avv") == Thresholds() and preset("avv").name == "avv"
    assert dict(preset("k2vv")) == {"f1": (("min", 0.8),)}
    assert dict(preset("k2vv-thinking")) == {"f1": (("min", 0.73),)}
    assert dict(preset("minimax")) == {  # ToolCalls-Accuracy is per response (schema_response_accuracy)
        "f1": (("min", 0.98),), "schema_response_accuracy": (("min", 0.98),), "query_success_rate": (("min", 1.0),),
        "finish_tool_calls_rate": (("min", 0.775), ("max", 0.825)), "reasoning_only_rate": (("max", 0.0),),
        "language_following_rate": (("min", 0.4),),
    }
    assert preset("minimax").sample_set_of("finish_tool_calls_rate") == "minimax"  # MiniMax's samples only
    assert preset("none").checks() == [] and set(PRESETS) == {"avv", "k2vv", "k2vv-thinking", "minimax", "none"}


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_minimax_preset_on_scored_vendors():
    """Two vendors' records through score_frame, on samples marked as MiniMax's set: one meets every MiniMax bound,
    one breaks the band."""
    def vendor(name: str, calls: int) -> list[dict]:
        out = [{"vendor": name, "sample_id": str(i), "finish_reason": "tool_calls", "tool_calls": [weather()]}
               for i in range(calls)]
        out += [{"vendor": name, "sample_id": str(i), "content": "Hello there", "expected_language": "en"}
                for i in range(calls, 5)]
        return out

    rows = [{**r, "is_baseline": True} for r in vendor("base", 4)] + vendor("few", 3)
    tools = {str(i): [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}] for i in range(5)}
    result = score_frame(records_frame(rows), tools, thresholds=preset("minimax"),
                         sample_sets={str(i): "minimax" for i in range(5)},
                         stats=StatsSettings(verdict="point"))  # MiniMax's own rule: point values (5 samples)
    scores = result.scores.set_index("vendor")
    assert scores.loc["base", "finish_tool_calls_rate"] == 0.8 and scores.loc["base", "verdict"] == "PASS"
    assert scores.loc["few", "verdict_reasons"] == "f1 0.8571 < 0.98; finish_tool_calls_rate 0.6000 < 0.775"
    decided = score_frame(records_frame(rows), tools, thresholds=preset("minimax"),
                          sample_sets={str(i): "minimax" for i in range(5)}).scores.set_index("vendor")
    assert decided.loc["base", "verdict"] == "INCONCLUSIVE"  # at 95 %: 5 samples show no bound holding
    assert decided.loc["few", "verdict"] in ("FAIL", "INCONCLUSIVE")


def test_threshold_yaml_files(tmp_path):
    for name in PRESETS:  # every preset round-trips through its YAML form
        path = tmp_path / f"{name}.yaml"
        path.write_text(thresholds_yaml(preset(name)))
        assert load_thresholds(path) == preset(name) and load_thresholds(path).name == name
    mine = tmp_path / "gate.yaml"
    write_yaml(mine, {"base": "minimax", "thresholds": {
        "language_following_rate": None, "avg_ttft_ms": {"max": 800}, "f1": {"min": 0.9}}})
    gate = resolve_thresholds(str(mine))
    assert gate.name == "gate.yaml" and "language_following_rate" not in gate
    assert gate["avg_ttft_ms"] == (("max", 800.0),) and gate["f1"] == (("min", 0.9),)
    assert gate["finish_tool_calls_rate"] == (("min", 0.775), ("max", 0.825))
    bad = {"thresholds: {nope: {min: 1}}": "thresholds.nope: not a metric column",
           "thresholds: {f1: {least: 1}}": r"thresholds.f1: unknown bound\(s\) least",
           "thresholds: {f1: {min: high}}": "thresholds.f1.min: must be a number",
           "thresholds: {tps: {min: 5, max: 1}}": "min 5 above max 1",
           "base: strict": "field 'base'", "limits: {}": r"unknown key\(s\) limits", "[1, 2]": "expected a mapping"}
    for text, message in bad.items():
        mine.write_text(text)
        with pytest.raises(InputError, match=rf"gate\.yaml: .*{message}"):
            load_thresholds(mine)
    with pytest.raises(InputError, match="not a preset"):
        resolve_thresholds("strictest")


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_cli_thresholds_preset_flags_and_report(tmp_path, capsys):
    run = make_run(tmp_path, [{**r, "is_baseline": True} for r in VENDOR_ROWS] + [{**r, "vendor": "w"}
                                                                                for r in VENDOR_ROWS])
    out = tmp_path / "s"
    assert main([str(run), "--thresholds", "k2vv", "--out", str(out), "-q", "--no-html"]) == 0
    report = (out / "report.md").read_text()
    assert "Thresholds: preset `k2vv`: f1 ≥ 0.8" in report
    assert json.loads((out / "scores.json").read_text())["thresholds_preset"] == "k2vv"
    assert main([str(run), "--thresholds", "minimax", "--min-f1", "0.5", "--out", str(out), "-q",
                 "--no-html"]) == 0
    assert "preset `minimax with --min-f1 0.5`: f1 ≥ 0.5" in (out / "report.md").read_text()
    assert main([str(run), "--thresholds", "k2vv", "--min-f1", "off", "--out", str(out), "-q", "--strict",
                 "--no-html"]) == 0
    assert main(["thresholds", "minimax"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["name"] == "minimax" and printed["thresholds"]["finish_tool_calls_rate"] == {
        "min": 0.775, "max": 0.825, "sample_set": "minimax"}
    assert main([str(run), "--thresholds", "nope"]) == 2


# -------------------------------------------------------------------------------------------------- resume


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_resume_reruns_items_whose_request_or_language_check_changed(tmp_path):
    """--avv-resume reruns an item whose sample body changed (request_hash) or whose language check changed;
    unchanged successful items are not sent again."""
    from avv_core.record_file import read_records
    from avv_harness.run.controller import EXIT_OK
    from tests.builders import write_inputs
    from tests.fake_vendor import ScriptedAdapter, stream_reply
    from tests.glue import make_env, options, run_to_end

    lines = [{"data_index": f"s{i}", "messages": [{"role": "user", "content": f"Вопрос номер {i}"}],
              "check_type": "language_following"} for i in range(1, 4)]
    config, samples = write_inputs(tmp_path, ["a"], sample_lines=lines)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-run-id", "r1"),
                        adapter=ScriptedAdapter(lambda r: stream_reply("Ответ")))
    assert run_to_end(env) == EXIT_OK
    first = read_records(ctl.run_dir / "records.csv")
    assert set(first["expected_language"]) == {"Cyrillic"}
    lines[0]["messages"][0]["content"] = "Вопрос номер один"  # body edited: request_hash changes
    lines[1]["expected_language"] = "ru"  # same body, another language check
    samples.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    seen: list[str] = []
    adapter = ScriptedAdapter(lambda r: seen.append(json.loads(r.body)["messages"][0]["content"]) or stream_reply("Да"))
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(ctl.run_dir)), adapter=adapter)
    assert run_to_end(env) == EXIT_OK
    assert sorted(seen) == ["Вопрос номер 2", "Вопрос номер один"]
    latest = read_records(ctl.run_dir / "records.csv").drop_duplicates("sample_id", keep="last").set_index("sample_id")
    assert latest.loc["s2", "expected_language"] == "ru" and latest.loc["s3", "content"] == "Ответ"
