"""Wire-level tests of the streaming client against a scripted server: framing, timing and every fault."""

import json
import socket

import pytest

from avv_harness.wire.execute import attempt_record
from avv_harness.wire.stream import stream_chat
from tests.wire_clients import client_session
from tests.wire_server import ScriptServer, chunk, headers, sse

pytestmark = pytest.mark.usefixtures("wire_client")  # every test on both clients (tests/wire_clients.py)

ROLE = sse(chunk({"role": "assistant", "content": ""}))
DONE = b"data: [DONE]\n\n"
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


def run(server, name, script, read_timeout=2.0, include_usage=True):
    server.scripts[f"/{name}"] = script
    with client_session() as session:
        att = stream_chat(session, server.url(name) + "/chat/completions", b"{}", {}, 2.0, read_timeout)
    return att, attempt_record(att, include_usage)


def normal_stream(*middle):
    return [headers(), ROLE, *middle, sse(chunk({}, "stop")), sse(chunk(choices=False, usage=USAGE)), DONE]


def test_timing_role_chunk_does_not_count_and_tps(server):
    script = [headers(), ROLE, 0.10, sse(chunk({"content": "a"})), 0.05, sse(chunk({"content": "b"})), 0.05,
              sse(chunk({"content": "c"})), sse(chunk({}, "stop")), sse(chunk(choices=False, usage=USAGE)), DONE]
    att, rec = run(server, "timing", script)
    assert rec["status"] == "success" and rec["finish_reason"] == "stop" and rec["content"] == "abc"
    assert rec["ttft_kind"] == "content"
    assert 95 <= rec["ttft_ms"] <= 400 and rec["ttfb_ms"] < rec["ttft_ms"]
    assert 95 <= rec["decode_ms"] <= 400
    assert rec["tps"] == pytest.approx(2 / (rec["decode_ms"] / 1000))
    assert (rec["prompt_tokens"], rec["completion_tokens"], rec["total_tokens"]) == (10, 3, 13)
    assert rec["anomalies"] is None and rec["chunks"] == 6


def test_reasoning_counts_as_first_token(server):
    att, rec = run(server, "reason", normal_stream(sse(chunk({"reasoning_content": "hmm"})),
                                                   sse(chunk({"reasoning": "!"})), sse(chunk({"content": "x"}))))
    assert rec["ttft_kind"] == "reasoning" and rec["reasoning_chars"] == 4 and rec["content"] == "x"


def test_tool_call_deltas_assembled_and_parallel_interleaved(server):
    def tc(index, **kw):
        return sse(chunk({"tool_calls": [{"index": index, **kw}]}))
    script = [headers(), ROLE,
              tc(0, id="call_a", type="function", function={"name": "get_weather", "arguments": ""}),
              tc(1, id="call_b", type="function", function={"name": "get_time", "arguments": ""}),
              tc(0, function={"arguments": '{"city": '}), tc(1, function={"arguments": '{"tz"'}),
              tc(0, function={"arguments": '"Paris"}'}), tc(1, function={"arguments": ': "UTC"}'}),
              sse(chunk({}, "tool_calls")), sse(chunk(choices=False, usage=USAGE)), DONE]
    att, rec = run(server, "parallel", script)
    calls = json.loads(rec["tool_calls"])
    assert calls == [{"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
                     {"id": "call_b", "name": "get_time", "arguments": '{"tz": "UTC"}'}]
    assert rec["ttft_kind"] == "tool_call" and rec["tool_call_count"] == 2 and rec["finish_reason"] == "tool_calls"


def test_llama_cpp_style_repeated_header_is_not_concatenated(server):
    def tc(args):
        return sse(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                          "function": {"name": "search", "arguments": args}}]}))
    att, rec = run(server, "llama", [headers(), ROLE, tc('{"q":'), tc(' "x"}'), sse(chunk({}, "tool_calls")), DONE])
    assert json.loads(rec["tool_calls"]) == [{"id": "call_1", "name": "search", "arguments": '{"q": "x"}'}]
    assert rec["anomalies"] == "usage_missing"


