"""The simulator's tool-call knobs and gold following, as pure decisions (no server)."""

from __future__ import annotations

import json

import pytest

from avv_core.samples import load_samples
from avv_core.tool_formats import find_text_calls, request_tool_names
from avv_scoring.metrics.correctness import Call, calls_equal, calls_match_gold, name_mapper
from avv_sim import request_hash
from avv_sim.gold import GoldEntry, build_arguments, gold_key
from avv_sim.plan import make_plan
from avv_sim.profiles import ProfileError, make_profile
from avv_sim.sample_file import GoldError, load_gold
from tests.builders import chat_body
from tests.locust_runs import ROOT

BFCL_MINI = ROOT / "samples" / "bfcl-mini.jsonl"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}
SEARCH = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "search", "parameters": SEARCH}}]


def body(i: int, **extra) -> dict:
    return chat_body(f"question {i}", TOOLS, stream=True, **extra)


def plan(knobs: dict, b: dict, gold: GoldEntry | None = None, attempt: int = 1):
    return make_plan(make_profile("p", {"tool_call_rate": 1.0, **knobs}), b, attempt, request_hash(b), gold)


def calls_of(p) -> list[Call]:
    return [Call.of(c.name, c.arguments) for c in p.tool_calls]


def test_new_knobs_are_rates_and_the_call_forms_share_one_draw():
    for knob in ("wrong_tool_rate", "wrong_value_rate", "drop_parallel_rate", "tool_as_text_rate",
                 "truncate_call_rate"):
        with pytest.raises(ProfileError, match=knob):
            make_profile("p", {knob: 1.5})
    with pytest.raises(ProfileError, match="tool_as_text_rate . truncate_call_rate must not exceed 1"):
        make_profile("p", {"tool_as_text_rate": 0.6, "truncate_call_rate": 0.6})
    assert make_profile("p", {}).follow_gold is True


def test_deviations_change_only_what_they_say():
    n = 200
    counts = {"wrong_tool": 0, "changed": 0, "text": 0, "truncated": 0, "dropped": 0}
    for i in range(n):
        b = body(i, parallel_tool_calls=True)
        ref = plan({"parallel_rate": 0.5}, b)
        wrong = plan({"parallel_rate": 0.5, "wrong_tool_rate": 0.3, "wrong_value_rate": 0.3, "seed": 4}, b)
        for r, w in zip(ref.tool_calls, wrong.tool_calls, strict=True):
            if w.wrong_tool:
                counts["wrong_tool"] += 1
                assert w.name != r.name
            elif w.changed:
                counts["changed"] += 1
                assert w.name == r.name and json.loads(w.arguments) != json.loads(r.arguments)
                assert set(json.loads(w.arguments)) == set(json.loads(r.arguments))  # values changed, keys kept
            else:
                assert (w.name, w.arguments) == (r.name, r.arguments)
        dropped = plan({"parallel_rate": 0.5, "drop_parallel_rate": 1.0}, b)
        assert len(dropped.tool_calls) == max(1, len(ref.tool_calls) - 1)
        counts["dropped"] += dropped.dropped_calls
        form = plan({"parallel_rate": 0.5, "tool_as_text_rate": 0.3, "truncate_call_rate": 0.3, "seed": 5}, b)
        if form.call_form == "text":
            counts["text"] += 1
            content = "".join(t.text for t in form.tokens if t.kind == "content")
            found = find_text_calls(content, request_tool_names(TOOLS))
            assert form.finish_reason == "stop" and not form.tool_calls and content.startswith("```json\n")
            assert [(c.name, c.arguments) for c in found] == [(t["name"], t["arguments"]) for t in form.text_calls]
        elif form.call_form == "truncated":
            counts["truncated"] += 1
            assert form.finish_reason == "length" and not calls_of(form)[-1].parsed
            assert calls_of(form)[-1].name == ref.tool_calls[len(form.tool_calls) - 1].name
        else:
            assert calls_equal(calls_of(form), calls_of(ref)) and form.finish_reason == "tool_calls"
    assert all(30 <= counts[k] <= 90 for k in ("text", "truncated")), counts  # ~30 % of 200
    assert counts["wrong_tool"] > 20 and counts["changed"] > 20 and counts["dropped"] > 50, counts


