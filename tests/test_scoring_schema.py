"""Tool-call schema checks: edge cases of a single call and the response/call-level accuracy."""

from __future__ import annotations

import math

import pytest

from avv_scoring.metrics import headline as M
from avv_scoring.metrics import schema as S
from avv_scoring.testing import call, records_frame

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat"],
        },
    },
    "required": ["city"],
}


def _tools(**schemas):
    return [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in schemas.items()]


def _check(name, arguments, **schemas):
    return S.check_call(call(name, arguments), S.tool_schemas(_tools(**schemas)))


def test_valid_call():
    assert (
        _check("weather", {"city": "Paris", "unit": "c", "where": {"lat": 1.5}}, weather=WEATHER) == S.VALID
    )


def test_unknown_tool_name_is_invalid():
    assert _check("wether", {"city": "Paris"}, weather=WEATHER) == S.INVALID
    assert (
        S.check_call({"name": None, "arguments": "{}"}, S.tool_schemas(_tools(weather=WEATHER))) == S.INVALID
    )
    assert S.check_call(call("weather", {}), {}) == S.INVALID  # the request has no tools at all


@pytest.mark.parametrize("raw", ["[1, 2]", '"Paris"', "42", "null", "not json", "", '{"city": "Paris"'])
def test_arguments_must_parse_as_a_json_object(raw):
    assert _check("weather", raw, weather=WEATHER) == S.INVALID
    assert _check("free", raw, free={}) == S.INVALID


def test_empty_or_missing_parameters_accept_any_object():
    assert _check("free", {"anything": [1, {"x": None}]}, free={}) == S.VALID
    assert _check("free", "{}", free={}) == S.VALID
    schemas = S.tool_schemas([{"type": "function", "function": {"name": "bare"}}])
    assert S.check_call(call("bare", {"a": 1}), schemas) == S.VALID
    # flat tool shape is accepted too
    assert (
        S.check_call(call("flat", {"a": 1}), S.tool_schemas([{"name": "flat", "parameters": {}}])) == S.VALID
    )


def test_nested_and_enum_violations_are_invalid():
    assert _check("weather", {"city": "Paris", "where": {"lat": "north"}}, weather=WEATHER) == S.INVALID
    assert (
        _check("weather", {"city": "Paris", "where": {"lon": 2.0}}, weather=WEATHER) == S.INVALID
    )  # nested required
    assert _check("weather", {"city": "Paris", "unit": "kelvin"}, weather=WEATHER) == S.INVALID
    assert _check("weather", {"unit": "c"}, weather=WEATHER) == S.INVALID  # top-level required


def test_invalid_request_schema_is_uncheckable_not_a_crash():
    assert _check("bad", {"a": 1}, bad={"type": "no-such-type"}) == S.UNCHECKABLE
    assert _check("bad", {"a": 1}, bad={"properties": 5}) == S.UNCHECKABLE
    assert _check("bad", {"a": 1}, bad="not a schema") == S.UNCHECKABLE
    assert _check("ref", {"a": 1}, ref={"$ref": "https://example.invalid/nope.json"}) == S.UNCHECKABLE
    # the name and argument checks still come first
    assert _check("bad", "[]", bad={"type": "no-such-type"}) == S.INVALID


def test_draft_comes_from_dollar_schema():
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 5, "exclusiveMaximum": True}},
    }
    assert _check("t", {"n": 4}, t=draft4) == S.VALID
    assert _check("t", {"n": 5}, t=draft4) == S.INVALID
    # the same keywords without $schema are a 2020-12 schema, where exclusiveMaximum must be a number
    no_draft = {k: v for k, v in draft4.items() if k != "$schema"}
    assert _check("t", {"n": 4}, t=no_draft) == S.UNCHECKABLE


def test_validators_are_cached_by_canonical_schema():
    S.clear_cache()
    a = {"type": "object", "properties": {"x": {"type": "integer"}}}
    b = {"properties": {"x": {"type": "integer"}}, "type": "object"}  # same schema, other key order
    assert S.compiled_validator(a) is S.compiled_validator(b)
    assert len(S._VALIDATORS) == 1


