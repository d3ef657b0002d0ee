"""Raw-completions mode (``endpoint: completions``): the request body for ``/v1/completions`` and the
reading of its answer.

Layer: wire client. The request is the chat body the vendor would have got (sample, transforms, overrides)
with ``messages`` and ``tools`` replaced by ``prompt`` = the chat template's rendering of them; every other
field (``temperature``, ``max_tokens``, ``tool_choice`` …) is passed on, as K2-Vendor-Verifier does. The
stream's ``choices[0].text`` is collected as it arrives (TTFT = the first non-empty text); at the end it is
split into reasoning (a leading ``<think>`` block), content and the calls of the vendor's ``tool_parser``
format (:mod:`avv_core.tool_formats`), and a ``stop`` with parsed calls becomes ``tool_calls`` (the
``stop_reason`` column keeps the vendor's ``stop``). The same record columns and metrics apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from avv_core.api_formats import COMPLETIONS
from avv_core.json_types import JSONObject
from avv_core.reasoning import THINK_FIELD
from avv_core.tool_formats import parse_completion
from avv_harness.wire.attempt import Attempt, EventReader, ToolCallAcc
from avv_harness.wire.formats.base import DialectView, WireFormat
from avv_harness.wire.formats.chat import ChunkReader

if TYPE_CHECKING:
    from avv_harness.dialects.chat_template import ChatTemplate

PROMPT_REPLACES = ("messages", "tools")


def completion_body(chat_body: JSONObject, template: ChatTemplate) -> JSONObject:
    """``chat_body`` for ``/v1/completions``: ``prompt`` rendered from its messages and tools."""
    prompt = template.render(list(chat_body.get("messages") or []), chat_body.get("tools") or None)
    body = {k: v for k, v in chat_body.items() if k not in PROMPT_REPLACES}
    return {"prompt": prompt, **body}


def finish_completion(att: Attempt, parser: str) -> None:
    """Read reasoning, content and tool calls out of the completion text (in place)."""
    parsed = parse_completion("".join(att.content), parser)
    att.content = [parsed.content] if parsed.content else []
    if parsed.reasoning:
        att.reasoning_chars += len(parsed.reasoning)
        if THINK_FIELD not in att.reasoning_fields:
            att.reasoning_fields.append(THINK_FIELD)
    if parsed.calls:
        att.saw_tool_call_delta = True
        att.tool_calls = {i: ToolCallAcc(call["id"], call["name"], [call["arguments"]])
                          for i, call in enumerate(parsed.calls)}
        if att.finish_reason == "stop":
            att.finish_reason = "tool_calls"
    if att.t_first_token is not None and parsed.first_kind:
        att.first_token_kind = parsed.first_kind


class CompletionReader(ChunkReader):
    """The chunks as chat reads them (``choices[0].text`` is content); at the end, the text parsed."""

    def __init__(self, tool_parser: str):
        self.tool_parser = tool_parser

    def end(self, att: Attempt) -> None:
        finish_completion(att, self.tool_parser)


class CompletionsFormat(WireFormat):
    name = COMPLETIONS
    path = "completions"
    summary = ("raw completions, `POST {url}/completions` with the prompt rendered here "
               "(raw mode)")

    def body(self, chat_body: JSONObject, dialect: DialectView) -> JSONObject:
        return completion_body(chat_body, dialect.template)

    def reader(self, dialect: DialectView) -> EventReader:
        return CompletionReader(dialect.tool_parser or "hermes")


FORMAT = CompletionsFormat()
