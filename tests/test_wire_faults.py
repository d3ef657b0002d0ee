"""The wire-fault table (avv_harness/wire/faults.py, docs/reference/wire-faults.md), case by case, for both clients
(issue 33, "both clients agree"): every case of the table has a script here, named as the case, that plays it over
a real loopback socket (tests/wire_server.py), and the attempt's outcome is the table's — its error kind, or read as
a success (a stale pooled connection resent once). What each case did before this table, per client, is in the
closing note of issue 33: a stray CRLF, a second response or an idle 408 on a kept-alive connection reached the
lean client's next item; a status below 100, 1xx interim answers, non-ASCII digits, duplicate Content-Length, an
obs-fold line, gzip and a framing error after the finish were read differently by the two clients or wrongly by
both; max_request_s did not bound the requests client's head or error bodies."""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from avv_harness.docs import main as docs_main
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.faults import BY_NAME, READ_AS_SUCCESS, RESENT, RETRYABLE, render_wire_faults_page
from avv_harness.wire.stream import stream_chat
from tests.test_faults_integration import blackhole
from tests.wire_clients import client_session, current
from tests.wire_server import KeepAliveServer, ScriptServer, Step, chunk, header_value, headers, sse

ROOT = Path(__file__).resolve().parents[1]
ROLE = sse(chunk({"role": "assistant", "content": ""}))
STOP = sse(chunk({}, "stop"))
DONE = b"data: [DONE]\n\n"
SSE = b"Content-Type: text/event-stream\r\n"


def answer(content: str = "hi") -> bytes:
    return ROLE + sse(chunk({"content": content})) + STOP + DONE


