"""The simulator's Anthropic Messages and OpenAI Responses endpoints (issue 24): a request read back into the chat body
it came from gets that chat request's plan (every shipped demo and agent sample); the plan written in each format's
events, checked with a plain SSE split (not the harness's reader): content, reasoning, parallel calls, a length cut,
the JSON bodies, the format-specific quirks and where the chat quirks apply; over HTTP, the three endpoints answer a
sample alike, each with one truth record of the same decisions, and answer errors in their API's shape."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from avv_core.api_formats import CHAT, MESSAGES, RESPONSES, to_messages, to_responses
from avv_core.api_outcomes import (
    finish_from_messages,
    finish_from_responses,
    messages_usage,
    responses_usage,
    usage_from_messages,
    usage_from_responses,
)
from avv_core.samples import load_samples
from avv_harness.dialects.transforms import ADAPTERS, apply_transforms
from avv_sim.endpoints import authorized, chat_view, plan_request, writer_for
from avv_sim.plan import Plan, sent_tool_calls
from avv_sim.profiles import make_profile
from avv_sim.quirks import ResponseShape, applicable
from avv_sim.request import RequestError
from avv_sim.sample_file import load_gold
from avv_sim.truth import Exchange
from tests.builders import chat_body
from tests.locust_runs import ROOT
from tests.sim_records import truth_by_tag

DEMO = ROOT / "samples" / "demo-conversations.jsonl"
AGENT_DEMO = ROOT / "samples" / "agent-demo.jsonl"
WIRE = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
CONVERT = {CHAT: lambda body: body, MESSAGES: to_messages, RESPONSES: to_responses}
FORMATS = (MESSAGES, RESPONSES)
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}},
]
FAST = {"ttft_ms": 5, "tokens_per_s": 5000, "output_tokens": 6}
CALLS = {**FAST, "tool_call_rate": 1.0, "parallel_rate": 1.0}


def sample_chat(sample: Any) -> dict[str, Any]:
    """A sample's request as the harness sends it to a chat vendor (the default adapter ran)."""
    return {**apply_transforms(sample.body, ADAPTERS["generic"]), **WIRE}


def sse(data: bytes) -> list[tuple[str | None, Any]]:
    """The events of an SSE stream, split by hand: (event name or None, data as JSON, or as text when it is not
    JSON); comment lines dropped, data lines joined with a newline."""
    out: list[tuple[str | None, Any]] = []
    for block in data.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        name, lines = None, []
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            if field == "event":
                name = value.removeprefix(" ")
            elif field == "data":
                lines.append(value.removeprefix(" "))
        if name is None and not lines:
            continue
        text = "\n".join(lines)
        try:
            out.append((name, json.loads(text)))
        except ValueError:
            out.append((name, text))
    return out


def token_events(endpoint: str, events: list[tuple[str | None, Any]]) -> list[tuple[str | None, Any]]:
    """The events that carry tokens, by FORMATS24.md's rules (chat: content, reasoning or a tool-call delta)."""
    def carries(name: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            return False
        if endpoint == MESSAGES:
            if name == "content_block_start":
                return data["content_block"]["type"] == "tool_use"
            delta = data.get("delta") or {}
            return name == "content_block_delta" and bool(delta.get("text") or delta.get("thinking")
                                                           or delta.get("partial_json"))
        if endpoint == RESPONSES:
            if name == "response.output_item.added":
                return data["item"]["type"] == "function_call"
            return name in ("response.output_text.delta", "response.reasoning_summary_text.delta",
                            "response.function_call_arguments.delta") and bool(data["delta"])
        delta = data["choices"][0]["delta"] if data.get("choices") else {}
        return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))
    return [(n, d) for n, d in events if carries(n, d)]


@dataclass
class Answer:
    """What a stream (or a JSON body) of one format says, read by hand."""

    content: str = ""
    reasoning: str = ""
    calls: list[tuple[str, str, str]] | None = None  # (id, name, arguments)
    finish: str | None = None  # mapped onto chat's finish_reason
    usage: dict[str, Any] | None = None  # mapped onto chat's usage
    ended: bool = False  # the format's end event came
    error: Any = None


