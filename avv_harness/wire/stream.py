"""The wire client's entry point: one streaming chat-completions (or raw ``/v1/completions``, Messages, Responses)
attempt, measured to the millisecond (wire-client layer; the only I/O of the attempt).

:func:`stream_chat` picks the transport and runs the one attempt state machine (:mod:`avv_harness.wire.machine`)
over it. When the session's adapter for the URL is the lean client's (:class:`~avv_harness.wire.lean.LeanAdapter`,
``--avv-client lean``, the default) and no proxy applies, the bytes move over :mod:`avv_harness.wire.lean`;
otherwise through requests (:mod:`avv_harness.wire.requests_transport`: ``--avv-client requests``, proxied URLs,
tests' in-process adapters). The headers are those of :mod:`avv_harness.wire.headers`'s rule in both.

Bytes are read as they arrive (whatever has arrived, never waiting to fill a block) and split into SSE events by
:class:`~avv_harness.wire.sse.SSEParser`, so an event is timestamped when its last byte arrives;
:mod:`avv_harness.wire.attempt` reads each event into the :class:`~avv_harness.wire.attempt.Attempt`. Locust's
``iter_lines`` reads 1 KiB blocks and delays small events; see ``bench/measure.py`` for the comparison.
"""

from __future__ import annotations

import requests

from avv_harness.wire import lean
from avv_harness.wire.attempt import Attempt, EventReader
from avv_harness.wire.formats.chat import ChunkReader
from avv_harness.wire.headers import merge_headers, with_url_auth
from avv_harness.wire.machine import Limits, run_attempt
from avv_harness.wire.requests_transport import RequestsTransport, environment_settings
from avv_harness.wire.sse import DEFAULT_MAX_EVENT_BYTES
from avv_harness.wire.transport import Transport

USER_AGENT = {"User-Agent": f"avv-locust/0.1 python-requests/{requests.__version__}"}


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

    ``read_timeout`` bounds each wait for bytes (idle time); ``max_request_s`` bounds the whole attempt, response
    head and error bodies included; ``max_event_bytes`` bounds one SSE event or line. Never raises for network or
    protocol problems, nor for anything the vendor sends: they are classified into ``Attempt.error_kind``. A
    request the client cannot even send (a header value or URL it refuses) is ``client_error``, never the
    vendor's fault.

    Why so many parameters: the request (``session``, ``url``, ``body``, ``headers``), its four bounds and its event
    ``reader`` come from different owners (the vendor's config, the run's ExecContext, the wire format) and meet
    nowhere else; the bounds become a :class:`~avv_harness.wire.machine.Limits` here, once, and the last three have
    defaults, so the tests and bench scripts call it with plain numbers.
    """
    url, headers = with_url_auth(url, merge_headers(USER_AGENT, headers))
    limits = Limits(connect_timeout, read_timeout, max_request_s, max_event_bytes)
    transport = pick_transport(session, url, body, headers, limits)
    return run_attempt(transport, limits, reader if reader is not None else ChunkReader(), url)


def pick_transport(session: requests.Session, url: str, body: bytes, headers: dict[str, str],
                   limits: Limits) -> Transport:
    """The lean transport when the session's adapter for ``url`` is the lean client's and it sends to ``url``
    (:func:`~avv_harness.wire.lean.handles`), else requests."""
    try:
        adapter = session.get_adapter(url)
    except requests.exceptions.InvalidSchema:
        adapter = None  # the requests transport says so, as the client's error
    if isinstance(adapter, lean.LeanAdapter):
        settings = environment_settings(session, url)
        handled = adapter.handled.get(url)
        if handled is None:  # settings are the session's for this URL, fixed once looked up: so is the answer
            handled = adapter.handled[url] = lean.handles(adapter, url, settings)
        if handled:
            return lean.LeanTransport(adapter, url, body, headers, limits.connect_s, settings.get("verify", True))
    return RequestsTransport(session, url, body, headers, (limits.connect_s, limits.idle_s))
