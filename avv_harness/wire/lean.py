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
verifies against requests' CA bundle (or ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``). A URL that a proxy from the
environment serves, or a client certificate, goes through requests (:func:`handles`).
"""

from __future__ import annotations

import _socket
import ipaddress
import os
import select
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.monkey
import requests
from requests.utils import requote_uri, select_proxy

from avv_harness.wire.attempt import Attempt
from avv_harness.wire.headers import FRAMING
from avv_harness.wire.http11 import READ_BLOCK, ClosedBeforeResponse, Dechunker, Head, Incomplete, read_head
from avv_harness.wire.outcome import short_error
from avv_harness.wire.requests_transport import StrictAdapter
from avv_harness.wire.transport import STALE_STATUS, AttemptTimer, ClientRefused, ConnectFailed, ConnectTimedOut

MAX_IDLE_PER_HOST = 4  # idle connections kept per (scheme, host, port), as the requests client's pool
STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
#: The real poll (a zero-timeout check never blocks; select() would fail past 1,024 file descriptors).
_poll = gevent.monkey.get_original("select", "poll") if hasattr(select, "poll") else None


class LeanAdapter(StrictAdapter):
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


def handles(adapter: Any, url: str, settings: dict[str, Any]) -> bool:
    """True when the lean client sends to ``url``: its adapter is a :class:`LeanAdapter`, the URL is plain ASCII
    http(s), and no proxy from the environment nor client certificate applies (those stay with requests)."""
    if not isinstance(adapter, LeanAdapter) or settings.get("cert") or not url.isascii():
        return False
    if select_proxy(url, settings.get("proxies") or {}):
        return False
    return url.startswith(("http://", "https://"))


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

    def quiet(self) -> bool:
        """Nothing to read and not closed: the connection can carry a request (urllib3's ``wait_for_read(sock,
        0)``). A byte or an EOF waiting on an idle connection is no answer to the next request."""
        if self.sock is None:
            try:
                self.raw.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                return True
            except OSError:
                return False
            return False  # a byte, or b"" (the server closed it)
        pending = getattr(self.sock, "pending", None)  # TLS: decrypted bytes waiting in the SSL object
        if pending is not None and pending():
            return False
        if _poll is None:
            return True
        poller = _poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        return not poller.poll(0)

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
        sock.settimeout(None)  # the reads are bounded by the attempt's timer (transport.AttemptTimer)
        return Conn(sock, tls)
    except BaseException:
        sock.close()
        raise




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
                 verify: Any):
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
            return connect(self.adapter, self.target, self.connect_s, self.verify)
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
        idle = self.adapter.idle.setdefault(self.target.key, [])
        head = self.head
        if (reuse and self.clean and not self.rest and head is not None and head.keep_alive
                and len(idle) < MAX_IDLE_PER_HOST):
            idle.append(conn)
        else:
            conn.close()
