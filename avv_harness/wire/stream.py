"""The wire client: one streaming chat-completions (or raw ``/v1/completions``) attempt, measured to the
millisecond (wire-client layer; the only I/O of the attempt).

:func:`stream_chat` is the one entry point. When the session's adapter for the URL is the lean client's
(:class:`~avv_harness.wire.lean.LeanAdapter`, ``--avv-client lean``, the default) and no proxy applies, the attempt
runs in :mod:`avv_harness.wire.lean`; otherwise here, with requests (``--avv-client requests``, proxied URLs, tests'
in-process adapters). Both classify through :mod:`avv_harness.wire.outcome`.

Here, bytes are read with urllib3's ``read1`` (whatever has arrived, never waiting to fill a block) and split
into SSE events by :class:`~avv_harness.wire.sse.SSEParser`, so an event is timestamped when its last byte
arrives; :mod:`avv_harness.wire.attempt` reads each event into the :class:`~avv_harness.wire.attempt.Attempt`.
Locust's ``iter_lines`` reads 1 KiB blocks and delays small events; see ``bench/measure.py`` for the comparison.

No vendor can stall another in the same process: the work per read and per event is bounded (an event or
line larger than ``max_event_bytes`` is ``bad_sse``; the parser is linear in the bytes), the reading loop
lets the gevent loop turn when it has run YIELD_AFTER_S without waiting for bytes, and ``max_request_s``
is checked on every read. A response head that cannot be parsed is ``bad_sse``; network faults are classified
into ``error_kind``, never raised.

All times are ``time.monotonic()`` seconds (the simulator's truth log uses the same clock).
"""

from __future__ import annotations

import http.client
import time
from typing import Any

import gevent
import requests
from urllib3.exceptions import LocationParseError, ProtocolError, ReadTimeoutError

