"""Text tool-call formats, each declared once: how raw mode parses it out of a completion, how the as-text
detector finds it in content, and how the simulator writes it.

Layer: pure core (no I/O; imports only avv_core). A :class:`ToolFormat` is one declaration; the registry
:data:`FORMATS` is derived from them, and so are the ``tool_parser`` values of the vendor config and of the
simulator's knob (:data:`TOOL_PARSERS`) and the README table (:func:`render_format_table`). Adding a format
= one declaration here (plus its test). Used by:

- raw mode: :func:`parse_completion` splits a completion into reasoning (a leading ``<think>`` block,
  :mod:`avv_core.reasoning`), content and the calls of the vendor's format. A call whose JSON cannot be
  parsed is kept with its raw argument text, so it counts against schema accuracy instead of vanishing.
- the as-text detector (the ``tool_call_as_text`` anomaly, scoring's ``as_text`` disagreements):
  :func:`find_text_calls` looks for calls of the request's tools in the content in every format (reported
  with the format's ``label``), and when none matched, for a call object bare in the text (``json``). Other
  names are no call. The scan is bounded: :data:`MAX_SCAN_CHARS`, :data:`MAX_DECODES`, :data:`MAX_CALLS`.
- the simulator (``broken_template``, ``/v1/completions``): each call is ``write``'s text before the
  arguments, the arguments, the text after; calls are separated by :data:`CALL_SEPARATOR`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from avv_core.call_json import (
    MAX_DECODES,
    DecodeBudget,
    arguments_text,
    bare_calls,
    call_from_json_text,
    calls_in,
    json_call_head,
    maybe_json,
)
from avv_core.canonical import UNPARSED, parse_json_text
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.reasoning import split_reasoning, starts_with_reasoning

__all__ = ["CALL_SEPARATOR", "FORMATS", "MAX_CALLS", "MAX_DECODES", "MAX_SCAN_CHARS", "PATTERNS", "TOOL_PARSERS",
           "CallText", "ParsedText", "TextCall", "ToolFormat", "find_text_calls", "parse_completion",
           "render_format_table", "request_tool_names"]

#: Content beyond this many characters is not scanned by the detector.
MAX_SCAN_CHARS = 200_000
#: Text calls found per content at most (a list of them is evidence enough; the rest is not read).
MAX_CALLS = 64
#: Characters kept of arguments that do not parse (detector).
RAW_ARGS_CHARS = 2000
#: What the simulator writes between two calls.
CALL_SEPARATOR = "\n"

#: Raw mode's reading of a text: (the text outside the calls, the calls ``{"id"?, "name", "arguments"}`` in
#: order, where the first call starts or None).
Parsed = tuple[str, list[dict[str, str]], "int | None"]


@dataclass(frozen=True)
class CallText:
    """One call as the simulator writes it: ``before`` + ``arguments`` + ``after``."""

    before: str  # up to the arguments (the call's name is in here)
    arguments: str  # the arguments as the format spells them (the JSON text itself for the JSON formats)
    after: str  # what closes the call


@dataclass(frozen=True)
class ToolFormat:
    """One text tool-call format."""

    name: str  # the ``tool_parser`` value (vendor config, simulator knob)
    label: str  # the detector's name for the shape (``TextCall.pattern``)
    shape: str  # one line for the README: what a call looks like, and who writes it
    parse: Callable[[str], Parsed]  # raw mode: the calls in a completion text (after any <think> block)
    detect: Callable[[str, DecodeBudget], Iterator[tuple[str, JSONValue]]]  # detector: (name, arguments) in content
    write: Callable[[str, str, int], CallText]  # simulator: (name, JSON arguments, call index) → the call's text
    detect_first: bool = False  # scanned before the others (their calls may sit inside it)


def _next(text: str, marker: str, pos: int) -> int:
    found = text.find(marker, pos)
    return len(text) if found < 0 else found


def _numbered(calls: list[dict[str, str]], prefix: str = "call_") -> list[dict[str, str]]:
    return [{"id": call.get("id") or f"{prefix}{i}", "name": call["name"], "arguments": call["arguments"]}
            for i, call in enumerate(calls)]


# ------------------------------------------------------------------------ hermes: <tool_call>{…}</tool_call>

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_HERMES_TAG = re.compile(r"<tool_call>")


def _parse_blocks(text: str, block: re.Pattern[str], read: Callable[[str], dict[str, str] | None]) -> Parsed:
    """The calls of the ``block`` matches whose first group ``read`` reads as a call; the rest is content."""
    calls, kept, last, first = [], [], 0, None
    for match in block.finditer(text):
        call = read(match.group(1))
        if call is None:
            continue
        first = match.start() if first is None else first
        kept.append(text[last:match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    return "".join(kept), _numbered(calls), first


def _parse_hermes(text: str) -> Parsed:
    return _parse_blocks(text, _HERMES, call_from_json_text)


def _detect_hermes(text: str, budget: DecodeBudget) -> Iterator[tuple[str, JSONValue]]:
    for match in _HERMES_TAG.finditer(text):  # the closing tag may be missing: the JSON value ends the call
        decoded = budget.decode_at(text, match.end())
        if decoded is not None:
            yield from calls_in(decoded[0])


def _write_hermes(name: str, arguments: str, index: int) -> CallText:
    return CallText("<tool_call>\n" + json_call_head(name), arguments, "}\n</tool_call>")


# ----------------------------------------------------------------- kimi: <|tool_call_begin|>functions.NAME:IDX…

_KIMI_BEGIN, _KIMI_ARGS, _KIMI_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_KIMI_SECTION_BEGIN, _KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
_KIMI_SECTION = re.compile(r"<\|tool_calls_section_begin\|>(.*?)(?:<\|tool_calls_section_end\|>|\Z)", re.DOTALL)
_KIMI_CALL = re.compile(r"<\|tool_call_begin\|>\s*(?P<id>[^\s<]+)\s*<\|tool_call_argument_begin\|>\s*(?P<args>.*?)"
                        r"\s*(?:<\|tool_call_end\|>|\Z)", re.DOTALL)


def _kimi_parsed_name(call_id: str) -> str:
    """Raw mode: ``functions.get_weather:0`` → ``get_weather`` (``get_weather:0`` → ``get_weather``)."""
    head = call_id.rsplit(":", 1)[0]
    return head.split(".", 1)[1] if "." in head else head


def _kimi_detected_name(call_id: str) -> str:
    """Detector: without a ``functions.`` prefix and a numeric ``:IDX`` suffix, when they are there."""
    name = call_id.strip()
    if name.startswith("functions."):
        name = name[len("functions."):]
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name


def _parse_kimi(text: str) -> Parsed:
    calls: list[dict[str, str]] = []
    content, first = text, None
    for section in _KIMI_SECTION.finditer(text):
        first = section.start() if first is None else first
        content = content.replace(section.group(0), "", 1)
        for match in _KIMI_CALL.finditer(section.group(1)):
            calls.append({"id": match.group("id"), "name": _kimi_parsed_name(match.group("id")),
                          "arguments": match.group("args")})
    return content, _numbered(calls), first if calls else None


def _detect_kimi(text: str, budget: DecodeBudget) -> Iterator[tuple[str, JSONValue]]:
    """``<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>`` (no section needed, the end
    may be missing)."""
    begin = text.find(_KIMI_BEGIN)
    while begin >= 0:
        start = begin + len(_KIMI_BEGIN)
        following = _next(text, _KIMI_BEGIN, start)
        marker = text.find(_KIMI_ARGS, start, following)
        if marker >= 0:
            body = marker + len(_KIMI_ARGS)
            end = min(following, _next(text, _KIMI_END, body), _next(text, _KIMI_SECTION_END, body))
            yield _kimi_detected_name(text[start:marker]), maybe_json(text[body:end].strip()[:MAX_SCAN_CHARS])
        begin = following if following < len(text) else -1


def _write_kimi(name: str, arguments: str, index: int) -> CallText:
    return CallText(f"{_KIMI_SECTION_BEGIN}{_KIMI_BEGIN}functions.{name}:{index}{_KIMI_ARGS}", arguments,
                    _KIMI_END + _KIMI_SECTION_END)


# ---------------------------------------------------------------------- json_fenced: ```json\n{…}\n```

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)(?:\n```|\Z)", re.DOTALL)
_FENCE_DETECT = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.S)


def _parse_json_fenced(text: str) -> Parsed:
    calls: list[dict[str, str]] = []
    content, first = text, None
    for match in _FENCE.finditer(text):
        payload = match.group(1).strip()
        found: list[dict[str, str]] = []
        obj = parse_json_text(payload)
        if obj is UNPARSED:
            obj = None
        items = obj if isinstance(obj, list) else [obj] if obj is not None else []
        for item in items:
            if isinstance(item, dict) and "name" in item:
                found.append({"name": str(item["name"]),
                              "arguments": arguments_text(item.get("arguments", item.get("parameters")))})
        if obj is None:
            call = call_from_json_text(payload)
            found = [call] if call else []
        if found:
            first = match.start() if first is None else first
            calls += found
            content = content.replace(match.group(0), "", 1)
    return content, _numbered(calls), first


def _detect_json_fenced(text: str, budget: DecodeBudget) -> Iterator[tuple[str, JSONValue]]:
    for match in _FENCE_DETECT.finditer(text):  # any or no language tag
        decoded = budget.decode_at(match.group(1), 0)
        if decoded is not None:
            yield from calls_in(decoded[0])


def _write_json_fenced(name: str, arguments: str, index: int) -> CallText:
    return CallText("```json\n" + json_call_head(name), arguments, "}\n```")


# ------------------------------------------------------------------ mistral: [TOOL_CALLS][…] or NAME[ARGS]{…}

_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_RE = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_ARGS = re.compile(r"^\s*(?P<name>[^\s\[\]{}]+)(?:\[CALL_ID\](?P<id>[^\s\[]+))?\[ARGS\](?P<args>.*)\Z",
                           re.DOTALL)
_MISTRAL_NAMED = re.compile(r"\s*(?P<name>[A-Za-z0-9_.:-]+)\s*(?:\[CALL_ID\][^\[]*)?\[ARGS\]")


def _parse_mistral(text: str) -> Parsed:
    start = text.find(_MISTRAL)
    if start < 0:
        return text, [], None
    calls: list[dict[str, str]] = []
    for piece in text[start:].split(_MISTRAL)[1:]:
        piece = piece.strip()
        if not piece:
            continue
        if piece.startswith("["):
            items = parse_json_text(piece)
            if isinstance(items, list):
                calls += [{"id": str(item.get("id") or ""), "name": str(item.get("name") or ""),
                           "arguments": arguments_text(item.get("arguments"))}
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


def _detect_mistral(text: str, budget: DecodeBudget) -> Iterator[tuple[str, JSONValue]]:
    for match in _MISTRAL_RE.finditer(text):
        pos = match.end()
        decoded = budget.decode_at(text, pos)
        if decoded is not None and isinstance(decoded[0], (list, dict)):
            yield from calls_in(decoded[0])
            continue
        while (named := _MISTRAL_NAMED.match(text, pos)) is not None:
            args = budget.decode_at(text, named.end())
            if args is None:
                raw = text[named.end(): min(_next(text, _MISTRAL, named.end()), named.end() + RAW_ARGS_CHARS)]
                yield named.group("name"), raw.strip()
                break
            yield named.group("name"), args[0]
            pos = args[1]


def _write_mistral(name: str, arguments: str, index: int) -> CallText:
    return CallText(f"{_MISTRAL}{name}[ARGS]", arguments, "")


# ------------------------------------------------------------------------------------------- the registry

#: Every format, in the order the vendor config lists them; the detector scans ``detect_first`` ones first.
FORMATS: dict[str, ToolFormat] = {f.name: f for f in (
    ToolFormat("hermes", "tool_call_tag",
               '`<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Qwen2.5, Hermes 2 Pro …; the closing tag '
               "may be missing)", _parse_hermes, _detect_hermes, _write_hermes),
    ToolFormat("kimi", "kimi",
               "`<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}"
               "<|tool_call_end|><|tool_calls_section_end|>` (Kimi K2; raw mode keeps the id and reads the name "
               "from it)", _parse_kimi, _detect_kimi, _write_kimi),
    ToolFormat("json_fenced", "fenced_json",
               'Markdown code fences holding `{"name": …, "arguments": …}` (or a list of such objects; also the '
               'OpenAI `{"type": "function", "function": {…}}` shape)',
               _parse_json_fenced, _detect_json_fenced, _write_json_fenced, detect_first=True),
    ToolFormat("mistral", "mistral",
               "`[TOOL_CALLS]` followed by a JSON list of calls, or by `NAME[ARGS]{…}` (newer tokenizers; "
               "`NAME[CALL_ID]ID[ARGS]{…}` too)", _parse_mistral, _detect_mistral, _write_mistral),
)}
#: The vendor config's ``tool_parser`` values (and the simulator's ``tool_parser`` knob's).
TOOL_PARSERS: tuple[str, ...] = tuple(FORMATS)
_DETECT_ORDER = tuple(sorted(FORMATS.values(), key=lambda f: not f.detect_first))
BARE_JSON = "json"  # the detector's label for a call object bare in the text
#: Every shape the detector reports (``TextCall.pattern``).
PATTERNS: tuple[str, ...] = (*(f.label for f in _DETECT_ORDER), BARE_JSON)


def render_format_table() -> str:
    """The README's table of formats (``tool_parser`` values), from the registry."""
    rows = ["| `tool_parser` | a call in the text |", "|---|---|"]
    rows += [f"| `{f.name}` | {f.shape.replace('|', chr(92) + '|')} |" for f in FORMATS.values()]
    return "\n".join(rows)


