"""What one HTTP attempt produced, and how the events of a chat-completions (or completions) stream are read
into it (wire-client layer, pure: no I/O). :mod:`avv_harness.wire.stream` reads the bytes; this module decides what
each event means for the attempt.

Response dialects: reasoning is read from every field declared in :mod:`avv_core.reasoning` (one per event, in
their declared order, so a vendor that sends the same text under two names is not counted twice);
``Attempt.reasoning_fields`` says which carried it. A completions stream's ``choices[0].text`` is collected as
content. The vendor's fault is the vendor's: a field of the wrong JSON type, a non-finite number (``Infinity``,
``NaN``), over-deep nesting and an ``event: error`` frame are classified (``bad_sse``, ``stream_error``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from avv_core.reasoning import RESPONSE_FIELDS
from avv_harness.wire.sse import MalformedStream, SSEEvent

MAX_ERROR_BODY = 2048  # bytes of an error body read for its message


@dataclass
class ToolCallAcc:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": "".join(self.arguments)}


@dataclass
class Attempt:
    """What one HTTP attempt produced. Times are monotonic seconds; None = did not happen."""

    t0: float = 0.0
    t_headers: float | None = None
    t_first_token: float | None = None
    first_token_kind: str | None = None
    t_last_token: float | None = None
    t_end: float | None = None
    http_status: int | None = None
    error_kind: str | None = None
    error_detail: str = ""
    retry_after_s: float | None = None
    chunks: int = 0
    bytes_read: int = 0
    finish_reason: str | None = None
    saw_done: bool = False
    saw_tool_call_delta: bool = False
    usage: dict[str, Any] | None = None
    content: list[str] = field(default_factory=list)
    reasoning_chars: int = 0
    reasoning_fields: list[str] = field(default_factory=list)  # which fields carried reasoning, first seen first
    reasoning: list[str] = field(default_factory=list)  # the reasoning text itself (K2VV / MiniMax export)
    tool_calls: dict[int, ToolCallAcc] = field(default_factory=dict)
    reads: int = 0  # socket reads that returned bytes
    token_events: int = 0  # SSE events that carried a token (content, reasoning or a tool-call delta)
    first_token_read: int | None = None  # which read carried the first / last token event
    last_token_read: int | None = None
    stale_conn_retries: int = 0  # sends repeated at once because a pooled connection had gone stale

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, detail: str) -> Attempt:
        if self.error_kind is None:
            self.error_kind, self.error_detail = kind, detail[:500]
        return self


def error_message(body: bytes) -> str:
    text = body[:MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        obj = json.loads(text)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(obj, dict) and isinstance(obj.get("message"), str):
            return obj["message"]
    except (ValueError, RecursionError):  # not JSON, or nested too deeply: the text as it is
        pass
    return " ".join(text.split())[:200]


def _json_kind(value: Any) -> str:
    """How a JSON value reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _merge_tool_call(acc: dict[int, ToolCallAcc], delta: dict[str, Any], position: int, where: str) -> None:
    index = delta.get("index")
    if index is None:
        index = position
    elif type(index) is not int:  # a bool is an int to isinstance
        raise MalformedStream(f"{where}.index is {_json_kind(index)}, not an integer")
    call = acc.setdefault(index, ToolCallAcc())
    if delta.get("id") and not call.id:
        call.id = str(delta["id"])
    function = delta.get("function") or {}
    if not isinstance(function, dict):
        raise MalformedStream(f"{where}.function is {_json_kind(function)}, not an object")
    name = function.get("name")
    if name and not isinstance(name, str):
        raise MalformedStream(f"{where}.function.name is {_json_kind(name)}, not a string")
    # Some servers (llama-cpp-python) repeat the whole name in every delta: never concatenate a repeat.
    if name and name != call.name:
        call.name = name if not call.name else call.name + name
    arguments = function.get("arguments")
    if arguments:
        call.arguments.append(arguments if isinstance(arguments, str) else json.dumps(arguments))