def test_wrong_tool_needs_two_tools():
    b = {**body(1), "tools": TOOLS[:1]}
    assert not any(c.wrong_tool for i in range(50) for c in plan({"wrong_tool_rate": 1.0}, {**b, "n": i}).tool_calls)


def test_gold_key_ignores_what_the_harness_or_a_vendor_adds():
    b = body(1)
    same = {**b, "model": "other", "stream": False, "stream_options": {"include_usage": True}, "temperature": 0.2}
    assert gold_key(b) == gold_key(same)
    assert gold_key(b) != gold_key(body(2))
    k2vv = {**b, "messages": [{"role": "_input", "content": "sys"}, *b["messages"]]}
    assert gold_key(k2vv) == gold_key({**b, "messages": [{"role": "system", "content": "sys"}, *b["messages"]]})


def test_the_reference_follows_gold_and_deviations_break_it():
    expected = ({"name": "weather.get", "arguments": {"city": ["Oslo", "Bergen"], "days": [3], "unit": ["c", ""]}},
                {"name": "search", "arguments": {"q": ["fjords"]}})
    tools = [{"type": "function", "function": {"name": "weather_get", "parameters": WEATHER}}, TOOLS[1]]
    gold = GoldEntry(True, expected, {"weather_get": "weather.get"})
    name_of = name_mapper({"weather_get", "search"}, gold.tool_names)
    for i in range(30):
        b = {**body(i), "tools": tools}
        ref = plan({"tool_call_rate": 0.0}, b, gold)  # gold decides, not tool_call_rate
        assert ref.gold and ref.finish_reason == "tool_calls"
        assert calls_match_gold(calls_of(ref), expected, name_of)
        changed = plan({"wrong_value_rate": 1.0, "seed": i}, b, gold)
        assert all(c.changed for c in changed.tool_calls)
        assert not calls_match_gold(calls_of(changed), expected, name_of)
        off = make_plan(make_profile("p", {"tool_call_rate": 0.0, "follow_gold": False}), b, 1, request_hash(b), gold)
        assert not off.gold and off.finish_reason == "stop"
    no_call = GoldEntry(False)
    assert plan({"tool_call_rate": 1.0}, body(1), no_call).finish_reason == "stop"
    assert plan({}, body(1, tool_choice="required"), no_call).finish_reason == "tool_calls"  # tool_choice first


def test_gold_arguments_prefer_schema_valid_values_and_omit_only_optional_ones():
    schema = {"type": "object", "properties": {"unit": {"enum": ["s", "ms"]}, "n": {"type": "integer"}},
              "required": ["n"]}
    for seed in range(20):
        args = build_arguments({"unit": ["", "N/A"], "n": ["", 2]}, schema, str(seed))
        assert args == {"n": 2}  # "N/A" would break the enum; n is required by the schema
    seen = {json.dumps(build_arguments({"a": ["x", "y", ""]}, None, str(s)), sort_keys=True) for s in range(40)}
    assert seen == {'{"a": "x"}', '{"a": "y"}', "{}"}


def test_load_gold_from_a_sample_file(tmp_path):
    gold = load_gold(BFCL_MINI).entries
    samples = load_samples(BFCL_MINI).samples
    assert len(gold) == len(samples)
    for s in samples[:20]:
        entry = gold[gold_key(s.body)]
        assert entry.expected_tool_call == s.gold.expected_tool_call and entry.tool_names == s.gold.tool_names
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [], "expected_tool_call": true}\n{oops\n{"expected_tool_call": "yes"}\n')
    book = load_gold(bad)  # the harness rejects (or, with --avv-skip-bad-lines, skips) such lines itself
    assert len(book.entries) == 1 and [s.split(":")[0] for s in book.skipped] == ["line 2", "line 3"]
    with pytest.raises(GoldError, match="missing.jsonl: cannot read"):
        load_gold(tmp_path / "missing.jsonl")


def test_cli_rejects_a_gold_file_it_cannot_read(tmp_path, capsys):
    from avv_sim.cli import main

    assert main(["--profile", "p", "--gold", str(tmp_path / "gold.jsonl")]) == 2
    assert "gold.jsonl: cannot read the gold file" in capsys.readouterr().err
