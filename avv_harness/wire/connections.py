"""Pooled connections that went stale while idle: detect them and resend once on a fresh connection.

A server (llama.cpp, many proxies) closes keep-alive connections that sit idle; the client's pool does
not know until it writes a request into the dead socket and reads "Remote end closed connection without
response" (or a reset). That failure is the client's pool, not the vendor, so it must not count against
the vendor's attempt success rate. Only urllib3-backed adapters (requests' ``HTTPAdapter``) are inspected;
any other adapter (tests' in-process one) is sent to once, as is.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from typing import Any

import requests

_STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected)


def send_on_fresh_if_stale(adapter: Any, prepared: requests.PreparedRequest, timeout: tuple[float, float],
                           settings: dict[str, Any]) -> tuple[requests.Response, float | None]:
    """Send; when it fails on a *reused* pooled connection before any response byte (the server closed it
    while it sat idle, and we wrote into a dead socket), send once more at once on a fresh connection.
    That is the client's pool, not the vendor. Returns (response, monotonic time of the resend or None).
    A fresh connection that fails the same way raises as usual (the vendor's ``connect`` failure)."""
    pool = _pool(adapter, prepared, settings)
    reused = _has_idle_connection(pool)
    try:
        return adapter.send(prepared, timeout=timeout, **settings), None
    except requests.exceptions.ConnectionError as exc:
        if not (reused and _caused_by(exc, _STALE)):
            raise
    _close_idle_connections(pool)
    resent_at = time.monotonic()
    return adapter.send(prepared, timeout=timeout, **settings), resent_at


def _pool(adapter: Any, prepared: requests.PreparedRequest, settings: dict[str, Any]) -> Any:
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


def _has_idle_connection(pool: Any) -> bool:
    queue: Any = getattr(getattr(pool, "pool", None), "queue", None)
    # urllib3 hands out the most recently returned connection first (LIFO): the last one in the queue.
    return bool(queue) and queue[-1] is not None and getattr(queue[-1], "sock", None) is not None


def _close_idle_connections(pool: Any) -> None:
    for conn in list(getattr(getattr(pool, "pool", None), "queue", None) or ()):
        if conn is not None:
            conn.close()  # stays in the pool; the next request reconnects


def _caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    return find_cause(exc, lambda item: isinstance(item, kinds)) is not None


def find_cause(exc: BaseException, match: Callable[[BaseException], bool]) -> BaseException | None:
    """The first exception in ``exc``'s chain (causes, contexts and exceptions carried in ``args``, as
    requests and urllib3 wrap them) for which ``match`` is true, or None."""
    seen: set[int] = set()
    stack: list[Any] = [exc]
    while stack:
        item = stack.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if match(item):
            return item
        stack += [item.__cause__, item.__context__, *item.args]
    return None