def read(endpoint: str, events: list[tuple[str | None, Any]]) -> Answer:
    """A stream's content, reasoning, calls, finish, usage, end and error, read by hand."""
    out = Answer(calls=[])
    calls: dict[Any, list[str]] = {}
    start_usage = final_usage = None
    for name, data in events:
        if not isinstance(data, dict):
            if data == "[DONE]":
                out.ended = True
            continue
        if endpoint == CHAT:
            if "error" in data:
                out.error = data["error"]
            for choice in data.get("choices") or []:
                delta = choice["delta"]
                out.content += delta.get("content") or ""
                out.reasoning += delta.get("reasoning_content") or ""
                for tc in delta.get("tool_calls") or []:
                    call = calls.setdefault(tc["index"], ["", "", ""])
                    call[0] = tc.get("id", call[0])
                    call[1] = tc.get("function", {}).get("name", call[1])
                    call[2] += tc.get("function", {}).get("arguments", "")
                out.finish = choice.get("finish_reason") or out.finish
            out.usage = data.get("usage") or out.usage
        elif endpoint == MESSAGES:
            if name == "message_start":
                start_usage = data["message"].get("usage")
            elif name == "content_block_start" and data["content_block"]["type"] == "tool_use":
                calls[data["index"]] = [data["content_block"]["id"], data["content_block"]["name"], ""]
            elif name == "content_block_delta":
                delta = data["delta"]
                out.content += delta.get("text", "")
                out.reasoning += delta.get("thinking", "")
                if delta["type"] == "input_json_delta":
                    calls[data["index"]][2] += delta["partial_json"]
            elif name == "message_delta":
                out.finish = finish_from_messages(data["delta"]["stop_reason"])
                final_usage = data.get("usage")
            elif name == "message_stop":
                out.ended = True
            elif name == "error":
                out.error = data["error"]
        else:
            if name == "response.output_item.added" and data["item"]["type"] == "function_call":
                calls[data["output_index"]] = [data["item"]["call_id"], data["item"]["name"], ""]
            elif name == "response.output_text.delta":
                out.content += data["delta"]
            elif name == "response.reasoning_summary_text.delta":
                out.reasoning += data["delta"]
            elif name == "response.function_call_arguments.delta":
                calls[data["output_index"]][2] += data["delta"]
            elif name in ("response.completed", "response.incomplete"):
                response = data["response"]
                reason = (response["incomplete_details"] or {}).get("reason")
                out.finish = finish_from_responses(response["status"], reason, bool(calls))
                out.usage = usage_from_responses(response["usage"])
                out.ended = True
            elif name in ("response.failed", "error"):
                out.error = data.get("response", {}).get("error") or data
    if endpoint == MESSAGES:
        out.usage = usage_from_messages(start_usage, final_usage)
    out.calls = [tuple(c) for _, c in sorted(calls.items())]  # type: ignore[misc]
    return out


@dataclass
class Written:
    """One request planned and written in-process as the server writes it (no pacing)."""

    plan: Plan
    tokens: list[bytes]  # token event j's bytes
    data: bytes  # the whole stream
    sent_finish: str | None
    sent_usage: bool

    def events(self) -> list[tuple[str | None, Any]]:
        return sse(self.data)


def write(endpoint: str, knobs: dict[str, Any], chat: dict[str, Any], attempt: int = 1) -> Written:
    profile = make_profile("p", knobs)
    ex = Exchange("p", endpoint, None, 0.0)
    plan = plan_request(profile, CONVERT[endpoint](chat), ex, attempt, 1, None)
    wire = writer_for(endpoint, profile, plan, 0, "chatcmpl-" + "ab" * 12)
    head = wire.role_event()
    n = wire.chunks_to_send()
    make = wire.token_events(n)
    tokens = [make(j) for j in range(n)]
    tail = wire.tail(error=plan.fault == "stream_error", usage=plan.include_usage and not profile.omit_usage)
    return Written(plan, tokens, head + b"".join(tokens) + tail, wire.sent_finish, wire.sent_usage)


