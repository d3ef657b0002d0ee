"""The lean wire client's own parts (issue 28): chunked framing and the response head read as bytes arrive, which
URLs it sends itself (a proxy from the environment stays with requests), kept-alive connections, redirects not
followed, header checks and TLS. The fault classification both clients share runs in test_wire_client.py and
test_hostile_wire.py once per client."""

from __future__ import annotations

import socket
import ssl
import threading

import gevent
import pytest
import requests

from avv_harness.run.controller import default_session
from avv_harness.wire.execute import attempt_record
from avv_harness.wire.http11 import Dechunker, Incomplete, Unparseable, read_head
from avv_harness.wire.lean import LeanAdapter, handles
from avv_harness.wire.stream import stream_chat
from avv_sim.tls import can_make_certificate, make_certificate, server_context
from tests.wire_server import ScriptServer, chunk, headers, sse

ROLE = sse(chunk({"role": "assistant", "content": ""}))
DONE = b"data: [DONE]\n\n"
ANSWER = [ROLE, sse(chunk({"content": "hi"})), sse(chunk({}, "stop")), DONE]


def chunked(*parts: bytes, extension: bytes = b"", trailer: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in parts) + b"0\r\n" + trailer + b"\r\n"


@pytest.mark.parametrize("extension, trailer", [(b"", b""), (b";name=value", b"X-Trailer: 1\r\n")])
def test_chunked_framing_decodes_the_same_whatever_the_read_boundaries(extension, trailer):
    payload = [b"data: one\n\n", b"data: " + b"x" * 300 + b"\n\n", b"data: three\n\n"]
    wire = chunked(*payload, extension=extension, trailer=trailer)
    for size in (1, 2, 3, 7, 16, len(wire)):
        dechunk, out = Dechunker(), []
        for at in range(0, len(wire), size):
            out.append(dechunk.feed(wire[at:at + size]))
        assert b"".join(out) == b"".join(payload) and dechunk.ended and not dechunk.extra, size


def test_chunked_framing_errors_are_those_of_http_client():
    with pytest.raises(Unparseable, match="LineTooLong"):
        Dechunker().feed(b"1" * 70_000)
    with pytest.raises(Incomplete, match="IncompleteRead"):
        Dechunker().feed(b"zz\r\nabc\r\n")
    dechunk = Dechunker()
    assert dechunk.feed(chunked(b"abc") + b"junk") == b"abc" and dechunk.extra  # not reused after junk


class FakeSocket:
    def __init__(self, *reads: bytes):
        self.reads = list(reads)

    def recv(self, size: int) -> bytes:
        return self.reads.pop(0) if self.reads else b""


def test_the_head_skips_100_continue_reads_bare_lf_and_joins_repeated_headers():
    sock = FakeSocket(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nContent-Type: text/event-stream\nX-A: 1\n",
                      b"X-A: 2\nTransfer-Encoding: chunked\n\nbody")
    resp = read_head(sock)  # type: ignore[arg-type]
    assert resp.status == 200 and resp.chunked and resp.rest == b"body" and resp.headers["x-a"] == "1, 2"


def test_requests_keeps_urls_a_proxy_from_the_environment_serves(monkeypatch):
    lean = LeanAdapter()
    url = "http://vendor.test/v1/chat/completions"
    assert handles(lean, url, {"proxies": {}})
    assert not handles(lean, url, {"proxies": {"http": "http://proxy.test:3128"}})
    assert not handles(lean, url, {"proxies": {}, "cert": "/client.pem"})
    assert not handles(requests.adapters.HTTPAdapter(), url, {"proxies": {}})


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


