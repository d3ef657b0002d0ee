"""Reading tool calls out of JSON text: the pieces the text tool-call formats (:mod:`avv_core.tool_formats`)
are built from.

Layer: pure core (no I/O, imports nothing else of ours). Two readers with two jobs:

- the as-text detector's, bounded: :class:`DecodeBudget` tries at most :data:`MAX_DECODES` JSON decodes per
  content (adversarial content could otherwise ask for one per character) and :func:`calls_in` finds every
  call-shaped object in a decoded value (``{"name", "arguments" | "parameters"}``, the OpenAI
  ``{"type": "function", "function": {…}}`` shape, a list of them, ``{"tool_calls": [...]}``);
- raw mode's, forgiving: :func:`call_from_json_text` reads one ``{"name": …, "arguments": …}`` object and,
  when its JSON is broken, still the name and the raw argument text (a broken call counts against schema
  accuracy instead of vanishing into content).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from avv_core.canonical import JSON_ERRORS, UNPARSED, parse_json_text
from avv_core.json_types import JSONObject, JSONValue

#: JSON decodes tried per content at most (each is linear; adversarial content could otherwise ask for one per
#: character): the detector runs on the worker for every response and must stay in milliseconds.
MAX_DECODES = 256

_DECODER = json.JSONDecoder()


class DecodeBudget:
    """Decode attempts left for one content (see :data:`MAX_DECODES`)."""

    def __init__(self, attempts: int = MAX_DECODES):
        self.left = attempts

    def decode_at(self, text: str, pos: int) -> tuple[JSONValue, int] | None:
        """The JSON value starting at ``pos`` (after whitespace) and the index after it; None when there is none
        or the budget is spent."""
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if self.left <= 0 or pos >= len(text) or text[pos] not in '{["':
            return None
        self.left -= 1
        try:
            return _DECODER.raw_decode(text, pos)
        except JSON_ERRORS:  # an integer past Python's digit limit too: not a value we can read
            return None


def maybe_json(value: object) -> JSONValue:
    """A string's JSON value when it parses, else the value as it is."""
    if isinstance(value, str):
        parsed = parse_json_text(value)
        return value if parsed is UNPARSED else parsed
    return value


def calls_in(value: object) -> Iterator[tuple[str, JSONValue]]:
    """(name, arguments) of every call-shaped object in a decoded JSON value; arguments that are a JSON string
    are decoded."""
    if isinstance(value, list):
        for item in value:
            yield from calls_in(item)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("tool_calls"), list):
        yield from calls_in(value["tool_calls"])
        return
    inner = value.get("function")
    fn: JSONObject = inner if isinstance(inner, dict) else value
    name = fn.get("name")
    if isinstance(name, str) and ("arguments" in fn or "parameters" in fn):
        yield name, maybe_json(fn["arguments"] if "arguments" in fn else fn["parameters"])


def bare_calls(text: str, budget: DecodeBudget) -> Iterator[tuple[str, JSONValue]]:
    """(name, arguments) of the call objects anywhere in a text, bare (not in a format's markers)."""
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
        yield from calls_in(decoded[0])
        pos = decoded[1]


def arguments_text(value: object) -> str:
    """A call's arguments as the text a ``tool_calls`` delta would carry (``{}`` when there are none)."""
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_NAME_FIELD = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS_FIELD = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*)\}\s*\Z', re.DOTALL)
_ARGS_CUT = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*)\Z', re.DOTALL)  # the object never closed


def call_from_json_text(payload: str) -> dict[str, str] | None:
    """A call ``{"name", "arguments"}`` from ``{"name": …, "arguments": …}`` text; the raw argument text (and
    an empty name when none can be read) when the JSON is broken; None when the text is no call."""
    obj = parse_json_text(payload)
    if obj is UNPARSED:
        obj = None
    if isinstance(obj, dict) and ("name" in obj or "arguments" in obj):
        return {"name": str(obj.get("name") or ""),
                "arguments": arguments_text(obj.get("arguments", obj.get("parameters")))}
    if obj is not None:
        return None
    name = _NAME_FIELD.search(payload)
    args = _ARGS_FIELD.search(payload) or _ARGS_CUT.search(payload)
    if not name and not args:
        return None
    return {"name": _json_string(name.group(1)) if name else "",
            "arguments": args.group(1).strip() if args else payload.strip()}


def _json_string(escaped: str) -> str:
    """The text of a JSON string's inside (``caf\\u00e9`` → ``café``); as written when its escapes are broken."""
    text = parse_json_text(f'"{escaped}"')
    return text if isinstance(text, str) else escaped


def json_call_head(name: str) -> str:
    """How a call written as a JSON object begins, up to its arguments: ``{"name": "NAME", "arguments": ``
    (the object closes with ``}`` after them)."""
    return '{"name": ' + json.dumps(name) + ', "arguments": '
