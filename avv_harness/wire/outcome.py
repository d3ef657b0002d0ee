"""How an attempt's outcome is classified (wire-client layer, pure: no I/O): an HTTP status, a response that is not
an SSE stream, a broken-off stream and the end of an attempt, and the bounds of the reading loop. The one attempt
state machine (:mod:`avv_harness.wire.machine`) classifies through these functions for both transports.
"""

from __future__ import annotations

import time

from avv_harness.inputs.secrets import redact_url
from avv_harness.wire.attempt import MAX_ERROR_BODY, Attempt, EventReader, WholeBody, read_whole_body

YIELD_AFTER_S = 0.0005  # the longest the reading loop runs without letting the process's other users in
YIELD_S = 1e-6  # how it lets them in: a sleep that ends in the gevent loop's next turn
DONE_GRACE_S = 2.0  # how long bytes may keep coming after [DONE] before the client stops reading
OVERLOADED_STATUS = 529  # Anthropic's "overloaded" status (also Cloudflare's): error kind ``overloaded``


class DoneLinger(Exception):
    """Bytes (``: ping`` comments, junk) kept arriving well after ``[DONE]``."""


def parse_retry_after(value: str | None) -> float | None:
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


def status_kind(status: int) -> str:
    """429 → http_429, 529 → overloaded, other 5xx → http_5xx, anything else that is not 200 (4xx, an unfollowed
    3xx) → http_4xx."""
    if status == 429:
        return "http_429"
    if status == OVERLOADED_STATUS:
        return "overloaded"
    if 500 <= status < 600:
        return "http_5xx"
    return "http_4xx"


def body_limit(reader: EventReader, max_event_bytes: int) -> int:
    """How much of an HTTP 200 body that is not an SSE stream is read: a non-streamed answer whole (up to the event
    limit, and one byte more to tell a larger one), else the first bytes, to say what it is."""
    return max_event_bytes + 1 if reader.whole_body else MAX_ERROR_BODY + 1


def non_sse_body(att: Attempt, body: bytes, content_type: str, reader: EventReader | None = None,
                 max_event_bytes: int = 0) -> None:
    """HTTP 200 whose body (its first :func:`body_limit` bytes: ``body``) is not an SSE stream: a non-streamed
    request's answer (``reader`` a :class:`~avv_harness.wire.attempt.WholeBody`) read whole, else ``bad_sse`` saying
    what it is."""
    if isinstance(reader, WholeBody):
        read_whole_body(att, body, reader, time.monotonic(), max_event_bytes)
        return
    att.t_end = time.monotonic()
    att.bytes_read += len(body)
    if not body:
        att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    elif "json" in content_type or body.lstrip()[:1] in (b"{", b"["):
        att.fail("bad_sse", f"HTTP 200 with a JSON body instead of an SSE stream ({content_type or 'no content-type'})")
    else:
        att.fail("bad_sse", f"HTTP 200 with a non-SSE body ({content_type or 'no content-type'})")


def broken(att: Attempt, kind: str, detail: str) -> None:
    """The stream broke off. After a finish_reason the answer is whole: keep it (flagged ``no_done``)."""
    if att.finish_reason is None:
        att.fail(kind, detail)


def unparseable(att: Attempt, reason: str) -> None:
    """The vendor's status line, headers or chunk framing cannot be parsed (``reason``: the parser's exception as
    ``Type: message``): ``bad_sse`` (not a network failure: retrying would not help, and it is not the client's)."""
    if att.t_headers is None:
        att.fail("bad_sse", f"the response's status line or headers cannot be parsed ({reason})")
    else:
        broken(att, "bad_sse", f"the response's chunked framing cannot be parsed ({reason})")


def short_error(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the useful part deep inside; keep the tail, and never a URL with a key in it.
    return redact_url(text[-200:])


def finish(att: Attempt, reader: EventReader) -> Attempt:
    """After the stream: the reader's end, and an answer without a finish reason is ``truncated``."""
    reader.end(att)
    if att.ok and att.finish_reason is None:
        where = "[DONE] without any finish_reason" if att.saw_done else "stream ended without finish_reason"
        att.fail("truncated", where)
    return att
