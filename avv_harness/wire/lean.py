"""The lean transport (issue 28; the default, ``--avv-client lean``): one attempt's bytes over its own HTTP/1.1 on
gevent sockets, for :mod:`avv_harness.wire.machine` (wire-client layer; the only I/O of the attempt when it is used).

Why: with requests + urllib3 + http.client most of a Locust process's CPU per SSE event went to layers that an
API stream does not need (http.client's chunked decoding, urllib3's ``read1``, a gevent ``Timeout`` per read).
Here each socket read is one ``recv`` on the raw non-blocking socket, decoded by
:class:`~avv_harness.wire.http11.Dechunker`, and the attempt's timeouts are one timer per attempt
(:class:`~avv_harness.wire.transport.AttemptTimer`), re-armed only when it fires, not a timer per read.

Connections are kept per (scheme, host, port). Before one is reused it is checked for pending bytes or EOF (as
urllib3's ``wait_for_read(sock, 0)``) and dropped if it has either; bytes after a complete body (past its
``Content-Length`` or the last chunk) close it, so one item's bytes never reach another item. A reused connection
that fails before any response byte, or answers ``408`` (the server's idle timeout fired as the request came in),
is resent once on a fresh one (``stale_conn_retries``). Redirects are not followed (a 3xx is ``http_4xx``). TLS
(issue 39) is read as plain TCP is, OpenSSL decrypting over memory buffers (:class:`Conn`); it verifies as the
requests transport does: against the vendor's ``tls_verify`` CA file or folder, or not at all when that is false
(the session's ``verify``), else ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` or requests' CA bundle, with one
context per CA setting in the process and TLS sessions resumed across connections. A URL that a
proxy from the environment serves, or a client certificate, goes through requests (:func:`handles`).
"""

from __future__ import annotations

import _socket
import ipaddress
import os
import socket
import ssl
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.event
import gevent.monkey
import requests
from requests.utils import requote_uri, select_proxy

from avv_harness.wire.arrival import FIRST_BYTES, STAMP_SPACE, arrival, stamp_arrivals
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.headers import FRAMING
from avv_harness.wire.http11 import READ_BLOCK, ClosedBeforeResponse, Dechunker, Head, Incomplete, read_head
from avv_harness.wire.outcome import short_error
from avv_harness.wire.requests_transport import StrictAdapter
from avv_harness.wire.transport import STALE_STATUS, AttemptTimer, ClientRefused, ConnectFailed, ConnectTimedOut

MAX_IDLE_PER_HOST = 4  # idle connections kept per (scheme, host, port), as the requests client's pool
STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class LeanAdapter(StrictAdapter):
    """requests' adapter, mounted on the user's session, that also holds the lean client's idle connections and
    per-URL request lines. Requests the lean client does not send itself go through the adapter as before."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.idle: dict[tuple[str, str, int], list[Conn]] = {}
        self.targets: dict[str, Target] = {}
        self.handled: dict[str, bool] = {}  # URL → the lean client sends to it (:func:`handles`), per session

    def close(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()
        super().close()


class Target:
    """What one URL needs on the wire, worked out once: where to connect and the request line's start."""

    __slots__ = ("scheme", "host", "port", "key", "line", "host_line", "family")

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
        self.line = f"POST {path} HTTP/1.1\r\n"
        self.host_line = f"Host: {host}\r\n"


def handles(adapter: object, url: str, settings: dict[str, Any]) -> bool:
    """True when the lean client sends to ``url``: its adapter is a :class:`LeanAdapter`, the URL is plain ASCII
    http(s), and no proxy from the environment nor client certificate applies (those stay with requests)."""
    if not isinstance(adapter, LeanAdapter) or settings.get("cert") or not url.isascii():
        return False
    if select_proxy(url, settings.get("proxies") or {}):
        return False
    return url.startswith(("http://", "https://"))


#: TLS contexts of this process, one per CA setting (``str(verify)``): loading a CA bundle costs milliseconds of CPU
#: and memory per context, so a thousand users share one, and a session saved from one connection can resume on
#: another (OpenSSL accepts a session only in the context that made it).
_CONTEXTS: dict[str, ssl.SSLContext] = {}
#: The latest resumable TLS session per (context, host, port): a new connection resumes it (no certificate chain
#: sent and verified again), as browsers and SDKs with a shared context do.
_SESSIONS: dict[tuple[int, str, int], ssl.SSLSession] = {}