def framed(body: bytes, extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    """A kept-alive response with a Content-Length."""
    return b"HTTP/1.1 " + status + b"\r\n" + SSE + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


class Run:
    """What a case produced: the attempt under test, how long it took, and what else the case wants to check."""

    def __init__(self, att: Attempt, seconds: float, content: str = "hi"):
        self.att, self.seconds, self.content = att, seconds, content


def attempt(url: str, read_timeout: float = 2.0, max_request_s: float = 5.0, connect_timeout: float = 2.0,
            tag: str = "hi", session=None) -> tuple[Attempt, float]:
    started = time.monotonic()
    if session is None:
        with client_session() as own:
            att = stream_chat(own, url, b"{}", {"X-Tag": tag}, connect_timeout, read_timeout, max_request_s)
    else:
        att = stream_chat(session, url, b"{}", {"X-Tag": tag}, connect_timeout, read_timeout, max_request_s)
    return att, time.monotonic() - started


def scripted(server: ScriptServer, name: str, script: list[Step], **limits: float) -> Run:
    server.scripts[f"/{name}"] = script
    return Run(*attempt(server.url(name) + "/chat/completions", **limits))


def tagged(head: bytes) -> bytes:
    """A kept-alive answer whose content is the request's X-Tag."""
    return framed(answer(header_value(head, "X-Tag") or "?"))


def two_items(answer_fn: Callable[[bytes, int, int], list[Step]], idle: list[Step] | None = None
              ) -> tuple[Run, KeepAliveServer]:
    """Two items on one session (its pool) to a keep-alive server; ``idle`` is written to the idle connection
    between them. The run is the second item's."""
    srv = KeepAliveServer(answer_fn)
    try:
        with client_session() as session:
            first, _ = attempt(srv.url() + "/chat/completions", tag="first", session=session)
            assert first.ok and first.content == ["first"], first.error_detail
            if idle is not None:
                assert srv.while_idle(idle) == 1
            second, seconds = attempt(srv.url() + "/chat/completions", tag="second", session=session)
    finally:
        srv.stop()
    return Run(second, seconds, "second"), srv


CASES: dict[str, Callable[[ScriptServer], Run]] = {}


def case(fn: Callable[[ScriptServer], Run]) -> Callable[[ScriptServer], Run]:
    CASES[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------------------------ connection and reuse


@case
def refused(server):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = Run(*attempt(f"http://user:pw-secret@127.0.0.1:{port}/v1/chat/completions", read_timeout=1.0))
    assert "cannot connect to http://127.0.0.1" in run.att.error_detail and "pw-secret" not in run.att.error_detail
    return run


@case
def connect_timeout(server):
    hole, fillers, port = blackhole()
    try:
        run = Run(*attempt(f"http://127.0.0.1:{port}/v1/chat/completions", 0.2, connect_timeout=0.2))
    finally:
        hole.close()
        for filler in fillers:
            filler.close()
    assert "connect timeout after 0.2s" in run.att.error_detail, run.att.error_detail
    return run


@case
def closed_unanswered(server):
    return scripted(server, "closed_unanswered", ["close"])


@case
def stale_closed(server):
    run, srv = two_items(lambda head, conn, n: [tagged(head)] if n == 1 else ["close"])
    assert srv.connections == 2
    return run


@case
def stale_408(server):
    late = framed(b"", status=b"408 Request Timeout")
    run, srv = two_items(lambda head, conn, n: [tagged(head)] if n == 1 else [late, "close"])
    assert srv.connections == 2
    return run


@case
def answer_408(server):
    run = scripted(server, "answer_408", [headers(408, "application/json"), b'{"error": {"message": "too slow"}}'])
    assert run.att.error_detail == "HTTP 408: too slow"
    return run


@case
def bytes_while_idle(server):
    run, srv = two_items(lambda head, conn, n: [tagged(head)], idle=[b"\r\n"])
    assert srv.connections == 2  # the idle connection was dropped before the second item
    return run


@case
def response_while_idle(server):
    run, srv = two_items(lambda head, conn, n: [tagged(head)], idle=[framed(answer("STRAY"))])
    assert srv.connections == 2
    return run


@case
def idle_408(server):
    run, srv = two_items(lambda head, conn, n: [tagged(head)],
                         idle=[framed(b"", status=b"408 Request Timeout"), "close"])
    assert srv.connections == 2
    return run


@case
def bytes_after_body(server):
    run, srv = two_items(lambda head, conn, n: [tagged(head) + b"\r\n"])
    if current["client"] == "lean":
        assert srv.connections == 2  # closed after the first answer (http.client drops its buffer instead)
    return run


@case
def bytes_after_last_chunk(server):
    def answer_fn(head, conn, n):
        tag = (header_value(head, "X-Tag") or "?").encode()
        return [b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n\r\n"
                + chunked(answer(tag.decode())) + framed(answer("STRAY"))]

    run, srv = two_items(answer_fn)
    if current["client"] == "lean":
        assert srv.connections == 2
    return run


# ------------------------------------------------------------------------------------------ response head


@case
def head_closed_inside(server):
    run = scripted(server, "head_closed_inside", [b"HTTP/1.1 200 OK\r\nContent-Ty", "close"])
    assert "the connection closed inside the response head" in run.att.error_detail, run.att.error_detail
    return run


@case
def empty_lines_first(server):
    return scripted(server, "empty_lines_first", [b"\r\n\r\n", 0.02, b"\r\n" + headers(), answer()])


@case
def head_idle(server):
    run = scripted(server, "head_idle", [1.0, headers(), answer()], read_timeout=0.1)
    assert run.att.error_detail == "no response headers within 0.1s" and run.seconds < 0.8
    return run


@case
def head_trickle(server):
    head = headers() + answer()
    run = scripted(server, "head_trickle", [x for i in range(60) for x in (head[i:i + 1], 0.03)], read_timeout=1.0,
                   max_request_s=0.25)
    assert "max_request_s (0.25s)" in run.att.error_detail, run.att.error_detail
    assert 0.25 <= run.seconds < 1.0, run.seconds
    return run


def bad_head(server: ScriptServer, name: str, head: bytes, words: str) -> Run:
    run = scripted(server, name, [head, answer()])
    assert "status line or headers cannot be parsed" in run.att.error_detail, run.att.error_detail
    assert words in run.att.error_detail, run.att.error_detail
    return run


@case
def status_below_100(server):
    return bad_head(server, "status_below_100", b"HTTP/1.1 099 X\r\n" + SSE + b"\r\n", "outside 100–599")


@case
def status_above_599(server):
    return bad_head(server, "status_above_599", b"HTTP/1.1 600 X\r\n" + SSE + b"\r\n", "outside 100–599")


@case
def status_not_ascii(server):
    return bad_head(server, "status_not_ascii", "HTTP/1.1 ¹²³ OK\r\n".encode("latin-1") + SSE + b"\r\n",
                    "BadStatusLine")


@case
def not_http(server):
    return bad_head(server, "not_http", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "BadStatusLine")


@case
def other_version(server):
    return bad_head(server, "other_version", b"HTTP/2.0 200 OK\r\n" + SSE + b"\r\n", "UnknownProtocol")


@case
def line_too_long(server):
    return bad_head(server, "line_too_long", b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n",
                    "LineTooLong")


@case
def too_many_headers(server):
    many = b"".join(b"X-H%d: 1\r\n" % i for i in range(101))
    return bad_head(server, "too_many_headers", b"HTTP/1.1 200 OK\r\n" + many + b"\r\n", "got more than 100 headers")


@case
def obs_fold(server):
    return bad_head(server, "obs_fold", b"HTTP/1.1 200 OK\r\n" + SSE + b"X-A: 1\r\n  continued\r\n\r\n", "obs-fold")


@case
def header_without_colon(server):
    return bad_head(server, "header_without_colon", b"HTTP/1.1 200 OK\r\n" + SSE + b"NoColonHere\r\n\r\n",
                    "without a colon")


@case
def space_before_colon(server):
    return bad_head(server, "space_before_colon", b"HTTP/1.1 200 OK\r\n" + SSE + b"X-A : 1\r\n\r\n",
                    "whitespace in a header name")


@case
def interim_100(server):
    return scripted(server, "interim_100", [b"HTTP/1.1 100 Continue\r\n\r\n", headers(), answer()])


@case
def interim_103(server):
    return scripted(server, "interim_103", [b"HTTP/1.1 102 Processing\r\n\r\n",
                                            b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n",
                                            headers(), answer()])


@case
def switching_101(server):
    return bad_head(server, "switching_101", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
                    "no protocol switch was asked for")


@case
def content_length_twice(server):
    body = answer()
    for variant, lines in (("two_lines", b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(body), len(body))),
                           ("one_line", b"Content-Length: %d, %d\r\n" % (len(body), len(body)))):
        # kept alive (no Connection: close, the server keeps the socket): the body must end at its length
        run = scripted(server, f"content_length_twice_{variant}",
                       [b"HTTP/1.1 200 OK\r\n" + SSE + lines + b"\r\n" + body, 3.0], read_timeout=1.0)
        assert run.att.ok and run.seconds < 0.8, (variant, run.att.error_detail, run.seconds)
    return run


@case
def content_length_conflict(server):
    return bad_head(server, "content_length_conflict", b"HTTP/1.1 200 OK\r\n" + SSE +
                    b"Content-Length: 10\r\nContent-Length: 11\r\n\r\n", "Content-Length values disagree")


@case
def content_length_not_ascii(server):
    return bad_head(server, "content_length_not_ascii", b"HTTP/1.1 200 OK\r\n" + SSE +
                    "Content-Length: ¹²\r\n\r\n".encode("latin-1"), "is not a decimal number")


@case
def chunked_and_length(server):
    return scripted(server, "chunked_and_length", [b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n"
                                                   b"Content-Length: 3\r\n\r\n" + chunked(answer()), 3.0])


@case
def transfer_encoding_other(server):
    return bad_head(server, "transfer_encoding_other", b"HTTP/1.1 200 OK\r\n" + SSE +
                    b"Transfer-Encoding: gzip, chunked\r\n\r\n", "only chunked is read")


# ----------------------------------------------------------------------------------------------- status


@case
def redirect(server):
    server.scripts["/redirect_target"] = [headers(), answer()]
    before = len(server.requests)
    run = scripted(server, "redirect", [headers(302, "text/plain", f"Location: {server.url('redirect_target')}\r\n"),
                                        b"moved"])
    assert run.att.http_status == 302 and len(server.requests) == before + 1
    return run


@case
def http_401(server):
    run = scripted(server, "http_401", [headers(401, "application/json"), b'{"error": {"message": "bad key"}}'])
    assert run.att.error_detail == "HTTP 401: bad key"
    return run


@case
def http_429(server):
    run = scripted(server, "http_429", [headers(429, "application/json", "Retry-After: 7\r\n"), b"{}"])
    assert run.att.retry_after_s == 7.0
    return run


@case
def http_500(server):
    return scripted(server, "http_500", [headers(500, "application/json"), b'{"error": {"message": "boom"}}'])


@case
def http_529(server):
    return scripted(server, "http_529", [headers(529, "application/json"), b"{}"])


@case
def error_body_stalls(server):
    run = scripted(server, "error_body_stalls", [headers(500, "application/json", "Content-Length: 100\r\n"),
                                                 b'{"error": {"message": "bo', 2.0], read_timeout=0.1)
    assert run.att.error_detail.startswith("HTTP 500: {") and run.seconds < 1.0, (run.att.error_detail, run.seconds)
    return run


@case
def error_body_trickles(server):
    run = scripted(server, "error_body_trickles", [headers(500, "text/plain", "Content-Length: 100\r\n"),
                                                   *[x for _ in range(60) for x in (b"x", 0.03)]],
                   read_timeout=1.0, max_request_s=0.25)
    assert run.att.error_detail.startswith("HTTP 500: x") and 0.25 <= run.seconds < 1.0, run.seconds
    return run


# ------------------------------------------------------------------------------------------------- body


@case
def json_body(server):
    return scripted(server, "json_body", [headers(content_type="application/json"), b'{"choices": []}'])


@case
def empty_body(server):
    return scripted(server, "empty_body", [headers(extra="Content-Length: 0\r\n")])


@case
def body_closed_early(server):
    return scripted(server, "body_closed_early", [headers(extra="Content-Length: 5000\r\n"), ROLE, "close"])


@case
def chunked_closed_early(server):
    return scripted(server, "chunked_closed_early", [headers(chunked=True), b"%x\r\n%s\r\n" % (len(ROLE), ROLE),
                                                     "close"])


@case
def chunk_size_not_hex(server):
    return scripted(server, "chunk_size_not_hex", [headers(chunked=True), b"%x\r\n%s\r\n" % (len(ROLE), ROLE), 0.02,
                                                   b"zz\r\nxx\r\n"])


@case
def chunk_error_after_finish(server):
    whole = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (ROLE, sse(chunk({"content": "hi"})), STOP, DONE))
    return scripted(server, "chunk_error_after_finish", [headers(chunked=True), ROLE[:0] + whole + b"zz\r\nxx\r\n"])


