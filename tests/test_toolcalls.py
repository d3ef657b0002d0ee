"""The text-call detector (every shape it knows) and the tool-call anomalies set when a record is made."""

from __future__ import annotations

import json
import time

import pytest

from avv_core.records import ANOMALIES, Record
from avv_core.tool_formats import MAX_CALLS, PATTERNS, find_text_calls, request_tool_names
from avv_harness.wire.attempt import Attempt, ToolCallAcc
from avv_harness.wire.execute import attempt_record

NAMES = {"get_weather", "search"}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in sorted(NAMES)]
ARGS = {"city": "Paris", "days": 2}

# content → (name, arguments, pattern) expected for each shape the detector knows
SHAPES = {
    "fenced_json": ('Sure:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n```',
                    "fenced_json"),
    "fenced_no_language": ('```\n{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}\n```',
                           "fenced_json"),
    "fenced_list": ('```json\n[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]\n```',
                    "fenced_json"),
    "fenced_openai_shape": ('```json\n{"type": "function", "function": {"name": "get_weather", '
                            '"arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 2}"}}\n```', "fenced_json"),
    "bare_json": ('I will call {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}} now.', "json"),
    "bare_whole": ('{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}', "json"),
    "tool_call_tag": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>',
                      "tool_call_tag"),
    "tool_call_tag_unclosed": ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}',
                               "tool_call_tag"),
    "kimi": ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
             '{"city": "Paris", "days": 2}<|tool_call_end|><|tool_calls_section_end|>', "kimi"),
    "kimi_bare_name": ('<|tool_call_begin|>get_weather<|tool_call_argument_begin|>{"city": "Paris", "days": 2}'
                       '<|tool_call_end|>', "kimi"),
    "mistral_list": ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]', "mistral"),
    "mistral_args": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}', "mistral"),
    "mistral_call_id": ('[TOOL_CALLS]get_weather[CALL_ID]a1b2c3[ARGS]{"city": "Paris", "days": 2}', "mistral"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_text_call_shape_is_found(shape):
    content, pattern = SHAPES[shape]
    (found,) = find_text_calls(content, NAMES)
    assert (found.name, found.arguments, found.pattern) == ("get_weather", ARGS, pattern)
    assert pattern in PATTERNS


def test_only_calls_of_the_requests_tools_count():
    assert find_text_calls(SHAPES["fenced_json"][0], {"search"}) == []  # another tool's name
    assert find_text_calls(SHAPES["fenced_json"][0], set()) == []  # a request without tools
    assert find_text_calls('The JSON {"name": "Ada", "age": 36} has no arguments.', NAMES) == []
    assert find_text_calls('```python\nprint("hi")\n```', NAMES) == []
    assert find_text_calls("", NAMES) == [] and find_text_calls(None, NAMES) == []


def test_several_calls_and_broken_arguments():
    content = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
               '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>')
    assert [c.name for c in find_text_calls(content, NAMES)] == ["get_weather", "search"]
    cut = find_text_calls('<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"q": ', NAMES)
    assert [(c.name, c.arguments) for c in cut] == [("search", '{"q":')]  # unparseable arguments kept as text


def test_request_tool_names_reads_both_shapes():
    assert request_tool_names([*TOOLS, {"name": "flat"}, "junk", {"function": {}}]) == {*NAMES, "flat"}
    assert request_tool_names(None) == frozenset()


def _attempt(finish, calls=(), content=""):
    att = Attempt(http_status=200, t_headers=1.0, chunks=3, saw_done=True, finish_reason=finish,
                  usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    att.content = [content]
    for i, (name, args) in enumerate(calls):
        att.tool_calls[i] = ToolCallAcc(f"c{i}", name, [args])
    att.saw_tool_call_delta = bool(calls)
    return att


@pytest.mark.parametrize("finish, calls, content, expected", [
    ("stop", [], SHAPES["fenced_json"][0], ["tool_call_as_text"]),
    ("stop", [], "It is sunny.", []),
    ("length", [("get_weather", '{"')], "", ["tool_call_truncated"]),
    ("length", [("get_weather", json.dumps(ARGS))], "", []),  # a whole call under length is not truncated
    ("tool_calls", [("get_wether", json.dumps(ARGS))], "", ["unknown_tool"]),
    ("tool_calls", [], "", ["empty_tool_calls"]),
    ("tool_calls", [("get_weather", json.dumps(ARGS))], "", []),
])
def test_call_anomalies_are_set_when_the_record_is_made(finish, calls, content, expected):
    rec = attempt_record(_attempt(finish, calls, content), include_usage=True, tools=TOOLS)
    got = (rec["anomalies"] or "").split(";") if rec["anomalies"] else []
    assert [a for a in got if a in ("tool_call_as_text", "tool_call_truncated", "unknown_tool",
                                    "empty_tool_calls")] == expected
    assert set(got) <= set(ANOMALIES)
    Record(rec)  # fits the schema


def test_without_the_requests_tools_the_name_checks_are_skipped():
    rec = attempt_record(_attempt("tool_calls", [("anything", "{}")]), include_usage=True, tools=None)
    assert rec["anomalies"] is None
    no_tools = attempt_record(_attempt("tool_calls", [("anything", "{}")]), include_usage=True, tools=[])
    assert no_tools["anomalies"] == "unknown_tool"  # a request without tools has no tool to call


@pytest.mark.parametrize("content", [
    "{" * 199_990 + '"get_weather"',
    '[{"get_weather": ' * 28_000,
    "<|tool_call_begin|>get_weather " * 10_000,
    "[TOOL_CALLS]get_weather[ARGS]{" * 9_000,
    '<tool_call>{"name": "get_weather", "arguments": {"a": [' * 4_000,
], ids=["braces", "nested", "kimi_unclosed", "mistral_unclosed", "tags_unclosed"])
def test_pathological_content_is_scanned_in_bounded_time(content):
    """Each of these took 3-16 s before the decode budget; the detector runs on every response."""
    start = time.perf_counter()
    found = find_text_calls(content, NAMES)
    assert time.perf_counter() - start < 1.5 and len(found) <= MAX_CALLS
