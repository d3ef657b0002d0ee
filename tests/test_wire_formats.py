"""The wire formats (avv_harness/wire/formats): Anthropic Messages and OpenAI Responses requests sent and their
streams read into the same record as chat's — content, reasoning, parallel tool calls, a max-tokens cut, usage,
TTFT, missing end events, error events, HTTP 529, headers and body, the start-up conversion check, an agent task
through each format — and the registry the config's ``endpoint`` values come from. In-process vendor, no socket."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import requests

from avv_core import api_formats, api_outcomes
from avv_core.errors import InputError
from avv_core.items import ITEM_HEADER, ItemKey, WorkItem
from avv_core.records import COLUMN_NAMES, ERROR_KINDS
from avv_core.samples import Sample, SampleSet, load_samples
from avv_harness.dialects import dialect as dialect_module
from avv_harness.dialects.dialect import Dialect
from avv_harness.dialects.overrides import Overrides
from avv_harness.docs import render_conversion_table, render_error_kinds_table
from avv_harness.exports import vendor_from_manifest
from avv_harness.inputs.config import Vendor, load_config
from avv_harness.inputs.secrets import Redactor, secret_header
from avv_harness.wire import formats
from avv_harness.wire.agent_loop import run_trajectory
from avv_harness.wire.execute import (
    RETRYABLE,
    ExecContext,
    ItemRun,
    RetryPolicy,
    build_body,
    build_request,
    check_requests,
)
from avv_harness.wire.execute import execute_item as run_item
from tests.builders import vendors_config, write_jsonl, write_yaml
from tests.fake_vendor import (
    SSE_HEADERS,
    Reads,
    ScriptedAdapter,
    error_reply,
    event,
    messages_events,
    messages_reply,
    responses_events,
    responses_reply,
    stream_reply,
)
from tests.glue import make_env, options

URL = "http://vendor.test/v/v1"
KEY = "sk-ant-secret-key-1234"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}}}}
BODY = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}],
        "tools": [TOOL, TIME]}
FORMATS = ("messages", "responses")


def vendor(endpoint: str, **kw: Any) -> Vendor:
    return Vendor("m", "v", "model-x", URL, api_key=KEY, dialect=Dialect(endpoint=endpoint), **kw)


def run(endpoint: str, answer: Any, *, retries: int = 0, body: dict | None = None, overrides: Overrides | None = None,
        **vendor_kw: Any) -> tuple[dict, Any, ScriptedAdapter, list[float]]:
    """One item against the in-process vendor: (record, outcome, adapter, back-off sleeps). ``answer``: a reply, or a
    function of the request (or of the attempt number) giving one."""
    calls = []

    def handler(request: requests.PreparedRequest):
        calls.append(request)
        return answer(len(calls)) if callable(answer) else answer

    adapter = ScriptedAdapter(handler)
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    sample = Sample("s1", 1, body or BODY)
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy(retries=retries, backoff_base_s=0.0),
                      overrides=overrides or Overrides())
    sleeps: list[float] = []
    item = WorkItem(ItemKey("m", "v", "s1", 1), sample)
    outcome = run_item(ItemRun(session, vendor(endpoint, **vendor_kw), URL, item, ctx, sleep=sleeps.append,
                               rng=random.Random(1)))
    return outcome.record, outcome, adapter, sleeps


def flags(record: dict) -> set[str]:
    """The record's anomalies but ``buffered_stream`` (an in-process body arrives in one read: buffered indeed)."""
    return set((record["anomalies"] or "").split(";")) - {"", "buffered_stream"}


def answer(endpoint: str, blocks: list, **kw: Any):
    """The same answer in either format: ``stop`` is chat's finish (mapped to the format's words)."""
    stop = kw.pop("stop", "stop")
    if endpoint == "messages":
        return messages_reply(blocks, stop_reason=api_outcomes.messages_stop_reason(stop), **kw)
    status, reason = api_outcomes.responses_status(stop)
    return responses_reply(blocks, status=status, reason=reason, **kw)


# ------------------------------------------------------------------------------------------- the registry


def test_the_formats_are_the_modules_and_the_config_allows_exactly_them():
    assert list(formats.FORMATS) == ["chat", "completions", "messages", "responses"]
    assert formats.ENDPOINTS == dialect_module.ENDPOINTS == tuple(formats.FORMATS)
    assert formats.find_formats() == formats.FORMATS  # found again, the same declarations
    assert {f.path for f in formats.FORMATS.values()} == {"chat/completions", "completions", "messages", "responses"}
    assert Dialect().endpoint == formats.ENDPOINTS[0] == "chat"  # the default is listed first