def json_body(endpoint: str, knobs: dict[str, Any], chat: dict[str, Any]) -> dict[str, Any]:
    profile = make_profile("p", knobs)
    plan = plan_request(profile, CONVERT[endpoint]({**chat, "stream": False}), Exchange("p", endpoint, None, 0.0),
                        1, 1, None)
    return writer_for(endpoint, profile, plan, 0, "chatcmpl-" + "ab" * 12).completion_body()


def question(i: int = 0, tools: bool = True, **extra: Any) -> dict[str, Any]:
    """A chat request with a ``max_tokens`` (a Messages request always has one, so a chat request without it reads
    back with the harness's default and meets other decisions)."""
    return {**chat_body(f"formats {i}", TOOLS if tools else None, stream=True, include_usage=True),
            "max_tokens": 200, **extra}


# ------------------------------------------------------------------------------ the plan, in each format


@pytest.mark.parametrize("endpoint", FORMATS)
def test_content_and_reasoning_in_each_format(endpoint):
    knobs = {**FAST, "reasoning_tokens": 3}
    chat, out = write(CHAT, knobs, question(tools=False)), write(endpoint, knobs, question(tools=False))
    mine, theirs = read(endpoint, out.events()), read(CHAT, chat.events())
    assert (mine.content, mine.reasoning, mine.finish, mine.calls) == (theirs.content, theirs.reasoning, "stop", [])
    assert mine.usage is not None and mine.usage["completion_tokens"] == 9 and mine.ended and out.sent_usage
    names = [n for n, _ in out.events()]
    if endpoint == MESSAGES:
        assert names[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
        assert names[-2:] == ["message_delta", "message_stop"]
        assert names.count("content_block_start") == names.count("content_block_stop") == 2
        (signature,) = [d for n, d in out.events() if n == "content_block_delta"
                        and d["delta"]["type"] == "signature_delta"]
        assert signature["index"] == 0  # the thinking block's, before it stops
        assert usage_from_messages(*messages_usage(out.plan.prompt_tokens, 9)) == mine.usage
    else:
        numbers = [d["sequence_number"] for _, d in out.events()]
        assert numbers == list(range(len(numbers))) and names[:2] == ["response.created", "response.in_progress"]
        assert names[-1] == "response.completed"
        final = out.events()[-1][1]["response"]
        assert final["usage"] == responses_usage(out.plan.prompt_tokens, 9, 3)
        assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert all(n == d["type"] for n, d in out.events())  # every event names its type twice


@pytest.mark.parametrize("endpoint", FORMATS)
def test_parallel_tool_calls_in_each_format(endpoint):
    chat, out = write(CHAT, CALLS, question()), write(endpoint, CALLS, question())
    mine, theirs = read(endpoint, out.events()), read(CHAT, chat.events())
    assert len(theirs.calls) == 2 and mine.finish == theirs.finish == "tool_calls" and mine.content == ""
    assert [c[1:] for c in mine.calls] == [c[1:] for c in theirs.calls]
    for (mine_id, _, _), (chat_id, _, _) in zip(mine.calls, theirs.calls, strict=True):
        assert mine_id == (chat_id.replace("call_", "toolu_") if endpoint == MESSAGES else chat_id)
    assert [c["id"] for c in sent_tool_calls(out.plan, len(out.plan.chunks))] == [c[0] for c in mine.calls]
    if endpoint == RESPONSES:
        done = [d["arguments"] for n, d in out.events() if n == "response.function_call_arguments.done"]
        assert done == [c[2] for c in mine.calls]


@pytest.mark.parametrize("endpoint", FORMATS)
def test_a_length_cut_in_each_format(endpoint):
    out = write(endpoint, {**FAST, "output_tokens": 20}, question(tools=False, max_tokens=4))
    mine = read(endpoint, out.events())
    assert mine.finish == "length" and mine.usage["completion_tokens"] == 4 and len(out.tokens) == 4
    if endpoint == MESSAGES:
        assert [d["delta"]["stop_reason"] for n, d in out.events() if n == "message_delta"] == ["max_tokens"]
    else:
        (final,) = [d["response"] for n, d in out.events() if n == "response.incomplete"]
        assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("endpoint", FORMATS)
@pytest.mark.parametrize("knobs", [CALLS, {**CALLS, "tokens_per_chunk": 3, "reasoning_tokens": 4},
                                   {**FAST, "tokens_per_chunk": 2, "reasoning_tokens": 3}])
def test_every_chat_token_event_is_one_token_event(endpoint, knobs):
    """Token event j of the chat stream is one token-bearing event, written in one piece with the structural events
    around it (a tool call's opening event is its name token; with ``tokens_per_chunk`` > 1 its first argument
    piece follows in the same write), so the pacing of the three endpoints is one."""
    chat, out = write(CHAT, knobs, question(3)), write(endpoint, knobs, question(3))
    assert len(out.tokens) == len(chat.tokens) == len(chat.plan.chunks)
    for j, data in enumerate(out.tokens):
        chunk = chat.plan.chunks[j]
        assert len(token_events(endpoint, sse(data))) == (2 if chunk.header and chunk.text else 1), (j, data)
        assert len(token_events(CHAT, sse(chat.tokens[j]))) == 1


@pytest.mark.parametrize("endpoint", FORMATS)
def test_the_json_body_of_each_format(endpoint):
    knobs = {**CALLS, "reasoning_tokens": 2}
    body = json_body(endpoint, knobs, question(5))
    chat = read(CHAT, write(CHAT, knobs, question(5)).events())
    if endpoint == MESSAGES:
        assert [b["type"] for b in body["content"]] == ["thinking", "tool_use", "tool_use"]
        assert [(b["name"], json.dumps(b["input"])) for b in body["content"][1:]] == [c[1:] for c in chat.calls]
        assert body["stop_reason"] == "tool_use" and body["usage"]["output_tokens"] == chat.usage["completion_tokens"]
    else:
        assert [i["type"] for i in body["output"]] == ["reasoning", "function_call", "function_call"]
        assert [(i["name"], i["arguments"]) for i in body["output"][1:]] == [c[1:] for c in chat.calls]
        assert body["status"] == "completed" and body["usage"]["output_tokens"] == chat.usage["completion_tokens"]


def test_a_request_each_format_does_not_accept_is_a_400_naming_its_field():
    with pytest.raises(RequestError, match="max_tokens: Field required"):
        chat_view(MESSAGES, {"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(RequestError, match="max_tokens"):
        chat_view(MESSAGES, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})
    with pytest.raises(RequestError, match="messages"):
        chat_view(MESSAGES, {"messages": [], "max_tokens": 5})
    with pytest.raises(RequestError, match="input") as err:
        chat_view(RESPONSES, {"model": "m"})
    assert err.value.param == "input" and err.value.status == 400
    with pytest.raises(RequestError, match="max_output_tokens"):
        chat_view(RESPONSES, {"input": "hi", "max_output_tokens": "x"})
    view = chat_view(RESPONSES, {"input": "hi", "stream": True})
    assert view["messages"] == [{"role": "user", "content": "hi"}] and view["stream_options"] == {
        "include_usage": True}  # both formats always stream usage


def test_each_endpoint_takes_the_key_in_its_own_header():
    profile = make_profile("p", {"api_key": "sk-1"})
    assert authorized(profile, MESSAGES, {"x-api-key": "sk-1"}) and not authorized(profile, MESSAGES, {
        "Authorization": "Bearer sk-1"})
    assert authorized(profile, RESPONSES, {"Authorization": "Bearer sk-1"}) and not authorized(profile, RESPONSES, {
        "x-api-key": "sk-1"})
    assert authorized(make_profile("open"), MESSAGES, {})


# --------------------------------------------------------------------- a request read back: the chat plan


def plan_view(plan: Plan) -> dict[str, Any]:
    """Everything a plan decides, ids aside (Messages spells them ``toolu_``)."""
    return {"tokens": [(t.kind, t.text, t.index, t.header) for t in plan.tokens],
            "chunks": [(c.kind, c.index, c.header, c.text, c.first_token, c.last_token) for c in plan.chunks],
            "finish": plan.finish_reason, "calls": [(c.index, c.name, c.arguments, c.broken) for c in plan.tool_calls],
            "ids": [c.id.removeprefix("toolu_").removeprefix("call_") for c in plan.tool_calls],
            "decision": plan.decision, "fault": plan.fault, "fault_after": plan.fault_after_chunks,
            "jitter": plan.jitter_ms, "prompt_tokens": plan.prompt_tokens, "gold": plan.gold, "agent": plan.agent,
            "form": plan.call_form, "reasoning_only": plan.reasoning_only, "script": plan.content_script,
            "request_hash": plan.request_hash, "include_usage": plan.include_usage}


def agent_history(sample: Any) -> list[dict[str, Any]]:
    """A later step of an agent task as the harness's agent loop sends it: the first recorded call made and its
    result, then an error turn."""
    result = sample.agent.tool_results[0]
    arguments = json.dumps(result.arguments or {}, ensure_ascii=False)  # as the simulator writes them
    call = {"id": "call_1", "type": "function", "function": {"name": result.name, "arguments": arguments}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "call_2"}]},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: try again"}]


