"""OpenAI Responses (``endpoint: responses``; wire-client layer, pure): ``POST {base}/responses`` with the chat body
converted by :func:`avv_core.api_formats.to_responses`, and its event stream read into the attempt.

Reading (README "Wire formats: Messages and Responses"): a token event is a non-empty ``response.output_text.delta``
(content), ``response.reasoning_summary_text.delta`` or ``response.reasoning_text.delta`` (reasoning,
``reasoning_field`` ``reasoning_summary``), the ``response.output_item.added`` of a ``function_call`` item (it
carries the name) and every non-empty ``response.function_call_arguments.delta`` (tool call). Tool calls are kept
in output order (``call_id``, name, the argument deltas joined; ``.done``'s ``arguments`` when there were none).
Every ``function_call`` item opens with its own ``output_index``, and every argument event names its call by
``output_index`` and / or ``item_id``: a missing, repeated or unknown one is ``bad_sse`` (never a merge of two calls,
never a nameless call per delta). ``response.completed`` / ``response.incomplete`` end the answer (missing: anomaly
``no_done``) when the response's status says it is whole: ``finish_reason`` from the status
(:func:`~avv_core.api_outcomes.finish_from_responses`), ``stop_reason`` the status (``incomplete:max_output_tokens``),
usage from the response's ``usage``. How the stream can end — ``failed``, ``cancelled``, a status that is no final
one, an ``error`` event — and what each end is called, is :data:`ENDS_DECLARED` (docs/reference/stream-ends.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NoReturn

from avv_core.api_formats import RESPONSES, to_responses
from avv_core.api_outcomes import finish_from_responses, usage_from_responses
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.reasoning import SUMMARY_FIELD
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


class ResponsesReader(EventReader):
    """One Responses stream (see the module docstring)."""

    unit = "event"

    def __init__(self) -> None:
        self.items: dict[int, str] = {}  # every item opened by response.output_item.added: output_index → its type
        self.calls_by_item: dict[str, int] = {}  # function_call item id → its output index
        self.known = False  # a Responses event arrived (else the stream is not a Responses stream)

    def event(self, att: Attempt, obj: JSONObject, now: float) -> None:
        kind = obj.get("type")
        if type(kind) is not str:
            if kind is None and "choices" in obj:
                raise ENDS["not_responses"].failure(seen="a chat-completions chunk, with `choices`")
            return
        if kind.startswith("response.") or kind == "error":
            self.known = True
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, att, obj, now)

    def end(self, att: Attempt) -> None:
        if not att.ok or att.finish_reason is not None:
            return
        if att.chunks and not self.known:
            ENDS["not_responses"].fail(att, seen=f"none of its {att.chunks} events is a Responses event")
        else:
            ENDS["cut"].fail(att)

    def error_kind(self, error: object) -> str:
        return overload_or_stream_error(error)

    # ------------------------------------------------------------------------------------- the events

    def item_added(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = obj["type"]
        item = obj_field(obj, "item", where)
        kind = item.get("type")
        index = int_field(obj, "output_index", where)
        if index is None:
            if kind == "function_call":
                raise MalformedStream(f"{where}.output_index is missing (a function_call item must have its own)")
            return
        if index in self.items:
            raise MalformedStream(f"{where}.output_index {index} repeats an earlier item's: two items would be read "
                                  "as one")
        self.items[index] = kind if isinstance(kind, str) else json_kind(kind)
        if kind != "function_call":
            return
        item_id = str_field(item, "id", f"{where}.item")
        if item_id:
            if item_id in self.calls_by_item:
                raise MalformedStream(f"{where}.item.id {item_id!r} repeats an earlier function_call item's")
            self.calls_by_item[item_id] = index
        call = att.tool_calls[index] = ToolCallAcc()
        call.id = str_field(item, "call_id", f"{where}.item") or item_id
        call.name = str_field(item, "name", f"{where}.item")
        att.saw_tool_call_delta = True
        mark_token(att, "tool_call", now)
        arguments = str_field(item, "arguments", f"{where}.item")
        if arguments:
            call.arguments.append(arguments)

    def item_done(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = obj["type"]
        item = obj_field(obj, "item", where)
        if item.get("type") == "function_call":
            call = self._call(att, obj, str_field(item, "id", f"{where}.item"), f"{where}.item.id")
            call.id = call.id or str_field(item, "call_id", f"{where}.item")
            call.name = call.name or str_field(item, "name", f"{where}.item")
            arguments = str_field(item, "arguments", f"{where}.item")
            if arguments and not call.arguments:
                call.arguments.append(arguments)

    def text_delta(self, att: Attempt, obj: JSONObject, now: float) -> None:
        text = str_field(obj, "delta", obj["type"])
        if text:
            att.content.append(text)
            mark_token(att, "content", now)

    def reasoning_delta(self, att: Attempt, obj: JSONObject, now: float) -> None:
        text = str_field(obj, "delta", obj["type"])
        if text:
            add_reasoning(att, text, SUMMARY_FIELD)
            mark_token(att, "reasoning", now)

    def arguments_delta(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = obj["type"]
        piece = str_field(obj, "delta", where)
        call = self._call(att, obj, str_field(obj, "item_id", where), f"{where}.item_id")
        if piece:
            call.arguments.append(piece)
            att.saw_tool_call_delta = True
            mark_token(att, "tool_call", now)

    def arguments_done(self, att: Attempt, obj: JSONObject, now: float) -> None:
        where = obj["type"]
        arguments = str_field(obj, "arguments", where)
        call = self._call(att, obj, str_field(obj, "item_id", where), f"{where}.item_id")
        if arguments and not call.arguments:
            call.arguments.append(arguments)

    def ended(self, att: Attempt, obj: JSONObject, now: float) -> None:
        """``response.completed`` / ``response.incomplete``: the answer is whole when the response's status says so
        (``completed``, ``incomplete``); ``failed`` and ``cancelled`` fail it, any other status is no final one."""
        event = obj["type"]
        where = f"{event}.response"
        response = obj_field(obj, "response", event)
        status = str_field(response, "status", where) or event.removeprefix("response.")
        att.saw_done = True
        if status == "failed":
            self._failed(att, f"{event} with status failed", response)
        if status not in ("completed", "incomplete"):
            att.stop_reason = status  # the vendor's own word, as for any end
            raise ENDS["cancelled" if status == "cancelled" else "not_final"].failure(event=event, status=status)
        reason = str_field(obj_field(response, "incomplete_details", where), "reason", f"{where}.incomplete_details")
        att.stop_reason = f"{status}:{reason}" if reason else status
        att.finish_reason = finish_from_responses(status, reason or None, bool(att.tool_calls))
        usage = obj_field(response, "usage", where)
        if usage:
            att.usage = usage_from_responses(usage)

    def failed(self, att: Attempt, obj: JSONObject, now: float) -> None:
        """``response.failed``: the answer is not whole (``overloaded`` for an overload code)."""
        att.saw_done = True
        self._failed(att, obj["type"], obj_field(obj, "response", obj["type"]))

    def error(self, att: Attempt, obj: JSONObject, now: float) -> None:
        message = error_message(json.dumps(obj).encode())
        raise StreamFailure(self.error_kind(obj), f"error event mid-stream: {message}")

    # ------------------------------------------------------------------------------------------ helpers

    def _failed(self, att: Attempt, event: str, response: JSONMapping) -> NoReturn:
        error = obj_field(response, "error", f"{event.split()[0]}.response")
        att.stop_reason = "failed"
        end = ENDS["failed_overloaded" if self.error_kind({"error": error}) == "overloaded" else "failed"]
        raise end.failure(event=event, code=error.get("code") or "no error code", message=error.get("message") or
                          "no message")

    def _call(self, att: Attempt, obj: JSONObject, item_id: str, id_field: str) -> ToolCallAcc:
        """The function call an event is about: the item at its ``output_index`` and / or the item ``item_id``
        names, which must agree and be a function_call item opened by ``response.output_item.added`` (anything
        else would put the arguments in the wrong call, or in a nameless one)."""
        where = obj["type"]
        index = int_field(obj, "output_index", where)
        by_id = self.calls_by_item.get(item_id) if item_id else None
        if index is None:
            if not item_id:
                raise MalformedStream(f"{where} has neither output_index nor an item id: which call it belongs to "
                                      "is unknown")
            if by_id is None:
                raise MalformedStream(f"{id_field} {item_id!r} is no function_call item opened by "
                                      "response.output_item.added")
            index = by_id
        elif by_id is not None and by_id != index:
            raise MalformedStream(f"{where}: output_index {index} and {id_field} {item_id!r} (output_index "
                                  f"{by_id}) name two different items")
        call = att.tool_calls.get(index)
        if call is None:
            opened = self.items.get(index)
            what = "no item opened by response.output_item.added" if opened is None else f"a {opened} item"
            raise MalformedStream(f"{where}.output_index {index} is {what}, not a function_call item")
        return call


_Handler = Callable[[ResponsesReader, Attempt, JSONObject, float], None]
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

#: How a Responses stream ends (docs/reference/stream-ends.md).
ENDS_DECLARED: tuple[StreamEnd, ...] = (
    StreamEnd("completed", "`response.completed`, status `completed`", None,
              "`finish_reason` `stop`, or `tool_calls` when it made calls; `stop_reason` `completed`"),
    StreamEnd("incomplete", "`response.incomplete` (or a final event), status `incomplete`", None,
              "`finish_reason` `length` (`max_output_tokens`) or `content_filter`; `stop_reason` "
              "`incomplete:REASON`"),
    StreamEnd("failed", "`response.failed`, or a final event whose status is `failed`", "stream_error",
              "{event}: {code}: {message}"),
    StreamEnd("failed_overloaded", "the same with an overload code (`server_is_overloaded`)", "overloaded",
              "{event}: {code}: {message}"),
    StreamEnd("cancelled", "a final event whose status is `cancelled`", "stream_error",
              "{event} with status cancelled: the vendor cancelled the response"),
    StreamEnd("not_final", "a final event whose status is not a final one (`queued`, `in_progress`, an unknown "
              "word)", "bad_sse", "{event} with status '{status}', which is not a final status"),
    StreamEnd("error", "an `error` event (`overloaded` for an overload code)", "stream_error",
              "error event mid-stream: {message}"),
    StreamEnd("cut", "the body ends without `response.completed`, `response.incomplete` or `response.failed`",
              "truncated", "the stream ended without response.completed, response.incomplete or response.failed"),
    StreamEnd("not_responses", "not a Responses stream: chat-completions chunks (`choices`), or no Responses event "
              "at all", "bad_sse", "not a Responses stream ({seen}): check the vendor's endpoint"),
)
ENDS = ends_by_key(ENDS_DECLARED)


#: a content part's type → the delta event that streams it (:meth:`ResponsesFormat.response_events`)
_PART_EVENTS = {"output_text": "response.output_text.delta", "summary_text": "response.reasoning_summary_text.delta",
                "reasoning_text": "response.reasoning_text.delta"}


class ResponsesFormat(WireFormat):
    name = RESPONSES
    path = "responses"
    summary = "OpenAI Responses, `POST {url}/responses`: the request converted (below)"
    converts = True
    ends = ENDS_DECLARED
    limit_keys = ("max_output_tokens",)

    def body(self, chat_body: JSONObject, dialect: DialectView) -> JSONObject:
        return {**to_responses(chat_body), "stream": chat_body.get("stream", True) is not False}

    def reader(self, dialect: DialectView) -> EventReader:
        return ResponsesReader()

    def response_events(self, body: JSONObject) -> list[JSONObject]:
        """A Response as its stream: per output item, a function call's ``response.output_item.added`` (the whole
        item), a message's ``response.output_text.delta`` per text part, a reasoning item's summary and text deltas;
        then ``response.completed`` / ``response.incomplete`` / ``response.failed`` by its status."""
        output = body.get("output") or []
        if not isinstance(output, list):
            raise MalformedStream("response.output is not a list")
        events: list[JSONObject] = []
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
