"""Wire-format quirks for fault-injection tests: the raw bytes are checked, not a parser's view; the quirk table
(avv_sim/quirks.py) as plain data: where each quirk applies, its hooks."""

from __future__ import annotations

import importlib
import inspect
import json
import time

import pytest
import requests
import sseclient

import avv_sim
from avv_sim.profiles import KNOBS
from avv_sim.quirks import (
    BODY_QUIRKS,
    BY_NAME,
    HUGE_ARG_CHARS,
    NEEDS,
    QUIRK_TABLE,
    QUIRKS,
    STREAM_ONLY_QUIRKS,
    Quirk,
    ResponseShape,
    active,
    applicable,
    check_table,
    huge_arguments,
    interleave,
)
from avv_sim.tokens import Token
from tests.builders import chat_body
from tests.sim_records import truth_of

FAST = {"ttft_ms": 5, "tokens_per_s": 5000, "output_tokens": 6}
TOOLY = {**FAST, "tool_call_rate": 1.0, "parallel_rate": 0.0}
SIM_PROFILES = {
    "no_finish_reason": {**FAST, "quirks": ["no_finish_reason"]},
    "tool_calls_under_stop": {**TOOLY, "quirks": ["tool_calls_under_stop"]},
    "usage_in_last_content_chunk": {**FAST, "quirks": ["usage_in_last_content_chunk"]},
    "repeat_tool_header": {**TOOLY, "quirks": ["repeat_tool_header"]},
    "interleave_parallel": {**TOOLY, "parallel_rate": 1.0, "quirks": ["interleave_parallel"]},
    "crlf": {**FAST, "quirks": ["crlf"]},
    "multiline_data": {**FAST, "quirks": ["multiline_data"]},
    "comments": {**FAST, "quirks": ["comments"]},
    "duplicate_done": {**FAST, "quirks": ["duplicate_done"]},
    "garbage_line": {**FAST, "quirks": ["garbage_line"]},
    "json_body": {**FAST, "quirks": ["json_body"]},
    "html_body": {**FAST, "quirks": ["html_body"]},
    "empty_body": {**FAST, "quirks": ["empty_body"]},
    "invalid_utf8": {**FAST, "tool_call_rate": 0.0, "quirks": ["invalid_utf8"]},
    "huge_args": {**TOOLY, "quirks": ["huge_args"]},
    "half": {**FAST, "quirks": ["duplicate_done"], "quirk_rate": 0.5},
    "header_delay": {**FAST, "header_delay_ms": 150},
    "stall": {"ttft_ms": 10, "tokens_per_s": 1000, "output_tokens": 6, "stall_after_tokens": 3, "stall_ms": 200},
    "no_retry_after": {**FAST, "rate_limit_rate": 1.0, "retry_after_s": None},
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
        },
    },
]


def body(i: int = 0, tools: bool = True, stream: bool = True) -> dict:
    return chat_body(f"quirk {i}", TOOLS if tools else None, stream=stream, include_usage=stream)


def raw(sim, profile: str, b: dict | None = None, tag: str | None = None) -> tuple[requests.Response, bytes]:
    headers = {"X-AVV-Item": tag} if tag else {}
    resp = requests.post(
        f"{sim.base_url(profile)}/chat/completions", json=b or body(), stream=True, timeout=10, headers=headers
    )
    return resp, resp.raw.read()


def data_payloads(data: bytes) -> list[bytes]:
    """`data:` payloads of a well-formed LF-framed stream."""
    events = data.split(b"\n\n")
    assert events[-1] == b""
    return [e[len(b"data: ") :] for e in events[:-1]]


def chunks_of(data: bytes) -> list[dict]:
    return [json.loads(p) for p in data_payloads(data) if p != b"[DONE]"]


def tool_deltas(chunks: list[dict]) -> list[dict]:
    return [tc for c in chunks if c.get("choices") for tc in c["choices"][0]["delta"].get("tool_calls") or []]


@pytest.mark.integration  # the simulator as a process
def test_no_finish_reason(sim) -> None:
    _, data = raw(sim, "no_finish_reason", tag="q-nfr")
    chunks = chunks_of(data)
    assert data.endswith(b"data: [DONE]\n\n")
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks if c["choices"])
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    rec = truth_of(sim.truth_log, "q-nfr")
    assert rec["quirks"] == ["no_finish_reason"] and rec["finish_reason"] is None


