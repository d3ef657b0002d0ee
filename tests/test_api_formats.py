"""Chat-completions requests converted to Anthropic Messages and OpenAI Responses requests and back (issue 24):
the field-by-field rules of avv_core.api_formats, what is refused, and that every shipped sample read back by the
simulator meets the decisions its chat request meets."""

from __future__ import annotations

import json

import pytest

from avv_core.api_formats import (
    DEFAULT_MESSAGES_MAX_TOKENS,
    FIELDS,
    ConversionError,
    from_messages,
    from_responses,
    to_messages,
    to_responses,
)
from avv_core.api_outcomes import (
    finish_from_messages,
    finish_from_responses,
    messages_stop_reason,
    responses_status,
    usage_from_messages,
    usage_from_responses,
)
from avv_core.records import usage_counts
from avv_core.samples import load_samples
from avv_harness.dialects.transforms import ADAPTERS, apply_transforms
from avv_sim.decision_key import decision_key
from tests.locust_runs import ROOT

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
CHAT = {
    "model": "m", "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.2, "max_tokens": 300,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
        {"role": "tool", "tool_call_id": "c2", "content": "21 C"},
        {"role": "user", "content": [{"type": "text", "text": "And "}, {"type": "text", "text": "tomorrow?"}]},
    ],
    "tools": [WEATHER], "tool_choice": "auto", "parallel_tool_calls": False, "stop": "END",
}


def test_a_chat_request_as_a_messages_request_field_by_field():
    body = to_messages(CHAT)
    assert body["system"] == "Be brief." and body["max_tokens"] == 300 and body["temperature"] == 0.2
    assert body["stop_sequences"] == ["END"] and "stream_options" not in body and body["stream"] is True
    assert body["tools"] == [{"name": "get_weather", "description": "Weather of a city",
                              "input_schema": WEATHER["function"]["parameters"]}]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {"city": "Rome"}}]},
        {"role": "user", "content": [  # the results of one assistant turn share one user message
            {"type": "tool_result", "tool_use_id": "c1", "content": "18 C"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "21 C"}]},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ]


def test_a_chat_request_as_a_responses_request_field_by_field():
    chat = {k: v for k, v in CHAT.items() if k != "stop"}
    body = to_responses({**chat, "reasoning_effort": "low"})
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 300
    assert body["reasoning"] == {"effort": "low"} and body["parallel_tool_calls"] is False
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                              "parameters": WEATHER["function"]["parameters"]}]
    assert body["tool_choice"] == "auto"
    assert body["input"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        {"type": "function_call_output", "call_id": "c2", "output": "21 C"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    named = to_responses({"messages": [], "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert named["tool_choice"] == {"type": "function", "name": "f"}


@pytest.mark.parametrize("change, api, message", [
    ({"stop": "x"}, "responses", r"stop: has no counterpart in the Responses API"),
    ({"response_format": {"type": "json_object"}}, "messages", r"response_format: has no counterpart"),
    ({"seed": 7}, "responses", r"seed: has no counterpart"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}]}, "messages",
     r"messages\[1\]: a system message after the conversation began"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "responses",
     r"messages\[0\]\.content\[0\]: a 'image_url' part cannot be sent"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}]}]},
     "messages", r"messages\[0\]\.tool_calls: arguments are list, not a JSON object"),
])
def test_what_cannot_be_converted_is_an_input_error_naming_the_field(change, api, message):
    convert = to_messages if api == "messages" else to_responses
    with pytest.raises(ConversionError, match=message):
        convert({"messages": [{"role": "user", "content": "hi"}], **change})


def test_messages_requires_max_tokens_so_a_request_without_it_gets_the_documented_default():
    assert to_messages({"messages": []})["max_tokens"] == DEFAULT_MESSAGES_MAX_TOKENS
    assert to_messages({"messages": [], "max_completion_tokens": 12})["max_tokens"] == 12
    assert "max_output_tokens" not in to_responses({"messages": []})


@pytest.mark.parametrize("sample_file", ["samples/demo.jsonl", "samples/agent-demo.jsonl"])
def test_every_shipped_request_read_back_meets_the_decisions_of_its_chat_request(sample_file):
    """The simulator answers a Messages or Responses request with the decisions of the chat request it came from:
    the decision key of the request read back equals the chat request's, for every sample with a max_tokens."""
    for sample in load_samples(str(ROOT / sample_file)).samples:
        chat = {**apply_transforms(sample.body, ADAPTERS["generic"]), "model": "m", "stream": True,
                "stream_options": {"include_usage": True}}  # as the harness sends it (the default adapter ran)
        key = decision_key(chat)
        assert decision_key(from_messages(to_messages(chat))) == key, sample.sample_id
        assert decision_key(from_responses(to_responses(chat))) == key, sample.sample_id


def test_stop_reasons_and_usage_map_onto_chats_and_back():
    assert [finish_from_messages(r) for r in ("end_turn", "stop_sequence", "tool_use", "max_tokens", "refusal",
                                              "pause_turn")] == ["stop", "stop", "tool_calls", "length", "refusal",
                                                                 "pause_turn"]
    for finish in ("stop", "tool_calls", "length"):
        assert finish_from_messages(messages_stop_reason(finish)) == finish
        status, reason = responses_status(finish)
        assert finish_from_responses(status, reason, finish == "tool_calls") == finish
    assert finish_from_responses("failed", None, False) is None
    usage = usage_from_messages({"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1},
                                {"output_tokens": 7})
    assert usage_counts(usage) == ({"prompt_tokens": 15, "completion_tokens": 7, "total_tokens": 22}, None)
    assert usage_counts(usage_from_messages({"input_tokens": -4}, {"output_tokens": 2}))[1] is not None
    assert usage_from_responses({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}) == {
        "prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_the_conversion_table_covers_every_field_it_converts():
    rows = json.dumps([f.chat for f in FIELDS])
    for key in ("system", "tool_calls", "tool_choice", "max_tokens", "stop", "temperature", "reasoning_effort",
                "response_format", "stream_options", "parallel_tool_calls"):
        assert key in rows, key
