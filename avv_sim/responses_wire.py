"""A plan as an OpenAI Responses answer (simulator layer, pure): the stream's events (``response.created``,
``response.in_progress``, ``response.output_item.added`` / ``.done`` of ``reasoning``, ``message`` and
``function_call`` items with their part, delta and ``.done`` events, ``response.completed`` /
``response.incomplete``, ``response.failed``, ``error``), each with its ``sequence_number``, and the Response JSON of
a non-stream request. The status is :func:`avv_core.api_outcomes.responses_status` of the plan's finish, the usage
:func:`~avv_core.api_outcomes.responses_usage` of its counts. Timing and blocks: :mod:`avv_sim.event_wire`.
"""

from __future__ import annotations

from avv_core.api_outcomes import responses_status, responses_usage
from avv_core.json_types import JSONObject
from avv_sim.event_wire import Block, EventWire
from avv_sim.plan import Plan
from avv_sim.quirks import TailPart
from avv_sim.tokens import Chunk

ERROR_MESSAGE = "The server had an error while processing your request."
ITEM_PREFIX = {"reasoning": "rs", "content": "msg", "tool": "fc"}


class ResponsesWire(EventWire):
    """Renders one plan as Responses events / a Response. ``completion_id``'s hex names the response and its items."""

    FINISH_PART = "done"  # response.completed / .incomplete carries the status and the usage
    NUMBERED = True

    def __init__(self, plan: Plan, created: int, completion_id: str, usage: bool = True):
        hex_id = completion_id.rpartition("-")[2]
        super().__init__(plan, created, "resp_" + hex_id, usage)
        self.item_ids = [f"{ITEM_PREFIX[b.kind]}_{hex_id}{b.number}" for b in self.blocks]

    def response(self, status: str, output: list[JSONObject], **extra: object) -> JSONObject:
        """The response object of the stream's events and of the JSON body."""
        reason = responses_status(self.finish_reason())[1] if status == "incomplete" else None
        return {"id": self.completion_id, "object": "response", "created_at": self.created, "status": status,
                "error": None, "incomplete_details": {"reason": reason} if reason else None,
                "model": self.plan.model, "output": output, "usage": None, **extra}

    def item(self, block: Block, text: str | None) -> JSONObject:
        """A block's output item: as added (``text`` None) or done."""
        item_id = self.item_ids[block.number]
        if block.kind == "reasoning":
            summary = [] if text is None else [{"type": "summary_text", "text": text}]
            return {"id": item_id, "type": "reasoning", "summary": summary}
        status = "in_progress" if text is None else "completed"
        if block.kind == "content":
            content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
            return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}
        return {"id": item_id, "type": "function_call", "status": status, "arguments": text or "",
                "call_id": self.call_id(block), "name": self.call_name(block)}

    def usage_object(self) -> JSONObject:
        return responses_usage(self.plan.usage_prompt_tokens, self.plan.usage_completion_tokens,
                               self.reasoning_tokens())

    def final(self) -> JSONObject:
        """The finished response: status, output items, usage (None with ``omit_usage``)."""
        status = responses_status(self.finish_reason())[0]
        output = [self.item(b, text) for b, text in zip(self.blocks, self.texts, strict=True)]
        return self.response(status, output, usage=self.usage_object() if self.usage_wanted else None)

    # ------------------------------------------------------------------------------------------- stream

    def role_event(self) -> bytes:
        started = self.response("in_progress", [])
        return self.event("response.created", {"response": started}) + self.event("response.in_progress",
                                                                                   {"response": started})

    def where(self, block: Block) -> JSONObject:
        return {"item_id": self.item_ids[block.number], "output_index": block.number}

    def open(self, block: Block) -> bytes:
        added = self.event("response.output_item.added", {"output_index": block.number,
                                                          "item": self.item(block, None)})
        if block.kind == "reasoning":
            return added + self.event("response.reasoning_summary_part.added", {
                **self.where(block), "summary_index": 0, "part": {"type": "summary_text", "text": ""}})
        if block.kind == "content":
            return added + self.event("response.content_part.added", {
                **self.where(block), "content_index": 0, "part": {"type": "output_text", "text": "",
                                                                  "annotations": []}})
        return added

    def delta(self, block: Block, chunk: Chunk, position: int) -> bytes:
        if block.kind == "reasoning":
            return self.event("response.reasoning_summary_text.delta", {**self.where(block), "summary_index": 0,
                                                                        "delta": chunk.text})
        if block.kind == "content":
            return self.event("response.output_text.delta", {**self.where(block), "content_index": 0,
                                                             "delta": self.delta_text(chunk, position),
                                                             "logprobs": []})
        return self.event("response.function_call_arguments.delta", {**self.where(block), "delta": chunk.text})

    def close(self, block: Block) -> bytes:
        text = self.texts[block.number]
        if block.kind == "reasoning":
            events = self.event("response.reasoning_summary_text.done", {**self.where(block), "summary_index": 0,
                                                                         "text": text})
            events += self.event("response.reasoning_summary_part.done", {
                **self.where(block), "summary_index": 0, "part": {"type": "summary_text", "text": text}})
        elif block.kind == "content":
            events = self.event("response.output_text.done", {**self.where(block), "content_index": 0,
                                                              "text": text, "logprobs": []})
            events += self.event("response.content_part.done", {
                **self.where(block), "content_index": 0, "part": {"type": "output_text", "text": text,
                                                                  "annotations": []}})
        else:
            events = self.event("response.function_call_arguments.done", {**self.where(block), "arguments": text})
        return events + self.event("response.output_item.done", {"output_index": block.number,
                                                                 "item": self.item(block, text)})

    def end_parts(self) -> list[TailPart]:
        final = self.final()
        name = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [("done", self.event(name, {"response": final}))]

    def error_event(self) -> bytes:
        return self.event("error", {"code": "server_error", "message": ERROR_MESSAGE, "param": None})

    def overloaded_event(self) -> bytes:
        failed = self.response("failed", [], error={"code": "server_is_overloaded",
                                                    "message": "The server is overloaded. Please try again later."})
        return self.event("response.failed", {"response": failed})

    # ------------------------------------------------------------------------------------------ non-stream

    def completion_body(self) -> JSONObject:
        """The Response: status, output items, usage."""
        body = self.final()
        body["usage"] = self.usage_object()  # the server drops it with omit_usage
        return body
