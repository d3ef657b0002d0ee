"""HTTP/1.1 responses read from a socket as bytes arrive (wire-client layer): the response head and chunked
transfer coding, bounded and classified as http.client bounds them (a line over 65,536 bytes, more than 100
headers, a status line that is not HTTP: :class:`Unparseable`; a broken-off body: :class:`Incomplete`), for the
lean client (:mod:`avv_harness.wire.lean`).
"""

from __future__ import annotations

import http.client
import zlib
from typing import Protocol

READ_BLOCK = 65536
MAX_LINE = 65536  # http.client's bound on a status, header or chunk-size line
MAX_HEADERS = 100  # and on the number of headers


class Readable(Protocol):
    def recv(self, size: int, /) -> bytes: ...


class Unparseable(Exception):
    """What the vendor sent cannot be parsed as HTTP/1.1 (the exception http.client would have raised)."""

    def __init__(self, cause: Exception):
        super().__init__(f"{type(cause).__name__}: {str(cause)[:200]}")


class Incomplete(Exception):
    """The body ended (or its framing broke) before its declared end: http.client's ``IncompleteRead``."""


class ClosedBeforeResponse(Exception):
    """The connection closed before any byte of the response (http.client's ``RemoteDisconnected``)."""


class Dechunker:
    """HTTP/1.1 chunked transfer coding, decoded as bytes arrive (:meth:`feed` returns the payload they carry).
    Bounds and errors as http.client's: a size or trailer line over MAX_LINE is :class:`Unparseable`
    (``LineTooLong``), a size that is not hexadecimal is :class:`Incomplete`."""

    __slots__ = ("left", "skip", "line", "state", "extra")

    SIZE, DATA, CRLF, TRAILER, END = range(5)

    def __init__(self) -> None:
        self.left = 0  # payload bytes left in the current chunk
        self.skip = 0  # bytes of the CRLF after it
        self.line = b""  # an unterminated size or trailer line
        self.state = self.SIZE
        self.extra = False  # bytes came after the terminating chunk (the connection is not reused)

    @property
    def ended(self) -> bool:
        return self.state == self.END

    def feed(self, data: bytes) -> bytes:
        if self.state != self.SIZE or self.line:
            return self._feed(data)
        # The usual reads: whole chunks, one or many (a fast vendor's events arrive together). Anything else
        # (an extension, the last chunk, a chunk cut by the read) goes to the general state machine from there.
        out = []
        pos, n = 0, len(data)
        while pos < n:
            i = data.find(b"\r\n", pos, pos + 18)
            if i <= pos:
                break
            try:
                size = int(data[pos:i], 16)
            except ValueError:
                break
            start = i + 2
            end = start + size
            if size <= 0 or end + 2 > n or data[end:end + 2] != b"\r\n":
                break
            out.append(data[start:end])
            pos = end + 2
        if pos < n:
            out.append(self._feed(data[pos:] if pos else data))
        return out[0] if len(out) == 1 else b"".join(out)

    def _feed(self, data: bytes) -> bytes:
        out = []
        pos, n = 0, len(data)
        while pos < n:
            state = self.state
            if state == self.DATA:
                take = min(self.left, n - pos)
                out.append(data[pos:pos + take])
                pos += take
                self.left -= take
                if not self.left:
                    self.state, self.skip = self.CRLF, 2
            elif state == self.CRLF:  # http.client reads these two bytes without looking at them
                take = min(self.skip, n - pos)
                pos += take
                self.skip -= take
                if not self.skip:
                    self.state = self.SIZE
            elif state == self.END:
                self.extra = True
                break
            else:
                i = data.find(b"\n", pos)
                if i < 0:
                    self.line += data[pos:]
                    if len(self.line) > MAX_LINE:
                        raise Unparseable(http.client.LineTooLong("chunk size" if state == self.SIZE
                                                                  else "trailer line"))
                    break
                line, self.line, pos = self.line + data[pos:i + 1], b"", i + 1
                if len(line) > MAX_LINE:
                    raise Unparseable(http.client.LineTooLong("chunk size" if state == self.SIZE else "trailer line"))
                if state == self.TRAILER:
                    if line in (b"\r\n", b"\n"):
                        self.state = self.END
                    continue
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise Incomplete("IncompleteRead(0 bytes read): a chunk size that is not hexadecimal") from None
                if size < 0:
                    raise Incomplete("IncompleteRead(0 bytes read): a negative chunk size")
                self.state, self.left = (self.DATA, size) if size else (self.TRAILER, 0)
        return b"".join(out)


