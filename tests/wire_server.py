"""A tiny scripted HTTP server for wire-level tests: each path plays a list of steps byte for byte.

A step is ``bytes`` (written at once), a float (sleep seconds), ``("at", seconds)`` (sleep until that long
after the request arrived: a pace that a late step does not shift) or ``"close"`` (drop the connection).
Runs in a thread on 127.0.0.1; used where the simulator cannot produce a fault.

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


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            part = sock.recv(65536)
            if not part:
                return
            data += part
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(rest) < length:
            rest += sock.recv(65536)
        arrived = time.monotonic()
        path = head.split(b" ")[1].decode()
        server: ScriptServer = self.server.owner  # type: ignore[attr-defined]
        server.requests.append((path, head, rest))
        script = server.scripts.get(path.split("?")[0].removesuffix("/chat/completions"), [])
        try:
            for step in script:
                if isinstance(step, (int, float)):
                    time.sleep(step)
                elif isinstance(step, tuple):
                    time.sleep(max(0.0, arrived + step[1] - time.monotonic()))
                elif step == "close":
                    sock.shutdown(socket.SHUT_RDWR)
                    return
                else:
                    sock.sendall(step)
        except OSError:
            return


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
