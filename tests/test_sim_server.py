"""The simulator over HTTP, checked with a plain client (requests + sseclient-py)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import requests
import sseclient

from avv_sim import request_hash
from tests.builders import chat_body as build_chat_body
from tests.sim_records import truth_lines, truth_of

pytestmark = pytest.mark.integration  # the simulator as a process (the `sim` fixture)

FAST = {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 12}
SIM_PROFILES = {
    "fast": {**FAST, "tool_call_rate": 0.6},
    "always": {**FAST, "tool_call_rate": 1.0, "parallel_rate": 0.0},
    "parallel": {**FAST, "tool_call_rate": 1.0, "parallel_rate": 1.0},
    "never": {**FAST, "tool_call_rate": 0.0, "model": "never-model-v1"},
    "secured": {**FAST, "api_key": "sk-test-123"},
    "reasoner": {**FAST, "tool_call_rate": 1.0, "parallel_rate": 0.0, "reasoning_tokens": 5},
    "chunky": {**FAST, "tool_call_rate": 0.0, "tokens_per_chunk": 5},
    "errors": {**FAST, "error_rate": 1.0, "error_status": 503},
    "ratelimited": {**FAST, "rate_limit_rate": 1.0, "retry_after_s": 2},
    "trunc": {**FAST, "tool_call_rate": 0.0, "truncate_rate": 1.0},
    "serr": {**FAST, "tool_call_rate": 0.0, "stream_error_rate": 1.0},
    "nousage": {**FAST, "omit_usage": True},
    "selfnoisy": {**FAST, "tool_call_rate": 0.5, "self_flip_rate": 0.5, "seed": 3},
    # statistics: a reference and a noisy vendor, answering as fast as possible
    "stat_ref": {"ttft_ms": 0, "tokens_per_s": 1e6, "output_tokens": 2, "tool_call_rate": 0.6},
    "stat_noisy": {
        "ttft_ms": 0,
        "tokens_per_s": 1e6,
        "output_tokens": 2,
        "tool_call_rate": 0.6,
        "flip_rate": 0.2,
        "bad_args_rate": 0.3,
        "error_rate": 0.1,
        "seed": 7,
    },
}

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["city", "unit"],
}
SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filters": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "since": {"type": "string", "format": "date"},
            },
            "required": ["tags"],
        },
    },
    "required": ["query", "filters"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "search", "parameters": SEARCH}},
]
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}


def chat_body(i: int = 0, tools: bool = True, stream: bool = True, **extra) -> dict:
    return build_chat_body(f"sample {i}", TOOLS if tools else None, model="test-model", stream=stream,
                           include_usage=stream, **extra)


def post(sim, profile: str, body: dict, session=None, tag: str | None = None, **kw) -> requests.Response:
    headers = kw.pop("headers", {})
    if tag:
        headers["X-AVV-Item"] = tag
    return (session or requests).post(
        f"{sim.base_url(profile)}/chat/completions",
        json=body,
        headers=headers,
        stream=body.get("stream", False),
        timeout=10,
        **kw,
    )


def sse_chunks(resp: requests.Response) -> tuple[list[dict], list[str]]:
    """Parsed JSON events and the raw data strings (including [DONE])."""
    raw = [ev.data for ev in sseclient.SSEClient(resp).events()]
    return [json.loads(d) for d in raw if d != "[DONE]"], raw


def assemble_tool_calls(chunks: list[dict]) -> dict[int, dict]:
    calls: dict[int, dict] = {}
    for ch in chunks:
        for choice in ch.get("choices", []):
            for tc in choice["delta"].get("tool_calls") or []:
                entry = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                if "id" in tc:
                    entry["id"] = tc["id"]
                    entry["name"] = tc["function"]["name"]
                entry["arguments"] += tc["function"].get("arguments", "")
    return calls


# ------------------------------------------------------------------------------------------- framing


def test_ready_and_models(sim) -> None:
    assert sim.url.startswith("http://127.0.0.1:")
    assert sim.profiles == list(SIM_PROFILES)
    models = requests.get(f"{sim.base_url('never')}/models", timeout=5).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "never-model-v1"
    assert requests.get(f"{sim.base_url('fast')}/models", timeout=5).json()["data"][0]["id"] == "fast"
    assert requests.post(f"{sim.url}/nope/v1/chat/completions", json=chat_body(), timeout=5).status_code == 404


def test_sse_framing_content_stream(sim) -> None:
    resp = post(sim, "never", chat_body(1))
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "text/event-stream"
    assert resp.headers["Cache-Control"] == "no-cache"
    raw = resp.raw.read()
    events = raw.split(b"\n\n")
    assert events[-1] == b"" and events[-2] == b"data: [DONE]"
    assert all(e.startswith(b"data: ") and b"\n" not in e for e in events[:-1])
    chunks = [json.loads(e[6:]) for e in events[:-2]]
    first = chunks[0]
    assert first["object"] == "chat.completion.chunk" and first["model"] == "test-model"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    content = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
    assert len(content) == 12 and all(content)
    finish = chunks[-2]
    assert finish["choices"][0]["finish_reason"] == "stop" and finish["choices"][0]["delta"] == {}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 12


def test_tool_call_delta_split_and_valid_arguments(sim) -> None:
    for i in range(8):
        chunks, raw = sse_chunks(post(sim, "always", chat_body(i)))
        assert raw[-1] == "[DONE]"
        tool_deltas = [
            c["choices"][0]["delta"]["tool_calls"][0]
            for c in chunks
            if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
        ]
        head, rest = tool_deltas[0], tool_deltas[1:]
        assert set(head) == {"index", "id", "type", "function"} and head["type"] == "function"
        assert head["index"] == 0 and head["id"].startswith("call_") and head["function"]["arguments"] == ""
        assert rest and all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in rest)
        assert all(0 < len(d["function"]["arguments"]) <= 9 for d in rest)
        (call,) = assemble_tool_calls(chunks).values()
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])
        finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
        assert finish[0]["choices"][0]["finish_reason"] == "tool_calls"
        assert not any(c["choices"][0]["delta"].get("content") for c in chunks if c["choices"])
        assert chunks[-1]["usage"]["completion_tokens"] == len(tool_deltas)


def test_parallel_tool_calls_use_distinct_indexes(sim) -> None:
    chunks, _ = sse_chunks(post(sim, "parallel", chat_body(3)))
    calls = assemble_tool_calls(chunks)
    assert sorted(calls) == [0, 1]
    assert calls[0]["id"] != calls[1]["id"] and {calls[0]["name"], calls[1]["name"]} == set(SCHEMAS)
    for call in calls.values():
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])
    # not parallel when the request forbids it
    chunks, _ = sse_chunks(post(sim, "parallel", chat_body(3, parallel_tool_calls=False)))
    assert list(assemble_tool_calls(chunks)) == [0]


def test_usage_only_when_requested(sim) -> None:
    body = chat_body(4)
    del body["stream_options"]
    chunks, raw = sse_chunks(post(sim, "fast", body))
    assert raw[-1] == "[DONE]" and all("usage" not in c for c in chunks)
    chunks, raw = sse_chunks(post(sim, "nousage", chat_body(4)))
    assert raw[-1] == "[DONE]" and all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "tool_calls")


def test_reasoning_deltas_precede_tool_call(sim) -> None:
    chunks, _ = sse_chunks(post(sim, "reasoner", chat_body(5)))
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]][1:]
    kinds = ["reasoning" if "reasoning_content" in d else "tool" if "tool_calls" in d else "other" for d in deltas]
    assert kinds[:5] == ["reasoning"] * 5 and "reasoning" not in kinds[5:]
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 5
    assert usage["completion_tokens"] == 5 + kinds.count("tool")


def test_tokens_per_chunk_groups_tokens(sim) -> None:
    chunks, _ = sse_chunks(post(sim, "chunky", chat_body(6, tools=False)))
    content = [
        c["choices"][0]["delta"]["content"]
        for c in chunks[1:]
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    assert [len(c.split()) for c in content] == [5, 5, 2]
    assert chunks[-1]["usage"]["completion_tokens"] == 12


# ---------------------------------------------------------------------------------- request handling


def test_auth(sim) -> None:
    url = f"{sim.base_url('secured')}/chat/completions"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sk-test-123"}):
        resp = requests.post(url, json=chat_body(7), headers=headers, timeout=5)
        assert resp.status_code == 401
        err = resp.json()["error"]
        assert err["code"] == "invalid_api_key" and err["type"] == "invalid_request_error" and err["message"]
    assert requests.get(f"{sim.base_url('secured')}/models", timeout=5).status_code == 401
    ok = requests.post(url, json=chat_body(7), headers={"Authorization": "Bearer sk-test-123"}, stream=True, timeout=5)
    assert ok.status_code == 200 and sse_chunks(ok)[1][-1] == "[DONE]"


def test_tool_choice(sim) -> None:
    for i in range(5):
        chunks, _ = sse_chunks(post(sim, "always", chat_body(i, tool_choice="none")))
        assert not assemble_tool_calls(chunks)
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        chunks, _ = sse_chunks(post(sim, "never", chat_body(i, tool_choice="required")))
        assert assemble_tool_calls(chunks) and chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
        named = {"type": "function", "function": {"name": "search"}}
        chunks, _ = sse_chunks(post(sim, "never", chat_body(i, tool_choice=named)))
        assert [c["name"] for c in assemble_tool_calls(chunks).values()] == ["search"]
    bad = post(sim, "never", chat_body(1, stream=False, tool_choice={"type": "function", "function": {"name": "nope"}}))
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tool_choice"


def test_max_tokens(sim) -> None:
    for key in ("max_tokens", "max_completion_tokens"):
        chunks, raw = sse_chunks(post(sim, "never", chat_body(8, **{key: 5})))
        content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
        assert len(content) == 5 and raw[-1] == "[DONE]"
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert chunks[-1]["usage"]["completion_tokens"] == 5
    assert post(sim, "never", chat_body(8, stream=False, max_tokens=0)).status_code == 400


def test_non_stream_body(sim) -> None:
    resp = post(sim, "always", chat_body(9, stream=False))
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("application/json")
    data = resp.json()
    assert data["object"] == "chat.completion" and data["model"] == "test-model"
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["role"] == "assistant"
    (call,) = choice["message"]["tool_calls"]
    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])
    # the same body streamed carries the same call (stream / stream_options do not change the hash)
    chunks, _ = sse_chunks(post(sim, "always", chat_body(9)))
    streamed = assemble_tool_calls(chunks)[0]
    assert (streamed["id"], streamed["arguments"]) == (call["id"], call["function"]["arguments"])
    assert data["usage"]["completion_tokens"] == chunks[-1]["usage"]["completion_tokens"]
    choice = post(sim, "never", chat_body(9, stream=False, max_tokens=3)).json()["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["message"]["content"].split()) == 3


def test_bad_json_is_400(sim) -> None:
    resp = requests.post(f"{sim.base_url('fast')}/chat/completions", data=b"{nope", timeout=5)
    assert resp.status_code == 400 and "error" in resp.json()
    resp = requests.post(f"{sim.base_url('fast')}/chat/completions", json={"messages": []}, timeout=5)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "messages"


# ------------------------------------------------------------------------------------------- faults


def test_error_status_and_rate_limit(sim) -> None:
    resp = post(sim, "errors", chat_body(10), tag="err-1")
    assert resp.status_code == 503 and resp.json()["error"]["type"] == "server_error"
    resp = post(sim, "ratelimited", chat_body(10), tag="rl-1")
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "2"
    assert resp.json()["error"]["code"] == "rate_limit_exceeded"
    error = truth_of(sim.truth_log, "err-1")
    assert error["fault"] == "error_status" and error["http_status"] == 503
    assert truth_of(sim.truth_log, "rl-1")["fault"] == "rate_limit"


def test_truncate_closes_mid_stream(sim) -> None:
    resp = post(sim, "trunc", chat_body(11), tag="trunc-1")
    assert resp.status_code == 200
    received = b""
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for part in resp.iter_content(chunk_size=None):
            received += part
    assert b"[DONE]" not in received and b'"finish_reason":"stop"' not in received
    n_content = received.count(b'"content":"') - 1  # minus the role chunk
    assert 1 <= n_content < 12
    rec = truth_of(sim.truth_log, "trunc-1")
    assert rec["fault"] == "truncate" and rec["finish_reason"] is None and rec["completion_tokens"] == n_content


def test_stream_error_event(sim) -> None:
    chunks, raw = sse_chunks(post(sim, "serr", chat_body(12), tag="serr-1"))
    errors = [c for c in chunks if "error" in c]
    assert len(errors) == 1 and errors[0]["error"]["type"] == "server_error"
    assert chunks[-1] is errors[0] and raw[-1] == "[DONE]"
    assert not any(c["choices"][0]["finish_reason"] for c in chunks if c.get("choices"))
    assert truth_of(sim.truth_log, "serr-1")["fault"] == "stream_error"


# ------------------------------------------------------------------------------------------- truth


def test_truth_log_fields_and_attempts(sim) -> None:
    body = chat_body(13)
    with requests.Session() as s:
        chunks, _ = sse_chunks(post(sim, "always", body, session=s, tag="t-1"))
        assert post(sim, "always", body, session=s, tag="t-2").content
        assert post(sim, "always", body, session=s, tag="t-3", headers={"X-AVV-Attempt": "7"}).content
    rec = truth_of(sim.truth_log, "t-1")
    assert set(rec) == {
        "profile",
        "endpoint",
        "request_hash",
        "decision_key",
        "agent",
        "attempt",
        "client_tag",
        "repeat",
        "repeat_source",
        "stream",
        "has_tools",
        "reference_decision",
        "decision",
        "flipped",
        "self_flipped",
        "gold",
        "call_form",
        "dropped_calls",
        "tool_calls",
        "text_tool_calls",
        "text_calls",
        "fault",
        "http_status",
        "finish_reason",
        "reasoning_only",
        "prompt_script",
        "content_script",
        "language_drift",
        "usage_sent",
        "prompt_tokens",
        "completion_tokens",
        "content_tokens",
        "reasoning_tokens",
        "queued_ms",
        "quirks",
        "client_disconnected",
        "t_arrival",
        "t_first_token",
        "t_last_byte",
        "usage_prompt_tokens",
        "usage_completion_tokens",
        "ignored",
        "other_calls",
        "sampled_words",
        "answer_shifted",
    }
    assert rec["profile"] == "always" and rec["request_hash"] == request_hash(body) and rec["attempt"] == 1
    assert rec["stream"] and rec["has_tools"] and rec["reference_decision"] and rec["decision"]
    assert not rec["flipped"] and rec["fault"] is None and rec["http_status"] == 200
    assert not rec["self_flipped"] and (rec["repeat"], rec["repeat_source"]) == (1, "arrival")  # "t-1" is no item tag
    assert rec["finish_reason"] == "tool_calls" and rec["usage_sent"] and rec["quirks"] == []
    call = assemble_tool_calls(chunks)[0]
    assert rec["tool_calls"] == [
        {"index": 0, "id": call["id"], "name": call["name"], "arguments": call["arguments"], "broken": None,
         "wrong_tool": False, "changed": []}
    ]
    assert (rec["gold"], rec["call_form"], rec["dropped_calls"], rec["text_calls"]) == (False, "calls", 0, [])
    usage = chunks[-1]["usage"]
    assert (rec["prompt_tokens"], rec["completion_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert rec["content_tokens"] == 0 and rec["reasoning_tokens"] == 0
    assert rec["t_arrival"] < rec["t_first_token"] < rec["t_last_byte"]
    second, third = truth_of(sim.truth_log, "t-2"), truth_of(sim.truth_log, "t-3")
    assert second["attempt"] == 2 and third["attempt"] == 7
    assert second["repeat"] == 2 and third["repeat"] == 3  # arrivals of the body
    no_tools = post(sim, "fast", chat_body(13, tools=False, stream=False), tag="t-4")
    assert no_tools.status_code == 200
    rec = truth_of(sim.truth_log, "t-4")
    assert rec["has_tools"] is False and rec["reference_decision"] is None and rec["decision"] is False
    assert rec["t_first_token"] is None and rec["content_tokens"] == 12


def test_statistical_knobs_over_300_bodies(sim) -> None:
    """tool_call_rate, flip_rate, bad_args_rate and error_rate as seen by a client."""
    n = 300
    ref_calls, flips, errors, bad, total_calls = 0, 0, 0, 0, 0
    with requests.Session() as s:
        for i in range(n):
            body = chat_body(1000 + i, stream=False)
            ref = post(sim, "stat_ref", body, session=s).json()
            ref_called = bool(ref["choices"][0]["message"].get("tool_calls"))
            ref_calls += ref_called
            resp = post(sim, "stat_noisy", body, session=s)
            if resp.status_code != 200:
                assert resp.status_code == 500
                errors += 1
                continue
            calls = resp.json()["choices"][0]["message"].get("tool_calls") or []
            flips += bool(calls) != ref_called
            for call in calls:
                total_calls += 1
                try:
                    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])
                except (ValueError, jsonschema.ValidationError):
                    bad += 1
    served = n - errors
    assert abs(ref_calls / n - 0.6) < 0.08
    assert abs(errors / n - 0.1) < 0.05
    assert abs(flips / served - 0.2) < 0.07
    assert abs(bad / total_calls - 0.3) < 0.09
    # the truth log says exactly which responses were flipped and which arguments were broken
    noisy = [r for r in truth_lines(sim.truth_log) if r["profile"] == "stat_noisy" and r["http_status"] == 200]
    assert sum(r["flipped"] for r in noisy) == flips
    assert sum(bool(c["broken"]) for r in noisy for c in r["tool_calls"]) == bad


def test_self_flips_follow_the_item_tags_repeat(sim) -> None:
    """The repeat of the X-AVV-Item tag drives the self-flip draw; a retry (attempt 2) of the same item meets the
    same decision; without a tag the body's arrival count stands in for the repeat."""
    from avv_core.items import ItemKey
    from avv_sim import behaviour
    from avv_sim.identity import decision_key

    with requests.Session() as s:
        for i in range(12):
            body = chat_body(2000 + i, stream=False)
            key = decision_key(body)
            for repeat in (1, 2):
                for attempt in (1, 2):
                    tag = ItemKey("m", "selfnoisy", f"s{i}", repeat).tag("run-x", attempt)
                    resp = post(sim, "selfnoisy", body, session=s, tag=tag)
                    assert resp.status_code == 200
                    rec = truth_of(sim.truth_log, tag)
                    assert (rec["repeat"], rec["repeat_source"]) == (repeat, "tag")
                    assert rec["self_flipped"] == behaviour.self_flip_drawn(key, 3, repeat, 0.5)
                    assert rec["decision"] == (rec["reference_decision"] ^ rec["self_flipped"])
                    called = bool(resp.json()["choices"][0]["message"].get("tool_calls"))
                    assert called == rec["decision"]
            tagged = [r for r in truth_lines(sim.truth_log) if r["client_tag"] and f"/s{i}/" in r["client_tag"]]
            by_repeat = {(r["repeat"], r["decision"]) for r in tagged}
            assert len(by_repeat) == len({r for r, _ in by_repeat})  # retries of one repeat agree
        body = chat_body(3000, stream=False)
        for arrival in (1, 2, 3):
            assert post(sim, "selfnoisy", body, session=s, tag=f"plain-{arrival}").status_code == 200
            rec = truth_of(sim.truth_log, f"plain-{arrival}")
            assert (rec["repeat"], rec["repeat_source"]) == (arrival, "arrival")
            assert rec["self_flipped"] == behaviour.self_flip_drawn(decision_key(body), 3, arrival, 0.5)
