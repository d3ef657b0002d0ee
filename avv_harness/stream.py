"""The wire client: one streaming chat-completions (or raw ``/v1/completions``) attempt, measured to the
millisecond.

Bytes are read with urllib3's ``read1`` (whatever has arrived, never waiting to fill a block) and fed to
sseclient-py, so an event is timestamped when its last byte arrives. Locust's ``iter_lines`` reads
1 KiB blocks and delays small events; see ``bench/measure.py`` for the comparison.

All times are ``time.monotonic()`` seconds (the simulator's truth log uses the same clock).

Response dialects: reasoning is read from ``delta.reasoning_content``, ``delta.reasoning`` and
``delta.reasoning_details[].text`` alike (one per event, in that order, so a vendor that sends the same text
under two names is not counted twice); ``Attempt.reasoning_fields`` says which carried it. A completions
stream's ``choices[0].text`` is collected as content; raw mode reads reasoning and calls out of it at the end
(:mod:`avv_harness.completions`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
import sseclient
from urllib3.exceptions import LocationParseError, ProtocolError, ReadTimeoutError

from .config import redact_url
from .connections import send_on_fresh_if_stale
from .transforms import reasoning_text

READ_BLOCK = 65536
USER_AGENT = {"User-Agent": f"avv-locust/0.1 python-requests/{requests.__version__}"}
MAX_ERROR_BODY = 2048
REASONING_DELTA_FIELDS = ("reasoning_content", "reasoning", "reasoning_details")


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


def _read_blocks(raw: Any, att: Attempt, deadline: float) -> Iterator[bytes]:
    """Yield bytes as they arrive (urllib3 ``read1``: no waiting to fill a block). Stops a stream that
    outlives the total cap, or that lingers after ``[DONE]``: the socket's read timeout only bounds the
    gap between bytes, so a vendor trickling a token every few seconds would otherwise hold the run."""
    while True:
        block = raw.read1(READ_BLOCK)
        if not block:
            return
        now = time.monotonic()
        if now > deadline:
            raise _TimeUp
        if att.saw_done and att.t_end is not None and now - att.t_end > DONE_GRACE_S:
            raise _DoneLinger
        yield block


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
    except ValueError:
        pass
    return " ".join(text.split())[:200]


def _merge_tool_call(acc: dict[int, ToolCallAcc], delta: dict[str, Any], position: int) -> None:
    index = delta.get("index")
    if not isinstance(index, int):
        index = position
    call = acc.setdefault(index, ToolCallAcc())
    if delta.get("id") and not call.id:
        call.id = str(delta["id"])
    function = delta.get("function") or {}
    name = function.get("name")
    # Some servers (llama-cpp-python) repeat the whole name in every delta: never concatenate a repeat.
    if name and name != call.name:
        call.name = name if not call.name else call.name + name
    arguments = function.get("arguments")
    if arguments:
        call.arguments.append(arguments if isinstance(arguments, str) else json.dumps(arguments))


def _apply_chunk(att: Attempt, obj: dict[str, Any], now: float) -> None:
    usage = obj.get("usage")
    if isinstance(usage, dict) and usage:
        att.usage = usage
    token_kind = None
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or choice.get("message") or {}
        content = delta.get("content")
        if isinstance(content, str) and content:
            att.content.append(content)
            token_kind = token_kind or "content"
        text = choice.get("text")  # a /v1/completions stream
        if isinstance(text, str) and text:
            att.content.append(text)
            token_kind = token_kind or "content"
        for name in REASONING_DELTA_FIELDS:
            reasoning = reasoning_text(delta.get(name))
            if reasoning:
                att.reasoning_chars += len(reasoning)
                att.reasoning.append(reasoning)
                if name not in att.reasoning_fields:
                    att.reasoning_fields.append(name)
                token_kind = token_kind or "reasoning"
                break
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            att.saw_tool_call_delta = True
            for position, tc in enumerate(tool_calls):
                if isinstance(tc, dict):
                    _merge_tool_call(att.tool_calls, tc, position)
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


def _consume_events(att: Attempt, resp: requests.Response, deadline: float) -> None:
    raw = resp.raw
    counted = _counting(_read_blocks(raw, att, deadline), att)
    for event in sseclient.SSEClient(counted).events():
        now = time.monotonic()
        data = event.data
        if data.strip() == "[DONE]":
            # Keep reading to the end of the body, as the official SDK does: the last byte is the
            # true end, and a fully read response lets the connection be reused.
            att.saw_done = True
            att.t_end = now
            continue
        if att.saw_done:
            continue  # nothing after [DONE] is part of the answer
        try:
            obj = json.loads(data)
        except ValueError:
            att.t_end = now
            att.fail("bad_sse", f"unparseable data line: {data[:120]!r}")
            return
        if not isinstance(obj, dict):
            att.t_end = now
            att.fail("bad_sse", f"data line is not a JSON object: {data[:120]!r}")
            return
        if obj.get("error"):
            att.t_end = now
            err = obj["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            att.fail("stream_error", f"error event mid-stream: {message}")
            return
        att.chunks += 1
        _apply_chunk(att, obj, now)
        att.t_end = now


def _counting(blocks: Iterator[bytes], att: Attempt) -> Iterator[bytes]:
    for block in blocks:
        att.bytes_read += len(block)
        att.reads += 1
        yield block


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
) -> Attempt:
    """Send one streaming chat-completions request and read it to the end.

    ``read_timeout`` bounds each wait for bytes (idle time); ``max_request_s`` bounds the whole attempt
    (checked whenever bytes arrive; the socket timeout bounds the gaps). Never raises for network or
    protocol problems: they are classified into ``Attempt.error_kind``. A request the client cannot
    even send (a header value or URL requests refuses) is ``client_error``, never the vendor's fault.
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
        _consume_events(att, resp, deadline)
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
        if att.t_headers is None:
            att.fail("connect", f"cannot connect to {redact_url(url)}: {_short(exc)}")
        else:
            _broken(att, "truncated", f"connection closed mid-stream: {_short(exc)}")
    except (ProtocolError, OSError) as exc:
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


def _broken(att: Attempt, kind: str, detail: str) -> None:
    """The stream broke off. After a finish_reason the answer is whole: keep it (flagged ``no_done``)."""
    if att.finish_reason is None:
        att.fail(kind, detail)


def _short(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the useful part deep inside; keep the tail, and never a URL with a key in it.
    return redact_url(text[-200:])
