"""The simulator's wire-format quirks, each declared once (simulator layer, pure): its name, what it does on the
wire, where it applies and its effect. Everything else is derived from :data:`QUIRK_TABLE`: the ``quirks`` knob's
values (:data:`QUIRKS`), which quirks apply to a response (:func:`applicable`), the order their effects run in, and
docs/simulator.md's quirk table (:func:`render_quirk_table`).

**Where a quirk applies.** ``surfaces``: ``stream`` (a chat SSE stream), ``non-stream`` (a chat JSON body),
``messages stream`` / ``messages non-stream`` (``/v1/messages``, Anthropic's events or its Message JSON),
``responses stream`` / ``responses non-stream`` (``/v1/responses``, OpenAI Responses events or its Response JSON),
``completions`` (``/v1/completions``, either form), ``request`` (a check on the chat request, listed only on the
400 it causes). ``needs``: what the response must have (:data:`NEEDS`), e.g. tool calls. On top of that, for
every quirk: none applies to a response a fault replaced before its first byte (``error_status``,
``rate_limit``), nor to a non-stream response with a fault; a *body quirk* (one with ``body``) replaces the
response body, the first one listed excludes every other quirk, except that a JSON body keeps the quirks marked
``in_json_body``.

**Effects.** Each is a hook called at one point of a response, in table order (see :class:`Quirk`), or
``applied_by``: the one function or class that applies a quirk whose effect is inside the wire's delta writing
or a dialect (tests/test_sim_quirks.py checks that it names the quirk).

Adding a quirk = one declaration here (with its hook) plus its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import Field, dataclass, replace
from typing import ClassVar, Literal, Protocol, TypeVar

from avv_core.json_types import JSONMapping, JSONValue

Surface = Literal["stream", "non-stream", "messages stream", "messages non-stream", "responses stream",
                  "responses non-stream", "completions", "request"]
SURFACES: tuple[Surface, ...] = ("stream", "non-stream", "messages stream", "messages non-stream", "responses stream",
                                 "responses non-stream", "completions", "request")
#: The SSE streams: chat's, Messages' and Responses'.
STREAMS: frozenset[Surface] = frozenset({"stream", "messages stream", "responses stream"})
#: (endpoint, stream?) → the surface a response goes out on.
SURFACE_OF: dict[tuple[str, bool], Surface] = {
    ("chat", True): "stream", ("chat", False): "non-stream",
    ("messages", True): "messages stream", ("messages", False): "messages non-stream",
    ("responses", True): "responses stream", ("responses", False): "responses non-stream",
    ("completions", True): "completions", ("completions", False): "completions",
}
#: Faults that replace the response before its first byte: no quirk applies to them.
PRE_STREAM_FAULTS = ("error_status", "rate_limit")

HUGE_ARG_CHARS = 1_000_000  # huge_args: the size of the string it puts into call 0's arguments
HTML_BODY = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>avv-sim html_body quirk</p></body></html>\n"
)

#: (kind, bytes): kind is "comment", "close" (the end of the open content blocks / output items: Messages,
#: Responses), "finish" (chat's finish chunk, Messages' ``message_delta``), "usage", "error" or "done" (chat's
#: ``[DONE]``, Messages' ``message_stop``, Responses' ``response.completed`` / ``response.incomplete``)
TailPart = tuple[str, bytes]


class StreamWriter(Protocol):
    """The events a stream hook may write (:class:`avv_sim.wire.Wire` is one)."""

    def comment(self) -> bytes: ...

    def garbage(self) -> bytes: ...

    def finish_event(self, with_usage: bool) -> bytes | None: ...

    def overloaded_event(self) -> bytes: ...


class ToolToken(Protocol):
    """A token of a tool call, as the ``tool_tokens`` hooks see it (:class:`avv_sim.tokens.Token`, a frozen dataclass:
    a hook makes a changed copy with :func:`dataclasses.replace`)."""

    __dataclass_fields__: ClassVar[dict[str, Field[object]]]

    @property
    def index(self) -> int: ...

    @property
    def header(self) -> bool: ...

    @property
    def text(self) -> str: ...


TokenT = TypeVar("TokenT", bound=ToolToken)


class TokenHook(Protocol):
    """A ``tool_tokens`` hook: the tool-call tokens in the order they are sent, of whatever token type it is given."""

    def __call__(self, tokens: list[TokenT], /) -> list[TokenT]: ...


@dataclass(frozen=True)
class ResponseShape:
    """What a planned response is, as far as the quirks' ``needs`` care."""

    surface: Surface  # where it goes out (SURFACE_OF: the endpoint and whether it streams)
    fault: str | None  # the injected fault (behaviour.pick_fault), None without one
    tool_calls: bool  # sends calls as tool_calls (not as text, not reasoning only)
    parallel: bool  # sends two or more of them
    content: bool  # sends content (words, or calls written as text)
    usage: bool  # a stream that sends a usage chunk


