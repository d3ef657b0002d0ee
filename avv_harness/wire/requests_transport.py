"""The requests transport (``--avv-client requests``, proxied URLs, client certificates, tests' in-process adapters):
one attempt's bytes through requests + urllib3 + http.client, for :mod:`avv_harness.wire.machine` (wire-client
layer).

http.client reads the head its own way; :class:`StrictAdapter` (the adapter ``--avv-client requests`` mounts, and
the lean adapter's parent for the URLs it leaves to requests) makes it read the head as
:mod:`avv_harness.wire.http11` does: 1xx interim answers skipped, the RFC 9112 refusals, the framing decided once
(http.client then reads a canonical copy of that head). Every requests / urllib3 exception is reported as one of
:mod:`avv_harness.wire.transport`'s. urllib3 checks a pooled connection for pending bytes or EOF before it reuses
it (``wait_for_read(sock, 0)``) and drops one that has either; a connection that fails before any response byte,
or answers ``408`` when reused, went stale while idle and is resent once on a fresh one (:func:`send_fresh_if_stale`).
"""

from __future__ import annotations

import http.client
import io
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
from requests.adapters import DEFAULT_POOLBLOCK
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import LocationParseError, ProtocolError, ReadTimeoutError
from urllib3.poolmanager import PoolManager
from urllib3.response import HTTPResponse

from avv_core.json_types import JSONObject
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.headers import check_request_headers
from avv_harness.wire.http11 import READ_BLOCK, ClosedBeforeResponse, Incomplete, Unparseable, read_head_lines
from avv_harness.wire.outcome import short_error
from avv_harness.wire.transport import (
    STALE_STATUS,
    AttemptTimer,
    ClientRefused,
    ConnectFailed,
    ConnectionLost,
    ConnectTimedOut,
    IdleTimeout,
)

STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected)
# What http.client raises when it cannot parse what the vendor sent (exact types: RemoteDisconnected, a
# BadStatusLine, is a connection closed before any byte; IncompleteRead a truncation).
HTTP_CLIENT_UNPARSEABLE = (http.client.LineTooLong, http.client.HTTPException, http.client.BadStatusLine,
                           http.client.UnknownProtocol)
REFUSED = (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
           requests.exceptions.MissingSchema, UnicodeEncodeError, LocationParseError)


class StrictResponse(http.client.HTTPResponse):
    """http.client's response, its head read by :func:`~avv_harness.wire.http11.read_head_lines` (the rules both
    clients share); http.client then reads a canonical copy of that head, so it frames the body as decided there."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        try:
            head = read_head_lines(self.fp)
        except ClosedBeforeResponse as exc:  # as http.client says it: urllib3 and the stale rule know this one
            raise http.client.RemoteDisconnected(str(exc)) from None
        real, self.fp = self.fp, io.BytesIO(head.canonical())  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            self.fp = real


class StrictConnection(HTTPConnection):
    response_class = StrictResponse
    answered = 0  # responses this connection carried (a reused one has carried one before)

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]
        self.answered += 1
        return super().getresponse()


class StrictTLSConnection(HTTPSConnection):
    response_class = StrictResponse
    answered = 0

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]
        self.answered += 1
        return super().getresponse()


class StrictPool(HTTPConnectionPool):
    ConnectionCls = StrictConnection


class StrictTLSPool(HTTPSConnectionPool):
    ConnectionCls = StrictTLSConnection


STRICT_POOLS = {"http": StrictPool, "https": StrictTLSPool}


class StrictAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter with http.client's head reading replaced by the shared one (module docstring)."""

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = DEFAULT_POOLBLOCK,
                         **pool_kwargs: object) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = STRICT_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: object) -> PoolManager:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS pools bring their own connection classes
            manager.pool_classes_by_scheme = STRICT_POOLS
        return manager


class ResponseHead:
    """The machine's view of a requests response head."""

    __slots__ = ("status", "headers")

    def __init__(self, status: int, headers: Mapping[str, str]):
        self.status, self.headers = status, headers


#: Proxy / CA settings from the environment per (URL, the session's own ``verify``): see :func:`environment_settings`.
EnvSettingsCache = dict[tuple[str, object], JSONObject]
_ENV_SETTINGS = "_avv_env_settings"


