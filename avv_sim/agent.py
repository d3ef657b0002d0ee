"""Agent behaviour of the simulated model (pure, stateless): what to do at a step of an agent task, decided from
the request's message history alone.

**Which requests.** The sample file the simulator reads for gold (``--gold FILE``; the harness passes its own)
lists the agent tasks (lines with ``agent``). A request belongs to a task when its first messages are the task's
messages (compared as :func:`avv_sim.gold.gold_key` compares them: ids, reasoning and ``_input`` roles do not
matter) and its tools are the task's; the messages after them are the trajectory so far. Other requests are
answered as before.

**The history.** After the task's messages, each assistant message with ``tool_calls`` and the ``tool`` messages
after it are one *tool turn*; a turn is an *error turn* when one of its tool messages starts with ``Error``.
Progress ``p`` = the tool turns that moved the task on: not error turns, and not a repeat of the calls of the
last turn that counted (a retry after an error counts; a loop does not).

**The reference** (shared by every profile with the same ``steps_to_finish``): after an error turn it retries the
calls of that turn; otherwise, while ``p < steps_to_finish`` it makes step ``p``'s call — the task's
``tool_results[p]`` (its tool and partial arguments, required arguments filled from the schema), or a tool picked
by hash past the recorded ones — and then it answers with text (matching ``final_text_pattern`` when the task has
one, else words). ``steps_to_finish`` null = the number of the task's ``tool_results``.

**This profile's deviations**, each a draw over (seed, decision key, attempt, knob), the first that applies:

- after an error turn, ``give_up_on_error_rate``: answer with text instead of retrying (``give_up``);
- after a tool turn, ``loop_rate``: repeat the last turn's calls (``loop``);
- where the reference answers, ``extra_steps_rate``: call a tool picked by hash instead (``extra``);

then ``flip_rate`` may turn a call into an answer or an answer into a call, and the call deviations of
:mod:`avv_sim.chosen_calls` apply to the calls as to any other response. Every decision is in the truth log (``agent``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import avv_sim.schema_args as schema_args
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_sim.chosen_calls import PlannedCall
from avv_sim.decision_key import content_text, conversation
from avv_sim.draws import chance, unit
from avv_sim.gold import gold_key
from avv_sim.profiles import Profile
from avv_sim.request import Tool

ERROR_PREFIX = "Error"
ACTIONS = ("call", "retry", "answer", "give_up", "loop", "extra")
CALLING = frozenset({"call", "retry", "loop", "extra"})


@dataclass(frozen=True)
class AgentEntry:
    """An agent task of the gold file, as the simulator needs it."""

    prefix: int  # the number of the task's own messages
    steps: tuple[tuple[str, JSONObject], ...]  # (tool name, partial arguments) of tool_results, in order
    final_text_pattern: str | None = None


@dataclass
class AgentBook:
    """The agent tasks of a sample file, found again by a request's first messages and tools."""

    entries: dict[tuple[int, str], AgentEntry] = field(default_factory=dict)

    def add(self, obj: JSONMapping) -> None:
        """Add a sample line's task (lines that are not valid tasks are ignored; the harness rejects them)."""
        agent, messages = obj.get("agent"), obj.get("messages")
        if not isinstance(agent, Mapping) or not isinstance(messages, list) or not messages:
            return
        results = agent.get("tool_results") or []
        steps = tuple((str(r.get("name")), dict(r.get("arguments") or {})) for r in results
                      if isinstance(r, Mapping) and isinstance(r.get("arguments", {}), Mapping))
        pattern = agent.get("final_text_pattern")
        entry = AgentEntry(len(messages), steps, pattern if isinstance(pattern, str) else None)
        self.entries.setdefault((len(messages), gold_key(obj)), entry)

    def find(self, body: JSONMapping) -> AgentEntry | None:
        messages = body.get("messages")
        if not self.entries or not isinstance(messages, list):
            return None
        for length in sorted({n for n, _ in self.entries}, reverse=True):
            if length <= len(messages):
                start = {"messages": messages[:length], "tools": body.get("tools")}
                entry = self.entries.get((length, gold_key(start)))
                if entry is not None:
                    return entry
        return None

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Turn:
    calls: tuple[tuple[str, JSONValue], ...]  # (name, arguments as parsed JSON, else the raw text)
    error: bool  # one of its tool messages starts with "Error"

    @property
    def key(self) -> tuple[tuple[str, str], ...]:
        return tuple((n, json.dumps(a, sort_keys=True, ensure_ascii=False)) for n, a in self.calls)


def _parsed(text: object) -> JSONValue:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def tool_turns(messages: Sequence[JSONValue]) -> list[Turn]:
    """The tool turns of a trajectory's messages (the ones after the task's own)."""
    turns: list[JSONObject] = []
    for message in conversation(list(messages)):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "assistant" and message.get("tool_calls"):
            turns.append({"calls": tuple((c.get("name"), _parsed(c.get("arguments"))) for c in message["tool_calls"]),
                          "error": False})
        elif message.get("role") == "tool" and turns:
            turns[-1]["error"] |= content_text(message.get("content")).startswith(ERROR_PREFIX)
    return [Turn(t["calls"], t["error"]) for t in turns]


