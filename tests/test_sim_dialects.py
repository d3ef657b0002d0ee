"""The simulator's dialects: the decision key shared by a chat request and the prompt rendered from it, the
``require_reasoning_content`` and ``broken_template`` quirks, ``reasoning_field``, ``/v1/completions`` and the
``log_request`` truth fields. Plans are checked as data; the wire over HTTP with a plain client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
import sseclient

from avv_core.samples import load_samples
from avv_core.tool_formats import parse_completion
from avv_harness.dialects.chat_template import load_chat_template
from avv_harness.dialects.dialect import TEMPLATES_DIR
from avv_harness.dialects.transforms import ADAPTERS, apply_transforms
from avv_harness.wire.formats.completions import completion_body
from avv_sim import request_hash
from avv_sim.decision_key import decision_key
from avv_sim.dialects import QuirkRejection, as_completion, check_reasoning_content, completion_view, text_calls
from avv_sim.plan import make_plan
from avv_sim.profiles import ProfileError, make_profile
from avv_sim.prompt import parse_prompt
from avv_sim.tokens import token_counts
from tests.locust_runs import DEMO_SAMPLES
from tests.sim_records import truth_of

TEMPLATE = load_chat_template(TEMPLATES_DIR / "hermes.jinja")
SAMPLES = load_samples(DEMO_SAMPLES).samples
WIRE = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}


def chat(sample, adapter: str = "generic") -> dict:
    return {**apply_transforms(sample.body, ADAPTERS[adapter]), **WIRE}


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_a_rendered_prompt_meets_the_decision_key_of_its_chat_request(adapter):
    for sample in SAMPLES:
        body = chat(sample, adapter)
        view, _ = completion_view(completion_body(body, TEMPLATE))
        assert decision_key(view) == decision_key(body), sample.sample_id


def test_ids_and_reasoning_fields_do_not_change_decisions_and_plain_bodies_keep_their_hash():
    assert [decision_key(chat(s, "kimi")) for s in SAMPLES] == [decision_key(chat(s)) for s in SAMPLES]
    plain = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
                                                                          "function": {"name": "f"}}]}
    assert decision_key(plain) == request_hash(plain)  # no history: the same draws as before the key existed
    assert decision_key({**plain, "temperature": 0.1}) != decision_key(plain)


def test_prompt_parses_back_to_messages_and_tools():
    body = chat(SAMPLES[0])
    messages, tools = parse_prompt(TEMPLATE.render(body["messages"], body["tools"]))
    assert tools == body["tools"]
    assert [m["role"] for m in messages] == [m["role"] for m in body["messages"]]
    assert messages[2]["tool_calls"][0]["function"] == {
        "name": "run_command",
        "arguments": json.dumps(json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"]))}
    assert parse_prompt("no chatml here") == ([], None)


def test_require_reasoning_content():
    profile = make_profile("k", {"quirks": ["require_reasoning_content"]})
    body = chat(SAMPLES[0])
    with pytest.raises(QuirkRejection) as err:
        check_reasoning_content(profile, body, decision_key(body), 1)
    assert err.value.status == 400 and err.value.param == "messages[2].reasoning_content"
    assert err.value.fault == "require_reasoning_content"
    check_reasoning_content(profile, chat(SAMPLES[0], "kimi"), decision_key(body), 1)  # " " is enough
    check_reasoning_content(make_profile("plain"), body, decision_key(body), 1)
    never = make_profile("k", {"quirks": ["require_reasoning_content"], "quirk_rate": 0.0})
    check_reasoning_content(never, body, decision_key(body), 1)


def calling_plan(profile_knobs: dict):
    profile = make_profile("p", {"tool_call_rate": 1.0, "parallel_rate": 1.0, **profile_knobs})
    body = chat(SAMPLES[0])
    return make_plan(profile, body, 1, decision_key(body)), make_plan(profile, body, 1, decision_key(body))


def test_broken_template_sends_fenced_calls_under_stop():
    chat_plan, plan = calling_plan({"quirks": ["broken_template"]})
    assert plan.quirks == ("broken_template",) and len(chat_plan.tool_calls) == 2
    truth = text_calls(plan, None, 1)  # the default: json_fenced
    assert truth == [{"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments, "broken": c.broken}
                     for c in chat_plan.tool_calls]
    text = "".join(c.text for c in plan.chunks)
    assert {c.kind for c in plan.chunks} == {"content"} and plan.finish_reason == "stop" and plan.tool_calls == []
    expected = "\n".join(f'```json\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n```'
                         for c in chat_plan.tool_calls)
    assert text == expected
    assert [(c["name"], c["arguments"]) for c in parse_completion(text, "json_fenced").calls] == [
        (c.name, c.arguments) for c in chat_plan.tool_calls]
    assert plan.completion_tokens == chat_plan.completion_tokens


def test_a_completion_plan_has_the_chat_plans_tokens_and_timing():
    chat_plan, plan = calling_plan({"reasoning_tokens": 4, "tokens_per_chunk": 2})
    prompt = TEMPLATE.render(chat(SAMPLES[0])["messages"], SAMPLES[0].tools)
    truth = as_completion(plan, prompt, 2)
    assert [(c.first_token, c.last_token) for c in plan.chunks] == [(c.first_token, c.last_token)
                                                                       for c in chat_plan.chunks]
    assert token_counts(plan.chunks) == token_counts(chat_plan.chunks) and plan.finish_reason == "stop"
    assert plan.prompt_tokens == -(-len(prompt) // 4)
    parsed = parse_completion("".join(c.text for c in plan.chunks), "hermes")
    assert parsed.reasoning == "".join(t.text for t in chat_plan.tokens if t.kind == "reasoning").strip()
    assert [(c["name"], c["arguments"]) for c in parsed.calls] == [(t["name"], t["arguments"]) for t in truth]
    assert [(t["name"], t["arguments"]) for t in truth] == [(c.name, c.arguments) for c in chat_plan.tool_calls]


def test_reasoning_field_knob_is_checked():
    assert make_profile("p", {"reasoning_field": "reasoning_details"}).reasoning_field == "reasoning_details"
    with pytest.raises(ProfileError, match="reasoning_field"):
        make_profile("p", {"reasoning_field": "thoughts"})


# ------------------------------------------------------------------------------------------- over HTTP

FAST = {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 6, "tool_call_rate": 1.0, "parallel_rate": 0.0,
        "reasoning_tokens": 3}
SIM_PROFILES = {f: {**FAST, "reasoning_field": f} for f in ("reasoning_content", "reasoning", "reasoning_details")}
SIM_PROFILES["logged"] = {**FAST, "log_request": True, "api_key": "sk-never-logged-1"}


def events(response: requests.Response) -> list[dict]:
    return [json.loads(e.data) for e in sseclient.SSEClient(response.iter_content()).events() if e.data != "[DONE]"]


@pytest.mark.integration  # the simulator as a process
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_details"])
def test_reasoning_goes_out_under_the_configured_field(sim, field):
    body = {**chat(SAMPLES[2]), "tool_choice": "auto"}
    chunks = events(requests.post(sim.base_url(field) + "/chat/completions", json=body, timeout=10))
    reasoning = [c["choices"][0]["delta"] for c in chunks if c.get("choices") and set(c["choices"][0]["delta"]) & {
        "reasoning_content", "reasoning", "reasoning_details"}]
    assert len(reasoning) == 3 and all(set(d) == {field} for d in reasoning)
    plain = requests.post(sim.base_url(field) + "/chat/completions", json={**body, "stream": False}, timeout=10)
    assert field in plain.json()["choices"][0]["message"]


@pytest.mark.integration  # the simulator as a process
def test_completions_endpoint_streams_text_and_logs_what_it_received(sim):
    body = completion_body(chat(SAMPLES[0]), TEMPLATE)
    response = requests.post(sim.base_url("logged") + "/completions", json=body, timeout=10,
                             headers={"Authorization": "Bearer sk-never-logged-1", "X-AVV-Item": "raw-1",
                                      "X-Extra": "seen"})
    chunks = events(response)
    assert all(c["object"] == "text_completion" for c in chunks)
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    rec = truth_of(sim.truth_log, "raw-1")
    assert finish == ["stop"] and rec["endpoint"] == "completions" and rec["finish_reason"] == "stop"
    parsed = parse_completion(text, "hermes")
    assert [(c["name"], c["arguments"]) for c in parsed.calls] == [
        (c["name"], c["arguments"]) for c in rec["text_tool_calls"]]
    assert rec["decision_key"] == decision_key(chat(SAMPLES[0])) and rec["decision"] is True
    assert rec["request"]["body"] == body and rec["request"]["headers"]["X-Extra"] == "seen"
    assert "sk-never-logged-1" not in Path(sim.truth_log).read_text()
    bad = requests.post(sim.base_url("logged") + "/completions", json={"model": "m"}, timeout=10,
                        headers={"Authorization": "Bearer sk-never-logged-1"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt"
    plain = requests.post(sim.base_url("logged") + "/completions", json={**body, "stream": False}, timeout=10,
                          headers={"Authorization": "Bearer sk-never-logged-1"}).json()
    assert plain["object"] == "text_completion" and plain["choices"][0]["text"] == text
