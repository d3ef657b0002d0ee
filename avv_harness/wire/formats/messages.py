"""Anthropic Messages (``endpoint: messages``; wire-client layer, pure): ``POST {base}/messages`` with the chat body
converted by :func:`avv_core.api_formats.to_messages`, the key as ``x-api-key`` and an ``anthropic-version`` header,
and its event stream read into the attempt.

Reading (README "Wire formats: Messages and Responses"): a token event is a ``text_delta`` with text (content), a
``thinking_delta`` with thinking (reasoning, ``reasoning_field`` ``thinking``), the ``content_block_start`` of a
``tool_use`` block (it carries the name) and every non-empty ``input_json_delta`` (tool call). Tool calls are kept
in block order (id, name, the ``partial_json`` pieces joined; a block whose start holds a whole ``input`` and gets
no deltas: that input as JSON). ``finish_reason`` is the last ``message_delta``'s ``stop_reason`` mapped onto chat's
(:func:`~avv_core.api_outcomes.finish_from_messages`), the raw one kept as ``stop_reason``; ``message_stop`` plays
``[DONE]``'s part (missing: anomaly ``no_done``); usage comes from ``message_start`` and the last
``message_delta``. An error event of type ``overloaded_error`` is ``overloaded``, any other ``stream_error``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from avv_core.api_formats import ANTHROPIC_VERSION, MESSAGES, to_messages
from avv_core.api_outcomes import finish_from_messages, usage_from_messages
from avv_core.reasoning import THINKING_FIELD
from avv_harness.wire.attempt import (
    Attempt,
    EventReader,
    StreamFailure,
    ToolCallAcc,
    add_reasoning,
    error_message,
    mark_token,
)
from avv_harness.wire.formats.base import (
    DialectView,
    WireFormat,
    int_field,
    obj_field,
    overload_or_stream_error,
    str_field,
)
from avv_harness.wire.sse import MalformedStream


class MessagesReader(EventReader):
    """One Messages stream (see the module docstring)."""

    unit = "event"

    def __init__(self) -> None:
        self.start_usage: Mapping[str, Any] | None = None  # message_start's usage
        self.delta_usage: Mapping[str, Any] | None = None  # the last message_delta's usage
        self.whole_inputs: dict[int, str] = {}  # tool_use blocks whose start held their whole input (as JSON)
        self.last_tool: int | None = None  # the tool_use block an input_json_delta without index belongs to

    def event(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        kind = obj.get("type")
        handler = _HANDLERS.get(kind) if type(kind) is str else None
        if handler is not None:
            handler(self, att, obj, now)

    def end(self, att: Attempt) -> None:
        usage = usage_from_messages(self.start_usage, self.delta_usage)
        if usage is not None:
            att.usage = usage
        for index, text in self.whole_inputs.items():
            call = att.tool_calls.get(index)
            if call is not None and not call.arguments:
                call.arguments.append(text)

    def error_kind(self, error: Any) -> str:
        return overload_or_stream_error(error)

    # ------------------------------------------------------------------------------------- the events

    def message_start(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        usage = obj_field(obj_field(obj, "message", "message_start"), "usage", "message_start.message")
        if usage:
            self.start_usage = usage

    def block_start(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        where = "content_block_start"
        block = obj_field(obj, "content_block", where)
        kind = block.get("type")
        if kind == "tool_use":
            index = self._index(att, obj, where, new=True)
            call = att.tool_calls.setdefault(index, ToolCallAcc())
            call.id = str_field(block, "id", f"{where}.content_block") or call.id
            call.name = str_field(block, "name", f"{where}.content_block") or call.name
            whole = block.get("input")
            if whole:
                if not isinstance(whole, dict):
                    raise MalformedStream(f"{where}.content_block.input is not an object")
                self.whole_inputs[index] = json.dumps(whole, ensure_ascii=False)
            self.last_tool = index
            att.saw_tool_call_delta = True
            mark_token(att, "tool_call", now)
        elif kind == "text":
            self._content(att, str_field(block, "text", f"{where}.content_block"), now)
        elif kind == "thinking":
            self._thinking(att, str_field(block, "thinking", f"{where}.content_block"), now)

    def block_delta(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        where = "content_block_delta.delta"
        delta = obj_field(obj, "delta", "content_block_delta")
        kind = delta.get("type")
        if kind == "text_delta":
            self._content(att, str_field(delta, "text", where), now)
        elif kind == "thinking_delta":
            self._thinking(att, str_field(delta, "thinking", where), now)
        elif kind == "input_json_delta":
            piece = str_field(delta, "partial_json", where)
            if piece:
                index = self._index(att, obj, "content_block_delta", new=False)
                att.tool_calls.setdefault(index, ToolCallAcc()).arguments.append(piece)
                att.saw_tool_call_delta = True
                mark_token(att, "tool_call", now)

    def message_delta(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        reason = str_field(obj_field(obj, "delta", "message_delta"), "stop_reason", "message_delta.delta")
        if reason:
            att.stop_reason = reason
            att.finish_reason = finish_from_messages(reason)
        usage = obj_field(obj, "usage", "message_delta")
        if usage:
            self.delta_usage = usage

    def message_stop(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        att.saw_done = True  # the end of the answer, as [DONE] is for chat

    def error(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        message = error_message(json.dumps(obj).encode())
        raise StreamFailure(self.error_kind(obj), f"error event mid-stream: {message}")

    # ------------------------------------------------------------------------------------------ helpers

    def _index(self, att: Attempt, obj: dict[str, Any], where: str, new: bool) -> int:
        """The block index of a tool_use event; without one: the next block (a start) or the last tool_use."""
        index = int_field(obj, "index", where)
        if index is not None:
            return index
        if not new and self.last_tool is not None:
            return self.last_tool
        return max(att.tool_calls, default=-1) + 1

    @staticmethod
    def _content(att: Attempt, text: str, now: float) -> None:
        if text:
            att.content.append(text)
            mark_token(att, "content", now)

    @staticmethod
    def _thinking(att: Attempt, text: str, now: float) -> None:
        if text:
            add_reasoning(att, text, THINKING_FIELD)
            mark_token(att, "reasoning", now)


_Handler = Callable[[MessagesReader, Attempt, dict[str, Any], float], None]
#: event type → how it is read (``ping``, block stops and unknown events are ignored)
_HANDLERS: dict[str, _Handler] = {
    "message_start": MessagesReader.message_start,
    "content_block_start": MessagesReader.block_start,
    "content_block_delta": MessagesReader.block_delta,
    "message_delta": MessagesReader.message_delta,
    "message_stop": MessagesReader.message_stop,
    "error": MessagesReader.error,
}


class MessagesFormat(WireFormat):
    name = MESSAGES
    path = "messages"
    order = 20
    summary = "Anthropic Messages, `POST {url}/messages`: the request converted (below)"
    converts = True

    def body(self, chat_body: dict[str, Any], dialect: DialectView) -> dict[str, Any]:
        return {**to_messages(chat_body), "stream": chat_body.get("stream", True) is not False}

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def default_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def reader(self, dialect: DialectView) -> EventReader:
        return MessagesReader()

    def response_events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A Message as its stream: ``message_start`` (its usage), one ``content_block_start`` per block holding the
        whole block (a tool_use ``input`` that is not an object: an ``input_json_delta`` of its text),
        ``message_delta`` (stop reason, usage) and ``message_stop``."""
        usage = obj_field(body, "usage", "message")
        content = body.get("content") or []
        if not isinstance(content, list):
            raise MalformedStream("message.content is not a list")
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": usage}}]
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise MalformedStream(f"message.content[{index}] is not an object")
            whole = block.get("input")
            if block.get("type") == "tool_use" and whole is not None and not isinstance(whole, dict):
                events += [{"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                           {"type": "content_block_delta", "index": index, "delta": {
                               "type": "input_json_delta",
                               "partial_json": whole if isinstance(whole, str) else json.dumps(whole)}}]
            else:
                events.append({"type": "content_block_start", "index": index, "content_block": block})
        return [*events, {"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason")}, "usage": usage},
                {"type": "message_stop"}]


FORMAT = MessagesFormat()
