"""A plan as named SSE events in blocks (simulator layer, pure): what Anthropic Messages (content blocks) and OpenAI
Responses (output items) streams share. :mod:`avv_sim.messages_wire` and :mod:`avv_sim.responses_wire` say what
each event holds.

Each run of the plan's chunks of one kind (reasoning, content, one tool call) is a :class:`Block`. Token event *j* of
the chat stream becomes exactly one delta event at the same instant; the structural events go out in the same write
as their neighbouring token event: a block opens with its first token event (a tool call's opening event IS its
first token event, as chat's first tool-call delta is; when ``tokens_per_chunk`` > 1 puts argument text into that
chunk, its first argument delta follows in the same write), and closes with the first token event after its last one, or
with the tail. So TTFT, the token events' times and their count are the chat stream's. The quirks' framing, stream
and tail hooks apply as on chat (:class:`avv_sim.wire.Wire`); the tail's part kinds are ``close``, ``finish``
(Messages' ``message_delta``) and ``done`` (the format's end event).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from avv_core.json_types import JSONObject
from avv_sim.plan import Plan
from avv_sim.quirks import TailPart
from avv_sim.tokens import Chunk, token_counts
from avv_sim.wire import INVALID_UTF8_MARK, Wire, compact_json


@dataclass(frozen=True)
class Block:
    """One content block (Messages) / output item (Responses): a run of chunks of one kind."""

    number: int  # its position: the content block ``index`` / the ``output_index``
    kind: str  # reasoning | content | tool
    index: int  # the tool call's index (tool blocks; 0 otherwise)
    first: int  # its first chunk
    last: int  # its last chunk


def block_layout(chunks: list[Chunk]) -> tuple[list[Block], list[int]]:
    """The blocks of a plan's chunks, numbered in order of their first chunk, and each chunk's block number."""
    numbers: dict[tuple[str, int], int] = {}
    spans: list[list[int]] = []
    kinds: list[tuple[str, int]] = []
    of_chunk = []
    for j, chunk in enumerate(chunks):
        key = (chunk.kind, chunk.index if chunk.kind == "tool" else 0)
        if key not in numbers:
            numbers[key] = len(spans)
            spans.append([j, j])
            kinds.append(key)
        n = numbers[key]
        spans[n][1] = j
        of_chunk.append(n)
    blocks = [Block(n, kind, index, first, last)
              for n, ((kind, index), (first, last)) in enumerate(zip(kinds, spans, strict=True))]
    return blocks, of_chunk


class EventWire(Wire):
    """Renders one plan as named events (``event: NAME`` then ``data: {"type": NAME, …}``) in blocks. Subclasses
    write the events of a block (:meth:`open`, :meth:`delta`, :meth:`close`), the stream's start
    (:meth:`role_event`), its end (:meth:`end_parts`), its errors and its JSON body."""

    FINISH_PART = "finish"  # the tail part that carries the stop reason and the final usage
    NUMBERED = False  # events carry a ``sequence_number`` (Responses)

    def __init__(self, plan: Plan, created: int, completion_id: str, usage: bool = True):
        super().__init__(plan, created, completion_id)
        self.usage_wanted = usage  # usage objects are written (not omit_usage)
        self.blocks, self.block_of = block_layout(plan.chunks)
        self.texts = ["".join(c.text for c in plan.chunks[b.first:b.last + 1]
                              if (c.kind, c.index if c.kind == "tool" else 0) == (b.kind, b.index))
                      for b in self.blocks]
        self.calls = {c.index: c for c in plan.tool_calls}
        self.sequence = 0

    # ------------------------------------------------------------------------------------------ framing

    def event(self, name: str, fields: JSONObject) -> bytes:
        """One named event: ``event: NAME`` and its data ``{"type": NAME, …fields}`` (framed as the quirks say)."""
        payload: JSONObject = {"type": name}
        if self.NUMBERED:
            payload["sequence_number"] = self.sequence
            self.sequence += 1
        payload.update(fields)
        return f"event: {name}{self.eol}".encode() + self.frame(compact_json(payload))

    # ------------------------------------------------------------------------------------------- stream

    def token_events(self, n_chunks: int) -> Callable[[int], bytes]:
        """Bytes of token event ``j``: the quirks' ``before_token`` bytes, the blocks closing before it, its block's
        opening (the first token of a tool call), and its delta event."""
        hooks = [q.before_token for q in self.effects if q.before_token is not None]
        closing: dict[int, list[Block]] = {}
        for block in self.blocks:
            closing.setdefault(block.last + 1, []).append(block)

        def make(j: int) -> bytes:
            chunk = self.plan.chunks[j]
            block = self.blocks[self.block_of[j]]
            parts = [hook(j, n_chunks, self) for hook in hooks]
            parts += [self.close(b) for b in closing.get(j, ())]
            if block.first == j:
                parts.append(self.open(block))
            if not (chunk.header and not chunk.text):
                parts.append(self.delta(block, chunk, j))
            return b"".join(parts)

        return make

    def tail_parts(self, error: bool, usage: bool) -> list[TailPart]:
        """An error event (``error``), or the end of the blocks still open, then :meth:`end_parts`."""
        if error:
            return [("error", self.error_event())]
        closes = b"".join(self.close(b) for b in self.blocks if b.last == len(self.plan.chunks) - 1)
        return ([("close", closes)] if closes else []) + self.end_parts()

    def tail_sent(self, kinds: list[str], error: bool, usage: bool) -> tuple[str | None, bool]:
        if self.FINISH_PART not in kinds:
            return None, False
        return self.finish_reason(), self.usage_wanted

    def call_id(self, block: Block) -> str:
        return self.calls[block.index].id

    def call_name(self, block: Block) -> str:
        return self.calls[block.index].name

    def delta_text(self, chunk: Chunk, position: int) -> str:
        """A chunk's text (the ``invalid_utf8`` quirk's mark after the first content chunk's)."""
        mark = INVALID_UTF8_MARK if position == self._utf8_chunk else ""
        return chunk.text + mark

    def reasoning_tokens(self) -> int:
        return token_counts(self.plan.chunks)["reasoning"]

    # ------------------------------------------------------------------------------- written by each format

    def open(self, block: Block) -> bytes:
        raise NotImplementedError

    def delta(self, block: Block, chunk: Chunk, position: int) -> bytes:
        raise NotImplementedError

    def close(self, block: Block) -> bytes:
        raise NotImplementedError

    def end_parts(self) -> list[TailPart]:
        raise NotImplementedError