#: need → (what the docs say, whether a response has it).
NEEDS: dict[str, tuple[str, Callable[[ResponseShape], bool]]] = {
    "tool_calls": ("answers with tool calls", lambda r: r.tool_calls),
    "parallel": ("answers with two or more tool calls", lambda r: r.parallel),
    "content": ("answers with content", lambda r: r.content),
    "usage": ("streams that send usage", lambda r: r.usage),
    "no_fault": ("answers without a fault", lambda r: r.fault is None),
}


@dataclass(frozen=True)
class Quirk:
    """One quirk: where it applies and its effect (module docstring). Hooks left None do nothing."""

    name: str  # the ``quirks`` knob's value and the truth log's ``quirks`` entry
    doc: str  # one line: what goes on the wire (docs/simulator.md)
    surfaces: frozenset[Surface]  # where it may apply
    needs: str | None = None  # a key of NEEDS: what the response must have
    in_json_body: bool = False  # still applies when a JSON body replaces the stream (json_body)
    # planning: a call's arguments (index, arguments) before they are serialised
    call_arguments: Callable[[int, JSONValue], JSONValue] | None = None
    # planning: the tool-call tokens in the order they are sent
    tool_tokens: TokenHook | None = None
    # the finish_reason sent, from the planned one (stream and JSON body)
    finish_reason: Callable[[str | None], str | None] | None = None
    # stream: the line ending of every line
    eol: str | None = None
    # stream: the text of one event from its payload and line ending (None: the usual ``data: …``)
    frame: Callable[[str, str], str | None] | None = None
    # stream: bytes sent before token event j of n
    before_token: Callable[[int, int, StreamWriter], bytes] | None = None
    # stream: how many of the n token events are sent (the stream then ends with its tail)
    cut: Callable[[int], int] | None = None
    # stream: the events after the token events, [(kind, bytes)], rewritten
    tail: Callable[[list[TailPart], StreamWriter], list[TailPart]] | None = None
    # a body quirk: the body that replaces the response (stream?) → (bytes, content type), or None for the
    # chat.completion JSON body
    body: Callable[[bool], tuple[bytes, str] | None] | None = None
    # the function / class that applies an effect no hook above carries (its source names the quirk)
    applied_by: str | None = None

    @property
    def stream_only(self) -> bool:
        return self.surfaces <= STREAMS

    def applies(self, shape: ResponseShape) -> bool:
        return shape.surface in self.surfaces and (self.needs is None or NEEDS[self.needs][1](shape))


# ------------------------------------------------------------------------------------------------ effects


def _stop_for_tool_calls(reason: str | None) -> str | None:
    return "stop" if reason == "tool_calls" else reason


def interleave(tokens: list[TokenT]) -> list[TokenT]:
    """Tool-call tokens round-robin by call index (0, 1, 0, 1, …), each call's own order kept."""
    per_call: dict[int, list[TokenT]] = {}
    for tok in tokens:
        per_call.setdefault(tok.index, []).append(tok)
    out: list[TokenT] = []
    for i in range(max((len(s) for s in per_call.values()), default=0)):
        out.extend(seq[i] for seq in per_call.values() if i < len(seq))
    return out


