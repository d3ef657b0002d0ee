"""Wire format: SSE events and JSON bodies for a :class:`~avv_sim.plan.Plan`, chat completions (:class:`Wire`) and
text completions (:class:`TextWire`, raw mode) (simulator layer). :class:`Wire` is also the base of the Messages and
Responses writers (:mod:`avv_sim.event_wire`): the framing, the quirks' hooks, how many token events go out
(:meth:`Wire.chunks_to_send`) and the tail with what it sent (:meth:`Wire.tail`).

Pure string/bytes building, no I/O. Chunk envelopes are prebuilt once per request so each event costs
one small ``json.dumps`` of its delta. Reasoning goes out in the profile's ``reasoning_field``, written as
:mod:`avv_core.reasoning` declares that field. The quirks' framing, stream and finish_reason hooks
(:mod:`avv_sim.quirks`) are applied here; ``repeat_tool_header`` and ``invalid_utf8`` are written by
:meth:`Wire.delta_json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from avv_core.json_types import JSONObject
from avv_core.reasoning import FIELDS_BY_NAME
from avv_sim.plan import Plan
from avv_sim.quirks import TailPart
from avv_sim.tokens import Chunk, token_counts

#: put into a payload's text where the ``invalid_utf8`` quirk wants bytes ``\\xff\\xfe`` (:meth:`Wire.frame` swaps
#: them in)
INVALID_UTF8_MARK = "@@AVV_INVALID_UTF8@@"
DONE = "[DONE]"
KEEPALIVE_COMMENT = ": keep-alive"
GARBAGE_PAYLOAD = "{not json"


def compact_json(obj: object) -> str:
    """JSON text without whitespace, non-ASCII kept (how every event's payload is written)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


#: A str as a JSON string literal: ``json.dumps`` itself (with its defaults it is C-accelerated; no wrapper call
#: per streamed event).
json_string: Callable[[str], str] = json.dumps
_compact_ascii = json.JSONEncoder(separators=(",", ":")).encode  # any value, non-ASCII escaped as json_string does


def error_body(message: str, etype: str, code: str | None, param: str | None = None) -> JSONObject:
    """OpenAI-style error object."""
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


class Wire:
    """Renders one plan's events. ``created`` and ``completion_id`` are fixed per response."""

    def __init__(self, plan: Plan, created: int, completion_id: str, reasoning_field: str = "reasoning_content"):
        self.plan = plan
        self.reasoning_field = reasoning_field  # one of avv_core.reasoning's response fields
        self._reasoning = FIELDS_BY_NAME[reasoning_field]
        self.created = created
        self.completion_id = completion_id
        self.effects = plan.effects()
        self.eol = next((q.eol for q in self.effects if q.eol is not None), "\n")
        self._framers = [q.frame for q in self.effects if q.frame is not None]
        self._finishers = [q.finish_reason for q in self.effects if q.finish_reason is not None]
        head = compact_json(
            {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": plan.model}
        )[:-1]
        self._chunk_prefix = head + ',"choices":[{"index":0,"delta":'
        self._chunk_suffix = ',"logprobs":null,"finish_reason":null}]}'
        self._head = head
        self._calls = {c.index: c for c in plan.tool_calls}
        self._repeat_header = plan.has("repeat_tool_header")
        self._plain = self.eol == "\n" and not self._framers and not plan.has("invalid_utf8")
        # '{"tool_calls":[{"index":0,"id":"call_..","type":"function","function":{"name":"f","arguments":'
        self._tool_headers = {
            c.index: f'{{"tool_calls":[{{"index":{c.index},"id":{json_string(c.id)},"type":"function",'
            f'"function":{{"name":{json_string(c.name)},"arguments":'
            for c in plan.tool_calls
        }
        self._utf8_chunk = self._pick_invalid_utf8_chunk()
        self._comment = f"{KEEPALIVE_COMMENT}{self.eol}{self.eol}".encode()
        self.sent_finish: str | None = None  # what the tail sent (set by :meth:`tail`)
        self.sent_usage = False

    # ---------------------------------------------------------------------------------------- framing

    def frame(self, payload: str) -> bytes:
        """``data: <payload>`` + blank line (the quirks' line ending and framing applied)."""
        if self._plain:
            return b"data: " + payload.encode("utf-8") + b"\n\n"
        eol = self.eol
        text = None
        for frame in self._framers:
            text = frame(payload, eol)
            if text is not None:
                break
        data = (text if text is not None else f"data: {payload}{eol}{eol}").encode("utf-8")
        if INVALID_UTF8_MARK in payload:
            data = data.replace(INVALID_UTF8_MARK.encode(), b"\xff\xfe")
        return data

    def comment(self) -> bytes:
        return self._comment

    def garbage(self) -> bytes:
        return self.frame(GARBAGE_PAYLOAD)

    def done(self) -> bytes:
        return self.frame(DONE)

    # ------------------------------------------------------------------------------------------ events

    def role_event(self) -> bytes:
        return self.frame(self._chunk_prefix + '{"role":"assistant","content":""}' + self._chunk_suffix)

    def delta_json(self, chunk: Chunk, position: int = -1) -> str:
        """The delta object as JSON text, built by hand: this runs once per streamed event."""
        if chunk.kind == "reasoning":
            return '{"' + self.reasoning_field + '":' + _compact_ascii(self._reasoning.write(chunk.text)) + "}"
        if chunk.kind == "content":
            text = chunk.text + (INVALID_UTF8_MARK if position == self._utf8_chunk else "")
            return '{"content":' + json_string(text) + "}"
        if chunk.header or self._repeat_header:
            return self._tool_headers[chunk.index] + json_string(chunk.text) + "}}]}"
        return f'{{"tool_calls":[{{"index":{chunk.index},"function":{{"arguments":{json_string(chunk.text)}}}}}]}}'

    def chunk_event(self, chunk: Chunk, position: int = -1) -> bytes:
        return self.frame(self._chunk_prefix + self.delta_json(chunk, position) + self._chunk_suffix)

    def token_events(self, n_chunks: int) -> Callable[[int], bytes]:
        """Bytes of token event ``j`` (of the first ``n_chunks`` sent), after the quirks' ``before_token`` bytes."""
        chunks = self.plan.chunks
        hooks = [q.before_token for q in self.effects if q.before_token is not None]
        if not hooks:
            return lambda j: self.chunk_event(chunks[j], j)

        if len(hooks) == 1:
            (hook,) = hooks
            return lambda j: hook(j, n_chunks, self) + self.chunk_event(chunks[j], j)

        def make(j: int) -> bytes:
            return b"".join([hook(j, n_chunks, self) for hook in hooks]) + self.chunk_event(chunks[j], j)

        return make

    def chunks_to_send(self) -> int:
        """How many token events go out: all, or those before a fault (truncate, stream_error), cut by the quirks'
        ``cut`` hooks."""
        plan = self.plan
        n = len(plan.chunks) if plan.fault_after_chunks is None else plan.fault_after_chunks
        for quirk in self.effects:
            if quirk.cut is not None:
                n = quirk.cut(n)
        return n

    def tail(self, error: bool, usage: bool) -> bytes:
        """The events after the token events (:meth:`tail_parts`), rewritten by the quirks' ``tail`` hooks; what they
        sent is then :attr:`sent_finish` and :attr:`sent_usage`."""
        parts = self.tail_parts(error, usage)
        for quirk in self.effects:
            if quirk.tail is not None:
                parts = quirk.tail(parts, self)
        self.sent_finish, self.sent_usage = self.tail_sent([kind for kind, _ in parts], error, usage)
        return b"".join(data for _, data in parts)

    def tail_parts(self, error: bool, usage: bool) -> list[TailPart]:
        """The error event (``error``), or the finish chunk and the usage chunk (``usage``); then ``[DONE]``."""
        parts: list[TailPart] = []
        if error:
            parts.append(("error", self.error_event()))
        else:
            finish = self.finish_event(with_usage=False)
            if finish is not None:
                parts.append(("finish", finish))
            if usage:
                parts.append(("usage", self.usage_event()))
        parts.append(("done", self.done()))
        return parts

    def tail_sent(self, kinds: list[str], error: bool, usage: bool) -> tuple[str | None, bool]:
        """(the finish_reason sent, whether usage was sent) by a tail of these part kinds."""
        return (None, False) if error else (self.finish_reason(), usage)

    def finish_reason(self) -> str | None:
        """The finish_reason sent: the plan's, through the quirks' finish_reason hooks."""
        reason: str | None = self.plan.finish_reason
        for hook in self._finishers:
            reason = hook(reason)
        return reason

    def usage(self) -> JSONObject:
        p, c = self.plan.usage_prompt_tokens, self.plan.usage_completion_tokens
        usage: JSONObject = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        reasoning = token_counts(self.plan.chunks)["reasoning"]
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def finish_event(self, with_usage: bool) -> bytes | None:
        """The ``finish_reason`` chunk; None when a quirk drops the reason and no usage rides on it."""
        reason = self.finish_reason()
        if reason is None and not with_usage:
            return None
        obj = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.plan.model,
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}],
        }
        if with_usage:
            obj["usage"] = self.usage()
        return self.frame(compact_json(obj))

    def usage_event(self) -> bytes:
        return self.frame(self._head + ',"choices":[],"usage":' + compact_json(self.usage()) + "}")

    def overloaded_event(self) -> bytes:
        """The overload that ends a stream (the ``overloaded_error`` quirk: Messages and Responses only)."""
        return self.error_event()

    def error_event(self) -> bytes:
        return self.frame(
            compact_json(
                {
                    "error": {
                        "message": "The server had an error while processing your request.",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
            )
        )

    # ------------------------------------------------------------------------------------ non-stream

    def completion_body(self) -> JSONObject:
        """A complete ``chat.completion`` object (non-stream, or the json_body quirk)."""
        counts = token_counts(self.plan.chunks)
        message: JSONObject = {"role": "assistant", "content": None}
        if counts["content"]:
            message["content"] = "".join(c.text for c in self.plan.chunks if c.kind == "content")
        elif not self.plan.tool_calls:
            message["content"] = ""
        if counts["reasoning"]:
            text = "".join(c.text for c in self.plan.chunks if c.kind == "reasoning")
            message[self.reasoning_field] = self._reasoning.write(text)
        if self.plan.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.plan.tool_calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.plan.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        }

    def _pick_invalid_utf8_chunk(self) -> int:
        if not self.plan.has("invalid_utf8"):
            return -1
        return next((i for i, c in enumerate(self.plan.chunks) if c.kind == "content"), -1)


class TextWire(Wire):
    """``text_completion`` events: every token chunk, whatever its kind, is ``choices[0].text``."""

    def __init__(self, plan: Plan, created: int, completion_id: str):
        super().__init__(plan, created, completion_id.replace("chatcmpl-", "cmpl-", 1))
        head = compact_json({"id": self.completion_id, "object": "text_completion", "created": created,
                       "model": plan.model})[:-1]
        self._head = head
        self._chunk_prefix = head + ',"choices":[{"index":0,"text":'
        self._chunk_suffix = ',"logprobs":null,"finish_reason":null}]}'

    def role_event(self) -> bytes:
        return self.frame(self._chunk_prefix + '""' + self._chunk_suffix)

    def delta_json(self, chunk: Chunk, position: int = -1) -> str:
        return json_string(chunk.text)

    def finish_event(self, with_usage: bool) -> bytes | None:
        reason = self.finish_reason()
        if reason is None and not with_usage:
            return None
        obj: JSONObject = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "", "logprobs": None, "finish_reason": reason}]
        if with_usage:
            obj["usage"] = self.usage()
        return self.frame(compact_json(obj))

    def completion_body(self) -> JSONObject:
        obj: JSONObject = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "".join(c.text for c in self.plan.chunks), "logprobs": None,
                           "finish_reason": self.finish_reason()}]
        obj["usage"] = self.usage()
        return obj