def tls_context(verify: object) -> ssl.SSLContext:
    """The context for a CA setting: requests' bundle (certifi) when ``verify`` is True, the file or folder it
    names, or no verification when False (as requests does)."""
    key = str(verify)
    context = _CONTEXTS.get(key)
    if context is None:
        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        else:
            path = requests.certs.where() if verify is True else str(verify)
            context = (ssl.create_default_context(capath=path) if os.path.isdir(path)
                       else ssl.create_default_context(cafile=path))
        context.set_alpn_protocols(["http/1.1"])
        _CONTEXTS[key] = context
    return context


class Conn:
    """One connection, read on its raw non-blocking socket. After a read that drained the socket the next one first
    waits for readability on the connection's own watcher: a recv that would only fail with EAGAIN (a syscall and a
    Python exception per event, as gevent's socket does before it waits) is not made.

    TLS (:meth:`start_tls`) is OpenSSL over memory BIOs on the same socket: one ``recv`` takes whatever ciphertext
    has arrived, and every record it completes is decrypted in the same call and handed out as one block, so a
    read costs what it costs on plain TCP plus the decryption (gevent's SSL socket: a read per record, a Python
    exception when it runs dry, its own wait and timeout machinery per call).

    Arrival times: on Linux the kernel stamps each packet as it arrives and every read takes the stamp of the last
    packet it read (``stamp``, :meth:`arrived`), so an event is timed when its bytes reached this machine, not when
    this process got round to reading them: a busy event loop (hundreds of streams in one process) delays the
    reading, not the measurement. A read that takes several packets is timed by the last of them (the kernel merges
    bytes that wait in a socket into one buffer stamped with the latest arrival), so until the first token is timed
    :data:`FIRST_BYTES` reads the connection (``early``: the pieces it read, each with its own stamp)."""

    __slots__ = ("raw", "tls", "incoming", "outgoing", "drained", "saved", "stamp", "stamped", "seen", "early",
                 "early_bytes", "ready", "_hub", "_readable", "_writable")

    def __init__(self, sock: socket.socket, tls: bool = False):
        """``sock``: a connected socket (taken over: it is detached). ``tls``: TLS will be started on it
        (:meth:`start_tls`: its input and output buffers are made here); without it the bytes are plain."""
        self.raw: _socket.socket = _socket.socket(fileno=sock.detach())
        self.raw.setblocking(False)
        self.tls: ssl.SSLObject | None = None
        self.incoming: ssl.MemoryBIO | None = ssl.MemoryBIO() if tls else None
        self.outgoing: ssl.MemoryBIO | None = ssl.MemoryBIO() if tls else None
        self.drained = True  # nothing is waiting to be read (a request was just sent)
        self.saved = False  # its TLS session was kept for other connections (save_session)
        self.stamp: bytes | None = None  # the kernel's arrival stamp of the last bytes read (None: none yet)
        self.stamped = stamp_arrivals(self.raw)  # the kernel stamps what arrives (Linux)
        self.seen = 0.0  # the request's send, then the latest arrival time handed out (arrival times never go back)
        self.early: deque[tuple[bytes | OSError, bytes | None]] | None = None  # pieces FIRST_BYTES read (watched)
        self.early_bytes = 0  # bytes FIRST_BYTES read of this answer
        self.ready = gevent.event.Event()  # FIRST_BYTES read a piece (or let the connection go)
        self._hub = gevent.get_hub()
        self._readable = self._hub.loop.io(self.raw.fileno(), 1)
        self._writable = self._hub.loop.io(self.raw.fileno(), 2)

    def start_tls(self, context: ssl.SSLContext, host: str, key: tuple[int, str, int]) -> None:
        """The TLS handshake (certificate and host name verified as ``context`` says), resuming the session saved
        under ``key`` when there is one. Bounded by the caller (the connect timeout)."""
        assert self.incoming is not None and self.outgoing is not None, "Conn(sock, tls=True) starts TLS"
        session = _SESSIONS.get(key)
        try:
            tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host, session=session)
        except ValueError:  # a session OpenSSL will not resume here
            tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ConnectionResetError("the server closed the connection during the TLS handshake") from None
        self._flush()
        self.tls = tls

    def _receive(self, size: int) -> bytes:
        """One ``recv``, keeping the kernel's arrival stamp of what it read when it stamps (an EOF has none)."""
        if not self.stamped:
            return self.raw.recv(size)
        data, ancillary, _, _ = self.raw.recvmsg(size, STAMP_SPACE)
        if ancillary:
            self.stamp = ancillary[0][2]
        return data

    def arrived(self, now: float) -> float:
        """When the bytes of the last read arrived (the monotonic clock; ``now``: the time of that read), as the
        kernel stamped them; ``now`` when it keeps no stamps. Never later than ``now`` nor earlier than a time
        already handed out for this request: the wall clock is read a moment after the monotonic one, so a
        stamp converted twice may differ by a microsecond."""
        stamp = self.stamp
        if stamp is None:
            return now
        seen = min(arrival(stamp, now), now)
        if seen < self.seen:
            return self.seen
        self.seen = seen
        return seen

    def save_session(self, key: tuple[int, str, int]) -> None:
        """Keep this connection's TLS session for the next connection to the same place, once per connection and
        only when it did not resume the one kept (reading a session copies it with its certificates: ~1 ms).
        TLS 1.3 sends the resumable session after the handshake, so it is taken once a response was read."""
        tls = self.tls
        if tls is None or self.saved:
            return
        self.saved = True
        if tls.session_reused and key in _SESSIONS:
            return
        session = tls.session
        if session is not None and (session.has_ticket or tls.version() != "TLSv1.3"):
            _SESSIONS[key] = session

    def _fill(self) -> bool:
        """Wait for ciphertext and move what has arrived into the TLS input; False at the server's EOF."""
        data = self._read_raw(READ_BLOCK)
        if not data:
            return False
        assert self.incoming is not None
        self.incoming.write(data)
        return True

    def _read_raw(self, size: int) -> bytes:
        """The socket's next bytes (at most ``size``; b"" at EOF), waiting for them: the pieces :data:`FIRST_BYTES`
        read while it watches this connection, else one ``recv`` once the socket is readable."""
        while True:
            if self.early is not None:
                piece = FIRST_BYTES.take(self, size)
                if piece is not None:
                    return piece
            if self.drained:
                self._hub.wait(self._readable)
            try:
                data: bytes = self._receive(size)
            except BlockingIOError:
                self.drained = True
                continue
            self.drained = len(data) < size
            return data

    def _flush(self) -> None:
        assert self.outgoing is not None
        data = self.outgoing.read()
        if data:
            self._send(data)

    def recv(self, size: int, /) -> bytes:
        tls = self.tls
        if tls is None:
            return self._read_raw(size)
        incoming = self.incoming
        assert incoming is not None
        while True:
            if incoming.pending or tls.pending():
                try:
                    data = tls.read(size)
                except ssl.SSLWantReadError:  # part of a record: wait for the rest
                    data = b""
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # closed (cleanly or not): the framing decides
                    return b""
                if data:
                    if not incoming.pending:
                        return data
                    parts, size_left = [data], size - len(data)
                    while incoming.pending and size_left > 0:  # every record that arrived, in one block
                        try:
                            more = tls.read(size_left)
                        except ssl.SSLError:  # the next record is incomplete (or bad: the next call raises it)
                            break
                        if not more:
                            break
                        parts.append(more)
                        size_left -= len(more)
                    return b"".join(parts)
            if not self._fill():
                return b""

    def sendall(self, data: bytes) -> None:
        tls = self.tls
        if tls is not None:
            view = memoryview(data)
            while view:  # the output buffer grows as needed: a write takes it all, but the API allows less
                view = view[tls.write(view):]
            self._flush()
        else:
            self._send(data)
        self.drained = True
        # A stamp from before this request times nothing of its answer, and nothing of it arrived before it was sent.
        self.stamp, self.seen = None, time.monotonic()
        if self.stamped:
            FIRST_BYTES.watch(self)

    def first_token_timed(self) -> None:
        """The first token has its time: this connection's greenlet reads its socket itself again."""
        if self.early is not None:
            FIRST_BYTES.release(self)

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.raw.send(view):]
            except BlockingIOError:
                self._hub.wait(self._writable)

    def quiet(self) -> bool:
        """Nothing to read and not closed: the connection can carry a request (urllib3's ``wait_for_read(sock,
        0)``). A byte or an EOF waiting on an idle connection is no answer to the next request; with TLS, neither
        are decrypted bytes (:meth:`_tls_quiet`)."""
        if self.tls is not None:
            return self._tls_quiet(self.tls)
        try:
            self.raw.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False  # a byte, or b"" (the server closed it)

    def _tls_quiet(self, tls: ssl.SSLObject) -> bool:
        """TLS: what arrived while idle is taken in and OpenSSL reads it. Records that carry no data (a session
        ticket, a key update: TLS 1.3 may send them at any time) leave the connection usable; a data byte, a close
        (``close_notify`` or EOF) or a broken record do not (the connection is dropped, so reading them is safe)."""
        incoming = self.incoming
        assert incoming is not None
        while True:
            try:
                data = self.raw.recv(READ_BLOCK)
            except BlockingIOError:
                break
            except OSError:
                return False
            if not data:
                return False
            incoming.write(data)
        if not incoming.pending and not tls.pending():
            return True
        try:
            tls.read(1)
        except ssl.SSLWantReadError:  # control records only, unless part of a record is left (a byte on its way)
            return not incoming.pending
        except ssl.SSLError:
            return False
        return False  # a data byte

    def close(self) -> None:
        if self.early is not None:
            FIRST_BYTES.release(self)
        self._readable.close()
        self._writable.close()
        self.raw.close()


