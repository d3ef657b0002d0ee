"""The field's figures as registry metrics, on hand-built records with a known answer: OpenRouter's tool-call error
classes (per call and per request, Draft 7, a tool without a schema valid) beside our schema accuracy, billing
honesty (the prompt-token ratio to the baseline, its spread, its flag and tolerance), and gpt-oss's pass@k / pass^k."""

from __future__ import annotations

import pytest
from jsonschema import Draft7Validator

from avv_core.bounded_schema import build_validator, is_valid
from avv_core.errors import InputError
from avv_scoring.metrics.billing import BillingTolerance, flagged, parse_tolerances
from avv_scoring.metrics.openrouter import INVALID_JSON, SCHEMA_MISMATCH, UNKNOWN_TOOL, call_class, drafts_agree
from avv_scoring.metrics.registry import metric
from avv_scoring.metrics.schema import INVALID, VALID
from avv_scoring.score import score_frame
from avv_scoring.testing import call, record, records_frame

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}
FREE = {"type": "function", "function": {"name": "free"}}  # no schema: any arguments
#: prefixItems is Draft 2020-12: Draft 7 does not know it (OpenRouter accepts what we refuse)
PAIR = {"type": "function", "function": {"name": "pair", "parameters": {"type": "object", "properties": {
    "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}}}}}
TOOLS = [WEATHER, FREE, PAIR]


def scores(rows: list[dict], tools: dict | None = None, **kwargs: object) -> dict:
    frame = records_frame(rows)
    sids = {r["sample_id"] for r in rows}
    result = score_frame(frame, tools if tools is not None else {s: TOOLS for s in sids}, **kwargs)  # type: ignore[arg-type]
    return {r["vendor"]: r for r in result.scores.to_dict("records")}


def test_openrouter_classes_on_a_hand_built_set_of_calls() -> None:
    """Seven counted calls in four requests; the class of each is known. Failed responses and responses without a
    call are not counted; a request with two failing calls counts once."""
    calls = {
        "1": [call("get_weather", {"city": "Paris"}), call("free", [1])],  # valid; valid for OpenRouter (no schema)
        "2": [call("get_weather", '{"city": '), call("unknown_fn", {})],  # invalid_json; unknown_tool
        "3": [call("get_weather", {"city": 3}), call("pair", {"pair": ["x", 1]})],  # schema_mismatch; valid (Draft 7)
        "4": [call("get_weather", "not json")],  # a failed response: not counted
        "5": [],  # no call: not a request
        "6": [call("unknown_fn", "xx")],  # invalid_json first, before unknown_tool
    }
    rows = [record(vendor="v", is_baseline=True, sample_id=sid, finish_reason="tool_calls" if c else "stop",
                   tool_calls=c, status="failed" if sid == "4" else "success") for sid, c in calls.items()]
    row = scores(rows)["v"]
    assert (row["openrouter_invalid_json"], row["openrouter_unknown_tool"], row["openrouter_schema_mismatch"]) == (
        2, 1, 1)
    assert (row["openrouter_calls"], row["openrouter_requests"]) == (7, 4)
    assert row["openrouter_call_error_rate"] == pytest.approx(4 / 7)
    assert row["openrouter_request_error_rate"] == pytest.approx(3 / 4)  # requests 2, 3 and 6; 2 counts once
    # our schema accuracy is stricter on the same calls: a non-object for a tool without a schema, a 2020-12 keyword
    assert row["schema_accuracy"] == pytest.approx(1 / 7)
    assert metric("openrouter_request_error_rate").better == "lower"


def test_call_class_order_and_left_out_calls() -> None:
    schemas = {"get_weather": ("k", WEATHER["function"]["parameters"]), "free": ("f", None)}
    assert call_class("get_weather", {"city": "x"}, True, schemas) is None
    assert call_class("nope", None, False, schemas) == INVALID_JSON
    assert call_class("nope", {}, True, schemas) == UNKNOWN_TOOL
    assert call_class("get_weather", {}, True, schemas) == SCHEMA_MISMATCH
    assert call_class("free", "anything", True, schemas) is None
    assert call_class("get_weather", {}, True, None) == "left_out"  # the sample's tools are unknown
    assert call_class("bad", {}, True, {"bad": ("b", {"type": 12})}) == "left_out"  # a schema that is no schema


#: Schemas both drafts read alike, and objects on each side of them (an array item false, contains on an empty array,
#: if / then / else, a pattern, an enum).
AGREEING = [
    (WEATHER["function"]["parameters"], [{"city": "x"}, {"city": 3}, {}, {"city": "x", "more": 1}]),
    ({"type": "object", "properties": {"tags": {"type": "array", "items": False}}},
     [{"tags": []}, {"tags": [1]}, {"tags": "x"}]),
    ({"type": "object", "properties": {"ids": {"type": "array", "contains": {"type": "integer"}, "uniqueItems": True}}},
     [{"ids": []}, {"ids": ["a", 2]}, {"ids": [1, 1]}, {"ids": ["a"]}]),
    ({"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]},
      "propertyNames": {"pattern": "^[a-z]+$"}, "anyOf": [{"minProperties": 1}, {"enum": [{}]}]},
     [{"kind": "a", "a": 1}, {"kind": "a"}, {"b": 2}, {"B": 2}, {}]),
]


def test_the_schema_verdict_is_taken_only_where_the_drafts_agree() -> None:
    """OpenRouter's class of a call takes the call annotation's verdict (Draft 2020-12) instead of validating again
    under Draft 7 only for a schema both drafts read alike: there the outcomes are equal; a schema with a keyword
    of one draft alone (prefixItems, items as a list, $ref, dependencies) is validated under Draft 7."""
    for schema, objects in AGREEING:
        assert drafts_agree(schema)
        draft7, draft2020 = build_validator(schema, default=Draft7Validator), build_validator(schema)
        for value in objects:
            assert is_valid(draft7, value) == is_valid(draft2020, value), (schema, value)
    for schema in (PAIR["function"]["parameters"], {"type": "array", "items": [{"type": "integer"}]},
                   {"properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {}}},
                   {"dependencies": {"a": ["b"]}}, {"$schema": "http://json-schema.org/draft-07/schema#"}):
        assert not drafts_agree(schema), schema
    schemas = {"get_weather": ("k", WEATHER["function"]["parameters"]), "pair": ("p", PAIR["function"]["parameters"])}
    # the verdict is what is read where the drafts agree (here told wrong on purpose, to show it is read)...
    assert call_class("get_weather", {"city": 3}, True, schemas, verdict=VALID) is None
    assert call_class("get_weather", {"city": "x"}, True, schemas, verdict=INVALID) == SCHEMA_MISMATCH
    # ... and not where they differ: Draft 7 ignores prefixItems, 2020-12 refuses the pair
    assert call_class("pair", {"pair": ["x", 1]}, True, schemas, verdict=INVALID) is None
    # nor for arguments that are no object (the annotation calls them invalid before any schema)
    assert call_class("get_weather", [1], True, schemas, verdict=VALID) == SCHEMA_MISMATCH


def billing_rows(vendor_tokens: list[int | None]) -> list[dict]:
    rows = [record(vendor="base", is_baseline=True, sample_id=str(i), prompt_tokens=100, completion_tokens=10,
                   total_tokens=110) for i in range(len(vendor_tokens))]
    for i, tokens in enumerate(vendor_tokens):
        rows.append(record(vendor="v", sample_id=str(i), prompt_tokens=tokens, completion_tokens=10,
                           total_tokens=None if tokens is None else tokens + 10))
    return rows


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_billing_honesty_ratio_spread_and_flag() -> None:
    rows = billing_rows([125, 125, 125, 100, None])  # the last item reports no usage: not paired
    rows.append(record(vendor="v", sample_id="9", status="failed", prompt_tokens=999, total_tokens=1009))
    result = score_frame(records_frame(rows), {str(i): [] for i in range(10)})
    row = result.scores.set_index("vendor").loc["v"]
    assert (row["prompt_tokens_ratio"], row["prompt_tokens_pairs"]) == (1.25, 4)
    assert row["prompt_tokens_ratio_iqr"] == pytest.approx(1.25 - 1.1875)
    assert any("v: reports 1.25× the baseline's prompt_tokens" in w and "±5%" in w for w in result.warnings)
    assert result.scores.set_index("vendor").loc["base", "prompt_tokens_ratio"] == 1
    wider = score_frame(records_frame(rows), {str(i): [] for i in range(10)},
                        billing=BillingTolerance(0.05, {"m": 0.3}))
    assert not any("prompt_tokens" in w for w in wider.warnings)
    honest = score_frame(records_frame(billing_rows([100, 101, 99])), {str(i): [] for i in range(3)})
    assert honest.scores.set_index("vendor").loc["v", "prompt_tokens_ratio"] == 1
    assert not any("prompt_tokens" in w for w in honest.warnings)


def test_tolerances_from_the_command_line_and_the_config() -> None:
    given = parse_tolerances(["0.1", "m=0.02"])
    assert (given.of("m"), given.of("other"), given.every_model) == (0.02, 0.1, True)
    assert given.merged({"other": 0.3}).of("other") == 0.1  # a default given for every model wins over the config
    named = parse_tolerances(["m=0.02"])
    assert named.merged({"other": 0.3, "m": 0.5}).of("other") == 0.3 and named.merged({"m": 0.5}).of("m") == 0.02
    for bad in ("x", "1.5", "m=-0.1"):
        with pytest.raises(InputError, match="--prompt-tokens-tolerance"):
            parse_tolerances([bad])
    assert flagged(1.06, 0.05) and not flagged(1.05, 0.05) and not flagged(float("nan"), 0.05)


def test_a_models_tolerance_in_the_vendor_config(tmp_path) -> None:
    from avv_harness.inputs.config import load_config
    from tests.builders import vendors_config, write_yaml

    data = vendors_config([{"name": "a", "url": "http://127.0.0.1:1/v1", "is_baseline": True}],
                          prompt_tokens_tolerance=0.1)
    vendor = load_config(write_yaml(tmp_path / "ok.yaml", data)).vendors[0]
    assert vendor.prompt_tokens_tolerance == 0.1 and vendor.redacted()["prompt_tokens_tolerance"] == 0.1
    data["m"]["prompt_tokens_tolerance"] = 2
    with pytest.raises(InputError, match=r"m.prompt_tokens_tolerance: must be a number from 0 to 1"):
        load_config(write_yaml(tmp_path / "bad.yaml", data))


def test_pass_at_k_and_pass_hat_k_as_gpt_oss_counts_them() -> None:
    """k = 3 repeats: s1 always succeeds, s2 once, s3 never, s4 twice with its third repeat missing (a failed try)."""
    outcomes = {"s1": [True, True, True], "s2": [False, True, False], "s3": [False, False, False], "s4": [True, True]}
    rows = [record(vendor="v", is_baseline=True, sample_id=sid, repeat=r + 1, status="success" if ok else "failed")
            for sid, oks in outcomes.items() for r, ok in enumerate(oks)]
    row = scores(rows, {sid: [] for sid in outcomes})["v"]
    assert (row["pass_at_k"], row["pass_hat_k"], row["pass_k"]) == (0.75, 0.25, 3)
    assert row["pass_hat_k"] <= row["success_rate"] <= row["pass_at_k"]
    one = scores([record(vendor="v", is_baseline=True, sample_id=str(i), status="success" if i else "failed")
                  for i in range(4)], {str(i): [] for i in range(4)})["v"]
    assert one["pass_at_k"] == one["pass_hat_k"] == one["success_rate"] == 0.75 and one["pass_k"] == 1
