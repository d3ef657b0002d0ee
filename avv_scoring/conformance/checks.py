"""The conformance checks, each declared once (scoring layer, conformance; pure): its name, what it checks, why it
matters, how Messages and Responses vendors get it, which probes it sends (:mod:`..probes`) and how it judges what
came back. docs/how-to/conformance.md lists them (:func:`render_check_table`), conformance.csv and the report show
their results (:mod:`.suite`).

A check gives each vendor one result (:data:`RESULTS`):

- ``pass``: every probe the check judged was honoured;
- ``fail``: a probe was not (the evidence names it and what came back) — a proven defect: the vendor FAILs;
- ``not_applicable``: nothing to judge: the baseline does not honour the check on any of its probes (the baseline's
  behaviour is the reference: a check it fails is not held against the other vendors), the probes could not be sent
  in the vendor's wire format (the Responses API has no ``stop``, the Messages API no ``response_format``), or they
  were not run.

The baseline is judged against itself: its result is ``pass`` or ``not_applicable``, never ``fail``. A probe the
baseline does not honour is left out for every vendor; a vendor's probe that got no answer (a 5xx, a timeout after
the retries) does not honour the check (a vendor's failure never passes a check).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from avv_core.bounded_schema import build_validator, is_valid
from avv_core.canonical import canonical_key
from avv_core.frame_rows import Cell
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.measures import is_missing
from avv_scoring.metrics.billing import flagged
from avv_scoring.metrics.conformance import FAIL, NOT_APPLICABLE, PASS
from avv_scoring.metrics.schema import parse_tool_calls
from avv_scoring.probes import Base, Probe, probe

RESULTS: tuple[str, ...] = (PASS, FAIL, NOT_APPLICABLE)
#: max_tokens of the max_tokens probes: far below any answer of the fixed story, and cutting any tool call.
MAX_TOKENS = 16
#: stop sequences of the stop probe: words any English story holds (and the simulator's filler words).
STOP = ("the", "and")
#: The json_schema probe's schema.
CITY_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
#: The sampling parameters sent out of range, and the value sent.
OUT_OF_RANGE: dict[str, float] = {"temperature": 2.5, "top_p": 1.5}
#: Characters of content quoted in evidence.
QUOTED = 60


# ----------------------------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer:
    """What came back for one probe: a records row, read once."""

    sample_id: str
    ok: bool  # status success
    http_status: int | None
    error: str  # error_kind: detail (empty on success)
    finish_reason: str | None
    calls: tuple[JSONMapping, ...]  # {id, name, arguments} as recorded
    content: str
    reasoning: str
    prompt_tokens: int | None
    completion_tokens: int | None
    anomalies: frozenset[str]
    endpoint: str

    @classmethod
    def of(cls, row: JSONMapping) -> Answer:
        def text(key: str) -> str:
            value = row.get(key)
            return "" if is_missing(value) else str(value)

        def number(key: str) -> int | None:
            value: Cell = row.get(key)
            return None if is_missing(value) else int(value)

        calls = parse_tool_calls(row.get("tool_calls")) or []
        kind, detail = text("error_kind"), text("error_detail")
        return cls(text("sample_id"), text("status") == "success", number("http_status"),
                   f"{kind}: {detail[:120]}" if kind else "", text("finish_reason") or None, tuple(calls),
                   text("content"), text("reasoning"), number("prompt_tokens"), number("completion_tokens"),
                   frozenset(filter(None, text("anomalies").split(";"))), text("endpoint") or "chat")

    def call_text(self) -> str:
        return ", ".join(f"{c.get('name')}({str(c.get('arguments'))[:80]})" for c in self.calls) or "no call"

    def summary(self) -> str:
        """What came back, in a few words (the evidence)."""
        if not self.ok:
            status = f"HTTP {self.http_status}, " if self.http_status else ""
            return f"no answer ({status}{self.error})"
        quoted = f", content {self.content[:QUOTED]!r}" if self.content else ""
        return f"finish {self.finish_reason}, {self.call_text()}{quoted}"

    def signature(self) -> tuple[tuple[JSONValue, str], ...]:
        """The calls as (name, canonical arguments), in order: equal for equal calls whatever their ids."""
        return tuple((c.get("name"), _arguments_key(c.get("arguments"))) for c in self.calls)


def _arguments_key(raw: object) -> str:
    try:
        return canonical_key(json.loads(raw)) if isinstance(raw, str) else canonical_key(raw)
    except (ValueError, RecursionError):
        return f"raw:{raw}"


# ------------------------------------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Outcome:
    result: str  # one of RESULTS
    evidence: str


@dataclass(frozen=True)
class Judged:
    """What one vendor's judgment of a check reads."""

    probes: Sequence[Probe]  # the check's probes (a suite-wide check: every probe)
    answers: Mapping[str, Answer]  # sample id → the vendor's answer
    reference: Mapping[str, Answer]  # sample id → the baseline's answer
    is_baseline: bool
    not_sent: Mapping[str, str] = field(default_factory=dict)  # sample id → why it was not sent to this vendor
    tolerance: float = 0.05  # prompt / completion tokens: the largest relative difference from the baseline


