"""Request transforms: pure functions over a chat-completions request body, registered by name, composed in
order, plus the adapter presets (``generic``, ``kimi``, ``none``) and ``auto``'s pick by model id.

Layer: pure core (no I/O, no Locust). The sample file is never changed: the transforms run on a copy of
the sample body when the request is built (:func:`avv_harness.wire.execute.build_body`), and each record keeps
the names that ran (``transforms`` column).

Every transform takes a body and returns a new one; the input is never modified. A transform that finds
nothing to do returns an equal body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from avv_core.json_types import JSONObject, JSONValue
from avv_core.reasoning import CANONICAL_FIELD, FIELD_NAMES, REASONING_FIELDS

Body = JSONObject
Transform = Callable[[Body], Body]

#: Every transform by name (filled by :func:`_register`), in the order they are documented.
TRANSFORMS: dict[str, Transform] = {}

#: Reasoning fields (:mod:`avv_core.reasoning`) other than ``reasoning_content`` that vendors use for an
#: assistant turn's thinking.
OTHER_REASONING_FIELDS = tuple(f for f in REASONING_FIELDS if f.name != CANONICAL_FIELD)
INJECTED_REASONING = " "  # what inject_reasoning_content puts where a turn has none (as K2VV's Kimi adapter)


def _register(func: Transform) -> Transform:
    TRANSFORMS[func.__name__] = func
    return func


def _with_messages(body: Body, change: Callable[[list[JSONValue]], list[JSONValue]]) -> Body:
    """A copy of ``body`` whose ``messages`` list is ``change(a copy of the old list)``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body)
    return {**body, "messages": change(list(messages))}


def _is_assistant(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


def _has_tool_calls(message: JSONValue) -> bool:
    return _is_assistant(message) and isinstance(message.get("tool_calls"), list) and bool(message["tool_calls"])


def _missing(value: object) -> bool:
    return value is None or value == ""


@_register
def input_role_to_system(body: Body) -> Body:
    """K2-Vendor-Verifier's custom ``_input`` role becomes ``system`` (K2VV does this before sending)."""
    def change(messages: list[JSONValue]) -> list[JSONValue]:
        return [{**m, "role": "system"} if isinstance(m, dict) and m.get("role") == "_input" else m for m in messages]
    return _with_messages(body, change)


@_register
def rename_reasoning_fields(body: Body) -> Body:
    """On assistant turns, the other reasoning fields of :mod:`avv_core.reasoning` (``reasoning`` /
    ``reasoning_details`` / ``reason``) become ``reasoning_content`` (the first one with text, when the turn
    has no ``reasoning_content`` yet); the other fields are removed."""
    def change(messages: list[JSONValue]) -> list[JSONValue]:
        out = []
        for m in messages:
            if _is_assistant(m) and any(f.name in m for f in OTHER_REASONING_FIELDS):
                m = dict(m)
                found = [f.read(m.pop(f.name)) for f in OTHER_REASONING_FIELDS if f.name in m]
                text = next((t for t in found if t), None)
                if _missing(m.get(CANONICAL_FIELD)) and text:
                    m[CANONICAL_FIELD] = text
            out.append(m)
        return out
    return _with_messages(body, change)


@_register
def inject_reasoning_content(body: Body) -> Body:
    """Assistant turns with ``tool_calls`` and no (or an empty) ``reasoning_content`` get a single space:
    Kimi K2.5 / K2-thinking deployments reject such a history with HTTP 400."""
    def change(messages: list[JSONValue]) -> list[JSONValue]:
        return [{**m, "reasoning_content": INJECTED_REASONING}
                if _has_tool_calls(m) and _missing(m.get("reasoning_content")) else m for m in messages]
    return _with_messages(body, change)


@_register
def strip_reasoning_content(body: Body) -> Body:
    """Assistant turns lose every reasoning field of :mod:`avv_core.reasoning` (``reasoning_content``,
    ``reasoning``, ``reasoning_details``, ``reason``), for vendors that reject fields they do not know."""
    def change(messages: list[JSONValue]) -> list[JSONValue]:
        return [{k: v for k, v in m.items() if k not in FIELD_NAMES}
                if _is_assistant(m) and any(k in m for k in FIELD_NAMES) else m for m in messages]
    return _with_messages(body, change)


@_register
def renumber_tool_call_ids(body: Body) -> Body:
    """Tool-call ids become ``functions.NAME:IDX`` (IDX counts calls across the conversation from 0), the
    shape vLLM's Kimi K2 parser and template need, and each ``tool`` message's ``tool_call_id`` follows its
    call. Duplicate ids (MiniMax's verifier renumbers them too) stay distinct: a tool message refers to the
    latest call that had its id."""
    def change(messages: list[JSONValue]) -> list[JSONValue]:
        out: list[JSONValue] = []
        current: dict[str, str] = {}  # old id → new id, for the calls seen so far (latest wins)
        counter = 0
        for m in messages:
            if _has_tool_calls(m):
                calls = []
                for call in m["tool_calls"]:
                    if not isinstance(call, dict):
                        calls.append(call)
                        continue
                    inner = call.get("function")
                    function: JSONObject = inner if isinstance(inner, dict) else {}
                    new_id = f"functions.{function.get('name') or 'unknown'}:{counter}"
                    counter += 1
                    if call.get("id") is not None:
                        current[str(call["id"])] = new_id
                    calls.append({**call, "id": new_id})
                m = {**m, "tool_calls": calls}
            elif isinstance(m, dict) and m.get("role") == "tool" and str(m.get("tool_call_id")) in current:
                m = {**m, "tool_call_id": current[str(m["tool_call_id"])]}
            out.append(m)
        return out
    return _with_messages(body, change)


#: Adapter presets: the transforms each one runs, in order. ``kimi`` renames before it injects, so a turn
#: that carried its thinking as ``reasoning`` keeps that text instead of getting a space.
ADAPTERS: dict[str, tuple[str, ...]] = {
    "generic": ("input_role_to_system",),
    "kimi": ("input_role_to_system", "rename_reasoning_fields", "inject_reasoning_content", "renumber_tool_call_ids"),
    "none": (),
}
AUTO = "auto"
#: ``adapter: auto``: the first pattern that matches the vendor's model id picks the adapter; else generic.
AUTO_RULES: tuple[tuple[re.Pattern[str], str], ...] = ((re.compile(r"kimi|moonshot", re.IGNORECASE), "kimi"),)


def pick_adapter(model_id: str) -> tuple[str, str]:
    """``(adapter, why)`` for ``adapter: auto``."""
    for pattern, adapter in AUTO_RULES:
        if pattern.search(model_id):
            return adapter, f"auto: model_id {model_id!r} matches /{pattern.pattern}/"
    return "generic", f"auto: model_id {model_id!r} matches no adapter pattern"


def compose(names: Iterable[str]) -> tuple[str, ...]:
    """The names in order without repeats; KeyError naming an unknown one."""
    out = tuple(dict.fromkeys(names))
    for name in out:
        if name not in TRANSFORMS:
            raise KeyError(name)
    return out


def apply_transforms(body: Body, names: Iterable[str]) -> Body:
    """Run the named transforms in order over a copy of ``body``."""
    out = dict(body)
    for name in names:
        out = TRANSFORMS[name](out)
    return out
