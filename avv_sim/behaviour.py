"""Pure, deterministic decisions: request hashing, the reference decision, flips, faults, token plans.

Nothing here does I/O or reads a clock, so every choice the server makes for a request can be
recomputed from (profile, request body, attempt) alone. Derivations (see docs/simulator.md):

- reference decision: (decision key, tool_call_rate) — same for every profile with that rate;
- flip: (decision key, seed, "flip");
- self-flip (sampling noise, ``self_flip_rate``): (decision key, seed, repeat, "self_flip") — the repeat comes from
  the ``X-AVV-Item`` tag (:mod:`.item_tag`), so a retry of an item meets the same decision and another repeat
  may not;
- which tools, parallel calls, argument values, filler text: decision key only (with gold, see gold.py: the
  gold labels of the request's messages and tools);
- faults, broken arguments, reasoning-only, language drift, jitter, quirks and the tool-call deviations of
  calls.py (wrong tool, wrong value, dropped parallel call, call as text, truncated call): (seed, decision key,
  attempt, knob);
- the script of the content: the prompt's (:mod:`.scripts`), another one on a language drift;
- agent tasks (:mod:`.agent`): whether to call or answer, and which call, from the message history (the
  reference) and (seed, decision key, attempt, knob) draws (give up, loop, extra step); flips apply on top.

The decision key (:mod:`avv_sim.identity`) is the request hash of the body with its history reduced to what
a chat template renders, so a raw-completions prompt meets the same decisions as its chat request.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from avv_sim import schema_args
from avv_sim import writing_systems as scripts
from avv_sim.agent import AgentEntry, AgentStep, decide_step
from avv_sim.calls import PlannedCall, call_form, deviate, gold_calls, reference_calls, text_content
from avv_sim.draws import canonical_json, chance, unit
from avv_sim.gold import GoldEntry
from avv_sim.identity import decision_key
from avv_sim.profiles import QUIRKS, Profile

HASH_EXCLUDED_KEYS = ("model", "stream", "stream_options")
HUGE_ARG_CHARS = 1_000_000
HUGE_FRAGMENT_CHARS = 65_536

_CONTENT_WORDS = (
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "you",
    "that",
    "for",
    "on",
    "are",
    "with",
    "as",
    "this",
    "be",
    "at",
    "one",
    "have",
    "from",
    "or",
    "by",
    "word",
    "but",
    "what",
    "all",
    "were",
    "we",
    "when",
    "your",
    "can",
    "said",
    "there",
    "use",
    "an",
    "each",
    "which",
    "do",
    "how",
    "if",
    "will",
    "up",
    "about",
    "out",
    "many",
    "then",
    "them",
    "so",
    "some",
    "would",
    "make",
    "like",
    "time",
    "has",
    "look",
    "two",
    "more",
    "go",
    "see",
    "way",
    "could",
    "no",
    "than",
    "first",
    "been",
    "call",
    "who",
)
_REASONING_WORDS = (
    "hmm",
    "let",
    "me",
    "think",
    "the",
    "user",
    "wants",
    "so",
    "maybe",
    "check",
    "first",
    "then",
    "consider",
    "tool",
    "answer",
    "okay",
    "wait",
    "right",
    "plan",
    "step",
    "which",
    "option",
    "best",
)
# A few characters per fragment, like a BPE tokenizer: a word (with its leading space), up to three
# digits, a run of whitespace, or one or two punctuation characters. Together they cover every character.
_FRAGMENT_RE = re.compile(r" ?[A-Za-z_]{1,8}| ?\d{1,3}|\s+|[^A-Za-z_\d\s]{1,2}")

# Quirks that only mean something on an SSE stream; the others also shape a JSON body.
STREAM_ONLY_QUIRKS = frozenset(QUIRKS) - {"no_finish_reason", "tool_calls_under_stop", "html_body", "empty_body",
                                          "huge_args", "require_reasoning_content", "broken_template"}
BODY_QUIRKS = ("json_body", "html_body", "empty_body")
_JSON_BODY_COMPATIBLE = frozenset({"json_body", "huge_args", "tool_calls_under_stop", "no_finish_reason"})


class RequestError(Exception):
    """A malformed request: the server answers 400 with an OpenAI-style error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


