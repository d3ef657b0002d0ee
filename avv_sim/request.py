"""What the simulator reads from a chat request (simulator, pure): its hash, its tools, ``tool_choice``,
``max_tokens`` and a prompt-token estimate; a malformed body raises :class:`RequestError` (HTTP 400).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from avv_core.canonical import canonical_json
from avv_core.json_types import JSONMapping, JSONValue

HASH_EXCLUDED_KEYS = ("model", "stream", "stream_options")


class RequestError(Exception):
    """A malformed request: the server answers 400 with an OpenAI-style error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def request_hash(body: JSONMapping) -> str:
    """sha256 hex of the canonical body without ``model``, ``stream`` and ``stream_options``."""
    stripped = {k: v for k, v in body.items() if k not in HASH_EXCLUDED_KEYS}
    return hashlib.sha256(canonical_json(stripped).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Tool:
    """A function of the request's ``tools``: its name and its parameters schema."""

    name: str
    schema: JSONMapping


def request_tools(body: JSONMapping) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("'tools' must be an array", "tools")
    out: list[Tool] = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise RequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}", f"tools[{i}]")
        params = fn.get("parameters")
        out.append(Tool(fn["name"], params if isinstance(params, Mapping) else {}))
    return out


def parse_tool_choice(body: JSONMapping, tools: list[Tool]) -> tuple[str, str | None]:
    """("auto" | "none" | "required" | "named", function name or None)."""
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":
        return "auto", None
    if choice in ("none", "required"):
        return choice, None
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        if isinstance(name, str):
            if name not in {t.name for t in tools}:
                raise RequestError(f"tool_choice names function {name!r}, which is not in 'tools'", "tool_choice")
            return "named", name
    raise RequestError(f"invalid tool_choice {choice!r}", "tool_choice")


def max_tokens_of(body: JSONMapping) -> int | None:
    """``max_completion_tokens`` (preferred) or ``max_tokens``; must be a positive integer."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"'{key}' must be a positive integer", key)
        return value
    return None


def prompt_tokens_of(body: JSONMapping) -> int:
    """Deterministic estimate: ceil(len(canonical messages + tools JSON) / 4)."""
    shown = {"messages": body.get("messages")}
    if body.get("tools") is not None:
        shown["tools"] = body.get("tools")
    return max(1, math.ceil(len(canonical_json(shown)) / 4))


#: Sampling parameters and the range a request may give them (else HTTP 400, unless the profile clamps them):
#: OpenAI's chat-completions ranges.
SAMPLING_RANGES: dict[str, tuple[float, float]] = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}


def out_of_range(body: JSONMapping) -> list[tuple[str, JSONValue]]:
    """The sampling parameters of ``body`` outside :data:`SAMPLING_RANGES` (a number outside it, or not a number),
    as (name, value)."""
    out = []
    for name, (low, high) in SAMPLING_RANGES.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            out.append((name, value))
    return out


def stop_sequences(body: JSONMapping) -> list[str]:
    """The request's ``stop``: a string or a list of strings (empty strings dropped); anything else is a 400."""
    stop = body.get("stop")
    if stop is None:
        return []
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise RequestError("'stop' must be a string or an array of strings", "stop")
    return [s for s in items if s]


def response_format_of(body: JSONMapping) -> tuple[str, JSONMapping | None] | None:
    """The request's ``response_format``: None (text), ``("json_object", None)`` or ``("json_schema", schema)``;
    a malformed one is a 400."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return "json_object", None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise RequestError("response_format.json_schema.schema must be an object", "response_format")
        return "json_schema", schema
    raise RequestError(f"invalid response_format {fmt!r}", "response_format")