def progress(turns: Sequence[Turn]) -> int:
    """Tool turns that moved the task on (module docstring)."""
    p, last_counted = 0, None
    for turn in turns:
        if not turn.error and turn.key != last_counted:
            p += 1
            last_counted = turn.key
    return p


@dataclass(frozen=True)
class AgentStep:
    """What a profile does at one step (truth log ``agent``)."""

    action: str  # one of ACTIONS
    reference_calls: bool  # the reference would call a tool here
    tool_turns: int  # tool turns in the history
    progress: int  # p
    steps_to_finish: int
    after_error: bool  # the last tool turn was an error turn
    calls: tuple[PlannedCall, ...] = ()  # for a calling action
    answer_text: str | None = None  # the reference's final answer (matches final_text_pattern), else None

    @property
    def calling(self) -> bool:
        return self.action in CALLING

    def truth(self) -> JSONObject:
        return {"action": self.action, "reference_calls": self.reference_calls, "tool_turns": self.tool_turns,
                "progress": self.progress, "steps_to_finish": self.steps_to_finish, "after_error": self.after_error}


def _tool(tools: Sequence[Tool], name: str) -> Tool | None:
    return next((t for t in tools if t.name == name), None)


def _by_hash(tools: Sequence[Tool], h: str, purpose: str) -> PlannedCall:
    tool = tools[int(unit(h, "agent", purpose) * len(tools))]
    return PlannedCall(tool, schema_args.generate(tool.schema, f"{h}:agent:{purpose}"))


def step_call(entry: AgentEntry, p: int, tools: Sequence[Tool], h: str) -> PlannedCall:
    """The reference's call at progress ``p``: the task's recorded step, else a tool picked by hash."""
    if p < len(entry.steps):
        name, partial = entry.steps[p]
        tool = _tool(tools, name)
        if tool is not None:
            schema = tool.schema if isinstance(tool.schema, Mapping) else {}
            generated = schema_args.generate(schema, f"{h}:agent:step:{p}")
            required = set(schema.get("required") or [])
            base = {k: v for k, v in generated.items() if k in required} if isinstance(generated, dict) else {}
            return PlannedCall(tool, {**base, **partial})
    return _by_hash(tools, h, f"past:{p}")


def repeat_calls(turn: Turn, tools: Sequence[Tool]) -> tuple[PlannedCall, ...]:
    """The calls of a turn again (a call whose tool is not in the request keeps its name, without a schema)."""
    return tuple(PlannedCall(_tool(tools, name) or Tool(name, {}), args if isinstance(args, dict) else {})
                 for name, args in turn.calls)


def answer_text(pattern: str | None, h: str) -> str | None:
    """A text matching ``pattern`` (rstr's xeger, seeded by the decision key, bounded in length; the check
    bounded in time); None when it cannot be made."""
    if pattern is None:
        return None
    from avv_core.bounded_schema import search

    try:
        text = schema_args.xeger(pattern, random.Random(f"{h}:agent:answer"))
        return text if search(pattern, text) else None
    except Exception:  # a regex feature xeger cannot invert, or a check that did not finish (PatternTimeout)
        return None


def decide_step(profile: Profile, entry: AgentEntry, body: JSONMapping, tools: Sequence[Tool], h: str,
                attempt: int) -> AgentStep:
    """This profile's action at this step of the task (module docstring)."""
    turns = tool_turns(body["messages"][entry.prefix:])
    p = progress(turns)
    finish = profile.steps_to_finish if profile.steps_to_finish is not None else len(entry.steps)
    last = turns[-1] if turns else None
    after_error = bool(last and last.error)
    reference_calls = after_error or p < finish

    def drawn(rate: float, knob: str) -> bool:
        return chance(rate, profile.seed, h, attempt, knob)

    def step(action: str, calls: tuple[PlannedCall, ...] = (), text: str | None = None) -> AgentStep:
        return AgentStep(action, reference_calls, len(turns), p, finish, after_error, calls, text)

    if last is not None and after_error:
        if drawn(profile.give_up_on_error_rate, "give_up"):
            return step("give_up")
        return step("retry", repeat_calls(last, tools))
    if last is not None and drawn(profile.loop_rate, "loop"):
        return step("loop", repeat_calls(last, tools))
    if p < finish:
        return step("call", (step_call(entry, p, tools, h),))
    if drawn(profile.extra_steps_rate, "extra_step"):
        return step("extra", (_by_hash(tools, h, "extra"),))
    return step("answer", text=answer_text(entry.final_text_pattern, h))


__all__ = ["ACTIONS", "AgentBook", "AgentEntry", "AgentStep", "Turn", "decide_step", "progress", "tool_turns"]
