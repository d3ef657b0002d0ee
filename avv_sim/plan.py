"""One response, decided up front (simulator, pure): :func:`make_plan` puts the decisions of
:mod:`avv_sim.behaviour`, :mod:`avv_sim.chosen_calls` and :mod:`avv_sim.agent` together into a :class:`Plan` — what
the server sends for a request, token by token. One small function per decision; each is a draw over the
decision key (see behaviour.py for the derivations).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import avv_sim.quirks as quirk_table
import avv_sim.schema_args as schema_args
import avv_sim.writing_systems as scripts
from avv_core.json_types import JSONMapping, JSONObject
from avv_sim.agent import AgentEntry, AgentStep, decide_step
from avv_sim.behaviour import (
    Decision,
    agent_calls,
    agent_decision,
    answer_words,
    build_tool_calls,
    decide,
    fault_cut,
    jitter_ms,
    language_drift_drawn,
    pick_fault,
    quirks_drawn,
    reasoning_only_drawn,
)
from avv_sim.chosen_calls import PlannedCall, call_form, deviate, gold_calls, reference_calls, text_content, vary
from avv_sim.decision_key import decision_key
from avv_sim.gold import GoldEntry
from avv_sim.profiles import Profile
from avv_sim.quirks import SURFACE_OF, Quirk, ResponseShape
from avv_sim.request import (
    SAMPLING_RANGES,
    RequestError,
    Tool,
    max_tokens_of,
    out_of_range,
    parse_tool_choice,
    prompt_tokens_of,
    request_tools,
    response_format_of,
    stop_sequences,
)
from avv_sim.tokens import (
    REASONING_WORDS,
    Chunk,
    Token,
    ToolCall,
    filler_words,
    group_chunks,
    text_tokens,
    tool_tokens,
    word_tokens,
)


@dataclass
class Plan:
    """Everything the server sends for one request, decided up front."""

    profile: str
    request_hash: str
    attempt: int
    stream: bool
    include_usage: bool
    model: str
    decision: Decision
    fault: str | None
    reasoning_only: bool
    prompt_script: str  # the script of the last user message (writing_systems.prompt_script)
    content_script: str | None  # the script the content was written in (None: no content)
    language_drift: bool  # the content is in another script than the prompt's (language_drift_rate)
    quirks: tuple[str, ...]
    tool_calls: list[ToolCall]
    tokens: list[Token]
    chunks: list[Chunk]
    finish_reason: str
    prompt_tokens: int
    jitter_ms: float
    fault_after_chunks: int | None  # truncate / stream_error: token chunks sent before the fault
    gold: bool = False  # the request matched a gold line (and the profile follows gold)
    call_form: str | None = None  # "calls" | "text" | "truncated" for a calling response, else None
    dropped_calls: int = 0  # reference calls left out (drop_parallel_rate)
    text_calls: list[JSONObject] = field(default_factory=list)  # calls written into the content
    agent: JSONObject | None = None  # an agent task's step (agent.AgentStep.truth), None otherwise
    ignored: tuple[str, ...] = ()  # request parameters present but not honoured (the ignore_* knobs, clamping)
    other_calls: bool = False  # stream_other_calls changed this non-streamed answer's first call
    usage_prompt_tokens: int = 0  # what usage reports (prompt_tokens_factor applied)
    usage_completion_tokens: int = 0  # what usage reports (completion_tokens_factor applied)
    sampled_words: int = 0  # content words drawn by sampling_rate
    answer_shifted: bool = False  # the content was written around the other most likely words (answer_shift_rate)

    @property
    def completion_tokens(self) -> int:
        return len(self.tokens)

    def has(self, quirk: str) -> bool:
        return quirk in self.quirks

    def effects(self) -> tuple[Quirk, ...]:
        """The applied quirks, in the order their effects run (the quirk table's)."""
        return quirk_table.active(self.quirks)


@dataclass(frozen=True)
class RequestView:
    """What planning reads off a chat body (validated: a malformed body raised :class:`RequestError`)."""

    stream: bool
    include_usage: bool  # stream_options.include_usage on a stream
    model: str  # echoed back: the request's, else the profile's served model
    max_tokens: int | None
    tools: list[Tool]
    tool_choice: str  # auto | none | required | named
    parallel: bool = True  # parallel_tool_calls is not false
    stop: tuple[str, ...] = ()  # the stop sequences
    response_format: tuple[str, JSONMapping | None] | None = None  # (json_object | json_schema, schema)
    greedy: bool = False  # temperature 0: no sampled words (sampling_rate)


@dataclass(frozen=True)
class CallPlan:
    """The calls of a calling response, after this profile's deviations (:mod:`avv_sim.chosen_calls`)."""

    planned: list[PlannedCall] = field(default_factory=list)
    dropped: int = 0  # drop_parallel_rate
    form: str | None = None  # calls | text | truncated (None: the response does not call)

    @property
    def as_tool_calls(self) -> bool:
        return self.form in ("calls", "truncated")


@dataclass(frozen=True)
class Language:
    prompt_script: str
    content_script: str | None
    drift: bool


@dataclass
class Body:
    """The tokens of a response and how it finishes."""

    tokens: list[Token]
    finish: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    text_calls: list[JSONObject] = field(default_factory=list)
    gold_answer: bool = False  # the content is the agent task's answer (matches its final_text_pattern)
    sampled_words: int = 0  # of the content's words, those drawn by sampling_rate
    answer_shifted: bool = False  # answer_shift_rate drew the other most likely words


def read_request(profile: Profile, body: JSONMapping) -> RequestView:
    """The request's shape; :class:`RequestError` for a malformed one (messages, max_tokens, tools, tool_choice)."""
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise RequestError("'messages' must be a non-empty array", "messages")
    stream = bool(body.get("stream"))
    opts = body.get("stream_options")
    include_usage = stream and isinstance(opts, Mapping) and bool(opts.get("include_usage"))
    model = body.get("model")
    max_tokens = max_tokens_of(body)
    tools = request_tools(body)
    mode = parse_tool_choice(body, tools)[0]
    temperature = body.get("temperature")
    greedy = isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature == 0
    return RequestView(stream, include_usage, model if isinstance(model, str) and model else profile.served_model,
                       max_tokens, tools, mode, body.get("parallel_tool_calls") is not False,
                       tuple(stop_sequences(body)), response_format_of(body), greedy)


#: knob → the request keys it makes the profile ignore (present keys are read as absent; truth ``ignored``)
IGNORED_BY: dict[str, tuple[str, ...]] = {
    "ignore_tool_choice": ("tool_choice",),
    "ignore_parallel_tool_calls": ("parallel_tool_calls",),
    "ignore_max_tokens": ("max_tokens", "max_completion_tokens"),
    "ignore_stop": ("stop",),
    "ignore_response_format": ("response_format",),
}


def honoured_view(profile: Profile, body: JSONMapping) -> tuple[JSONMapping, tuple[str, ...]]:
    """The request as this profile honours it, and the parameters it ignores: the keys of its ``ignore_*`` knobs
    read as absent; a ``temperature`` / ``top_p`` out of range is a :class:`RequestError` (HTTP 400), or with
    ``clamp_out_of_range`` read as absent too."""
    dropped = [key for knob, keys in IGNORED_BY.items() if getattr(profile, knob) for key in keys
               if body.get(key) is not None]
    bad = out_of_range(body)
    if bad and not profile.clamp_out_of_range:
        name, value = bad[0]
        low, high = SAMPLING_RANGES[name]
        raise RequestError(f"'{name}' must be a number from {low:g} to {high:g}, got {value!r}", name)
    dropped += [name for name, _ in bad]
    if not dropped:
        return body, ()
    return {k: v for k, v in body.items() if k not in dropped}, tuple(dropped)


def agent_step(profile: Profile, agent: AgentEntry | None, body: JSONMapping, req: RequestView, h: str,
               attempt: int) -> AgentStep | None:
    """The agent task's step this request is (with tools and ``tool_choice`` auto), else None."""
    if agent is None or not req.tools or req.tool_choice != "auto":
        return None
    return decide_step(profile, agent, body, req.tools, h, attempt)


def plan_calls(profile: Profile, req: RequestView, decision: Decision, step: AgentStep | None,
               gold: GoldEntry | None, h: str, attempt: int) -> CallPlan:
    """The calls of a response that calls: the agent step's or the reference's, with this profile's deviations
    and call form.

    Why so many parameters: one of :func:`make_plan`'s named steps, called from it only: the results of
    its earlier steps (the read request, the decision, the agent step, the gold labels) and the inputs of every draw
    (``profile``, ``h``, ``attempt``).
    """
    if step is not None:
        reference = agent_calls(step, req.tools, h)
    else:
        follows_gold = decision.decision == decision.reference and req.tool_choice != "named"
        reference = reference_calls(decision.calls, h, gold_calls(gold, req.tools) if follows_gold else None)
    planned, dropped = deviate(profile, reference, req.tools, h, attempt)
    if not req.parallel and len(planned) > 1:  # parallel_tool_calls: false — one call
        planned = planned[:1]
    return CallPlan(planned, dropped, call_form(profile, h, attempt))


def other_calls(profile: Profile, req: RequestView, calls: CallPlan, h: str) -> tuple[CallPlan, bool]:
    """``stream_other_calls``: a non-streamed answer's first call with one value changed (when one can be), and
    whether it was."""
    if req.stream or not profile.stream_other_calls or not calls.planned:
        return calls, False
    first = vary(calls.planned[0], f"{h}:other_calls")
    if first is calls.planned[0]:
        return calls, False
    return replace(calls, planned=[first, *calls.planned[1:]]), True


def plan_language(profile: Profile, body: JSONMapping, h: str, attempt: int, answers: bool) -> Language:
    """The prompt's script and the content's (drifted by ``language_drift_rate``; answers only)."""
    script = scripts.prompt_script(body)
    drift = answers and language_drift_drawn(profile, h, attempt)
    content = (scripts.drift_script(script) if drift else script) if answers else None
    return Language(script, content, drift)


def plan_quirks(profile: Profile, h: str, attempt: int, shape: ResponseShape) -> tuple[str, ...]:
    """The profile's quirks that apply to this response (quirk table), when the ``quirk_rate`` draw says so."""
    if not profile.quirks or not quirks_drawn(profile, h, attempt):
        return ()
    return quirk_table.applicable(profile.quirks, shape)


def reasoning_tokens(profile: Profile, h: str, reasoning_only: bool) -> list[Token]:
    n = profile.reasoning_tokens or (profile.output_tokens if reasoning_only else 0)
    return word_tokens("reasoning", filler_words(h, "reasoning", n, REASONING_WORDS))


def call_body(profile: Profile, calls: CallPlan, h: str, attempt: int, effects: Sequence[Quirk]) -> Body:
    """A calling response: the calls as tool_calls deltas (cut mid-arguments when ``truncated``), or written
    into the content (``text``)."""
    if calls.form == "text":
        text_calls = [{"name": c.tool.name, "arguments": c.args, "wrong_tool": c.wrong_tool,
                       "changed": list(c.changed)} for c in calls.planned]
        return Body(text_tokens(text_content(calls.planned)), "stop", text_calls=text_calls)
    wire_calls = build_tool_calls(profile, calls.planned, h, attempt, effects)
    tokens = tool_tokens(wire_calls)
    for quirk in effects:
        if quirk.tool_tokens is not None:
            tokens = quirk.tool_tokens(tokens)
    if calls.form == "truncated":
        return Body(_cut_last_call(tokens), "length", wire_calls)
    return Body(tokens, "tool_calls", wire_calls)


def answer_body(profile: Profile, h: str, language: Language, step: AgentStep | None,
                decision: Decision, response_format: tuple[str, JSONMapping | None] | None = None,
                repeat: int = 1, greedy: bool = False) -> Body:
    """A response without calls: the agent task's answer, else words in the content's script
    (:func:`~avv_sim.behaviour.answer_words`: sampled per ``repeat`` unless ``greedy``; none for a reasoning-only
    response); with a ``response_format``, JSON: an object holding words (``json_object``) or a value generated
    from the schema (``json_schema``).

    Why so many parameters: one of :func:`make_plan`'s named steps, called from it only: the plan so far
    (``language``, ``step``, ``decision``, the request's ``response_format``) and the inputs of the answer's draws
    (``profile``, ``h``, ``repeat``, ``greedy``).
    """
    final = step.answer_text if step is not None and step.action == "answer" and not decision.flipped else None
    if language.content_script is None:
        return Body([], "stop")
    if response_format is not None:
        kind, schema = response_format
        answer = filler_words(h, "content", max(1, profile.output_tokens // 4), scripts.WORDS["Latin"])
        value = schema_args.generate(schema, f"{h}:response_format") if kind == "json_schema" else \
            {"answer": " ".join(answer)}
        return Body(text_tokens(json.dumps(value, ensure_ascii=False)), "stop")
    if final is not None and not language.drift:
        return Body(text_tokens(final), "stop", gold_answer=True)
    words = scripts.WORDS.get(language.content_script, scripts.WORDS["Latin"])
    drawn = answer_words(profile, h, profile.output_tokens, words, repeat, greedy)
    return Body(word_tokens("content", drawn.words), "stop", sampled_words=drawn.sampled,
                answer_shifted=drawn.shifted)


def make_plan(profile: Profile, body: JSONMapping, attempt: int, h: str | None = None,
              gold: GoldEntry | None = None, repeat: int = 1, agent: AgentEntry | None = None,
              endpoint: str = "chat") -> Plan:
    """Decide everything for one request. ``gold`` = the request's gold labels (ignored unless the profile
    has ``follow_gold``); ``repeat`` = the item's repeat (the ``self_flip_rate``, ``sampling_rate`` and
    ``answer_shift_rate`` draws); ``agent`` = the agent
    task the request is a step of (:mod:`.agent`; with tools and ``tool_choice`` auto); ``endpoint`` = ``chat``,
    ``completions``, ``messages`` or ``responses`` (which quirks may apply: :data:`avv_sim.quirks.SURFACE_OF`).
    Raises :class:`RequestError` for malformed bodies.

    Why so many parameters: ``profile``, ``body`` and ``attempt`` are the request; the other five are
    options with defaults that only some callers have (the decision key, the gold labels, the repeat, the agent task,
    the endpoint), and the tests plan a request from the first three or four.
    """
    h = h or decision_key(body)
    body, ignored = honoured_view(profile, body)
    req = read_request(profile, body)
    gold = gold if profile.follow_gold else None
    step = agent_step(profile, agent, body, req, h, attempt)
    decision = decide(profile, body, h, gold, repeat) if step is None else agent_decision(profile, body, h, step)
    fault = pick_fault(profile, h, attempt)
    reasoning_only = reasoning_only_drawn(profile, h, attempt)
    calling = decision.decision and not reasoning_only
    calls, changed = other_calls(profile, req, plan_calls(profile, req, decision, step, gold, h, attempt), h) \
        if calling else (CallPlan(), False)
    # Language drift concerns real answers only (not calls written as text, not reasoning-only responses).
    language = plan_language(profile, body, h, attempt, answers=not calling and not reasoning_only)
    shape = ResponseShape(SURFACE_OF[(endpoint, req.stream)], fault, tool_calls=calls.as_tool_calls,
                          parallel=calls.as_tool_calls and len(calls.planned) >= 2,
                          content=(not calling or calls.form == "text") and not reasoning_only,
                          usage=req.include_usage and not profile.omit_usage)
    quirks = plan_quirks(profile, h, attempt, shape)
    out = call_body(profile, calls, h, attempt, quirk_table.active(quirks)) if calling else \
        answer_body(profile, h, language, step, decision, req.response_format, repeat, req.greedy)
    tokens, finish = reasoning_tokens(profile, h, reasoning_only) + out.tokens, out.finish
    if req.stop:
        tokens, stopped = _cut_at_stop(tokens, req.stop)
        finish = "stop" if stopped else finish
    if req.max_tokens is not None and len(tokens) > req.max_tokens:
        tokens, finish = tokens[:req.max_tokens], "length"
    chunks = group_chunks(tokens, profile.tokens_per_chunk)
    if out.tool_calls:
        _trim_tool_calls(out.tool_calls, tokens)
    prompt_tokens = prompt_tokens_of(body)
    return Plan(
        profile=profile.name,
        request_hash=h,
        attempt=attempt,
        stream=req.stream,
        include_usage=req.include_usage,
        model=req.model,
        decision=decision,
        fault=fault,
        reasoning_only=reasoning_only,
        prompt_script=language.prompt_script,
        content_script=language.content_script,
        language_drift=language.drift,
        quirks=quirks,
        tool_calls=out.tool_calls,
        tokens=tokens,
        chunks=chunks,
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        jitter_ms=jitter_ms(profile, h, attempt),
        fault_after_chunks=fault_cut(profile, h, attempt, len(chunks)) if fault in ("truncate", "stream_error")
        else None,
        gold=gold is not None,
        call_form=calls.form,
        dropped_calls=calls.dropped,
        text_calls=out.text_calls,
        agent={**step.truth(), "gold_answer": out.gold_answer} if step is not None else None,
        ignored=ignored,
        other_calls=changed,
        usage_prompt_tokens=round(prompt_tokens * profile.prompt_tokens_factor),
        usage_completion_tokens=round(len(tokens) * profile.completion_tokens_factor),
        sampled_words=out.sampled_words,
        answer_shifted=out.answer_shifted,
    )


def _cut_at_stop(tokens: list[Token], stops: Sequence[str]) -> tuple[list[Token], bool]:
    """The tokens up to the first stop sequence in the content (the token holding it cut before it; nothing after
    it), and whether one was found."""
    text = "".join(t.text for t in tokens if t.kind == "content")
    found = [at for at in (text.find(s) for s in stops) if at >= 0]
    if not found:
        return tokens, False
    end, seen = min(found), 0
    for i, tok in enumerate(tokens):
        if tok.kind != "content":
            continue
        if seen + len(tok.text) > end:
            head = tok.text[:end - seen]
            return tokens[:i] + ([replace(tok, text=head)] if head else []), True
        seen += len(tok.text)
    return tokens, True


def _cut_last_call(tokens: list[Token]) -> list[Token]:
    """Tokens up to the middle of the last call's argument fragments (at least its header, never its last
    fragment): a proper prefix of a JSON object's text never parses."""
    last = max(t.index for t in tokens if t.kind == "tool")
    positions = [i for i, t in enumerate(tokens) if t.kind == "tool" and t.index == last and not t.header]
    keep = len(positions) // 2
    end = positions[keep] if keep < len(positions) else len(tokens)
    return tokens[:end]


def _trim_tool_calls(calls: list[ToolCall], tokens: list[Token]) -> None:
    """After a max_tokens cut: drop calls whose header was cut, shorten the arguments of the last one."""
    sent: dict[int, list[str]] = {}
    for tok in tokens:
        if tok.kind == "tool":
            sent.setdefault(tok.index, [])
            if not tok.header:
                sent[tok.index].append(tok.text)
    calls[:] = [c for c in calls if c.index in sent]
    for c in calls:
        if len(sent[c.index]) < len(c.fragments):
            c.fragments = sent[c.index]
            c.arguments = "".join(c.fragments)


def sent_tool_calls(plan: Plan, chunks_sent: int) -> list[JSONObject]:
    """Truth-log view of the tool calls whose deltas were actually written (first ``chunks_sent``)."""
    args: dict[int, str] = {}
    for c in plan.chunks[:chunks_sent]:
        if c.kind == "tool":
            args[c.index] = args.get(c.index, "") + c.text
    return [{"index": call.index, "id": call.id, "name": call.name, "arguments": args[call.index],
             "broken": call.broken, "wrong_tool": call.wrong_tool, "changed": list(call.changed)}
            for call in plan.tool_calls if call.index in args]
