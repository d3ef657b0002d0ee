"""The wire faults: what a vendor (or the network) does on the wire → what the attempt becomes, declared once
(wire-client layer, pure). Both clients are tested against this table case by case (tests/test_wire_faults.py
runs every case over real sockets for the lean and the requests client); :func:`render_wire_faults_page` writes
docs/reference/wire-faults.md from it. :data:`RETRYABLE` is the rule that decides the ``retried`` column (and
:func:`avv_harness.wire.execute.execute_item`'s retries).

An outcome is an error kind (:data:`avv_core.records.ERROR_KINDS`) or one of :data:`READ_AS_SUCCESS` (the
answer is read; how, the ``handling`` says). The state machine that produces these outcomes is
:mod:`avv_harness.wire.machine`; the framing rules are :mod:`avv_harness.wire.http11`.
"""

from __future__ import annotations

from dataclasses import dataclass

from avv_harness.wire.headers import FRAMING, RESERVED

#: The error kinds an item is retried on (README "Error kinds": the `retried` column).
RETRYABLE = frozenset({"connect", "timeout", "http_429", "http_5xx", "overloaded", "truncated"})
SUCCESS = "success"  # the answer is read as it is
RESENT = "success (resent)"  # a stale pooled connection: the request is sent once more at once on a fresh one
READ_AS_SUCCESS = (SUCCESS, RESENT)


@dataclass(frozen=True)
class WireFault:
    """One case: ``name`` (its id; the tests' scripts are keyed by it), what the vendor does, the outcome (an
    error kind or one of READ_AS_SUCCESS), what the client does, and the rule it follows."""

    name: str
    vendor: str
    outcome: str
    handling: str
    rule: str = ""

    @property
    def retried(self) -> bool:
        return self.outcome in RETRYABLE


AFTER_BODY = ("The answer is kept; the bytes never reach the next item (the lean client closes the connection; "
              "http.client drops them with its buffer, or urllib3's check before reuse finds them).")
CONNECTION = "Connection and reuse"
HEAD = "Response head (RFC 9112)"
STATUS = "Status"
BODY = "Body"

