"""The interface between the attempt's state machine (:mod:`avv_harness.wire.machine`) and a transport that moves
its bytes (wire-client layer), as httpx's transport interface: the lean transport (:mod:`avv_harness.wire.lean`,
its own HTTP/1.1 on gevent sockets) and the requests one (:mod:`avv_harness.wire.requests_transport`) implement
:class:`Transport` and report every fault as one of the exceptions here, whatever raised it underneath; the
machine alone turns those into error kinds. :class:`AttemptTimer` is the attempt's one timer (idle timeout and
``max_request_s``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

import gevent

from avv_harness.wire.attempt import Attempt
from avv_harness.wire.http11 import ClosedBeforeResponse, Incomplete, Unparseable

#: A server's "idle too long" answer, sent as it closes a kept-alive connection: on a reused connection the answer
#: of the pool's staleness, not of the request (resent once on a fresh connection, as a connection closed unanswered).
STALE_STATUS = 408

__all__ = ["STALE_STATUS", "AttemptTimer", "ClientRefused", "ClosedBeforeResponse", "ConnectFailed", "ConnectTimedOut",
           "ConnectionLost", "HeadLike", "IdleTimeout", "Incomplete", "TimeUp", "Transport", "Unparseable"]


class ClientRefused(Exception):
    """The client cannot build or send this request (a header or URL it refuses): ``client_error``."""


class ConnectTimedOut(Exception):
    """No connection within the connect timeout."""


class ConnectFailed(Exception):
    """No connection (refused, reset before the response, DNS, TLS); the message says why, never a secret."""


class ConnectionLost(Exception):
    """The connection failed after the response head (reset, broken pipe …)."""


class IdleTimeout(BaseException):
    """No byte for the idle timeout (a BaseException, like gevent's Timeout, so no handler swallows it)."""


class TimeUp(BaseException):
    """The attempt's total time cap (``max_request_s``) passed."""


class HeadLike(Protocol):
    """What the machine reads of a response head: the status and the headers (``get`` by lower-case name)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class Transport(Protocol):
    """One attempt's bytes. :meth:`prepare` builds the request (before the clock starts); :meth:`open` sends it
    and returns the final head (interim 1xx skipped; a pooled connection that went stale resent once, which
    sets ``att.stale_conn_retries`` and restarts ``att.t0``); :meth:`read` returns the body's next payload
    (de-chunked, still content-coded), b"" at its end; :meth:`arrived` is when the last payload read reached the
    machine, given the time ``now`` it was read (the kernel's arrival stamp where the transport has one, else
    ``now``); :meth:`first_token_timed` says the attempt's first token has its time (a transport may watch the first
    bytes more closely until then); :meth:`close` gives the connection back to the pool when ``reuse``
    and the body ended cleanly, else closes it. ``idle_by_timer``: the transport's sockets do not bound idleness
    themselves (the timer does)."""

    idle_by_timer: bool

    def prepare(self) -> None: ...

    def open(self, att: Attempt, timer: AttemptTimer) -> HeadLike: ...

    def read(self) -> bytes: ...

    def arrived(self, now: float) -> float: ...

    def first_token_timed(self) -> None: ...

    def close(self, reuse: bool) -> None: ...


class AttemptTimer:
    """The attempt's timeouts as ONE gevent timer: it fires at the earlier of ``last + idle_s`` (``last``: the
    latest progress, set by whoever reads) and ``deadline`` (``t0 + max_request_s``), re-arming itself when
    progress was made meanwhile, and otherwise throws :class:`IdleTimeout` or :class:`TimeUp` into the reading
    greenlet (as gevent's Timeout does). ``idle_s`` None: only the deadline (the transport's sockets bound idle
    reads). One timer per attempt, not one per read."""

    __slots__ = ("idle_s", "span_s", "last", "deadline", "_greenlet", "_loop", "_timer")

    def __init__(self, idle_s: float | None, t0: float, span_s: float):
        self.idle_s, self.span_s = idle_s, span_s
        self.deadline = t0 + span_s
        self.last = time.monotonic()
        self._greenlet = gevent.getcurrent()
        self._loop = gevent.get_hub().loop
        self._timer = self._loop.timer(max(0.0, self._due() - self.last))
        self._timer.start(self._check)

    def _due(self) -> float:
        return self.deadline if self.idle_s is None else min(self.last + self.idle_s, self.deadline)

    def _check(self) -> None:
        now = time.monotonic()
        self._timer.close()
        left = self._due() - now
        if left > 0.001:
            self._timer = self._loop.timer(left)
            self._timer.start(self._check)
        elif now >= self.deadline - 0.001:
            self._greenlet.throw(TimeUp())
        else:
            self._greenlet.throw(IdleTimeout())

    def restart(self, t0: float) -> None:
        """The attempt starts over at ``t0`` (a stale pooled connection's resend): a new deadline and idle clock."""
        self.deadline, self.last = t0 + self.span_s, t0

    def stop(self) -> None:
        self._timer.close()
