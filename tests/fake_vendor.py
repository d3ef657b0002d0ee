"""An in-process vendor for tests: a requests adapter that answers from a Python function, no socket.

    session.mount("http://vendor.test/", ScriptedAdapter(handler))   # handler(request) -> (status, headers, body)

A body is bytes, a list of byte strings that the client reads one per read, or a :class:`Reads` of them that also
pauses between reads (to separate events in time). Canned answers: :func:`stream_reply` (chat completions),
:func:`messages_reply` (Anthropic Messages) and :func:`responses_reply` (OpenAI Responses), the last two with the
event sequences of the issue 24 contract.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from io import BytesIO
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict
from urllib3 import HTTPResponse

from avv_core.items import ITEM_HEADER, ItemKey
from tests.wire_server import chunk, sse

Reply = tuple[int, dict[str, str], "bytes | list[bytes] | Reads"]
Handler = Callable[[requests.PreparedRequest], Reply]
DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"Content-Type": "text/event-stream"}


class Reads(BytesIO):
    """A body whose ``read1`` returns one part per call (after ``pause_s`` for every part but the first): each
    part arrives in a read of its own, so the events in it are stamped apart from those of the others."""

    def __init__(self, parts: Sequence[bytes], pause_s: float = 0.0):
        super().__init__(b"".join(parts))
        self.sizes = [len(p) for p in parts]
        self.pause_s = pause_s
        self.given = 0

    def read1(self, size: int = -1) -> bytes:
        if not self.sizes:
            return super().read1(size)
        if self.given and self.pause_s:
            time.sleep(self.pause_s)
        self.given += 1
        part = self.sizes.pop(0)
        return super().read1(part if size < 0 else min(part, size))


class ScriptedAdapter(requests.adapters.BaseAdapter):
    def __init__(self, handler: Handler):
        super().__init__()
        self.handler = handler
        self.requests: list[requests.PreparedRequest] = []
        self._lock = threading.Lock()

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        with self._lock:
            self.requests.append(request)
        status, headers, body = self.handler(request)
        response = requests.Response()
        response.status_code, response.request, response.url = status, request, request.url
        response.headers = CaseInsensitiveDict(headers)
        stream = body if isinstance(body, Reads) else Reads(body) if isinstance(body, list) else BytesIO(body)
        response.raw = HTTPResponse(body=stream, headers=headers, status=status, preload_content=False)
        return response

    def close(self) -> None:
        pass


def stream_reply(content: str = "ok", *, tool_calls: list[tuple[str, dict]] | None = None,
                 usage: dict | None = None) -> Reply:
    """A well-formed chat-completions SSE answer: content words, or tool calls (finish tool_calls)."""
    events = [sse(chunk({"role": "assistant", "content": ""}))]
    if tool_calls:
        for index, (name, args) in enumerate(tool_calls):
            events.append(sse(chunk({"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function",
                                                     "function": {"name": name, "arguments": json.dumps(args)}}]})))
        finish = "tool_calls"
    else:
        words = content.split(" ")
        events += [sse(chunk({"content": word if i == 0 else " " + word})) for i, word in enumerate(words)]
        finish = "stop"
    events.append(sse(chunk({}, finish)))
    events.append(sse(chunk(choices=False, usage=usage or {"prompt_tokens": 5, "completion_tokens": 3,
                                                           "total_tokens": 8})))
    events.append(DONE)
    return 200, {"Content-Type": "text/event-stream"}, b"".join(events)


def error_reply(status: int, message: str, retry_after: str | None = None) -> Reply:
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return status, headers, json.dumps({"error": {"message": message}}).encode()


def item_of(request: requests.PreparedRequest) -> ItemKey:
    return ItemKey.parse_tag(request.headers[ITEM_HEADER])[1]


def fake_session_factory(adapter: ScriptedAdapter, prefixes: tuple[str, ...] = ("http://", "https://")
                         ) -> Callable[[], Any]:
    """Sessions whose every request (by default) goes to ``adapter``: no socket is opened."""
    def make() -> requests.Session:
        session = requests.Session()
        for prefix in prefixes:
            session.mount(prefix, adapter)
        return session

    return make


# ------------------------------------------------------------------------------ Messages and Responses streams


def event(obj: dict[str, Any]) -> bytes:
    """One SSE event whose ``event:`` line is its data's ``type`` (as Messages and Responses write them)."""
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


#: A block of a Messages answer / an output item of a Responses answer: ("text", pieces), ("thinking", pieces), or
#: ("tool", id, name, argument pieces).
Block = tuple[Any, ...]


def messages_events(blocks: Sequence[Block], *, stop_reason: str | None = "end_turn",
                    start_usage: dict[str, Any] | None = None, output_tokens: int = 3, end: bool = True
                    ) -> list[bytes]:
    """An Anthropic Messages stream: message_start, a ping, each block (start, deltas, stop), message_delta with
    the stop reason (none: no message_delta) and usage, message_stop (unless ``end`` is false)."""
    usage = start_usage or {"input_tokens": 5, "output_tokens": 1}
    out = [event({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": usage}}), event({"type": "ping"})]
    for index, block in enumerate(blocks):
        kind = block[0]
        if kind == "tool":
            _, call_id, name, pieces = block
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in block[1]]
            deltas.append({"type": "signature_delta", "signature": "c2ln"})
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in block[1]]
        out.append(event({"type": "content_block_start", "index": index, "content_block": start}))
        out += [event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        out.append(event({"type": "content_block_stop", "index": index}))
    if stop_reason is not None:
        out.append(event({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                          "usage": {"output_tokens": output_tokens}}))
    if end:
        out.append(event({"type": "message_stop"}))
    return out


def messages_reply(blocks: Sequence[Block] = (("text", ["Hello", " there"]),), **kw: Any) -> Reply:
    return 200, dict(SSE_HEADERS), b"".join(messages_events(blocks, **kw))


def responses_events(items: Sequence[Block], *, status: str | None = "completed", reason: str | None = None,
                     usage: dict[str, Any] | None = None, end: bool = True, done_arguments: bool = True
                     ) -> list[bytes]:
    """An OpenAI Responses stream: response.created / in_progress, each output item (added, its deltas and .done
    events, done), response.completed (``status`` ``incomplete``: response.incomplete; None or ``end`` false: no
    end event)."""
    seq = iter(range(10_000))

    def ev(kind: str, **fields: Any) -> bytes:
        return event({"type": kind, "sequence_number": next(seq), **fields})

    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    out = [ev("response.created", response=response), ev("response.in_progress", response=response)]
    for n, item in enumerate(items):
        kind = item[0]
        if kind == "tool":
            _, call_id, name, pieces = item
            added = {"type": "function_call", "id": f"fc_{n}", "call_id": call_id, "name": name, "arguments": "",
                     "status": "in_progress"}
            out.append(ev("response.output_item.added", output_index=n, item=added))
            out += [ev("response.function_call_arguments.delta", item_id=f"fc_{n}", output_index=n, delta=p)
                    for p in pieces]
            whole = "".join(pieces)
            if done_arguments:
                out.append(ev("response.function_call_arguments.done", item_id=f"fc_{n}", output_index=n,
                              arguments=whole))
            out.append(ev("response.output_item.done", output_index=n,
                          item={**added, "arguments": whole, "status": "completed"}))
        elif kind == "thinking":
            added = {"type": "reasoning", "id": f"rs_{n}", "summary": []}
            out.append(ev("response.output_item.added", output_index=n, item=added))
            out.append(ev("response.reasoning_summary_part.added", item_id=f"rs_{n}", output_index=n,
                          summary_index=0, part={"type": "summary_text", "text": ""}))
            out += [ev("response.reasoning_summary_text.delta", item_id=f"rs_{n}", output_index=n, summary_index=0,
                       delta=p) for p in item[1]]
            out.append(ev("response.reasoning_summary_text.done", item_id=f"rs_{n}", output_index=n,
                          summary_index=0, text="".join(item[1])))
            out.append(ev("response.output_item.done", output_index=n, item=added))
        else:
            added = {"type": "message", "id": f"msg_{n}", "status": "in_progress", "role": "assistant",
                     "content": []}
            out.append(ev("response.output_item.added", output_index=n, item=added))
            out.append(ev("response.content_part.added", item_id=f"msg_{n}", output_index=n, content_index=0,
                          part={"type": "output_text", "text": "", "annotations": []}))
            out += [ev("response.output_text.delta", item_id=f"msg_{n}", output_index=n, content_index=0, delta=p)
                    for p in item[1]]
            out.append(ev("response.output_text.done", item_id=f"msg_{n}", output_index=n, content_index=0,
                          text="".join(item[1])))
            out.append(ev("response.output_item.done", output_index=n, item={**added, "status": "completed"}))
    if end and status is not None:
        final = {**response, "status": status, "output": [],
                 "incomplete_details": {"reason": reason} if reason else None,
                 "usage": usage or {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
                                    "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0},
                                    "total_tokens": 8}}
        out.append(ev("response.incomplete" if status == "incomplete" else "response.completed", response=final))
    return out


def responses_reply(items: Sequence[Block] = (("text", ["Hello", " there"]),), **kw: Any) -> Reply:
    return 200, dict(SSE_HEADERS), b"".join(responses_events(items, **kw))