@pytest.mark.integration  # the simulator as a process
def test_tool_calls_under_stop(sim) -> None:
    _, data = raw(sim, "tool_calls_under_stop")
    chunks = chunks_of(data)
    assert tool_deltas(chunks)
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert reasons == ["stop"]


@pytest.mark.integration  # the simulator as a process
def test_usage_in_last_content_chunk(sim) -> None:
    _, data = raw(sim, "usage_in_last_content_chunk", body(tools=False))
    chunks = chunks_of(data)
    assert not any(c["choices"] == [] for c in chunks)  # no separate usage chunk
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop" and last["usage"]["completion_tokens"] == 6
    assert sum("usage" in c for c in chunks) == 1


@pytest.mark.integration  # the simulator as a process
def test_repeat_tool_header(sim) -> None:
    _, data = raw(sim, "repeat_tool_header")
    deltas = tool_deltas(chunks_of(data))
    assert len(deltas) > 3
    assert len({(d["id"], d["type"], d["function"]["name"]) for d in deltas}) == 1
    args = "".join(d["function"]["arguments"] for d in deltas)
    assert "city" in json.loads(args)  # fragments are still incremental, not repeated


@pytest.mark.integration  # the simulator as a process
def test_interleave_parallel(sim) -> None:
    _, data = raw(sim, "interleave_parallel")
    deltas = tool_deltas(chunks_of(data))
    order = [d["index"] for d in deltas]
    assert order[:4] == [0, 1, 0, 1]
    assert "id" in deltas[0] and "id" in deltas[1] and "id" not in deltas[2]
    for idx in (0, 1):
        json.loads("".join(d["function"]["arguments"] for d in deltas if d["index"] == idx))


@pytest.mark.integration  # the simulator as a process
def test_crlf(sim) -> None:
    _, data = raw(sim, "crlf")
    assert data.count(b"\r\n\r\n") >= 8 and data.endswith(b"data: [DONE]\r\n\r\n")
    assert data.replace(b"\r\n", b"").count(b"\n") == 0  # no bare LF anywhere


@pytest.mark.integration  # the simulator as a process
def test_multiline_data(sim) -> None:
    resp, data = raw(sim, "multiline_data")
    events = data.split(b"\n\n")[:-1]
    json_events = [e for e in events if e != b"data: [DONE]"]
    assert all(e.startswith(b"data: {\ndata: ") for e in json_events)
    # a spec-conforming SSE parser joins the two lines with "\n", which is still valid JSON
    parsed = [json.loads(ev.data) for ev in sseclient.SSEClient(iter([data])).events() if ev.data != "[DONE]"]
    assert len(parsed) == len(json_events) and parsed[0]["choices"][0]["delta"]["role"] == "assistant"


@pytest.mark.integration  # the simulator as a process
def test_comments(sim) -> None:
    _, data = raw(sim, "comments")
    events = data.split(b"\n\n")[:-1]
    comments = [e for e in events if e.startswith(b":")]
    assert comments and all(e == b": keep-alive" for e in comments)
    assert len(comments) >= 6  # one before every token event and before the finish chunk


@pytest.mark.integration  # the simulator as a process
def test_duplicate_done(sim) -> None:
    _, data = raw(sim, "duplicate_done")
    assert data.endswith(b"data: [DONE]\n\ndata: [DONE]\n\n") and data.count(b"[DONE]") == 2


@pytest.mark.integration  # the simulator as a process
def test_garbage_line(sim) -> None:
    _, data = raw(sim, "garbage_line")
    payloads = data_payloads(data)
    assert payloads.count(b"{not json") == 1
    i = payloads.index(b"{not json")
    assert 0 < i < len(payloads) - 1 and payloads[-1] == b"[DONE]"


@pytest.mark.integration  # the simulator as a process
def test_json_body(sim) -> None:
    resp, data = raw(sim, "json_body", tag="q-json")
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("application/json")
    obj = json.loads(data)
    assert obj["object"] == "chat.completion" and obj["choices"][0]["message"]["role"] == "assistant"
    assert truth_of(sim.truth_log, "q-json")["quirks"] == ["json_body"]


@pytest.mark.integration  # the simulator as a process
def test_html_body(sim) -> None:
    resp, data = raw(sim, "html_body")
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/html")
    assert data.startswith(b"<!DOCTYPE html>") and b"data:" not in data


@pytest.mark.integration  # the simulator as a process
def test_empty_body(sim) -> None:
    resp, data = raw(sim, "empty_body")
    assert resp.status_code == 200 and data == b""


