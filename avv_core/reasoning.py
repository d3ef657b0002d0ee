"""Reasoning fields, declared once: the names vendors give a model's thinking, how each is read and how each
is written, and the ``<think>`` block raw mode reads it from.

Layer: pure core (no I/O, imports nothing else of ours). Used by the wire client (which fields a stream's
delta is read from; the names of the reasoning the Messages and Responses streams carry), the request
transforms (which fields an assistant turn of the history may carry) and the simulator (how its
``reasoning_field`` knob's field is written, in a delta and in a JSON body).

A field is read leniently whatever its name: a string as is, or a list of parts (``{"type":
"reasoning.text", "text": …}``, ``{"summary": …}`` or plain strings) joined, so a vendor that sends parts
under ``reasoning`` is read too. It is written in its own shape: a string, or (``reasoning_details``) one
``reasoning.text`` part.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from avv_core.json_types import JSONObject


def reasoning_text(value: object) -> str | None:
    """The text of a reasoning field's value: a string as is, a list of parts (``{"type": "reasoning.text",
    "text": …}``, ``{"summary": …}`` or strings) joined; None when there is none."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("summary"))
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts) if parts else None
    return None


@dataclass(frozen=True)
class ReasoningField:
    """One field a vendor may carry reasoning in."""

    name: str  # the JSON key, in a delta, a message and an assistant turn of the history
    in_responses: bool  # read from a response (delta / message) and written by the simulator; else history only
    as_parts: bool = False  # written as a list of ``reasoning.text`` parts instead of a string

    def read(self, value: object) -> str | None:
        """The reasoning text of this field's value (see :func:`reasoning_text`); None when there is none."""
        return reasoning_text(value)

    def write(self, text: str) -> str | list[JSONObject]:
        """The field's value carrying ``text`` (what the simulator sends)."""
        if self.as_parts:
            return [{"type": "reasoning.text", "text": text, "index": 0}]
        return text


#: Every reasoning field, in the order a delta is read (the first one with text counts, so a vendor that
#: sends the same text under two names is not counted twice).
REASONING_FIELDS: tuple[ReasoningField, ...] = (
    ReasoningField("reasoning_content", in_responses=True),
    ReasoningField("reasoning", in_responses=True),
    ReasoningField("reasoning_details", in_responses=True, as_parts=True),
    ReasoningField("reason", in_responses=False),
)
FIELDS_BY_NAME: dict[str, ReasoningField] = {f.name: f for f in REASONING_FIELDS}
#: The fields read from a response's delta or message (and written by the simulator), in reading order.
RESPONSE_FIELDS: tuple[ReasoningField, ...] = tuple(f for f in REASONING_FIELDS if f.in_responses)
RESPONSE_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in RESPONSE_FIELDS)
#: Every name an assistant turn of the history may carry reasoning in.
FIELD_NAMES: tuple[str, ...] = tuple(FIELDS_BY_NAME)
#: The field requests and most vendors use; the others are renamed to it by ``rename_reasoning_fields``.
CANONICAL_FIELD = "reasoning_content"

# ------------------------------------------------------------- the other wire formats: reasoning events


@dataclass(frozen=True)
class EventReasoning:
    """Reasoning a wire format carries in events of its own (not in a field of a chat delta)."""

    name: str  # the record's ``reasoning_field`` value
    endpoint: str  # the format (the vendor's ``endpoint``)
    read_from: str  # the events it is read from
    written: str  # what such an event carries (the simulator writes it)


THINKING_FIELD = "thinking"  # Anthropic Messages: a ``thinking`` block's ``thinking_delta`` events
SUMMARY_FIELD = "reasoning_summary"  # OpenAI Responses: reasoning summary (or reasoning text) delta events
#: Reasoning read from the Messages and Responses streams (:mod:`avv_harness.wire.formats`).
EVENT_FIELDS: tuple[EventReasoning, ...] = (
    EventReasoning(THINKING_FIELD, "messages", "`content_block_delta` events of a `thinking` block",
                   '`"delta": {"type": "thinking_delta", "thinking": "…"}`'),
    EventReasoning(SUMMARY_FIELD, "responses", "`response.reasoning_summary_text.delta` (and "
                   "`response.reasoning_text.delta`) events", '`"type": "response.reasoning_summary_text.delta", '
                   '"delta": "…"`'),
)

# ----------------------------------------------------------------------------- raw mode: a <think> block

THINK_FIELD = "think"  # the record's ``reasoning_field`` value for reasoning read from a <think> block
THINK_OPEN, THINK_CLOSE = "<think>\n", "\n</think>\n\n"  # how the simulator writes one
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, the rest) for a completion text that may begin with a ``<think>`` block (an unclosed one is
    reasoning to the end); ("", text) when it does not."""
    match = _THINK.match(text)
    if not match:
        return "", text
    return match.group(1).strip(), text[match.end():]


def starts_with_reasoning(text: str) -> bool:
    """The text begins with a ``<think>`` block."""
    return _THINK.match(text) is not None


def render_reasoning_table() -> str:
    """The README's table of reasoning fields, from the declarations."""
    rows = ["| `reasoning_field` | read from | the simulator writes |", "|---|---|---|"]
    for f in REASONING_FIELDS:
        written = f"`{json.dumps({f.name: f.write('…')}, ensure_ascii=False)[1:-1]}`" if f.in_responses else "—"
        where = "a response's delta or message, and history turns" if f.in_responses else "history turns only"
        rows.append(f"| `{f.name}` | {where} | {written} |")
    think = (THINK_OPEN + "…" + THINK_CLOSE).replace("\n", "\\n")
    rows += [f"| `{f.name}` | `endpoint: {f.endpoint}`: {f.read_from} | {f.written} |" for f in EVENT_FIELDS]
    rows.append(f"| `{THINK_FIELD}` | raw mode: a leading `<think>…</think>` block of the completion text (an unclosed "
                f"one is reasoning to the end) | `{think}` |")
    return "\n".join(rows)