KNOBS_READ_BACK = {"ttft_ms": 50, "ttft_jitter_ms": 10, "tokens_per_chunk": 2, "reasoning_tokens": 3,
                   "tool_call_rate": 0.6, "parallel_rate": 0.5, "flip_rate": 0.2, "bad_args_rate": 0.3,
                   "wrong_value_rate": 0.2, "truncate_rate": 0.1, "stream_error_rate": 0.1, "extra_steps_rate": 0.3,
                   "loop_rate": 0.2, "seed": 4}


@pytest.mark.parametrize("sample_file", [DEMO, AGENT_DEMO])
def test_a_request_read_back_gets_its_chat_requests_plan(sample_file):
    """For every shipped sample (and for the agent tasks a later step too), the Messages and Responses requests the
    harness sends are planned exactly as the chat request: the same decision key, decisions, calls, tokens,
    chunks (so the same schedule), fault, jitter, prompt tokens and agent step."""
    book = load_gold(sample_file)
    profile = make_profile("p", KNOBS_READ_BACK)
    bodies = []
    for sample in load_samples(str(sample_file)).samples:
        bodies.append((sample.sample_id, sample_chat(sample)))
        if sample.agent is not None and sample.agent.tool_results:
            chat = sample_chat(sample)
            bodies.append((f"{sample.sample_id}+2", {**chat, "messages": chat["messages"] + agent_history(sample)}))
    agent_steps = 0
    for sample_id, chat in bodies:
        for attempt in (1, 2):
            plans = {endpoint: plan_request(profile, CONVERT[endpoint](chat), Exchange("p", endpoint, None, 0.0),
                                            attempt, 1, book.entries, book.agents)
                     for endpoint in (CHAT, MESSAGES, RESPONSES)}
            assert plan_view(plans[MESSAGES]) == plan_view(plans[CHAT]), sample_id
            assert plan_view(plans[RESPONSES]) == plan_view(plans[CHAT]), sample_id
            agent_steps += plans[CHAT].agent is not None
    assert agent_steps >= 20 if sample_file == AGENT_DEMO else len(bodies) >= 30