# ---------------------------------------------------------------------------------- raw mode: the parse


@dataclass
class ParsedText:
    """A completion text read back: its reasoning, content and calls."""

    content: str  # the text outside reasoning and calls, stripped
    reasoning: str = ""  # the text of the leading <think> block
    calls: list[dict[str, str]] = field(default_factory=list)  # {"id", "name", "arguments"} in order
    first_kind: str | None = None  # what the text begins with: reasoning | tool_call | content (None: empty)


def parse_completion(text: str, parser: str) -> ParsedText:
    """Reasoning, content and calls of a whole completion text; ``parser`` is one of :data:`TOOL_PARSERS`."""
    reasoning, rest = split_reasoning(text)
    content, calls, first_call = FORMATS[parser].parse(rest)
    content = content.strip()
    first: str | None
    if starts_with_reasoning(text):
        first = "reasoning"
    elif first_call is not None and first_call <= len(rest) - len(rest.lstrip()):
        first = "tool_call"
    else:
        first = "content" if content else ("tool_call" if calls else None)
    return ParsedText(content, reasoning, calls, first)


# --------------------------------------------------------------------------------- the as-text detector


@dataclass(frozen=True)
class TextCall:
    """One call found in the content: the tool's name, its arguments (parsed JSON when they parse, else the
    raw text) and the shape it was written in (one of :data:`PATTERNS`)."""

    name: str
    arguments: JSONValue
    pattern: str

    def as_dict(self) -> JSONObject:
        return {"name": self.name, "arguments": self.arguments, "pattern": self.pattern}


