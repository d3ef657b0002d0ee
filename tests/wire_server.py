"""A tiny scripted HTTP server for wire-level tests: each path plays a list of steps byte for byte.

A step is ``bytes`` (written at once), a float (sleep seconds), ``("at", seconds)`` (sleep until that long
after the request arrived: a pace that a late step does not shift) or ``"close"`` (drop the connection).
Runs in a thread on 127.0.0.1; used where the simulator cannot produce a fault. :class:`KeepAliveServer` keeps
its connections: each request on them is answered by a function of the request, and bytes can be written to
the connections while they sit idle between requests (the faults of connection reuse).

The test process is monkey-patched, so that thread is a greenlet of the process's own gevent loop: its
pace depends on that loop. :class:`ScriptProcess` plays the same scripts from a process of its own (plain
threads, blocking sockets), like a vendor on another machine: its pace and its bytes' readiness do not
depend on the client's loop, nor on the client's GIL.
"""

from __future__ import annotations

import json
import pickle
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from typing import Any

Step = bytes | float | str | tuple[str, float]


def sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict | None = None,
          choices: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return obj


def headers(
    status: int = 200, content_type: str = "text/event-stream", extra: str = "", chunked: bool = False
) -> bytes:
    reason = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
              503: "Service Unavailable", 401: "Unauthorized"}.get(status, "X")
    te = "Transfer-Encoding: chunked\r\n" if chunked else ""
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n{te}{extra}"
            "Connection: close\r\n\r\n").encode()


def read_request(sock: socket.socket, data: bytes = b"") -> tuple[bytes, bytes, bytes] | None:
    """(head, body, bytes after them) of the next request on ``sock`` (``data``: bytes already read), or None when
    the connection closes first."""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            return None
        data += part
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(rest) < length:
        part = sock.recv(65536)
        if not part:
            return None
        rest += part
    return head, rest[:length], rest[length:]


def play(sock: socket.socket, script: list[Step], arrived: float) -> bool:
    """Play ``script`` on ``sock``; False when it closed the connection (or the client did)."""
    try:
        for step in script:
            if isinstance(step, (int, float)):
                time.sleep(step)
            elif isinstance(step, tuple):
                time.sleep(max(0.0, arrived + step[1] - time.monotonic()))
            elif step == "close":
                sock.shutdown(socket.SHUT_RDWR)
                return False
            else:
                sock.sendall(step)
    except OSError:
        return False
    return True


def header_value(head: bytes, name: str) -> str | None:
    """A request header's value (the first of that name), or None."""
    prefix = name.lower().encode() + b":"
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(prefix):
            return line[len(prefix):].strip().decode("latin-1")
    return None


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        request = read_request(sock)
        if request is None:
            return
        head, body, _ = request
        arrived = time.monotonic()
        path = head.split(b" ")[1].decode()
        server: ScriptServer = self.server.owner  # type: ignore[attr-defined]
        server.requests.append((path, head, body))
        play(sock, server.scripts.get(path.split("?")[0].removesuffix("/chat/completions"), []), arrived)


class ScriptServer:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Step]] = {}
        self.requests: list[tuple[str, bytes, bytes]] = []
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        # a short poll: stop() waits for the next one (the default 0.5 s was half a second per test)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class KeepAliveServer:
    """A server that keeps its connections: every request on them is answered by ``answer(head, connection
    number, request number on it)`` (a script, as :class:`ScriptServer`'s; the connection closes when the script
    says ``"close"``). :meth:`while_idle` writes to every connection waiting for its next request, at once: the
    bytes are in the client's socket before the caller goes on (the test process's threads are greenlets)."""

    def __init__(self, answer: Any, tls: ssl.SSLContext | None = None) -> None:
        """``tls``: serve HTTPS with this server context (the handshake in each connection's thread)."""
        self.answer, self.tls = answer, tls
        self.connections = 0  # accepted so far
        self.heads: list[bytes] = []  # every request head, in order
        self._idle: dict[int, socket.socket] = {}
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, name: str = "v1") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/{name}"

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(sock, self.connections), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        data, served = b"", 0
        if self.tls is not None:
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except OSError:  # the client refused the certificate, or went away
                sock.close()
                return
        with sock:
            while True:
                self._idle[number] = sock
                try:
                    request = read_request(sock, data)
                except OSError:  # the client reset it
                    request = None
                self._idle.pop(number, None)
                if request is None:
                    return
                head, _, data = request
                self.heads.append(head)
                served += 1
                if not play(sock, self.answer(head, number, served), time.monotonic()):
                    return

    def while_idle(self, script: list[Step]) -> int:
        """Play ``script`` on every connection waiting for its next request; how many there were. The connections
        send without delay (``TCP_NODELAY``, as HTTP servers set it): the bytes are in the client's socket when this
        returns, not held back by Nagle's algorithm until the client acknowledges the previous answer."""
        idle = list(self._idle.items())
        for number, sock in idle:
            if not play(sock, script, time.monotonic()):
                self._idle.pop(number, None)
        return len(idle)

    def stop(self) -> None:
        self._listener.close()
        for sock in list(self._idle.values()):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ScriptProcess:
    """A :class:`ScriptServer` in a subprocess (``python tests/wire_server.py``): the scripts are fixed when
    it starts. Tests using it are ``integration`` tests."""

    def __init__(self, scripts: dict[str, list[Step]]) -> None:
        self._proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(pickle.dumps(scripts))
        self._proc.stdin.close()
        self.port = int(self._proc.stdout.readline())

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait(timeout=10)


if __name__ == "__main__":  # ScriptProcess's child: scripts on stdin (pickled), the port on stdout
    child = ScriptServer()
    child.scripts = pickle.load(sys.stdin.buffer)
    print(child.port, flush=True)
    threading.Event().wait()