@pytest.mark.integration  # the simulator as a process
def test_invalid_utf8(sim) -> None:
    _, data = raw(sim, "invalid_utf8")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    (bad,) = [e for e in data.split(b"\n\n") if b"\xff\xfe" in e]
    assert b'"delta":{"content":"' in bad and b'\xff\xfe"}' in bad


@pytest.mark.integration  # the simulator as a process
def test_huge_args(sim) -> None:
    _, data = raw(sim, "huge_args", tag="q-huge")
    deltas = tool_deltas(chunks_of(data))
    args = json.loads("".join(d["function"]["arguments"] for d in deltas))
    assert max(len(v) for v in args.values() if isinstance(v, str)) >= 1_000_000
    rec = truth_of(sim.truth_log, "q-huge")
    assert rec["quirks"] == ["huge_args"] and len(rec["tool_calls"][0]["arguments"]) > 1_000_000


@pytest.mark.integration  # the simulator as a process
def test_quirk_rate_applies_to_a_fraction(sim) -> None:
    tags = [f"q-half-{i}" for i in range(40)]
    dupes = sum(raw(sim, "half", body(i), tag=t)[1].count(b"[DONE]") == 2 for i, t in enumerate(tags))
    assert 10 <= dupes <= 30
    assert sum(truth_of(sim.truth_log, t)["quirks"] == ["duplicate_done"] for t in tags) == dupes


@pytest.mark.integration  # the simulator as a process
def test_header_delay(sim) -> None:
    t0 = time.monotonic()
    resp = requests.post(f"{sim.base_url('header_delay')}/chat/completions", json=body(), stream=True, timeout=10)
    headers_ms = (time.monotonic() - t0) * 1000
    assert resp.status_code == 200 and 150 <= headers_ms < 400
    assert resp.raw.read().endswith(b"data: [DONE]\n\n")


@pytest.mark.integration  # the simulator as a process
def test_stall_mid_stream(sim) -> None:
    resp = requests.post(f"{sim.base_url('stall')}/chat/completions", json=body(tools=False), stream=True, timeout=10)
    times = []
    for part in resp.iter_content(chunk_size=None):
        if b'"content":"' in part and b'"role"' not in part:
            times.append(time.monotonic())
    assert len(times) == 6
    gaps = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    assert 195 <= gaps[2] <= 260, gaps  # stalled after exactly 3 tokens
    assert all(g < 50 for i, g in enumerate(gaps) if i != 2), gaps


@pytest.mark.integration  # the simulator as a process
def test_rate_limit_without_retry_after(sim) -> None:
    resp = requests.post(f"{sim.base_url('no_retry_after')}/chat/completions", json=body(), timeout=10)
    assert resp.status_code == 429 and "Retry-After" not in resp.headers


# ------------------------------------------------------------------------ the quirk table (plain data, no server)


#: The quirks of the first table, whose applicability the tests below pin (later quirks bring their own tests).
FIRST_QUIRKS = ("no_finish_reason", "tool_calls_under_stop", "usage_in_last_content_chunk", "repeat_tool_header",
                "interleave_parallel", "crlf", "multiline_data", "comments", "duplicate_done", "garbage_line",
                "json_body", "html_body", "empty_body", "invalid_utf8", "huge_args", "require_reasoning_content",
                "broken_template")


def shape(surface: str = "stream", fault: str | None = None, tool_calls: bool = True, parallel: bool = True,
          content: bool = False, usage: bool = True) -> ResponseShape:
    return ResponseShape(surface, fault, tool_calls, parallel, content, usage)  # type: ignore[arg-type]


def test_the_table_declares_every_quirk_once_and_the_names_derive_from_it() -> None:
    assert QUIRKS == tuple(q.name for q in QUIRK_TABLE) and len(set(QUIRKS)) == len(QUIRKS)
    assert avv_sim.QUIRKS == QUIRKS and KNOBS["quirks"].choices == QUIRKS  # the knob's values are the table's
    assert QUIRKS[:len(FIRST_QUIRKS)] == FIRST_QUIRKS
    assert STREAM_ONLY_QUIRKS & set(FIRST_QUIRKS) == {
        "usage_in_last_content_chunk", "repeat_tool_header", "interleave_parallel", "crlf", "multiline_data",
        "comments", "duplicate_done", "garbage_line", "json_body", "invalid_utf8"}
    assert BODY_QUIRKS[:3] == ("json_body", "html_body", "empty_body")
    for q in QUIRK_TABLE:
        assert q.doc and q.surfaces and (q.needs is None or q.needs in NEEDS), q.name
    with pytest.raises(ValueError, match="no effect"):
        check_table([Quirk("idle", "does nothing", frozenset({"stream"}))], NEEDS)
    with pytest.raises(ValueError, match="declared twice"):
        check_table([QUIRK_TABLE[0], QUIRK_TABLE[0]], NEEDS)


