"""Argument generation from JSON Schema (pure functions, no server)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from avv_sim import schema_args
from avv_sim.tokens import split_fragments

SCHEMAS: dict[str, dict] = {
    "flat": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
    },
    "numbers": {
        "type": "object",
        "properties": {
            "ratio": {"type": "number", "minimum": 0.5, "maximum": 0.75},
            "step": {"type": "integer", "multipleOf": 5, "minimum": 12, "maximum": 40},
            "open": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "flag": {"type": "boolean"},
        },
        "required": ["ratio", "step", "open", "flag"],
        "additionalProperties": False,
    },
    "strings": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 12, "maxLength": 14},
            "short": {"type": "string", "maxLength": 2},
            "when": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "kind": {"const": "fixed"},
            "maybe": {"type": ["string", "null"]},
        },
        "required": ["code", "short", "when", "id", "kind", "maybe"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
                    "range": {
                        "type": "object",
                        "properties": {"lo": {"type": "integer"}, "hi": {"type": "integer"}},
                        "required": ["lo", "hi"],
                    },
                },
                "required": ["tags", "range"],
            },
            "ids": {"type": "array", "items": {"type": "integer", "enum": [1, 2, 3, 4]}, "uniqueItems": True},
        },
        "required": ["filter", "ids"],
    },
    "refs": {
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
        "properties": {"a": {"$ref": "#/$defs/point"}, "path": {"type": "array", "items": {"$ref": "#/$defs/point"}}},
        "required": ["a", "path"],
    },
    "unions": {
        "type": "object",
        "properties": {
            "target": {"anyOf": [{"type": "string", "format": "email"}, {"type": "integer", "minimum": 100}]},
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"r": {"type": "number"}},
                        "required": ["r"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"w": {"type": "number"}},
                        "required": ["w"],
                        "additionalProperties": False,
                    },
                ]
            },
            "all": {
                "allOf": [
                    {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
                    {"properties": {"q": {"type": "integer"}}, "required": ["q"]},
                ]
            },
        },
        "required": ["target", "shape", "all"],
    },
    "empty": {"type": "object", "properties": {}},
    "no_params": {},
}


def _validate(schema: dict, value) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_generated_arguments_validate(name: str) -> None:
    schema = SCHEMAS[name]
    for i in range(60):
        value = schema_args.generate(schema, f"seed-{i}")
        assert isinstance(value, dict)
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        assert not errors, f"{name} seed {i}: {value} -> {errors[0].message}"


def test_generation_is_deterministic_and_varied() -> None:
    schema = SCHEMAS["flat"]
    assert schema_args.generate(schema, "abc") == schema_args.generate(schema, "abc")
    values = {json.dumps(schema_args.generate(schema, f"s{i}"), sort_keys=True) for i in range(30)}
    assert len(values) > 10


def test_required_properties_always_present_optional_sometimes() -> None:
    schema = SCHEMAS["flat"]
    values = [schema_args.generate(schema, f"s{i}") for i in range(100)]
    assert all("city" in v and "days" in v for v in values)
    with_unit = sum("unit" in v for v in values)
    assert 20 < with_unit < 80


@pytest.mark.parametrize("name", ["flat", "numbers", "strings", "nested", "refs", "unions"])
@pytest.mark.parametrize("kind", schema_args.BREAK_KINDS)
def test_broken_arguments_do_not_validate(name: str, kind: str) -> None:
    schema = SCHEMAS[name]
    for i in range(20):
        args = schema_args.generate(schema, f"b{i}")
        text, used = schema_args.break_arguments(args, schema, kind)
        assert used == kind, f"{name}: wanted {kind}, got {used}"
        if used == "unparseable":
            with pytest.raises(json.JSONDecodeError):
                json.loads(text)
        else:
            assert not _validate(schema, json.loads(text)), f"{name}/{kind}: {text} still validates"
        if used == "missing_required":
            parsed = json.loads(text)
            assert any(r not in parsed for r in schema["required"])


def test_breaking_falls_back_when_kind_impossible() -> None:
    # nothing required → missing_required is impossible; an object schema can still get a wrong type
    text, used = schema_args.break_arguments({}, SCHEMAS["empty"], "missing_required")
    assert used == "wrong_type"
    assert not _validate(SCHEMAS["empty"], json.loads(text))
    # an accept-anything schema can only be broken by unparseable text
    text, used = schema_args.break_arguments({}, {"anyOf": [{}, {"type": "object"}]}, "wrong_type")
    assert used == "unparseable"
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_fragments_are_small_and_rejoin() -> None:
    text = json.dumps({"query": "weather in São Paulo", "n": 12345, "tags": ["a b", "ç"], "x": None})
    frags = split_fragments(text)
    assert "".join(frags) == text
    assert len(frags) > 10
    assert max(len(f) for f in frags) <= 9
    huge = "x" * 1_000_000
    big = split_fragments(huge)
    assert "".join(big) == huge and len(big) < 20


def test_pattern_strings_match_their_pattern() -> None:
    schema = {"type": "object", "required": ["ticket", "table"], "properties": {
        "ticket": {"type": "string", "pattern": "^INC-[0-9]+$"},
        "table": {"type": "string", "pattern": "^[a-z_]+\\.[a-z0-9_]+$"},
    }}
    for i in range(30):
        assert _validate(schema, schema_args.generate(schema, f"p-{i}"))


def test_every_demo_sample_tool_gets_valid_arguments() -> None:
    from avv_core.samples import load_samples
    from tests.locust_runs import DEMO_SAMPLES

    tools = [t["function"] for s in load_samples(DEMO_SAMPLES).samples for t in s.tools]
    assert len(tools) > 40
    for tool in tools:
        for i in range(5):
            value = schema_args.generate(tool.get("parameters"), f"{tool['name']}-{i}")
            errors = list(jsonschema.Draft202012Validator(tool["parameters"]).iter_errors(value))
            assert not errors, f"{tool['name']}: {value} -> {errors[0].message}"
