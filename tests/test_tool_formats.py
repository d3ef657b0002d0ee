"""The text tool-call format registry (avv_core/tool_formats.py): every declared format is parsed back by raw
mode, found by the as-text detector and written by the simulator the same way, and every list of formats (the
vendor config's tool_parser, the simulator's knob, the README) is the registry's."""

from __future__ import annotations

import json

import pytest

from avv_core.samples import load_samples
from avv_core.tool_formats import (
    CALL_SEPARATOR,
    FORMATS,
    PATTERNS,
    TOOL_PARSERS,
    CallText,
    ToolFormat,
    find_text_calls,
    parse_completion,
    render_format_table,
)
from avv_harness.dialects.chat_template import load_chat_template
from avv_harness.dialects.dialect import TEMPLATES_DIR
from avv_sim.dialects import _as_text, as_completion, text_calls
from avv_sim.identity import decision_key
from avv_sim.plan import make_plan
from avv_sim.profiles import ProfileError, make_profile
from avv_sim.tokens import token_counts
from tests.locust_runs import DEMO_SAMPLES, ROOT

CALLS = [("get_weather", '{"city": "Oslo", "days": 2}'), ("search", '{"q": "rain", "tags": ["a", "ü"]}')]
NAMES = {name for name, _ in CALLS}


def written(fmt: ToolFormat, calls=CALLS) -> str:
    parts = [fmt.write(name, args, i) for i, (name, args) in enumerate(calls)]
    return CALL_SEPARATOR.join(p.before + p.arguments + p.after for p in parts)


def same_arguments(a: str, b: str) -> bool:
    return json.loads(a) == json.loads(b)


def test_the_registry_is_the_list_of_formats_everywhere():
    assert TOOL_PARSERS == tuple(FORMATS) and all(FORMATS[name].name == name for name in FORMATS)
    labels = [f.label for f in FORMATS.values()]
    assert len(set(labels)) == len(labels) and set(labels) < set(PATTERNS)
    readme = (ROOT / "docs" / "reference" / "wire-formats.md").read_text(encoding="utf-8")
    assert render_format_table() in readme
    for name in TOOL_PARSERS:
        assert make_profile("p", {"tool_parser": name}).tool_parser == name
    with pytest.raises(ProfileError, match="tool_parser"):
        make_profile("p", {"tool_parser": "xml"})


@pytest.mark.parametrize("name", TOOL_PARSERS)
def test_raw_mode_parses_what_the_format_writes(name):
    parsed = parse_completion(written(FORMATS[name]), name)
    assert [c["name"] for c in parsed.calls] == [n for n, _ in CALLS]
    assert all(same_arguments(c["arguments"], args) for c, (_, args) in zip(parsed.calls, CALLS, strict=True))
    assert (parsed.content, parsed.first_kind) == ("", "tool_call")
    with_reasoning = parse_completion("<think>\nplan\n</think>\n\n" + written(FORMATS[name]), name)
    assert (with_reasoning.reasoning, len(with_reasoning.calls), with_reasoning.first_kind) == ("plan", 2, "reasoning")


@pytest.mark.parametrize("name", TOOL_PARSERS)
def test_the_detector_finds_what_the_format_writes(name):
    fmt = FORMATS[name]
    found = find_text_calls("Let me check.\n" + written(fmt), NAMES)
    assert [(c.name, c.pattern) for c in found] == [(n, fmt.label) for n, _ in CALLS]
    assert [c.arguments for c in found] == [json.loads(args) for _, args in CALLS]
    assert find_text_calls(written(fmt), {"other_tool"}) == []


SAMPLES = load_samples(DEMO_SAMPLES).samples
TEMPLATE = load_chat_template(TEMPLATES_DIR / "hermes.jinja")


def two_call_plans(knobs: dict | None = None):
    profile = make_profile("p", {"tool_call_rate": 1.0, "parallel_rate": 1.0, "reasoning_tokens": 3, **(knobs or {})})
    body = {**SAMPLES[0].body, "model": "m", "stream": True}
    return [make_plan(profile, body, 1, decision_key(body)) for _ in range(2)]


@pytest.mark.parametrize("name", TOOL_PARSERS)
def test_the_simulator_writes_each_format_under_broken_template(name):
    chat_plan, plan = two_call_plans({"quirks": ["broken_template"]})
    truth = text_calls(plan, name, 1)
    content = "".join(c.text for c in plan.chunks if c.kind == "content")
    found = find_text_calls(content, {t["name"] for t in truth})
    assert [(c.name, c.pattern) for c in found] == [(t["name"], FORMATS[name].label) for t in truth]
    assert [c.arguments for c in found] == [json.loads(t["arguments"]) for t in truth]
    assert plan.finish_reason == "stop" and plan.completion_tokens == chat_plan.completion_tokens


@pytest.mark.parametrize("name", TOOL_PARSERS)
def test_the_simulator_answers_completions_in_each_format(name):
    chat_plan, plan = two_call_plans()
    truth = as_completion(plan, TEMPLATE.render(SAMPLES[0].body["messages"], SAMPLES[0].tools), 2, name)
    parsed = parse_completion("".join(c.text for c in plan.chunks), name)
    assert [c["name"] for c in parsed.calls] == [t["name"] for t in truth] and len(truth) == 2
    assert all(same_arguments(c["arguments"], t["arguments"]) for c, t in zip(parsed.calls, truth, strict=True))
    assert parsed.reasoning and parsed.first_kind == "reasoning"
    assert token_counts(plan.chunks) == token_counts(chat_plan.chunks)


def test_a_format_that_spells_arguments_its_own_way_keeps_the_token_count():
    """The simulator spreads re-spelled arguments over the call's own tokens, so timing and usage stay."""
    upper = ToolFormat("upper", "upper", "test only", FORMATS["hermes"].parse, FORMATS["hermes"].detect,
                       lambda name, args, index: CallText(f"<{name}>", args.upper(), f"</{name}>"))
    chat_plan, plan = two_call_plans({"tokens_per_chunk": 2})
    _as_text(plan, upper, 2, completion=True)
    text = "".join(c.text for c in plan.chunks)
    for call in chat_plan.tool_calls:
        assert f"<{call.name}>{call.arguments.upper()}</{call.name}>" in text
    assert len(plan.tokens) == len(chat_plan.tokens) and token_counts(plan.chunks) == token_counts(chat_plan.chunks)