# ---------------------------------------------------------------------------- quirks on these surfaces


def test_the_format_quirks_apply_only_to_their_surface():
    def shape(surface: str) -> ResponseShape:
        return ResponseShape(surface, None, True, True, True, True)  # type: ignore[arg-type]

    new = ["overloaded_error", "bad_input_json", "no_message_stop", "no_response_completed"]
    assert applicable(new, shape("stream")) == applicable(new, shape("non-stream")) == ()
    assert applicable(new, shape("messages stream")) == ("overloaded_error", "bad_input_json", "no_message_stop")
    assert applicable(new, shape("responses stream")) == ("overloaded_error", "bad_input_json",
                                                          "no_response_completed")
    assert applicable(new, shape("messages non-stream")) == ()
    chat_only = ["usage_in_last_content_chunk", "repeat_tool_header", "require_reasoning_content"]
    assert applicable(chat_only, shape("messages stream")) == applicable(chat_only, shape("responses stream")) == ()
    shared = ["comments", "crlf", "duplicate_done", "huge_args", "no_finish_reason", "tool_calls_under_stop"]
    assert applicable(shared, shape("messages stream")) == tuple(shared)
    assert applicable(shared, shape("responses stream")) == ("comments", "crlf", "duplicate_done", "huge_args")
    assert applicable(shared, shape("responses non-stream")) == ("huge_args",)


@pytest.mark.parametrize("endpoint", FORMATS)
def test_overloaded_error_ends_the_stream_halfway(endpoint):
    knobs = {**FAST, "output_tokens": 10, "quirks": ["overloaded_error", "comments"]}
    out = write(endpoint, knobs, question(tools=False))
    mine = read(endpoint, out.events())
    assert out.plan.quirks == ("overloaded_error", "comments") and len(out.tokens) == 5 and mine.finish is None
    assert (out.sent_finish, out.sent_usage) == (None, False) and not mine.ended
    last_name, last = out.events()[-1]
    if endpoint == MESSAGES:
        assert last_name == "error" and last["error"]["type"] == "overloaded_error"
        assert not any(n == "message_delta" for n, _ in out.events())
    else:
        assert last_name == "response.failed" and last["response"]["status"] == "failed"
        assert last["response"]["error"]["code"] == "server_is_overloaded"
    assert write(CHAT, knobs, question(tools=False)).plan.quirks == ("comments",)  # not on chat


@pytest.mark.parametrize("endpoint", FORMATS)
def test_bad_input_json_sends_argument_pieces_that_do_not_join_into_json(endpoint):
    knobs = {**CALLS, "quirks": ["bad_input_json"]}
    chat, out = read(CHAT, write(CHAT, knobs, question(2)).events()), write(endpoint, knobs, question(2))
    mine = read(endpoint, out.events())
    with pytest.raises(ValueError):
        json.loads(mine.calls[0][2])
    assert mine.calls[1][2] == chat.calls[1][2] and json.loads(mine.calls[1][2])  # one block only
    sent = sent_tool_calls(out.plan, len(out.plan.chunks))
    assert [c["arguments"] for c in sent] == [c[2] for c in mine.calls]  # the truth log has the text as sent
    if endpoint == RESPONSES:
        done = [d["arguments"] for n, d in out.events() if n == "response.function_call_arguments.done"]
        assert done == [c[2] for c in mine.calls]
    assert out.plan.completion_tokens == write(CHAT, CALLS, question(2)).plan.completion_tokens


def test_no_message_stop_and_no_response_completed():
    messages = write(MESSAGES, {**FAST, "quirks": ["no_message_stop"]}, question(tools=False))
    answer = read(MESSAGES, messages.events())
    assert answer.finish == "stop" and not answer.ended and messages.events()[-1][0] == "message_delta"
    assert messages.sent_finish == "stop"
    responses = write(RESPONSES, {**FAST, "quirks": ["no_response_completed"]}, question(tools=False))
    answer = read(RESPONSES, responses.events())
    assert answer.finish is None and answer.usage is None and not answer.ended
    assert responses.events()[-1][0] == "response.output_item.done" and responses.sent_finish is None
    assert write(MESSAGES, {**FAST, "quirks": ["no_response_completed"]}, question(tools=False)).plan.quirks == ()


