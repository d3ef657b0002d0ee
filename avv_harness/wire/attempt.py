"""What one HTTP attempt produced, and the loop that reads a stream's events into it (wire-client layer, pure: no
I/O). :mod:`avv_harness.wire.stream` reads the bytes; this module decodes each SSE event's JSON and hands it to the
attempt's :class:`EventReader`, which the vendor's wire format supplies (:mod:`avv_harness.wire.formats`: what each
event means for the attempt in chat completions, raw completions, Messages or Responses).

The vendor's fault is the vendor's: a field of the wrong JSON type, a non-finite number (``Infinity``, ``NaN``),
over-deep nesting and an ``event: error`` frame are classified (``bad_sse``, ``stream_error``, ``overloaded``).
What counts as a token event (TTFT, TPS, ``ttft_kind``) is decided by the reader, with :func:`mark_token`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

import orjson

from avv_core.json_types import JSONObject, JSONValue
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
    finish_reason: str | None = None  # chat's word for how the answer ended, whatever the format
    stop_reason: str | None = None  # the vendor's own word (chat: the raw finish_reason; Messages: stop_reason …)
    saw_done: bool = False  # the format's end event arrived (chat: [DONE]; Messages: message_stop …)
    saw_tool_call_delta: bool = False
    usage: JSONObject | None = None
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
    streamed: bool = True  # False: the answer was one JSON body (a non-streamed request): no decode phase, no TPS

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


def json_kind(value: object) -> str:
    """How a JSON value reads in an error message (``a string``, ``a list`` …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def mark_token(att: Attempt, kind: str, now: float) -> None:
    """One token event (``kind``: ``content``, ``reasoning`` or ``tool_call``) arrived at ``now``: the first one is
    the TTFT and its kind, the last one ends the decode phase."""
    if att.t_first_token is None:
        att.t_first_token, att.first_token_kind = now, kind
        att.first_token_read = att.reads
    att.t_last_token = now
    att.last_token_read = att.reads
    att.token_events += 1


def add_reasoning(att: Attempt, text: str, field_name: str) -> None:
    """Reasoning text read from the field ``field_name`` (the record's ``reasoning_field``)."""
    att.reasoning_chars += len(text)
    att.reasoning.append(text)
    if field_name not in att.reasoning_fields:
        att.reasoning_fields.append(field_name)


class StreamFailure(Exception):
    """An event that ends the attempt as a failure of the vendor's (``kind``: an error kind, ``detail``: why)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


class EventReader:
    """How one attempt's events are read: one reader per attempt (it may keep state from event to event).

    :meth:`event` gets each data event's JSON object, in order; it raises :class:`MalformedStream` for a field of
    the wrong JSON type (``bad_sse``) and :class:`StreamFailure` for an event that fails the answer. :meth:`end`
    runs once after the stream (whatever its outcome). :meth:`error_kind` classifies an error event."""

    unit = "chunk"  # what an event is called in a ``bad_sse`` message
    whole_body = False  # True: the request was not streamed, a JSON body is its answer (:class:`WholeBody`)

    def event(self, att: Attempt, obj: JSONObject, now: float) -> None:
        raise NotImplementedError

    def end(self, att: Attempt) -> None:
        """After the last event (or the failure): what can only be read from the whole stream."""

    def error_kind(self, error: object) -> str:
        """The error kind of an error event (``error``: its data's JSON, None when it has none or it is not JSON)."""
        return "stream_error"


class _NonFinite(ValueError):
    """``Infinity``, ``-Infinity`` or ``NaN``: Python's json reads them, JSON has no such numbers."""


def _refuse_constant(name: str) -> NoReturn:
    raise _NonFinite(name)


_JSON = json.JSONDecoder(parse_constant=_refuse_constant)  # one decoder: json.loads(…, **kw) builds one per call


#: A run of 19 digits (an integer orjson would read as a float, past 64 bits, where json keeps it an int) is found
#: as 19 nines in the data with every digit mapped to 9 (~0.5 µs for a chunk; a regex search takes ~1.5).
_DIGITS_AS_9 = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"9" * 19
#: Brackets below which no value can be nested deep enough to reach json's recursion limit or orjson's (1,024).
_SHALLOW = 900


def fast_decode(data: bytes) -> JSONValue:
    """An event's JSON with orjson (~3× faster than json) where both read it alike, else None: then the caller
    reads it with json, whose result and errors stay the reference. orjson refuses what json reads differently
    (``NaN`` / ``Infinity``, lone surrogates, numbers out of double range, invalid UTF-8, deep nesting) and json
    takes over; integers past 64 bits (orjson: a float) and deep values never reach orjson. Duplicate keys: the
    last wins in both."""
    if len(data) >= _SHALLOW and data.count(b"{") + data.count(b"[") >= _SHALLOW:
        return None
    if _LONG_NUMBER in data.translate(_DIGITS_AS_9):
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return obj


def bad_data(att: Attempt, reason: str, now: float) -> bool:
    att.t_end = now
    att.fail("bad_sse", reason)
    return False


def _error_json(data: bytes | None) -> JSONValue:
    """An error event's data as JSON, or None (no data, not JSON): only to classify it."""
    if not data:
        return None
    try:
        return json.loads(data[:MAX_ERROR_BODY])
    except (ValueError, RecursionError):
        return None


def apply_events(att: Attempt, events: list[SSEEvent], now: float, reader: EventReader) -> bool:
    """Apply the events one read completed; all are stamped ``now``, when their last byte arrived.
    False: the attempt failed here, stop reading."""
    read = reader.event
    for event_type, data in events:
        if data is not None and data[:1] != b"{" and data.strip() == b"[DONE]":  # a chunk's JSON starts at once
            # Keep reading to the end of the body, as the official SDK does: the last byte is the
            # true end, and a fully read response lets the connection be reused.
            att.saw_done = True
            att.t_end = now
            continue
        if att.saw_done:
            continue  # nothing after the end ([DONE], or the format's end event) is part of the answer
        if event_type == b"error":  # `event: error`: whatever came before, the answer is not whole
            att.t_end = now
            message = error_message(data) if data else "(no data)"
            att.fail(reader.error_kind(_error_json(data)), f"error event mid-stream: {message}")
            return False
        assert data is not None  # the parser gives data with every event but an error one
        obj = fast_decode(data)
        if obj is not None:
            text = ""  # only needed in a message below: decoded there
        else:
            text = data.decode("utf-8")  # invalid UTF-8 raises: bad_sse in stream_chat
        try:
            if obj is None:
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
            return bad_data(att, f"data line is not a JSON object: {data.decode()[:120]!r}", now)
        if obj.get("error"):
            att.t_end = now
            err = obj["error"]
            said = err.get("message") if isinstance(err, dict) else str(err)
            att.fail(reader.error_kind(obj), f"error event mid-stream: {said}")
            return False
        att.chunks += 1
        try:
            read(att, obj, now)
        except MalformedStream as exc:
            return bad_data(att, f"malformed {reader.unit}: {exc}", now)
        except RecursionError:  # tool-call arguments nested too deeply to write back as text
            return bad_data(att, f"malformed {reader.unit}: nested too deeply to read: {data.decode()[:60]!r}", now)
        except StreamFailure as exc:
            att.t_end = now
            att.fail(exc.kind, exc.detail)
            return False
        att.t_end = now
    return True


# ----------------------------------------------------------------------------- a non-streamed answer


class WholeBody(EventReader):
    """How a non-streamed answer is read (the request said ``stream: false``): its JSON body turned into the events
    the format would have streamed (``events``: the format's :meth:`~avv_harness.wire.formats.base.WireFormat.
    response_events`) and read by the format's own reader (``inner``), so one reader decides what a streamed and a
    non-streamed answer hold. A vendor that streams anyway is read as a stream."""

    whole_body = True

    def __init__(self, inner: EventReader, events: Callable[[JSONObject], list[JSONObject]]):
        self.inner = inner
        self.events = events  # the parsed body → [event object, …]
        self.unit = inner.unit

    def event(self, att: Attempt, obj: JSONObject, now: float) -> None:
        self.inner.event(att, obj, now)

    def end(self, att: Attempt) -> None:
        self.inner.end(att)

    def error_kind(self, error: object) -> str:
        return self.inner.error_kind(error)


def read_whole_body(att: Attempt, body: bytes, reader: WholeBody, now: float, max_bytes: int) -> None:
    """An HTTP 200 JSON body answering a non-streamed request (its first ``max_bytes`` + 1 bytes: ``body``), read into
    the attempt through ``reader``; the body is the whole answer (no ``no_done`` anomaly). What cannot be read is
    ``bad_sse``, as for a stream."""
    att.t_end = now
    att.bytes_read += len(body)
    att.reads += 1
    att.streamed = False
    if len(body) > max_bytes:
        bad_data(att, f"JSON body larger than {max_bytes} bytes", now)
        return
    try:
        obj = _JSON.decode(body.decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        bad_data(att, f"HTTP 200 whose body is not JSON ({type(exc).__name__}): {body[:120]!r}", now)
        return
    if not isinstance(obj, dict):
        bad_data(att, f"HTTP 200 whose JSON body is {json_kind(obj)}, not an object", now)
        return
    if obj.get("error"):  # an error object with status 200
        apply_events(att, [(b"", body)], now, reader)
        return
    try:
        events = reader.events(obj)
    except MalformedStream as exc:
        bad_data(att, f"malformed JSON body: {exc}", now)
        return
    if apply_events(att, [(b"", json.dumps(e).encode("utf-8")) for e in events], now, reader):
        att.saw_done = True