def test_an_effect_named_by_applied_by_names_its_quirk() -> None:
    for q in QUIRK_TABLE:
        if q.applied_by is None:
            continue
        module, _, name = q.applied_by.rpartition(".")
        target = getattr(importlib.import_module(module), name)
        assert q.name in inspect.getsource(target), q.name


def test_where_each_quirk_applies() -> None:
    every = list(FIRST_QUIRKS)
    no_body = [q for q in FIRST_QUIRKS if q not in BODY_QUIRKS]
    assert applicable(every, shape()) == ("no_finish_reason", "tool_calls_under_stop", "json_body", "huge_args")
    assert applicable(["html_body", "json_body", "comments"], shape()) == ("html_body",)
    assert applicable(no_body, shape()) == tuple(q for q in no_body if q not in (
        "invalid_utf8", "require_reasoning_content"))
    assert applicable(no_body, shape(tool_calls=False, parallel=False, content=True, usage=False)) == (
        "no_finish_reason", "crlf", "multiline_data", "comments", "duplicate_done", "garbage_line", "invalid_utf8")
    assert applicable(no_body, shape(parallel=False)) == tuple(q for q in no_body if q not in (
        "interleave_parallel", "invalid_utf8", "require_reasoning_content"))
    assert applicable(every, shape("non-stream", usage=False)) == ("html_body",)  # the first body quirk there
    assert applicable(no_body, shape("non-stream")) == ("no_finish_reason", "tool_calls_under_stop", "huge_args",
                                                       "broken_template")
    for fault in ("error_status", "rate_limit"):
        assert applicable(every, shape(fault=fault)) == ()
    assert applicable(every, shape("non-stream", fault="truncate")) == ()
    assert "json_body" not in applicable(every, shape(fault="stream_error"))
    assert applicable(every, shape("completions")) == ()
    assert applicable(["comments", "crlf", "comments"], shape()) == ("comments", "crlf")  # profile order, once


class FakeWriter:
    def comment(self) -> bytes:
        return b"C"

    def garbage(self) -> bytes:
        return b"G"

    def finish_event(self, with_usage: bool) -> bytes | None:
        return b"F+U" if with_usage else b"F"


def test_hooks_reshape_the_stream_in_table_order() -> None:
    tail = [("finish", b"F"), ("usage", b"U"), ("done", b"D")]
    for name in ("usage_in_last_content_chunk", "comments", "duplicate_done"):
        hook = BY_NAME[name].tail
        assert hook is not None
        tail = hook(tail, FakeWriter())
    assert b"".join(p for _, p in tail) == b"CF+UDD"
    error_tail = [("error", b"E"), ("done", b"D")]
    assert BY_NAME["comments"].tail(error_tail, FakeWriter()) == error_tail  # type: ignore[misc]
    before = [q.before_token for q in active(["garbage_line", "comments"]) if q.before_token]
    assert [b"".join(h(j, 4, FakeWriter()) for h in before) for j in range(4)] == [b"C", b"C", b"CG", b"C"]
    assert [q.name for q in active(["garbage_line", "comments"])] == ["comments", "garbage_line"]
    finishers = [q.finish_reason for q in active(["tool_calls_under_stop"]) if q.finish_reason]
    assert [f("tool_calls") for f in finishers] == ["stop"] and [f("length") for f in finishers] == ["length"]


def test_interleave_and_huge_arguments() -> None:
    tokens = [Token("tool", "", 0, True), Token("tool", "a", 0), Token("tool", "b", 0), Token("tool", "", 1, True),
              Token("tool", "c", 1)]
    assert [(t.index, t.text) for t in interleave(tokens)] == [(0, ""), (1, ""), (0, "a"), (1, "c"), (0, "b")]
    assert huge_arguments(1, {"a": "x"}) == {"a": "x"}
    assert len(huge_arguments(0, {"n": 1, "a": "x"})["a"]) == HUGE_ARG_CHARS
    assert set(huge_arguments(0, {"n": 1})) == {"n", "padding"}
