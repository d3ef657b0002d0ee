"""Each request transform with the exact messages before and after; presets, auto's pick, composition, and
the sample never changed."""

from __future__ import annotations

import copy

import pytest

from avv_harness.dialects.transforms import ADAPTERS, TRANSFORMS, apply_transforms, compose, pick_adapter


def call(call_id: str, name: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def check(name: str, before: list[dict], after: list[dict], **extra) -> None:
    body = {"messages": before, "tools": [], **extra}
    frozen = copy.deepcopy(body)
    out = TRANSFORMS[name](body)
    assert out["messages"] == after
    assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in frozen.items() if k != "messages"}
    assert body == frozen, f"{name} changed its input"


def test_input_role_to_system():
    check("input_role_to_system",
          [{"role": "_input", "content": "You are terse."}, {"role": "user", "content": "hi"}],
          [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}])


def test_inject_reasoning_content():
    check("inject_reasoning_content",
          [{"role": "user", "content": "weather?"},
           {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_weather")]},
           {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
           {"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": [call("c2", "get_time")]},
           {"role": "tool", "tool_call_id": "c2", "content": "noon"},
           {"role": "assistant", "content": "x", "reasoning_content": "I looked it up.",
            "tool_calls": [call("c3", "get_time")]},
           {"role": "assistant", "content": "Sunny at noon."}],
          [{"role": "user", "content": "weather?"},
           {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_weather")], "reasoning_content": " "},
           {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
           {"role": "assistant", "content": "", "reasoning_content": " ", "tool_calls": [call("c2", "get_time")]},
           {"role": "tool", "tool_call_id": "c2", "content": "noon"},
           {"role": "assistant", "content": "x", "reasoning_content": "I looked it up.",
            "tool_calls": [call("c3", "get_time")]},
           {"role": "assistant", "content": "Sunny at noon."}])


def test_rename_reasoning_fields():
    check("rename_reasoning_fields",
          [{"role": "assistant", "content": "a", "reasoning": "thought A"},
           {"role": "assistant", "content": "b",
            "reasoning_details": [{"type": "reasoning.text", "text": "thought "}, {"type": "reasoning.text",
                                                                                  "text": "B"}]},
           {"role": "assistant", "content": "c", "reason": "thought C"},
           {"role": "assistant", "content": "d", "reasoning_content": "kept", "reasoning": "dropped"},
           {"role": "user", "content": "e", "reasoning": "users keep theirs"}],
          [{"role": "assistant", "content": "a", "reasoning_content": "thought A"},
           {"role": "assistant", "content": "b", "reasoning_content": "thought B"},
           {"role": "assistant", "content": "c", "reasoning_content": "thought C"},
           {"role": "assistant", "content": "d", "reasoning_content": "kept"},
           {"role": "user", "content": "e", "reasoning": "users keep theirs"}])


def test_strip_reasoning_content():
    check("strip_reasoning_content",
          [{"role": "assistant", "content": "a", "reasoning_content": "r", "reasoning": "r",
            "reasoning_details": [], "reason": "r", "tool_calls": [call("c1", "f")]},
           {"role": "user", "content": "b"}],
          [{"role": "assistant", "content": "a", "tool_calls": [call("c1", "f")]},
           {"role": "user", "content": "b"}])


def test_renumber_tool_call_ids():
    check("renumber_tool_call_ids",
          [{"role": "user", "content": "go"},
           {"role": "assistant", "content": None,
            "tool_calls": [call("call_abc", "get_weather"), call("call_def", "get_time")]},
           {"role": "tool", "tool_call_id": "call_abc", "content": "sunny"},
           {"role": "tool", "tool_call_id": "call_def", "content": "noon"},
           {"role": "assistant", "content": None, "tool_calls": [call("call_abc", "get_weather")]},
           {"role": "tool", "tool_call_id": "call_abc", "content": "rain"},
           {"role": "tool", "tool_call_id": "unknown", "content": "?"}],
          [{"role": "user", "content": "go"},
           {"role": "assistant", "content": None,
            "tool_calls": [call("functions.get_weather:0", "get_weather"), call("functions.get_time:1", "get_time")]},
           {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
           {"role": "tool", "tool_call_id": "functions.get_time:1", "content": "noon"},
           {"role": "assistant", "content": None, "tool_calls": [call("functions.get_weather:2", "get_weather")]},
           {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "rain"},  # the latest call_abc
           {"role": "tool", "tool_call_id": "unknown", "content": "?"}])


def test_every_transform_has_a_test_above():
    tested = {"input_role_to_system", "inject_reasoning_content", "rename_reasoning_fields",
              "strip_reasoning_content", "renumber_tool_call_ids"}
    assert set(TRANSFORMS) == tested


def test_kimi_preset_renames_before_it_injects():
    body = {"messages": [
        {"role": "_input", "content": "sys"},
        {"role": "assistant", "content": None, "reasoning": "plan", "tool_calls": [call("x", "f")]},
        {"role": "tool", "tool_call_id": "x", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [call("y", "g")]},
        {"role": "tool", "tool_call_id": "y", "content": "ok"}]}
    out = apply_transforms(body, ADAPTERS["kimi"])
    assert out["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": None, "reasoning_content": "plan", "tool_calls": [call("functions.f:0", "f")]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"},
        {"role": "assistant", "content": None, "reasoning_content": " ", "tool_calls": [call("functions.g:1", "g")]},
        {"role": "tool", "tool_call_id": "functions.g:1", "content": "ok"}]
    assert apply_transforms(body, ADAPTERS["generic"])["messages"][0] == {"role": "system", "content": "sys"}
    assert apply_transforms(body, ADAPTERS["none"]) == body


@pytest.mark.parametrize("model_id, adapter", [("kimi-k2-0905-preview", "kimi"), ("moonshotai/Kimi-K2.5", "kimi"),
                                               ("deepseek-chat", "generic"), ("MiniMax-M2", "generic")])
def test_auto_picks_by_model_id(model_id, adapter):
    picked, why = pick_adapter(model_id)
    assert picked == adapter and why.startswith("auto: ") and model_id in why


def test_compose_keeps_order_drops_repeats_and_names_unknown():
    assert compose(["renumber_tool_call_ids", "input_role_to_system", "renumber_tool_call_ids"]) == (
        "renumber_tool_call_ids", "input_role_to_system")
    with pytest.raises(KeyError, match="nope"):
        compose(["nope"])


def test_a_body_without_messages_passes_through():
    for name, transform in TRANSFORMS.items():
        assert transform({"prompt": "x"}) == {"prompt": "x"}, name