#: One unit of a per-probe check (a probe, or a stream-parity pair) → (honoured, what it shows); ``reference`` holds the
#: baseline's answers to the same probes (the vendor's own for the baseline).
Honours = Callable[[Sequence[Probe], Sequence[Answer], Sequence[Answer]], tuple[bool, str]]


def _unit_name(unit: Sequence[Probe]) -> str:
    return unit[0].sample_id.rsplit(":", 1)[0] if len(unit) > 1 else unit[0].sample_id


def per_probe(honours: Honours, pairs: bool = False) -> Callable[[Judged], Outcome]:
    """A check judged probe by probe (``pairs``: the streamed and the whole probe of one base together), with the
    baseline's answers as the reference (module docstring)."""

    def judge(data: Judged) -> Outcome:
        units: dict[str, list[Probe]] = {}
        for p in data.probes:
            units.setdefault(p.base if pairs else p.sample_id, []).append(p)
        passed: list[str] = []
        failed: list[str] = []
        excluded: list[str] = []
        missing: list[str] = []
        for unit in units.values():
            name = _unit_name(unit)
            reference = [data.reference.get(p.sample_id) for p in unit]
            if any(r is None for r in reference):
                missing.append(f"{name}: the baseline has no answer recorded")
                continue
            base = [r for r in reference if r is not None]
            honoured, shown = honours(unit, base, base)
            if not honoured:
                excluded.append(f"{name}: {shown}")
                continue
            answers = [data.answers.get(p.sample_id) for p in unit]
            if any(a is None for a in answers):
                why = next((data.not_sent[p.sample_id] for p in unit if p.sample_id in data.not_sent), "")
                missing.append(f"{name}: {why or 'no answer recorded'}")
                continue
            honoured, shown = honours(unit, [a for a in answers if a is not None], base)
            (passed if honoured else failed).append(f"{name}: {shown}")
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            return Outcome(FAIL, failed[0] + more)
        if passed:
            return Outcome(PASS, f"{len(passed)} of {len(units)} probe(s) honoured; {passed[0]}")
        if excluded:
            return Outcome(NOT_APPLICABLE, f"the baseline does not honour it: {excluded[0]}")
        return Outcome(NOT_APPLICABLE, f"not judged: {missing[0]}" if missing else "no probe")

    return judge


def _answered(answer: Answer) -> tuple[bool, str] | None:
    """(False, why) for a probe that got no answer, else None."""
    return None if answer.ok else (False, answer.summary())


