"""OpenAI Responses (``endpoint: responses``; wire-client layer, pure): ``POST {base}/responses`` with the chat body
converted by :func:`avv_core.api_formats.to_responses`, and its event stream read into the attempt.

Reading (README "Wire formats: Messages and Responses"): a token event is a non-empty ``response.output_text.delta``
(content), ``response.reasoning_summary_text.delta`` or ``response.reasoning_text.delta`` (reasoning,
``reasoning_field`` ``reasoning_summary``), the ``response.output_item.added`` of a ``function_call`` item (it
carries the name) and every non-empty ``response.function_call_arguments.delta`` (tool call). Tool calls are kept
in output order (``call_id``, name, the argument deltas joined; ``.done``'s ``arguments`` when there were none).
``response.completed`` / ``response.incomplete`` end the answer (missing: anomaly ``no_done``): ``finish_reason``
from the status (:func:`~avv_core.api_outcomes.finish_from_responses`), ``stop_reason`` the status
(``incomplete:max_output_tokens``), usage from the response's ``usage``. ``response.failed`` and an ``error`` event
are ``stream_error``, or ``overloaded`` for an overload code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from avv_core.api_formats import RESPONSES, to_responses
from avv_core.api_outcomes import finish_from_responses, usage_from_responses
from avv_core.reasoning import SUMMARY_FIELD
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


class ResponsesReader(EventReader):
    """One Responses stream (see the module docstring)."""

    unit = "event"

    def __init__(self) -> None:
        self.calls_by_item: dict[str, int] = {}  # function_call item id → its output index

    def event(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        kind = obj.get("type")
        handler = _HANDLERS.get(kind) if type(kind) is str else None
        if handler is not None:
            handler(self, att, obj, now)

    def error_kind(self, error: Any) -> str:
        return overload_or_stream_error(error)

    # ------------------------------------------------------------------------------------- the events

    def item_added(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        item = obj_field(obj, "item", obj["type"])
        if item.get("type") != "function_call":
            return
        call = self._call(att, obj, item)
        att.saw_tool_call_delta = True
        mark_token(att, "tool_call", now)
        arguments = str_field(item, "arguments", f"{obj['type']}.item")
        if arguments:
            call.arguments.append(arguments)

    def item_done(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        item = obj_field(obj, "item", obj["type"])
        if item.get("type") == "function_call":
            call = self._call(att, obj, item)
            arguments = str_field(item, "arguments", f"{obj['type']}.item")
            if arguments and not call.arguments:
                call.arguments.append(arguments)

    def text_delta(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        text = str_field(obj, "delta", obj["type"])
        if text:
            att.content.append(text)
            mark_token(att, "content", now)

    def reasoning_delta(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        text = str_field(obj, "delta", obj["type"])
        if text:
            add_reasoning(att, text, SUMMARY_FIELD)
            mark_token(att, "reasoning", now)

    def arguments_delta(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        piece = str_field(obj, "delta", obj["type"])
        if piece:
            self._call(att, obj, None).arguments.append(piece)
            att.saw_tool_call_delta = True
            mark_token(att, "tool_call", now)

    def arguments_done(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        arguments = str_field(obj, "arguments", obj["type"])
        call = self._call(att, obj, None)
        if arguments and not call.arguments:
            call.arguments.append(arguments)

    def ended(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        """``response.completed`` / ``response.incomplete``: the answer is whole."""
        where = f"{obj['type']}.response"
        response = obj_field(obj, "response", obj["type"])
        status = str_field(response, "status", where) or obj["type"].removeprefix("response.")
        reason = str_field(obj_field(response, "incomplete_details", where), "reason", f"{where}.incomplete_details")
        att.stop_reason = f"{status}:{reason}" if reason else status
        att.finish_reason = finish_from_responses(status, reason or None, bool(att.tool_calls))
        usage = obj_field(response, "usage", where)
        if usage:
            att.usage = usage_from_responses(usage)
        att.saw_done = True

    def failed(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        """``response.failed``: the answer is not whole (``overloaded`` for an overload code)."""
        where = f"{obj['type']}.response"
        error = obj_field(obj_field(obj, "response", obj["type"]), "error", where)
        att.stop_reason = "failed"
        att.saw_done = True
        code, message = error.get("code"), error.get("message")
        raise StreamFailure(self.error_kind({"error": error}), f"response.failed: {code}: {message}")

    def error(self, att: Attempt, obj: dict[str, Any], now: float) -> None:
        message = error_message(json.dumps(obj).encode())
        raise StreamFailure(self.error_kind(obj), f"error event mid-stream: {message}")

    # ------------------------------------------------------------------------------------------ helpers

    def _call(self, att: Attempt, obj: dict[str, Any], item: Mapping[str, Any] | None) -> ToolCallAcc:
        """The call an event is about (by ``output_index``, else by item id), created when new; ``item``: the
        function_call item itself (its ``call_id`` and name)."""
        where = obj["type"]
        index = int_field(obj, "output_index", where)
        item_id = str_field(item, "id", f"{where}.item") if item is not None else str_field(obj, "item_id", where)
        if index is None:
            known = self.calls_by_item.get(item_id) if item_id else None
            index = known if known is not None else max(att.tool_calls, default=-1) + 1
        if item_id:
            self.calls_by_item[item_id] = index
        call = att.tool_calls.setdefault(index, ToolCallAcc())
        if item is not None:
            call.id = call.id or str_field(item, "call_id", f"{where}.item") or item_id
            call.name = call.name or str_field(item, "name", f"{where}.item")
        return call


_Handler = Callable[[ResponsesReader, Attempt, dict[str, Any], float], None]
#: event type → how it is read (``response.created``, part and ``.done`` events of text, and unknown events are
#: ignored)
_HANDLERS: dict[str, _Handler] = {
    "response.output_item.added": ResponsesReader.item_added,
    "response.output_item.done": ResponsesReader.item_done,
    "response.output_text.delta": ResponsesReader.text_delta,
    "response.reasoning_summary_text.delta": ResponsesReader.reasoning_delta,
    "response.reasoning_text.delta": ResponsesReader.reasoning_delta,
    "response.function_call_arguments.delta": ResponsesReader.arguments_delta,
    "response.function_call_arguments.done": ResponsesReader.arguments_done,
    "response.completed": ResponsesReader.ended,
    "response.incomplete": ResponsesReader.ended,
    "response.failed": ResponsesReader.failed,
    "error": ResponsesReader.error,
}


#: a content part's type → the delta event that streams it (:meth:`ResponsesFormat.response_events`)
_PART_EVENTS = {"output_text": "response.output_text.delta", "summary_text": "response.reasoning_summary_text.delta",
                "reasoning_text": "response.reasoning_text.delta"}


class ResponsesFormat(WireFormat):
    name = RESPONSES
    path = "responses"
    order = 30
    summary = "OpenAI Responses, `POST {url}/responses`: the request converted (below)"
    converts = True

    def body(self, chat_body: dict[str, Any], dialect: DialectView) -> dict[str, Any]:
        return {**to_responses(chat_body), "stream": chat_body.get("stream", True) is not False}

    def reader(self, dialect: DialectView) -> EventReader:
        return ResponsesReader()

    def response_events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A Response as its stream: per output item, a function call's ``response.output_item.added`` (the whole
        item), a message's ``response.output_text.delta`` per text part, a reasoning item's summary and text deltas;
        then ``response.completed`` / ``response.incomplete`` / ``response.failed`` by its status."""
        output = body.get("output") or []
        if not isinstance(output, list):
            raise MalformedStream("response.output is not a list")
        events: list[dict[str, Any]] = []
        for index, item in enumerate(output):
            if not isinstance(item, dict):
                raise MalformedStream(f"response.output[{index}] is not an object")
            kind = item.get("type")
            if kind == "function_call":
                events.append({"type": "response.output_item.added", "output_index": index, "item": item})
            elif kind in ("message", "reasoning"):
                parts = [*(item.get("summary") or []), *(item.get("content") or [])]
                for part in parts:
                    if not isinstance(part, dict) or not isinstance(part.get("text"), str):
                        continue
                    event = _PART_EVENTS.get(str(part.get("type")))
                    if event is not None:
                        events.append({"type": event, "output_index": index, "delta": part["text"]})
        status = body.get("status")
        ending = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(str(status),
                                                                                       "response.completed")
        return [*events, {"type": ending, "response": body}]


FORMAT = ResponsesFormat()
