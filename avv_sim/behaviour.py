"""Pure, deterministic decisions of a simulated vendor: the reference decision, flips, which tools, faults, jitter,
broken arguments, the quirk draw. :mod:`avv_sim.plan` puts them together into one response.

Nothing here does I/O or reads a clock, so every choice the server makes for a request can be
recomputed from (profile, request body, attempt) alone. Derivations (see docs/simulator.md):

- reference decision: (decision key, tool_call_rate) — same for every profile with that rate;
- flip: (decision key, seed, "flip");
- self-flip (sampling noise, ``self_flip_rate``): (decision key, seed, repeat, "self_flip") — the repeat comes from
  the ``X-AVV-Item`` tag (:mod:`.item_tag`), so a retry of an item meets the same decision and another repeat
  may not;
- the answer's words (:func:`answer_words`): the most likely words by decision key; the shift
  (``answer_shift_rate``) and the sampled words (``sampling_rate``, not at ``temperature`` 0) by (decision key,
  seed, repeat) — so twins (one profile, two seeds) answer a body from one distribution, independently;
- which tools, parallel calls, argument values, filler text: decision key only (with gold, see gold.py: the
  gold labels of the request's messages and tools);
- faults, broken arguments, reasoning-only, language drift, jitter, quirks and the tool-call deviations of
  chosen_calls.py (wrong tool, wrong value, dropped parallel call, call as text, truncated call): (seed, decision key,
  attempt, knob);
- the script of the content: the prompt's (:mod:`.writing_systems`), another one on a language drift;
- agent tasks (:mod:`.agent`): whether to call or answer, and which call, from the message history (the
  reference) and (seed, decision key, attempt, knob) draws (give up, loop, extra step); flips apply on top.

The decision key (:mod:`avv_sim.decision_key`) is the request hash of the body with its history reduced to what
a chat template renders, so a raw-completions prompt meets the same decisions as its chat request.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import avv_sim.schema_args as schema_args
from avv_core.json_types import JSONMapping
from avv_sim.agent import AgentStep
from avv_sim.chosen_calls import PlannedCall
from avv_sim.draws import chance, unit
from avv_sim.gold import GoldEntry
from avv_sim.profiles import FAULT_RATE_KNOBS, Profile
from avv_sim.quirks import Quirk
from avv_sim.request import Tool, parse_tool_choice, request_tools
from avv_sim.tokens import ToolCall, filler_words, split_fragments, tool_call_id

#: The faults of the four fault knobs (profiles.FAULT_RATE_KNOBS, in that order): the truth log's ``fault``.
FAULT_ORDER = ("error_status", "rate_limit", "truncate", "stream_error")


def draw_parts(profile: Profile, h: str, attempt: int, knob: str) -> tuple[int, str, int, str]:
    """The parts of a per-(body, attempt) draw of ``knob``: (seed, decision key, attempt, knob)."""
    return (profile.seed, h, attempt, knob)


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


def decide(profile: Profile, body: JSONMapping, h: str, gold: GoldEntry | None = None,
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


def agent_decision(profile: Profile, body: JSONMapping, h: str, step: AgentStep) -> Decision:
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


def pick_fault(profile: Profile, h: str, attempt: int) -> str | None:
    """At most one injected fault per request, from ONE draw partitioned by the fault rates, so each
    fault's marginal rate is exactly its knob (the rates must sum to at most 1)."""
    rates = tuple(getattr(profile, knob) for knob in FAULT_RATE_KNOBS)
    if not any(rates):
        return None
    u = unit(*draw_parts(profile, h, attempt, "fault"))
    edge = 0.0
    for name, rate in zip(FAULT_ORDER, rates, strict=True):
        edge += rate
        if u < edge:
            return name
    return None


def fault_cut(profile: Profile, h: str, attempt: int, n_chunks: int) -> int:
    """How many token chunks go out before a truncate/stream_error: 25-75 % of them, at least one when
    there are two or more (so the fault is truly mid-stream)."""
    if n_chunks < 2:
        return 0
    frac = 0.25 + 0.5 * unit(*draw_parts(profile, h, attempt, "fault_at"))
    return min(n_chunks - 1, max(1, int(n_chunks * frac)))


