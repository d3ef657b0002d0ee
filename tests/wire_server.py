"""A tiny scripted HTTP server for wire-level tests: each path plays a list of steps byte for byte.

A step is ``bytes`` (written at once), a float (sleep seconds) or ``"close"`` (drop the connection).
Runs in a thread on 127.0.0.1; used where the simulator cannot produce a fault.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from typing import Any

Step = bytes | float | str


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
        path = head.split(b" ")[1].decode()
        server: ScriptServer = self.server.owner  # type: ignore[attr-defined]
        server.requests.append((path, head, rest))
        script = server.scripts.get(path.split("?")[0].removesuffix("/chat/completions"), [])
        try:
            for step in script:
                if isinstance(step, (int, float)):
                    time.sleep(step)
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
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