def connect(target: Target, timeout: float, verify: object) -> Conn:
    """A new connection to ``target`` (TLS for https, its handshake included), within ``timeout`` seconds."""
    if target.family is None:
        sock = socket.create_connection((target.host, target.port), timeout)
    else:
        sock = socket.socket(target.family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
    try:
        if target.family is not None:
            sock.connect((target.host, target.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    tls = target.scheme == "https"
    conn = Conn(sock, tls)
    if not tls:
        return conn
    try:
        context = tls_context(verify)
        with gevent.Timeout(timeout, TimeoutError(f"no TLS handshake within {timeout:g}s")):
            conn.start_tls(context, target.host, session_key(context, target))
    except BaseException:
        conn.close()
        raise
    return conn


def session_key(context: ssl.SSLContext, target: Target) -> tuple[int, str, int]:
    return id(context), target.host, target.port


#: Header (name, value) pairs already checked (requests' ``check_header_validity``): a regex match per header and
#: request otherwise. Shared by the process's users: the pairs say nothing of which vendor sent them.
VALID_HEADERS: set[tuple[str, str]] = set()


def request_bytes(target: Target, headers: dict[str, str], body: bytes) -> bytes:
    """The request head and body; a header value requests would refuse raises ``InvalidHeader`` (as requests),
    one that is not Latin-1 ``UnicodeEncodeError`` (as http.client), a framing header ``ValueError`` (the client
    writes those). A ``Host`` header replaces the URL's."""
    lines = [target.line, target.host_line]
    for header in headers.items():
        if header not in VALID_HEADERS:
            requests.utils.check_header_validity(header)
            if header[0].lower() in FRAMING:
                raise ValueError(f"header {header[0]!r} is written by the client itself")
            if len(VALID_HEADERS) < 1024:  # the constant ones (the item tag changes with every request)
                VALID_HEADERS.add(header)
        if header[0].lower() == "host":
            lines[1] = ""
        lines.append(f"{header[0]}: {header[1]}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("iso-8859-1") + body


class LeanTransport:
    """One attempt's bytes over the adapter's own connections (:class:`~avv_harness.wire.transport.Transport`)."""

    __slots__ = ("adapter", "url", "body", "headers", "connect_s", "verify", "target", "request", "conn", "head",
                 "recv", "rest", "dechunk", "left", "done", "clean")

    idle_by_timer = True  # sockets without a timeout: the attempt's timer bounds every wait

    def __init__(self, adapter: LeanAdapter, url: str, body: bytes, headers: dict[str, str], connect_s: float,
                 verify: object):
        self.adapter, self.url, self.body, self.headers = adapter, url, body, headers
        self.connect_s, self.verify = connect_s, verify
        self.conn: Conn | None = None
        self.head: Head | None = None
        self.rest = b""  # body bytes read with the head, not handed out yet
        self.dechunk: Dechunker | None = None
        self.left: int | None = None  # Content-Length bytes still to come (None: chunked or until close)
        self.done = False  # the body's end was read
        self.clean = False  # … by its framing, with nothing after it (the connection may carry another request)

    def prepare(self) -> None:
        try:
            target = self.adapter.targets.get(self.url)
            if target is None:
                target = self.adapter.targets[self.url] = Target(self.url)
            self.target = target
            self.request = request_bytes(target, self.headers, self.body)
        except (ValueError, UnicodeEncodeError) as exc:  # InvalidHeader is a ValueError; so is a bad port
            raise ClientRefused(f"{type(exc).__name__}: {short_error(exc)}") from None

    def open(self, att: Attempt, timer: AttemptTimer) -> Head:
        """Send on a quiet pooled connection (else a new one) and read the final head. A reused connection that
        fails before any response byte, or answers 408, went stale while idle (the client's pool, not the
        vendor): the host's idle connections are closed and the request is sent once more at once on a fresh one."""
        idle = self.adapter.idle.setdefault(self.target.key, [])

        def progress() -> None:
            timer.last = time.monotonic()

        for resend in (False, True):
            conn = None
            while idle and conn is None:  # the most recently used first
                conn = idle.pop()
                if not conn.quiet():
                    conn.close()
                    conn = None
            reused = conn is not None
            if conn is None:
                timer.last = time.monotonic() + self.connect_s  # connecting is bounded by its own timeout
                conn = self._connect()
            self.conn = conn
            timer.last = time.monotonic()
            try:
                conn.sendall(self.request)
                head = read_head(conn, progress)
            except (ClosedBeforeResponse, *STALE):
                self.conn = None
                conn.close()
                if not reused or resend:
                    raise
            else:
                if not reused or resend or head.status != STALE_STATUS:
                    return self._framing(conn, head)
                self.conn = None
                conn.close()
            for other in idle:
                other.close()
            idle.clear()
            att.stale_conn_retries, att.t0 = 1, time.monotonic()
            timer.restart(att.t0)
        raise AssertionError("unreachable")

    def _connect(self) -> Conn:
        try:
            return connect(self.target, self.connect_s, self.verify)
        except TimeoutError as exc:  # the connect timeout (the socket's own, only while connecting)
            raise ConnectTimedOut(f"ConnectTimeout: {short_error(exc)}") from None
        except OSError as exc:  # refused, DNS, TLS
            raise ConnectFailed(f"{type(exc).__name__}: {short_error(exc)}") from None

    def _framing(self, conn: Conn, head: Head) -> Head:
        self.head, self.recv, self.rest = head, conn.recv, head.rest
        if head.chunked:
            self.dechunk = Dechunker()
        else:
            self.left = head.length
            if head.length == 0:
                self.done = self.clean = not head.rest
        return head

    def arrived(self, now: float) -> float:
        """When the last bytes :meth:`read` handed out reached this machine (see :class:`Conn`)."""
        conn = self.conn
        return now if conn is None else conn.arrived(now)

    def first_token_timed(self) -> None:
        if self.conn is not None:
            self.conn.first_token_timed()

    def read(self) -> bytes:
        while not self.done:
            block = self.rest
            if block:
                self.rest = b""
            else:
                block = self.recv(READ_BLOCK)
                if not block:
                    return self._closed()
            dechunk = self.dechunk
            if dechunk is not None:
                payload = dechunk.feed(block)
                if dechunk.state == Dechunker.END:
                    self.done, self.clean = True, not dechunk.extra
            elif self.left is None:
                payload = block
            else:
                left, size = self.left, len(block)
                if size < left:
                    self.left = left - size
                    payload = block
                else:  # the body's last bytes; any after them are no part of it
                    payload = block[:left] if size > left else block
                    self.left, self.done, self.clean = 0, True, size == left
            if payload:
                return payload
        return b""

    def _closed(self) -> bytes:
        """The connection closed: the body's end when nothing frames it, else a body broken off."""
        self.done = True
        dechunk = self.dechunk
        if dechunk is not None:
            if dechunk.failed is not None:
                raise dechunk.failed
            raise Incomplete("IncompleteRead: the connection closed before the last chunk")
        if self.left:
            raise Incomplete(f"IncompleteRead: the connection closed {self.left} bytes before the Content-Length")
        return b""

    def close(self, reuse: bool) -> None:
        conn = self.conn
        if conn is None:
            return
        self.conn = None
        conn.first_token_timed()  # the attempt is over: no piece of it is read elsewhere
        idle = self.adapter.idle.setdefault(self.target.key, [])
        head = self.head
        if (reuse and self.clean and not self.rest and head is not None and head.keep_alive
                and len(idle) < MAX_IDLE_PER_HOST):
            if conn.tls is not None:
                conn.save_session(session_key(tls_context(self.verify), self.target))
            idle.append(conn)
        else:
            conn.close()
