"""Tool calls written into the content instead of ``tool_calls``: the detector shared by the harness (the
``tool_call_as_text`` anomaly, set when a record is made) and scoring (the ``as_text`` disagreement kind).

Pure: no I/O, no Locust. A *text call* is a call of one of the request's tools found in the assistant
content in one of these shapes:

- ``fenced_json``: a fenced block (```` ```json … ``` ````, any or no language tag) holding a JSON object
  (or a list of them) with ``name`` and ``arguments`` or ``parameters``;
- ``json``: the same object bare in the text (only looked for when no other shape matched);
- ``tool_call_tag``: ``<tool_call>{"name": …, "arguments": …}</tool_call>`` (Hermes / Qwen templates; the
  closing tag may be missing);
- ``kimi``: ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>``
  (Kimi K2's markers, the ``functions.`` prefix and ``:index`` suffix optional);
- ``mistral``: ``[TOOL_CALLS]`` followed by a JSON list / object, or by ``NAME[ARGS]{…}``
  (``NAME[CALL_ID]id[ARGS]{…}``).

An object also counts in the OpenAI shape ``{"type": "function", "function": {"name", "arguments"}}`` and
inside ``{"tool_calls": [...]}``. ``arguments`` may be an object or a JSON string. A name that is not one of
the request's tools is not a text call (prose that mentions some JSON is not a call).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Content beyond this many characters is not scanned.
MAX_SCAN_CHARS = 200_000
#: JSON decodes tried per content at most (each is linear; adversarial content could otherwise ask for one per
#: character): the detector runs on the worker for every response and must stay in milliseconds.
MAX_DECODES = 256
PATTERNS = ("fenced_json", "json", "tool_call_tag", "kimi", "mistral")

_DECODER = json.JSONDecoder()
_FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.S)
_TAG_RE = re.compile(r"<tool_call>")
_KIMI_BEGIN, _KIMI_ARGS, _KIMI_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_KIMI_SECTION_END = "<|tool_calls_section_end|>"
#: Text calls found per content at most (a list of them is evidence enough; the rest is not read).
MAX_CALLS = 64
#: Characters kept of arguments that do not parse.
RAW_ARGS_CHARS = 2000
_MISTRAL_RE = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_NAMED_RE = re.compile(r"\s*(?P<name>[A-Za-z0-9_.:-]+)\s*(?:\[CALL_ID\][^\[]*)?\[ARGS\]")


@dataclass(frozen=True)
class TextCall:
    """One call found in the content: the tool's name, its arguments (parsed JSON when they parse, else the
    raw text) and the shape it was written in (one of :data:`PATTERNS`)."""

    name: str
    arguments: Any
    pattern: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "pattern": self.pattern}


def request_tool_names(tools: Iterable[Any] | None) -> frozenset[str]:
    """The function names of a request's ``tools`` (the OpenAI ``{"type": "function", "function": {…}}`` shape
    or a flat ``{"name": …}``)."""
    names = set()
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        if isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names)


class _Budget:
    """Decode attempts left for one content (see :data:`MAX_DECODES`)."""

    def __init__(self, attempts: int = MAX_DECODES):
        self.left = attempts

    def decode_at(self, text: str, pos: int) -> tuple[Any, int] | None:
        """The JSON value starting at ``pos`` (after whitespace) and the index after it; None when there is none
        or the budget is spent."""
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if self.left <= 0 or pos >= len(text) or text[pos] not in '{["':
            return None
        self.left -= 1
        try:
            return _DECODER.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return None


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


def _calls_in(value: Any) -> Iterator[tuple[str, Any]]:
    """(name, arguments) of every call-shaped object in a decoded JSON value."""
    if isinstance(value, list):
        for item in value:
            yield from _calls_in(item)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("tool_calls"), list):
        yield from _calls_in(value["tool_calls"])
        return
    fn = value.get("function") if isinstance(value.get("function"), dict) else value
    name = fn.get("name")
    if isinstance(name, str) and ("arguments" in fn or "parameters" in fn):
        yield name, _maybe_json(fn["arguments"] if "arguments" in fn else fn["parameters"])


def _from_fences(text: str, budget: _Budget) -> Iterator[tuple[str, Any, str]]:
    for match in _FENCE_RE.finditer(text):
        decoded = budget.decode_at(match.group(1), 0)
        if decoded is not None:
            for name, args in _calls_in(decoded[0]):
                yield name, args, "fenced_json"


def _from_tags(text: str, budget: _Budget) -> Iterator[tuple[str, Any, str]]:
    for match in _TAG_RE.finditer(text):  # the closing tag may be missing: the JSON value ends the call
        decoded = budget.decode_at(text, match.end())
        if decoded is not None:
            for name, args in _calls_in(decoded[0]):
                yield name, args, "tool_call_tag"


def _kimi_name(call_id: str) -> str:
    name = call_id.strip()
    if name.startswith("functions."):
        name = name[len("functions."):]
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name


def _next(text: str, marker: str, pos: int) -> int:
    found = text.find(marker, pos)
    return len(text) if found < 0 else found


def _from_kimi(text: str, budget: _Budget) -> Iterator[tuple[str, Any, str]]:
    """``<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>`` (the end may be missing)."""
    begin = text.find(_KIMI_BEGIN)
    while begin >= 0:
        start = begin + len(_KIMI_BEGIN)
        following = _next(text, _KIMI_BEGIN, start)
        marker = text.find(_KIMI_ARGS, start, following)
        if marker >= 0:
            body = marker + len(_KIMI_ARGS)
            end = min(following, _next(text, _KIMI_END, body), _next(text, _KIMI_SECTION_END, body))
            yield _kimi_name(text[start:marker]), _maybe_json(text[body:end].strip()[:MAX_SCAN_CHARS]), "kimi"
        begin = following if following < len(text) else -1


def _from_mistral(text: str, budget: _Budget) -> Iterator[tuple[str, Any, str]]:
    for match in _MISTRAL_RE.finditer(text):
        pos = match.end()
        decoded = budget.decode_at(text, pos)
        if decoded is not None and isinstance(decoded[0], (list, dict)):
            for name, args in _calls_in(decoded[0]):
                yield name, args, "mistral"
            continue
        while (named := _MISTRAL_NAMED_RE.match(text, pos)) is not None:
            args = budget.decode_at(text, named.end())
            if args is None:
                raw = text[named.end(): min(_next(text, "[TOOL_CALLS]", named.end()), named.end() + RAW_ARGS_CHARS)]
                yield named.group("name"), raw.strip(), "mistral"
                break
            yield named.group("name"), args[0], "mistral"
            pos = args[1]


def _from_bare(text: str, budget: _Budget) -> Iterator[tuple[str, Any, str]]:
    pos = 0
    while budget.left > 0:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        decoded = budget.decode_at(text, start)
        if decoded is None:
            pos = start + 1
            continue
        for name, args in _calls_in(decoded[0]):
            yield name, args, "json"
        pos = decoded[1]


def find_text_calls(content: str | None, tool_names: Sequence[str] | frozenset[str] | set[str]) -> list[TextCall]:
    """Calls of the request's tools (``tool_names``) written into ``content`` (see the module docstring).

    Empty when the content is empty, when the request has no tools, or when nothing call-shaped names one
    of them. The bare-JSON scan runs only when no marked shape (fence, tag, markers) matched. At most
    :data:`MAX_DECODES` JSON decodes are tried and :data:`MAX_CALLS` calls returned, so a pathological content
    costs milliseconds, not seconds.
    """
    if not content or not tool_names:
        return []
    text = content[:MAX_SCAN_CHARS]
    names = set(tool_names)
    if not any(name in text for name in names):  # every shape spells the tool's name out
        return []
    budget = _Budget()
    found: list[TextCall] = []
    for finder in (_from_fences, _from_tags, _from_kimi, _from_mistral):
        found += itertools.islice((TextCall(n, a, p) for n, a, p in finder(text, budget) if n in names),
                                  MAX_CALLS - len(found))
    if not found and any(f'"{name}"' in text for name in names):  # bare JSON: the name is a JSON string
        found = list(itertools.islice((TextCall(n, a, p) for n, a, p in _from_bare(text, budget) if n in names),
                                      MAX_CALLS))
    return found