def test_schema_accuracy_response_and_call_level():
    tools = _tools(weather=WEATHER, bad={"type": "no-such-type"})
    ok = call("weather", {"city": "Paris"})
    wrong = call("weather", {"city": 3})
    unchecked = call("bad", {"a": 1})
    frame = records_frame(
        [
            {"sample_id": "1", "finish_reason": "tool_calls", "tool_calls": [ok, ok]},  # valid
            {"sample_id": "2", "finish_reason": "tool_calls", "tool_calls": [ok, wrong]},  # invalid
            {"sample_id": "3", "finish_reason": "tool_calls", "tool_calls": []},  # no call: invalid
            {"sample_id": "4", "finish_reason": "stop", "tool_calls": [ok]},  # scored (call level), reported
            {"sample_id": "5", "finish_reason": "tool_calls", "tool_calls": [ok, unchecked]},  # uncheckable
            {"sample_id": "6", "finish_reason": "tool_calls", "tool_calls": [unchecked, wrong]},  # invalid
            {
                "sample_id": "7",
                "finish_reason": "tool_calls",
                "tool_calls": [ok],
                "status": "failed",
            },  # not scored
            {"sample_id": "8", "finish_reason": "tool_calls", "tool_calls": "{not json"},  # invalid
            {
                "sample_id": "99",
                "finish_reason": "tool_calls",
                "tool_calls": [ok],
            },  # unknown sample: uncheckable
        ]
    )
    by_sample = {str(i): tools for i in range(1, 9)}
    got = M.schema_accuracy(frame, by_sample)
    # response level (tool_calls finishes only)
    assert got["schema_responses"] == 5  # 1, 2, 3, 6, 8
    assert got["schema_valid_responses"] == 1
    assert got["schema_response_accuracy"] == pytest.approx(1 / 5)
    assert got["schema_uncheckable_responses"] == 2  # 5, 99
    # call level, whatever the finish: valid 2 (#1) + 1 (#2) + 1 (#4, under stop) + 1 (#5);
    # invalid 1 (#2) + 1 (#3, tool_calls without a call) + 1 (#6) + 1 (#8, unparseable); #7 failed
    assert got["schema_valid_calls"] == 5
    assert got["schema_calls"] == 9
    assert got["schema_accuracy"] == pytest.approx(5 / 9)
    assert got["schema_uncheckable_calls"] == 3  # 5, 6, 99
    assert got["tool_calls_other_finish"] == 1


def test_a_call_cut_off_under_length_is_invalid_and_never_improves_the_score():
    """The issue's llama.cpp case: a reply cut in the middle of a call's arguments under finish length."""
    tools = _tools(weather=WEATHER)
    good = records_frame([{"sample_id": "1", "finish_reason": "tool_calls",
                           "tool_calls": [call("weather", {"city": "Paris"})]}])
    cut = records_frame([{"sample_id": "1", "finish_reason": "tool_calls",
                          "tool_calls": [call("weather", {"city": "Paris"})]},
                         {"sample_id": "2", "finish_reason": "length", "tool_calls": [call("weather", '{"')]}])
    by_sample = {"1": tools, "2": tools}
    assert M.schema_accuracy(good, by_sample)["schema_accuracy"] == 1.0
    got = M.schema_accuracy(cut, by_sample)
    assert got["schema_accuracy"] == pytest.approx(1 / 2) and got["schema_calls"] == 2
    assert got["schema_response_accuracy"] == 1.0  # the K2VV reading does not see it: why it is not the headline



def test_schema_accuracy_missing_without_tool_call_responses():
    frame = records_frame([{"sample_id": "1"}, {"sample_id": "2", "status": "failed"}])
    got = M.schema_accuracy(frame, {"1": [], "2": []})
    assert math.isnan(got["schema_accuracy"]) and got["schema_responses"] == 0
    assert math.isnan(got["schema_response_accuracy"]) and got["schema_calls"] == 0
