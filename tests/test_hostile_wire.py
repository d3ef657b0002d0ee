"""Hostile vendors on the wire (issue 22, "the vendor's fault is the vendor's" and "no vendor can stall
another"): whatever a vendor sends is classified as its failure, never the client's, and one vendor's
stream cannot hold the gevent loop that the other vendors of the process are measured on.

Each test says what happened before. In-process (tests/fake_vendor.py) where the bytes are enough; real
sockets (tests/wire_server.py) for the response head and for vendors running at the same time.
"""

from __future__ import annotations

import json
import statistics
import time

import gevent
import pytest

import avv_harness.locust.plugin  # noqa: F401  (registers the --avv-* options on Locust's parser)
from avv_core.errors import InputError
from avv_core.items import ItemKey, WorkItem
from avv_core.samples import Sample
from avv_harness.inputs.config import Vendor
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, attempt_record
from avv_harness.wire.run_item import run_item_safely
from avv_harness.wire.sse import DEFAULT_MAX_EVENT_BYTES, MalformedStream, SSEParser
from avv_harness.wire.stream import stream_chat
from tests.fake_vendor import DONE, ScriptedAdapter
from tests.wire_clients import client_session
from tests.wire_server import ScriptProcess, ScriptServer, chunk, headers, sse

pytestmark = pytest.mark.usefixtures("wire_client")  # every test on both clients (tests/wire_clients.py)

ROLE = sse(chunk({"role": "assistant", "content": ""}))
STOP = sse(chunk({}, "stop"))
USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
SSE_HEADERS = {"Content-Type": "text/event-stream"}
MIB = 1 << 20


def record_of(body: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, status: int = 200,
              content_type: str = "text/event-stream") -> dict:
    """The record a vendor answering ``body`` gets, through the path a Locust user takes (a client failure
    inside becomes a ``client_error`` record there)."""
    adapter = ScriptedAdapter(lambda request: (status, {"Content-Type": content_type}, body))
    session = client_session()
    session.mount("http://vendor.test/", adapter)
    item = WorkItem(ItemKey("m", "v", "1", 1), Sample("1", 1, {"messages": [{"role": "user", "content": "q"}]}))
    vendor = Vendor("m", "v", "m", "http://vendor.test/v/v1", include_usage=True)
    ctx = ExecContext("r", "w", RetryPolicy(retries=0), max_event_bytes=max_event_bytes)
    [record] = run_item_safely(ItemRun(session, vendor, vendor.url, item, ctx, sleep=lambda s: None))
    return dict(record)


def answer(*middle: bytes) -> bytes:
    """A stream with ``middle`` between a first content token and the finish; content after it too."""
    return b"".join([ROLE, sse(chunk({"content": "before"})), *middle, sse(chunk({"content": " after"})), STOP,
                     sse(chunk(choices=False, usage=USAGE)), DONE])


def tool_delta(call: object) -> bytes:
    return sse(chunk({"tool_calls": [call]}))


# 1 ------------------------------------------- malformed shapes, non-finite numbers, over-deep nesting