def huge_arguments(index: int, args: object) -> JSONValue:
    """Call 0's first string value replaced with ~1 MB of text (or a ``padding`` key added)."""
    if index != 0:
        return args
    huge = ("lorem ipsum dolor sit amet " * (HUGE_ARG_CHARS // 27 + 1))[:HUGE_ARG_CHARS]
    if isinstance(args, dict):
        for key, value in args.items():
            if isinstance(value, str):
                return {**args, key: huge}
        return {**args, "padding": huge}
    return {"padding": huge}


def _two_data_lines(payload: str, eol: str) -> str | None:
    if payload.startswith("{") and len(payload) > 1:  # right after the brace: the joined data is still JSON
        return f"data: {{{eol}data: {payload[1:]}{eol}{eol}"
    return None


def _usage_on_finish(parts: list[TailPart], writer: StreamWriter) -> list[TailPart]:
    if not any(kind == "usage" for kind, _ in parts):
        return parts
    finish = writer.finish_event(with_usage=True) or b""
    return [("finish", finish), *[p for p in parts if p[0] not in ("finish", "usage")]]


def _comment_first(parts: list[TailPart], writer: StreamWriter) -> list[TailPart]:
    return parts if parts and parts[0][0] == "error" else [("comment", writer.comment()), *parts]


def _twice(kind: str) -> Callable[[list[TailPart], StreamWriter], list[TailPart]]:
    def tail(parts: list[TailPart], writer: StreamWriter) -> list[TailPart]:
        return [p for part in parts for p in ((part, part) if part[0] == kind else (part,))]

    return tail


def _without(kind: str) -> Callable[[list[TailPart], StreamWriter], list[TailPart]]:
    def tail(parts: list[TailPart], writer: StreamWriter) -> list[TailPart]:
        return [part for part in parts if part[0] != kind]

    return tail


def _halfway(n: int) -> int:
    return n // 2


def _overloaded(parts: list[TailPart], writer: StreamWriter) -> list[TailPart]:
    return [("error", writer.overloaded_event())]


def repeat_first_fragment(tokens: list[TokenT]) -> list[TokenT]:
    """The tool-call tokens with the first non-empty argument fragment of the first call sent doubled: a JSON object's
    text with a piece of it repeated is not JSON (``{"`` → ``{"{"``, ``{}`` → ``{}{}``)."""
    out = list(tokens)
    first = next((t.index for t in out if not t.header), None)
    for i, tok in enumerate(out):
        if tok.index == first and not tok.header and tok.text:
            out[i] = replace(tok, text=tok.text * 2)
            break
    return out


def _json_body(stream: bool) -> tuple[bytes, str] | None:
    return None  # the server answers with the chat.completion JSON body


def _html_body(stream: bool) -> tuple[bytes, str] | None:
    return HTML_BODY, "text/html"


def _empty_body(stream: bool) -> tuple[bytes, str] | None:
    return b"", "text/event-stream" if stream else "application/json"


# -------------------------------------------------------------------------------------------------- table

STREAM: frozenset[Surface] = frozenset({"stream"})
CHAT: frozenset[Surface] = frozenset({"stream", "non-stream"})
CHAT_AND_MESSAGES: frozenset[Surface] = CHAT | {"messages stream", "messages non-stream"}
MESSAGES_STREAM: frozenset[Surface] = frozenset({"messages stream"})
RESPONSES_STREAM: frozenset[Surface] = frozenset({"responses stream"})
FORMAT_STREAMS: frozenset[Surface] = MESSAGES_STREAM | RESPONSES_STREAM
#: every answer of chat, Messages and Responses, streamed or not
ANSWERS: frozenset[Surface] = CHAT_AND_MESSAGES | {"responses stream", "responses non-stream"}
REQUEST: frozenset[Surface] = frozenset({"request"})

QUIRK_TABLE: tuple[Quirk, ...] = (
    Quirk("no_finish_reason", "no finish_reason chunk (stream still ends with `[DONE]`); JSON body has "
          "`finish_reason: null`; Messages: `stop_reason: null`", CHAT_AND_MESSAGES, in_json_body=True,
          finish_reason=lambda reason: None),
    Quirk("tool_calls_under_stop", 'tool-call deltas but `finish_reason: "stop"` (Messages: tool_use blocks but '
          '`stop_reason: "end_turn"`)', CHAT_AND_MESSAGES, "tool_calls", in_json_body=True,
          finish_reason=_stop_for_tool_calls),
    Quirk("usage_in_last_content_chunk", "usage rides on the finish_reason chunk; no separate `choices: []` usage "
          "chunk", STREAM, "usage", tail=_usage_on_finish),
    Quirk("repeat_tool_header", "every tool-call delta repeats `id`, `type`, `function.name` (arguments stay "
          "incremental)", STREAM, "tool_calls", applied_by="avv_sim.wire.Wire"),
    Quirk("interleave_parallel", "deltas of parallel calls alternate by `index` (0, 1, 0, 1, …); Messages / "
          "Responses: the second tool_use block / function_call item opens before the first one closes", STREAMS,
          "parallel", tool_tokens=interleave),
    Quirk("crlf", "CRLF line endings", STREAMS, eol="\r\n"),
    Quirk("multiline_data", "each JSON payload split over two `data:` lines (`data: {` + `data: \"id\":…`); joined "
          "per the SSE spec it is still valid JSON", STREAMS, frame=_two_data_lines),
    Quirk("comments", "a `: keep-alive` comment before every token event and before the finish chunk (Messages / "
          "Responses: before the events that end the stream)", STREAMS,
          before_token=lambda j, n, writer: writer.comment(), tail=_comment_first),
    Quirk("duplicate_done", "`data: [DONE]` twice (Messages: `message_stop` twice; Responses: `response.completed` "
          "twice)", STREAMS, tail=_twice("done")),
    Quirk("garbage_line", "one `data: {not json` event halfway through the token events", STREAMS,
          before_token=lambda j, n, writer: writer.garbage() if j == n // 2 else b""),
    Quirk("json_body", "HTTP 200 `application/json` body (chat.completion; Messages: the Message; Responses: the "
          "Response) although `stream: true`", STREAMS, "no_fault", in_json_body=True, body=_json_body),
    Quirk("html_body", "HTTP 200 `text/html` page", ANSWERS, "no_fault", body=_html_body),
    Quirk("empty_body", "HTTP 200 with an empty body", ANSWERS, "no_fault", body=_empty_body),
    Quirk("invalid_utf8", "bytes `\\xff\\xfe` inside the first content delta's string (Messages: `text_delta`; "
          "Responses: `response.output_text.delta`)", STREAMS, "content", applied_by="avv_sim.wire.Wire"),
    Quirk("huge_args", "the first string value of call 0's arguments (or an added `padding` key) is ~1 MB; sent "
          "in 64 KiB fragments", ANSWERS, "tool_calls", in_json_body=True, call_arguments=huge_arguments),
    Quirk("require_reasoning_content", "a chat request whose history has an assistant turn with `tool_calls` and "
          "without a non-empty `reasoning_content` is answered HTTP 400 (`invalid_request_error`, `param: "
          "messages[i].reasoning_content`), as Kimi K2.5 / K2-thinking deployments do; truth `fault` and `quirks` "
          "name the quirk", REQUEST, applied_by="avv_sim.dialects.check_reasoning_content"),
    Quirk("broken_template", "the calls the model makes go out as `content`, in the `tool_parser` knob's format "
          "(default: one `` ```json `` fence per call holding `{\"name\": …, \"arguments\": …}`), and "
          "`finish_reason: \"stop\"` (stream and JSON body; Messages: a text block and `end_turn`; Responses: a "
          "message item) — a deployment whose chat template / tool parser is broken; truth `tool_calls` is empty "
          "and `text_tool_calls` lists the calls", ANSWERS, "tool_calls", applied_by="avv_sim.endpoints.plan_request"),
    Quirk("overloaded_error", "after half of the token events (rounded down) the stream ends with an overload: "
          "Messages `event: error` with `overloaded_error`, Responses `response.failed` with error code "
          "`server_is_overloaded` (no stop reason, no final usage)", FORMAT_STREAMS, "no_fault", cut=_halfway,
          tail=_overloaded),
    Quirk("bad_input_json", "call 0's first argument fragment is sent twice, so the tool_use block's "
          "`input_json_delta` pieces (Responses: the `function_call_arguments` deltas and `.done`) do not join "
          "into JSON; truth `tool_calls[].arguments` is the text as sent", FORMAT_STREAMS, "tool_calls",
          tool_tokens=repeat_first_fragment),
    Quirk("no_message_stop", "the stream ends after `message_delta`, without `message_stop`", MESSAGES_STREAM,
          tail=_without("done")),
    Quirk("no_response_completed", "the stream ends after the last `response.output_item.done`, without "
          "`response.completed` (or `response.incomplete`): no status, no usage", RESPONSES_STREAM,
          tail=_without("done")),
)

QUIRKS: tuple[str, ...] = tuple(q.name for q in QUIRK_TABLE)
BY_NAME: dict[str, Quirk] = {q.name: q for q in QUIRK_TABLE}
STREAM_ONLY_QUIRKS: frozenset[str] = frozenset(q.name for q in QUIRK_TABLE if q.stream_only)
BODY_QUIRKS: tuple[str, ...] = tuple(q.name for q in QUIRK_TABLE if q.body is not None)


def applicable(names: Sequence[str], shape: ResponseShape) -> tuple[str, ...]:
    """The quirks of ``names`` (a profile's, in its order) that apply to a response of this shape (module
    docstring), without repeats. The quirk_rate draw is the caller's."""
    if shape.fault in PRE_STREAM_FAULTS or (shape.surface not in STREAMS and shape.fault is not None):
        return ()
    out = [BY_NAME[n] for n in names if BY_NAME[n].applies(shape)]
    body = next((q for q in out if q.body is not None), None)
    if body is not None and body.body is not None and body.body(shape.surface in STREAMS) is None:
        out = [q for q in out if q.in_json_body]
    elif body is not None:
        out = [body]
    return tuple(dict.fromkeys(q.name for q in out))


def active(names: Iterable[str]) -> tuple[Quirk, ...]:
    """The quirks named, in table order (the order their effects run in)."""
    wanted = set(names)
    return tuple(q for q in QUIRK_TABLE if q.name in wanted)


def body_quirk(names: Iterable[str]) -> Quirk | None:
    """The body quirk among ``names`` (an applied list holds at most one)."""
    return next((q for q in active(names) if q.body is not None), None)


#: How the quirk table names a surface, and a set of them that has a shorter name.
SURFACE_LABELS: dict[Surface, str] = {
    "stream": "chat stream", "non-stream": "chat JSON", "messages stream": "messages stream",
    "messages non-stream": "messages JSON", "responses stream": "responses stream",
    "responses non-stream": "responses JSON", "completions": "completions", "request": "chat request",
}
SURFACE_GROUPS: dict[frozenset[Surface], str] = {
    STREAMS: "chat, messages and responses streams",
    ANSWERS: "chat, messages and responses (stream and JSON)",
}


def render_quirk_table() -> str:
    """docs/simulator.md's quirk table (``python -m avv_harness.docs``)."""
    rows = ["| quirk | applies to | what goes on the wire |", "|---|---|---|"]
    for q in QUIRK_TABLE:
        where = SURFACE_GROUPS.get(q.surfaces) or ", ".join(SURFACE_LABELS[s] for s in SURFACES if s in q.surfaces)
        if q.needs is not None:
            where += f"; {NEEDS[q.needs][0]}"
        doc = q.doc.replace("|", "\\|")
        rows.append(f"| `{q.name}` | {where} | {doc} |")
    return "\n".join(rows)


def check_table(table: Sequence[Quirk], needs: JSONMapping) -> None:
    """Raise at import for a table that cannot work: a name twice, an unknown need or surface, no effect."""
    seen: set[str] = set()
    for q in table:
        hooks = (q.call_arguments, q.tool_tokens, q.finish_reason, q.eol, q.frame, q.before_token, q.cut, q.tail,
                 q.body, q.applied_by)
        problems = [
            "declared twice" if q.name in seen else "",
            f"unknown need {q.needs!r}" if q.needs is not None and q.needs not in needs else "",
            "no surface" if not q.surfaces or not q.surfaces <= set(SURFACES) else "",
            "no effect (a hook or applied_by)" if all(h is None for h in hooks) else "",
        ]
        if any(problems):
            raise ValueError(f"quirk {q.name!r}: {'; '.join(p for p in problems if p)}")
        seen.add(q.name)


check_table(QUIRK_TABLE, NEEDS)
