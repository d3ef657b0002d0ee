"""The wire client: one streaming chat-completions (or raw ``/v1/completions``) attempt, measured to the
millisecond.

Bytes are read with urllib3's ``read1`` (whatever has arrived, never waiting to fill a block) and split
into SSE events by :class:`SSEParser`, so an event is timestamped when its last byte arrives. Locust's
``iter_lines`` reads 1 KiB blocks and delays small events; see ``bench/measure.py`` for the comparison.

No vendor can stall another in the same process: the work per read and per event is bounded (an event or
line larger than ``max_event_bytes`` is ``bad_sse``; the parser is linear in the bytes), the reading loop
lets the gevent loop turn when it has run YIELD_AFTER_S without waiting for bytes, and ``max_request_s``
is checked on every read. The vendor's fault is the vendor's: malformed JSON shapes, non-finite numbers
(``Infinity``, ``NaN``), over-deep nesting, an ``event: error`` frame and a response head that cannot be
parsed are classified (``bad_sse``, ``stream_error``), never left to raise as a client error.

All times are ``time.monotonic()`` seconds (the simulator's truth log uses the same clock).

Response dialects: reasoning is read from the response fields declared in :mod:`avv_core.reasoning`
(``delta.reasoning_content``, ``delta.reasoning``, ``delta.reasoning_details[].text``) alike, one per event,
in that order, so a vendor that sends the same text under two names is not counted twice;
``Attempt.reasoning_fields`` says which carried it. A completions stream's ``choices[0].text`` is collected
as content; raw mode reads reasoning and calls out of it at the end (:mod:`avv_harness.wire.completions`).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
import requests
from urllib3.exceptions import LocationParseError, ProtocolError, ReadTimeoutError

from avv_core.reasoning import RESPONSE_FIELDS
from avv_harness.inputs.config import redact_url
from avv_harness.run.options import DEFAULT_MAX_EVENT_BYTES
from avv_harness.wire.connections import find_cause, send_on_fresh_if_stale

READ_BLOCK = 65536
YIELD_AFTER_S = 0.0005  # the longest the reading loop runs without letting the process's other users in
YIELD_S = 1e-6  # how it lets them in: a sleep that ends in the gevent loop's next turn
USER_AGENT = {"User-Agent": f"avv-locust/0.1 python-requests/{requests.__version__}"}
MAX_ERROR_BODY = 2048


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


DONE_GRACE_S = 2.0  # how long bytes may keep coming after [DONE] before the client stops reading


class _TimeUp(Exception):
    """The attempt's total time cap (``max_request_s``) passed while bytes were still arriving."""


class _DoneLinger(Exception):
    """Bytes (``: ping`` comments, junk) kept arriving well after ``[DONE]``."""


class _Malformed(Exception):
    """The vendor sent something that is not a chat-completions SSE stream (``bad_sse``); says what."""


SSEEvent = tuple[bytes, bytes | None]  # (event type, data lines joined by \n; None: an error event without data)


class SSEParser:
    """SSE framing (WHATWG "interpreting an event stream"), linear in the bytes fed to it.

    :meth:`feed` takes the bytes of one read and returns the events they complete. Lines end with CRLF,
    LF or CR (a CRLF split between two reads too); comments and ``id`` / ``retry`` / unknown fields are
    skipped; an event without data is dropped, as the spec says, unless its type is ``error``. An event
    (everything from the end of the previous one to its blank line, comments included) or an unterminated
    line larger than ``max_event_bytes`` raises :class:`_Malformed` at once, so no more is ever held.

    It replaces sseclient-py here, which copies its whole buffer again for every line and every read:
    a 1 MiB event made of short ``data:`` lines took 5 s of CPU (4 MiB: 32 s) and a 20 MB one-line event
    3 s, with the process's event loop blocked all along; bounding the event size does not bound that.
    """

    __slots__ = ("max_event_bytes", "_partial", "_partial_bytes", "_after_cr", "_data", "_type", "_event_bytes")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES):
        self.max_event_bytes = max_event_bytes
        self._partial: list[bytes] = []  # the unterminated line so far, joined once when it ends
        self._partial_bytes = 0
        self._after_cr = False  # the last read ended with CR: an LF opening the next one belongs to it
        self._data: list[bytes] = []  # the data lines of the event being read
        self._type = b""  # its `event:` field
        self._event_bytes = 0  # its size so far (lines and terminators, comments included)

    def feed(self, block: bytes) -> list[SSEEvent]:
        if self._after_cr and block[:1] == b"\n":
            block = block[1:]
        if not block:
            return []
        last = block[-1:]
        self._after_cr = last == b"\r"
        lines = block.splitlines()  # bytes split on CR, LF and CRLF only
        tail = None if last == b"\n" or self._after_cr else lines.pop()
        if self._partial and lines:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial, self._partial_bytes = [], 0
        events = self._lines(lines) if lines else []
        if tail is not None:
            self._partial.append(tail)
            self._partial_bytes += len(tail)
            if self._event_bytes + self._partial_bytes > self.max_event_bytes:
                raise self._too_big()
        return events

    def close(self) -> list[SSEEvent]:
        """End of the body: what is left is one last event (as sseclient-py read it)."""
        lines = [b"".join(self._partial), b""] if self._partial else [b""]
        self._partial, self._partial_bytes = [], 0
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        size, limit = self._event_bytes, self.max_event_bytes
        for line in lines:
            if not line:  # a blank line ends the event
                if self._data:
                    data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                    events.append((self._type, data))
                    self._data = []
                elif self._type == b"error":
                    events.append((self._type, None))
                self._type, size = b"", 0
                continue
            size += len(line) + 1
            if size > limit:
                self._event_bytes = size
                raise self._too_big()
            if line[:5] == b"data:":  # the usual line first
                self._data.append(line[6:] if line[5:6] == b" " else line[5:])
                continue
            if line[:1] == b":":  # a comment
                continue
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._type = value
        self._event_bytes = size
        return events

    def _too_big(self) -> _Malformed:
        return _Malformed(f"SSE event larger than {self.max_event_bytes} bytes (--avv-max-event-bytes)")


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _status_kind(status: int) -> str:
    """429 → http_429, 5xx → http_5xx, anything else that is not 200 (4xx, an unfollowed 3xx) → http_4xx."""
    if status == 429:
        return "http_429"
    if 500 <= status < 600:
        return "http_5xx"
    return "http_4xx"