from avv_harness.inputs.secrets import redact_url
from avv_harness.run.options import DEFAULT_MAX_EVENT_BYTES
from avv_harness.wire import lean
from avv_harness.wire.attempt import MAX_ERROR_BODY, Attempt, EventReader, apply_events, bad_data, error_message
from avv_harness.wire.connections import find_cause, send_on_fresh_if_stale
from avv_harness.wire.formats.chat import ChunkReader
from avv_harness.wire.outcome import (
    DONE_GRACE_S,
    YIELD_AFTER_S,
    YIELD_S,
    DoneLinger,
    TimeUp,
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

READ_BLOCK = 65536
USER_AGENT = {"User-Agent": f"avv-locust/0.1 python-requests/{requests.__version__}"}


def _consume_events(att: Attempt, resp: requests.Response, deadline: float, max_event_bytes: int,
                    reader: EventReader) -> None:
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
            apply_events(att, parser.close(), now, reader)
            return
        if now > deadline:
            raise TimeUp
        if att.saw_done and att.t_end is not None and now - att.t_end > DONE_GRACE_S:
            raise DoneLinger
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
        except MalformedStream as exc:
            bad_data(att, str(exc), now)
            return
        if not apply_events(att, events, now, reader):
            return


def _non_sse_body(att: Attempt, resp: requests.Response, content_type: str, reader: EventReader,
                  max_event_bytes: int) -> None:
    limit = body_limit(reader, max_event_bytes)
    non_sse_body(att, resp.raw.read(limit, decode_content=True) or b"", content_type, reader, max_event_bytes)


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
    reader: EventReader | None = None,
) -> Attempt:
    """Send one streaming request and read it to the end; ``reader`` reads the events (default: chat completions'
    chunks; the vendor's wire format gives one per attempt), and its ``end`` runs once the stream is over.

    ``read_timeout`` bounds each wait for bytes (idle time); ``max_request_s`` bounds the whole attempt
    (checked whenever bytes arrive; the socket timeout bounds the gaps); ``max_event_bytes`` bounds one SSE
    event or line. Never raises for network or protocol problems, nor for anything the vendor sends: they
    are classified into ``Attempt.error_kind``. A request the client cannot even send (a header value or
    URL requests refuses) is ``client_error``, never the vendor's fault.
    """
    att = Attempt(t0=time.monotonic())
    reader = reader if reader is not None else ChunkReader()
    resp = None
    try:
        # Everything but the transport happens before t0. The session's adapter is called directly:
        # Session.send adds cookie jars, hooks and redirect handling that an API stream does not use and
        # that cost ~0.3 ms of CPU per request on the hot path (bench/README.md).
        adapter = session.get_adapter(url)
        if isinstance(adapter, lean.LeanAdapter):  # the default client (issue 28): same outcome, less CPU
            settings = _environment_settings(session, url)
            if lean.handles(adapter, url, settings):
                return lean.stream_lean(adapter, url, body, {**USER_AGENT, **headers}, connect_timeout,
                                        read_timeout, max_request_s, max_event_bytes, reader, settings)
        prepared = requests.PreparedRequest()
        prepared.prepare(method="POST", url=url, headers={**USER_AGENT, **headers}, data=body)
        prepared_url = prepared.url or url  # prepare() always sets it
        settings = _environment_settings(session, prepared_url)
        adapter = session.get_adapter(prepared_url)
        att.t0 = time.monotonic()
        resp, resent_at = send_on_fresh_if_stale(adapter, prepared, (connect_timeout, min(read_timeout, max_request_s)),
                                                 settings)
        if resent_at is not None:  # the attempt restarted on a fresh connection (not the vendor's failure)
            att.stale_conn_retries, att.t0 = 1, resent_at
        deadline = att.t0 + max_request_s
        att.t_headers = time.monotonic()
        att.http_status = resp.status_code
        if resp.status_code != 200:
            att.retry_after_s = parse_retry_after(resp.headers.get("Retry-After"))
            payload = resp.raw.read(MAX_ERROR_BODY, decode_content=True) or b""
            att.t_end = time.monotonic()
            return att.fail(status_kind(resp.status_code), f"HTTP {resp.status_code}: {error_message(payload)}")
        content_type = resp.headers.get("Content-Type", "").lower()
        if "text/event-stream" not in content_type:
            _non_sse_body(att, resp, content_type, reader, max_event_bytes)
            return finish(att, reader) if reader.whole_body else att
        _consume_events(att, resp, deadline, max_event_bytes, reader)
        att.t_end = time.monotonic()
        if att.bytes_read == 0:
            att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    except TimeUp:
        broken(att, "timeout", f"the attempt exceeded max_request_s ({max_request_s:g}s) while still streaming")
    except DoneLinger:
        att.t_end = time.monotonic()  # the answer was whole at [DONE]; stop reading the trailing bytes
    except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema, UnicodeEncodeError, LocationParseError) as exc:
        att.fail("client_error", f"the client could not send the request ({type(exc).__name__}: {short_error(exc)})")
    except requests.exceptions.ConnectTimeout as exc:
        att.fail("timeout", f"connect timeout after {connect_timeout:g}s ({type(exc).__name__})")
    except requests.exceptions.ReadTimeout:
        att.fail("timeout", f"no response headers within {read_timeout:g}s")
    except ReadTimeoutError:
        broken(att, "timeout", f"stream stalled for more than {read_timeout:g}s")
    except requests.exceptions.ConnectionError as exc:
        if _unparseable(att, exc):
            pass
        elif att.t_headers is None:
            att.fail("connect", f"cannot connect to {redact_url(url)}: {short_error(exc)}")
        else:
            broken(att, "truncated", f"connection closed mid-stream: {short_error(exc)}")
    except (ProtocolError, OSError) as exc:
        if not _unparseable(att, exc):
            broken(att, "truncated", f"connection closed mid-stream: {short_error(exc)}")
    except UnicodeDecodeError as exc:
        att.fail("bad_sse", f"stream is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    except requests.exceptions.RequestException as exc:
        att.fail("connect", f"request failed: {short_error(exc)}")
    finally:
        if att.t_end is None:
            att.t_end = time.monotonic()
        if resp is not None:
            resp.close()
    return finish(att, reader)


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
    unparseable(att, f"{type(cause).__name__}: {str(cause)[:200]}")
    return True


