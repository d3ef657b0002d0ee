"""The lean wire client (issue 28; the default, ``--avv-client lean``): one streaming attempt over its own HTTP/1.1
reader on gevent sockets (wire-client layer; the only I/O of the attempt when it is used).

Why: with requests + urllib3 + http.client most of a Locust process's CPU per SSE event went to layers that an
API stream does not need (http.client's chunked decoding, urllib3's ``read1``, a gevent ``Timeout`` per read).
Here each socket read goes through :class:`Dechunker` (chunked framing, bounded like http.client's) and
:class:`~avv_harness.wire.sse.SSEParser` in one loop, and the attempt's idle timeout is one timer per attempt
(:class:`IdleWatch`), re-armed only when it fires, not a timer per read.

The measurement properties are those of :mod:`avv_harness.wire.stream`: whatever has arrived is parsed at once
(an event is stamped when its last byte arrives, never after a fixed-size block), the loop yields every
YIELD_AFTER_S while bytes keep being ready, ``max_request_s`` is checked on every read, ``max_event_bytes``
bounds an event, and every fault is classified through :mod:`avv_harness.wire.outcome`, as there. Redirects are
not followed (a 3xx is ``http_4xx``); a pooled connection the server closed while idle is resent once on a fresh
one (``stale_conn_retries``). TLS verifies against requests' CA bundle (or ``REQUESTS_CA_BUNDLE`` /
``CURL_CA_BUNDLE``). A URL that a proxy from the environment serves, or a client certificate, goes through
requests as before (:func:`handles`).
"""

from __future__ import annotations

import _socket
import ipaddress
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import gevent
import requests
from requests.utils import requote_uri, select_proxy

from avv_harness.inputs.secrets import redact_url
from avv_harness.wire.attempt import MAX_ERROR_BODY, Attempt, EventReader, apply_events, bad_data, error_message
from avv_harness.wire.http11 import (
    READ_BLOCK,
    ClosedBeforeResponse,
    Dechunker,
    Incomplete,
    Response,
    Unparseable,
    read_head,
    read_some,
)
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

