"""A plan as an Anthropic Messages answer (simulator layer, pure): the stream's events (``message_start``, ``ping``,
``content_block_start`` / ``_delta`` / ``_stop`` of ``thinking``, ``text`` and ``tool_use`` blocks, ``message_delta``,
``message_stop``, ``error``) and the Message JSON of a non-stream request. The stop reason is
:func:`avv_core.api_outcomes.messages_stop_reason` of the plan's finish, the usage :func:`~avv_core.api_outcomes.
messages_usage` of its counts. Timing and blocks: :mod:`avv_sim.event_wire`.
"""

from __future__ import annotations

import base64
import hashlib
import json

from avv_core.api_outcomes import messages_stop_reason, messages_usage
from avv_core.json_types import JSONObject, JSONValue
from avv_sim.event_wire import Block, EventWire
from avv_sim.plan import Plan
from avv_sim.quirks import TailPart
from avv_sim.tokens import Chunk

ERROR_MESSAGE = "The server had an error while processing your request."


class MessagesWire(EventWire):
    """Renders one plan as Anthropic Messages events / a Message. ``completion_id``'s hex names the message."""

    FINISH_PART = "finish"  # message_delta carries the stop reason and the output count

    def __init__(self, plan: Plan, created: int, completion_id: str, usage: bool = True):
        super().__init__(plan, created, "msg_" + completion_id.rpartition("-")[2], usage)
        self.start_usage, self.final_usage = messages_usage(plan.usage_prompt_tokens,
                                                            plan.usage_completion_tokens)
        self.signature = base64.b64encode(hashlib.sha256(self.completion_id.encode()).digest()).decode()

    @staticmethod
    def tool_use_id(call_id: str) -> str:
        """A chat call id (``call_<hex>``) as a Messages tool_use id (``toolu_<hex>``)."""
        return "toolu_" + call_id.removeprefix("call_")

    def stop_reason(self) -> str | None:
        return messages_stop_reason(self.finish_reason())

    # ------------------------------------------------------------------------------------------- stream

    def role_event(self) -> bytes:
        message: JSONObject = {"id": self.completion_id, "type": "message", "role": "assistant",
                                   "model": self.plan.model, "content": [], "stop_reason": None,
                                   "stop_sequence": None}
        if self.usage_wanted:
            message["usage"] = self.start_usage
        return self.event("message_start", {"message": message}) + self.event("ping", {})

    def open(self, block: Block) -> bytes:
        if block.kind == "reasoning":
            content: JSONObject = {"type": "thinking", "thinking": ""}
        elif block.kind == "content":
            content = {"type": "text", "text": ""}
        else:
            content = {"type": "tool_use", "id": self.call_id(block), "name": self.call_name(block), "input": {}}
        return self.event("content_block_start", {"index": block.number, "content_block": content})

    def delta(self, block: Block, chunk: Chunk, position: int) -> bytes:
        if block.kind == "reasoning":
            delta = {"type": "thinking_delta", "thinking": chunk.text}
        elif block.kind == "content":
            delta = {"type": "text_delta", "text": self.delta_text(chunk, position)}
        else:
            delta = {"type": "input_json_delta", "partial_json": chunk.text}
        return self.event("content_block_delta", {"index": block.number, "delta": delta})

    def close(self, block: Block) -> bytes:
        signature = b""
        if block.kind == "reasoning":
            signature = self.event("content_block_delta", {"index": block.number, "delta": {
                "type": "signature_delta", "signature": self.signature}})
        return signature + self.event("content_block_stop", {"index": block.number})

    def end_parts(self) -> list[TailPart]:
        fields: JSONObject = {"delta": {"stop_reason": self.stop_reason(), "stop_sequence": None}}
        if self.usage_wanted:
            fields["usage"] = self.final_usage
        return [("finish", self.event("message_delta", fields)), ("done", self.event("message_stop", {}))]

    def error_event(self) -> bytes:
        return self.event("error", {"error": {"type": "api_error", "message": ERROR_MESSAGE}})

    def overloaded_event(self) -> bytes:
        return self.event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})

    # ------------------------------------------------------------------------------------------ non-stream

    def completion_body(self) -> JSONObject:
        """The Message: its content blocks in order (a tool_use ``input`` is the arguments' JSON object, or their
        text when it is not one: broken or cut arguments), the stop reason and the usage."""
        content: list[JSONObject] = []
        for block, text in zip(self.blocks, self.texts, strict=True):
            if block.kind == "reasoning":
                content.append({"type": "thinking", "thinking": text, "signature": self.signature})
            elif block.kind == "content":
                content.append({"type": "text", "text": text})
            else:
                content.append({"type": "tool_use", "id": self.call_id(block), "name": self.call_name(block),
                                "input": _input(text)})
        return {"id": self.completion_id, "type": "message", "role": "assistant", "model": self.plan.model,
                "content": content, "stop_reason": self.stop_reason(), "stop_sequence": None,
                "usage": {"input_tokens": self.start_usage["input_tokens"],
                          "output_tokens": self.final_usage["output_tokens"]}}


def _input(arguments: str) -> JSONValue:
    """A tool_use block's ``input``: the arguments' object, else their text as it is."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments
