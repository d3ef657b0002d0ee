"""A non-streamed attempt (a sample marked ``_stream: false``, the conformance suite's stream-parity probes): the
request says ``stream: false`` and its JSON body is read whole as the events the format would have streamed, by the
format's own reader, on both wire clients (the scripted wire server: real HTTP over loopback). What cannot be read is
classified as a stream's would be."""

from __future__ import annotations

import json

import pytest

from avv_core.samples import Sample
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.execute import attempt_record, build_body
from avv_harness.wire.formats import FORMATS
from avv_harness.wire.outcome import finish, non_sse_body
from avv_harness.wire.stream import stream_chat
from tests.wire_clients import client_session
from tests.wire_server import ScriptServer, headers, sse

pytestmark = pytest.mark.usefixtures("wire_client")

CALLS = [{"id": "call_a", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
         {"id": "call_b", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}}]
CHAT_BODY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
             "choices": [{"index": 0, "finish_reason": "tool_calls",
                          "message": {"role": "assistant", "content": "calling", "reasoning_content": "hmm",
                                      "tool_calls": CALLS}}],
             "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}}
USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens")


class Dialect:
    template = None
    tool_parser = None


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


def whole(server: ScriptServer, name: str, payload: bytes, endpoint: str = "chat",
          content_type: str = "application/json") -> dict:
    server.scripts[f"/{name}"] = [headers(content_type=content_type) + payload]
    wire = FORMATS[endpoint]
    with client_session() as session:
        att = stream_chat(session, server.url(name) + "/chat/completions", b"{}", {}, 2.0, 2.0,
                          reader=wire.whole_reader(Dialect()))
    return attempt_record(att, True, None)


def test_a_chat_completion_body_is_read_as_its_one_chunk(server: ScriptServer) -> None:
    rec = whole(server, "chat", json.dumps(CHAT_BODY).encode())
    assert (rec["status"], rec["finish_reason"], rec["content"], rec["reasoning"]) == (
        "success", "tool_calls", "calling", "hmm")
    assert json.loads(rec["tool_calls"]) == [
        {"id": "call_a", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
        {"id": "call_b", "name": "search", "arguments": "{\"q\": \"x\"}"}]  # no index: in order
    assert tuple(rec[c] for c in USAGE_COLUMNS) == (20, 7, 27)
    assert rec["anomalies"] is None and rec["tps"] is None  # whole: no no_done, no buffered stream, no decode phase


def test_what_cannot_be_read_is_classified(server: ScriptServer) -> None:
    rec = whole(server, "error", json.dumps({"error": {"message": "model overloaded"}}).encode())
    assert (rec["status"], rec["error_kind"]) == ("failed", "stream_error") and "overloaded" in rec["error_detail"]
    rec = whole(server, "text", b"<html>not json</html>", content_type="text/html")
    assert (rec["error_kind"], rec["http_status"]) == ("bad_sse", 200) and "not JSON" in rec["error_detail"]
    rec = whole(server, "list", b"[1, 2]")
    assert rec["error_kind"] == "bad_sse" and "a list, not an object" in rec["error_detail"]
    rec = whole(server, "no_finish", json.dumps({**CHAT_BODY, "choices": [{"index": 0, "message": {
        "content": "hi"}}]}).encode())
    assert (rec["error_kind"], rec["content"]) == ("truncated", "hi")


def test_a_vendor_that_streams_anyway_is_read_as_a_stream(server: ScriptServer) -> None:
    stream = sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}) + b"data: [DONE]\n\n"
    rec = whole(server, "streams", stream, content_type="text/event-stream")
    assert (rec["status"], rec["content"], rec["finish_reason"]) == ("success", "ok", "stop")


def test_a_body_larger_than_the_event_limit_is_refused() -> None:
    att = Attempt(http_status=200, t_headers=0.0)
    reader = FORMATS["chat"].whole_reader(Dialect())
    non_sse_body(att, json.dumps(CHAT_BODY).encode(), "application/json", reader, 100)
    assert att.error_kind == "bad_sse" and "larger than 100 bytes" in att.error_detail


def test_messages_and_responses_bodies() -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
               "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                           {"type": "text", "text": "calling"},
                           {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                           {"type": "tool_use", "id": "toolu_2", "name": "search", "input": "{\"q\": "}],
               "usage": {"input_tokens": 20, "output_tokens": 7}}
    response = {"id": "resp_1", "object": "response", "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]},
                           {"type": "message", "id": "m_1", "role": "assistant",
                            "content": [{"type": "output_text", "text": "calling"}]},
                           {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
                            "arguments": "{\"city\": \"Paris\"}"}],
                "usage": {"input_tokens": 20, "output_tokens": 7, "total_tokens": 27}}
    out = {}
    for endpoint, body in (("messages", message), ("responses", response)):
        att = Attempt(http_status=200, t_headers=0.0)
        reader = FORMATS[endpoint].whole_reader(Dialect())
        non_sse_body(att, json.dumps(body).encode(), "application/json", reader, 1 << 20)
        out[endpoint] = attempt_record(finish(att, reader), True, None)
    rec = out["messages"]
    assert (rec["finish_reason"], rec["stop_reason"], rec["content"], rec["reasoning"]) == (
        "tool_calls", "tool_use", "calling", "hmm")
    assert [(c["id"], c["arguments"]) for c in json.loads(rec["tool_calls"])] == [
        ("toolu_1", "{\"city\": \"Paris\"}"), ("toolu_2", "{\"q\": ")]  # an input that is no object: its text
    assert (rec["prompt_tokens"], rec["completion_tokens"]) == (20, 7)
    rec = out["responses"]
    assert (rec["finish_reason"], rec["stop_reason"], rec["content"], rec["reasoning"]) == (
        "length", "incomplete:max_output_tokens", "calling", "hmm")
    assert [(c["id"], c["name"]) for c in json.loads(rec["tool_calls"])] == [("call_1", "get_weather")]
    assert rec["anomalies"] is None or "no_done" not in rec["anomalies"]


def test_a_sample_marked_not_streamed_is_sent_without_streaming() -> None:
    from avv_harness.inputs.config import Vendor

    vendor = Vendor(model="m", name="v", model_id="m", url="http://127.0.0.1:1/v1")
    streamed = Sample("1", 1, {"messages": [{"role": "user", "content": "hi"}]})
    not_streamed = Sample("2", 2, streamed.body, {"_stream": False})
    assert build_body(streamed, vendor)["stream"] is True and "stream_options" in build_body(streamed, vendor)
    body = build_body(not_streamed, vendor)
    assert body["stream"] is False and "stream_options" not in body
    for endpoint in ("messages", "responses"):
        assert FORMATS[endpoint].body(body, Dialect())["stream"] is False
        assert FORMATS[endpoint].body(build_body(streamed, vendor), Dialect())["stream"] is True