class Response:
    """A response head as read, and the body's framing."""

    __slots__ = ("status", "headers", "rest", "chunked", "length", "keep_alive")

    def __init__(self, status: int, headers: dict[str, str], rest: bytes, version: str = "HTTP/1.1"):
        self.status, self.headers, self.rest = status, headers, rest
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self.length = int(length) if length is not None and length.strip().isdigit() and not self.chunked else None
        connection = headers.get("connection", "").lower()
        # HTTP/1.1 keeps the connection unless told to close it; HTTP/1.0 closes it unless told to keep it
        self.keep_alive = "close" not in connection if version != "HTTP/1.0" else "keep-alive" in connection


def read_head(sock: Readable) -> Response:
    """Read a response head (skipping ``100 Continue``), bounded as http.client bounds it."""
    data = b""
    while True:
        scanned = 0
        while True:
            i, j = data.find(b"\n\r\n", scanned), data.find(b"\n\n", scanned)
            end = min(k for k in (i, j) if k >= 0) if i >= 0 or j >= 0 else -1
            if end >= 0:
                break
            last_newline = data.rfind(b"\n")
            if len(data) - last_newline > MAX_LINE + 1:
                kind = "status line" if last_newline < 0 else "header line"
                raise Unparseable(http.client.LineTooLong(kind))
            if data.count(b"\n") > MAX_HEADERS + 1:
                raise Unparseable(http.client.HTTPException(f"got more than {MAX_HEADERS} headers"))
            scanned = max(0, len(data) - 2)
            block = sock.recv(READ_BLOCK)
            if not block:
                if not data:
                    raise ClosedBeforeResponse("Remote end closed connection without response")
                raise Incomplete("the connection closed inside the response head")
            data += block
        cut = end + (3 if data[end:end + 3] == b"\n\r\n" else 2)
        lines = data[:cut].split(b"\n")[:-2]
        rest, data = data[cut:], data[cut:]
        status_line = lines[0].rstrip(b"\r")
        if len(lines[0]) > MAX_LINE:
            raise Unparseable(http.client.LineTooLong("status line"))
        parts = status_line.decode("iso-8859-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or len(parts[1]) != 3 or not parts[1].isdigit():
            raise Unparseable(http.client.BadStatusLine(repr(status_line.decode("iso-8859-1"))))
        if len(lines) - 1 > MAX_HEADERS:
            raise Unparseable(http.client.HTTPException(f"got more than {MAX_HEADERS} headers"))
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if len(line) > MAX_LINE:
                raise Unparseable(http.client.LineTooLong("header line"))
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if colon:
                name = name.strip().lower()
                headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
        status = int(parts[1])
        if status == 100:
            continue
        return Response(status, headers, rest, parts[0])


def read_some(sock: Readable, resp: Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of a (short) body, decoded as the requests client reads an error body (chunked,
    gzip / deflate), for its message. Stops at the body's end."""
    dechunk = Dechunker() if resp.chunked else None
    raw, got = resp.rest, []
    size = 0
    left = resp.length
    while True:
        if left is not None:
            raw = raw[:left]
            left -= len(raw)
        payload = dechunk.feed(raw) if dechunk is not None and raw else raw
        got.append(payload)
        size += len(payload)
        if size >= limit or left == 0 or (dechunk is not None and dechunk.ended) or resp.status in (204, 304):
            break
        raw = sock.recv(READ_BLOCK)
        if not raw:
            break
    body = b"".join(got)
    encoding = resp.headers.get("content-encoding", "").lower()
    if encoding in ("gzip", "deflate"):
        try:
            body = zlib.decompressobj(47 if encoding == "gzip" else 15).decompress(body, limit)
        except zlib.error:
            pass
    return body[:limit]
