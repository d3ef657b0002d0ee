"""OpenAI chat completions (``endpoint: chat``, the default; wire-client layer, pure): ``POST {base}/chat/completions``
with the chat body as built, and its ``chat.completion.chunk`` stream read into the attempt.

Response dialects: reasoning is read from every field declared in :mod:`avv_core.reasoning` (one per event, in
their declared order, so a vendor that sends the same text under two names is not counted twice);
``Attempt.reasoning_fields`` says which carried it. A completions stream's ``choices[0].text`` is collected as
content (:mod:`.completions` reads the same chunks). The ``stop_reason`` column is the raw ``finish_reason``.
"""

from __future__ import annotations

import json

from avv_core.api_formats import CHAT
from avv_core.json_types import JSONObject
from avv_core.reasoning import RESPONSE_FIELDS
from avv_harness.wire.attempt import Attempt, EventReader, ToolCallAcc, json_kind
from avv_harness.wire.formats.base import DialectView, WireFormat
from avv_harness.wire.sse import MalformedStream

#: The reasoning fields' names: most deltas hold none, found with one set operation instead of a lookup each.
_REASONING_NAMES = frozenset(field.name for field in RESPONSE_FIELDS)


def _merge_tool_call(acc: dict[int, ToolCallAcc], delta: JSONObject, position: int, where: str) -> None:
    index = delta.get("index")
    if index is None:
        index = position
    elif type(index) is not int:  # a bool is an int to isinstance
        raise MalformedStream(f"{where}.index is {json_kind(index)}, not an integer")
    call = acc.setdefault(index, ToolCallAcc())
    if delta.get("id") and not call.id:
        call.id = str(delta["id"])
    function = delta.get("function") or {}
    if not isinstance(function, dict):
        raise MalformedStream(f"{where}.function is {json_kind(function)}, not an object")
    name = function.get("name")
    if name and not isinstance(name, str):
        raise MalformedStream(f"{where}.function.name is {json_kind(name)}, not a string")
    # Some servers (llama-cpp-python) repeat the whole name in every delta: never concatenate a repeat.
    if name and name != call.name:
        call.name = name if not call.name else call.name + name
    arguments = function.get("arguments")
    if arguments:
        call.arguments.append(arguments if isinstance(arguments, str) else json.dumps(arguments))


def apply_chunk(att: Attempt, obj: JSONObject, now: float) -> None:
    """Read one chunk into the attempt. A field we read that has the wrong JSON type raises
    :class:`MalformedStream` naming it (the shape is checked only where a field is read); null or missing
    fields are read as absent, as before."""
    usage = obj.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise MalformedStream(f"usage is {json_kind(usage)}, not an object")
        if usage:
            att.usage = usage
    choices = obj.get("choices")
    if choices is None:
        choices = ()
    elif not isinstance(choices, list):
        raise MalformedStream(f"choices is {json_kind(choices)}, not a list")
    token_kind = None
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            if choice is None:
                continue
            raise MalformedStream(f"choices[{i}] is {json_kind(choice)}, not an object")
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            field_name = "delta" if choice.get("delta") else "message"
            raise MalformedStream(f"choices[{i}].{field_name} is {json_kind(delta)}, not an object")
        content = delta.get("content")
        if isinstance(content, str) and content:
            att.content.append(content)
            token_kind = token_kind or "content"
        text = choice.get("text")  # a /v1/completions stream
        if isinstance(text, str) and text:
            att.content.append(text)
            token_kind = token_kind or "content"
        for reasoning_field in RESPONSE_FIELDS if not _REASONING_NAMES.isdisjoint(delta) else ():
            value = delta.get(reasoning_field.name)
            if value is None:
                continue
            reasoning = reasoning_field.read(value)
            if reasoning:
                att.reasoning_chars += len(reasoning)
                att.reasoning.append(reasoning)
                if reasoning_field.name not in att.reasoning_fields:
                    att.reasoning_fields.append(reasoning_field.name)
                token_kind = token_kind or "reasoning"
                break
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            if not isinstance(tool_calls, list):
                raise MalformedStream(f"choices[{i}].delta.tool_calls is {json_kind(tool_calls)}, not a list")
            att.saw_tool_call_delta = True
            for position, tc in enumerate(tool_calls):
                where = f"choices[{i}].delta.tool_calls[{position}]"
                if isinstance(tc, dict):
                    _merge_tool_call(att.tool_calls, tc, position, where)
                elif tc is not None:
                    raise MalformedStream(f"{where} is {json_kind(tc)}, not an object")
            token_kind = token_kind or "tool_call"
        if choice.get("finish_reason"):
            att.finish_reason = att.stop_reason = str(choice["finish_reason"])
    if token_kind:
        if att.t_first_token is None:
            att.t_first_token, att.first_token_kind = now, token_kind
            att.first_token_read = att.reads
        att.t_last_token = now
        att.last_token_read = att.reads
        att.token_events += 1


class ChunkReader(EventReader):
    """Chat-completions chunks (and raw completions' ``choices[].text``), one :func:`apply_chunk` each (the
    function itself: no extra call per event on the hot path)."""

    event = staticmethod(apply_chunk)


class ChatFormat(WireFormat):
    name = CHAT
    path = "chat/completions"
    summary = "OpenAI chat completions, `POST {url}/chat/completions` (the default)"

    def reader(self, dialect: DialectView) -> EventReader:
        return ChunkReader()


FORMAT = ChatFormat()
