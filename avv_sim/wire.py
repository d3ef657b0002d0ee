"""Wire format: SSE events and JSON bodies for a :class:`~avv_sim.behaviour.Plan`, chat completions
(:class:`Wire`) and text completions (:class:`TextWire`, raw mode).

Pure string/bytes building, no I/O. Chunk envelopes are prebuilt once per request so each event costs
one small ``json.dumps`` of its delta. Reasoning goes out in the profile's ``reasoning_field``, written as
:mod:`avv_core.reasoning` declares that field.
"""

from __future__ import annotations

import json
from typing import Any

from avv_core.reasoning import FIELDS_BY_NAME
from avv_sim.behaviour import Chunk, Plan, token_counts

_INVALID_UTF8_MARK = "@@AVV_INVALID_UTF8@@"
DONE = "[DONE]"
KEEPALIVE_COMMENT = ": keep-alive"
GARBAGE_PAYLOAD = "{not json"
HTML_BODY = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>avv-sim html_body quirk</p></body></html>\n"
)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


_jstr = json.dumps  # a str → JSON string literal (C-accelerated with the default settings)
_compact_ascii = json.JSONEncoder(separators=(",", ":")).encode  # any value, non-ASCII escaped as _jstr does


def error_body(message: str, etype: str, code: str | None, param: str | None = None) -> dict[str, Any]:
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
        self.eol = "\r\n" if plan.has("crlf") else "\n"
        head = _dumps(
            {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": plan.model}
        )[:-1]
        self._chunk_prefix = head + ',"choices":[{"index":0,"delta":'
        self._chunk_suffix = ',"logprobs":null,"finish_reason":null}]}'
        self._head = head
        self._calls = {c.index: c for c in plan.tool_calls}
        self._repeat_header = plan.has("repeat_tool_header")
        self._plain = not plan.has("crlf") and not plan.has("multiline_data") and not plan.has("invalid_utf8")
        # '{"tool_calls":[{"index":0,"id":"call_..","type":"function","function":{"name":"f","arguments":'
        self._tool_headers = {
            c.index: f'{{"tool_calls":[{{"index":{c.index},"id":{_jstr(c.id)},"type":"function",'
            f'"function":{{"name":{_jstr(c.name)},"arguments":'
            for c in plan.tool_calls
        }
        self._utf8_chunk = self._pick_invalid_utf8_chunk()

    # ---------------------------------------------------------------------------------------- framing

    def frame(self, payload: str) -> bytes:
        """``data: <payload>`` + blank line (CRLF / split across two data lines when quirked)."""
        if self._plain:
            return b"data: " + payload.encode("utf-8") + b"\n\n"
        eol = self.eol
        if self.plan.has("multiline_data") and payload.startswith("{") and len(payload) > 1:
            # splitting right after the opening brace keeps the joined data ("{\n...") valid JSON
            text = f"data: {{{eol}data: {payload[1:]}{eol}{eol}"
        else:
            text = f"data: {payload}{eol}{eol}"
        data = text.encode("utf-8")
        if _INVALID_UTF8_MARK in payload:
            data = data.replace(_INVALID_UTF8_MARK.encode(), b"\xff\xfe")
        return data

    def comment(self) -> bytes:
        return f"{KEEPALIVE_COMMENT}{self.eol}{self.eol}".encode()

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
            text = chunk.text + (_INVALID_UTF8_MARK if position == self._utf8_chunk else "")
            return '{"content":' + _jstr(text) + "}"
        if chunk.header or self._repeat_header:
            return self._tool_headers[chunk.index] + _jstr(chunk.text) + "}}]}"
        return f'{{"tool_calls":[{{"index":{chunk.index},"function":{{"arguments":{_jstr(chunk.text)}}}}}]}}'

    def chunk_event(self, chunk: Chunk, position: int = -1) -> bytes:
        return self.frame(self._chunk_prefix + self.delta_json(chunk, position) + self._chunk_suffix)

    def finish_reason(self) -> str | None:
        if self.plan.has("no_finish_reason"):
            return None
        if self.plan.finish_reason == "tool_calls" and self.plan.has("tool_calls_under_stop"):
            return "stop"
        return self.plan.finish_reason

    def usage(self) -> dict[str, Any]:
        p, c = self.plan.prompt_tokens, self.plan.completion_tokens
        usage: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        reasoning = token_counts(self.plan.chunks)["reasoning"]
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def finish_event(self, with_usage: bool) -> bytes | None:
        """The ``finish_reason`` chunk; None when no_finish_reason drops it and no usage rides on it."""
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
        return self.frame(_dumps(obj))

    def usage_event(self) -> bytes:
        return self.frame(self._head + ',"choices":[],"usage":' + _dumps(self.usage()) + "}")

    def error_event(self) -> bytes:
        return self.frame(
            _dumps(
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

    def completion_body(self) -> dict[str, Any]:
        """A complete ``chat.completion`` object (non-stream, or the json_body quirk)."""
        counts = token_counts(self.plan.chunks)
        message: dict[str, Any] = {"role": "assistant", "content": None}
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
        head = _dumps({"id": self.completion_id, "object": "text_completion", "created": created,
                       "model": plan.model})[:-1]
        self._head = head
        self._chunk_prefix = head + ',"choices":[{"index":0,"text":'
        self._chunk_suffix = ',"logprobs":null,"finish_reason":null}]}'

    def role_event(self) -> bytes:
        return self.frame(self._chunk_prefix + '""' + self._chunk_suffix)

    def delta_json(self, chunk: Any, position: int = -1) -> str:
        return _jstr(chunk.text)

    def finish_event(self, with_usage: bool) -> bytes | None:
        reason = self.finish_reason()
        if reason is None and not with_usage:
            return None
        obj: dict[str, Any] = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "", "logprobs": None, "finish_reason": reason}]
        if with_usage:
            obj["usage"] = self.usage()
        return self.frame(_dumps(obj))

    def completion_body(self) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(self._head + "}")
        obj["choices"] = [{"index": 0, "text": "".join(c.text for c in self.plan.chunks), "logprobs": None,
                           "finish_reason": self.finish_reason()}]
        obj["usage"] = self.usage()
        return obj