@case
def chunk_line_too_long(server):
    run = scripted(server, "chunk_line_too_long", [headers(chunked=True), b"%x\r\n%s\r\n" % (len(ROLE), ROLE),
                                                   b"1" * 70_000 + b"\r\n"])
    assert "chunked framing cannot be parsed" in run.att.error_detail
    return run


@case
def gzip_stream(server):
    packed = gzip.compress(answer())
    run = scripted(server, "gzip_stream", [headers(extra="Content-Encoding: gzip\r\n"), packed[:20], 0.02,
                                           packed[20:]])
    deflated = zlib.compress(answer())
    other = scripted(server, "deflate_stream", [headers(extra="Content-Encoding: deflate\r\n"), deflated])
    assert other.att.ok and other.att.content == ["hi"], other.att.error_detail
    return run


@case
def unknown_encoding(server):
    run = scripted(server, "unknown_encoding", [headers(extra="Content-Encoding: br\r\n"), b"\x1b\x00junk"])
    assert "Content-Encoding 'br' is not decoded" in run.att.error_detail, run.att.error_detail
    return run


@case
def stall_mid_stream(server):
    run = scripted(server, "stall_mid_stream", [headers(), ROLE, sse(chunk({"content": "a"})), 1.0, STOP, DONE],
                   read_timeout=0.1)
    assert run.att.error_detail == "stream stalled for more than 0.1s"
    return run


