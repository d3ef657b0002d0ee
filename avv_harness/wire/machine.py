"""One streaming attempt's state machine, written once for both transports (wire-client layer): send, read the head,
read the body as it arrives, apply its events, and classify every fault (issue 36: "two transports, one machine").
A :class:`~avv_harness.wire.transport.Transport` supplies the bytes (:mod:`avv_harness.wire.lean`, the default, or
:mod:`avv_harness.wire.requests_transport`) and reports its faults as the transport module's exceptions; what
each becomes (error kind, retried or not) is docs/reference/wire-faults.md (:mod:`avv_harness.wire.faults`).

The measurement properties: whatever has arrived is parsed at once (an event is stamped when its last byte
arrives, never after a fixed-size block; by the kernel's arrival stamp where the transport has one, so a busy event
loop delays the reading, not the time), the loop yields every YIELD_AFTER_S while bytes keep being ready (one
vendor's stream cannot hold the process's other users), ``max_request_s`` bounds the whole attempt (head, error
body and stream; checked on every read and by the attempt's one timer), ``max_event_bytes`` bounds an event, and
the work per read is bounded. All times are ``time.monotonic()`` seconds (the simulator's truth log uses the same
clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent

from avv_harness.inputs.secrets import redact_url
from avv_harness.wire.attempt import MAX_ERROR_BODY, Attempt, EventReader, apply_events, bad_data, error_message
from avv_harness.wire.http11 import READ_BLOCK, UnsupportedEncoding, coding_of, content_decoder, decode_some
from avv_harness.wire.outcome import (
    DONE_GRACE_S,
    YIELD_AFTER_S,
    YIELD_S,
    DoneLinger,
    body_limit,
    broken,
    finish,
    non_sse_body,
    parse_retry_after,
    short_error,
    status_kind,
    unparseable,
)
from avv_harness.wire.sse import MalformedStream, SSEParser
from avv_harness.wire.transport import (
    AttemptTimer,
    ClientRefused,
    ClosedBeforeResponse,
    ConnectFailed,
    ConnectionLost,
    ConnectTimedOut,
    HeadLike,
    IdleTimeout,
    Incomplete,
    TimeUp,
    Transport,
    Unparseable,
)

#: The most one read of a content-coded (gzip) body may expand to, unless the event limit is larger.
MAX_DECODED_READ = 64 * READ_BLOCK


@dataclass(frozen=True)
class Limits:
    """An attempt's bounds: ``connect_s`` the connect timeout, ``idle_s`` each wait for bytes (``timeout_s``),
    ``max_request_s`` the whole attempt, ``max_event_bytes`` one SSE event or line."""

    connect_s: float
    idle_s: float
    max_request_s: float
    max_event_bytes: int


def run_attempt(transport: Transport, limits: Limits, reader: EventReader, url: str) -> Attempt:
    """One attempt over ``transport``, read by ``reader`` (its ``end`` runs once the stream is over). Never raises
    for network or protocol problems, nor for anything the vendor sends: they are classified into
    ``Attempt.error_kind``. A request the client cannot even send is ``client_error``, never the vendor's."""
    att = Attempt(t0=time.monotonic())
    try:
        transport.prepare()  # everything but the transport happens before t0
    except ClientRefused as exc:
        att.fail("client_error", f"the client could not send the request ({exc})")
        return finish(att, reader)
    timer: AttemptTimer | None = None
    clean_end = False
    try:
        att.t0 = time.monotonic()
        timer = AttemptTimer(limits.idle_s if transport.idle_by_timer else None, att.t0, limits.max_request_s)
        head = transport.open(att, timer)
        timer.last = time.monotonic()
        att.t_headers = transport.arrived(timer.last)
        att.http_status = head.status
        if head.status != 200:
            att.retry_after_s = parse_retry_after(head.headers.get("retry-after"))
            payload = read_short_body(transport, head, MAX_ERROR_BODY)
            att.t_end = time.monotonic()
            return att.fail(status_kind(head.status), f"HTTP {head.status}: {error_message(payload)}")
        content_type = (head.headers.get("content-type") or "").lower()
        if "text/event-stream" not in content_type:
            limit = body_limit(reader, limits.max_event_bytes)
            non_sse_body(att, read_short_body(transport, head, limit), content_type, reader, limits.max_event_bytes)
            return finish(att, reader) if reader.whole_body else att
        decode = content_decoder(coding_of(head.headers), max(MAX_DECODED_READ, limits.max_event_bytes))
        clean_end = consume_events(att, transport, timer, limits.max_event_bytes, reader, decode)
        att.t_end = transport.arrived(time.monotonic())
        if att.bytes_read == 0:
            att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    except TimeUp:
        if att.t_headers is None:
            att.fail("timeout", f"no complete response head within max_request_s ({limits.max_request_s:g}s)")
        else:
            broken(att, "timeout", f"the attempt exceeded max_request_s ({limits.max_request_s:g}s) while still "
                                   "streaming")
    except DoneLinger:
        att.t_end = transport.arrived(time.monotonic())  # the answer was whole at [DONE]; stop reading the rest
    except IdleTimeout:
        if att.t_headers is None:
            att.fail("timeout", f"no response headers within {limits.idle_s:g}s")
        else:
            broken(att, "timeout", f"stream stalled for more than {limits.idle_s:g}s")
    except ConnectTimedOut as exc:
        att.fail("timeout", f"connect timeout after {limits.connect_s:g}s ({exc})")
    except Unparseable as exc:
        unparseable(att, str(exc))
    except Incomplete as exc:
        broken(att, "truncated", f"connection closed mid-stream: {exc}")
    except (ClosedBeforeResponse, ConnectFailed) as exc:
        att.fail("connect", f"cannot connect to {redact_url(url)}: {exc}")
    except ConnectionLost as exc:
        broken(att, "truncated", f"connection closed mid-stream: {exc}")
    except UnsupportedEncoding as exc:
        broken(att, "bad_sse", f"HTTP 200 with a body the client cannot read: {exc}")
    except ClientRefused as exc:
        att.fail("client_error", f"the client could not send the request ({exc})")
    except UnicodeDecodeError as exc:
        att.fail("bad_sse", f"stream is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    except OSError as exc:  # refused, reset, TLS, DNS: what a transport's socket raised as it is
        if att.t_headers is None:
            att.fail("connect", f"cannot connect to {redact_url(url)}: {type(exc).__name__}: {short_error(exc)}")
        else:
            broken(att, "truncated", f"connection closed mid-stream: {type(exc).__name__}: {short_error(exc)}")
    finally:
        if timer is not None:
            timer.stop()
        if att.t_end is None:
            att.t_end = time.monotonic()
        transport.close(clean_end and att.ok)
    return finish(att, reader)


def read_short_body(transport: Transport, head: HeadLike, limit: int) -> bytes:
    """Up to ``limit`` bytes of an error or non-SSE body, decoded, for its message. What has arrived when the body
    breaks off or stalls is enough: the status (or the body's kind) is the outcome, not the body."""
    got: list[bytes] = []
    size = 0
    try:
        while size < limit:
            part = transport.read()
            if not part:
                break
            got.append(part)
            size += len(part)
    except (Incomplete, Unparseable, ConnectionLost, OSError, IdleTimeout, TimeUp):
        pass
    return decode_some(b"".join(got), head.headers, limit)


def consume_events(att: Attempt, transport: Transport, timer: AttemptTimer, max_event_bytes: int,
                   reader: EventReader, decode: Callable[[bytes], bytes] | None) -> bool:
    """Read the body as it arrives and apply its events. True when it was read to its end (the transport may then
    keep the connection); False when the attempt stopped it (a bad event, an error event).

    The socket's timeout or the timer bounds the gaps between bytes; ``max_request_s`` is checked on every read
    too, and a stream that lingers DONE_GRACE_S after ``[DONE]`` is stopped. When bytes are always ready (no read
    waits) the loop yields to gevent every YIELD_AFTER_S, so one vendor's stream cannot delay the other users of
    this process."""
    read, arrived = transport.read, transport.arrived
    parser = SSEParser(max_event_bytes)
    monotonic = time.monotonic
    deadline = timer.deadline
    # The gevent loop's turn counter (libev's, gevent's default loop): it moves only when this greenlet
    # waited and the other users ran.
    loop = gevent.get_hub().loop
    turn = loop.iteration
    busy_since = monotonic()
    untimed = att.t_first_token is None
    while True:
        payload = read()
        now = timer.last = monotonic()
        if not payload:
            apply_events(att, parser.close(), arrived(now), reader)
            return True
        if now > deadline:
            raise TimeUp
        seen = arrived(now)  # the events are timed by when their bytes arrived, not when this loop read them
        if att.saw_done and att.t_end is not None and seen - att.t_end > DONE_GRACE_S:
            raise DoneLinger
        att.bytes_read += len(payload)
        att.reads += 1
        if loop.iteration != turn:  # the read waited for bytes: the other users ran meanwhile
            turn, busy_since = loop.iteration, now
        elif now - busy_since > YIELD_AFTER_S:
            # Bytes keep being ready: let the other users in (these events keep their time `seen`). A sleep > 0,
            # not sleep(0): gevent may run sleep(0)'s callback again before the loop polls the other sockets.
            gevent.sleep(YIELD_S)
            turn, busy_since = loop.iteration, monotonic()
        if decode is not None:
            payload = decode(payload)
        try:
            events = parser.feed(payload)
        except MalformedStream as exc:
            bad_data(att, str(exc), seen)
            return False
        if not apply_events(att, events, seen, reader):
            return False
        if untimed and att.t_first_token is not None:
            untimed = False
            transport.first_token_timed()