def test_endpoint_is_a_vendor_and_a_model_key(tmp_path):
    config = load_config(write_yaml(tmp_path / "v.yaml", vendors_config([
        {"name": "a", "url": URL, "is_baseline": True, "require_key": False},
        {"name": "b", "url": URL, "require_key": False, "endpoint": "responses"},
        {"name": "c", "url": URL, "require_key": False, "endpoint": "chat"}], endpoint="messages")))
    assert [v.dialect.endpoint for v in config.vendors] == ["messages", "responses", "chat"]
    assert config.vendors[0].redacted()["endpoint"] == "messages"


# ------------------------------------------------------------------------------------- request and headers


def test_messages_request_headers_and_converted_body():
    record, _, adapter, _ = run("messages", messages_reply())
    sent = adapter.requests[0]
    assert sent.url == "http://vendor.test/v/v1/messages"
    assert sent.headers["x-api-key"] == KEY and "Authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == api_formats.ANTHROPIC_VERSION
    assert sent.headers["Accept"] == "text/event-stream" and sent.headers["Content-Type"] == "application/json"
    assert ItemKey.parse_tag(sent.headers[ITEM_HEADER])[1] == ItemKey("m", "v", "s1", 1)
    body = json.loads(sent.body)
    chat = build_body(Sample("s1", 1, BODY), vendor("messages"))
    assert body == {**api_formats.to_messages(chat), "stream": True}
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert body["max_tokens"] == api_formats.DEFAULT_MESSAGES_MAX_TOKENS and "stream_options" not in body
    assert body["tools"][0] == {"name": "get_weather", "description": "Weather for a city.",
                                "input_schema": TOOL["function"]["parameters"]}
    assert record["endpoint"] == "messages" and record["status"] == "success"


def test_messages_max_tokens_and_anthropic_version_can_be_set():
    _, _, adapter, _ = run("messages", messages_reply(), overrides=Overrides(max_tokens=300),
                           headers={"Anthropic-Version": "2024-01-01"})
    sent = adapter.requests[0]
    assert json.loads(sent.body)["max_tokens"] == 300
    assert sent.headers["anthropic-version"] == "2024-01-01"  # the vendor's, whatever its case: sent once
    assert [k for k in sent.headers if k.lower() == "anthropic-version"] == ["Anthropic-Version"]
    _, _, adapter, _ = run("messages", messages_reply(), extra_body={"max_tokens": 77, "thinking": {"type": "enabled"}})
    body = json.loads(adapter.requests[0].body)
    assert body["max_tokens"] == 77 and body["thinking"] == {"type": "enabled"}