def request_tool_names(tools: Iterable[object] | None) -> frozenset[str]:
    """The function names of a request's ``tools`` (the OpenAI ``{"type": "function", "function": {…}}`` shape
    or a flat ``{"name": …}``)."""
    names = set()
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        inner = tool.get("function")
        fn: JSONMapping = inner if isinstance(inner, Mapping) else tool
        if isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names)


def find_text_calls(content: str | None, tool_names: Sequence[str] | frozenset[str] | set[str]) -> list[TextCall]:
    """Calls of the request's tools (``tool_names``) written into ``content`` in any format (see the module
    docstring).

    Empty when the content is empty, when the request has no tools, or when nothing call-shaped names one
    of them. The bare-JSON scan runs only when no format matched. At most :data:`MAX_DECODES` JSON decodes are
    tried and :data:`MAX_CALLS` calls returned, so a pathological content costs milliseconds, not seconds.
    """
    if not content or not tool_names:
        return []
    text = content[:MAX_SCAN_CHARS]
    names = set(tool_names)
    if not any(name in text for name in names):  # every shape spells the tool's name out
        return []
    budget = DecodeBudget()
    found: list[TextCall] = []
    for fmt in _DETECT_ORDER:
        found += itertools.islice((TextCall(n, a, fmt.label) for n, a in fmt.detect(text, budget) if n in names),
                                  MAX_CALLS - len(found))
    if not found and any(f'"{name}"' in text for name in names):  # bare JSON: the name is a JSON string
        found = list(itertools.islice((TextCall(n, a, BARE_JSON) for n, a in bare_calls(text, budget)
                                       if n in names), MAX_CALLS))
    return found
