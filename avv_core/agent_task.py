"""Agent tasks: the ``agent`` object of a sample line, validated when the sample file is read, and the tool
results the harness plays back to a vendor's calls (pure core: no I/O, no Locust).

A sample line with ``agent`` is a task followed over several steps (:mod:`avv_harness.wire.agent_loop` runs the loop):

- ``max_steps`` (default 10, at most 100): requests the trajectory may make;
- ``tool_results``: ``[{name, arguments, content}]``; an entry *matches* a call when its ``name`` is the call's
  and its ``arguments`` — a partial match — all equal the call's canonical values
  (:func:`avv_core.canonical.partial_match`: the keys given must be there with equal values, other keys do not
  matter; ``{}`` or no ``arguments`` matches any call of that tool). A call gets the ``content`` of the first
  matching entry not used yet in this trajectory; when every matching entry has been used, the last of them again
  (so a test run before and after a fix can have two recorded results). The list in order is also the path the
  simulated reference model follows (:mod:`avv_sim.agent`);
- ``default_result``: the answer to a call nothing matches (default :data:`DEFAULT_RESULT`);
- ``inject_error: {step, content}``: every tool answer to the calls of that step is replaced by ``content``
  (default :data:`DEFAULT_ERROR`), to see whether the vendor recovers;
- gold for the end, optional: ``final_calls`` (``[{name, arguments}]`` as ``expected_calls``: each must be made
  by some call of the trajectory) and ``final_text_pattern`` (a regular expression the final answer's content
  must contain, ``re.search``).

A ``content`` that is not a string is sent as its JSON text. Names must be tools of the sample's request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from avv_core.bounded_schema import PatternTimeout, search
from avv_core.canonical import UNPARSED, parse_arguments, partial_match
from avv_core.errors import InputError
from avv_core.json_types import JSONMapping, JSONObject, JSONValue

AGENT_KEY = "agent"
DEFAULT_MAX_STEPS = 10
MAX_STEPS_LIMIT = 100
DEFAULT_RESULT = "No result recorded for this call."
DEFAULT_ERROR = "Error: upstream timeout (503)"
AGENT_FIELDS = ("max_steps", "tool_results", "default_result", "inject_error", "final_calls", "final_text_pattern")

#: Where a tool answer came from (the ``source`` of each entry of a record's ``tool_results`` column).
SOURCE_MATCHED, SOURCE_DEFAULT, SOURCE_INJECTED = "matched", "default", "injected_error"


@dataclass(frozen=True)
class ToolResult:
    """One recorded tool result: the call it answers (name, partial arguments) and what it returns."""

    name: str  # the tool's name as in the request's tools
    arguments: JSONObject  # partial match on canonical values ({} = any call of the tool)
    content: str  # the tool message's content


@dataclass(frozen=True)
class InjectedError:
    step: int  # the step whose calls get ``content`` as every tool answer
    content: str  # e.g. "Error: upstream timeout (503)"


@dataclass(frozen=True)
class ToolAnswer:
    """The answer the harness sends back for one call (also written to the record's ``tool_results``)."""

    tool_call_id: str
    name: str
    source: str  # "matched" | "default" | "injected_error"
    index: int | None  # the matched entry of ``tool_results`` (None: default or injected)
    content: str

    def as_dict(self) -> JSONObject:
        return {"tool_call_id": self.tool_call_id, "name": self.name, "source": self.source, "index": self.index,
                "content": self.content}


@dataclass(frozen=True)
class AgentTask:
    """A sample's ``agent`` object (see the module docstring)."""

    max_steps: int = DEFAULT_MAX_STEPS
    tool_results: tuple[ToolResult, ...] = ()
    default_result: str = DEFAULT_RESULT
    inject_error: InjectedError | None = None
    final_calls: tuple[JSONObject, ...] | None = None  # {name, arguments} with acceptable values
    final_text_pattern: str | None = None

    @property
    def has_gold_end(self) -> bool:
        return self.final_calls is not None or self.final_text_pattern is not None

    def match(self, name: str, raw_arguments: object, used: set[int] | None = None) -> tuple[int | None, str]:
        """(index, content) of the first matching entry not in ``used`` (else the last matching one), or
        (None, ``default_result``) when no entry matches. The index is added to ``used``."""
        args = parse_arguments(raw_arguments)
        matching = [i for i, entry in enumerate(self.tool_results)
                    if entry.name == name and (not entry.arguments or (args is not UNPARSED
                                                                      and partial_match(args, entry.arguments)))]
        if not matching:
            return None, self.default_result
        used = used if used is not None else set()
        index = next((i for i in matching if i not in used), matching[-1])
        used.add(index)
        return index, self.tool_results[index].content

    def answers(self, step: int, calls: Sequence[JSONMapping], used: set[int] | None = None
                ) -> list[ToolAnswer]:
        """The tool answers to the calls (``{id, name, arguments}``) a response made at ``step`` (1-based);
        ``used`` = the entries already used in this trajectory (updated)."""
        out = []
        injected = self.inject_error if self.inject_error is not None and self.inject_error.step == step else None
        for call in calls:
            name = str(call.get("name") or "")
            if injected is not None:
                out.append(ToolAnswer(str(call.get("id") or ""), name, SOURCE_INJECTED, None, injected.content))
                continue
            index, content = self.match(name, call.get("arguments"), used)
            out.append(ToolAnswer(str(call.get("id") or ""), name, SOURCE_DEFAULT if index is None else SOURCE_MATCHED,
                                  index, content))
        return out

    def final_text_matches(self, text: str) -> bool:
        """Whether the answer matches ``final_text_pattern`` (``re.search``), decided within the regex time
        bound: the answer is the vendor's, so a search it makes run on counts as no match."""
        if self.final_text_pattern is None:
            return True
        try:
            return search(self.final_text_pattern, text or "")
        except PatternTimeout:
            return False


def _content(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _int(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{where} must be an integer from {low} to {high}, got {value!r}")
    return value


def _calls(value: object, where: str, names: set[str] | None) -> tuple[JSONObject, ...]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{where} must be a non-empty list of {{name, arguments}}")
    for i, call in enumerate(value):
        if not isinstance(call, dict) or set(call) - {"name", "arguments"}:
            raise InputError(f"{where}[{i}] must be an object with 'name' and 'arguments'")
        if not isinstance(call.get("name"), str) or not call["name"]:
            raise InputError(f"{where}[{i}].name must be a non-empty string")
        if names is not None and call["name"] not in names:
            raise InputError(f"{where}[{i}].name {call['name']!r} is not a tool of the request "
                             f"(tools: {', '.join(sorted(names))})")
        if not isinstance(call.get("arguments", {}), dict):
            raise InputError(f"{where}[{i}].arguments must be an object")
    return tuple({"name": c["name"], "arguments": dict(c.get("arguments") or {})} for c in value)


def parse_agent(obj: object, tools: Sequence[JSONValue] | None, where: str) -> AgentTask:
    """The :class:`AgentTask` of a sample line's ``agent`` value; InputError naming ``where`` (file:line) and
    the field otherwise. ``tools`` = the request's tools (their names are the only names a task may use; None skips
    that check)."""
    at = f"{where}: field 'agent'"
    if not isinstance(obj, dict):
        raise InputError(f"{at} must be an object ({', '.join(AGENT_FIELDS)})")
    unknown = sorted(set(obj) - set(AGENT_FIELDS))
    if unknown:
        raise InputError(f"{at}: unknown key(s) {', '.join(unknown)} (known: {', '.join(AGENT_FIELDS)})")
    names = None if tools is None else {
        t["function"]["name"] for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)}
    if names is not None and not names:
        raise InputError(f"{at}: an agent task needs 'tools' in the request (the vendor has nothing to call)")
    max_steps = _int(obj.get("max_steps", DEFAULT_MAX_STEPS), f"{at}.max_steps", 1, MAX_STEPS_LIMIT)
    raw_results = obj.get("tool_results", [])
    if not isinstance(raw_results, list):
        raise InputError(f"{at}.tool_results must be a list of {{name, arguments, content}}")
    results = []
    for i, entry in enumerate(raw_results):
        here = f"{at}.tool_results[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "arguments", "content"}:
            raise InputError(f"{here} must be an object with 'name', 'arguments' and 'content'")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{here}.name must be a non-empty string")
        if names is not None and name not in names:
            raise InputError(f"{here}.name {name!r} is not a tool of the request (tools: {', '.join(sorted(names))})")
        arguments = entry.get("arguments", {})
        if not isinstance(arguments, dict):
            raise InputError(f"{here}.arguments must be an object (argument → the value a call must have)")
        if "content" not in entry:
            raise InputError(f"{here}.content is missing (the tool's answer)")
        results.append(ToolResult(name, dict(arguments), _content(entry["content"])))
    default = _content(obj.get("default_result", DEFAULT_RESULT))
    inject = obj.get("inject_error")
    injected = None
    if inject is not None:
        if not isinstance(inject, dict) or set(inject) - {"step", "content"} or "step" not in inject:
            raise InputError(f"{at}.inject_error must be an object {{step, content}}")
        step = _int(inject["step"], f"{at}.inject_error.step", 1, max_steps)
        content = inject.get("content", DEFAULT_ERROR)
        if not isinstance(content, str) or not content:
            raise InputError(f"{at}.inject_error.content must be a non-empty string")
        injected = InjectedError(step, content)
    final_calls = _calls(obj["final_calls"], f"{at}.final_calls", names) if "final_calls" in obj else None
    pattern = obj.get("final_text_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise InputError(f"{at}.final_text_pattern must be a non-empty string (a regular expression)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InputError(f"{at}.final_text_pattern is not a valid regular expression ({exc})") from None
    return AgentTask(max_steps, tuple(results), default, injected, final_calls, pattern)


def agent_of(metadata: JSONMapping, tools: Sequence[JSONValue] | None = None) -> AgentTask | None:
    """The task of a sample's metadata (validated when the line was read), or None for a single request."""
    obj = metadata.get(AGENT_KEY)
    return None if obj is None else parse_agent(obj, tools, "sample")


__all__ = ["AGENT_KEY", "DEFAULT_ERROR", "DEFAULT_RESULT", "AgentTask", "InjectedError", "SOURCE_DEFAULT",
           "SOURCE_INJECTED", "SOURCE_MATCHED", "ToolAnswer", "ToolResult", "agent_of", "parse_agent"]