def apply_chunk(att: Attempt, obj: dict[str, Any], now: float) -> None:
    """Read one chunk into the attempt. A field we read that has the wrong JSON type raises
    :class:`MalformedStream` naming it (the shape is checked only where a field is read); null or missing
    fields are read as absent, as before."""
    usage = obj.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise MalformedStream(f"usage is {_json_kind(usage)}, not an object")
        if usage:
            att.usage = usage
    choices = obj.get("choices")
    if choices is None:
        choices = ()
    elif not isinstance(choices, list):
        raise MalformedStream(f"choices is {_json_kind(choices)}, not a list")
    token_kind = None
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            if choice is None:
                continue
            raise MalformedStream(f"choices[{i}] is {_json_kind(choice)}, not an object")
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            field_name = "delta" if choice.get("delta") else "message"
            raise MalformedStream(f"choices[{i}].{field_name} is {_json_kind(delta)}, not an object")
        content = delta.get("content")
        if isinstance(content, str) and content:
            att.content.append(content)
            token_kind = token_kind or "content"
        text = choice.get("text")  # a /v1/completions stream
        if isinstance(text, str) and text:
            att.content.append(text)
            token_kind = token_kind or "content"
        for reasoning_field in RESPONSE_FIELDS:
            reasoning = reasoning_field.read(delta.get(reasoning_field.name))
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
                raise MalformedStream(f"choices[{i}].delta.tool_calls is {_json_kind(tool_calls)}, not a list")
            att.saw_tool_call_delta = True
            for position, tc in enumerate(tool_calls):
                where = f"choices[{i}].delta.tool_calls[{position}]"
                if isinstance(tc, dict):
                    _merge_tool_call(att.tool_calls, tc, position, where)
                elif tc is not None:
                    raise MalformedStream(f"{where} is {_json_kind(tc)}, not an object")
            token_kind = token_kind or "tool_call"
        if choice.get("finish_reason"):
            att.finish_reason = str(choice["finish_reason"])
    if token_kind:
        if att.t_first_token is None:
            att.t_first_token, att.first_token_kind = now, token_kind
            att.first_token_read = att.reads
        att.t_last_token = now
        att.last_token_read = att.reads
        att.token_events += 1


class _NonFinite(ValueError):
    """``Infinity``, ``-Infinity`` or ``NaN``: Python's json reads them, JSON has no such numbers."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


_JSON = json.JSONDecoder(parse_constant=_refuse_constant)  # one decoder: json.loads(…, **kw) builds one per call


def bad_data(att: Attempt, reason: str, now: float) -> bool:
    att.t_end = now
    att.fail("bad_sse", reason)
    return False


def apply_events(att: Attempt, events: list[SSEEvent], now: float) -> bool:
    """Apply the events one read completed; all are stamped ``now``, when their last byte arrived.
    False: the attempt failed here, stop reading."""
    for event_type, data in events:
        if data is not None and data.strip() == b"[DONE]":
            # Keep reading to the end of the body, as the official SDK does: the last byte is the
            # true end, and a fully read response lets the connection be reused.
            att.saw_done = True
            att.t_end = now
            continue
        if att.saw_done:
            continue  # nothing after [DONE] is part of the answer
        if event_type == b"error":  # `event: error`: whatever came before, the answer is not whole
            att.t_end = now
            message = error_message(data) if data else "(no data)"
            att.fail("stream_error", f"error event mid-stream: {message}")
            return False
        assert data is not None  # the parser gives data with every event but an error one
        text = data.decode("utf-8")  # invalid UTF-8 raises: bad_sse in stream_chat
        try:
            obj = _JSON.decode(text)
        except _NonFinite as exc:
            at = text.find(str(exc))
            return bad_data(att, f"non-finite number {exc} (not JSON) in data line: "
                             f"{text[max(0, at - 80):at + len(str(exc))]!r}", now)
        except RecursionError:
            return bad_data(att, f"data line nested too deeply to read: {text[:60]!r}", now)
        except ValueError:
            return bad_data(att, f"unparseable data line: {text[:120]!r}", now)
        if not isinstance(obj, dict):
            return bad_data(att, f"data line is not a JSON object: {text[:120]!r}", now)
        if obj.get("error"):
            att.t_end = now
            err = obj["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            att.fail("stream_error", f"error event mid-stream: {message}")
            return False
        att.chunks += 1
        try:
            apply_chunk(att, obj, now)
        except MalformedStream as exc:
            return bad_data(att, f"malformed chunk: {exc}", now)
        except RecursionError:  # tool-call arguments nested too deeply to write back as text
            return bad_data(att, f"malformed chunk: nested too deeply to read: {text[:60]!r}", now)
        att.t_end = now
    return True