def test_crlf_comments_multiline_data_chunked(server):
    def crlf(obj):
        return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"

    def body(raw):  # chunked transfer framing
        return f"{len(raw):x}\r\n".encode() + raw + b"\r\n"
    payload = json.dumps(chunk({"content": "hello"}))
    half = len(payload) // 2
    multiline = f"data: {payload[:half]}\ndata: {payload[half:]}\n\n".encode()
    script = [headers(chunked=True), body(b": keep-alive\r\n\r\n"), body(crlf(chunk({"role": "assistant"}))),
              body(b": ping\n\n"), body(multiline), body(crlf(chunk({}, "stop"))), body(b"data: [DONE]\r\n\r\n"),
              b"0\r\n\r\n"]
    att, rec = run(server, "crlf", script, include_usage=False)
    assert rec["status"] == "success" and rec["content"] == "hel" + "lo" and rec["chunks"] == 3


def test_usage_in_last_content_chunk_and_duplicate_done(server):
    script = [headers(), ROLE, sse(chunk({"content": "a"})), 0.02, sse(chunk({"content": "b"}, "stop", usage=USAGE)),
              DONE, DONE]  # (a pause between the tokens: streamed, not buffered)
    att, rec = run(server, "usagelast", script)
    assert rec["status"] == "success" and rec["usage_reported"] is True and rec["total_tokens"] == 13
    assert rec["anomalies"] is None


def test_missing_usage_leaves_tokens_empty(server):
    att, rec = run(server, "nousage", [headers(), ROLE, sse(chunk({"content": "a"})), sse(chunk({}, "stop")), DONE])
    assert rec["prompt_tokens"] is None and rec["total_tokens"] is None and rec["tps"] is None
    assert rec["usage_reported"] is False and rec["anomalies"] == "usage_missing"


def test_tool_calls_under_stop_is_flagged(server):
    tc = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}))
    att, rec = run(server, "understop", normal_stream(tc))
    assert rec["status"] == "success" and rec["finish_reason"] == "stop"
    assert rec["anomalies"] == "tool_calls_under_stop" and rec["tool_call_count"] == 1


@pytest.mark.parametrize(
    "name, script, kind, detail",
    [
        ("done_no_finish", [headers(), ROLE, sse(chunk({"content": "a"})), DONE], "truncated", "[DONE] without"),
        ("closed", [headers(), ROLE, sse(chunk({"content": "a"})), "close"], "truncated", "without finish_reason"),
        ("errevent", [headers(), ROLE, sse(chunk({"content": "a"})),
                      sse({"error": {"message": "overloaded", "type": "server_error"}})], "stream_error", "overloaded"),
        ("garbage", [headers(), ROLE, b"data: {not json\n\n", sse(chunk({}, "stop")), DONE], "bad_sse", "unparseable"),
        ("jsonbody", [headers(content_type="application/json"), json.dumps({"choices": []}).encode()], "bad_sse",
         "JSON body"),
        ("htmlbody", [headers(content_type="text/html"), b"<html>oops</html>"], "bad_sse", "non-SSE body"),
        ("emptybody", [headers(content_type="text/event-stream", extra="Content-Length: 0\r\n")], "bad_sse",
         "empty body"),
        ("badutf8", [headers(), ROLE, b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}\n\n',
                     sse(chunk({}, "stop")), DONE], "bad_sse", "UTF-8"),
        ("http500", [headers(500, "application/json"), b'{"error": {"message": "boom"}}'], "http_5xx", "boom"),
        ("http503", [headers(503, "text/plain"), b"unavailable"], "http_5xx", "HTTP 503"),
        ("http401", [headers(401, "application/json"), b'{"error": {"message": "bad key"}}'], "http_4xx", "bad key"),
    ],
)
def test_fault_classification(server, name, script, kind, detail):
    att, rec = run(server, name, script)
    assert rec["status"] == "failed" and rec["error_kind"] == kind, rec["error_detail"]
    assert detail in rec["error_detail"]


def test_429_retry_after_parsed_and_absent(server):
    att, rec = run(server, "r429", [headers(429, "application/json", "Retry-After: 7\r\n"), b'{"error": "slow"}'])
    assert rec["error_kind"] == "http_429" and att.retry_after_s == 7.0 and rec["http_status"] == 429
    att, rec = run(server, "r429b", [headers(429, "application/json"), b"{}"])
    assert rec["error_kind"] == "http_429" and att.retry_after_s is None


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_header_timeout_and_stall_midstream(server):
    att, rec = run(server, "slowhead", [1.0, headers(), ROLE], read_timeout=0.3)
    assert rec["error_kind"] == "timeout" and "headers" in rec["error_detail"]
    att, rec = run(server, "stall", [headers(), ROLE, sse(chunk({"content": "a"})), 1.0, sse(chunk({}, "stop"))],
                   read_timeout=0.3)
    assert rec["error_kind"] == "timeout" and "stalled" in rec["error_detail"]