def test_chat_quirks_on_messages_and_responses_streams():
    knobs = {**FAST, "tool_call_rate": 0.0, "quirks": ["comments", "duplicate_done", "crlf", "no_finish_reason"]}
    messages = write(MESSAGES, knobs, question(tools=False))
    assert messages.plan.quirks == ("comments", "duplicate_done", "crlf", "no_finish_reason")
    assert b"\r\n\r\n" in messages.data and b"\n\n" not in messages.data.replace(b"\r\n", b"")
    assert messages.data.count(b": keep-alive") == 7  # before each of the 6 token events and the end
    assert [n for n, _ in messages.events()].count("message_stop") == 2
    assert read(MESSAGES, messages.events()).finish is None and messages.sent_finish is None
    responses = write(RESPONSES, knobs, question(tools=False))
    assert responses.plan.quirks == ("comments", "duplicate_done", "crlf")  # a status always has a finish
    assert [n for n, _ in responses.events()].count("response.completed") == 2
    interleaved = write(RESPONSES, {**CALLS, "quirks": ["interleave_parallel"]}, question(1))
    added = [d["output_index"] for n, d in interleaved.events() if n == "response.output_item.added"]
    deltas = [d["output_index"] for n, d in interleaved.events() if n == "response.function_call_arguments.delta"]
    assert added == [0, 1] and deltas[:4] == [0, 1, 0, 1]
    assert [json.loads(c[2]) for c in read(RESPONSES, interleaved.events()).calls]
    utf8 = write(MESSAGES, {**FAST, "tool_call_rate": 0.0, "quirks": ["invalid_utf8"]}, question(tools=False))
    (bad,) = [t for t in utf8.tokens if b"\xff\xfe" in t]
    assert b'"text_delta","text":"' in bad


# ------------------------------------------------------------------------------------ over HTTP (process)

SIM_PROFILES = {
    "same": {"ttft_ms": 80, "tokens_per_s": 200, "output_tokens": 20, "reasoning_tokens": 4, "tool_call_rate": 0.5,
             "parallel_rate": 0.5},
    "secured": {**FAST, "api_key": "sk-f"},
    "errors": {**FAST, "error_rate": 1.0, "error_status": 503},
    "limited": {**FAST, "rate_limit_rate": 1.0, "retry_after_s": 2},
    "serr": {**FAST, "tool_call_rate": 0.0, "stream_error_rate": 1.0},
    "busy": {"ttft_ms": 400, "tokens_per_s": 1000, "output_tokens": 3, "max_concurrency": 1,
             "messages_over_limit": "529"},
}
PATH = {CHAT: "chat/completions", MESSAGES: "messages", RESPONSES: "responses"}


def post(sim, profile: str, endpoint: str, chat: dict[str, Any], tag: str | None = None,
         headers: dict[str, str] | None = None) -> requests.Response:
    sent = {**(headers or {}), **({"X-AVV-Item": tag} if tag else {})}
    return requests.post(f"{sim.base_url(profile)}/{PATH[endpoint]}", json=CONVERT[endpoint](chat), headers=sent,
                         timeout=10)