# ------------------------------------------------------------------------------------------------ hashing


def request_hash(body: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical body without ``model``, ``stream`` and ``stream_options``."""
    stripped = {k: v for k, v in body.items() if k not in HASH_EXCLUDED_KEYS}
    return hashlib.sha256(canonical_json(stripped).encode("utf-8")).hexdigest()


def _fault_parts(profile: Profile, h: str, attempt: int, knob: str) -> tuple:
    return (profile.seed, h, attempt, knob)


# ------------------------------------------------------------------------------------------ request shape


@dataclass(frozen=True)
class Tool:
    name: str
    schema: Mapping[str, Any]


def request_tools(body: Mapping[str, Any]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("'tools' must be an array", "tools")
    out: list[Tool] = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise RequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}", f"tools[{i}]")
        params = fn.get("parameters")
        out.append(Tool(fn["name"], params if isinstance(params, Mapping) else {}))
    return out


def parse_tool_choice(body: Mapping[str, Any], tools: list[Tool]) -> tuple[str, str | None]:
    """("auto" | "none" | "required" | "named", function name or None)."""
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":
        return "auto", None
    if choice in ("none", "required"):
        return choice, None
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        if isinstance(name, str):
            if name not in {t.name for t in tools}:
                raise RequestError(f"tool_choice names function {name!r}, which is not in 'tools'", "tool_choice")
            return "named", name
    raise RequestError(f"invalid tool_choice {choice!r}", "tool_choice")


def max_tokens_of(body: Mapping[str, Any]) -> int | None:
    """``max_completion_tokens`` (preferred) or ``max_tokens``; must be a positive integer."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"'{key}' must be a positive integer", key)
        return value
    return None


def prompt_tokens_of(body: Mapping[str, Any]) -> int:
    """Deterministic estimate: ceil(len(canonical messages + tools JSON) / 4)."""
    shown = {"messages": body.get("messages")}
    if body.get("tools") is not None:
        shown["tools"] = body.get("tools")
    return max(1, math.ceil(len(canonical_json(shown)) / 4))


# -------------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Decision:
    has_tools: bool
    reference: bool | None  # what the reference model does (None: no tools in the request)
    decision: bool  # what this profile does (after flip and tool_choice)
    flipped: bool  # decision != reference because of flip_rate
    calls: tuple[Tool, ...] = ()  # tools to call, in index order (empty when decision is False)
    self_flipped: bool = False  # this (body, repeat) flipped by self_flip_rate (on top of flip_rate)


def reference_decision(h: str, tool_call_rate: float) -> bool:
    """The reference model's auto-mode choice: depends only on the request hash and the rate."""
    return chance(tool_call_rate, h, "reference")


def flip_drawn(h: str, seed: int, flip_rate: float) -> bool:
    return chance(flip_rate, h, seed, "flip")


def self_flip_drawn(h: str, seed: int, repeat: int, self_flip_rate: float) -> bool:
    """The profile's own sampling noise: a draw per (body, seed, repeat), so repeats of one body can differ."""
    return chance(self_flip_rate, h, seed, repeat, "self_flip")


def choose_tools(
    h: str, tools: list[Tool], mode: str, named: str | None, parallel_ok: bool, parallel_rate: float
) -> tuple[Tool, ...]:
    """Which tool(s) a calling response calls: the named one, else one (or two) picked by hash."""
    if mode == "named":
        return tuple(t for t in tools if t.name == named)[:1]
    n = len(tools)
    first = int(unit(h, "tool") * n)
    if n >= 2 and parallel_ok and chance(parallel_rate, h, "parallel"):
        second = (first + 1 + int(unit(h, "tool2") * (n - 1))) % n
        return (tools[first], tools[second])
    return (tools[first],)


def decide(profile: Profile, body: Mapping[str, Any], h: str, gold: GoldEntry | None = None,
           repeat: int = 1) -> Decision:
    """Whether this profile calls a tool and which: the reference decision (gold's ``expected_tool_call`` when
    given, else by hash and ``tool_call_rate``; ``tool_choice`` first), flipped by ``flip_rate`` (per body) and
    by ``self_flip_rate`` (per body and ``repeat``): ``decision = reference XOR flipped XOR self_flipped``."""
    tools = request_tools(body)
    mode, named = parse_tool_choice(body, tools)
    if not tools:
        return Decision(False, None, False, False)
    if mode == "none":
        return Decision(True, False, False, False)
    forced = mode in ("required", "named")
    if forced:
        reference = True
    elif gold is not None and gold.expected_tool_call is not None:
        reference = gold.expected_tool_call
    else:
        reference = reference_decision(h, profile.tool_call_rate)
    flipped = not forced and flip_drawn(h, profile.seed, profile.flip_rate)
    self_flipped = not forced and self_flip_drawn(h, profile.seed, repeat, profile.self_flip_rate)
    decision = reference ^ flipped ^ self_flipped
    calls: tuple[Tool, ...] = ()
    if decision:
        parallel_ok = body.get("parallel_tool_calls") is not False
        calls = choose_tools(h, tools, mode, named, parallel_ok, profile.parallel_rate)
    return Decision(True, reference, decision, flipped, calls, self_flipped)


def agent_decision(profile: Profile, body: Mapping[str, Any], h: str, step: AgentStep) -> Decision:
    """An agent step's decision: the step's action (the reference's, or this profile's deviation), flipped by
    ``flip_rate`` like any decision (a flipped call answers with words; a flipped answer calls a tool by hash)."""
    flipped = flip_drawn(h, profile.seed, profile.flip_rate)
    return Decision(True, step.reference_calls, step.calling != flipped, flipped)


def agent_calls(step: AgentStep, tools: list[Tool], h: str) -> list[PlannedCall]:
    """The calls of a calling agent decision: the step's, or (a flipped answer) one tool picked by hash."""
    if step.calling:
        return list(step.calls)
    tool = tools[int(unit(h, "agent", "flip") * len(tools))]
    return [PlannedCall(tool, schema_args.generate(tool.schema, f"{h}:agent:flip"))]


FAULT_ORDER = ("error_status", "rate_limit", "truncate", "stream_error")


def pick_fault(profile: Profile, h: str, attempt: int) -> str | None:
    """At most one injected fault per request, from ONE draw partitioned by the fault rates, so each
    fault's marginal rate is exactly its knob (the rates must sum to at most 1)."""
    rates = (profile.error_rate, profile.rate_limit_rate, profile.truncate_rate, profile.stream_error_rate)
    if not any(rates):
        return None
    u = unit(*_fault_parts(profile, h, attempt, "fault"))
    edge = 0.0
    for name, rate in zip(FAULT_ORDER, rates, strict=True):
        edge += rate
        if u < edge:
            return name
    return None


def jitter_ms(profile: Profile, h: str, attempt: int) -> float:
    """Uniform in [-ttft_jitter_ms, +ttft_jitter_ms] (the mean TTFT stays ttft_ms)."""
    if not profile.ttft_jitter_ms:
        return 0.0
    return (2.0 * unit(*_fault_parts(profile, h, attempt, "jitter")) - 1.0) * profile.ttft_jitter_ms


# ------------------------------------------------------------------------------------------ tool calls


@dataclass
class ToolCall:
    index: int
    id: str
    name: str
    arguments: str
    broken: str | None  # None | "missing_required" | "wrong_type" | "unparseable"
    fragments: list[str] = field(default_factory=list)
    wrong_tool: bool = False  # another tool than the reference's (wrong_tool_rate)
    changed: tuple[str, ...] = ()  # argument keys whose value differs from the reference's (wrong_value_rate)


def tool_call_id(h: str, index: int) -> str:
    return "call_" + hashlib.sha256(f"{h}:id:{index}".encode()).hexdigest()[:24]


def split_fragments(text: str) -> list[str]:
    """Argument text as tokenizer-sized fragments (joined they give back ``text``)."""
    if len(text) > HUGE_ARG_CHARS // 2:  # huge_args: a handful of big fragments, not 250k events
        return [text[i : i + HUGE_FRAGMENT_CHARS] for i in range(0, len(text), HUGE_FRAGMENT_CHARS)]
    return _FRAGMENT_RE.findall(text) or [""]


def _make_huge(args: Any) -> Any:
    """Replace the first string value with ~1 MB of text (or add one) — the huge_args quirk."""
    huge = ("lorem ipsum dolor sit amet " * (HUGE_ARG_CHARS // 27 + 1))[:HUGE_ARG_CHARS]
    if isinstance(args, dict):
        for key, value in args.items():
            if isinstance(value, str):
                return {**args, key: huge}
        return {**args, "padding": huge}
    return {"padding": huge}


def build_tool_calls(profile: Profile, planned: list[PlannedCall], h: str, attempt: int,
                     huge: bool = False) -> list[ToolCall]:
    """The wire calls of the planned ones: arguments serialised (or broken by ``bad_args_rate``)."""
    out: list[ToolCall] = []
    for index, plan in enumerate(planned):
        tool, args = plan.tool, plan.args
        if huge and index == 0:
            args = _make_huge(args)
        broken: str | None = None
        if chance(profile.bad_args_rate, *_fault_parts(profile, h, attempt, f"bad_args:{index}")):
            wanted = schema_args.BREAK_KINDS[
                int(unit(*_fault_parts(profile, h, attempt, f"bad_kind:{index}")) * len(schema_args.BREAK_KINDS))
            ]
            text, broken = schema_args.break_arguments(args, tool.schema, wanted)
        else:
            text = schema_args.dumps_arguments(args)
        call = ToolCall(index, tool_call_id(h, index), tool.name, text, broken, wrong_tool=plan.wrong_tool,
                        changed=plan.changed)
        call.fragments = split_fragments(text)
        out.append(call)
    return out


# ---------------------------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Token:
    kind: str  # "reasoning" | "content" | "tool"
    text: str
    index: int = 0  # tool-call index for kind "tool"
    header: bool = False  # the tool-call delta that carries id/type/name


@dataclass
class Chunk:
    """One token-bearing SSE event: consecutive tokens of the same kind (and tool index)."""

    kind: str
    index: int
    header: bool
    text: str
    first_token: int
    last_token: int

    @property
    def n_tokens(self) -> int:
        return self.last_token - self.first_token + 1


def filler_words(h: str, purpose: str, n: int, words: tuple[str, ...]) -> list[str]:
    rng = random.Random(f"{h}:{purpose}")
    return [rng.choice(words) for _ in range(n)]


def _word_tokens(kind: str, words: list[str]) -> list[Token]:
    return [Token(kind, w if i == 0 else " " + w) for i, w in enumerate(words)]


def tool_tokens(calls: list[ToolCall], interleave: bool) -> list[Token]:
    """Header token then argument fragments per call; interleaved round-robin by index if asked."""
    per_call = [[Token("tool", "", c.index, True)] + [Token("tool", f, c.index) for f in c.fragments] for c in calls]
    if not interleave:
        return [t for seq in per_call for t in seq]
    out: list[Token] = []
    for i in range(max((len(s) for s in per_call), default=0)):
        out.extend(seq[i] for seq in per_call if i < len(seq))
    return out


def group_chunks(tokens: list[Token], per_chunk: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for i, tok in enumerate(tokens):
        last = chunks[-1] if chunks else None
        if (
            last is not None
            and last.kind == tok.kind
            and last.index == tok.index
            and not tok.header
            and last.n_tokens < per_chunk
        ):
            last.text += tok.text
            last.last_token = i
        else:
            chunks.append(Chunk(tok.kind, tok.index, tok.header, tok.text, i, i))
    return chunks


# ------------------------------------------------------------------------------------------------- plan


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
    prompt_script: str  # the script of the last user message (scripts.prompt_script)
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
    text_calls: list[dict[str, Any]] = field(default_factory=list)  # calls written into the content
    agent: dict[str, Any] | None = None  # an agent task's step (agent.AgentStep.truth), None otherwise

    @property
    def completion_tokens(self) -> int:
        return len(self.tokens)

    def has(self, quirk: str) -> bool:
        return quirk in self.quirks


def applied_quirks(
    profile: Profile,
    h: str,
    attempt: int,
    *,
    stream: bool,
    fault: str | None,
    has_tool_calls: bool,
    n_calls: int,
    has_content: bool,
    usage_wanted: bool,
) -> tuple[str, ...]:
    """The subset of the profile's quirks that applies (and is recorded) for this response."""
    if not profile.quirks or fault in ("error_status", "rate_limit"):
        return ()
    if profile.quirk_rate < 1.0 and not chance(profile.quirk_rate, *_fault_parts(profile, h, attempt, "quirks")):
        return ()
    if not stream and fault is not None:
        return ()
    applicable = {
        "no_finish_reason": True,
        "tool_calls_under_stop": has_tool_calls,
        "usage_in_last_content_chunk": usage_wanted,
        "repeat_tool_header": has_tool_calls,
        "interleave_parallel": n_calls >= 2,
        "huge_args": has_tool_calls,
        "invalid_utf8": has_content,
        "json_body": fault is None,
        "html_body": fault is None,
        "empty_body": fault is None,
        "broken_template": has_tool_calls,
        "require_reasoning_content": False,  # a request check: listed only on the 400 it causes
    }
    out = [q for q in profile.quirks if applicable.get(q, True) and (stream or q not in STREAM_ONLY_QUIRKS)]
    body = next((q for q in out if q in BODY_QUIRKS), None)
    if body == "json_body":
        out = [q for q in out if q in _JSON_BODY_COMPATIBLE and q not in ("html_body", "empty_body")]
    elif body is not None:
        out = [body]
    return tuple(dict.fromkeys(out))


def make_plan(profile: Profile, body: Mapping[str, Any], attempt: int, h: str | None = None,
              gold: GoldEntry | None = None, repeat: int = 1, agent: AgentEntry | None = None) -> Plan:
    """Decide everything for one request. ``gold`` = the request's gold labels (ignored unless the profile
    has ``follow_gold``); ``repeat`` = the item's repeat (the ``self_flip_rate`` draw); ``agent`` = the agent
    task the request is a step of (:mod:`.agent`; with tools and ``tool_choice`` auto). Raises
    :class:`RequestError` for malformed bodies."""
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise RequestError("'messages' must be a non-empty array", "messages")
    h = h or decision_key(body)
    stream = bool(body.get("stream"))
    opts = body.get("stream_options")
    include_usage = stream and isinstance(opts, Mapping) and bool(opts.get("include_usage"))
    usage_wanted = include_usage and not profile.omit_usage
    model = body.get("model") if isinstance(body.get("model"), str) and body.get("model") else profile.served_model
    max_tokens = max_tokens_of(body)
    gold = gold if profile.follow_gold else None
    tools = request_tools(body)
    step = None
    if agent is not None and tools and parse_tool_choice(body, tools)[0] == "auto":
        step = decide_step(profile, agent, body, tools, h, attempt)
    decision = decide(profile, body, h, gold, repeat) if step is None else agent_decision(profile, body, h, step)
    fault = pick_fault(profile, h, attempt)
    reasoning_only = chance(profile.reasoning_only_rate, *_fault_parts(profile, h, attempt, "reasoning_only"))
    calls_wanted = decision.decision and not reasoning_only
    planned: list[PlannedCall] = []
    dropped, form = 0, None
    if calls_wanted and step is not None:
        planned, dropped = deviate(profile, agent_calls(step, tools, h), tools, h, attempt)
        form = call_form(profile, h, attempt)
    elif calls_wanted:
        from_gold = gold_calls(gold, tools) if decision.decision == decision.reference and \
            parse_tool_choice(body, tools)[0] != "named" else None
        planned, dropped = deviate(profile, reference_calls(decision.calls, h, from_gold), tools, h, attempt)
        form = call_form(profile, h, attempt)
    as_text = form == "text"
    # Language drift concerns real answers only (not calls written as text, not reasoning-only responses).
    answers = not calls_wanted and not reasoning_only
    script = scripts.prompt_script(body)
    drift = answers and chance(profile.language_drift_rate, *_fault_parts(profile, h, attempt, "language_drift"))
    content_script = (scripts.drift_script(script) if drift else script) if answers else None
    quirks = applied_quirks(
        profile,
        h,
        attempt,
        stream=stream,
        fault=fault,
        has_tool_calls=calls_wanted and not as_text,
        n_calls=len(planned) if calls_wanted and not as_text else 0,
        has_content=(not calls_wanted or as_text) and not reasoning_only,
        usage_wanted=usage_wanted,
    )

    tokens: list[Token] = []
    gold_answer = False  # the content is the agent task's answer (matches its final_text_pattern)
    n_reasoning = profile.reasoning_tokens or (profile.output_tokens if reasoning_only else 0)
    tokens += _word_tokens("reasoning", filler_words(h, "reasoning", n_reasoning, _REASONING_WORDS))
    tool_calls: list[ToolCall] = []
    text_calls: list[dict[str, Any]] = []
    if calls_wanted and as_text:
        text_calls = [{"name": c.tool.name, "arguments": c.args, "wrong_tool": c.wrong_tool,
                       "changed": list(c.changed)} for c in planned]
        tokens += [Token("content", f) for f in split_fragments(text_content(planned))]
        finish = "stop"
    elif calls_wanted:
        tool_calls = build_tool_calls(profile, planned, h, attempt, huge="huge_args" in quirks)
        tokens += tool_tokens(tool_calls, interleave="interleave_parallel" in quirks)
        finish = "tool_calls"
        if form == "truncated":
            tokens = _cut_last_call(tokens)
            finish = "length"
    else:
        final = step.answer_text if step is not None and step.action == "answer" and not decision.flipped else None
        if content_script is not None and final is not None and not drift:
            tokens += [Token("content", f) for f in split_fragments(final)]  # the task's gold answer
            gold_answer = True
        elif content_script is not None:
            words = scripts.WORDS.get(content_script, _CONTENT_WORDS)
            tokens += _word_tokens("content", filler_words(h, "content", profile.output_tokens, words))
        finish = "stop"
    if max_tokens is not None and len(tokens) > max_tokens:
        tokens = tokens[:max_tokens]
        finish = "length"
    chunks = group_chunks(tokens, profile.tokens_per_chunk)
    if tool_calls:
        _trim_tool_calls(tool_calls, tokens)
    fault_after = None
    if fault in ("truncate", "stream_error"):
        fault_after = _fault_cut(profile, h, attempt, chunks)
    return Plan(
        profile=profile.name,
        request_hash=h,
        attempt=attempt,
        stream=stream,
        include_usage=include_usage,
        model=model,
        decision=decision,
        fault=fault,
        reasoning_only=reasoning_only,
        prompt_script=script,
        content_script=content_script,
        language_drift=drift,
        quirks=quirks,
        tool_calls=tool_calls,
        tokens=tokens,
        chunks=chunks,
        finish_reason=finish,
        prompt_tokens=prompt_tokens_of(body),
        jitter_ms=jitter_ms(profile, h, attempt),
        fault_after_chunks=fault_after,
        gold=gold is not None,
        call_form=form,
        dropped_calls=dropped,
        text_calls=text_calls,
        agent={**step.truth(), "gold_answer": gold_answer} if step is not None else None,
    )


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


def _fault_cut(profile: Profile, h: str, attempt: int, chunks: list[Chunk]) -> int:
    """How many token chunks go out before a truncate/stream_error: 25-75 % of them, at least one when
    there are two or more (so the fault is truly mid-stream)."""
    if len(chunks) < 2:
        return 0
    frac = 0.25 + 0.5 * unit(*_fault_parts(profile, h, attempt, "fault_at"))
    return min(len(chunks) - 1, max(1, int(len(chunks) * frac)))


def token_counts(chunks: list[Chunk]) -> dict[str, int]:
    """Tokens per kind across ``chunks`` (reasoning, content, tool)."""
    out = {"reasoning": 0, "content": 0, "tool": 0}
    for c in chunks:
        out[c.kind] += c.n_tokens
    return out


def sent_tool_calls(plan: Plan, chunks_sent: int) -> list[dict[str, Any]]:
    """Truth-log view of the tool calls whose deltas were actually written (first ``chunks_sent``)."""
    args: dict[int, str] = {}
    for c in plan.chunks[:chunks_sent]:
        if c.kind == "tool":
            args[c.index] = args.get(c.index, "") + c.text
    out = []
    for call in plan.tool_calls:
        if call.index in args:
            out.append(
                {
                    "index": call.index,
                    "id": call.id,
                    "name": call.name,
                    "arguments": args[call.index],
                    "broken": call.broken,
                    "wrong_tool": call.wrong_tool,
                    "changed": list(call.changed),
                }
            )
    return out
