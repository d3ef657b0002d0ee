"""When a connection's bytes arrived (wire-client layer, for :mod:`avv_harness.wire.lean`; issue 39): the kernel's
arrival stamp of each packet (Linux ``SO_TIMESTAMPNS``) converted to the monotonic clock, and :class:`FirstBytes`,
the thread that reads an answer's first bytes as they arrive so its first token keeps its own stamp however busy
the event loop is. docs/explanation/timing.md "Arrival, not reading" says what the measurements gained.
"""

from __future__ import annotations

import _socket
import os
import select
import socket
import struct
import sys
import time
from collections import deque
from typing import Any, Protocol

import gevent
import gevent.event
import gevent.monkey

from avv_harness.wire.http11 import READ_BLOCK


class Watched(Protocol):
    """What :class:`FirstBytes` reads and fills of a connection (:class:`avv_harness.wire.lean.Conn`)."""

    raw: _socket.socket
    stamp: bytes | None
    early: deque[tuple[bytes | OSError, bytes | None]] | None
    early_bytes: int
    ready: gevent.event.Event


#: Linux's SO_TIMESTAMPNS (the constant Python does not export): the kernel stamps every packet it receives with
#: the wall clock, and a ``recvmsg`` hands out the stamp of the last packet it read. ``None`` elsewhere.
SO_TIMESTAMPNS: int | None = 35 if sys.platform.startswith("linux") else None
STAMP_SPACE = socket.CMSG_SPACE(16) if SO_TIMESTAMPNS is not None else 0
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: seconds, nanoseconds


def arrival(stamp: bytes, now: float) -> float:
    """The ``time.monotonic()`` time at which the kernel received the packet stamped ``stamp`` (a timespec of the
    wall clock), given the monotonic time ``now`` of the read that returned it: ``now`` minus the packet's age.
    The age is read on the wall clock at once, so only a clock step between packet and read could skew it; a
    negative age (a step backwards) is taken as zero."""
    seconds, nanoseconds = _TIMESPEC.unpack_from(stamp)
    age = time.time() - seconds - nanoseconds * 1e-9
    return now - age if age > 0.0 else now


def stamp_arrivals(sock: _socket.socket) -> bool:
    """Ask the kernel to stamp the socket's received packets (see :data:`SO_TIMESTAMPNS`); False where it cannot."""
    if SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


#: The most :class:`FirstBytes` reads of one answer before its first token (an answer's head and first events are
#: a few KiB): past it the thread lets the connection go, so a vendor flooding bytes cannot fill memory or the thread.
FIRST_BYTES_LIMIT = 4 * READ_BLOCK


class FirstBytes:
    """Reads the connections that wait for their first token from an OS thread of its own, so the first token keeps
    its own arrival stamp however busy the event loop is (issue 39).

    The kernel merges bytes that wait unread in a socket into one buffer stamped with the newest arrival, so when
    the event loop reads a first token later than the gap to the next event (hundreds of streams in one process
    keep it that busy), both are timed by the later one. This thread waits on those sockets alone (``epoll``, no
    GIL held) and takes each packet as it arrives, with its stamp, within the interpreter's switch interval (5 ms)
    however busy the loop: the reading greenlet then takes the pieces in order (:meth:`take`). A connection is
    watched from its request's send until its first token is timed or the attempt ends (:meth:`release`); then the
    greenlet reads the socket itself again. One per process (a forked worker starts its own)."""

    def __init__(self) -> None:
        self.lock = gevent.monkey.get_original("_thread", "allocate_lock")()
        self._conns: dict[int, Watched] = {}
        self._epoll: Any = None
        self._pid = 0
        self._loop: Any = None

    def watch(self, conn: Watched) -> None:
        if self._pid != os.getpid():
            self._start()
        fd = conn.raw.fileno()
        with self.lock:
            conn.early, conn.early_bytes = deque(), 0
            self._conns[fd] = conn
            try:
                self._epoll.register(fd, select.EPOLLIN)
            except FileExistsError:  # still registered from its last request
                pass

    def release(self, conn: Watched) -> None:
        """Stop reading ``conn`` here; pieces already taken stay for its greenlet, which reads the socket after them."""
        with self.lock:
            self._forget(conn)

    def _forget(self, conn: Watched) -> None:
        fd = conn.raw.fileno()
        if self._conns.get(fd) is conn:
            del self._conns[fd]
            try:
                self._epoll.unregister(fd)
            except OSError:
                pass
        if conn.early is not None and not conn.early:
            conn.early = None
        conn.ready.set()  # a greenlet waiting for a piece reads the socket now

    def take(self, conn: Watched, size: int) -> bytes | None:
        """The next piece the thread read for ``conn`` (at most ``size`` bytes; its stamp becomes the connection's),
        waiting for one while the thread reads it; None once it is released and every piece was taken."""
        while True:
            with self.lock:
                early = conn.early
                if early:
                    data, stamp = early.popleft()
                    if isinstance(data, bytes) and len(data) > size:
                        early.appendleft((data[size:], stamp))
                        data = data[:size]
                    if not early and self._conns.get(conn.raw.fileno()) is not conn:
                        conn.early = None
                elif early is None or self._conns.get(conn.raw.fileno()) is not conn:
                    conn.early = None
                    return None
                else:
                    conn.ready.clear()
                    data = None
            if data is None:
                # With a timeout: its timer keeps the loop alive while only the thread can wake this greenlet.
                conn.ready.wait(1.0)
                continue
            if isinstance(data, BaseException):
                raise data
            if stamp is not None:
                conn.stamp = stamp
            return data

    def _start(self) -> None:
        self._epoll = gevent.monkey.get_original("select", "epoll")()
        self._conns = {}
        self._loop = gevent.get_hub().loop
        self._pid = os.getpid()
        gevent.monkey.get_original("_thread", "start_new_thread")(self._run, (self._epoll, self._pid))

    def _run(self, epoll: Any, pid: int) -> None:
        while self._pid == pid:
            try:
                ready = epoll.poll(1.0)
            except InterruptedError:
                continue
            woken = []
            with self.lock:
                for fd, _ in ready:
                    conn = self._conns.get(fd)
                    if conn is None or conn.early is None:
                        continue
                    data: bytes | OSError
                    try:
                        data, ancillary, _, _ = conn.raw.recvmsg(READ_BLOCK, STAMP_SPACE)
                    except BlockingIOError:
                        continue
                    except OSError as exc:  # reset, …: the greenlet raises it where it reads
                        data, ancillary = exc, []
                    conn.early.append((data, ancillary[0][2] if ancillary else None))
                    conn.early_bytes += len(data) if isinstance(data, bytes) else 0
                    # An error or the server's EOF: nothing more comes. Past FIRST_BYTES_LIMIT without a first token
                    # (a hostile or unusual answer): its greenlet reads the rest itself, at its own pace.
                    if not isinstance(data, bytes) or not data or conn.early_bytes >= FIRST_BYTES_LIMIT:
                        del self._conns[fd]
                        try:
                            epoll.unregister(fd)
                        except OSError:
                            pass
                    woken.append(conn.ready)
            for event in woken:
                self._loop.run_callback_threadsafe(event.set)


FIRST_BYTES = FirstBytes()