def test_responses_request_is_bearer_and_converted():
    _, _, adapter, _ = run("responses", responses_reply(), body={**BODY, "max_tokens": 50})
    sent = adapter.requests[0]
    assert sent.url == "http://vendor.test/v/v1/responses"
    assert sent.headers["Authorization"] == f"Bearer {KEY}" and "x-api-key" not in sent.headers
    body = json.loads(sent.body)
    assert body["instructions"] == "Be brief." and body["input"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert body["max_output_tokens"] == 50 and body["stream"] is True and body["model"] == "model-x"
    assert body["tools"][0] == {"type": "function", "name": "get_weather", "description": "Weather for a city.",
                                "parameters": TOOL["function"]["parameters"]}


def test_the_messages_key_is_a_secret_wherever_it_appears():
    assert secret_header("x-api-key") and secret_header("X-Api-Key")
    record, _, _, _ = run("messages", error_reply(401, f"invalid x-api-key {KEY}"))
    assert record["error_kind"] == "http_4xx" and KEY in record["error_detail"]  # the wire client's raw row …
    assert KEY not in json.dumps(Redactor([KEY]).record(record))  # … as the controller redacts every row


# ------------------------------------------------------------------------------------------ reading streams


@pytest.mark.parametrize("endpoint, stop_reason", [("messages", "end_turn"), ("responses", "completed")])
def test_content_only(endpoint, stop_reason):
    record, outcome, _, _ = run(endpoint, answer(endpoint, [("text", ["Hello", "", " there"])]))
    assert record["status"] == "success" and record["content"] == "Hello there"
    assert (record["finish_reason"], record["stop_reason"], record["ttft_kind"]) == ("stop", stop_reason, "content")
    assert flags(record) == set() and record["tool_call_count"] == 0 and record["reasoning_field"] is None
    assert outcome.final.token_events == 2  # the empty delta is no token
    assert record["chunks"] == len(answer(endpoint, [("text", ["Hello", "", " there"])])[2].split(b"\n\n")) - 1


@pytest.mark.parametrize("endpoint, field", [("messages", "thinking"), ("responses", "reasoning_summary")])
def test_reasoning_then_content(endpoint, field):
    record, _, _, _ = run(endpoint, answer(endpoint, [("thinking", ["Let me ", "think."]), ("text", ["Sunny."])]))
    assert (record["reasoning"], record["reasoning_chars"], record["reasoning_field"]) == ("Let me think.", 13, field)
    assert record["ttft_kind"] == "reasoning" and record["content"] == "Sunny." and record["finish_reason"] == "stop"


@pytest.mark.parametrize("endpoint, stop_reason, ids", [("messages", "tool_use", ["toolu_a", "toolu_b"]),
                                                        ("responses", "completed", ["call_a", "call_b"])])
def test_parallel_tool_calls_in_block_order(endpoint, stop_reason, ids):
    blocks = [("text", ["Checking."]), ("tool", ids[0], "get_weather", ['{"city": ', '"Paris"}']),
              ("tool", ids[1], "get_time", ['{"tz"', ': "CET"}'])]
    record, outcome, _, _ = run(endpoint, answer(endpoint, blocks, stop="tool_calls"))
    assert json.loads(record["tool_calls"]) == [
        {"id": ids[0], "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"id": ids[1], "name": "get_time", "arguments": '{"tz": "CET"}'}]
    assert (record["finish_reason"], record["stop_reason"]) == ("tool_calls", stop_reason)
    assert record["saw_tool_call_delta"] is True and record["tool_call_count"] == 2 and flags(record) == set()
    assert record["content"] == "Checking." and record["ttft_kind"] == "content"
    assert outcome.final.token_events == 1 + 2 * 3  # text; per call its start (the name) and two argument pieces


def test_a_tool_use_block_with_its_whole_input_and_responses_done_arguments():
    whole = [event({"type": "message_start", "message": {"usage": {"input_tokens": 4, "output_tokens": 1}}}),
             event({"type": "content_block_start", "index": 0, "content_block": {
                 "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}}),
             event({"type": "content_block_stop", "index": 0}),
             event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
             event({"type": "message_stop"})]
    record, _, _, _ = run("messages", (200, SSE_HEADERS, b"".join(whole)))
    assert json.loads(record["tool_calls"]) == [
        {"id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    assert record["ttft_kind"] == "tool_call" and record["finish_reason"] == "tool_calls"
    # Responses: no argument deltas, the .done event's arguments
    events = responses_events([("tool", "call_9", "get_time", [])])
    done = event({"type": "response.function_call_arguments.done", "item_id": "fc_0", "output_index": 0,
                  "arguments": '{"tz": "UTC"}'})
    record, _, _, _ = run("responses", (200, SSE_HEADERS, b"".join([*events[:3], done, *events[3:]])))
    assert json.loads(record["tool_calls"]) == [{"id": "call_9", "name": "get_time", "arguments": '{"tz": "UTC"}'}]


@pytest.mark.parametrize("endpoint, stop_reason", [("messages", "max_tokens"),
                                                   ("responses", "incomplete:max_output_tokens")])
def test_a_max_tokens_cut_is_length(endpoint, stop_reason):
    record, _, _, _ = run(endpoint, answer(endpoint, [("text", ["Once upon"])], stop="length"))
    assert (record["status"], record["finish_reason"], record["stop_reason"]) == ("success", "length", stop_reason)
    cut, _, _, _ = run(endpoint, answer(endpoint, [("tool", "c1", "get_weather", ['{"ci'])], stop="length"))
    assert cut["finish_reason"] == "length" and flags(cut) == {"tool_call_truncated", "tool_calls_under_stop"}


def test_messages_usage_counts_cache_tokens_as_prompt():
    start = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 20, "output_tokens": 1}
    record, _, _, _ = run("messages", messages_reply(start_usage=start, output_tokens=42))
    assert (record["prompt_tokens"], record["completion_tokens"], record["total_tokens"]) == (35, 42, 77)
    assert record["usage_reported"] is True and flags(record) == set()


def test_responses_usage_comes_from_response_completed():
    usage = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 30,
             "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 150}
    record, _, _, _ = run("responses", responses_reply(usage=usage))
    assert (record["prompt_tokens"], record["completion_tokens"], record["total_tokens"]) == (120, 30, 150)
    bad, _, _, _ = run("responses", responses_reply(usage={"input_tokens": -3, "output_tokens": 2}))
    assert bad["prompt_tokens"] is None and flags(bad) == {"usage_invalid"}


@pytest.mark.parametrize("endpoint", FORMATS)
def test_ttft_is_the_first_token_event_not_the_first_event(endpoint):
    """The stream's opening events (message_start, ping, block start / response.created, item added …) arrive
    in the first read, the first text delta in the second, 50 ms later: the TTFT is the second read's."""
    events = (messages_events([("text", ["Hi", "!"])]) if endpoint == "messages"
              else responses_events([("text", ["Hi", "!"])]))
    opening = 3 if endpoint == "messages" else 4  # everything before the first text delta
    status, headers, _ = answer(endpoint, [("text", ["Hi", "!"])])
    parts = Reads([b"".join(events[:opening]), b"".join(events[opening:])], pause_s=0.05)
    record, outcome, _, _ = run(endpoint, (status, headers, parts))
    final = outcome.final
    assert final.reads == 2 and final.first_token_read == 2 and final.first_token_kind == "content"
    assert record["ttft_ms"] >= 45 and record["ttfb_ms"] < 45
    assert record["ttft_ms"] - record["ttfb_ms"] >= 45


def test_a_messages_stream_without_message_stop_is_whole_but_flagged():
    record, _, _, _ = run("messages", (200, SSE_HEADERS, b"".join(messages_events([("text", ["ok"])], end=False))))
    assert (record["status"], record["finish_reason"], record["anomalies"]) == ("success", "stop", "no_done")
    cut, _, _, _ = run("messages", (200, SSE_HEADERS, b"".join(
        messages_events([("text", ["o"])], stop_reason=None, end=False))))
    assert (cut["status"], cut["error_kind"], cut["anomalies"]) == ("failed", "truncated", "no_done")
    assert cut["content"] == "o" and cut["ttft_ms"] is not None


def test_a_responses_stream_without_response_completed_is_truncated():
    record, _, _, _ = run("responses", (200, SSE_HEADERS, b"".join(responses_events([("text", ["ok"])], end=False))))
    assert (record["status"], record["error_kind"], record["anomalies"]) == ("failed", "truncated", "no_done")
    assert record["content"] == "ok" and record["stop_reason"] is None


def _with_error(events: list[bytes], error: bytes, at: int = 4) -> tuple:
    return 200, SSE_HEADERS, b"".join([*events[:at], error])


OVERLOADED = {
    "messages": event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    "responses": event({"type": "response.failed", "sequence_number": 9, "response": {
        "status": "failed", "error": {"code": "server_is_overloaded", "message": "try later"}}}),
}
OTHER_ERROR = {
    "messages": event({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
    "responses": event({"type": "error", "sequence_number": 9, "code": "server_error", "message": "boom"}),
}


@pytest.mark.parametrize("endpoint", FORMATS)
def test_an_overloaded_event_is_retried_then_recorded_overloaded(endpoint):
    stream = messages_events([("text", ["a", "b"])]) if endpoint == "messages" else responses_events(
        [("text", ["a", "b"])])
    record, outcome, adapter, sleeps = run(endpoint, _with_error(stream, OVERLOADED[endpoint]), retries=2)
    assert (record["status"], record["error_kind"], record["attempts"]) == ("failed", "overloaded", 3)
    assert len(adapter.requests) == 3 and len(sleeps) == 2 and "overloaded" in RETRYABLE
    ok, _, _, _ = run(endpoint, lambda n: _with_error(stream, OVERLOADED[endpoint]) if n == 1 else
                      answer(endpoint, [("text", ["fine"])]), retries=2)
    assert (ok["status"], ok["attempts"], ok["content"]) == ("success", 2, "fine")


@pytest.mark.parametrize("endpoint, message", [("messages", "Internal server error"), ("responses", "boom")])
def test_any_other_error_event_is_a_stream_error_not_retried(endpoint, message):
    stream = messages_events([("text", ["a", "b"])]) if endpoint == "messages" else responses_events(
        [("text", ["a", "b"])])
    first_delta = 4 if endpoint == "messages" else 5  # the stream up to its first text delta
    record, _, adapter, _ = run(endpoint, _with_error(stream, OTHER_ERROR[endpoint], at=first_delta), retries=2)
    assert (record["status"], record["error_kind"], record["attempts"]) == ("failed", "stream_error", 1)
    assert record["error_detail"] == f"error event mid-stream: {message}" and record["content"] == "a"
    failed = event({"type": "response.failed", "response": {"error": {"code": "invalid_prompt", "message": "no"}}})
    if endpoint == "responses":
        record, _, _, _ = run(endpoint, _with_error(stream, failed))
        assert record["error_kind"] == "stream_error" and record["stop_reason"] == "failed"
        assert record["error_detail"] == "response.failed: invalid_prompt: no" and flags(record) == set()


def test_http_529_is_overloaded_and_retried():
    record, _, adapter, sleeps = run("messages", error_reply(529, "Overloaded"), retries=1)
    assert (record["error_kind"], record["http_status"], record["attempts"]) == ("overloaded", 529, 2)
    assert record["error_detail"] == "HTTP 529: Overloaded" and len(sleeps) == 1
    chat, _, _, _ = run("chat", error_reply(503, "busy"))
    assert chat["error_kind"] == "http_5xx"  # other 5xx unchanged


def test_a_malformed_event_is_bad_sse_naming_the_field():
    bad = event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}})
    record, _, _, _ = run("messages", _with_error(messages_events([("text", ["a"])]), bad))
    assert record["error_kind"] == "bad_sse"
    assert record["error_detail"] == "malformed event: content_block_delta.delta.text is a number, not a string"
    odd = event({"type": ["not", "a", "name"]})  # an unhashable type is no known event: ignored
    stream = responses_events([("text", ["a", "b"])])
    record, _, _, _ = run("responses", (200, SSE_HEADERS, b"".join([*stream[:5], odd, *stream[5:]])))
    assert record["status"] == "success" and record["content"] == "ab"


def test_chat_and_raw_rows_keep_their_raw_finish_reason_as_stop_reason():
    record, _, _, _ = run("chat", stream_reply("hi"))
    assert (record["finish_reason"], record["stop_reason"]) == ("stop", "stop")
    assert "stop_reason" in COLUMN_NAMES and "overloaded" in ERROR_KINDS
    assert "| `overloaded` |" in render_error_kinds_table()


# ------------------------------------------------------------------------------ conversion at start-up


def _samples(tmp_path, lines: list[dict]) -> SampleSet:
    return load_samples(write_jsonl(tmp_path / "samples.jsonl", lines))


def test_a_sample_that_cannot_be_converted_is_an_input_error_naming_file_line_and_field(tmp_path):
    image = {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                         {"type": "image_url", "image_url": {"url": "data:,"}}]}
    samples = _samples(tmp_path, [BODY, {"messages": [image]}, {**BODY, "stop": "END"}])
    with pytest.raises(InputError) as err:
        check_requests(samples, [vendor("chat"), vendor("messages"), vendor("responses")])
    lines = str(err.value).splitlines()[1:]
    path = str(tmp_path / "samples.jsonl")
    assert [line.strip() for line in lines] == [
        f"{path}:2: vendor v (endpoint: messages): messages[0].content[1]: a 'image_url' part cannot be sent to the "
        "Messages API (only text is converted)",
        f"{path}:2: vendor v (endpoint: responses): messages[0].content[1]: a 'image_url' part cannot be sent to "
        "the Responses API (only text is converted)",
        f"{path}:3: vendor v (endpoint: responses): stop: has no counterpart in the Responses API (remove it with "
        "a transform, or use endpoint: chat)"]
    check_requests(samples, [vendor("chat")])  # chat sends what the sample says
    check_requests(_samples(tmp_path, [BODY]), [vendor("messages"), vendor("responses")])


def test_the_check_runs_when_the_run_starts_before_any_request(tmp_path):
    config = write_yaml(tmp_path / "vendors.yaml", vendors_config([
        {"name": "a", "url": "http://vendor.test/a/v1", "is_baseline": True, "require_key": False},
        {"name": "b", "url": "http://vendor.test/b/v1", "require_key": False, "endpoint": "responses"}]))
    samples = write_jsonl(tmp_path / "samples.jsonl", [BODY, {**BODY, "seed": 7}])
    adapter = ScriptedAdapter(lambda request: stream_reply())
    with pytest.raises(InputError, match=r"samples.jsonl:2: vendor b \(endpoint: responses\): seed: has no "
                                         r"counterpart in the Responses API"):
        make_env(options(tmp_path, config, samples), adapter=adapter)
    assert adapter.requests == [] and not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------- agent tasks


def _agent_sample(tmp_path) -> Sample:
    line = {"data_index": "t1", "messages": [{"role": "user", "content": "weather in Paris and the time?"}],
            "tools": [TOOL, TIME], "agent": {"max_steps": 3, "tool_results": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "content": "sunny, 21 °C"},
                {"name": "get_time", "arguments": {}, "content": "14:05"}]}}
    return _samples(tmp_path, [line]).samples[0]


@pytest.mark.parametrize("endpoint", FORMATS)
def test_an_agent_task_completes_through_each_format(tmp_path, endpoint):
    def script(request):
        step = ItemKey.tag_step(request.headers[ITEM_HEADER])
        if step == 1:
            return answer(endpoint, [("tool", "id_w", "get_weather", ['{"city": "Paris"}']),
                                     ("tool", "id_t", "get_time", ['{"tz": "CET"}'])], stop="tool_calls")
        return answer(endpoint, [("text", ["Sunny, 21 °C; it is 14:05."])])

    adapter = ScriptedAdapter(script)
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    sample = _agent_sample(tmp_path)
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy(retries=0))
    records = run_trajectory(ItemRun(session, vendor(endpoint), URL, WorkItem(ItemKey("m", "v", "t1", 1), sample), ctx,
                                    sleep=lambda s: None))
    assert [(r["step"], r["finish_reason"], r["endpoint"]) for r in records] == [
        (1, "tool_calls", endpoint), (2, "stop", endpoint)]
    assert records[1]["content"] == "Sunny, 21 °C; it is 14:05."
    assert [a["content"] for a in json.loads(records[0]["tool_results"])] == ["sunny, 21 °C", "14:05"]
    second = json.loads(adapter.requests[1].body)
    if endpoint == "messages":
        assert second["messages"][1:] == [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "id_w", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "id_t", "name": "get_time", "input": {"tz": "CET"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "id_w", "content": "sunny, 21 °C"},
                {"type": "tool_result", "tool_use_id": "id_t", "content": "14:05"}]}]
    else:
        assert second["input"][1:] == [
            {"type": "function_call", "call_id": "id_w", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call", "call_id": "id_t", "name": "get_time", "arguments": '{"tz": "CET"}'},
            {"type": "function_call_output", "call_id": "id_w", "output": "sunny, 21 °C"},
            {"type": "function_call_output", "call_id": "id_t", "output": "14:05"}]


def test_calls_that_cannot_go_back_as_messages_end_the_trajectory_at_their_step(tmp_path):
    def script(request):
        return messages_reply([("tool", "id_w", "get_weather", ['{"city": "Par'])], stop_reason="tool_use")

    adapter = ScriptedAdapter(script)
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy(retries=0))
    records = run_trajectory(ItemRun(session, vendor("messages"), URL,
                                    WorkItem(ItemKey("m", "v", "t1", 1), _agent_sample(tmp_path)), ctx,
                                    sleep=lambda s: None))
    assert len(records) == 1 and len(adapter.requests) == 1
    assert records[0]["status"] == "success" and records[0].get("tool_results") is None
    assert records[0]["error_detail"].startswith("the trajectory ends here: the next request cannot be sent as "
                                                 "endpoint messages (messages[1].tool_calls: arguments are not JSON")


# ------------------------------------------------------------------------------------------------ exports, docs


def test_k2vv_export_rebuilds_the_chat_body_for_a_messages_vendor():
    entry = {"model": "m", "name": "v", "model_id": "model-x", "url": URL, "endpoint": "messages",
             "extra_body": {"top_k": 5}}
    request = build_body(Sample("s1", 1, BODY), vendor_from_manifest(entry))
    assert request["messages"] == BODY["messages"] and request["top_k"] == 5 and "system" not in request
    assert build_request(Sample("s1", 1, BODY), vendor("messages"))[1]["system"] == "Be brief."  # what was sent


def test_the_conversion_table_is_fields():
    table = render_conversion_table().splitlines()
    assert len(table) == 2 + len(api_formats.FIELDS)
    assert all(f.chat.replace("|", "\\|") in row for f, row in zip(api_formats.FIELDS, table[2:], strict=True))
