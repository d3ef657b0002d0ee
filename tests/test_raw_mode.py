"""Raw-completions mode: chat templates from local files rendered as transformers does, the tool parsers, the
completions request and the record made from a completions stream (in-process vendor, no socket)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from avv_core.items import ItemKey, WorkItem
from avv_core.samples import Sample
from avv_core.tool_formats import parse_completion
from avv_harness.dialects.chat_template import TemplateRenderError, load_chat_template
from avv_harness.dialects.dialect import TEMPLATES_DIR, Dialect
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, build_request, execute_item
from avv_harness.wire.formats.completions import completion_body
from tests.fake_vendor import DONE, ScriptedAdapter
from tests.wire_server import sse

HERMES = TEMPLATES_DIR / "hermes.jinja"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "rain, 8 °C"},
]


def test_hermes_template_renders_the_exact_prompt():
    prompt = load_chat_template(HERMES).render(CONVERSATION, [TOOL])
    assert prompt == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(TOOL, ensure_ascii=False) +
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nrain, 8 °C\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    assert load_chat_template(HERMES).render([{"role": "user", "content": "hi"}]) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_tokenizer_config_folder_special_tokens_and_helpers(tmp_path):
    template = ("{{ bos_token }}{% for m in messages %}{% if m.role == 'user' and not m.content %}"
                "{{ raise_exception('empty user turn') }}{% endif %}{% generation %}[{{ m.role }}]{{ m.content }}"
                "{% endgeneration %}{% endfor %}{{ tools | tojson }}"
                "{% if add_generation_prompt %}{{ eos_token }}{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": template}],
        "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>"}))
    folder = load_chat_template(tmp_path)
    assert folder.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    assert folder.render([{"role": "user", "content": "é"}]) == "D"  # no tools → default
    tools = [{"name": "f", "note": "ü"}]
    assert folder.render([{"role": "user", "content": "é"}], tools) == '<s>[user]é[{"name": "f", "note": "ü"}]</s>'
    with pytest.raises(TemplateRenderError, match="empty user turn"):
        folder.render([{"role": "user", "content": ""}], tools)
    (tmp_path / "chat_template.jinja").write_text("{{ bos_token }}J")
    assert load_chat_template(tmp_path).render([]) == "<s>J"  # the folder's chat_template.jinja wins
    assert load_chat_template(tmp_path / "chat_template.jinja").render([]) == "<s>J"  # tokens from beside it


def test_the_sandbox_refuses_attribute_escapes(tmp_path):
    (tmp_path / "evil.jinja").write_text("{{ messages.__class__.__mro__ }}")
    with pytest.raises(Exception, match="unsafe|not safely|access"):
        load_chat_template(tmp_path / "evil.jinja").render([{"role": "user", "content": "x"}])


@pytest.mark.parametrize("parser, text, calls, content", [
    ("hermes", 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
     [("call_0", "get_weather", '{"city": "Oslo"}')], "Sure."),
    ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": 1,}\n</tool_call>', [("call_0", "f", '{"a": 1,')], ""),
    ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}', [("call_0", "f", '{"a": 1}')], ""),  # cut short
    ("kimi", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3<|tool_call_argument_begin|>"
             '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
     [("functions.get_weather:3", "get_weather", '{"city": "Oslo"}')], ""),
    ("json_fenced", 'Calling:\n```json\n{"name": "f", "arguments": {"a": 1}}\n```\n```json\n[{"name": "g", '
                    '"arguments": {}}]\n```', [("call_0", "f", '{"a": 1}'), ("call_1", "g", "{}")], "Calling:"),
    ("json_fenced", "```python\nprint(1)\n```", [], "```python\nprint(1)\n```"),
    ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abc123xyz"}]',
     [("abc123xyz", "f", '{"a": 1}')], ""),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]q1w2e3r4t[ARGS]{"b": 2}',
     [("call_0", "f", '{"a": 1}'), ("q1w2e3r4t", "g", '{"b": 2}')], ""),
    ("mistral", "no calls here", [], "no calls here"),
])
def test_tool_parsers(parser, text, calls, content):
    parsed = parse_completion(text, parser)
    assert [(c["id"], c["name"], c["arguments"]) for c in parsed.calls] == calls
    assert parsed.content == content


def test_think_block_is_reasoning_whatever_the_parser():
    parsed = parse_completion('<think>\nplan it\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
                              "hermes")
    assert (parsed.reasoning, parsed.content, parsed.first_kind) == ("plan it", "", "reasoning")
    assert parse_completion("<think>still thinking", "mistral").reasoning == "still thinking"
    assert parse_completion('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', "hermes").first_kind == (
        "tool_call")


def raw_vendor(parser: str = "hermes") -> Vendor:
    return Vendor("m", "raw", "m", "http://vendor.test/raw/v1",
                  dialect=Dialect(endpoint="completions", chat_template=str(HERMES), tool_parser=parser))


def test_completions_request_keeps_every_field_but_messages_and_tools():
    sample = Sample("1", 1, {"messages": CONVERSATION, "tools": [TOOL], "tool_choice": "auto", "temperature": 0.6})
    path, body = build_request(sample, raw_vendor())
    assert path == "completions" and set(body) == {"prompt", "tool_choice", "temperature", "model", "stream",
                                                   "stream_options"}
    assert body["prompt"] == load_chat_template(HERMES).render(CONVERSATION, [TOOL])
    assert completion_body({"messages": [{"role": "user", "content": "x"}], "n": 1}, load_chat_template(HERMES)) == {
        "prompt": "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n", "n": 1}


def text_event(text: str, finish: str | None = None) -> bytes:
    return sse({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "text": text, "finish_reason": finish}]})


def run_raw(texts: list[str], finish: str = "stop") -> tuple[dict, list[requests.PreparedRequest]]:
    events = [text_event(t) for t in texts] + [text_event("", finish)]
    events.append(sse({"id": "cmpl-1", "object": "text_completion", "choices": [],
                       "usage": {"prompt_tokens": 9, "completion_tokens": len(texts), "total_tokens": 9 + len(texts)}}))
    adapter = ScriptedAdapter(lambda request: (200, {"Content-Type": "text/event-stream"}, b"".join(events) + DONE))
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    item = WorkItem(ItemKey("m", "raw", "1", 1), Sample("1", 1, {"messages": CONVERSATION, "tools": [TOOL]}))
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy(retries=0))
    outcome = execute_item(ItemRun(session, raw_vendor(), "http://vendor.test/raw/v1", item, ctx))
    return outcome.record, adapter.requests


def test_a_stop_with_parsed_calls_becomes_tool_calls():
    record, sent = run_raw(["<think>\nhm", "m\n</think>\n\n", '<tool_call>\n{"name": "get_weather", ',
                            '"arguments": {"city": "Bergen"}}\n</tool_call>'])
    assert sent[0].url == "http://vendor.test/raw/v1/completions"
    assert json.loads(sent[0].body)["prompt"].endswith("<|im_start|>assistant\n")
    assert record["status"] == "success" and record["finish_reason"] == "tool_calls" and record["endpoint"] == (
        "completions")
    assert json.loads(record["tool_calls"]) == [{"id": "call_0", "name": "get_weather",
                                                 "arguments": '{"city": "Bergen"}'}]
    assert record["tool_call_count"] == 1 and record["saw_tool_call_delta"] is True and record["content"] == ""
    assert (record["ttft_kind"], record["reasoning_chars"], record["reasoning_field"]) == ("reasoning", 3, "think")
    assert record["transforms"] == "input_role_to_system" and record["total_tokens"] == 13


def test_plain_text_stays_a_stop_and_length_stays_length():
    record, _ = run_raw(["Hello", " there"])
    assert (record["finish_reason"], record["content"], record["tool_call_count"], record["ttft_kind"]) == (
        "stop", "Hello there", 0, "content")
    cut, _ = run_raw(['<tool_call>\n{"name": "get_weather", "arguments": {"ci'], finish="length")
    assert cut["finish_reason"] == "length" and json.loads(cut["tool_calls"])[0]["arguments"] == '{"ci'


def test_shipped_templates_are_packaged():
    names = {p.name for p in Path(TEMPLATES_DIR).glob("*.jinja")}
    assert "hermes.jinja" in names
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert "data/templates/*.jinja" in pyproject and '"jinja2' in pyproject