def share_environment_settings(session: requests.Session, cache: EnvSettingsCache) -> None:
    """Let ``session`` use (and fill) ``cache``, which other sessions of the same run share: the environment does
    not change while a run goes on, and working the settings out costs ~0.2–0.4 ms per session."""
    session.__dict__[_ENV_SETTINGS] = cache


def environment_settings(session: requests.Session, url: str) -> JSONObject:
    """Proxy / CA settings from the environment, looked up once per session (or run: :func:`share_environment_settings`)
    and URL: requests scans the whole environment on every call, which would sit on the hot path of every request.

    ``verify``: a session's own ``verify`` other than True (a vendor's ``tls_verify``: False or a CA path,
    :func:`~avv_harness.wire.execute.vendor_session`) is kept; otherwise ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``,
    else True (certifi's bundle). Plain requests lets those variables replace a session's ``verify`` even when it is
    False; a vendor's own setting is the more specific one, so here it wins."""
    cache: EnvSettingsCache = session.__dict__.setdefault(_ENV_SETTINGS, {})
    own = session.verify if session.verify is not True else None
    key = (url, own)
    settings = cache.get(key)
    if settings is None:
        settings = cache[key] = session.merge_environment_settings(url, {}, True, own, None)
    return settings


class RequestsTransport:
    """One attempt through the session's adapter (called directly: Session.send adds cookie jars, hooks and
    redirect handling that an API stream does not use and that cost ~0.3 ms of CPU per request)."""

    idle_by_timer = False  # the socket's read timeout bounds each wait for bytes

    def __init__(self, session: requests.Session, url: str, body: bytes, headers: dict[str, str],
                 timeouts: tuple[float, float]):
        self.session, self.url, self.body, self.headers, self.timeouts = session, url, body, headers, timeouts
        self.prepared = requests.PreparedRequest()
        self.settings: JSONObject = {}
        self.adapter: Any = None  # a requests adapter, set by prepare()
        self.resp: requests.Response | None = None
        self._read: Callable[..., bytes] | None = None

    def prepare(self) -> None:
        try:
            check_request_headers(self.headers)
            self.prepared.prepare(method="POST", url=self.url, headers=self.headers, data=self.body)
            prepared_url = self.prepared.url or self.url  # prepare() always sets it
            self.settings = environment_settings(self.session, prepared_url)
            self.adapter = self.session.get_adapter(prepared_url)
        except (*REFUSED, ValueError) as exc:  # a header check_request_headers refuses is a ValueError
            raise ClientRefused(f"{type(exc).__name__}: {short_error(exc)}") from None

    def open(self, att: Attempt, timer: AttemptTimer) -> ResponseHead:
        try:
            resp = send_fresh_if_stale(self.adapter, self.prepared, self.timeouts, self.settings, att, timer)
        except REFUSED as exc:
            raise ClientRefused(f"{type(exc).__name__}: {short_error(exc)}") from None
        except requests.exceptions.ConnectTimeout as exc:
            raise ConnectTimedOut(type(exc).__name__) from None
        except requests.exceptions.ReadTimeout:
            raise IdleTimeout() from None
        except requests.exceptions.ConnectionError as exc:
            raise vendor_fault(exc) or ConnectFailed(short_error(exc)) from None
        except requests.exceptions.RequestException as exc:
            raise ConnectFailed(f"request failed: {short_error(exc)}") from None
        self.resp = resp
        self._read = resp.raw.read1
        return ResponseHead(resp.status_code, resp.headers)

    def read(self) -> bytes:
        try:
            return self._read(READ_BLOCK, decode_content=False)  # type: ignore[misc]
        except ReadTimeoutError:
            raise IdleTimeout() from None
        except (ProtocolError, OSError, requests.exceptions.RequestException) as exc:
            raise vendor_fault(exc) or ConnectionLost(short_error(exc)) from None

    def arrived(self, now: float) -> float:
        """When the last payload read arrived: the time it was read (urllib3's buffered socket keeps no stamps)."""
        return now

    def first_token_timed(self) -> None:
        """Nothing to do: urllib3 reads its socket itself."""

    def close(self, reuse: bool) -> None:
        # urllib3 gave a fully read connection back to its pool already; this closes one read partly
        if self.resp is not None:
            self.resp.close()