MALFORMED = {
    # name: (data line, the words error_detail must hold)
    "choices_number": (b'{"choices": 5}', "choices is a number, not a list"),
    "choices_object": (b'{"choices": {"delta": {"content": "x"}}}', "choices is an object, not a list"),
    "choice_number": (b'{"choices": [5]}', "choices[0] is a number, not an object"),
    "delta_string": (b'{"choices": [{"delta": "hi"}]}', "choices[0].delta is a string, not an object"),
    "message_string": (b'{"choices": [{"message": "hi"}]}', "choices[0].message is a string, not an object"),
    "usage_number": (b'{"choices": [], "usage": 5}', "usage is a number, not an object"),
    "tool_calls_object": (json.dumps(chunk({"tool_calls": {"index": 0}})).encode(),
                          "choices[0].delta.tool_calls is an object, not a list"),
    "tool_call_string": (tool_delta("call")[6:-2], "choices[0].delta.tool_calls[0] is a string, not an object"),
    "function_string": (tool_delta({"index": 0, "function": "get_weather"})[6:-2],
                        "tool_calls[0].function is a string, not an object"),
    "index_string": (tool_delta({"index": "0", "function": {"name": "f"}})[6:-2],
                     "tool_calls[0].index is a string, not an integer"),
    "index_float": (tool_delta({"index": 1.5, "function": {"name": "f"}})[6:-2],
                    "tool_calls[0].index is a number, not an integer"),
    "index_bool": (tool_delta({"index": True, "function": {"name": "f"}})[6:-2],
                   "tool_calls[0].index is a boolean, not an integer"),
    "name_number": (tool_delta({"index": 0, "function": {"name": 7}})[6:-2],
                    "tool_calls[0].function.name is a number, not a string"),
    "usage_infinity": (b'{"choices": [], "usage": {"prompt_tokens": Infinity, "completion_tokens": 2}}',
                       "non-finite number Infinity"),
    "usage_nan": (b'{"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": NaN}}',
                  "non-finite number NaN"),
    "usage_minus_infinity": (b'{"choices": [], "usage": {"total_tokens": -Infinity}}', "non-finite number -Infinity"),
    "deep_array": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "deep_in_choices": (b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_vendor_data_is_bad_sse_naming_the_field_not_a_client_error(name):
    """Before: `"choices": 5`, a string delta / message / function and the deep arrays raised inside the
    client (TypeError, AttributeError, RecursionError) → `client_error`, "not the vendor's fault", the
    answer discarded. The other shapes passed as a success with the field ignored or misread: a
    non-object choice, usage or tool call and a `tool_calls` object dropped, a non-integer index read as
    the list position, a number kept as the tool's name, `Infinity` / `NaN` read as numbers."""
    data, words = MALFORMED[name]
    rec = record_of(answer(b"data: " + data + b"\n\n"))
    assert rec["status"] == "failed" and rec["error_kind"] == "bad_sse", rec["error_detail"]
    assert words in rec["error_detail"]
    # the stream stops there: nothing after the bad event is read into the answer; what came before stays
    assert rec["content"] == "before" and rec["ttft_ms"] is not None and rec["finish_reason"] is None


def test_shapes_that_are_valid_but_unusual_still_read_as_before():
    """Null or missing fields, an empty usage and a tool call without an index are read as absent (no
    new failures): the rule above is about the wrong JSON type, not about missing data."""
    body = answer(b"".join([
        sse(b'{"choices": null}'), sse(b'{"choices": [null]}'), sse(b'{"choices": [{"delta": null}]}'),
        sse(b'{"choices": [{"index": 0}]}'), sse(b'{"choices": [], "usage": null}'), sse(b'{"error": null}'),
        sse(b'{"choices": [{"delta": {"tool_calls": null, "content": null}}]}'),
        tool_delta(None), tool_delta({"id": "c1", "function": None}),
        tool_delta({"function": {"name": "lookup", "arguments": {"k": 1}}}),
    ]))
    rec = record_of(body)
    assert rec["status"] == "success" and rec["content"] == "before after", rec["error_detail"]
    assert json.loads(rec["tool_calls"]) == [{"id": "c1", "name": "lookup", "arguments": '{"k": 1}'}]
    assert rec["total_tokens"] == 7


def test_an_error_body_nested_too_deeply_is_still_the_vendors_http_error():
    """Before: a 500 whose JSON body is nested 2,048 deep raised RecursionError while the client read its
    message → `client_error`. Now the body's text is the message."""
    rec = record_of(b"[" * 2048, status=500, content_type="application/json")
    assert rec["error_kind"] == "http_5xx" and rec["error_detail"].startswith("HTTP 500: [[[")


# 2 --------------------------------------------------------------------------- `event: error` frames


@pytest.mark.parametrize("frame, message", [
    (b'event: error\ndata: {"error": {"message": "upstream overloaded, output incomplete"}}\n\n',
     "upstream overloaded, output incomplete"),
    (b'event: error\ndata: {"message": "upstream overloaded, output incomplete"}\n\n',
     "upstream overloaded, output incomplete"),
    (b"event: error\ndata: upstream overloaded, output incomplete\n\n", "upstream overloaded, output incomplete"),
    (b"event: error\r\ndata: upstream overloaded,\r\ndata: output incomplete\r\n\r\n",
     "upstream overloaded, output incomplete"),
    (b"event: error\n\n", "(no data)"),
], ids=["json-error", "json-message", "text", "multiline-crlf", "no-data"])
def test_an_error_event_is_a_stream_error_with_its_message(frame, message):
    """Before: content, an `event: error` frame, then a finish_reason → a success with no anomaly when the
    frame's data was `{"message": …}` or empty (the event type was never looked at); plain text was
    `bad_sse` "unparseable data line"; only an `{"error": …}` object was a `stream_error`. Now every error
    event is a `stream_error` with its message, the TTFT and content received before it kept, as for an
    error object inside a data line."""
    rec = record_of(answer(frame))
    assert rec["status"] == "failed" and rec["error_kind"] == "stream_error"
    assert rec["error_detail"] == f"error event mid-stream: {message}"
    assert rec["content"] == "before" and rec["ttft_kind"] == "content" and rec["ttft_ms"] is not None


def test_an_error_event_after_the_finish_is_still_not_a_clean_success_but_after_done_is_ignored():
    """A finish_reason does not make the answer whole if an error event follows it; after `[DONE]`
    nothing is part of the answer (as for any other event)."""
    error = b"event: error\ndata: upstream overloaded, output incomplete\n\n"
    after_finish = b"".join([ROLE, sse(chunk({"content": "x"})), STOP, error, DONE])
    assert record_of(after_finish)["error_kind"] == "stream_error"
    after_done = b"".join([ROLE, sse(chunk({"content": "x"})), STOP, sse(chunk(choices=False, usage=USAGE)), DONE,
                           error])
    rec = record_of(after_done)
    assert rec["status"] == "success" and rec["anomalies"] is None


def test_a_long_error_message_is_truncated():
    rec = record_of(answer(b"event: error\ndata: " + b"overloaded " * 10_000 + b"\n\n"))
    assert rec["error_kind"] == "stream_error" and len(rec["error_detail"]) <= 500


# 3 ------------------------------------------------- bounded work per event and per read; no stalls


def feed_in_blocks(parser: SSEParser, body: bytes, size: int) -> list:
    events = []
    for i in range(0, len(body), size):
        events += parser.feed(body[i:i + size])
    return events + parser.close()


def test_the_parser_frames_events_like_the_spec_whatever_the_read_boundaries():
    """The framing sseclient-py gave (CRLF, CR or LF line ends, comments, multi-line data, a field without a
    space or a value, the rest at the end of the body), plus an `error` event without data, whatever
    the split of the bytes into reads (a CRLF split between two reads too)."""
    body = (b": ping\r\n\r\ndata: a\r\ndata:b\r\n\r\nevent: done\rdata: {\"x\": 1}\r\rid: 7\nretry: 10\n"
            b"data\n\nevent: ping\n\nevent: error\n\ndata: tail")
    want = [(b"", b"a\nb"), (b"done", b'{"x": 1}'), (b"", b""), (b"error", None), (b"", b"tail")]
    for size in range(1, len(body) + 1):
        assert feed_in_blocks(SSEParser(), body, size) == want, size


EVENT_SHAPES = {  # an event of about n bytes, of each kind
    "long-line": lambda n: b"data: " + b"x" * (n - 8) + b"\n\n",
    "many-data-lines": lambda n: b"data: x\n" * (n // 8) + b"\n",
    "comments": lambda n: b": ping\n" * (n // 7) + b"\n",  # never ended by a blank line
}


@pytest.mark.parametrize("shape", list(EVENT_SHAPES))
def test_an_event_over_the_limit_is_refused_as_soon_as_it_passes_it(shape):
    """Before (sseclient-py): no limit, and the cost grew with the square of the lines: a 1 MiB event of
    short `data:` lines took 5 s of CPU, 4 MiB 32 s, the process's event loop blocked all along. Now the
    parser stops at the limit, having done linear work (here well under a second, on a busy machine);
    an event just under the limit passes."""
    make = EVENT_SHAPES[shape]
    started = time.process_time()
    with pytest.raises(MalformedStream, match=f"SSE event larger than {MIB} bytes"):
        feed_in_blocks(SSEParser(max_event_bytes=MIB), make(2 * MIB), 65536)
    assert time.process_time() - started < 1.0
    feed_in_blocks(SSEParser(max_event_bytes=MIB), make(MIB - 64), 65536)


def test_the_event_limit_is_an_option_carried_to_workers_and_used_by_the_client():
    """`--avv-max-event-bytes` (default 4 MiB) is range-checked, travels to workers in the execution
    context like `max_request_s`, and is what the client enforces."""
    assert RunOptions.from_parsed(preparse_options([])).max_event_bytes == DEFAULT_MAX_EVENT_BYTES == 4 * MIB
    assert RunOptions.from_parsed(preparse_options(["--avv-max-event-bytes", "65536"])).max_event_bytes == 65536
    with pytest.raises(InputError, match="--avv-max-event-bytes: must be ≥ 1024"):
        RunOptions.from_parsed(preparse_options(["--avv-max-event-bytes", "10"]))
    ctx = ExecContext("r", "w", RetryPolicy(), max_event_bytes=65536)
    assert ExecContext.from_message(ctx.to_message(), "w2").max_event_bytes == 65536
    event = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments":
                                                                          json.dumps({"blob": "x" * 100_000})}}]}))
    body = b"".join([ROLE, event, sse(chunk({}, "tool_calls")), DONE])
    rec = record_of(body, max_event_bytes=65536)
    assert rec["error_kind"] == "bad_sse" and "SSE event larger than 65536 bytes" in rec["error_detail"]
    assert record_of(body)["status"] == "success"  # the default takes it


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


