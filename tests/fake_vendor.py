"""An in-process vendor for tests: a requests adapter that answers from a Python function, no socket.

    session.mount("http://vendor.test/", ScriptedAdapter(handler))   # handler(request) -> (status, headers, body)

Used for parsing, tool-call assembly, error classification, retries and the Locust glue tests
(:func:`fake_session_factory`). Real sockets are left to ``tests/wire_server.py`` (stalls, closes) and
full runs to ``avv_sim``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from io import BytesIO
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict
from urllib3 import HTTPResponse

from avv_core.items import ITEM_HEADER, ItemKey
from tests.wire_server import chunk, sse

Reply = tuple[int, dict[str, str], bytes]
Handler = Callable[[requests.PreparedRequest], Reply]
DONE = b"data: [DONE]\n\n"


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
        response.raw = HTTPResponse(body=BytesIO(body), headers=headers, status=status, preload_content=False)
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