@pytest.mark.integration  # the simulator as a process
def test_the_three_endpoints_answer_a_sample_alike(sim):
    samples = load_samples(str(DEMO)).samples[:6]
    kinds = set()
    for sample in samples:
        answers, truth = {}, {}
        for endpoint in (CHAT, MESSAGES, RESPONSES):
            tag = f"run/m/{endpoint}/{sample.sample_id}/1/1"
            resp = post(sim, "same", endpoint, sample_chat(sample), tag)
            assert resp.status_code == 200 and resp.headers["Content-Type"] == "text/event-stream"
            answers[endpoint] = read(endpoint, sse(resp.content))
            truth[endpoint] = tag
        lines = truth_by_tag(sim.truth_log)
        records = {endpoint: lines[tag] for endpoint, tag in truth.items()}
        chat = answers[CHAT]
        kinds.add("calls" if chat.calls else "content")
        for endpoint in FORMATS:
            mine, rec = answers[endpoint], records[endpoint]
            assert (mine.content, mine.reasoning, mine.finish) == (chat.content, chat.reasoning, chat.finish)
            assert [c[1:] for c in mine.calls] == [c[1:] for c in chat.calls], sample.sample_id
            assert {k: mine.usage[k] for k in ("prompt_tokens", "completion_tokens")} == {
                k: chat.usage[k] for k in ("prompt_tokens", "completion_tokens")}
            assert rec["endpoint"] == endpoint and records[CHAT]["endpoint"] == CHAT
            same = ("decision_key", "has_tools", "reference_decision", "decision", "flipped", "self_flipped", "fault",
                    "finish_reason", "completion_tokens", "content_tokens", "reasoning_tokens", "prompt_tokens",
                    "call_form", "quirks", "usage_sent", "http_status")
            assert {k: rec[k] for k in same} == {k: records[CHAT][k] for k in same}, sample.sample_id
            assert [(c["name"], c["arguments"]) for c in rec["tool_calls"]] == [
                (c["name"], c["arguments"]) for c in records[CHAT]["tool_calls"]]
            # Each endpoint keeps the configured TTFT (80 ms): never early, late only by the event loop's lag, which
            # a loaded CI machine stretches to several milliseconds (so no cross-endpoint 5 ms bound).
            ttft = {e: (r["t_first_token"] - r["t_arrival"]) * 1000 for e, r in (("c", records[CHAT]), ("x", rec))}
            assert all(80 - 0.5 <= ms < 80 + 40 for ms in ttft.values()), ttft
            decode = {e: r["t_last_byte"] - r["t_first_token"] for e, r in (("c", records[CHAT]), ("x", rec))}
            assert abs(decode["x"] - decode["c"]) <= 0.03 * decode["c"] + 0.010, decode
    assert kinds == {"calls", "content"}


@pytest.mark.integration  # the simulator as a process
def test_errors_come_in_each_apis_shape(sim):
    chat = question(tools=False)
    missing = requests.post(f"{sim.base_url('same')}/messages", json={"messages": [{"role": "user", "content": "x"}]},
                            timeout=10)
    assert missing.status_code == 400 and missing.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "max_tokens: Field required"}}
    bad = requests.post(f"{sim.base_url('same')}/messages", data=b"not json", timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert post(sim, "secured", MESSAGES, chat, headers={"Authorization": "Bearer sk-f"}).json()["error"]["type"] \
        == "authentication_error"
    assert post(sim, "secured", MESSAGES, chat, headers={"x-api-key": "sk-f"}).status_code == 200
    denied = post(sim, "secured", RESPONSES, chat, headers={"x-api-key": "sk-f"})
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
    assert post(sim, "secured", RESPONSES, chat, headers={"Authorization": "Bearer sk-f"}).status_code == 200
    for endpoint in FORMATS:
        failed, limited = post(sim, "errors", endpoint, chat), post(sim, "limited", endpoint, chat)
        assert failed.status_code == 503 and limited.status_code == 429 and limited.headers["Retry-After"] == "2"
        if endpoint == MESSAGES:
            assert failed.json()["error"]["type"] == "api_error" and limited.json()["error"]["type"] == \
                "rate_limit_error"
        else:
            assert failed.json()["error"]["type"] == "server_error" and limited.json()["error"]["code"] == \
                "rate_limit_exceeded"
        stream = read(endpoint, sse(post(sim, "serr", endpoint, chat).content))
        assert stream.error is not None and stream.finish is None and not stream.ended
    unknown = requests.post(f"{sim.url}/nosuch/v1/messages", json=to_messages(chat), timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


@pytest.mark.integration  # the simulator as a process
def test_messages_over_limit_529_answers_with_anthropics_overload(sim):
    first: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: first.update(r=post(sim, "busy", MESSAGES, question(1), "busy-1")))
    thread.start()
    time.sleep(0.15)
    over = post(sim, "busy", MESSAGES, question(2), "busy-2")
    also = post(sim, "busy", RESPONSES, question(3), "busy-3")
    thread.join(timeout=10)
    assert first["r"].status_code == 200
    assert over.status_code == 529 and over.json()["error"]["type"] == "overloaded_error"
    assert also.status_code == 429 and also.json()["error"]["code"] == "rate_limit_exceeded"
    truth = truth_by_tag(sim.truth_log)
    assert (truth["busy-2"]["fault"], truth["busy-3"]["fault"]) == ("over_limit_529", "over_limit_429")
