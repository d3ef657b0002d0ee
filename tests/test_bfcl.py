"""BFCL v4 → sample lines: schema conversion, wire names, gold, and samples/bfcl-mini.jsonl reproduced by the
documented command (skipped where the shared BFCL copy is absent)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from jsonschema import Draft202012Validator

from avv_core.errors import InputError
from avv_core.samples import load_samples
from avv_harness.inputs.bfcl import convert, convert_question, convert_schema, spread, wire_names
from avv_harness.samples_cli import main
from tests.conftest import shared_path
from tests.locust_runs import ROOT

BFCL_MINI = ROOT / "samples" / "bfcl-mini.jsonl"
README = (ROOT / "samples" / "README.md").read_text(encoding="utf-8")
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_multiple", "live_irrelevance", "live_relevance")


def test_types_become_json_schema():
    bfcl = {"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float", "description": "x", "default": 1.0},
        "b": {"type": "tuple", "items": {"type": "dict", "properties": {"c": {"type": "any"}}}},
        "d": {"type": "string", "enum": ["x", "y"], "optional": True},
    }}
    assert convert_schema(bfcl) == {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "number", "description": "x", "default": 1.0},
        "b": {"type": "array", "items": {"type": "object", "properties": {"c": {}}}},
        "d": {"type": "string", "enum": ["x", "y"]},
    }}
    Draft202012Validator.check_schema(convert_schema(bfcl))


def test_wire_names_are_valid_and_unique_within_a_request():
    names = wire_names(["math.factorial", "math_factorial", "ok-name", "a.b.c", "x" * 70 + ".y"])
    assert names["math.factorial"] == "math_factorial" and names["math_factorial"] == "math_factorial_2"
    assert names["ok-name"] == "ok-name" and names["a.b.c"] == "a_b_c"
    assert len(set(names.values())) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", w) for w in names.values())


def test_spread_is_even_and_stable():
    assert spread(10, 3) == [0, 3, 6] and spread(3, 10) == [0, 1, 2] and spread(5, None) == list(range(5))


def test_a_question_with_gold_and_one_without():
    record = {"id": "parallel_0", "question": [[{"role": "user", "content": "Play…"}]],
              "function": [{"name": "spotify.play", "description": "d", "parameters": {
                  "type": "dict", "properties": {"artist": {"type": "string"}}, "required": ["artist"]}}]}
    truth = [{"spotify.play": {"artist": ["Taylor Swift"]}}, {"spotify.play": {"artist": ["Maroon 5"]}}]
    line, _ = convert_question(record, "parallel", truth)
    assert line["tools"][0]["function"]["name"] == "spotify_play" and line["tool_names"] == {
        "spotify_play": "spotify.play"}
    assert line["expected_tool_call"] is True and [c["name"] for c in line["expected_calls"]] == ["spotify.play"] * 2
    assert line["data_index"] == "parallel_0" and line["_category"] == "parallel"
    irrelevant, _ = convert_question({**record, "id": "irrelevance_0"}, "irrelevance", None)
    assert irrelevant["expected_tool_call"] is False and "expected_calls" not in irrelevant
    skipped, why = convert_question(record, "parallel", [{"spotify.play": {"artist": []}}])
    assert skipped is None and "no acceptable value" in why
    other, why = convert_question(record, "parallel", [{"youtube.play": {"artist": ["x"]}}])
    assert other is None and "not among the question's functions" in why


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_bfcl_mini_is_a_usable_sample_file():
    samples = load_samples(BFCL_MINI).samples
    assert 190 <= len(samples) <= 210
    per_category = Counter(s.metadata["_category"] for s in samples)
    assert set(per_category) == set(CATEGORIES) and max(per_category.values()) - min(per_category.values()) <= 10
    for s in samples:
        assert "expected_calls" not in s.body and "tool_names" not in s.body and "_category" not in s.body
        names = {t["function"]["name"] for t in s.tools}
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names)
        for tool in s.tools:
            Draft202012Validator.check_schema(tool["function"]["parameters"])
        assert s.gold.labelled
        for call in s.gold.expected_calls or ():
            assert s.gold.wire_name(call["name"]) in names
    assert sum(bool(s.gold.tool_names) for s in samples) > 50  # dotted names mapped for the wire
    assert (ROOT / "samples" / "bfcl-mini.NOTICE").read_text().count("Apache License") >= 1


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_documented_command_reproduces_bfcl_mini(tmp_path):
    folder = shared_path("datasets", "bfcl")
    command = re.search(r"avv-samples from-bfcl (\S+) --categories (\S+) --per-category (\d+) --out (\S+)", README)
    assert command, "samples/README.md names the command"
    out = tmp_path / "bfcl-mini.jsonl"
    assert main(["from-bfcl", str(folder), "--categories", command.group(2), "--per-category", command.group(3),
                 "--out", str(out)]) == 0
    assert out.read_bytes() == BFCL_MINI.read_bytes()


def test_bad_input_names_the_file(tmp_path, capsys):
    folder = tmp_path / "bfcl"
    (folder / "possible_answer").mkdir(parents=True)
    (folder / "BFCL_v4_simple_python.json").write_text('{"id": "simple_python_0", "question": [[]]}\n{oops\n')
    with pytest.raises(InputError, match="no BFCL_v4_<category>.json for nope"):
        convert(str(folder), ["nope"])
    with pytest.raises(InputError, match=r"BFCL_v4_simple_python\.json:2: not valid JSON"):
        convert(str(folder), ["simple_python"])
    (folder / "BFCL_v4_multiple.json").write_text(json.dumps({"id": "multiple_0", "question": [], "function": []}))
    assert main(["from-bfcl", str(folder), "--categories", "multiple", "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "possible_answer/BFCL_v4_multiple.json: missing" in capsys.readouterr().err
