"""HTTP/1.1 responses as RFC 9112 frames them (wire-client layer, pure but for the reads it is handed): the
response head (:func:`parse_head`, read from a socket by :func:`read_head` or from a file by
:func:`read_head_lines`), chunked transfer coding (:class:`Dechunker`) and content codings
(:func:`content_decoder`). Both transports use these, so the two clients read one head the same way.

The rules (docs/reference/wire-faults.md lists each case and its outcome): empty lines before a status line (a
stray CRLF after the previous answer) are skipped, as RFC 9112 §2.2 asks of a server; interim ``1xx`` answers are
skipped (``101`` is refused: nothing asked to switch protocols); a status is three ASCII digits within 100–599; a
header line continued on the next one (obs-fold), a line without a colon, whitespace in a field name, a
``Content-Length`` that is not ASCII digits or several that disagree, and a ``Transfer-Encoding`` other than
``chunked`` are refused (:class:`Unparseable`); repeated identical ``Content-Length`` values are one; with both
``Transfer-Encoding: chunked`` and ``Content-Length`` the chunks frame the body and the connection is not reused.
Bounds as http.client's: a line over 65,536 bytes, more than 100 headers. A body broken off before its declared
end is :class:`Incomplete`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Protocol

READ_BLOCK = 65536
MAX_LINE = 65536  # http.client's bound on a status, header or chunk-size line
MAX_HEADERS = 100  # and on the number of headers
MAX_INTERIM = 100  # interim (1xx) heads skipped before the answer's own
NO_BODY = (204, 304)  # statuses whose answer has no body (RFC 9112 §6.3), besides 1xx


class Readable(Protocol):
    def recv(self, size: int, /) -> bytes: ...


class LineReader(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


class Unparseable(Exception):
    """What the vendor sent cannot be read as HTTP/1.1: the message says what (``Kind: detail``, the kind being
    http.client's exception name where it has one)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail[:200]}")


class Incomplete(Exception):
    """The head or body ended (or its chunked framing broke) before its end: http.client's ``IncompleteRead``."""


class ClosedBeforeResponse(Exception):
    """The connection closed before any byte of the response (http.client's ``RemoteDisconnected``)."""


class UnsupportedEncoding(Exception):
    """A ``Content-Encoding`` the client does not decode (or a body that does not decode as it says)."""


class Head:
    """A final response head as read, and its body's framing. ``headers``: lower-case names, repeated headers
    joined with ``, ``. ``length``: the body's size, or None (chunked, or until the connection closes)."""

    __slots__ = ("status", "reason", "version", "headers", "chunked", "length", "keep_alive", "rest")

    def __init__(self, status: int, reason: str, version: str, headers: dict[str, str]):
        self.status, self.reason, self.version, self.headers = status, reason, version, headers
        self.rest = b""  # body bytes read with the head
        self.chunked = "transfer-encoding" in headers
        self.length: int | None = None
        connection = {token.strip() for token in headers.get("connection", "").lower().split(",")}
        # HTTP/1.1 keeps the connection unless told to close it; HTTP/1.0 closes it unless told to keep it
        self.keep_alive = "close" not in connection if version != "HTTP/1.0" else "keep-alive" in connection
        if status < 200 or status in NO_BODY:
            self.chunked, self.length = False, 0
        elif self.chunked:
            if "content-length" in headers:  # RFC 9112 §6.1: the chunks frame the body; do not trust the rest
                self.keep_alive = False
        elif "content-length" in headers:
            self.length = content_length(headers["content-length"])

    def canonical(self) -> bytes:
        """The head as http.client can read it unambiguously: one line per field, the framing as decided here
        (one ``Content-Length``; none beside chunked, and then ``Connection: close``)."""
        lines = [f"{self.version} {self.status} {self.reason}\r\n"]
        for name, value in self.headers.items():
            if name == "content-length":
                if self.chunked or self.length is None:
                    continue
                value = str(self.length)
            elif name == "connection" and not self.keep_alive:
                value = "close"
            lines.append(f"{name}: {value}\r\n")
        if not self.keep_alive and "connection" not in self.headers:
            lines.append("connection: close\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("iso-8859-1")


def content_length(value: str) -> int:
    """One length from a ``Content-Length`` field (repeated fields arrive joined with commas): identical ASCII
    decimal values are one, anything else is refused (RFC 9112 §6.3)."""
    values = {part.strip() for part in value.split(",")}
    for part in values:
        if not part or not part.isascii() or not part.isdigit():
            raise Unparseable("BadContentLength", f"Content-Length {value!r} is not a decimal number")
    lengths = {int(part) for part in values}
    if len(lengths) > 1:
        raise Unparseable("BadContentLength", f"Content-Length values disagree: {value!r}")
    return lengths.pop()


def parse_head(block: bytes) -> Head:
    """A head from its bytes (status line to the blank line, CRLF or bare LF line ends); :class:`Unparseable`
    for anything RFC 9112 refuses (module docstring)."""
    lines = block.split(b"\n")
    while lines and lines[-1] in (b"", b"\r"):
        lines.pop()
    if not lines:
        raise Unparseable("BadStatusLine", "an empty status line")
    if any(len(line) > MAX_LINE for line in lines):
        raise Unparseable("LineTooLong", "status line" if len(lines[0]) > MAX_LINE else "header line")
    if len(lines) - 1 > MAX_HEADERS:
        raise Unparseable("HTTPException", f"got more than {MAX_HEADERS} headers")
    status_line = lines[0].rstrip(b"\r").decode("iso-8859-1")
    parts = status_line.split(" ", 2)
    version, code = parts[0], parts[1] if len(parts) > 1 else ""
    if not version.startswith("HTTP/") or len(code) != 3 or not (code.isascii() and code.isdigit()):
        raise Unparseable("BadStatusLine", repr(status_line))
    if not version.startswith("HTTP/1."):
        raise Unparseable("UnknownProtocol", f"{version} (an HTTP/1.x status line is read)")
    status = int(code)
    if not 100 <= status <= 599:
        raise Unparseable("BadStatusLine", f"status {status} is outside 100–599: {status_line!r}")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        line = raw.rstrip(b"\r").decode("iso-8859-1")
        if line[:1] in (" ", "\t"):
            raise Unparseable("BadHeader", f"a header line folded onto the next (obs-fold): {line.strip()[:60]!r}")
        name, colon, value = line.partition(":")
        if not colon:
            raise Unparseable("BadHeader", f"a header line without a colon: {line[:60]!r}")
        if not name or name != name.strip() or " " in name or "\t" in name:
            raise Unparseable("BadHeader", f"whitespace in a header name: {name[:60]!r}")
        name, value = name.lower(), value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    te = headers.get("transfer-encoding")
    if te is not None and te.strip().lower() != "chunked":
        raise Unparseable("BadTransferEncoding", f"Transfer-Encoding {te!r}: only chunked is read")
    return Head(status, parts[2] if len(parts) > 2 else "", version, headers)


def final_head(head: Head, interim: int) -> bool:
    """True for the answer's own head; False for an interim one to skip (1xx but 101)."""
    if head.status >= 200:
        return True
    if head.status == 101:
        raise Unparseable("BadStatusLine", "101 Switching Protocols, but no protocol switch was asked for")
    if interim >= MAX_INTERIM:
        raise Unparseable("HTTPException", f"more than {MAX_INTERIM} interim (1xx) responses")
    return False


def read_head(sock: Readable, on_read: Callable[[], None] | None = None) -> Head:
    """Read the final response head from a socket, skipping interim 1xx heads (``on_read`` runs after every
    read: the caller's progress clock). Body bytes read with it are in ``Head.rest``."""
    data = b""
    interim = 0
    while True:
        scanned = 0
        while True:
            if data[:1] in (b"\r", b"\n"):  # empty lines before a status line (a stray CRLF after the last answer)
                data, scanned = data.lstrip(b"\r\n"), 0
            i, j = data.find(b"\n\r\n", scanned), data.find(b"\n\n", scanned)
            end = min(k for k in (i, j) if k >= 0) if i >= 0 or j >= 0 else -1
            if end >= 0:
                break
            last_newline = data.rfind(b"\n")
            if len(data) - last_newline > MAX_LINE + 1:
                raise Unparseable("LineTooLong", "status line" if last_newline < 0 else "header line")
            if data.count(b"\n") > MAX_HEADERS + 1:
                raise Unparseable("HTTPException", f"got more than {MAX_HEADERS} headers")
            scanned = max(0, len(data) - 2)
            block = sock.recv(READ_BLOCK)
            if on_read is not None:
                on_read()
            if not block:
                if not data and not interim:
                    raise ClosedBeforeResponse("Remote end closed connection without response")
                raise Incomplete("the connection closed inside the response head")
            data += block
        cut = end + (3 if data[end:end + 3] == b"\n\r\n" else 2)
        head = parse_head(data[:cut])
        data = data[cut:]
        if final_head(head, interim):
            head.rest = data
            return head
        interim += 1


def read_head_lines(fp: LineReader) -> Head:
    """:func:`read_head` for a buffered file (the requests transport reads through http.client's)."""
    interim = 0
    while True:
        lines: list[bytes] = []
        while True:
            line = fp.readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                raise Unparseable("LineTooLong", "header line" if lines else "status line")
            if not line.endswith(b"\n"):
                if not lines and not line and not interim:
                    raise ClosedBeforeResponse("Remote end closed connection without response")
                raise Incomplete("the connection closed inside the response head")
            if line in (b"\r\n", b"\n") and lines:
                break
            if line in (b"\r\n", b"\n"):
                continue  # an empty line before a status line (a stray CRLF after the last answer)
            lines.append(line)
            if len(lines) > MAX_HEADERS + 1:
                raise Unparseable("HTTPException", f"got more than {MAX_HEADERS} headers")
        head = parse_head(b"".join(lines))
        if final_head(head, interim):
            return head
        interim += 1


class Dechunker:
    """HTTP/1.1 chunked transfer coding, decoded as bytes arrive (:meth:`feed` returns the payload they carry).
    Bounds and errors as http.client's: a size or trailer line over MAX_LINE is :class:`Unparseable`
    (``LineTooLong``), a size that is not hexadecimal is :class:`Incomplete`. A framing error after some payload of
    the same read is kept in ``failed`` and raised by the next :meth:`feed`: the payload before it is handed out
    first (an answer complete before the error is kept, as http.client hands out chunk after chunk)."""

    __slots__ = ("left", "skip", "line", "state", "extra", "failed")

    SIZE, DATA, CRLF, TRAILER, END = range(5)

    def __init__(self) -> None:
        self.left = 0  # payload bytes left in the current chunk
        self.skip = 0  # bytes of the CRLF after it
        self.line = b""  # an unterminated size or trailer line
        self.state = self.SIZE
        self.extra = False  # bytes came after the terminating chunk (the connection is not reused)
        self.failed: Exception | None = None

    @property
    def ended(self) -> bool:
        return self.state == self.END

    def feed(self, data: bytes) -> bytes:
        if self.failed is not None:
            raise self.failed
        out: list[bytes] = []
        pos, n = 0, len(data)
        if self.state == self.SIZE and not self.line:
            # The usual reads: whole chunks, one or many (a fast vendor's events arrive together). Anything else
            # (an extension, the last chunk, a chunk cut by the read) goes to the general state machine from there.
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
            try:
                self._decode(data[pos:] if pos else data, out)
            except (Unparseable, Incomplete) as exc:
                if not any(out):
                    raise
                self.failed = exc
        return out[0] if len(out) == 1 else b"".join(out)

    def _decode(self, data: bytes, out: list[bytes]) -> None:
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
                what = "chunk size" if state == self.SIZE else "trailer line"
                if i < 0:
                    self.line += data[pos:]
                    if len(self.line) > MAX_LINE:
                        raise Unparseable("LineTooLong", what)
                    break
                line, self.line, pos = self.line + data[pos:i + 1], b"", i + 1
                if len(line) > MAX_LINE:
                    raise Unparseable("LineTooLong", what)
                if state == self.TRAILER:
                    if line in (b"\r\n", b"\n"):
                        self.state = self.END
                    continue
                try:  # as http.client reads it
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise Incomplete("IncompleteRead(0 bytes read): a chunk size that is not hexadecimal") from None
                if size < 0:
                    raise Incomplete("IncompleteRead(0 bytes read): a negative chunk size")
                self.state, self.left = (self.DATA, size) if size else (self.TRAILER, 0)


#: The content codings read (RFC 9110 §8.4.1): zlib's window bits for each (47: a gzip or zlib header, detected).
DECODED_CODINGS = {"gzip": 47, "x-gzip": 47, "deflate": 47}


def coding_of(headers: Mapping[str, str]) -> str:
    """The body's ``Content-Encoding`` (lower case; ``identity`` and none read as "")."""
    coding = (headers.get("content-encoding") or "").strip().lower()
    return "" if coding == "identity" else coding


def content_decoder(coding: str, max_out: int) -> Callable[[bytes], bytes] | None:
    """A streaming decoder for a ``Content-Encoding`` (None: nothing to decode); each call decodes one read and
    may expand it to at most ``max_out`` bytes (a compression bomb is refused, not held).
    :class:`UnsupportedEncoding` for a coding not read or a body that does not decode."""
    if not coding:
        return None
    bits = DECODED_CODINGS.get(coding)
    if bits is None:
        raise UnsupportedEncoding(f"Content-Encoding {coding!r} is not decoded (sent: Accept-Encoding: identity)")
    inflate = zlib.decompressobj(bits)

    def decode(data: bytes) -> bytes:
        try:
            out = inflate.decompress(data, max_out)
        except zlib.error as exc:
            raise UnsupportedEncoding(f"the Content-Encoding {coding} body does not decode ({exc})") from None
        if inflate.unconsumed_tail:
            raise UnsupportedEncoding(f"one read of the Content-Encoding {coding} body expands past {max_out} bytes")
        return out

    return decode


def decode_some(body: bytes, headers: Mapping[str, str], limit: int) -> bytes:
    """The first ``limit`` bytes of a short body (an error's), decoded when its coding is read; as is otherwise."""
    coding = coding_of(headers)
    if coding in DECODED_CODINGS:
        try:
            return zlib.decompressobj(DECODED_CODINGS[coding]).decompress(body, limit)
        except zlib.error:
            pass
    return body[:limit]