def vendor_fault(exc: BaseException) -> Exception | None:
    """What the vendor did, found in the chain of a requests / urllib3 exception: a head or framing that cannot be
    parsed (:class:`Unparseable`), a head or body broken off (:class:`Incomplete`); None for a network fault."""
    cause = find_cause(exc, lambda item: isinstance(item, (Unparseable, Incomplete, http.client.IncompleteRead))
                       or type(item) in HTTP_CLIENT_UNPARSEABLE)
    if cause is None or isinstance(cause, (Unparseable, Incomplete)):
        return cause  # type: ignore[return-value]
    if isinstance(cause, http.client.IncompleteRead):
        partial = cause.partial  # the bytes read (http.client) or their count (urllib3)
        return Incomplete(f"IncompleteRead({partial if isinstance(partial, int) else len(partial)} bytes read)")
    return Unparseable(type(cause).__name__, str(cause))


def send_fresh_if_stale(adapter: requests.adapters.BaseAdapter, prepared: requests.PreparedRequest,
                        timeout: tuple[float, float], settings: JSONObject, att: Attempt, timer: AttemptTimer
                        ) -> requests.Response:
    """Send; when a *reused* pooled connection fails before any response byte (the server closed it while it sat
    idle, and we wrote into a dead socket) or answers 408 (the server's idle timeout fired as the request came
    in), send once more at once on a fresh connection: the client's pool, not the vendor
    (``att.stale_conn_retries``, the attempt's clock restarted). A fresh connection failing the same way is the
    vendor's (``connect``, or its 408)."""
    pool = _pool(adapter, prepared, settings)
    reused = _has_idle_connection(pool)
    try:
        resp = adapter.send(prepared, timeout=timeout, **settings)
    except requests.exceptions.ConnectionError as exc:
        if not (reused and find_cause(exc, lambda item: isinstance(item, STALE))):
            raise
    else:
        connection = getattr(resp.raw, "connection", None)
        if resp.status_code != STALE_STATUS or getattr(connection, "answered", 0) < 2:
            return resp
        resp.close()
    _close_idle_connections(pool)
    att.stale_conn_retries, att.t0 = 1, time.monotonic()
    timer.restart(att.t0)
    return adapter.send(prepared, timeout=timeout, **settings)


def _pool(adapter: object, prepared: requests.PreparedRequest, settings: JSONObject) -> object:
    """The urllib3 pool the adapter will use for this request (the same lookup requests does), or None."""
    try:
        if hasattr(adapter, "get_connection_with_tls_context"):  # requests ≥ 2.32
            return adapter.get_connection_with_tls_context(prepared, settings.get("verify", True),
                                                           settings.get("proxies"), settings.get("cert"))
        if hasattr(adapter, "get_connection"):
            return adapter.get_connection(prepared.url, settings.get("proxies"))
    except Exception:  # an adapter we do not know: no stale-connection handling
        return None
    return None


def _has_idle_connection(pool: object) -> bool:
    queue: Any = getattr(getattr(pool, "pool", None), "queue", None)
    # urllib3 hands out the most recently returned connection first (LIFO): the last one in the queue.
    return bool(queue) and queue[-1] is not None and getattr(queue[-1], "sock", None) is not None


def _close_idle_connections(pool: object) -> None:
    for conn in list(getattr(getattr(pool, "pool", None), "queue", None) or ()):
        if conn is not None:
            conn.close()  # stays in the pool; the next request reconnects


def find_cause(exc: BaseException, match: Callable[[BaseException], bool]) -> BaseException | None:
    """The first exception in ``exc``'s chain (causes, contexts and exceptions carried in ``args``, as
    requests and urllib3 wrap them) for which ``match`` is true, or None."""
    seen: set[int] = set()
    stack: list[object] = [exc]
    while stack:
        item = stack.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if match(item):
            return item
        stack += [item.__cause__, item.__context__, *item.args]
    return None

