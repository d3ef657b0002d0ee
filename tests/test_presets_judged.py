"""Presets that judge what their projects judge (avv_scoring/presets.py, verdict.judged_thresholds), on the demo:
records made in-process for samples/demo.jsonl by the demo's reference profile (the simulator's pure decisions, no
HTTP), and vendors made from them that break one bound each. The baseline passes its own preset; a vendor below
each bound fails it; a bound the sample set cannot produce, or one tuned to another sample set, is "not judged"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avv_core.samples import load_samples
from avv_scoring import score_frame
from avv_scoring.cli import main
from avv_scoring.load import gold_from_sample_set, sample_sets_of, tools_from_sample_set
from avv_scoring.metrics.declaration import fmt
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.presets import PRESETS, preset, resolve_thresholds, thresholds_yaml
from avv_scoring.testing import call, records_frame
from avv_scoring.verdict import Thresholds, judged_thresholds
from avv_sim.behaviour import decide
from avv_sim.chosen_calls import reference_calls
from avv_sim.decision_key import decision_key
from avv_sim.gold import gold_key
from avv_sim.profiles import load_profiles
from avv_sim.sample_file import load_gold

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "samples" / "demo-conversations.jsonl"  # the 32 conversations the demo begins with
SAMPLES = load_samples(str(DEMO))
TOOLS = tools_from_sample_set(SAMPLES)
GOLD = gold_from_sample_set(SAMPLES)


def _reference_rows() -> list[dict]:
    """The demo reference's answer to every demo sample, as the harness would record it."""
    profile = load_profiles(ROOT / "avv_harness" / "data" / "sim.yaml")["reference"]
    book = load_gold(DEMO)
    rows = []
    for sample in SAMPLES.samples:
        h = decision_key(sample.body)
        d = decide(profile, sample.body, h, book.entries.get(gold_key(sample.body)), 1)
        calls = reference_calls(d.calls, h, None) if d.decision else []
        rows.append({"sample_id": sample.sample_id, "finish_reason": "tool_calls" if calls else "stop",
                     "tool_calls": [call(c.tool.name, c.args, f"call_{k}") for k, c in enumerate(calls)],
                     "content": "" if calls else "Here is the answer.", "total_tokens": 100, "ttft_ms": 150.0,
                     "tps": 120.0})
    return rows


REFERENCE = _reference_rows()
CALLING = [i for i, r in enumerate(REFERENCE) if r["tool_calls"]]
ANSWERING = [i for i, r in enumerate(REFERENCE) if not r["tool_calls"]]


def _changed(at: list[int], change) -> list[dict]:
    return [change(dict(r)) if i in at else dict(r) for i, r in enumerate(REFERENCE)]


def _failed(r):
    return {**r, "status": "failed", "attempts": 3}


def _no_call(r):  # answers instead of calling: F1 and the finish-tool-calls rate drop
    return {**r, "finish_reason": "stop", "tool_calls": [], "content": "I would rather not."}


def _broken(r):  # a call whose arguments are cut off: schema (response) accuracy drops
    return {**r, "tool_calls": [call(r["tool_calls"][0]["name"], '{"cut')]}


def _cut(r):  # a call cut off by the token limit: a proven defect
    return {**r, "finish_reason": "length", "tool_calls": [call(r["tool_calls"][0]["name"], '{"cut')]}


def _as_text(r):  # the call written into the content: a proven defect
    name = r["tool_calls"][0]["name"]
    return {**r, "finish_reason": "stop", "tool_calls": [],
            "content": '```json\n{"name": "' + name + '", "arguments": {}}\n```'}


def _reasoning_only(r):
    return {**r, "content": "", "reasoning_chars": 80}


def _wrong_language(r):
    return {**r, "content": "Вот ответ.", "expected_language": "en"}


#: A vendor below each bound: metric → the demo reference with that metric broken.
BELOW = {
    "success_rate": _changed(ANSWERING[:1], _failed),
    "query_success_rate": _changed(ANSWERING[:1], _failed),
    "f1": _changed(CALLING[: int(len(CALLING) * 0.6)], _no_call),  # F1 ≈ 0.57: below 0.98, 0.80 and 0.73
    "schema_accuracy": _changed(CALLING[:1], _broken),
    "schema_response_accuracy": _changed(CALLING[:1], _broken),
    "reasoning_only_rate": _changed(ANSWERING[:1], _reasoning_only),
    "tool_call_as_text_rate": _changed(CALLING[:1], _as_text),
    "tool_call_truncated_rate": _changed(CALLING[:1], _cut),
    "invalid_json_call_rate": _changed(CALLING[:1], _broken),
    "finish_tool_calls_rate": _changed(CALLING[:3], _no_call),
    "language_following_rate": _changed(ANSWERING, _wrong_language),
}


def _score(vendors: dict[str, list[dict]], thresholds: Thresholds, language: bool = False, mark: str | None = None):
    def lang(r):  # a language check on every answer (English, as the reference answers)
        return {**r, "expected_language": r.get("expected_language", "en")} if language and not r["tool_calls"] \
            else r

    rows = [{**lang(r), "vendor": "reference", "is_baseline": True} for r in REFERENCE]
    for name, vendor_rows in vendors.items():
        rows += [{**lang(r), "vendor": name} for r in vendor_rows]
    sets = {s.sample_id: mark for s in SAMPLES.samples} if mark else {}
    # the presets' bounds as the peers apply them (point values): what these tests check is which bounds are judged
    return score_frame(records_frame(rows), TOOLS, thresholds=thresholds, gold_by_sample=GOLD, sample_sets=sets,
                       irf_metrics=None, stats=StatsSettings(resamples=0, verdict="point"))


