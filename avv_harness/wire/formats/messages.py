"""Anthropic Messages (``endpoint: messages``; wire-client layer, pure): ``POST {base}/messages`` with the chat body
converted by :func:`avv_core.api_formats.to_messages`, the key as ``x-api-key`` and an ``anthropic-version`` header,
and its event stream read into the attempt.

Reading (README "Wire formats: Messages and Responses"): a token event is a ``text_delta`` with text (content), a
``thinking_delta`` with thinking (reasoning, ``reasoning_field`` ``thinking``), the ``content_block_start`` of a
``tool_use`` block (it carries the name) and every non-empty ``input_json_delta`` (tool call). Tool calls are kept
in block order (id, name, the ``partial_json`` pieces joined; a block whose start holds a whole ``input`` and gets
no deltas: that input as JSON). Every block start has its own ``index`` and every ``input_json_delta`` names an
opened ``tool_use`` block: a missing or repeated index is ``bad_sse`` (two calls are never merged into one).
``finish_reason`` is the last ``message_delta``'s ``stop_reason`` mapped onto chat's
(:func:`~avv_core.api_outcomes.finish_from_messages`), the raw one kept as ``stop_reason``; ``message_stop`` plays
``[DONE]``'s part (missing: anomaly ``no_done``); usage comes from ``message_start`` and the last
``message_delta``. How the stream can end, and what each end is called, is :data:`ENDS_DECLARED`
(docs/reference/stream-ends.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from avv_core.api_formats import ANTHROPIC_VERSION, MESSAGES, to_messages
from avv_core.api_outcomes import finish_from_messages, usage_from_messages
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.reasoning import THINKING_FIELD
from avv_harness.wire.attempt import (
    Attempt,
    EventReader,
    StreamFailure,
    ToolCallAcc,
    add_reasoning,
    error_message,
    json_kind,
    mark_token,
)
from avv_harness.wire.formats.base import (
    DialectView,
    StreamEnd,
    WireFormat,
    ends_by_key,
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
        self.start_usage: JSONMapping | None = None  # message_start's usage
        self.delta_usage: JSONMapping | None = None  # the last message_delta's usage
        self.whole_inputs: dict[int, str] = {}  # tool_use blocks whose start held their whole input (as JSON)
        self.blocks: dict[int, str] = {}  # every block opened by content_block_start: its index → its type
        self.known = False  # a Messages event arrived (else the stream is not a Messages stream)
        self.deltas = 0  # message_delta events read
        self.stopped = False  # message_stop arrived

    def event(self, att: Attempt, obj: JSONObject, now: float) -> None:
        kind = obj.get("type")
        if type(kind) is not str:
            if kind is None and "choices" in obj:
                raise ENDS["not_messages"].failure(seen="a chat-completions chunk, with `choices`")
            return
        if kind in KNOWN_EVENTS:
            self.known = True
        handler = _HANDLERS.get(kind)
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
        if not att.ok or att.finish_reason is not None:
            return  # failed already, or whole (without message_stop: flagged no_done)
        if att.chunks and not self.known:
            ENDS["not_messages"].fail(att, seen=f"none of its {att.chunks} events is a Messages event")
        elif self.stopped:
            seen = "no message_delta arrived" if not self.deltas else "message_delta's stop_reason was null"
            ENDS["no_stop_reason"].fail(att, seen=seen)
        else:
            ENDS["cut"].fail(att)

    def error_kind(self, error: object) -> str:
        return overload_or_stream_error(error)

    # ------------------------------------------------------------------------------------- the events

    def message_start(self, att: Attempt, obj: JSONObject, now: float) -> None:
        usage = obj_field(obj_field(obj, "message", "message_start"), "usage", "message_start.message")
        if usage:
            self.start_usage = usage

    def block_start(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = "content_block_start"
        block = obj_field(obj, "content_block", where)
        kind = block.get("type")
        index = int_field(obj, "index", where)
        if index is None:
            raise MalformedStream(f"{where}.index is missing (every block has its own)")
        if index in self.blocks:
            raise MalformedStream(f"{where}.index {index} repeats an earlier block's: two blocks would be read as one")
        self.blocks[index] = kind if isinstance(kind, str) else json_kind(kind)
        if kind == "tool_use":
            call = att.tool_calls[index] = ToolCallAcc()
            call.id = str_field(block, "id", f"{where}.content_block")
            call.name = str_field(block, "name", f"{where}.content_block")
            whole = block.get("input")
            if whole:
                if not isinstance(whole, dict):
                    raise MalformedStream(f"{where}.content_block.input is not an object")
                self.whole_inputs[index] = json.dumps(whole, ensure_ascii=False)
            att.saw_tool_call_delta = True
            mark_token(att, "tool_call", now)
        elif kind == "text":
            self._content(att, str_field(block, "text", f"{where}.content_block"), now)
        elif kind == "thinking":
            self._thinking(att, str_field(block, "thinking", f"{where}.content_block"), now)

    def block_delta(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = "content_block_delta.delta"
        delta = obj_field(obj, "delta", "content_block_delta")
        kind = delta.get("type")
        if kind == "text_delta":
            self._content(att, str_field(delta, "text", where), now)
        elif kind == "thinking_delta":
            self._thinking(att, str_field(delta, "thinking", where), now)
        elif kind == "input_json_delta":
            piece = str_field(delta, "partial_json", where)
            call = att.tool_calls[self._tool_block(obj)]
            if piece:
                call.arguments.append(piece)
                att.saw_tool_call_delta = True
                mark_token(att, "tool_call", now)

    def message_delta(self, att: Attempt, obj: JSONObject, now: float) -> None:
        self.deltas += 1
        reason = str_field(obj_field(obj, "delta", "message_delta"), "stop_reason", "message_delta.delta")
        if reason:
            att.stop_reason = reason
            att.finish_reason = finish_from_messages(reason)
        usage = obj_field(obj, "usage", "message_delta")
        if usage:
            self.delta_usage = usage

    def message_stop(self, att: Attempt, obj: JSONObject, now: float) -> None:
        self.stopped = att.saw_done = True  # the end of the answer, as [DONE] is for chat

    def error(self, att: Attempt, obj: JSONObject, now: float) -> None:
        message = error_message(json.dumps(obj).encode())
        raise StreamFailure(self.error_kind(obj), f"error event mid-stream: {message}")

    # ------------------------------------------------------------------------------------------ helpers

    def _tool_block(self, obj: JSONObject) -> int:
        """The index of the tool_use block an ``input_json_delta`` belongs to: its ``index``, which must be that of
        a tool_use block opened by ``content_block_start`` (anything else would put the pieces in the wrong call,
        or in a nameless one)."""
        where = "content_block_delta"
        index = int_field(obj, "index", where)
        if index is None:
            raise MalformedStream(f"{where}.index is missing (an input_json_delta must name its tool_use block)")
        opened = self.blocks.get(index)
        if opened != "tool_use":
            what = "no block opened by content_block_start" if opened is None else f"a {opened} block"
            raise MalformedStream(f"{where}.index {index}: an input_json_delta for {what}, not a tool_use block")
        return index

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


_Handler = Callable[[MessagesReader, Attempt, JSONObject, float], None]
#: event type → how it is read (``ping``, block stops and unknown events are ignored)
_HANDLERS: dict[str, _Handler] = {
    "message_start": MessagesReader.message_start,
    "content_block_start": MessagesReader.block_start,
    "content_block_delta": MessagesReader.block_delta,
    "message_delta": MessagesReader.message_delta,
    "message_stop": MessagesReader.message_stop,
    "error": MessagesReader.error,
}
#: The event types of a Messages stream: a stream with none of them is not one.
KNOWN_EVENTS = frozenset({*_HANDLERS, "ping", "content_block_stop"})

#: How a Messages stream ends (docs/reference/stream-ends.md).
ENDS_DECLARED: tuple[StreamEnd, ...] = (
    StreamEnd("stop", "`message_delta` with a `stop_reason`, then `message_stop`", None,
              "`finish_reason`: the stop reason mapped (the stop-reasons table); `stop_reason`: the vendor's word"),
    StreamEnd("no_message_stop", "`message_delta` with a `stop_reason`, then the body ends without `message_stop`",
              None, "the answer, as above, flagged `no_done`"),
    StreamEnd("no_stop_reason", "`message_stop`, but no `message_delta` carried a `stop_reason` (none arrived, or "
              "its `stop_reason` was null)", "bad_sse", "message_stop without a stop_reason ({seen})"),
    StreamEnd("cut", "the body ends before a `stop_reason` and `message_stop`", "truncated",
              "the stream ended before message_delta's stop_reason and message_stop"),
    StreamEnd("overloaded", "an `error` event whose error is an `overloaded_error`", "overloaded",
              "error event mid-stream: {message}"),
    StreamEnd("error", "any other `error` event", "stream_error", "error event mid-stream: {message}"),
    StreamEnd("not_messages", "not a Messages stream: chat-completions chunks (`choices`), or no Messages event at "
              "all", "bad_sse", "not a Messages stream ({seen}): check the vendor's endpoint"),
)
ENDS = ends_by_key(ENDS_DECLARED)


class MessagesFormat(WireFormat):
    name = MESSAGES
    path = "messages"
    summary = "Anthropic Messages, `POST {url}/messages`: the request converted (below)"
    converts = True
    ends = ENDS_DECLARED
    limit_keys = ("max_tokens",)

    def body(self, chat_body: JSONObject, dialect: DialectView) -> JSONObject:
        return {**to_messages(chat_body), "stream": chat_body.get("stream", True) is not False}

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def default_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def reader(self, dialect: DialectView) -> EventReader:
        return MessagesReader()

    def response_events(self, body: JSONObject) -> list[JSONObject]:
        """A Message as its stream: ``message_start`` (its usage), one ``content_block_start`` per block holding the
        whole block (a tool_use ``input`` that is not an object: an ``input_json_delta`` of its text),
        ``message_delta`` (stop reason, usage) and ``message_stop``."""
        usage = obj_field(body, "usage", "message")
        content = body.get("content") or []
        if not isinstance(content, list):
            raise MalformedStream("message.content is not a list")
        events: list[JSONObject] = [{"type": "message_start", "message": {"usage": usage}}]
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