#: Every case, by group. The tests hold one script per name and run it on both clients.
FAULTS: dict[str, tuple[WireFault, ...]] = {
    CONNECTION: (
        WireFault("refused", "The connection is refused (nothing listens).", "connect",
                  "`cannot connect to <url>` (the URL's user-info and key-like query values shown as ***)."),
        WireFault("connect_timeout", "The connection is not accepted within the connect timeout.", "timeout",
                  "`connect timeout after <s>s` (the connect timeout: min(10 s, timeout_s))."),
        WireFault("closed_unanswered", "A new connection closes before any response byte.", "connect",
                  "`Remote end closed connection without response`."),
        WireFault("stale_closed", "A kept-alive connection, reused, closes before any response byte (its idle "
                  "timeout fired as the request came in).", RESENT,
                  "The client's pool, not the vendor: sent once more at once on a fresh connection "
                  "(`stale_conn_retries` 1, the attempt's clock restarted).", "as urllib3 / browsers"),
        WireFault("stale_408", "A kept-alive connection, reused, answers `408 Request Timeout` (and closes).", RESENT,
                  "As a stale connection: sent once more on a fresh one (`stale_conn_retries` 1).",
                  "RFC 9110 §15.5.9"),
        WireFault("answer_408", "A new connection answers `408 Request Timeout`.", "http_4xx",
                  "The vendor's answer to this request (`HTTP 408: …`)."),
        WireFault("bytes_while_idle", "Bytes (a stray CRLF) arrive on a kept-alive connection while it sits idle.",
                  SUCCESS, "The connection is checked before reuse (pending bytes or EOF) and dropped; the next "
                  "request goes on a fresh one and gets its own answer.", "urllib3 `wait_for_read(sock, 0)`"),
        WireFault("response_while_idle", "A whole second response arrives on a kept-alive connection while it "
                  "sits idle.", SUCCESS, "As above: dropped before reuse; the next item never reads it."),
        WireFault("idle_408", "An idle kept-alive connection gets `408 Request Timeout` and is closed.", SUCCESS,
                  "As above: dropped before reuse, never read as the next item's answer."),
        WireFault("bytes_after_body", "Bytes follow a complete `Content-Length` body in the same read.", SUCCESS,
                  AFTER_BODY),
        WireFault("bytes_after_last_chunk", "A whole second response follows the last chunk of a chunked body.",
                  SUCCESS, AFTER_BODY),
    ),
    HEAD: (
        WireFault("head_closed_inside", "The connection closes inside the response head.", "truncated",
                  "`the connection closed inside the response head`."),
        WireFault("empty_lines_first", "Empty lines (a stray CRLF) before the status line.", SUCCESS,
                  "Skipped (at most until the attempt's time runs out).", "RFC 9112 §2.2"),
        WireFault("head_idle", "No response head within `timeout_s`.", "timeout",
                  "`no response headers within <timeout_s>s`."),
        WireFault("head_trickle", "The head trickles in, a byte at a time, past `max_request_s`.", "timeout",
                  "`no complete response head within max_request_s (<s>s)`: the head is bounded by "
                  "`max_request_s` in both clients."),
        WireFault("status_below_100", "A status below 100 (`HTTP/1.1 099 X`).", "bad_sse",
                  "`status 99 is outside 100–599`.", "RFC 9110 §15"),
        WireFault("status_above_599", "A status above 599 (`HTTP/1.1 600 X`).", "bad_sse",
                  "`status 600 is outside 100–599`.", "RFC 9110 §15"),
        WireFault("status_not_ascii", "A status of non-ASCII digits (`HTTP/1.1 ²⁰⁰ OK` in Latin-1).", "bad_sse",
                  "`BadStatusLine`.", "RFC 9112 §4"),
        WireFault("not_http", "A status line that is not HTTP (`SSH-2.0-OpenSSH_9.6`).", "bad_sse",
                  "`BadStatusLine`."),
        WireFault("other_version", "A status line of another HTTP version (`HTTP/2.0 200 OK`).", "bad_sse",
                  "`UnknownProtocol`.", "as http.client"),
        WireFault("line_too_long", "A header line over 65,536 bytes.", "bad_sse", "`LineTooLong`.",
                  "http.client's bound"),
        WireFault("too_many_headers", "More than 100 header lines.", "bad_sse", "`got more than 100 headers`.",
                  "http.client's bound"),
        WireFault("obs_fold", "A header continued on the next line (a line starting with a space: obs-fold).",
                  "bad_sse", "`a header line folded onto the next (obs-fold)`.", "RFC 9112 §5.2"),
        WireFault("header_without_colon", "A header line without a colon.", "bad_sse",
                  "`a header line without a colon`.", "RFC 9112 §5"),
        WireFault("space_before_colon", "Whitespace between a header's name and its colon (`Content-Length : 5`).",
                  "bad_sse", "`whitespace in a header name`.", "RFC 9112 §5.1"),
        WireFault("interim_100", "`100 Continue` before the answer.", SUCCESS, "Skipped.", "RFC 9110 §15.2"),
        WireFault("interim_103", "`102 Processing` and `103 Early Hints` before the answer.", SUCCESS,
                  "Skipped (every 1xx but 101; at most 100 of them).", "RFC 9110 §15.2"),
        WireFault("switching_101", "`101 Switching Protocols` (no upgrade was asked for).", "bad_sse",
                  "`101 Switching Protocols, but no protocol switch was asked for`."),
        WireFault("content_length_twice", "Two identical `Content-Length` headers (or `5, 5`).", SUCCESS,
                  "One length; the body ends at it (no wait for the idle timeout).", "RFC 9112 §6.3"),
        WireFault("content_length_conflict", "Two `Content-Length` headers that disagree.", "bad_sse",
                  "`Content-Length values disagree`.", "RFC 9112 §6.3"),
        WireFault("content_length_not_ascii", "A `Content-Length` of non-ASCII digits (`¹²`).", "bad_sse",
                  "`Content-Length '¹²' is not a decimal number`.", "RFC 9112 §6.3"),
        WireFault("chunked_and_length", "Both `Transfer-Encoding: chunked` and `Content-Length`.", SUCCESS,
                  "The chunks frame the body; the connection is not reused.", "RFC 9112 §6.3"),
        WireFault("transfer_encoding_other", "A `Transfer-Encoding` other than `chunked` (`gzip, chunked`).",
                  "bad_sse", "`only chunked is read`.", "RFC 9112 §6.1"),
    ),
    STATUS: (
        WireFault("redirect", "A redirect (`302` with `Location`).", "http_4xx",
                  "Not followed (a redirect to another host would carry the key)."),
        WireFault("http_401", "`401` (or any other 4xx).", "http_4xx", "`HTTP 401: <the body's message>`."),
        WireFault("http_429", "`429` (with `Retry-After`).", "http_429", "`Retry-After` honoured up to its cap."),
        WireFault("http_500", "`500` (or any other 5xx but 529).", "http_5xx", "`HTTP 500: <the body's message>`."),
        WireFault("http_529", "`529`.", "overloaded", "`HTTP 529: …`."),
        WireFault("error_body_stalls", "An error status whose body stalls past `timeout_s`.", "http_5xx",
                  "The status is the outcome; the message holds what of the body arrived."),
        WireFault("error_body_trickles", "An error status whose body trickles past `max_request_s`.", "http_5xx",
                  "Bounded by `max_request_s`; the status is the outcome."),
    ),
    BODY: (
        WireFault("json_body", "`200` with a JSON body instead of an SSE stream.", "bad_sse",
                  "`HTTP 200 with a JSON body instead of an SSE stream`."),
        WireFault("empty_body", "`200` with an empty body.", "bad_sse", "`HTTP 200 with an empty body`."),
        WireFault("body_closed_early", "The connection closes before the `Content-Length` is complete (no finish "
                  "reason yet).", "truncated", "`connection closed mid-stream`."),
        WireFault("chunked_closed_early", "The connection closes before the last chunk (no finish reason yet).",
                  "truncated", "`connection closed mid-stream`."),
        WireFault("chunk_size_not_hex", "A chunk size that is not hexadecimal, before the finish.", "truncated",
                  "`a chunk size that is not hexadecimal` (http.client cannot tell it from a cut-off size line)."),
        WireFault("chunk_error_after_finish", "A chunk-framing error right after the finish reason and `[DONE]`, "
                  "in the same read.", SUCCESS, "The complete answer before it is kept.",
                  "as http.client hands out chunk after chunk"),
        WireFault("chunk_line_too_long", "A chunk-size line over 65,536 bytes.", "bad_sse",
                  "`the response's chunked framing cannot be parsed (LineTooLong: chunk size)`."),
        WireFault("gzip_stream", "An SSE stream sent with `Content-Encoding: gzip` (or `deflate`) although "
                  "`Accept-Encoding: identity` was asked for.", SUCCESS,
                  "Decoded as it arrives (a read may expand to at most 4 MiB or `--avv-max-event-bytes`)."),
        WireFault("unknown_encoding", "An SSE stream with a `Content-Encoding` the client does not decode (`br`, "
                  "`zstd`).", "bad_sse", "`Content-Encoding 'br' is not decoded`."),
        WireFault("stall_mid_stream", "The stream stalls past `timeout_s` before the finish reason.", "timeout",
                  "`stream stalled for more than <timeout_s>s`."),
        WireFault("stream_past_max_request", "The stream goes on past `max_request_s`.", "timeout",
                  "`the attempt exceeded max_request_s (<s>s) while still streaming`."),
        WireFault("closed_after_finish", "The connection closes after the finish reason, without `[DONE]`.",
                  SUCCESS, "The answer is whole (flagged `no_done`)."),
    ),
}