def required(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    return _answered(a) or (bool(a.calls), a.summary())


def named(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    wanted = unit[0].body["tool_choice"]["function"]["name"]
    others = [c.get("name") for c in a.calls if c.get("name") != wanted]
    if not a.ok:
        return False, a.summary()
    return bool(a.calls) and not others, f"asked for {wanted}: {a.summary()}"


def none(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    return _answered(a) or (not a.calls, a.summary())


def one_call(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    return _answered(a) or (len(a.calls) <= 1, f"{len(a.calls)} call(s): {a.summary()}")


def within_max_tokens(unit: Sequence[Probe], answers: Sequence[Answer],
                      reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,), (ref,) = answers, reference
    limit = unit[0].body.get("max_tokens")
    if not a.ok:
        return False, a.summary()
    shown = f"max_tokens {limit}: completion_tokens {a.completion_tokens}, finish {a.finish_reason}"
    if a.completion_tokens is not None and isinstance(limit, int) and a.completion_tokens > limit:
        return False, shown
    if ref.finish_reason == "length" and a.finish_reason != "length":
        return False, shown + " (the baseline's answer is cut: length)"
    return True, shown


def stopped(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    stops = unit[0].body.get("stop") or []
    stops = [stops] if isinstance(stops, str) else list(stops)
    if not a.ok:
        return False, a.summary()
    found = [s for s in stops if s in a.content]
    shown = f"stop {stops}: content {a.content[:QUOTED]!r}"
    return not found, shown + (f" holds {found[0]!r}" if found else "")


def json_object(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    if not a.ok:
        return False, a.summary()
    value = _json(a.content)
    return isinstance(value, dict), f"content {a.content[:QUOTED]!r}" + ("" if isinstance(value, dict) else
                                                                         " is not a JSON object")


def json_schema(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    if not a.ok:
        return False, a.summary()
    schema = unit[0].body["response_format"]["json_schema"]["schema"]
    value = _json(a.content)
    valid = value is not _NOT_JSON and is_valid(build_validator(schema), value)
    return valid, f"content {a.content[:QUOTED]!r}" + ("" if valid else " does not fit the schema")


_NOT_JSON = object()


def _json(text: str) -> JSONValue:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def rejected(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    (a,) = answers
    name = unit[0].variant
    sent = f"{name} {unit[0].body.get(name)}"
    status = a.http_status
    if status is not None and 400 <= status < 500 and status != 429:
        return True, f"{sent}: HTTP {status} ({a.error})"
    if a.ok:
        return False, f"{sent} accepted (HTTP {status}, {a.summary()})"
    return False, f"{sent}: {a.summary()}, not a 4xx"


def same_both_ways(unit: Sequence[Probe], answers: Sequence[Answer], reference: Sequence[Answer]) -> tuple[bool, str]:
    """The streamed and the whole answer of one request: the same calls and finish reason, and the same content when
    the baseline's two answers have the same content."""
    by_variant = {p.variant: a for p, a in zip(unit, answers, strict=True)}
    ref = {p.variant: a for p, a in zip(unit, reference, strict=True)}
    streamed, whole = by_variant.get("streamed"), by_variant.get("whole")
    if streamed is None or whole is None:
        return False, "the pair is incomplete"
    for label, a in (("streamed", streamed), ("not streamed", whole)):
        if not a.ok:
            return False, f"{label}: {a.summary()}"
    shown = f"streamed: {streamed.summary()}; not streamed: {whole.summary()}"
    if streamed.signature() != whole.signature():
        return False, "other calls — " + shown
    if streamed.finish_reason != whole.finish_reason:
        return False, "another finish — " + shown
    content_fixed = ref["streamed"].content == ref["whole"].content
    if content_fixed and streamed.content != whole.content:
        return False, "other content — " + shown
    return True, shown


# ---------------------------------------------------------------------------------------- suite-wide checks


def _ok_answers(data: Judged) -> list[Answer]:
    return [a for a in data.answers.values() if a.ok]


def usage_reported(data: Judged) -> Outcome:
    """Usage present in every answer (the harness asks for it: ``stream_options.include_usage``)."""
    if any("usage_missing" in a.anomalies for a in data.reference.values()) and not data.is_baseline:
        return Outcome(NOT_APPLICABLE, "the baseline does not report usage either")
    answers = _ok_answers(data)
    missing = [a for a in answers if "usage_missing" in a.anomalies]
    if missing:
        return Outcome(FAIL, f"{len(missing)} of {len(answers)} answer(s) without usage although it was asked for; "
                             f"first: {missing[0].sample_id}")
    if data.is_baseline and any("usage_missing" in a.anomalies for a in data.reference.values()):
        return Outcome(NOT_APPLICABLE, "the baseline does not report usage")
    reported = [a for a in answers if a.prompt_tokens is not None or a.completion_tokens is not None]
    if not reported:
        return Outcome(NOT_APPLICABLE, "usage was not asked for (include_usage: false) or no answer")
    return Outcome(PASS, f"usage in {len(reported)} of {len(answers)} answer(s)")


def _ratio_outcome(ratios: list[float], what: str, tolerance: float, over: str) -> Outcome:
    median = float(np.median(ratios))
    q1, q3 = (float(v) for v in np.percentile(ratios, [25, 75]))
    shown = (f"{what} / the baseline's: median {median:.3f} (IQR {q3 - q1:.3f}) over {len(ratios)} {over}; "
             f"tolerance ±{tolerance:.0%}")
    return Outcome(FAIL if flagged(median, tolerance) else PASS, shown)


def _token_ratios(data: Judged, key: str, same_output: bool) -> list[float]:
    out = []
    for sid, a in data.answers.items():
        ref = data.reference.get(sid)
        if ref is None or not (a.ok and ref.ok):
            continue
        mine, theirs = getattr(a, key), getattr(ref, key)
        if mine is None or not theirs:
            continue
        if same_output and (a.signature(), a.content, a.reasoning) != (ref.signature(), ref.content, ref.reasoning):
            continue
        out.append(mine / theirs)
    return [r for r in out if math.isfinite(r)]


def prompt_tokens_match(data: Judged) -> Outcome:
    if data.is_baseline:
        return Outcome(PASS, "the reference")
    ratios = _token_ratios(data, "prompt_tokens", same_output=False)
    if not ratios:
        return Outcome(NOT_APPLICABLE, "no probe with prompt_tokens from both the vendor and the baseline")
    return _ratio_outcome(ratios, "prompt_tokens", data.tolerance, "probes")


def completion_tokens_match(data: Judged) -> Outcome:
    if data.is_baseline:
        return Outcome(PASS, "the reference")
    ratios = _token_ratios(data, "completion_tokens", same_output=True)
    if not ratios:
        return Outcome(NOT_APPLICABLE, "no probe answered exactly as the baseline answered it (with usage)")
    return _ratio_outcome(ratios, "completion_tokens", data.tolerance, "probes answered as the baseline did")


def _id_problem(a: Answer) -> str | None:
    ids = [str(c.get("id") or "") for c in a.calls]
    if any(not i for i in ids):
        return f"{a.sample_id}: a call without an id ({a.call_text()})"
    if len(set(ids)) < len(ids):
        return f"{a.sample_id}: ids repeat ({', '.join(ids)})"
    return None


def tool_call_ids(data: Judged) -> Outcome:
    """Every call has an id, and the ids of one answer differ."""
    if not data.is_baseline:
        ref_problems = [p for a in data.reference.values() if a.ok and (p := _id_problem(a))]
        if ref_problems:
            return Outcome(NOT_APPLICABLE, f"the baseline does not honour it: {ref_problems[0]}")
    calling = [a for a in _ok_answers(data) if a.calls]
    problems = [p for a in calling if (p := _id_problem(a))]
    if problems:
        return Outcome(NOT_APPLICABLE if data.is_baseline else FAIL,
                       ("the baseline does not honour it: " if data.is_baseline else "") + problems[0])
    if not calling:
        return Outcome(NOT_APPLICABLE, "no answer with a tool call")
    several = sum(len(a.calls) > 1 for a in calling)
    return Outcome(PASS, f"{len(calling)} answer(s) with calls ({several} with two or more): ids present and unique")


# ------------------------------------------------------------------------------------------------ probes


@dataclass(frozen=True)
class Check:
    """One conformance check (module docstring)."""

    name: str  # conformance.csv's ``check``
    title: str  # what it checks, one line
    why: str  # why it matters (docs/how-to/conformance.md)
    terms: str  # how Messages and Responses vendors get it
    judge: Callable[[Judged], Outcome]
    probes: Callable[[Mapping[str, Base], Sequence[Base]], list[Probe]] = lambda fixed, samples: []
    suite_wide: bool = False  # judged on every probe's answer (no probes of its own)


def _named_probes(fixed: Mapping[str, Base], samples: Sequence[Base]) -> list[Probe]:
    out = [probe("tool_choice_named", fixed["weather"],
                 {"tool_choice": {"type": "function", "function": {"name": "search_web"}}})]
    for b in samples:
        names = b.tool_names()
        if names:
            out.append(probe("tool_choice_named", b, {"tool_choice": {"type": "function",
                                                                      "function": {"name": names[-1]}}}))
    return out


def _max_tokens_probes(fixed: Mapping[str, Base], samples: Sequence[Base]) -> list[Probe]:
    return [probe("max_tokens", b, {"max_tokens": MAX_TOKENS, "max_completion_tokens": None})
            for b in (fixed["story"], *samples)]


def _parity_probes(fixed: Mapping[str, Base], samples: Sequence[Base]) -> list[Probe]:
    return [probe("stream_parity", b, {}, variant, streamed=variant == "streamed")
            for b in (fixed["weather"], fixed["story"], *samples) for variant in ("streamed", "whole")]


def _out_of_range_probes(fixed: Mapping[str, Base], samples: Sequence[Base]) -> list[Probe]:
    return [probe("out_of_range_rejected", fixed["hello"], {name: value}, name, temperature=None)
            for name, value in OUT_OF_RANGE.items()]


def _each(check: str, fixed_name: str, changes: JSONMapping, samples_too: bool = True,
          min_tools: int = 1) -> Callable[[Mapping[str, Base], Sequence[Base]], list[Probe]]:
    def build(fixed: Mapping[str, Base], samples: Sequence[Base]) -> list[Probe]:
        chosen = [fixed[fixed_name], *(b for b in samples if samples_too and len(b.tools) >= min_tools)]
        return [probe(check, b, changes) for b in chosen]
    return build


CHECKS: tuple[Check, ...] = (
    Check("tool_choice_required", "`tool_choice: required` yields a tool call",
          "An agent that forces a call (to extract data, to take the next step) gets text instead, and its loop "
          "breaks or answers from nothing.",
          "Messages: `tool_choice: {type: any}`; Responses: `tool_choice: required`.",
          per_probe(required), _each("tool_choice_required", "greeting", {"tool_choice": "required"})),
    Check("tool_choice_named", "a named `tool_choice` yields calls of that function only",
          "A pipeline that names the function it needs gets another one, with other arguments.",
          "Messages: `{type: tool, name}`; Responses: `{type: function, name}`.",
          per_probe(named), _named_probes),
    Check("tool_choice_none", "`tool_choice: none` yields no tool call",
          "A client that asks for words (a summary after the tools ran) gets a call it did not offer to run.",
          "Messages: `{type: none}`; Responses: `none`.",
          per_probe(none), _each("tool_choice_none", "weather", {"tool_choice": "none"})),
    Check("parallel_tool_calls_false", "`parallel_tool_calls: false` yields at most one call",
          "A client that runs one call per turn (state that changes between calls) loses or runs out of order the "
          "calls it did not expect.",
          "Messages: `tool_choice.disable_parallel_tool_use: true`; Responses: `parallel_tool_calls: false`.",
          per_probe(one_call), _each("parallel_tool_calls_false", "two_cities", {"parallel_tool_calls": False},
                                     min_tools=2)),
    Check("max_tokens", f"`max_tokens` ({MAX_TOKENS}) bounds `completion_tokens`, and a cut answer finishes `length`",
          "Ignoring the limit bills tokens the buyer capped and breaks latency budgets; a cut answer that says "
          "`stop` is taken for a whole one.",
          "Messages: `max_tokens` (`stop_reason: max_tokens`); Responses: `max_output_tokens` (status "
          "`incomplete`).",
          per_probe(within_max_tokens), _max_tokens_probes),
    Check("stop", f"`stop` sequences ({', '.join(map(repr, STOP))}) end the content before them",
          "Clients that stop on a delimiter (a tag, a line) parse what follows it as the next turn.",
          "Messages: `stop_sequences`; Responses: not applicable (the API has no stop sequences).",
          per_probe(stopped), _each("stop", "story", {"stop": list(STOP)}, samples_too=False)),
    Check("response_format_json_object", "`response_format: json_object` yields a JSON object",
          "Structured output is parsed by code: text around the JSON, or no JSON, is an exception downstream.",
          "Responses: `text.format: {type: json_object}`; Messages: not applicable (no counterpart).",
          per_probe(json_object), _each("response_format_json_object", "json_object",
                                        {"response_format": {"type": "json_object"}}, samples_too=False)),
    Check("response_format_json_schema", "`response_format: json_schema` yields a value valid for the schema",
          "A schema is a contract: a missing required key or a wrong type fails the buyer's validation.",
          "Responses: `text.format: {type: json_schema, …}`; Messages: not applicable (no counterpart).",
          per_probe(json_schema), _each("response_format_json_schema", "json_schema", {"response_format": {
              "type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": CITY_SCHEMA}}},
              samples_too=False)),
    Check("stream_parity", "streamed and not streamed at temperature 0: the same calls and finish reason (and the "
          "same content where the baseline's two answers have it)",
          "A vendor whose streaming path differs from its JSON path (another parser, another template) gives "
          "streaming clients other calls than the evaluations it was chosen on.",
          "The same pair in the vendor's format (`stream: false` answers read as the events they stand for).",
          per_probe(same_both_ways, pairs=True), _parity_probes),
    Check("out_of_range_rejected", "`temperature` 2.5 and `top_p` 1.5 are rejected with a 4xx, not clamped",
          "A vendor that silently clamps runs other sampling than the buyer asked for, and hides a client's bug.",
          "The same values in the vendor's format (Messages' temperature range is 0–1).",
          per_probe(rejected), _out_of_range_probes),
    Check("usage_reported", "usage is reported whenever it is asked for",
          "Without usage a buyer cannot reconcile the bill, and a budget cannot be enforced.",
          "Messages and Responses report usage in every answer.", usage_reported, suite_wide=True),
    Check("prompt_tokens_match", "`prompt_tokens` equals the baseline's on the same request (median ratio, within "
          "the model's tolerance)",
          "The same model reads the same prompt with the same tokenizer and template: more prompt tokens is billing "
          "for text the model did not read, or a template that adds it.",
          "Messages: `input_tokens` (+ cache); Responses: `input_tokens`.", prompt_tokens_match, suite_wide=True),
    Check("completion_tokens_match", "`completion_tokens` equals the baseline's where the answer is the same",
          "An identical answer costs the same tokens: a larger count bills tokens that were not streamed.",
          "Messages: `output_tokens`; Responses: `output_tokens`.", completion_tokens_match, suite_wide=True),
    Check("tool_call_ids", "every tool call has an id, unique within its answer",
          "Tool results are matched to calls by id: a repeated or missing id sends a result to the wrong call.",
          "Messages: `tool_use.id`; Responses: `call_id`.", tool_call_ids,
          _each("tool_call_ids", "two_cities", {}, samples_too=False), suite_wide=True),
)
#: Checks by name.
BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}
if len(BY_NAME) != len(CHECKS):  # pragma: no cover - a declaration error
    raise ValueError("a conformance check is declared twice")


def render_check_table() -> str:
    """docs/how-to/conformance.md's table of the checks (Markdown)."""
    rows = ["| check | what is checked | why it matters | Messages / Responses |", "|---|---|---|---|"]
    for c in CHECKS:
        cells = [f"`{c.name}`", c.title, c.why, c.terms]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)
