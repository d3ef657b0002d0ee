"""Server-sent events, framed (wire-client layer, pure): :class:`SSEParser` turns the bytes of each read into the
events they complete, linear in the bytes and bounded per event, so one vendor's stream can never hold a Locust
process (issue 22; ``bench/sse_parser.py`` measures it against sseclient-py).
"""

from __future__ import annotations

# Largest SSE event (or line) read from a vendor (``--avv-max-event-bytes``). Big tool-call arguments arrive split
# over many events (a few KiB each); one event of 4 MiB is already far beyond any real chunk and costs 10–25 ms to
# parse.
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024


class MalformedStream(Exception):
    """The vendor sent something that is not a chat-completions SSE stream (``bad_sse``); says what."""


SSEEvent = tuple[bytes, bytes | None]  # (event type, data lines joined by \n; None: an error event without data)


class SSEParser:
    """SSE framing (WHATWG "interpreting an event stream"), linear in the bytes fed to it.

    :meth:`feed` takes the bytes of one read and returns the events they complete. Lines end with CRLF,
    LF or CR (a CRLF split between two reads too); comments and ``id`` / ``retry`` / unknown fields are
    skipped; an event without data is dropped, as the spec says, unless its type is ``error``. An event
    (everything from the end of the previous one to its blank line, comments included) or an unterminated
    line larger than ``max_event_bytes`` raises :class:`MalformedStream` at once, so no more is ever held.

    It replaces sseclient-py here, which copies its whole buffer again for every line and every read:
    a 1 MiB event made of short ``data:`` lines took 5 s of CPU (4 MiB: 32 s) and a 20 MB one-line event
    3 s, with the process's event loop blocked all along; bounding the event size does not bound that.
    """

    __slots__ = ("max_event_bytes", "_partial", "_partial_bytes", "_after_cr", "_data", "_type", "_event_bytes")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES):
        self.max_event_bytes = max_event_bytes
        self._partial: list[bytes] = []  # the unterminated line so far, joined once when it ends
        self._partial_bytes = 0
        self._after_cr = False  # the last read ended with CR: an LF opening the next one belongs to it
        self._data: list[bytes] = []  # the data lines of the event being read
        self._type = b""  # its `event:` field
        self._event_bytes = 0  # its size so far (lines and terminators, comments included)

    def feed(self, block: bytes) -> list[SSEEvent]:
        if self._after_cr and block[:1] == b"\n":
            block = block[1:]
        if not block:
            return []
        last = block[-1:]
        self._after_cr = last == b"\r"
        lines = block.splitlines()  # bytes split on CR, LF and CRLF only
        tail = None if last == b"\n" or self._after_cr else lines.pop()
        if self._partial and lines:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial, self._partial_bytes = [], 0
        events = self._lines(lines) if lines else []
        if tail is not None:
            self._partial.append(tail)
            self._partial_bytes += len(tail)
            if self._event_bytes + self._partial_bytes > self.max_event_bytes:
                raise self._too_big()
        return events

    def close(self) -> list[SSEEvent]:
        """End of the body: what is left is one last event (as sseclient-py read it)."""
        lines = [b"".join(self._partial), b""] if self._partial else [b""]
        self._partial, self._partial_bytes = [], 0
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        size, limit = self._event_bytes, self.max_event_bytes
        for line in lines:
            if not line:  # a blank line ends the event
                if self._data:
                    data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                    events.append((self._type, data))
                    self._data = []
                elif self._type == b"error":
                    events.append((self._type, None))
                self._type, size = b"", 0
                continue
            size += len(line) + 1
            if size > limit:
                self._event_bytes = size
                raise self._too_big()
            if line[:5] == b"data:":  # the usual line first
                self._data.append(line[6:] if line[5:6] == b" " else line[5:])
                continue
            if line[:1] == b":":  # a comment
                continue
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._type = value
        self._event_bytes = size
        return events

    def _too_big(self) -> MalformedStream:
        return MalformedStream(f"SSE event larger than {self.max_event_bytes} bytes (--avv-max-event-bytes)")