def test_a_proxy_from_the_environment_is_used_with_the_lean_client_too(server, monkeypatch):
    """The scripted server plays the proxy: it gets the absolute URL in the request line."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    server.scripts["http://vendor.test/proxied"] = [headers(), *ANSWER]
    with default_session("lean") as session:
        att = stream_chat(session, "http://vendor.test/proxied/chat/completions", b"{}", {}, 2.0, 2.0)
    assert att.ok, att.error_detail
    assert any(path.startswith("http://vendor.test/") for path, _, _ in server.requests)


def test_a_redirect_is_not_followed(server):
    server.scripts["/moved"] = [headers(302, "text/plain", f"Location: {server.url('target')}\r\n"), b"moved"]
    server.scripts["/target"] = [headers(), *ANSWER]
    before = len(server.requests)
    with default_session("lean") as session:
        att = stream_chat(session, server.url("moved") + "/chat/completions", b"{}", {}, 2.0, 2.0)
    assert att.error_kind == "http_4xx" and att.http_status == 302 and len(server.requests) == before + 1


@pytest.mark.parametrize("value", ["line\r\nInjected: 1", " leading-space"])
def test_a_header_requests_refuses_is_a_client_error(server, value):
    server.scripts["/h"] = [headers(), *ANSWER]
    with default_session("lean") as session:
        att = stream_chat(session, server.url("h") + "/chat/completions", b"{}", {"X-Bad": value}, 2.0, 2.0)
    assert att.error_kind == "client_error" and "InvalidHeader" in att.error_detail


def serve_keep_alive(listener: socket.socket, response: bytes, accepted: list[int]) -> None:
    """Answer every request of every connection with ``response`` (no Connection: close)."""
    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    part = conn.recv(65536)
                    if not part:
                        return
                    data += part
                head, _, data = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                conn.sendall(response)

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        accepted.append(1)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def test_a_chunked_stream_leaves_its_connection_for_the_next_request():
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunked(*ANSWER))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[int] = []
    threading.Thread(target=serve_keep_alive, args=(listener, response, accepted), daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
    with default_session("lean") as session:
        atts = [stream_chat(session, url, b"{}", {}, 2.0, 2.0) for _ in range(3)]
    listener.close()
    assert all(a.ok and a.content == ["hi"] and a.saw_done for a in atts), [a.error_detail for a in atts]
    assert len(accepted) == 1 and all(attempt_record(a, False)["stale_conn_retries"] == 0 for a in atts)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if not can_make_certificate():
        pytest.skip("no openssl to make a certificate")
    cert, key = make_certificate(tmp_path_factory.mktemp("tls"))
    context = server_context(cert, key)
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                + b"".join(ANSWER))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(65536)
                    tls.sendall(response)
            except (OSError, ssl.SSLError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions", cert
    listener.close()


def test_tls_is_verified_against_the_ca_bundle_from_the_environment(tls_server, monkeypatch):
    url, cert = tls_server
    with default_session("lean") as session:
        untrusted = stream_chat(session, url, b"{}", {}, 2.0, 2.0)
    assert untrusted.error_kind == "connect" and "CERTIFICATE_VERIFY_FAILED" in untrusted.error_detail
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    with default_session("lean") as session:
        trusted = stream_chat(session, url, b"{}", {}, 2.0, 2.0)
    assert trusted.ok and trusted.content == ["hi"], trusted.error_detail


def test_an_empty_kept_alive_body_ends_at_once_and_a_connect_timeout_is_not_an_idle_one():
    """Found by the simulator's fault run: `Content-Length: 0` on a kept-alive connection (nothing more will come)
    and a connect timeout equal to the idle timeout (the idle timer must not fire while connecting)."""
    from tests.test_faults_integration import blackhole

    response = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    threading.Thread(target=serve_keep_alive, args=(listener, response, []), daemon=True).start()
    with default_session("lean") as session:
        empty = stream_chat(session, f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions", b"{}", {},
                            2.0, 2.0)
    listener.close()
    assert empty.error_kind == "bad_sse" and "empty body" in empty.error_detail
    hole, fillers, port = blackhole()
    with default_session("lean") as session:
        late = stream_chat(session, f"http://127.0.0.1:{port}/v1/chat/completions", b"{}", {}, 0.3, 0.3)
    hole.close()
    for filler in fillers:
        filler.close()
    assert late.error_kind == "timeout" and "connect timeout" in late.error_detail, late.error_detail


@pytest.mark.parametrize("data", [
    b'{"choices": [{"delta": {"content": "hi"}}]}', b'{"a": 1, "a": 2}', b'{"n": 18446744073709551615}',
    b'{"n": 123456789012345678901234567890}', b'{"n": -9223372036854775809}', b'{"x": 1e400}', b'{"x": NaN}',
    b'{"x": -Infinity}', b'{"s": "\\ud800"}', b'{"s": "\xff"}', b"[" * 950 + b"]" * 950, b"[" * 5 + b"]" * 5,
    b'{"f": 0.1, "g": -0.0, "h": 1.5e-300}', b'"text"', b"null", b'{"a": 1} x', b'{"s": "\x01"}',
])
def test_the_fast_json_path_reads_exactly_what_json_reads_or_hands_over(data):
    """orjson is used only where it gives json's own result; everything else (non-finite numbers, lone
    surrogates, huge integers, deep nesting, invalid UTF-8) is read by json as before."""
    import json

    from avv_harness.wire.attempt import fast_decode

    fast = fast_decode(data)
    try:
        reference = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        assert fast is None
        return
    if fast is not None:
        assert fast == reference and repr(fast) == repr(reference)


def test_an_http_1_0_answer_keeps_its_connection_only_when_it_says_so():
    plain = read_head(FakeSocket(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"))  # type: ignore[arg-type]
    kept = read_head(FakeSocket(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"))  # type: ignore[arg-type]
    closed = read_head(FakeSocket(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"))  # type: ignore[arg-type]
    assert not plain.keep_alive and kept.keep_alive and not closed.keep_alive


def test_a_chunk_framing_error_is_raised_only_after_the_payload_before_it_was_handed_out():
    """Before: a framing error in the same read as the finish dropped every event of that read (a complete answer
    became `truncated` and was sent again). Now the payload before it comes out first; the error on the next feed."""
    dechunk = Dechunker()
    assert dechunk.feed(chunked(b"data: one\n\n")[:-5] + b"zz\r\n") == b"data: one\n\n"
    with pytest.raises(Incomplete, match="not hexadecimal"):
        dechunk.feed(b"more")


def test_the_head_is_read_by_rfc_9112s_rules():
    from avv_harness.wire.http11 import parse_head

    twice = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n")
    assert twice.length == 5 and twice.keep_alive
    both = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n")
    assert both.chunked and both.length is None and not both.keep_alive
    assert b"content-length" not in both.canonical() and b"connection: close" in both.canonical()
    assert parse_head(b"HTTP/1.1 204 No Content\r\n\r\n").length == 0
    for head, words in ((b"HTTP/1.1 099 X\r\n\r\n", "outside 100"), (b"HTTP/1.1 2OO OK\r\n\r\n", "BadStatusLine"),
                        (b"HTTP/1.1 200 OK\r\nA: 1\r\n\tfolded\r\n\r\n", "obs-fold"),
                        (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", "not a decimal"),
                        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n", "only chunked")):
        with pytest.raises(Unparseable, match=words):
            parse_head(head)


def test_a_content_coded_read_that_expands_past_its_bound_is_refused_not_held():
    import gzip

    from avv_harness.wire.http11 import UnsupportedEncoding, content_decoder

    bomb = gzip.compress(b"\n" * (8 << 20))  # 8 MiB of newlines in a few KiB
    decode = content_decoder("gzip", 1 << 20)
    assert decode is not None
    with pytest.raises(UnsupportedEncoding, match="expands past 1048576 bytes"):
        decode(bomb)
    assert content_decoder("", 1 << 20) is None
    with pytest.raises(UnsupportedEncoding, match="'br' is not decoded"):
        content_decoder("br", 1 << 20)


def test_an_idle_connection_with_a_byte_or_an_eof_waiting_is_not_quiet():
    """The check before reuse (urllib3's wait_for_read(sock, 0)): a pending byte or the server's close."""
    from avv_harness.wire.lean import Conn

    for poison in (b"\r\n", None):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        server_side, _ = listener.accept()
        conn = Conn(client, tls=False)
        assert conn.quiet()
        if poison is None:
            server_side.close()
        else:
            server_side.sendall(poison)
        gevent.sleep(0.01)
        assert not conn.quiet()
        conn.close()
        if poison is not None:
            server_side.close()
        listener.close()


def test_an_arrival_stamp_is_converted_to_the_monotonic_clock_and_never_goes_back():
    """The kernel stamps packets with the wall clock; a read's events get that stamp on the monotonic clock:
    ``now`` minus the packet's age, never after ``now``, never before the request's send or a time already
    handed out (two conversions of one stamp may differ by the microsecond between the clocks' reads)."""
    import struct
    import time

    from avv_harness.wire.lean import Conn, arrival

    def stamp(age_s: float) -> bytes:
        wall = time.time() - age_s
        return struct.pack("@qq", int(wall), round((wall - int(wall)) * 1e9))

    now = time.monotonic()
    assert abs(arrival(stamp(0.25), now) - (now - 0.25)) < 0.002
    assert arrival(stamp(-5.0), now) == now  # a wall clock stepped back: no arrival in the future
    left, right = socket.socketpair()
    try:
        conn = Conn(left)
        conn.sendall(b"x")  # the request: its send opens the span of arrival times
        sent = conn.seen
        assert conn.arrived(now + 1) == now + 1  # nothing read yet: the read's own time
        conn.stamp = stamp(0.0)
        first = conn.arrived(time.monotonic())
        assert sent <= first <= time.monotonic()
        conn.stamp = stamp(3600.0)  # older than the send: clamped to the last time handed out
        assert conn.arrived(time.monotonic()) == first
        conn.stamp = stamp(0.0)
        later = time.monotonic()
        assert first <= conn.arrived(later) <= later
    finally:
        conn.close()
        right.close()


def test_until_the_first_token_a_thread_reads_each_packet_as_it_arrives_with_its_own_stamp():
    """Two packets that arrive while the connection's greenlet does not read (here it sleeps) come out as two
    reads with their own arrival times (unread, the kernel would merge them under the later stamp); once the first
    token is timed the greenlet reads the socket itself again, and an EOF read by the thread is an EOF."""
    import time

    import gevent

    from avv_harness.wire.lean import Conn

    listener = socket.create_server(("127.0.0.1", 0))
    left = socket.create_connection(listener.getsockname())
    right, _ = listener.accept()
    listener.close()
    conn = Conn(left)
    try:
        conn.sendall(b"request")
        if not conn.stamped:
            pytest.skip("no kernel arrival stamps on this platform")
        right.send(b"first")
        time.sleep(0.03)  # a real thread: the packet is read now, while this greenlet is away
        right.send(b"second")
        gevent.sleep(0.03)
        assert conn.recv(100) == b"first"
        first = conn.arrived(time.monotonic())
        assert conn.recv(100) == b"second"
        second = conn.arrived(time.monotonic())
        assert 0.02 <= second - first <= 0.05, (first, second)  # each packet its own time, 30 ms apart
        conn.first_token_timed()
        right.send(b"third")
        assert conn.recv(100) == b"third" and conn.early is None
        conn.sendall(b"next request")  # watched again
        got = b""
        while len(got) < len(b"requestnext request"):  # the server reads both requests before it closes
            got += right.recv(100)
        assert got == b"requestnext request"
        right.close()
        assert conn.recv(100) == b""
    finally:
        conn.close()
