"""Hostile inputs, round three (issue 33), the readers family: what a Messages or Responses vendor sends is read as
what it is — two calls are never merged into one, a piece of arguments never becomes a nameless call, every
documented end of a stream has its own error kind and message, each usage part is checked, an integer too long to
convert is arguments that do not parse, and completion tokens above the request's limit are flagged.

Every test runs on both wire clients (tests/wire_clients.py) over real HTTP on loopback: the scripted vendor of
tests/wire_server.py plays the stream byte for byte. Each test says what happened before.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from avv_core.items import ItemKey, WorkItem
from avv_core.records import ANOMALIES
from avv_core.samples import Sample
from avv_harness.dialects.dialect import Dialect
from avv_harness.docs import PAGES, block
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import RETRYABLE, ExecContext, ItemRun, RetryPolicy
from avv_harness.wire.formats import FORMATS
from avv_harness.wire.run_item import run_item_safely
from tests.fake_vendor import DONE, event, messages_events, responses_events, stream_reply
from tests.locust_runs import ROOT
from tests.wire_clients import client_session
from tests.wire_server import ScriptServer, chunk, headers, sse

pytestmark = pytest.mark.usefixtures("wire_client")  # every test on both clients

QUESTION = {"messages": [{"role": "user", "content": "Weather in Paris and the time?"}]}
TWO_CALLS = [("tool", "call_a", "get_weather", ['{"city": ', '"Paris"}']),
             ("tool", "call_b", "get_time", ['{"tz": "CET"}'])]
_names = itertools.count()


@pytest.fixture(scope="module")
def server():
    srv = ScriptServer()
    yield srv
    srv.stop()


def record_of(server: ScriptServer, endpoint: str, events: list[bytes] | bytes, *, retries: int = 0,
              body: dict[str, Any] | None = None) -> dict:
    """The record a vendor on ``endpoint`` answering ``events`` (every attempt alike) gets, through the path a
    Locust user takes (a client failure inside would be a ``client_error`` row)."""
    name = f"v{next(_names)}"
    path = FORMATS[endpoint].path
    key = f"/{name}" if path == "chat/completions" else f"/{name}/{path}"  # the server strips chat's path
    server.scripts[key] = [headers(), events if isinstance(events, bytes) else b"".join(events)]
    vendor = Vendor("m", "v", "model-x", server.url(name), dialect=Dialect(endpoint=endpoint), timeout_s=5)
    ctx = ExecContext("r", "w", RetryPolicy(retries=retries, backoff_base_s=0.0))
    item = WorkItem(ItemKey("m", "v", "s1", 1), Sample("s1", 1, body or QUESTION))
    with client_session() as session:
        [record] = run_item_safely(ItemRun(session, vendor, vendor.url, item, ctx, sleep=lambda s: None))
    return dict(record)


def flags(record: dict) -> set[str]:
    return set((record["anomalies"] or "").split(";")) - {"", "buffered_stream"}


def replace_field(events: list[bytes], kind: str, change: Any) -> list[bytes]:
    """``events`` with every event of type ``kind`` passed through ``change(data) -> data``."""
    out = []
    for raw in events:
        data = json.loads(raw.split(b"data: ", 1)[1])
        out.append(event(change(data)) if data.get("type") == kind else raw)
    return out


def without(*keys: str):
    return lambda data: {k: v for k, v in data.items() if k not in keys}


def assert_bad_sse(record: dict, words: str) -> None:
    assert (record["status"], record["error_kind"]) == ("failed", "bad_sse"), record["error_detail"]
    assert words in record["error_detail"], record["error_detail"]


# F13 ------------------------------------------------------ a repeated index never merges two calls into one


def test_a_repeated_messages_block_index_is_bad_sse_not_one_merged_call(server):
    """Before: the second tool_use block reusing index 0 was read into the first call — one call named
    `get_time` with arguments `{"city": "Paris"}{"tz": "CET"}`, a success."""
    stream = messages_events(TWO_CALLS, stop_reason="tool_use")
    merged = [e.replace(b'"index": 1', b'"index": 0') for e in stream]
    record = record_of(server, "messages", merged)
    assert_bad_sse(record, "malformed event: content_block_start.index 0 repeats an earlier block's: two blocks "
                           "would be read as one")
    assert json.loads(record["tool_calls"]) == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    # a tool_use block on a text block's index is the same fault
    text_then_tool = messages_events([("text", ["Checking."]), TWO_CALLS[0]], stop_reason="tool_use")
    record = record_of(server, "messages", [e.replace(b'"index": 1', b'"index": 0') for e in text_then_tool])
    assert_bad_sse(record, "content_block_start.index 0 repeats an earlier block's")


def test_a_repeated_responses_output_index_is_bad_sse_not_one_merged_call(server):
    """Before: the second function_call item on output_index 0 merged into the first: one call `get_weather` with
    both argument strings glued, a success."""
    stream = responses_events(TWO_CALLS)
    merged = [e.replace(b'"output_index": 1', b'"output_index": 0') for e in stream]
    record = record_of(server, "responses", merged)
    assert_bad_sse(record, "malformed event: response.output_item.added.output_index 0 repeats an earlier item's: "
                           "two items would be read as one")
    # the same item id twice (on two indexes) would send the second call's arguments into the first
    twice = [e.replace(b'"fc_1"', b'"fc_0"') for e in stream]
    assert_bad_sse(record_of(server, "responses", twice),
                   "response.output_item.added.item.id 'fc_0' repeats an earlier function_call item's")


@pytest.mark.parametrize("endpoint, change, words", [
    ("messages", lambda s: replace_field(s, "content_block_start", without("index")),
     "content_block_start.index is missing"),
    ("messages", lambda s: replace_field(s, "content_block_delta", without("index")),
     "content_block_delta.index is missing (an input_json_delta must name its tool_use block)"),
    ("messages", lambda s: [e.replace(b'"index": 1, "delta": {"type": "input_json_delta"',
                                      b'"index": 0, "delta": {"type": "input_json_delta"') for e in s],
     "content_block_delta.index 0: an input_json_delta for a text block, not a tool_use block"),
    ("messages", lambda s: [e.replace(b'"index": 1, "delta": {"type": "input_json_delta"',
                                      b'"index": 7, "delta": {"type": "input_json_delta"') for e in s],
     "content_block_delta.index 7: an input_json_delta for no block opened by content_block_start"),
    ("responses", lambda s: replace_field(s, "response.output_item.added", without("output_index")),
     "response.output_item.added.output_index is missing (a function_call item must have its own)"),
    ("responses", lambda s: replace_field(s, "response.function_call_arguments.delta",
                                          lambda d: {**without("item_id")(d), "output_index": 0}),
     "response.function_call_arguments.delta.output_index 0 is a message item, not a function_call item"),
    ("responses", lambda s: [e.replace(b'"item_id": "fc_1", "output_index": 1', b'"item_id": "fc_1", "output_index": 2')
                             if b"arguments.delta" in e else e for e in s],
     "output_index 2 and response.function_call_arguments.delta.item_id 'fc_1' (output_index 1) name two different "
     "items"),
])
def test_a_missing_or_wrong_index_is_bad_sse_naming_it(server, endpoint, change, words):
    """Before: a block start without an index became "the next block", an input_json_delta without one went to
    the last tool_use block, and a delta for a text block's index or for no block at all made a nameless call;
    a Responses delta on a message item's index did the same. Now each is the vendor's `bad_sse`, with the
    reason."""
    blocks = [("text", ["Checking."]), TWO_CALLS[0]]
    stream = (messages_events(blocks, stop_reason="tool_use") if endpoint == "messages" else
              responses_events(blocks))
    assert_bad_sse(record_of(server, endpoint, change(stream)), words)


# F14 ----------------------------------------------- an argument piece that names no call is not a nameless call


def test_responses_argument_deltas_that_name_no_call_are_bad_sse(server):
    """Before: deltas without `output_index` and `item_id` became one nameless call per delta (here two extra
    calls named "", flagged only `unknown_tool`), the real call kept its `.done` arguments, a success."""
    stream = responses_events([TWO_CALLS[0]], done_arguments=False)
    nameless = replace_field(stream, "response.function_call_arguments.delta", without("output_index", "item_id"))
    record = record_of(server, "responses", nameless)
    assert_bad_sse(record, "malformed event: response.function_call_arguments.delta has neither output_index nor an "
                           "item id: which call it belongs to is unknown")
    unknown = replace_field(stream, "response.function_call_arguments.delta",
                            lambda d: {**without("output_index")(d), "item_id": "fc_404"})
    assert_bad_sse(record_of(server, "responses", unknown),
                   "response.function_call_arguments.delta.item_id 'fc_404' is no function_call item opened by "
                   "response.output_item.added")


def test_a_call_named_by_its_item_id_or_its_index_alone_is_still_read(server):
    """What the rule leaves alone: one of `output_index` / `item_id` is enough, and parallel calls whose deltas
    alternate are each kept whole."""
    delta = "response.function_call_arguments.delta"
    by_id = replace_field(responses_events(TWO_CALLS), delta, without("output_index"))
    by_index = replace_field(responses_events(TWO_CALLS), delta, without("item_id"))
    for stream in (by_id, by_index):
        record = record_of(server, "responses", stream)
        assert record["status"] == "success", record["error_detail"]
        assert [c["arguments"] for c in json.loads(record["tool_calls"])] == ['{"city": "Paris"}', '{"tz": "CET"}']
    interleaved = responses_events(TWO_CALLS)
    first = [i for i, e in enumerate(interleaved) if b'"output_index": 0' in e and b"arguments.delta" in e]
    second_added = next(i for i, e in enumerate(interleaved) if b"output_item.added" in e and b'"fc_1"' in e)
    moved = interleaved[:first[1]] + [interleaved[second_added]] + [e for i, e in enumerate(interleaved)
                                                                     if i >= first[1] and i != second_added]
    record = record_of(server, "responses", moved)
    assert record["status"] == "success" and json.loads(record["tool_calls"])[0]["arguments"] == '{"city": "Paris"}'


# F16 ----------------------------------------------------------- every documented end: its own kind and message


def _error(kind: str, message: str) -> bytes:
    return event({"type": "error", "error": {"type": kind, "message": message}})


def _final(status: str, reason: str | None = None, error: dict | None = None, name: str = "response.completed"
           ) -> list[bytes]:
    """A Responses stream of one text item ending with ``name`` whose response has ``status``."""
    stream = responses_events([("text", ["Sunny."])], end=False)
    response = {"id": "resp_1", "object": "response", "status": status, "output": [],
                "incomplete_details": {"reason": reason} if reason else None, "error": error,
                "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}}
    return [*stream, event({"type": name, "sequence_number": 99, "response": response})]


TEXT = [("text", ["Sunny", "."])]
#: endpoint → end key → (the stream, the fields of its message, or for a whole answer the finish_reason)
ENDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "messages": {
        "stop": (messages_events(TEXT), "stop"),
        "no_message_stop": (messages_events(TEXT, end=False), "stop"),
        "no_stop_reason": (messages_events(TEXT, stop_reason=None), {"seen": "no message_delta arrived"}),
        "cut": (messages_events(TEXT, stop_reason=None, end=False), {}),
        "overloaded": ([*messages_events(TEXT)[:4], _error("overloaded_error", "Overloaded")],
                       {"message": "Overloaded"}),
        "error": ([*messages_events(TEXT)[:4], _error("api_error", "Internal server error")],
                  {"message": "Internal server error"}),
        "not_messages": (stream_reply("Sunny.")[2], {"seen": "a chat-completions chunk, with `choices`"}),
    },
    "responses": {
        "completed": (responses_events(TEXT), "stop"),
        "incomplete": (responses_events(TEXT, status="incomplete", reason="max_output_tokens"), "length"),
        "failed": (_final("failed", error={"code": "invalid_prompt", "message": "no"}, name="response.failed"),
                   {"event": "response.failed", "code": "invalid_prompt", "message": "no"}),
        "failed_overloaded": (_final("failed", error={"code": "server_is_overloaded", "message": "later"},
                                     name="response.failed"),
                              {"event": "response.failed", "code": "server_is_overloaded", "message": "later"}),
        "cancelled": (_final("cancelled"), {"event": "response.completed"}),
        "not_final": (_final("queued"), {"event": "response.completed", "status": "queued"}),
        "error": ([*responses_events(TEXT, end=False),
                   event({"type": "error", "sequence_number": 9, "code": "server_error", "message": "boom"})],
                  {"message": "boom"}),
        "cut": (responses_events(TEXT, end=False), {}),
        "not_responses": (stream_reply("Sunny.")[2], {"seen": "a chat-completions chunk, with `choices`"}),
    },
}


def test_every_declared_end_has_a_case_here():
    for endpoint in ENDS:
        assert [end.key for end in FORMATS[endpoint].ends] == list(ENDS[endpoint]), endpoint


@pytest.mark.parametrize("endpoint, key", [(e, k) for e, ends in ENDS.items() for k in ends])
def test_each_documented_end_of_a_stream_is_its_own_error_kind_and_message(server, endpoint, key):
    """Before: `response.completed` with status `failed` / `cancelled` / `queued`, a chat stream on a messages
    endpoint and a Messages stream without `message_delta` were all `truncated` "[DONE] without any
    finish_reason" — and retried, so a broken answer got more tries. Now each end is what its declaration says:
    its error kind, its message, retried only when a second attempt can cure it."""
    end = {e.key: e for e in FORMATS[endpoint].ends}[key]
    stream, expected = ENDS[endpoint][key]
    record = record_of(server, endpoint, stream, retries=1)
    if end.kind is None:
        assert (record["status"], record["finish_reason"], record["attempts"]) == ("success", expected, 1), \
            record["error_detail"]
        assert flags(record) == ({"no_done"} if key == "no_message_stop" else set())
        return
    assert (record["status"], record["error_kind"]) == ("failed", end.kind), record["error_detail"]
    assert record["error_detail"] == end.detail.format(**expected)
    assert record["attempts"] == (2 if end.kind in RETRYABLE else 1)


@pytest.mark.parametrize("endpoint, stream, kind, detail", [
    ("messages", messages_events(TEXT, stop_reason=None)[:-1] + [
        event({"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": 3}}),
        event({"type": "message_stop"})],
     "bad_sse", "message_stop without a stop_reason (message_delta's stop_reason was null)"),
    ("messages", responses_events(TEXT), "bad_sse",
     "not a Messages stream (none of its 9 events is a Messages event): check the vendor's endpoint"),
    ("responses", messages_events(TEXT), "bad_sse",
     "not a Responses stream (none of its 8 events is a Responses event): check the vendor's endpoint"),
    ("responses", _final("failed", error={"code": "server_error", "message": "boom"}), "stream_error",
     "response.completed with status failed: server_error: boom"),
    ("responses", _final("failed"), "stream_error", "response.completed with status failed: no error code: no message"),
    ("responses", _final("in_progress", name="response.incomplete"), "bad_sse",
     "response.incomplete with status 'in_progress', which is not a final status"),
])
def test_the_other_shapes_of_those_ends(server, endpoint, stream, kind, detail):
    record = record_of(server, endpoint, stream, retries=1)
    assert (record["error_kind"], record["error_detail"]) == (kind, detail)
    assert record["attempts"] == 1 and record["finish_reason"] is None


def test_model_context_window_exceeded_is_a_length_cut(server):
    record = record_of(server, "messages", messages_events(TEXT, stop_reason="model_context_window_exceeded"))
    assert (record["status"], record["finish_reason"], record["stop_reason"]) == (
        "success", "length", "model_context_window_exceeded")


def test_the_stream_ends_page_is_rendered_from_the_declarations():
    page = (ROOT / "docs" / "reference" / "stream-ends.md").read_text(encoding="utf-8")
    assert block(page, "stream-ends") == PAGES["docs/reference/stream-ends.md"]["stream-ends"](), \
        "out of date: python -m avv_harness.docs docs/reference/stream-ends.md"


# F15 -------------------------------------------------------------------------- each usage part is checked


@pytest.mark.parametrize("parts, words", [
    ({"input_tokens": -5, "cache_creation_input_tokens": 10}, "usage input_tokens -5 is below 0"),
    ({"input_tokens": 5, "cache_read_input_tokens": -3, "cache_creation_input_tokens": 8},
     "usage cache_read_input_tokens -3 is below 0"),
    ({"input_tokens": 5, "cache_creation_input_tokens": 2.5}, "usage cache_creation_input_tokens 2.5 is not a whole "
                                                               "number"),
    ({"input_tokens": "5"}, "usage input_tokens 5 is str, not a number"),
])
def test_a_bad_messages_usage_part_is_not_hidden_in_a_believable_sum(server, parts, words):
    """Before: `input_tokens: -5` with `cache_creation_input_tokens: 10` summed to `prompt_tokens` 5, believed
    (a cheaper, "valid" row)."""
    record = record_of(server, "messages", messages_events(TEXT, start_usage={**parts, "output_tokens": 1}))
    assert record["status"] == "success" and flags(record) == {"usage_invalid"}
    assert (record["prompt_tokens"], record["completion_tokens"], record["total_tokens"]) == (None, None, None)
    assert record["error_detail"] == words


def test_believable_messages_usage_parts_still_sum_into_prompt_tokens(server):
    start = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 20, "output_tokens": 1}
    record = record_of(server, "messages", messages_events(TEXT, start_usage=start, output_tokens=42))
    assert (record["prompt_tokens"], record["cached_tokens"], record["completion_tokens"]) == (35, 20, 42)
    assert flags(record) == set() and record["error_detail"] is None


# F19 (readers) ----------------------------------------------- an integer too long to convert does not parse


BIG = "1" * 5000  # Python converts at most 4,300 digits (sys.get_int_max_str_digits())


@pytest.mark.parametrize("endpoint", ["chat", "messages", "responses"])
def test_arguments_with_an_integer_too_long_to_convert_are_arguments_that_do_not_parse(server, endpoint):
    """Before: a call cut by `length` whose arguments held a 5,000-digit integer raised Python's ValueError
    (integer string conversion limit) inside the anomaly check: the row became `client_error`, "not the vendor's
    fault". Now the arguments are read as not parsing, as a syntax error would be: `tool_call_truncated`."""
    arguments = '{"city": ' + BIG + '}'
    if endpoint == "chat":
        delta = {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": arguments}}]}
        stream = [sse(chunk(delta)), sse(chunk({}, "length")), DONE]
    elif endpoint == "messages":
        stream = messages_events([("tool", "c1", "get_weather", [arguments])], stop_reason="max_tokens")
    else:
        stream = responses_events([("tool", "c1", "get_weather", [arguments])], status="incomplete",
                                  reason="max_output_tokens")
    record = record_of(server, endpoint, stream)
    assert (record["status"], record["finish_reason"]) == ("success", "length"), record["error_detail"]
    assert "tool_call_truncated" in flags(record) and json.loads(record["tool_calls"])[0]["arguments"] == arguments


# completion tokens above the request's limit -------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "messages", "responses"])
def test_completion_tokens_above_the_requests_limit_are_flagged(server, endpoint):
    """Before: a vendor reporting 500 completion tokens for a request allowing 50 got no anomaly. The limit is the
    one sent (chat `max_tokens`, Messages `max_tokens`, Responses `max_output_tokens`)."""
    body = {**QUESTION, "max_tokens": 50}

    def stream(completion: int) -> list[bytes] | bytes:
        if endpoint == "chat":
            return stream_reply("Sunny.", usage={"prompt_tokens": 5, "completion_tokens": completion,
                                                 "total_tokens": 5 + completion})[2]
        if endpoint == "messages":
            return messages_events(TEXT, output_tokens=completion)
        return responses_events(TEXT, usage={"input_tokens": 5, "output_tokens": completion,
                                             "total_tokens": 5 + completion})

    over = record_of(server, endpoint, stream(500), body=body)
    assert over["status"] == "success" and flags(over) == {"completion_over_max_tokens"}
    assert over["completion_tokens"] == 500  # kept: it is what the vendor bills
    assert flags(record_of(server, endpoint, stream(50), body=body)) == set()
    assert "completion_over_max_tokens" in ANOMALIES