def jitter_ms(profile: Profile, h: str, attempt: int) -> float:
    """Uniform in [-ttft_jitter_ms, +ttft_jitter_ms] (the mean TTFT stays ttft_ms)."""
    if not profile.ttft_jitter_ms:
        return 0.0
    return (2.0 * unit(*draw_parts(profile, h, attempt, "jitter")) - 1.0) * profile.ttft_jitter_ms


def reasoning_only_drawn(profile: Profile, h: str, attempt: int) -> bool:
    """The response ends after its reasoning (``reasoning_only_rate``)."""
    return chance(profile.reasoning_only_rate, *draw_parts(profile, h, attempt, "reasoning_only"))


def language_drift_drawn(profile: Profile, h: str, attempt: int) -> bool:
    """The content is written in another script than the prompt's (``language_drift_rate``)."""
    return chance(profile.language_drift_rate, *draw_parts(profile, h, attempt, "language_drift"))


def quirks_drawn(profile: Profile, h: str, attempt: int) -> bool:
    """The profile's quirks apply to this (body, attempt) (``quirk_rate``; always at 1)."""
    return profile.quirk_rate >= 1.0 or chance(profile.quirk_rate, *draw_parts(profile, h, attempt, "quirks"))


@dataclass(frozen=True)
class AnswerWords:
    """The content words of an answer and how they were drawn."""

    words: list[str]
    sampled: int  # words drawn by sampling_rate (0 when greedy)
    shifted: bool  # written around the other most likely sequence (answer_shift_rate)


def answer_words(profile: Profile, h: str, n: int, words: tuple[str, ...], repeat: int, greedy: bool) -> AnswerWords:
    """The ``n`` content words of an answer: the body's most likely words (the same for every profile: the
    filler of the decision key), or on an ``answer_shift_rate`` draw per (key, seed, repeat) another most likely
    sequence; then, unless ``greedy`` (the request's ``temperature`` is 0), each word replaced with probability
    ``sampling_rate`` by one drawn uniformly from ``words`` (one generator per (key, seed, repeat)). With both knobs
    at 0 the words are exactly the filler the simulator always wrote."""
    shifted = chance(profile.answer_shift_rate, h, profile.seed, repeat, "answer_shift")
    likely = filler_words(h, "content:shifted" if shifted else "content", n, words)
    if greedy or profile.sampling_rate <= 0.0:
        return AnswerWords(likely, 0, shifted)
    rng = random.Random(f"{h}:{profile.seed}:{repeat}:sampling")
    out: list[str] = []
    sampled = 0
    for word in likely:
        drawn = rng.random() < profile.sampling_rate
        out.append(rng.choice(words) if drawn else word)
        sampled += drawn
    return AnswerWords(out, sampled, shifted)


# ------------------------------------------------------------------------------------------ tool calls


def build_tool_calls(profile: Profile, planned: Sequence[PlannedCall], h: str, attempt: int,
                     effects: Sequence[Quirk] = ()) -> list[ToolCall]:
    """The wire calls of the planned ones: arguments shaped by the quirks' ``call_arguments`` hooks, then
    serialised (or broken by ``bad_args_rate``)."""
    out: list[ToolCall] = []
    for index, plan in enumerate(planned):
        tool, args = plan.tool, plan.args
        for quirk in effects:
            if quirk.call_arguments is not None:
                args = quirk.call_arguments(index, args)
        broken: str | None = None
        if chance(profile.bad_args_rate, *draw_parts(profile, h, attempt, f"bad_args:{index}")):
            kinds = schema_args.BREAK_KINDS
            wanted = kinds[int(unit(*draw_parts(profile, h, attempt, f"bad_kind:{index}")) * len(kinds))]
            text, broken = schema_args.break_arguments(args, tool.schema, wanted)
        else:
            text = schema_args.dumps_arguments(args)
        call_id = tool_call_id(h, 0 if profile.repeat_tool_call_ids else index)  # repeat_tool_call_ids: one id
        call = ToolCall(index, call_id, tool.name, text, broken, wrong_tool=plan.wrong_tool,
                        changed=plan.changed)
        call.fragments = split_fragments(text)
        out.append(call)
    return out