def attempt(server: ScriptServer | ScriptProcess, name: str, max_request_s: float = 5.0,
            max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> tuple[dict, float]:
    """(record fields, seconds the attempt took) of one request to the scripted vendor ``name``."""
    with client_session() as session:
        started = time.monotonic()
        att = stream_chat(session, server.url(name) + "/chat/completions", b"{}", {}, 2.0, 2.0, max_request_s,
                          max_event_bytes)
        return attempt_record(att, include_usage=True), time.monotonic() - started


GOOD_TTFT_S, GOOD_TPS, GOOD_TOKENS = 0.05, 100.0, 30


def well_behaved_script() -> list:
    """TTFT 50 ms, then 30 tokens at 100 tokens/s (one event each), usage, [DONE]; paced from the request's
    arrival, so one late send does not shift the others."""
    steps: list = [headers(), ROLE]
    for i in range(GOOD_TOKENS):
        steps += [("at", GOOD_TTFT_S + i / GOOD_TPS), sse(chunk({"content": f" t{i}"}))]
    usage = {"prompt_tokens": 5, "completion_tokens": GOOD_TOKENS, "total_tokens": GOOD_TOKENS + 5}
    return [*steps, STOP, sse(chunk(choices=False, usage=usage)), DONE]


@pytest.fixture
def vendors():
    """The well-behaved vendor and three hostile ones, served from a process of their own (as vendors are):
    their pace and their bytes' readiness do not depend on the client's event loop, the thing measured."""
    blob = b"x" * MIB
    ping = (b": " + b"p" * 1000 + b"\n\n") * 1000
    proc = ScriptProcess({
        "/good": well_behaved_script(),
        "/big": [headers(), ROLE, b'data: {"choices": [{"delta": {"content": "', *[blob] * 20, b'"}}]}\n\n', STOP,
                 DONE],  # one 20 MB event
        "/endless": [headers(), ROLE, *[blob] * 5000],  # never a newline
        "/flood": [headers(), ROLE, *[ping] * 5000],  # `: ping` comments as fast as the socket takes them
    })
    yield proc
    proc.stop()


@pytest.mark.integration
@pytest.mark.timing  # milliseconds of measured time: run alone (tests/shards.py)
def test_a_hostile_vendor_cannot_stall_a_well_behaved_one_in_the_same_process(vendors):
    """Three hostile vendors stream at the same time as a well-behaved one, all read by this process's
    gevent loop over real sockets: one sends a single 20 MB event, one a body that never has a newline,
    one floods `: ping` comments (bytes always ready) until its `max_request_s`.

    Before, the loop was held by whichever hostile stream it was reading (sseclient-py re-copied its buffer
    on every read, and nothing yielded while bytes were ready). With the 20 MB event alone, the
    well-behaved vendor's TTFT was 3,342 ms (the issue: latency 3,530 ms instead of ~50 ms) and the event
    was accepted as a success after 3.3 s; with the endless line it failed (`timeout`: the client did not
    read it for 2 s); with the flood its TTFT was 1,502 ms; with all three 1,505 and 3,553 ms, and the
    20 MB event ran into its 5 s time cap. Now the first two are `bad_sse` within milliseconds, the flood is
    `timeout` at its cap, and the well-behaved vendor's TTFT and TPS are those it has alone (53–57 ms and
    100 tokens/s here).
    """
    alone, _ = attempt(vendors, "good")  # warm up (imports, the first connection)
    assert alone["status"] == "success"
    hostile = {name: gevent.spawn(attempt, vendors, name) for name in ("big", "endless")}
    flood = gevent.spawn(attempt, vendors, "flood", 1.5)
    good = [attempt(vendors, "good")[0] for _ in range(3)]  # ~0.35 s each, all within the flood's 1.5 s
    flood_rec, flood_s = flood.get(timeout=10)

    assert all(r["status"] == "success" and r["completion_tokens"] == GOOD_TOKENS for r in good), good
    ttft_ms = statistics.median(r["ttft_ms"] for r in good)
    tps = statistics.median(r["tps"] for r in good)
    # configured 50 ms and 100 tokens/s; the TTFT also holds a new connection to the vendor (1–15 ms on a
    # busy, shared 2-core machine)
    assert GOOD_TTFT_S * 1000 <= ttft_ms <= GOOD_TTFT_S * 1000 + 30, [r["ttft_ms"] for r in good]
    assert 0.9 * GOOD_TPS <= tps <= 1.1 * GOOD_TPS, [r["tps"] for r in good]
    for name, job in hostile.items():
        rec, seconds = job.get(timeout=10)
        assert rec["error_kind"] == "bad_sse", (name, rec["error_detail"])
        assert f"SSE event larger than {DEFAULT_MAX_EVENT_BYTES} bytes" in rec["error_detail"]
        assert seconds < 1.0, (name, seconds)
    assert flood_rec["error_kind"] == "timeout" and "max_request_s (1.5s)" in flood_rec["error_detail"]
    assert 1.5 <= flood_s < 2.5, flood_s


@pytest.mark.integration
@pytest.mark.timing  # milliseconds of measured time: run alone (tests/shards.py)
def test_a_busy_event_loop_delays_the_reading_not_the_lean_clients_time():
    """The vendor (a process of its own) sends its first token 100 ms after the request and the next 50 ms later;
    meanwhile this process's event loop is held for 250 ms from 20 ms on (hundreds of streams in one process do
    that). The lean client times events by the kernel's arrival stamps, and a thread of its own reads the first
    bytes of each answer as they arrive (unread, the two tokens would wait in one buffer stamped with the later
    one): its TTFT stays at the vendor's 100 ms and the end at 150 ms. The requests client times events when it
    reads them (urllib3 keeps no stamps): ~270 ms. Before, both measured the reading (bench/measure.py at 1,000
    streams: TTFT error p50 34 ms, p99 143 ms; now 0 and 0)."""
    from tests import wire_clients

    steps = [headers(), ROLE, ("at", 0.1), sse(chunk({"content": "first"})), ("at", 0.15),
             sse(chunk({"content": " second"})), STOP, DONE]
    proc = ScriptProcess({"/late": steps})
    try:
        attempt(proc, "late")  # warm up: imports, the first connection

        def hold_the_loop() -> None:
            gevent.sleep(0.02)
            end = time.monotonic() + 0.25
            while time.monotonic() < end:  # busy, as a burst of work on the loop is: nothing else runs
                pass

        holder = gevent.spawn(hold_the_loop)
        rec, _ = attempt(proc, "late")
        holder.join()
    finally:
        proc.stop()
    assert rec["status"] == "success", rec
    if wire_clients.current["client"] == "lean":
        # The thread reads within the interpreter's switch interval (5 ms) when it gets a core: on a loaded CI
        # machine that was 10 ms once. Well below the next token's 150 ms and the read's ~270 ms either way.
        assert 99.0 <= rec["ttft_ms"] <= 130.0, rec["ttft_ms"]
        assert 149.0 <= rec["latency_ms"] <= 175.0, rec["latency_ms"]
    else:
        assert rec["ttft_ms"] >= 260.0, rec["ttft_ms"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_max_request_s_holds_inside_one_huge_event(server):
    """The total cap is checked on every read, also while one event (here a single line, the limit raised
    to 1 GiB) keeps growing: `timeout` at the cap, not when the event ends."""
    server.scripts["/growing"] = [headers(), ROLE, b"data: ", *[b"x" * 65536, 0.002] * 5000]
    rec, seconds = attempt(server, "growing", max_request_s=0.5, max_event_bytes=1 << 30)
    assert rec["error_kind"] == "timeout" and "max_request_s (0.5s)" in rec["error_detail"]
    assert 0.5 <= seconds < 1.5


# 4 ----------------------------------------------------------------- a response head that cannot be parsed


@pytest.mark.parametrize("name, head, words", [
    ("megabyte_header", b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * MIB + b"\r\n\r\n", "LineTooLong"),
    ("long_status_line", b"HTTP/1.1 200 " + b"O" * 70_000 + b"\r\n\r\n", "LineTooLong"),
    ("too_many_headers", b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: 1\r\n" % i for i in range(101)) + b"\r\n",
     "got more than 100 headers"),
    ("not_http", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "BadStatusLine"),
])
def test_a_response_head_that_cannot_be_parsed_is_bad_sse_not_connect(server, name, head, words):
    """Before: a 1 MB response header (a line over http.client's 65,536 bytes, more than 100 headers, a
    status line that is not HTTP) was classified `connect` ("cannot connect", retried as a network
    failure). The vendor answered; what it sent cannot be read: `bad_sse`, not retried."""
    server.scripts[f"/{name}"] = [head, ROLE, STOP, DONE]
    rec, _ = attempt(server, name)
    assert rec["error_kind"] == "bad_sse", rec["error_detail"]
    assert "status line or headers cannot be parsed" in rec["error_detail"] and words in rec["error_detail"]


def test_a_chunk_size_line_that_cannot_be_parsed_is_bad_sse_and_a_silent_close_stays_connect(server):
    """A chunk-size line over 65,536 bytes mid-stream was `truncated` (retried); it is the vendor's framing.
    A connection closed before any response byte is still `connect`."""
    server.scripts["/chunkline"] = [headers(chunked=True), b"%x\r\n" % len(ROLE) + ROLE + b"\r\n",
                                    b"1" * 70_000 + b"\r\n"]
    rec, _ = attempt(server, "chunkline")
    assert rec["error_kind"] == "bad_sse" and "chunked framing cannot be parsed" in rec["error_detail"]
    server.scripts["/silent"] = ["close"]
    rec, _ = attempt(server, "silent")
    assert rec["error_kind"] == "connect"