#: Every case by name.
BY_NAME: dict[str, WireFault] = {fault.name: fault for group in FAULTS.values() for fault in group}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_wire_faults_table() -> str:
    rows = ["| case | the vendor does | outcome | retried | the client |", "|---|---|---|---|---|"]
    for group, faults in FAULTS.items():
        rows.append(f"| **{group}** | | | | |")
        for fault in faults:
            outcome = f"`{fault.outcome}`" if fault.outcome not in READ_AS_SUCCESS else fault.outcome
            rule = f" ({fault.rule})" if fault.rule else ""
            rows.append(f"| `{fault.name}` | {_cell(fault.vendor)} | {outcome} | {'yes' if fault.retried else 'no'} "
                        f"| {_cell(fault.handling)}{_cell(rule)} |")
    return "\n".join(rows)


def render_header_rule() -> str:
    framing = ", ".join(f"`{name.title()}`" for name in sorted(FRAMING))
    reserved = ", ".join(f"`{name}`" for name in sorted(RESERVED))
    return (
        "Header names are compared case-insensitively and one header of each name is sent, by both clients. From "
        "lowest to highest precedence: the client's own (`User-Agent`, `Content-Type`, `Accept`, "
        "`Accept-Encoding: identity`, the wire format's defaults such as `anthropic-version`), the vendor's key "
        "(`Authorization: Bearer …`, or `x-api-key` for `endpoint: messages`), the URL's `user:password@` (sent as "
        "`Authorization: Basic …`, as requests sends it; the request line carries the URL without it), the "
        "vendor's `headers:`, then `--avv-header`: a later one replaces an earlier one of the same name. `Host` may "
        "be set (it replaces the URL's host in the request, not the address connected to). The headers that frame "
        f"the request on the wire ({framing}) and the harness's item tags ({reserved}) are the client's: a config "
        "or `--avv-header` naming one is refused at start-up. Credentials (the key, the URL's password, the Basic "
        "value) never appear in records, logs, reports or the web UI."
    )


PAGE_HEAD = """# Wire faults

What a vendor (or the network) does on the wire, and what the attempt becomes: its `error_kind` (see the README's
error kinds), whether the item is retried, and what the client does. Both clients (`--avv-client lean`, the
default, and `--avv-client requests`) follow this table; `tests/test_wire_faults.py` runs every case on both over
real sockets. It is rendered from `avv_harness/wire/faults.py` (`python -m avv_harness.docs
docs/reference/wire-faults.md`); edit the table there.

One item's bytes never reach another item: a kept-alive connection is checked for pending bytes or EOF before it
is reused and dropped if it has either, bytes after a complete body close it, and a reused connection that closes
unanswered or answers `408` is resent once on a fresh connection (`stale_conn_retries`). A property test
(`tests/test_connection_reuse.py`) drives both clients through 1,000 random sequences of these answers.
"""


def render_wire_faults_page() -> str:
    """docs/reference/wire-faults.md, whole."""
    return (f"{PAGE_HEAD}\n<!-- wire-faults:start -->\n{render_wire_faults_table()}\n<!-- wire-faults:end -->\n\n"
            f"## Request headers\n\n<!-- header-rule:start -->\n{render_header_rule()}\n<!-- header-rule:end -->\n")
