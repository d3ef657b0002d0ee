"""Vendor dialects of the simulator: the ``require_reasoning_content`` and ``broken_template`` quirks, the
``/v1/completions`` endpoint (prompt in, decisions out as text).

Pure (no I/O). The server calls these around :func:`avv_sim.plan.make_plan`:

- ``require_reasoning_content``: a chat request whose history has an assistant turn with ``tool_calls``
  and without a non-empty ``reasoning_content`` is answered 400 (as Kimi K2.5 / K2-thinking deployments do).
- ``broken_template`` (chat): the calls the model makes go out as content, by default one Markdown ``json``
  fence per call (``{"name": …, "arguments": …}``), and finish ``stop`` — what a deployment with a broken
  chat template / tool parser sends.
- completions: the prompt is parsed back (:mod:`avv_sim.prompt`), the plan is made from the same decision
  key as the chat request, and everything goes out as ``choices[0].text`` (:class:`avv_sim.wire.TextWire`):
  reasoning as a leading ``<think>…</think>`` block, calls by default in hermes format
  ``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``, finish ``stop`` (or ``length``). Markers cost
  no tokens; the tokens and their timing are those of the chat plan, so TTFT and TPS are the same in both
  modes.

The calls are written by a text tool-call format of :mod:`avv_core.tool_formats`: the profile's
``tool_parser`` knob picks one, else the defaults above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.reasoning import THINK_CLOSE, THINK_OPEN
from avv_core.tool_formats import CALL_SEPARATOR, FORMATS, CallText, ToolFormat
from avv_sim.draws import chance
from avv_sim.plan import Plan
from avv_sim.profiles import Profile
from avv_sim.prompt import parse_prompt
from avv_sim.request import RequestError
from avv_sim.tokens import Token, group_chunks

REQUIRE_REASONING = "require_reasoning_content"
BROKEN_TEMPLATE = "broken_template"


class QuirkRejection(RequestError):
    """A request a quirk refuses (HTTP 400); ``fault`` names the quirk in the truth log."""

    def __init__(self, message: str, param: str | None, fault: str):
        super().__init__(message, param)
        self.fault = fault


def check_reasoning_content(profile: Profile, body: JSONMapping, key: str, attempt: int) -> None:
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


def completion_view(body: JSONMapping) -> tuple[JSONObject, str]:
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


BROKEN_TEMPLATE_FORMAT = "json_fenced"  # what broken_template writes when the profile names no tool_parser
COMPLETION_FORMAT = "hermes"  # what /v1/completions answers are written in when it names none


def _written_calls(plan: Plan, fmt: ToolFormat) -> dict[int, CallText]:
    """Each call of the plan as ``fmt`` writes it, from the argument text its tokens carry."""
    names = {c.index: c.name for c in plan.tool_calls}
    arguments: dict[int, str] = {}
    for tok in plan.tokens:
        if tok.kind == "tool":
            arguments[tok.index] = arguments.get(tok.index, "") + tok.text
    return {index: fmt.write(names[index], text, index) for index, text in arguments.items()}


def _respelled(tokens: list[Token], written: dict[int, CallText]) -> list[Token]:
    """The tokens, with the arguments of each call the format spells differently from its JSON (not the JSON
    formats) spread over that call's argument tokens: as many tokens as before, so the timing stays."""
    out = list(tokens)
    for index, call in written.items():
        positions = [i for i, t in enumerate(tokens) if t.kind == "tool" and t.index == index and not t.header]
        if "".join(tokens[i].text for i in positions) == call.arguments:
            continue
        positions = positions or [next(i for i, t in enumerate(tokens) if t.kind == "tool" and t.index == index)]
        text, n = call.arguments, len(positions)
        for k, i in enumerate(positions):
            out[i] = Token("tool", text[len(text) * k // n: len(text) * (k + 1) // n], index, tokens[i].header)
    return out


def _as_text(plan: Plan, fmt: ToolFormat, per_chunk: int, completion: bool) -> list[JSONObject]:
    """Re-render the plan's calls in ``fmt`` (and, for a completion, its reasoning as a ``<think>`` block), in
    place; the calls as planned, for the truth log (``text_tool_calls``). In a chat answer (broken_template)
    the calls become content and reasoning stays in its field."""
    written = _written_calls(plan, fmt)
    tokens: list[Token] = []
    previous: Token | None = None
    for tok in _respelled(plan.tokens, written):
        prefix = ""
        if tok.kind == "reasoning" and completion and (previous is None or previous.kind != "reasoning"):
            prefix = THINK_OPEN
        if previous is not None and previous.kind == "reasoning" and tok.kind != "reasoning" and completion:
            prefix = THINK_CLOSE
        if tok.kind == "tool" and tok.header:
            if previous is not None and previous.kind == "tool":
                prefix += written[previous.index].after + CALL_SEPARATOR
            prefix += written[tok.index].before
        text = prefix + tok.text
        kind = "content" if not completion and tok.kind == "tool" else tok.kind
        tokens.append(Token(kind, text, 0 if kind == "content" else tok.index, tok.header and kind == "tool"))
        previous = tok
    if tokens and plan.finish_reason != "length":  # close what the last token left open
        last, last_planned = tokens[-1], plan.tokens[-1]
        tail = written[last_planned.index].after if last_planned.kind == "tool" else THINK_CLOSE if (
            last_planned.kind == "reasoning" and completion) else ""
        tokens[-1] = Token(last.kind, last.text + tail, last.index, last.header)
    calls = [{"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments, "broken": c.broken}
             for c in plan.tool_calls]
    plan.tokens, plan.chunks, plan.tool_calls = tokens, group_chunks(tokens, per_chunk), []
    if plan.finish_reason == "tool_calls":
        plan.finish_reason = "stop"
    return calls


def text_calls(plan: Plan, tool_parser: str | None, per_chunk: int) -> list[JSONObject]:
    """broken_template: the plan's calls go out as content in the ``tool_parser`` format (default
    :data:`BROKEN_TEMPLATE_FORMAT`), finish ``stop``; the calls as planned, for the truth log."""
    return _as_text(plan, FORMATS[tool_parser or BROKEN_TEMPLATE_FORMAT], per_chunk, completion=False)


def as_completion(plan: Plan, prompt: str, per_chunk: int, tool_parser: str | None = None) -> list[JSONObject]:
    """Turn a chat plan into a completions plan (text; calls in the ``tool_parser`` format, default
    :data:`COMPLETION_FORMAT`; prompt tokens = ceil(len(prompt) / 4))."""
    plan.prompt_tokens = max(1, math.ceil(len(prompt) / 4))
    return _as_text(plan, FORMATS[tool_parser or COMPLETION_FORMAT], per_chunk, completion=True)