MAX_IDLE_PER_HOST = 4  # idle connections kept per (scheme, host, port), as the requests client's pool
STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class LeanAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter, mounted on the user's session, that also holds the lean client's idle connections and
    per-URL request lines. Requests the lean client does not send itself go through the adapter as before."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.idle: dict[tuple[str, str, int], list[Conn]] = {}
        self.targets: dict[str, Target] = {}
        self.tls: dict[str, ssl.SSLContext] = {}

    def close(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()
        super().close()


class Target:
    """What one URL needs on the wire, worked out once: where to connect and the request line's start."""

    __slots__ = ("scheme", "host", "port", "key", "head", "family")

    def __init__(self, url: str):
        parts = urlsplit(requote_uri(url))  # the URL as requests would send it
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        if not self.host:
            raise ValueError(f"Invalid URL {url!r}: no host supplied")
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.key = (self.scheme, self.host, self.port)
        try:  # an IP address is connected to at once: no getaddrinfo (a thread-pool round trip under gevent)
            version = ipaddress.ip_address(self.host).version
            self.family: int | None = socket.AF_INET6 if version == 6 else socket.AF_INET
        except ValueError:
            self.family = None
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        host = f"[{self.host}]" if ":" in self.host else self.host
        if parts.port is not None and parts.port != (443 if self.scheme == "https" else 80):
            host += f":{self.port}"
        self.head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"


def handles(adapter: Any, url: str, settings: dict[str, Any]) -> bool:
    """True when the lean client sends to ``url``: its adapter is a :class:`LeanAdapter`, the URL is plain ASCII
    http(s), and no proxy from the environment nor client certificate applies (those stay with requests)."""
    if not isinstance(adapter, LeanAdapter) or settings.get("cert") or not url.isascii():
        return False
    if select_proxy(url, settings.get("proxies") or {}):
        return False
    return url.startswith(("http://", "https://"))


class IdleTimeout(BaseException):
    """No byte for the idle timeout (a BaseException, like gevent's Timeout, so no handler swallows it)."""


class IdleWatch:
    """The attempt's idle timeout as ONE timer: it fires ``idle_s`` after the last progress (``last``, set by the
    reader on every read), re-arming itself for the rest when progress was made meanwhile, and otherwise throws
    :class:`IdleTimeout` into the reading greenlet (as gevent's Timeout does)."""

    __slots__ = ("idle_s", "last", "_greenlet", "_loop", "_timer")

    def __init__(self, idle_s: float):
        self.idle_s = idle_s
        self.last = time.monotonic()
        self._greenlet = gevent.getcurrent()
        self._loop = gevent.get_hub().loop
        self._timer = self._loop.timer(idle_s)
        self._timer.start(self._check)

    def _check(self) -> None:
        left = self.last + self.idle_s - time.monotonic()
        self._timer.close()
        if left > 0.001:
            self._timer = self._loop.timer(left)
            self._timer.start(self._check)
        else:
            self._greenlet.throw(IdleTimeout())

    def stop(self) -> None:
        self._timer.close()


def tls_context(adapter: LeanAdapter, verify: Any) -> ssl.SSLContext:
    """One context per CA setting: requests' bundle (certifi) when ``verify`` is True, the file or folder it
    names, or no verification when False (as requests does)."""
    key = str(verify)
    if key not in adapter.tls:
        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        else:
            path = requests.certs.where() if verify is True else str(verify)
            import os

            context = (ssl.create_default_context(capath=path) if os.path.isdir(path)
                       else ssl.create_default_context(cafile=path))
        adapter.tls[key] = context
    return adapter.tls[key]


class Conn:
    """One connection. Plain TCP is read on the raw non-blocking socket, and after a read that drained it the next
    one first waits for readability on the connection's own watcher: a recv that would only fail with EAGAIN (a
    syscall and a Python exception per event, as gevent's socket does before it waits) is not made. TLS reads go
    through gevent's SSL socket (decrypted bytes may be pending while the socket itself is not readable)."""

    __slots__ = ("sock", "raw", "drained", "_hub", "_readable", "_writable")

    def __init__(self, sock: socket.socket, tls: bool):
        self.sock: socket.socket | None = sock if tls else None
        self.raw: Any = None
        self.drained = True  # nothing is waiting to be read (a request was just sent)
        if not tls:
            self.raw = _socket.socket(fileno=sock.detach())
            self.raw.setblocking(False)
            self._hub = gevent.get_hub()
            self._readable = self._hub.loop.io(self.raw.fileno(), 1)
            self._writable = self._hub.loop.io(self.raw.fileno(), 2)

    def recv(self, size: int, /) -> bytes:
        if self.sock is not None:
            return self.sock.recv(size)
        while True:
            if self.drained:
                self._hub.wait(self._readable)
            try:
                data: bytes = self.raw.recv(size)
            except BlockingIOError:
                self.drained = True
                continue
            self.drained = len(data) < size
            return data

    def sendall(self, data: bytes) -> None:
        if self.sock is not None:
            self.sock.sendall(data)
            return
        view = memoryview(data)
        while view:
            try:
                view = view[self.raw.send(view):]
            except BlockingIOError:
                self._hub.wait(self._writable)
        self.drained = True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            return
        self._readable.close()
        self._writable.close()
        self.raw.close()


def connect(adapter: LeanAdapter, target: Target, timeout: float, verify: Any) -> Conn:
    if target.family is None:
        sock = socket.create_connection((target.host, target.port), timeout)
    else:
        sock = socket.socket(target.family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
    try:
        if target.family is not None:
            sock.connect((target.host, target.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = target.scheme == "https"
        if tls:
            sock = tls_context(adapter, verify).wrap_socket(sock, server_hostname=target.host)
        sock.settimeout(None)  # the reads' bound is the attempt's IdleWatch
        return Conn(sock, tls)
    except BaseException:
        sock.close()
        raise


#: Header (name, value) pairs already checked (requests' ``check_header_validity``): a regex match per header and
#: request otherwise. Shared by the process's users: the pairs say nothing of which vendor sent them.
VALID_HEADERS: set[tuple[str, str]] = set()


def request_bytes(target: Target, headers: dict[str, str], body: bytes) -> bytes:
    """The request head and body; a header value requests would refuse raises ``InvalidHeader`` (as requests),
    one that is not Latin-1 ``UnicodeEncodeError`` (as http.client)."""
    lines = [target.head]
    for header in headers.items():
        if header not in VALID_HEADERS:
            requests.utils.check_header_validity(header)
            if len(VALID_HEADERS) < 1024:  # the constant ones (the item tag changes with every request)
                VALID_HEADERS.add(header)
        lines.append(f"{header[0]}: {header[1]}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("iso-8859-1") + body


def send(adapter: LeanAdapter, target: Target, request: bytes, att: Attempt, connect_timeout: float,
         verify: Any, watch: IdleWatch) -> tuple[Conn, Response]:
    """Send on an idle pooled connection (else a new one) and read the response head. A reused connection that
    fails before any response byte (the server closed it while it sat idle) is the client's pool, not the vendor:
    the pool's idle connections are closed and the request is sent once more at once on a fresh one."""
    idle = adapter.idle.setdefault(target.key, [])
    for _ in range(2):
        reused = bool(idle)
        if reused:
            sock = idle.pop()
        else:
            watch.last = time.monotonic() + connect_timeout  # connecting is bounded by its own timeout
            sock = connect(adapter, target, connect_timeout, verify)
        watch.last = time.monotonic()
        try:
            sock.sendall(request)
            return sock, read_head(sock)
        except (ClosedBeforeResponse, *STALE):
            sock.close()
            if not reused:
                raise
        except BaseException:
            sock.close()
            raise
        for conn in idle:
            conn.close()
        idle.clear()
        att.stale_conn_retries, att.t0 = 1, time.monotonic()
    raise AssertionError("unreachable")


def consume_events(att: Attempt, sock: Conn, resp: Response, deadline: float, max_event_bytes: int,
                   reader: EventReader, watch: IdleWatch) -> bool:
    """Read the body as it arrives and apply its events (the loop of :func:`avv_harness.wire.stream.stream_chat`,
    with the chunked framing decoded here). True when the body ended cleanly (the connection may be reused)."""
    parser = SSEParser(max_event_bytes)
    dechunk = Dechunker() if resp.chunked else None
    left = resp.length
    recv = sock.recv
    monotonic = time.monotonic
    loop = gevent.get_hub().loop
    turn = loop.iteration
    busy_since = monotonic()
    block = resp.rest
    if left == 0:  # Content-Length: 0
        return True
    while True:
        if not block:
            block = recv(READ_BLOCK)
            now = watch.last = monotonic()
            if not block:
                if (dechunk is not None and not dechunk.ended) or (left is not None and left > 0):
                    raise Incomplete("IncompleteRead: the connection closed before the end of the body")
                apply_events(att, parser.close(), now, reader)
                return False
        else:
            now = monotonic()
        if now > deadline:
            raise TimeUp
        if att.saw_done and att.t_end is not None and now - att.t_end > DONE_GRACE_S:
            raise DoneLinger
        if dechunk is not None:
            payload = dechunk.feed(block)
            ended = dechunk.ended
        else:
            if left is not None:
                payload, left = block[:left], left - min(left, len(block))
            else:
                payload = block
            ended = left == 0
        block = b""
        if payload:
            att.bytes_read += len(payload)
            att.reads += 1
            if loop.iteration != turn:  # the read waited for bytes: the other users ran meanwhile
                turn, busy_since = loop.iteration, now
            elif now - busy_since > YIELD_AFTER_S:
                # Bytes keep being ready: let the other users in (these events keep the time `now`).
                gevent.sleep(YIELD_S)
                turn, busy_since = loop.iteration, monotonic()
            try:
                events = parser.feed(payload)
            except MalformedStream as exc:
                bad_data(att, str(exc), now)
                return False
            if not apply_events(att, events, now, reader):
                return False
        if ended:
            apply_events(att, parser.close(), now, reader)
            return not (dechunk is not None and dechunk.extra)


def stream_lean(adapter: LeanAdapter, url: str, body: bytes, headers: dict[str, str], connect_timeout: float,
                read_timeout: float, max_request_s: float, max_event_bytes: int, reader: EventReader,
                settings: dict[str, Any]) -> Attempt:
    """One streaming attempt, as :func:`avv_harness.wire.stream.stream_chat` (same arguments, same outcome and
    classification), over the adapter's own connections. Never raises for network or protocol problems."""
    att = Attempt(t0=time.monotonic())
    sock = None
    reusable = False
    watch = None
    try:
        target = adapter.targets.get(url)
        if target is None:
            target = adapter.targets[url] = Target(url)
        request = request_bytes(target, headers, body)
    except (ValueError, UnicodeEncodeError) as exc:  # InvalidHeader is a ValueError; so is a bad port
        att.fail("client_error", f"the client could not send the request ({type(exc).__name__}: {short_error(exc)})")
        return finish(att, reader)
    try:
        att.t0 = time.monotonic()
        watch = IdleWatch(min(read_timeout, max_request_s))
        sock, resp = send(adapter, target, request, att, connect_timeout, settings.get("verify", True), watch)
        deadline = att.t0 + max_request_s
        att.t_headers = time.monotonic()
        att.http_status = resp.status
        if resp.status != 200:
            att.retry_after_s = parse_retry_after(resp.headers.get("retry-after"))
            payload = read_some(sock, resp, MAX_ERROR_BODY)
            att.t_end = time.monotonic()
            return att.fail(status_kind(resp.status), f"HTTP {resp.status}: {error_message(payload)}")
        content_type = resp.headers.get("content-type", "").lower()
        if "text/event-stream" not in content_type:
            non_sse_body(att, read_some(sock, resp, body_limit(reader, max_event_bytes)), content_type, reader,
                         max_event_bytes)
            return finish(att, reader) if reader.whole_body else att
        reusable = consume_events(att, sock, resp, deadline, max_event_bytes, reader, watch) and resp.keep_alive
        att.t_end = time.monotonic()
        if att.bytes_read == 0:
            att.fail("bad_sse", "HTTP 200 with an empty body instead of an SSE stream")
    except TimeUp:
        broken(att, "timeout", f"the attempt exceeded max_request_s ({max_request_s:g}s) while still streaming")
    except DoneLinger:
        att.t_end = time.monotonic()  # the answer was whole at [DONE]; stop reading the trailing bytes
    except IdleTimeout:
        if att.t_headers is None:
            att.fail("timeout", f"no response headers within {read_timeout:g}s")
        else:
            broken(att, "timeout", f"stream stalled for more than {read_timeout:g}s")
    except TimeoutError as exc:  # the connect timeout (the socket's own, only while connecting)
        att.fail("timeout", f"connect timeout after {connect_timeout:g}s (ConnectTimeout: {short_error(exc)})")
    except Unparseable as exc:
        unparseable(att, str(exc))
    except Incomplete as exc:
        broken(att, "truncated", f"connection closed mid-stream: {exc}")
    except ClosedBeforeResponse as exc:
        att.fail("connect", f"cannot connect to {redact_url(url)}: {exc}")
    except UnicodeDecodeError as exc:
        att.fail("bad_sse", f"stream is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    except OSError as exc:  # refused, reset, TLS, DNS
        if att.t_headers is None:
            att.fail("connect", f"cannot connect to {redact_url(url)}: {type(exc).__name__}: {short_error(exc)}")
        else:
            broken(att, "truncated", f"connection closed mid-stream: {type(exc).__name__}: {short_error(exc)}")
    finally:
        if watch is not None:
            watch.stop()
        if att.t_end is None:
            att.t_end = time.monotonic()
        if sock is not None:
            idle = adapter.idle.setdefault(target.key, [])
            if reusable and att.ok and len(idle) < MAX_IDLE_PER_HOST:
                idle.append(sock)
            else:
                sock.close()
    return finish(att, reader)
