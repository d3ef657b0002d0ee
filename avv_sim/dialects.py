"""Vendor dialects of the simulator: the ``require_reasoning_content`` and ``broken_template`` quirks, the
``/v1/completions`` endpoint (prompt in, decisions out as text) and its wire format.

Pure (no I/O). The server calls these around :func:`avv_sim.plan.make_plan`:

- ``require_reasoning_content``: a chat request whose history has an assistant turn with ``tool_calls``
  and without a non-empty ``reasoning_content`` is answered 400 (as Kimi K2.5 / K2-thinking deployments do).
- ``broken_template`` (chat): the calls the model makes go out as content, one Markdown ``json`` fence per
  call (``{"name": …, "arguments": …}``), and finish ``stop`` — what a deployment with a broken chat
  template / tool parser sends.
- completions: the prompt is parsed back (:mod:`avv_sim.prompt`), the plan is made from the same decision
  key as the chat request, and everything goes out as ``choices[0].text``: reasoning as a leading
  ``<think>…</think>`` block, calls in hermes format ``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``,
  finish ``stop`` (or ``length``). Markers cost no tokens; the tokens and their timing are those of the
  chat plan, so TTFT and TPS are the same in both modes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from avv_sim.draws import chance
from avv_sim.plan import Plan
from avv_sim.profiles import Profile
from avv_sim.prompt import parse_prompt
from avv_sim.request import RequestError
from avv_sim.tokens import Token, group_chunks
from avv_sim.wire import Wire, compact_json, json_string

REQUIRE_REASONING = "require_reasoning_content"
BROKEN_TEMPLATE = "broken_template"


class QuirkRejection(RequestError):
    """A request a quirk refuses (HTTP 400); ``fault`` names the quirk in the truth log."""

    def __init__(self, message: str, param: str | None, fault: str):
        super().__init__(message, param)
        self.fault = fault


def check_reasoning_content(profile: Profile, body: Mapping[str, Any], key: str, attempt: int) -> None:
    """Raise :class:`QuirkRejection` when ``require_reasoning_content`` applies and a tool-call turn of the
    history has no ``reasoning_content`` (drawn with the quirks' ``quirk_rate``, like every quirk)."""
    if REQUIRE_REASONING not in profile.quirks:
        return
    if profile.quirk_rate < 1.0 and not chance(profile.quirk_rate, profile.seed, key, attempt, "quirks"):
        return
    for i, message in enumerate(body.get("messages") or []):
        if (isinstance(message, Mapping) and message.get("role") == "assistant" and message.get("tool_calls")
                and not (isinstance(message.get("reasoning_content"), str) and message["reasoning_content"])):
            raise QuirkRejection(f"thinking is enabled but reasoning_content is missing in assistant tool call "
                                 f"message at index {i}", f"messages[{i}].reasoning_content", REQUIRE_REASONING)


def completion_view(body: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(the chat body the prompt was rendered from, the prompt). A prompt the shipped template did not make
    becomes one user message (no tools, so no calls)."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise RequestError("'prompt' must be a non-empty string", "prompt")
    messages, tools = parse_prompt(prompt)
    view = {k: v for k, v in body.items() if k != "prompt"}
    view["messages"] = messages or [{"role": "user", "content": prompt}]
    if tools:
        view["tools"] = tools
    return view, prompt


def _call_open(plan: Plan, index: int, fenced: bool) -> str:
    name = next(c.name for c in plan.tool_calls if c.index == index)
    head = '{"name": ' + json_string(name) + ', "arguments": '
    return ("```json\n" if fenced else "<tool_call>\n") + head


def text_calls(plan: Plan, style: str, per_chunk: int) -> list[dict[str, Any]]:
    """Re-render the plan's calls (and, for completions, its reasoning) as text, in place; the calls as
    planned, for the truth log (``text_tool_calls``). ``style``: ``fenced`` (broken_template) or ``hermes``."""
    fenced = style == "fenced"
    close_call = "}\n```" if fenced else "}\n</tool_call>"
    tokens: list[Token] = []
    previous: Token | None = None
    for tok in plan.tokens:
        prefix = ""
        if tok.kind == "reasoning" and not fenced and (previous is None or previous.kind != "reasoning"):
            prefix = "<think>\n"
        if previous is not None and previous.kind == "reasoning" and tok.kind != "reasoning" and not fenced:
            prefix = "\n</think>\n\n"
        if tok.kind == "tool" and tok.header:
            prefix += (close_call + "\n" if previous is not None and previous.kind == "tool" else "")
            prefix += _call_open(plan, tok.index, fenced)
        text = prefix + tok.text
        kind = "content" if fenced and tok.kind == "tool" else tok.kind
        tokens.append(Token(kind, text, 0 if kind == "content" else tok.index, tok.header and kind == "tool"))
        previous = tok
    if tokens and plan.finish_reason != "length":  # close what the last token left open
        last = tokens[-1]
        tail = close_call if plan.tokens[-1].kind == "tool" else "\n</think>\n\n" if (
            plan.tokens[-1].kind == "reasoning" and not fenced) else ""
        tokens[-1] = Token(last.kind, last.text + tail, last.index, last.header)
    calls = [{"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments, "broken": c.broken}
             for c in plan.tool_calls]
    plan.tokens, plan.chunks, plan.tool_calls = tokens, group_chunks(tokens, per_chunk), []
    if plan.finish_reason == "tool_calls":
        plan.finish_reason = "stop"
    return calls


def as_completion(plan: Plan, prompt: str, per_chunk: int) -> list[dict[str, Any]]:
    """Turn a chat plan into a completions plan (text, hermes calls, prompt tokens = ceil(len(prompt) / 4))."""
    plan.prompt_tokens = max(1, math.ceil(len(prompt) / 4))
    return text_calls(plan, "hermes", per_chunk)


class TextWire(Wire):
    """``text_completion`` events: every token chunk, whatever its kind, is ``choices[0].text``."""

    def __init__(self, plan: Plan, created: int, completion_id: str):
        super().__init__(plan, created, completion_id.replace("chatcmpl-", "cmpl-", 1))
        head = compact_json({"id": self.completion_id, "object": "text_completion", "created": created,
                       "model": plan.model})[:-1]
        self._head = head
        self._chunk_prefix = head + ',"choices":[{"index":0,"text":'
        self._chunk_suffix = ',"logprobs":null,"finish_reason":null}]}'

    def role_event(self) -> bytes:
        return self.frame(self._chunk_prefix + '""' + self._chunk_suffix)

    def delta_json(self, chunk: Any, position: int = -1) -> str:
        return json_string(chunk.text)

    def finish_event(self, with_usage: bool) -> bytes | None:
        reason = self.finish_reason()
        if reason is None and not with_usage:
            return None
        obj: dict[str, Any] = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "", "logprobs": None, "finish_reason": reason}]
        if with_usage:
            obj["usage"] = self.usage()
        return self.frame(compact_json(obj))

    def completion_body(self) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "".join(c.text for c in self.plan.chunks), "logprobs": None,
                           "finish_reason": self.finish_reason()}]
        obj["usage"] = self.usage()
        return obj