def _error_message(body: bytes) -> str:
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
        raise _Malformed(f"{where}.index is {_json_kind(index)}, not an integer")
    call = acc.setdefault(index, ToolCallAcc())
    if delta.get("id") and not call.id:
        call.id = str(delta["id"])
    function = delta.get("function") or {}
    if not isinstance(function, dict):
        raise _Malformed(f"{where}.function is {_json_kind(function)}, not an object")
    name = function.get("name")
    if name and not isinstance(name, str):
        raise _Malformed(f"{where}.function.name is {_json_kind(name)}, not a string")
    # Some servers (llama-cpp-python) repeat the whole name in every delta: never concatenate a repeat.
    if name and name != call.name:
        call.name = name if not call.name else call.name + name
    arguments = function.get("arguments")
    if arguments:
        call.arguments.append(arguments if isinstance(arguments, str) else json.dumps(arguments))


def _apply_chunk(att: Attempt, obj: dict[str, Any], now: float) -> None:
    """Read one chunk into the attempt. A field we read that has the wrong JSON type raises
    :class:`_Malformed` naming it (the shape is checked only where a field is read); null or missing
    fields are read as absent, as before."""
    usage = obj.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise _Malformed(f"usage is {_json_kind(usage)}, not an object")
        if usage:
            att.usage = usage
    choices = obj.get("choices")
    if choices is None:
        choices = ()
    elif not isinstance(choices, list):
        raise _Malformed(f"choices is {_json_kind(choices)}, not a list")
    token_kind = None
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            if choice is None:
                continue
            raise _Malformed(f"choices[{i}] is {_json_kind(choice)}, not an object")
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            field_name = "delta" if choice.get("delta") else "message"
            raise _Malformed(f"choices[{i}].{field_name} is {_json_kind(delta)}, not an object")
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
                raise _Malformed(f"choices[{i}].delta.tool_calls is {_json_kind(tool_calls)}, not a list")
            att.saw_tool_call_delta = True
            for position, tc in enumerate(tool_calls):
                where = f"choices[{i}].delta.tool_calls[{position}]"
                if isinstance(tc, dict):
                    _merge_tool_call(att.tool_calls, tc, position, where)
                elif tc is not None:
                    raise _Malformed(f"{where} is {_json_kind(tc)}, not an object")
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


def _bad_data(att: Attempt, reason: str, now: float) -> bool:
    att.t_end = now
    att.fail("bad_sse", reason)
    return False