@case
def stream_past_max_request(server):
    tokens = [x for i in range(60) for x in (sse(chunk({"content": "t"})), 0.03)]
    run = scripted(server, "stream_past_max_request", [headers(), ROLE, *tokens, STOP, DONE], read_timeout=1.0,
                   max_request_s=0.25)
    assert "max_request_s (0.25s) while still streaming" in run.att.error_detail and run.seconds < 1.0
    return run


@case
def closed_after_finish(server):
    return scripted(server, "closed_after_finish", [headers(), ROLE, sse(chunk({"content": "hi"})), STOP])


# ------------------------------------------------------------------------------------------------ the tests


def test_every_case_of_the_table_has_a_script_and_every_script_a_case():
    assert set(CASES) == set(BY_NAME)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
@pytest.mark.usefixtures("wire_client")  # once per client (tests/wire_clients.py)
@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_client_does_what_the_table_says(server, name):
    """The outcome of each case is the table's, for this client (the test runs once per client)."""
    fault = BY_NAME[name]
    run = CASES[name](server)
    att = run.att
    if fault.outcome in READ_AS_SUCCESS:
        assert att.ok, (att.error_kind, att.error_detail)
        assert "".join(att.content) == run.content
        assert att.stale_conn_retries == (1 if fault.outcome == RESENT else 0)
    else:
        assert att.error_kind == fault.outcome, (att.error_kind, att.error_detail)
        assert "STRAY" not in "".join(att.content)
    assert fault.retried == (att.error_kind in RETRYABLE)


def test_the_wire_faults_page_is_rendered_from_the_table(tmp_path):
    page = ROOT / "docs" / "reference" / "wire-faults.md"
    assert page.read_text(encoding="utf-8") == render_wire_faults_page(), \
        "out of date: python -m avv_harness.docs docs/reference/wire-faults.md"
    copy = tmp_path / "docs" / "reference" / "wire-faults.md"
    assert docs_main([str(copy)]) == 0 and copy.read_text(encoding="utf-8") == render_wire_faults_page()
    assert docs_main(["--check", str(page)]) == 0


def test_every_outcome_is_an_error_kind_or_a_success():
    from avv_core.records import ERROR_KINDS
    from avv_harness.wire import execute

    assert {f.outcome for f in BY_NAME.values()} <= set(ERROR_KINDS) | set(READ_AS_SUCCESS)
    assert execute.RETRYABLE is RETRYABLE  # one rule: the table's retried column and execute_item's retries
