"""Reading a raw-completions prompt back into ``messages`` and ``tools``: the inverse of the hermes-style
template the project ships (``avv_harness/data/templates/hermes.jinja``).

Pure. The format: ChatML turns ``<|im_start|>ROLE\\n…<|im_end|>\\n``; with tools, the first turn is a system
turn holding the system message (if any) and the tools as one JSON line each inside ``<tools>…</tools>``;
an assistant turn with calls is ``<|im_start|>assistant`` + optional ``\\n`` + content + ``\\n<tool_call>\\n{"name":
"NAME", "arguments": ARGS}\\n</tool_call>`` per call; consecutive tool results are one user turn of
``\\n<tool_response>\\n…\\n</tool_response>`` blocks; the prompt ends with ``<|im_start|>assistant\\n``.

What the template does not render (tool-call ids, ``tool_call_id``, reasoning fields) cannot come back;
:mod:`avv_sim.decision_key` leaves exactly those out of the decision key. Text that itself contains the
template's markers is not told apart from them. A prompt in another format parses to no turns (the
caller then treats the whole prompt as one user message).
"""

from __future__ import annotations

import json
import re

from avv_core.json_types import JSONObject, JSONValue

START, END = "<|im_start|>", "<|im_end|>\n"
TOOLS_HEADER = "# Tools\n\nYou may call one or more functions to assist with the user query."
_TOOLS_BLOCK = re.compile(r"<tools>\n(.*?)\n</tools>", re.DOTALL)
_CALL = re.compile(r"\n<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
_CALL_PAYLOAD = re.compile(r'\A\{"name": "(.*?)", "arguments": (.*)\}\Z', re.DOTALL)
_RESPONSE = re.compile(r"\n<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


def _system_turn(body: str) -> tuple[JSONObject | None, list[JSONValue] | None]:
    """(system message or None, tools or None) from the first system turn's body."""
    text = body[1:]
    if TOOLS_HEADER not in text:
        return {"role": "system", "content": text}, None
    at = text.index(TOOLS_HEADER)
    tools = []
    block = _TOOLS_BLOCK.search(text, at)
    if block:
        tools = [json.loads(line) for line in block.group(1).split("\n") if line.strip()]
    if at == 0:
        return None, tools
    return {"role": "system", "content": text[:at].removesuffix("\n\n")}, tools


def _assistant_turn(body: str) -> JSONObject:
    calls = list(_CALL.finditer(body))
    if not calls:
        return {"role": "assistant", "content": body[1:]}
    message: JSONObject = {"role": "assistant", "content": body[: calls[0].start()].removeprefix("\n")}
    parsed = []
    for match in calls:
        payload = _CALL_PAYLOAD.match(match.group(1))
        if payload:
            parsed.append({"type": "function", "function": {"name": payload.group(1), "arguments": payload.group(2)}})
    message["tool_calls"] = parsed
    return message


def parse_prompt(prompt: str) -> tuple[list[JSONObject], list[JSONValue] | None]:
    """(messages, tools) of a prompt rendered with the shipped hermes template; ([], None) when it is not."""
    turns = prompt.split(START)[1:]
    messages: list[JSONObject] = []
    tools: list[JSONValue] | None = None
    for position, turn in enumerate(turns):
        if not turn.endswith(END):
            continue  # the generation prompt (or a turn cut short)
        role, newline, _ = turn.partition("\n")
        if not newline:
            continue
        body = turn[len(role): -len(END)]
        if position == 0 and role == "system":
            system, tools = _system_turn(body)
            if system is not None:
                messages.append(system)
        elif role == "assistant":
            messages.append(_assistant_turn(body))
        elif role == "user" and body.startswith("\n<tool_response>\n") and body.endswith("\n</tool_response>"):
            messages += [{"role": "tool", "content": m.group(1)} for m in _RESPONSE.finditer(body)]
        else:
            messages.append({"role": role, "content": body[1:]})
    return messages, tools
