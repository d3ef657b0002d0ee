"""The simulator's non-conformance knobs, as pure plans and their truth records: by default every request parameter is
honoured (tool_choice, parallel_tool_calls: false, max_tokens, stop, response_format, the sampling ranges), and each
knob breaks exactly its parameter, shown in the truth log (``ignored``, ``usage_prompt_tokens``,
``usage_completion_tokens``, ``other_calls``, ``tool_calls[].id``). No server."""

from __future__ import annotations

import json

import jsonschema
import pytest

from avv_sim.plan import make_plan
from avv_sim.profiles import KNOBS, make_profile
from avv_sim.request import RequestError
from avv_sim.truth import KEYS, Exchange, build_truth
from avv_sim.wire import Wire

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}} for name in ("a", "b")]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["city", "n"], "additionalProperties": False}


def body(**extra: object) -> dict:
    return {"messages": [{"role": "user", "content": "question"}], "stream": True, **extra}


def truth(plan) -> dict:  # noqa: ANN001
    return build_truth(Exchange("p", "chat", None, 0.0, plan=plan, chunks_sent=len(plan.chunks))).to_json()


def content(plan) -> str:  # noqa: ANN001
    return "".join(t.text for t in plan.tokens if t.kind == "content")


def plans(knobs: dict, request: dict, base: dict | None = None):  # noqa: ANN201
    """(the plan of a profile that honours the request, the plan of one with ``knobs``)."""
    base = {"tool_call_rate": 1.0, "output_tokens": 30, **(base or {})}
    honest, broken = make_profile("ok", base), make_profile("bad", {**base, **knobs})
    return make_plan(honest, request, 1), make_plan(broken, request, 1)


def test_every_new_knob_names_a_truth_key() -> None:
    for name in ("ignore_tool_choice", "ignore_parallel_tool_calls", "ignore_max_tokens", "ignore_stop",
                 "ignore_response_format", "clamp_out_of_range", "prompt_tokens_factor", "completion_tokens_factor",
                 "stream_other_calls", "repeat_tool_call_ids"):
        assert KNOBS[name].truth.split("[")[0] in KEYS, name


@pytest.mark.parametrize(("choice", "honoured_calls"), [("none", 0), ("required", 1),
                                                        ({"type": "function", "function": {"name": "b"}}, 1)])
def test_tool_choice(choice: object, honoured_calls: int) -> None:
    request = body(tools=TOOLS, tool_choice=choice)
    ok, bad = plans({"ignore_tool_choice": True}, request, {"tool_call_rate": 0.0 if choice != "none" else 1.0})
    assert len(ok.tool_calls) == honoured_calls and truth(ok)["ignored"] == []
    if isinstance(choice, dict):
        assert [c.name for c in ok.tool_calls] == ["b"]
    assert len(bad.tool_calls) == (1 - honoured_calls if choice == "none" else 0)  # as under auto
    assert truth(bad)["ignored"] == ["tool_choice"]


def test_parallel_tool_calls_false() -> None:
    request = body(tools=TOOLS, parallel_tool_calls=False)
    ok, bad = plans({"ignore_parallel_tool_calls": True}, request, {"parallel_rate": 1.0})
    assert len(ok.tool_calls) == 1 and len(bad.tool_calls) == 2 and truth(bad)["ignored"] == ["parallel_tool_calls"]
    assert len(make_plan(make_profile("x", {"tool_call_rate": 1.0, "parallel_rate": 1.0}), body(tools=TOOLS),
                         1).tool_calls) == 2  # without the parameter: two calls


def test_max_tokens() -> None:
    ok, bad = plans({"ignore_max_tokens": True}, body(max_tokens=5), {"tool_call_rate": 0.0})
    assert (ok.completion_tokens, ok.finish_reason) == (5, "length")
    assert (bad.completion_tokens, bad.finish_reason) == (30, "stop") and truth(bad)["ignored"] == ["max_tokens"]


def test_stop() -> None:
    stops = ["the", "and", "of", "to", "be"]  # words of the filler vocabulary: the answer holds some
    ok, bad = plans({"ignore_stop": True}, body(stop=stops), {"tool_call_rate": 0.0})
    full = content(bad)  # the same body: the same words, not cut
    first = min(at for at in (full.find(s) for s in stops) if at >= 0)
    assert content(ok) == full[:first] and not any(s in content(ok) for s in stops)
    assert ok.finish_reason == "stop" and ok.completion_tokens < bad.completion_tokens
    assert truth(bad)["ignored"] == ["stop"] and truth(ok)["ignored"] == []


def test_response_format() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    ok, bad = plans({"ignore_response_format": True}, body(response_format=fmt), {"tool_call_rate": 0.0})
    jsonschema.validate(json.loads(content(ok)), SCHEMA)
    with pytest.raises(json.JSONDecodeError):
        json.loads(content(bad))
    assert truth(bad)["ignored"] == ["response_format"]
    ok_object, _ = plans({}, body(response_format={"type": "json_object"}), {"tool_call_rate": 0.0})
    assert isinstance(json.loads(content(ok_object)), dict)


def test_out_of_range_sampling_parameters() -> None:
    for name, value in (("temperature", 2.5), ("top_p", 1.5), ("temperature", -1)):
        with pytest.raises(RequestError, match=name) as caught:
            make_plan(make_profile("p", {}), body(**{name: value}), 1)
        assert caught.value.status == 400
        clamped = make_plan(make_profile("p", {"clamp_out_of_range": True}), body(**{name: value}), 1)
        assert truth(clamped)["ignored"] == [name]
    assert make_plan(make_profile("p", {}), body(temperature=2, top_p=0), 1).ignored == ()


def test_token_factors_change_the_usage_only() -> None:
    ok, bad = plans({"prompt_tokens_factor": 1.25, "completion_tokens_factor": 2.0}, body(), {"tool_call_rate": 0.0})
    assert bad.tokens == ok.tokens and bad.prompt_tokens == ok.prompt_tokens
    assert truth(bad)["usage_prompt_tokens"] == round(ok.prompt_tokens * 1.25)
    assert truth(bad)["usage_completion_tokens"] == 2 * ok.completion_tokens == 2 * truth(bad)["completion_tokens"]
    usage = Wire(bad, 0, "chatcmpl-x").usage()
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (round(ok.prompt_tokens * 1.25), 60)
    assert truth(ok)["usage_prompt_tokens"] == ok.prompt_tokens


def test_stream_other_calls_changes_the_json_answer_only() -> None:
    profile = make_profile("p", {"tool_call_rate": 1.0, "stream_other_calls": True})
    streamed = make_plan(profile, body(tools=TOOLS), 1)
    whole = make_plan(profile, body(tools=TOOLS, stream=False), 1)
    assert not truth(streamed)["other_calls"] and truth(whole)["other_calls"]
    assert [c.name for c in whole.tool_calls] == [c.name for c in streamed.tool_calls]
    assert whole.tool_calls[0].arguments != streamed.tool_calls[0].arguments
    honest = make_plan(make_profile("p", {"tool_call_rate": 1.0}), body(tools=TOOLS, stream=False), 1)
    assert honest.tool_calls[0].arguments == streamed.tool_calls[0].arguments


def test_repeat_tool_call_ids() -> None:
    ok, bad = plans({"repeat_tool_call_ids": True}, body(tools=TOOLS), {"parallel_rate": 1.0})
    assert len({c["id"] for c in truth(ok)["tool_calls"]}) == 2
    assert len({c["id"] for c in truth(bad)["tool_calls"]}) == 1 and len(bad.tool_calls) == 2