def _on_events(att: Attempt, events: list[SSEEvent], now: float) -> bool:
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
            message = _error_message(data) if data else "(no data)"
            att.fail("stream_error", f"error event mid-stream: {message}")
            return False
        assert data is not None  # the parser gives data with every event but an error one
        text = data.decode("utf-8")  # invalid UTF-8 raises: bad_sse in stream_chat
        try:
            obj = _JSON.decode(text)
        except _NonFinite as exc:
            at = text.find(str(exc))
            return _bad_data(att, f"non-finite number {exc} (not JSON) in data line: "
                             f"{text[max(0, at - 80):at + len(str(exc))]!r}", now)
        except RecursionError:
            return _bad_data(att, f"data line nested too deeply to read: {text[:60]!r}", now)
        except ValueError:
            return _bad_data(att, f"unparseable data line: {text[:120]!r}", now)
        if not isinstance(obj, dict):
            return _bad_data(att, f"data line is not a JSON object: {text[:120]!r}", now)
        if obj.get("error"):
            att.t_end = now
            err = obj["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            att.fail("stream_error", f"error event mid-stream: {message}")
            return False
        att.chunks += 1
        try:
            _apply_chunk(att, obj, now)
        except _Malformed as exc:
            return _bad_data(att, f"malformed chunk: {exc}", now)
        except RecursionError:  # tool-call arguments nested too deeply to write back as text
            return _bad_data(att, f"malformed chunk: nested too deeply to read: {text[:60]!r}", now)
        att.t_end = now
    return True


def _consume_events(att: Attempt, resp: requests.Response, deadline: float, max_event_bytes: int) -> None:
    """Read the body as it arrives (urllib3 ``read1``: no waiting to fill a block) and apply its events.

    Stops a stream that outlives the total cap, or that lingers after ``[DONE]``: the socket's read timeout
    only bounds the gap between bytes, so a vendor trickling a token every few seconds would otherwise hold
    the run. The work per read is bounded (one block; events of at most ``max_event_bytes``), and when
    bytes are always ready (no read waits) the loop yields to gevent every YIELD_AFTER_S, so one vendor's
    stream cannot delay the other users of this process.
    """
    read1 = resp.raw.read1
    parser = SSEParser(max_event_bytes)
    monotonic = time.monotonic
    # The gevent loop's turn counter (libev's, gevent's default loop): it moves only when this greenlet
    # waited and the other users ran.
    loop = gevent.get_hub().loop
    turn = loop.iteration
    busy_since = monotonic()
    while True:
        block = read1(READ_BLOCK)
        now = monotonic()
        if not block:
            _on_events(att, parser.close(), now)
            return
        if now > deadline:
            raise _TimeUp
        if att.saw_done and att.t_end is not None and now - att.t_end > DONE_GRACE_S:
            raise _DoneLinger
        att.bytes_read += len(block)
        att.reads += 1
        if loop.iteration != turn:  # the read waited for bytes: the other users ran meanwhile
            turn, busy_since = loop.iteration, now
        elif now - busy_since > YIELD_AFTER_S:
            # Bytes keep being ready: let the other users in (these events keep the time `now`). A sleep > 0,
            # not sleep(0): gevent may run sleep(0)'s callback again before the loop polls the other sockets.
            gevent.sleep(YIELD_S)
            turn, busy_since = loop.iteration, monotonic()
        try:
            events = parser.feed(block)
        except _Malformed as exc:
            _bad_data(att, str(exc), now)
            return
        if not _on_events(att, events, now):
            return


def _non_sse_body(att: Attempt, resp: requests.Response, content_type: str) -> None:
    body = resp.raw.read(MAX_ERROR_BODY + 1, decode_content=True) or b""
    att.t_end = time.monotonic()
    att.bytes_read += len(body)
    if not body:
        att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    elif "json" in content_type or body.lstrip()[:1] in (b"{", b"["):
        att.fail("bad_sse", f"HTTP 200 with a JSON body instead of an SSE stream ({content_type or 'no content-type'})")
    else:
        att.fail("bad_sse", f"HTTP 200 with a non-SSE body ({content_type or 'no content-type'})")


def _environment_settings(session: requests.Session, url: str) -> dict[str, Any]:
    """Proxy / CA settings from the environment, looked up once per session and URL: requests scans
    the whole environment on every call (~0.5 ms), which would sit on the hot path of every request."""
    cache = session.__dict__.setdefault("_avv_env_settings", {})
    if url not in cache:
        cache[url] = session.merge_environment_settings(url, {}, True, None, None)
    return cache[url]


def stream_chat(
    session: requests.Session,
    url: str,
    body: bytes,
    headers: dict[str, str],
    connect_timeout: float,
    read_timeout: float,
    max_request_s: float = 600.0,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> Attempt:
    """Send one streaming chat-completions request and read it to the end.

    ``read_timeout`` bounds each wait for bytes (idle time); ``max_request_s`` bounds the whole attempt
    (checked whenever bytes arrive; the socket timeout bounds the gaps); ``max_event_bytes`` bounds one SSE
    event or line. Never raises for network or protocol problems, nor for anything the vendor sends: they
    are classified into ``Attempt.error_kind``. A request the client cannot even send (a header value or
    URL requests refuses) is ``client_error``, never the vendor's fault.
    """
    att = Attempt(t0=time.monotonic())
    resp = None
    try:
        # Everything but the transport happens before t0. The session's adapter is called directly:
        # Session.send adds cookie jars, hooks and redirect handling that an API stream does not use and
        # that cost ~0.3 ms of CPU per request on the hot path (bench/README.md).
        prepared = requests.PreparedRequest()
        prepared.prepare(method="POST", url=url, headers={**USER_AGENT, **headers}, data=body)
        settings = _environment_settings(session, prepared.url)
        adapter = session.get_adapter(prepared.url)
        att.t0 = time.monotonic()
        resp, resent_at = send_on_fresh_if_stale(adapter, prepared, (connect_timeout, min(read_timeout, max_request_s)),
                                                 settings)
        if resent_at is not None:  # the attempt restarted on a fresh connection (not the vendor's failure)
            att.stale_conn_retries, att.t0 = 1, resent_at
        deadline = att.t0 + max_request_s
        att.t_headers = time.monotonic()
        att.http_status = resp.status_code
        if resp.status_code != 200:
            att.retry_after_s = _parse_retry_after(resp.headers.get("Retry-After"))
            payload = resp.raw.read(MAX_ERROR_BODY, decode_content=True) or b""
            att.t_end = time.monotonic()
            return att.fail(_status_kind(resp.status_code), f"HTTP {resp.status_code}: {_error_message(payload)}")
        content_type = resp.headers.get("Content-Type", "").lower()
        if "text/event-stream" not in content_type:
            _non_sse_body(att, resp, content_type)
            return att
        _consume_events(att, resp, deadline, max_event_bytes)
        att.t_end = time.monotonic()
        if att.bytes_read == 0:
            att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    except _TimeUp:
        _broken(att, "timeout", f"the attempt exceeded max_request_s ({max_request_s:g}s) while still streaming")
    except _DoneLinger:
        att.t_end = time.monotonic()  # the answer was whole at [DONE]; stop reading the trailing bytes
    except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema, UnicodeEncodeError, LocationParseError) as exc:
        att.fail("client_error", f"the client could not send the request ({type(exc).__name__}: {_short(exc)})")
    except requests.exceptions.ConnectTimeout as exc:
        att.fail("timeout", f"connect timeout after {connect_timeout:g}s ({type(exc).__name__})")
    except requests.exceptions.ReadTimeout:
        att.fail("timeout", f"no response headers within {read_timeout:g}s")
    except ReadTimeoutError:
        _broken(att, "timeout", f"stream stalled for more than {read_timeout:g}s")
    except requests.exceptions.ConnectionError as exc:
        if _unparseable(att, exc):
            pass
        elif att.t_headers is None:
            att.fail("connect", f"cannot connect to {redact_url(url)}: {_short(exc)}")
        else:
            _broken(att, "truncated", f"connection closed mid-stream: {_short(exc)}")
    except (ProtocolError, OSError) as exc:
        if not _unparseable(att, exc):
            _broken(att, "truncated", f"connection closed mid-stream: {_short(exc)}")
    except UnicodeDecodeError as exc:
        att.fail("bad_sse", f"stream is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    except requests.exceptions.RequestException as exc:
        att.fail("connect", f"request failed: {_short(exc)}")
    finally:
        if att.t_end is None:
            att.t_end = time.monotonic()
        if resp is not None:
            resp.close()
    if att.ok and att.finish_reason is None:
        where = "[DONE] without any finish_reason" if att.saw_done else "stream ended without finish_reason"
        att.fail("truncated", where)
    return att


# What http.client raises when it cannot parse what the vendor sent: a status line, header line or chunk-size
# line over 65,536 bytes (LineTooLong), more than 100 headers (HTTPException), a status line that is not
# HTTP (BadStatusLine, UnknownProtocol). Exact types: RemoteDisconnected (a BadStatusLine: the connection
# closed before any byte) stays a `connect` failure, IncompleteRead a truncation.
_UNPARSEABLE = (http.client.LineTooLong, http.client.HTTPException, http.client.BadStatusLine,
                http.client.UnknownProtocol)


def _unparseable(att: Attempt, exc: BaseException) -> bool:
    """Fail the attempt as ``bad_sse`` when ``exc`` is the vendor's unparseable status line, headers or
    chunk framing (not a network failure: retrying would not help, and it is not the client's)."""
    cause = find_cause(exc, lambda item: type(item) in _UNPARSEABLE)
    if cause is None:
        return False
    reason = f"{type(cause).__name__}: {str(cause)[:200]}"
    if att.t_headers is None:
        att.fail("bad_sse", f"the response's status line or headers cannot be parsed ({reason})")
    else:
        _broken(att, "bad_sse", f"the response's chunked framing cannot be parsed ({reason})")
    return True


def _broken(att: Attempt, kind: str, detail: str) -> None:
    """The stream broke off. After a finish_reason the answer is whole: keep it (flagged ``no_done``)."""
    if att.finish_reason is None:
        att.fail(kind, detail)


def _short(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the useful part deep inside; keep the tail, and never a URL with a key in it.
    return redact_url(text[-200:])