def test_close_after_finish_reason_is_success_without_done(server):
    att, rec = run(server, "nodone", [headers(), ROLE, sse(chunk({"content": "a"})), sse(chunk({}, "stop"))])
    assert rec["status"] == "success" and rec["anomalies"] == "no_done;usage_missing"


def test_connection_refused_and_connect_timeout():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with client_session() as session:
        att = stream_chat(session, f"http://127.0.0.1:{port}/v1/chat/completions", b"{}", {}, 1.0, 1.0)
    assert att.error_kind == "connect" and "cannot connect" in att.error_detail


def test_megabyte_tool_argument(server):
    big = "x" * (1 << 20)
    args = json.dumps({"blob": big})
    tc0 = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f"}}]}))
    tc1 = sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}))
    att, rec = run(server, "huge", [headers(), ROLE, tc0, tc1, sse(chunk({}, "tool_calls")), DONE])
    assert rec["status"] == "success" and json.loads(json.loads(rec["tool_calls"])[0]["arguments"])["blob"] == big


def test_buffered_stream_keeps_latency_but_no_tps(server):
    tokens = [sse(chunk({"content": w})) for w in ("a", " b", " c", " d")]
    usage = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
    att, rec = run(server, "buffered", [headers(), ROLE, 0.1, b"".join(tokens), sse(chunk({}, "stop")),
                                        sse(chunk(choices=False, usage=usage)), DONE])
    assert rec["status"] == "success" and rec["anomalies"] == "buffered_stream"
    assert rec["tps"] is None and rec["ttft_ms"] >= 95 and rec["latency_ms"] >= rec["ttft_ms"]
    streamed = [headers(), ROLE, 0.1] + [x for t in tokens for x in (t, 0.01)]
    att, rec = run(server, "streamed", [*streamed, sse(chunk({}, "stop")), sse(chunk(choices=False, usage=usage)),
                                        DONE])
    assert rec["anomalies"] is None and rec["tps"] == pytest.approx(3 / (rec["decode_ms"] / 1000))


def test_a_stale_pooled_connection_is_resent_once_and_not_a_vendor_failure():
    """A keep-alive server that answers one request per connection and drops the connection when a second
    request arrives on it (its idle timeout fired as the request came in: "Remote end closed connection
    without response"), as llama.cpp's server did. urllib3 cannot see that before it writes."""
    import threading

    body = b"".join([ROLE, sse(chunk({"content": "hi"})), sse(chunk({}, "stop")), DONE])
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted = []

    def handle(conn):
        try:
            conn.recv(65536)
            conn.sendall(response)
            conn.recv(65536)  # the next request on this connection: dropped without an answer
        except OSError:
            pass
        conn.close()

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
    with client_session() as session:
        first = stream_chat(session, url, b"{}", {}, 2.0, 2.0)
        second = stream_chat(session, url, b"{}", {}, 2.0, 2.0)
    listener.close()
    assert first.ok and first.stale_conn_retries == 0
    assert second.ok and second.stale_conn_retries == 1 and len(accepted) == 2
    assert attempt_record(second, False)["stale_conn_retries"] == 1


# ------------------------------------------------------------------ config headers and URL credentials (issue 33)


def sent_headers(server, name):
    """(request line, [(header name lower-cased, value)]) of the last request to ``/name``."""
    path, head, _ = [r for r in server.requests if r[0].startswith(f"/{name}/")][-1]
    lines = head.decode("latin-1").split("\r\n")
    return lines[0], [(n.strip().lower(), v.strip()) for n, _, v in (line.partition(":") for line in lines[1:])]


def vendor_headers(server, name, url_userinfo="", **vendor_kwargs):
    """Send one item's request as execute_item builds it (build_headers) for a vendor at ``/name``."""
    from avv_harness.inputs.config import Vendor
    from avv_harness.wire.execute import build_headers

    server.scripts[f"/{name}/v1"] = [headers(), ROLE, sse(chunk({"content": "hi"})), sse(chunk({}, "stop")), DONE]
    base = f"http://{url_userinfo}127.0.0.1:{server.port}/{name}/v1"
    vendor = Vendor("m", name, "m", base, **vendor_kwargs)
    with client_session() as session:
        att = stream_chat(session, base + "/chat/completions", b"{}", build_headers(vendor, "tag", 1), 2.0, 2.0)
    assert att.ok, att.error_detail
    return sent_headers(server, name)