def _verdicts(result):
    return result.scores.set_index("vendor")[["verdict", "verdict_reasons"]].to_dict("index")


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
@pytest.mark.parametrize("name", [p for p in PRESETS if p != "none"])
def test_baseline_passes_its_preset_and_a_vendor_below_each_bound_fails(name):
    thresholds = preset(name)
    judged, skipped = judged_thresholds(thresholds, frozenset({"gold", "language"}))
    vendors = {f"below_{column}": BELOW[column] for column in judged}
    result = _score(vendors, thresholds, language=True)
    verdicts = _verdicts(result)
    assert verdicts["reference"]["verdict"] == "PASS", verdicts["reference"]
    for column in judged:
        got = verdicts[f"below_{column}"]
        assert got["verdict"] == "FAIL" and column in got["verdict_reasons"], (column, got)
    # the demo samples are not MiniMax's: its band is reported without a verdict
    assert [s.split(" ")[0] for s in skipped] == (["finish_tool_calls_rate"] if name == "minimax" else [])
    assert result.not_judged.get("m", ()) == tuple(skipped)


def test_minimax_on_the_demo_as_it_ships():
    """No language check on the demo: language following is not judged (named), not a FAIL; ToolCalls-Accuracy is
    per response; the band is reported without a verdict."""
    result = _score({"broken": BELOW["schema_response_accuracy"]}, preset("minimax"))
    verdicts = _verdicts(result)
    assert verdicts["reference"]["verdict"] == "PASS"
    assert verdicts["broken"]["verdict_reasons"].startswith("schema_response_accuracy ")
    assert "schema_accuracy" not in verdicts["broken"]["verdict_reasons"].replace("schema_response_accuracy", "")
    skipped = result.not_judged["m"]
    assert [s.split(" ")[0] for s in skipped] == ["finish_tool_calls_rate", "language_following_rate"]
    assert "no scored sample has a language check" in skipped[1]
    from avv_scoring.report.markdown import render_markdown
    assert "Not judged (reported without a verdict): finish_tool_calls_rate (" in render_markdown(result)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_band_is_judged_on_samples_marked_as_minimax_or_with_an_explicit_band():
    ftr = _score({}, Thresholds.none()).scores.set_index("vendor").loc["reference", "finish_tool_calls_rate"]
    marked = _score({"few_calls": BELOW["finish_tool_calls_rate"]}, preset("minimax"), mark="minimax")
    reasons = _verdicts(marked)["reference"]["verdict_reasons"]
    assert f"finish_tool_calls_rate {fmt(ftr, 'rate')} < 0.775" in reasons  # the demo is not tuned to MiniMax's band
    assert "finish_tool_calls_rate" not in " ".join(marked.not_judged.get("m", ()))
    band = preset("minimax").without("finish_tool_calls_rate").with_bound("finish_tool_calls_rate", "min", ftr - 0.02)
    band = band.with_bound("finish_tool_calls_rate", "max", ftr + 0.02)
    explicit = _verdicts(_score({"few_calls": BELOW["finish_tool_calls_rate"]}, band))
    assert explicit["reference"]["verdict"] == "PASS"
    assert "finish_tool_calls_rate" in explicit["few_calls"]["verdict_reasons"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_metric_the_samples_cannot_produce_is_not_judged_but_a_vendor_missing_it_fails():
    thresholds = Thresholds.none().with_bound("gold_args_accuracy", "min", 0.9).with_bound("task_completion_rate",
                                                                                           "min", 0.5)
    result = _score({}, thresholds)
    assert _verdicts(result)["reference"]["verdict"] == "PASS"
    assert [s.split(" ")[0] for s in result.not_judged["m"]] == ["gold_args_accuracy", "task_completion_rate"]
    failing = _score({"silent": _changed(list(range(len(REFERENCE))), _failed)},
                     Thresholds.none().with_bound("gold_trigger_accuracy", "min", 0.9))
    assert _verdicts(failing)["silent"]["verdict_reasons"] == "gold_trigger_accuracy missing"  # the vendor's fault


def test_sample_set_marks_and_the_yaml_form(tmp_path):
    line = json.loads(DEMO.read_text(encoding="utf-8").splitlines()[0])
    marked = tmp_path / "mm.jsonl"
    marked.write_text(json.dumps({**line, "_sample_set": "minimax"}) + "\n", encoding="utf-8")
    assert sample_sets_of(load_samples(str(marked))) == {"1": "minimax"}
    mm = preset("minimax")
    assert mm.sample_set_of("finish_tool_calls_rate") == "minimax" and mm.sample_set_of("f1") is None
    path = tmp_path / "mm.yaml"
    path.write_text(thresholds_yaml(mm), encoding="utf-8")
    again = resolve_thresholds(str(path))
    assert again == mm and again.sample_set_of("finish_tool_calls_rate") == "minimax"
    assert mm.with_bound("finish_tool_calls_rate", "min", 0.5).sample_set_of("finish_tool_calls_rate") is None
    gate = tmp_path / "gate.yaml"
    gate.write_text("base: minimax\nthresholds:\n  f1: {min: 0.9}\n", encoding="utf-8")
    assert resolve_thresholds(str(gate)).sample_set_of("finish_tool_calls_rate") == "minimax"  # kept from the base
    gate.write_text("thresholds:\n  f1: {sample_set: x}\n", encoding="utf-8")
    with pytest.raises(Exception, match="sample_set needs a min or a max"):
        resolve_thresholds(str(gate))


def test_cli_ftr_band(capsys):
    assert main(["thresholds", "k2vv-thinking"]) == 0
    assert "f1:\n    min: 0.73" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["x", "--ftr-band", "0.9:0.1"])
    assert "not LOW:HIGH" in capsys.readouterr().err
