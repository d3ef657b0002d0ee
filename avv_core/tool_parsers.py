"""Raw-completions mode, the answer: reasoning, content and tool calls read back from a completion's text.

Layer: wire-client helper (pure). Parsers, by the ``tool_parser`` config key:

- ``hermes``: ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Qwen2.5, Hermes 2 Pro …).
- ``kimi``: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}
  <|tool_call_end|><|tool_calls_section_end|>``; the id is kept, the name is read from it.
- ``json_fenced``: Markdown code fences holding ``{"name": …, "arguments": …}`` (or a list of such objects).
- ``mistral``: ``[TOOL_CALLS]`` followed by a JSON list of calls, or by ``NAME[ARGS]{…}`` (newer tokenizers;
  ``NAME[CALL_ID]ID[ARGS]{…}`` too).

Reasoning is a leading ``<think>…</think>`` block (an unclosed one is reasoning to the end), whatever the
parser. A call whose JSON cannot be parsed is kept as a call with its raw argument text (and an empty name
when none can be read), so a broken call counts against schema accuracy instead of vanishing into content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

THINK_FIELD = "think"  # the reasoning_field value for reasoning read from <think> text


@dataclass
class ParsedText:
    content: str  # the text outside reasoning and calls, stripped
    reasoning: str = ""  # the text of the leading <think> block
    calls: list[dict[str, str]] = field(default_factory=list)  # {"id", "name", "arguments"} in order
    first_kind: str | None = None  # what the text begins with: reasoning | tool_call | content (None: empty)


_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, the rest) for a text that may begin with a ``<think>`` block."""
    match = _THINK.match(text)
    if not match:
        return "", text
    return match.group(1).strip(), text[match.end():]


def _arguments_text(value: Any) -> str:
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_NAME_FIELD = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS_FIELD = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*)\}\s*\Z', re.DOTALL)
_ARGS_CUT = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*)\Z', re.DOTALL)  # the object never closed


def _call_from_json_text(payload: str) -> dict[str, str] | None:
    """A call from ``{"name": …, "arguments": …}`` text; the raw argument text when the JSON is broken."""
    try:
        obj = json.loads(payload)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and ("name" in obj or "arguments" in obj):
        return {"name": str(obj.get("name") or ""),
                "arguments": _arguments_text(obj.get("arguments", obj.get("parameters")))}
    if obj is not None:
        return None
    name = _NAME_FIELD.search(payload)
    args = _ARGS_FIELD.search(payload) or _ARGS_CUT.search(payload)
    if not name and not args:
        return None
    return {"name": json.loads(f'"{name.group(1)}"') if name else "",
            "arguments": args.group(1).strip() if args else payload.strip()}


Parsed = tuple[str, list[dict[str, str]], "int | None"]  # content, calls, where the first call starts


def _numbered(calls: list[dict[str, str]], prefix: str = "call_") -> list[dict[str, str]]:
    return [{"id": call.get("id") or f"{prefix}{i}", "name": call["name"], "arguments": call["arguments"]}
            for i, call in enumerate(calls)]


_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)


def parse_hermes(text: str) -> Parsed:
    calls, kept, last, first = [], [], 0, None
    for match in _HERMES.finditer(text):
        call = _call_from_json_text(match.group(1))
        if call is None:
            continue
        first = match.start() if first is None else first
        kept.append(text[last:match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    return "".join(kept), _numbered(calls), first


_KIMI_SECTION = re.compile(r"<\|tool_calls_section_begin\|>(.*?)(?:<\|tool_calls_section_end\|>|\Z)", re.DOTALL)
_KIMI_CALL = re.compile(r"<\|tool_call_begin\|>\s*(?P<id>[^\s<]+)\s*<\|tool_call_argument_begin\|>\s*(?P<args>.*?)"
                        r"\s*(?:<\|tool_call_end\|>|\Z)", re.DOTALL)


def _kimi_name(call_id: str) -> str:
    """``functions.get_weather:0`` → ``get_weather`` (``get_weather:0`` → ``get_weather``)."""
    head = call_id.rsplit(":", 1)[0]
    return head.split(".", 1)[1] if "." in head else head


def parse_kimi(text: str) -> Parsed:
    calls: list[dict[str, str]] = []
    content, first = text, None
    for section in _KIMI_SECTION.finditer(text):
        first = section.start() if first is None else first
        content = content.replace(section.group(0), "", 1)
        for match in _KIMI_CALL.finditer(section.group(1)):
            calls.append({"id": match.group("id"), "name": _kimi_name(match.group("id")),
                          "arguments": match.group("args")})
    return content, _numbered(calls), first if calls else None


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)(?:\n```|\Z)", re.DOTALL)


def parse_json_fenced(text: str) -> Parsed:
    calls: list[dict[str, str]] = []
    content, first = text, None
    for match in _FENCE.finditer(text):
        payload = match.group(1).strip()
        found: list[dict[str, str]] = []
        try:
            obj = json.loads(payload)
        except ValueError:
            obj = None
        items = obj if isinstance(obj, list) else [obj] if obj is not None else []
        for item in items:
            if isinstance(item, dict) and "name" in item:
                found.append({"name": str(item["name"]),
                              "arguments": _arguments_text(item.get("arguments", item.get("parameters")))})
        if obj is None:
            call = _call_from_json_text(payload)
            found = [call] if call else []
        if found:
            first = match.start() if first is None else first
            calls += found
            content = content.replace(match.group(0), "", 1)
    return content, _numbered(calls), first


_MISTRAL_ARGS = re.compile(r"^\s*(?P<name>[^\s\[\]{}]+)(?:\[CALL_ID\](?P<id>[^\s\[]+))?\[ARGS\](?P<args>.*)\Z",
                           re.DOTALL)


def parse_mistral(text: str) -> Parsed:
    start = text.find("[TOOL_CALLS]")
    if start < 0:
        return text, [], None
    calls: list[dict[str, str]] = []
    for piece in text[start:].split("[TOOL_CALLS]")[1:]:
        piece = piece.strip()
        if not piece:
            continue
        if piece.startswith("["):
            try:
                items = json.loads(piece)
            except ValueError:
                items = None
            if isinstance(items, list):
                calls += [{"id": str(item.get("id") or ""), "name": str(item.get("name") or ""),
                           "arguments": _arguments_text(item.get("arguments"))}
                          for item in items if isinstance(item, dict)]
            else:
                calls.append({"name": "", "arguments": piece})
            continue
        match = _MISTRAL_ARGS.match(piece)
        if match:
            calls.append({"id": match.group("id") or "", "name": match.group("name"),
                          "arguments": match.group("args").strip()})
        else:
            calls.append({"name": "", "arguments": piece})
    return text[:start], _numbered(calls), start if calls else None


PARSERS: dict[str, Callable[[str], Parsed]] = {
    "hermes": parse_hermes,
    "kimi": parse_kimi,
    "json_fenced": parse_json_fenced,
    "mistral": parse_mistral,
}


def parse_completion(text: str, parser: str) -> ParsedText:
    """Reasoning, content and calls of a whole completion text."""
    reasoning, rest = split_reasoning(text)
    content, calls, first_call = PARSERS[parser](rest)
    content = content.strip()
    if _THINK.match(text):
        first = "reasoning"
    elif first_call is not None and first_call <= len(rest) - len(rest.lstrip()):
        first = "tool_call"
    else:
        first = "content" if content else ("tool_call" if calls else None)
    return ParsedText(content, reasoning, calls, first)