def test_config_headers_replace_the_clients_own_case_insensitively_and_each_is_sent_once(server):
    """Before (lean): `headers: {authorization: …, host: …, accept-encoding: …}` went out beside the client's own
    `Authorization`, `Host`, `Accept-Encoding` (two of each; the vendor answered 400). Now one of each, the
    config's (docs/reference/wire-faults.md, "Request headers")."""
    line, sent = vendor_headers(server, "cfg", api_key="sk-key", headers={
        "authorization": "Token from-config", "host": "api.vendor.test", "accept-encoding": "gzip",
        "user-agent": "mine/1.0", "X-Extra": "1"})
    names = [n for n, _ in sent]
    assert len(names) == len(set(names)), sent
    got = dict(sent)
    assert got["authorization"] == "Token from-config" and got["host"] == "api.vendor.test"
    assert got["accept-encoding"] == "gzip" and got["user-agent"] == "mine/1.0" and got["x-extra"] == "1"
    assert got["content-length"] == "2" and line.startswith("POST /cfg/v1/chat/completions ")


def test_url_credentials_are_sent_as_basic_auth_by_both_clients_and_never_in_the_request_line(server):
    """Before: `http://user:pass@host/v1` — the lean client dropped the credentials (401); requests sent them as
    Basic auth, replacing the key's header. Now both send `Authorization: Basic …` (percent-decoded), the URL's
    credentials win over the key's `Authorization` and lose to a configured one."""
    import base64

    basic = "Basic " + base64.b64encode(b"user:p@ss").decode()
    line, sent = vendor_headers(server, "basic", "user:p%40ss@")
    assert dict(sent)["authorization"] == basic and "p%40ss" not in line and "user" not in dict(sent)["host"]
    _, sent = vendor_headers(server, "basickey", "user:p%40ss@", api_key="sk-key")
    assert [v for n, v in sent if n == "authorization"] == [basic]
    _, sent = vendor_headers(server, "basiccfg", "user:p%40ss@", headers={"Authorization": "Token t"})
    assert [v for n, v in sent if n == "authorization"] == ["Token t"]
    # a direct call (no config): the URL's credentials, unless the headers carry an Authorization
    server.scripts["/direct"] = [headers(), ROLE, sse(chunk({}, "stop")), DONE]
    with client_session() as session:
        att = stream_chat(session, f"http://user:p%40ss@127.0.0.1:{server.port}/direct/chat/completions", b"{}", {},
                          2.0, 2.0)
    assert att.ok and dict(sent_headers(server, "direct")[1])["authorization"] == basic


@pytest.mark.parametrize("name", ["Content-Length", "transfer-encoding", "Connection"])
def test_a_request_carrying_a_framing_header_is_the_clients_error(server, name):
    server.scripts["/framing"] = [headers(), ROLE, sse(chunk({}, "stop")), DONE]
    with client_session() as session:
        att = stream_chat(session, server.url("framing") + "/chat/completions", b"{}", {name: "5"}, 2.0, 2.0)
    assert att.error_kind == "client_error" and "written by the client itself" in att.error_detail


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_timeout_names_the_limit_that_ran_out(server):
    """Before: with max_request_s below timeout_s, a silent vendor got "no response headers within <timeout_s>s"
    from both clients although max_request_s had run out (the idle bound was min(timeout_s, max_request_s)); a
    non-SSE body was bounded by neither in the requests client. Now both stop at max_request_s and say so."""
    server.scripts["/silent"] = [3.0]
    with client_session() as session:
        att = stream_chat(session, server.url("silent") + "/chat/completions", b"{}", {}, 2.0, 2.0, 0.2)
    assert att.error_kind == "timeout" and att.error_detail == "no complete response head within max_request_s (0.2s)"
    assert att.t_end - att.t0 < 1.0
    server.scripts["/slowbody"] = [headers(content_type="text/html", extra="Content-Length: 50\r\n"), b"<html>", 3.0]
    with client_session() as session:
        att = stream_chat(session, server.url("slowbody") + "/chat/completions", b"{}", {}, 2.0, 2.0, 0.2)
    assert att.error_kind == "bad_sse" and "non-SSE body" in att.error_detail and att.t_end - att.t0 < 1.0
