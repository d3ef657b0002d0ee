"""Agreement with the baseline, gold accuracy, per-tool breakdown and disagreements over a hand-built table
whose every figure is worked out in the comments."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from avv_core.errors import InputError
from avv_core.samples import Gold, load_samples, parse_sample_line
from avv_scoring import score_frame
from avv_scoring.metrics.breakdown import KINDS
from avv_scoring.report.markdown import render_markdown
from avv_scoring.report.outputs import write_outputs
from avv_scoring.testing import call, records_frame


def _tool(name, props, required):
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": required}}}


WEATHER = _tool("get_weather", {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, ["city"])
SEARCH = _tool("search", {"q": {"type": "string"}}, ["q"])
FACT = _tool("math_fact", {"n": {"type": "number"}}, ["n"])
TOOLS = {str(i): [WEATHER, SEARCH, FACT] for i in range(1, 9)}
GOLD = {
    "1": Gold(True, ({"name": "get_weather", "arguments": {"city": ["Paris"], "unit": ["c", ""]}},)),
    "2": Gold(False),
    "3": Gold(True, ({"name": "get_weather", "arguments": {"city": "Paris"}},
                     {"name": "get_weather", "arguments": {"city": ["Oslo"]}})),
    "5": Gold(True),
    "6": Gold(True, ({"name": "math.fact", "arguments": {"n": [5]}},), {"math_fact": "math.fact"}),
    "7": Gold(False),
}
TC = "tool_calls"


def _rows():
    paris, oslo = call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Oslo"}, "c2")
    base = [
        {"sample_id": "1", "finish_reason": TC, "tool_calls": [paris]},
        {"sample_id": "2", "content": "no"},
        {"sample_id": "3", "finish_reason": TC, "tool_calls": [paris, oslo]},
        {"sample_id": "4", "finish_reason": TC, "tool_calls": [call("search", {"q": "x"})]},
        {"sample_id": "5", "finish_reason": TC, "tool_calls": [call("search", {"q": "y"})]},
        {"sample_id": "6", "finish_reason": TC, "tool_calls": [call("math_fact", {"n": 5})]},
        {"sample_id": "7", "content": "no"},
        {"sample_id": "8", "finish_reason": TC, "tool_calls": [call("get_weather", {"city": "Rome"})]},
    ]
    text = '```json\n{"name": "search", "arguments": {"q": "y"}}\n```'
    vendor = [
        {"sample_id": "1", "finish_reason": TC, "tool_calls": [call("get_weather", {"unit": "c", "city": "Paris"})]},
        {"sample_id": "2", "content": "no"},
        {"sample_id": "3", "finish_reason": TC, "tool_calls": [oslo]},  # a dropped parallel call
        {"sample_id": "4", "finish_reason": TC, "tool_calls": [call("get_weather", {"city": "x"})]},  # other tool
        {"sample_id": "5", "content": text, "anomalies": "tool_call_as_text"},  # the call written as text
        {"sample_id": "6", "finish_reason": TC, "tool_calls": [call("math_fact", {"n": 5.0})]},
        {"sample_id": "7", "status": "failed"},
        {"sample_id": "8", "finish_reason": "length", "tool_calls": [call("get_weather", '{"ci')],
         "anomalies": "tool_call_truncated"},
    ]
    return records_frame([{**r, "vendor": "base", "is_baseline": True} for r in base]
                         + [{**r, "vendor": "ven"} for r in vendor])


@pytest.fixture(scope="module")
def result():
    return score_frame(_rows(), TOOLS, gold_by_sample=GOLD)


def _scores(result, vendor):
    return result.scores.set_index("vendor").loc[vendor]


def test_agreement_with_the_baseline(result):
    ven = _scores(result, "ven")
    assert ven["call_pairs"] == 5  # samples 1, 3, 4, 6, 8 (5: only the baseline called; 2, 7: neither / failed)
    assert ven["tool_match"] == pytest.approx(3 / 5)  # 1, 6, 8
    assert ven["args_match"] == pytest.approx(1 / 5)  # 6 (5.0 == 5)
    assert ven["args_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0 + 1 + 0) / 5)
    assert ven["call_count_match"] == pytest.approx(4 / 5)  # not 3
    base = _scores(result, "base")
    assert base["call_pairs"] == 6
    assert all(base[c] == 1.0 for c in ("tool_match", "args_match", "args_f1", "call_count_match"))


def test_gold_accuracy(result):
    ven = _scores(result, "ven")
    assert (ven["gold_labelled"], ven["gold_call_items"], ven["gold_failed"]) == (5, 3, 1)
    assert ven["gold_trigger_accuracy"] == pytest.approx(4 / 5)  # 5 wrote its call as text
    assert ven["gold_tool_accuracy"] == pytest.approx(2 / 3)  # 3 dropped a call
    assert ven["gold_args_accuracy"] == pytest.approx(2 / 3)  # 1 (unit c is acceptable) and 6 (mapped name)
    base = _scores(result, "base")
    assert (base["gold_labelled"], base["gold_failed"]) == (6, 0)
    assert base["gold_trigger_accuracy"] == base["gold_tool_accuracy"] == base["gold_args_accuracy"] == 1.0


def test_schema_accuracy_checks_the_call_cut_off_under_length(result):
    ven = _scores(result, "ven")
    assert (ven["schema_valid_calls"], ven["schema_calls"]) == (4, 5)  # sample 8's '{"ci' is invalid
    assert ven["schema_accuracy"] == pytest.approx(4 / 5) and ven["tool_calls_other_finish"] == 1
    assert ven["schema_response_accuracy"] == 1.0  # the K2VV reading misses it
    assert ven["anomaly_counts"] == "tool_call_as_text:1;tool_call_truncated:1"


def test_per_tool(result):
    table = result.per_tool[result.per_tool["vendor"] == "ven"].set_index("tool")
    assert list(table.index) == ["get_weather", "math.fact", "search"]  # by calls; names mapped back for gold
    w = table.loc["get_weather"]
    assert (w["calls"], w["pairs"], w["gold_items"]) == (4, 3, 2)
    assert w["schema_valid"] == pytest.approx(3 / 4) and w["tool_match"] == pytest.approx(2 / 3)
    assert w["args_match"] == 0 and w["gold_accuracy"] == pytest.approx(1 / 2)
    s = table.loc["search"]
    assert (s["calls"], s["pairs"], s["tool_match"], s["args_match"], s["gold_items"]) == (0, 1, 0, 0, 0)
    assert math.isnan(s["schema_valid"]) and math.isnan(s["gold_accuracy"])
    f = table.loc["math.fact"]
    assert (f["calls"], f["schema_valid"], f["tool_match"], f["args_match"], f["gold_accuracy"]) == (1, 1, 1, 1, 1)


def test_disagreements(result):
    rows = result.disagreements
    assert set(rows["vendor"]) == {"ven"}  # the baseline agrees with gold everywhere
    got = {r["sample_id"]: (r["kind"], r["against"]) for r in rows.to_dict("records")}
    assert got == {"1": ("other_arguments", "baseline"), "3": ("call_count", "baseline+gold"),
                   "4": ("other_tool", "baseline"), "5": ("as_text", "baseline+gold"), "8": ("truncated", "baseline")}
    assert set(rows["kind"]) <= set(KINDS)
    five = rows[rows["sample_id"] == "5"].iloc[0]
    assert five["baseline_calls"] == 'search({"q": "y"})' and five["vendor_calls"] == ""
    assert '"name": "search"' in five["vendor_content"] and five["expected"] == "a tool call"
    three = rows[rows["sample_id"] == "3"].iloc[0]
    assert three["expected"].startswith('get_weather({"city": "Paris"}); get_weather({"city": ["Oslo"]})')


def test_gold_disagreement_of_the_baseline_itself():
    frame = records_frame([{"vendor": "base", "is_baseline": True, "sample_id": "2", "finish_reason": TC,
                            "tool_calls": [call("search", {"q": "z"})]}])
    got = score_frame(frame, TOOLS, gold_by_sample=GOLD)
    (row,) = got.disagreements.to_dict("records")
    assert (row["kind"], row["against"], row["expected"]) == ("trigger_flip", "gold", "no tool call")
    assert got.scores.loc[0, "gold_trigger_accuracy"] == 0


def test_without_gold_or_pairs_the_metrics_are_missing():
    frame = records_frame([{"vendor": "base", "is_baseline": True, "sample_id": "1"},
                           {"vendor": "ven", "sample_id": "1"}])
    got = score_frame(frame, TOOLS)
    for column in ("tool_match", "args_match", "args_f1", "call_count_match", "gold_trigger_accuracy",
                   "gold_tool_accuracy", "gold_args_accuracy"):
        assert got.scores[column].isna().all(), column
    assert (got.scores["call_pairs"] == 0).all() and got.disagreements.empty


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_outputs_report_and_json(result, tmp_path):
    paths = write_outputs(result, tmp_path)
    csv = pd.read_csv(paths["disagreements.csv"], dtype=str, keep_default_na=False)
    assert len(csv) == 5 and list(csv.columns)[:6] == ["model", "vendor", "sample_id", "repeat", "kind", "against"]
    data = json.loads((tmp_path / "scores.json").read_text())
    (model,) = data["models"]
    assert {(t["vendor"], t["tool"]) for t in model["tools"]} >= {("ven", "get_weather"), ("base", "math.fact")}
    assert {"vendor": "ven", "kind": "as_text", "items": 1} in model["disagreements"]
    md = render_markdown(result)
    assert "Tool-call correctness" in md and "| Tool | Vendor | Calls |" in md
    assert "Disagreements (5 items differ" in md and "| ven | 5 | 1 | as_text | baseline+gold |" in md
    assert "ven: as_text 1, truncated 1, call_count 1, other_tool 1, other_arguments 1" in md


# ------------------------------------------------------------------------------------- gold in samples


def _line(**extra):
    return json.dumps({"messages": [{"role": "user", "content": "hi"}], **extra})


def test_gold_keys_are_metadata_and_validated():
    sample = parse_sample_line(_line(expected_calls=[{"name": "math.fact", "arguments": {"n": [5]}}],
                                     tool_names={"math_fact": "math.fact"}), 3, "s.jsonl")
    assert "expected_calls" not in sample.body and "tool_names" not in sample.body
    assert sample.gold.expected_tool_call is True and sample.gold.original_name("math_fact") == "math.fact"
    assert sample.gold.wire_name("math.fact") == "math_fact"
    assert parse_sample_line(_line(), 1, "s.jsonl").gold == Gold()
    bad = {
        "expected_tool_call": (dict(expected_tool_call="yes"), "must be true or false"),
        "empty": (dict(expected_calls=[]), "non-empty list"),
        "contradiction": (dict(expected_tool_call=False, expected_calls=[{"name": "f", "arguments": {}}]),
                          "expected_tool_call' is false"),
        "no name": (dict(expected_calls=[{"arguments": {}}]), r"expected_calls\[0\].name"),
        "extra key": (dict(expected_calls=[{"name": "f", "args": {}}]), r"expected_calls\[0\] must be"),
        "arguments": (dict(expected_calls=[{"name": "f", "arguments": [1]}]), r"arguments must be an object"),
        "tool_names": (dict(tool_names={"a": 1}), "tool_names"),
    }
    for case, (extra, message) in bad.items():
        with pytest.raises(InputError, match=r"s\.jsonl:7: .*" + message):
            parse_sample_line(_line(**extra), 7, "s.jsonl")
        assert case


def test_gold_from_a_sample_file_reaches_scoring(tmp_path):
    from avv_scoring.load import gold_from_sample_set

    path = tmp_path / "s.jsonl"
    path.write_text(_line(data_index="a", expected_tool_call=False) + "\n" + _line(data_index="b") + "\n")
    assert gold_from_sample_set(load_samples(path)) == {"a": Gold(False)}


def test_annotation_is_shared_by_samples_with_equal_tools_and_kept_apart_otherwise():
    from avv_scoring.metrics.calls import AS_TEXT, CALLS, TC_INVALID, TC_N, TC_PARSE_ERROR, TC_VALID, annotate_calls

    def tool(required: str) -> list[dict]:
        return [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": [required]}}}]

    cell = json.dumps([{"id": "c", "name": "f", "arguments": '{"a": 1}'}])
    base = {"run_id": "r", "model": "m", "vendor": "v", "repeat": 1, "status": "success"}
    rows = records_frame([
        {**base, "sample_id": "1", "tool_calls": cell, "tool_call_count": 1, "finish_reason": "tool_calls"},
        {**base, "sample_id": "2", "tool_calls": cell, "tool_call_count": 1, "finish_reason": "tool_calls"},
        {**base, "sample_id": "3", "tool_calls": cell, "tool_call_count": 1, "finish_reason": "tool_calls"},
        {**base, "sample_id": "1", "repeat": 2, "finish_reason": "stop", "content": '```json\n{"name": "f", '
         '"arguments": {"a": 2}}\n```'},
        {**base, "sample_id": "2", "repeat": 2, "tool_calls": "not json", "tool_call_count": 3,
         "finish_reason": "tool_calls"},
        {**base, "sample_id": "3", "repeat": 2, "tool_calls": "not json", "tool_call_count": 2,
         "finish_reason": "tool_calls"},
    ])
    out = annotate_calls(rows, {"1": tool("a"), "2": tool("a"), "3": tool("b")})  # 1 and 2 share a tool set
    assert out[TC_VALID].tolist() == [1, 1, 0, 0, 0, 0]  # sample 3 requires "b": the same cell is invalid there
    assert out[TC_INVALID].tolist() == [0, 0, 1, 0, 3, 2]  # a parse error counts its own row's calls
    assert out[TC_N].tolist() == [1, 1, 1, 0, 3, 2] and out[TC_PARSE_ERROR].tolist() == [False] * 4 + [True] * 2
    assert out[CALLS][0] is out[CALLS][1] and len(out[CALLS][3]) == 0
    assert out[AS_TEXT].tolist() == [False, False, False, True, False, False]
