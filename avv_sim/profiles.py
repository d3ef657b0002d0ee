"""Profile knobs, each declared once (simulator layer): the :class:`Profile` dataclass, whose every field is a knob
declared with :func:`knob` — its default, one-line description, check (type and range) and the truth-log key that
shows its effect — then YAML loading and validation.

Everything else about a knob is derived from its declaration: :data:`KNOBS`, the range checks (rates within
[0, 1], …), the knobs that share one draw (:data:`FAULT_RATE_KNOBS`, :data:`CALL_FORM_KNOBS`), and the knob table
of docs/simulator.md (:func:`render_knob_table`). Adding a knob = its declaration here, its effect
(the draw in behaviour.py / plan.py, the truth field it names in truth.py) and its test.

A profile is one simulated vendor. Every knob has a default, so ``{}`` is a valid (faithful, 200 ms
TTFT, 50 tok/s) profile. Unknown knobs and bad values raise :class:`ProfileError` naming the profile and
the knob; the CLI turns that into exit status 2.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from avv_core.errors import InputError
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.reasoning import RESPONSE_FIELD_NAMES
from avv_core.suggest import did_you_mean
from avv_core.tool_formats import TOOL_PARSERS
from avv_core.yaml_io import load_yaml, loads_yaml
from avv_sim.quirks import QUIRKS

OVER_LIMIT_MODES = ("429", "queue")
MESSAGES_OVER_LIMIT_STATUSES = ("429", "529")
REASONING_FIELDS = RESPONSE_FIELD_NAMES  # the reasoning_field knob's values (avv_core.reasoning)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

_T = TypeVar("_T")
Check = Literal["rate", "non_negative", "positive", "http_status"]
#: check → (what the docs' type column says, whether a value passes, what the error says).
CHECKS: dict[str, tuple[str, Callable[[float], bool], str]] = {
    "rate": ("0–1", lambda v: 0.0 <= v <= 1.0, "must be within [0, 1]"),
    "non_negative": ("≥ 0", lambda v: v >= 0, "must be >= 0"),
    "positive": ("> 0", lambda v: v > 0, "must be > 0"),
    "http_status": ("100–599", lambda v: 100 <= v <= 599, "must be an HTTP status (100-599)"),
}


class ProfileError(ValueError):
    """A profile file or knob is invalid (unknown knob, wrong type, out of range)."""


def knob(default: _T, doc: str, *, check: Check | None = None, choices: tuple[str, ...] | None = None,
         truth: str | None = None, shares_draw: str | None = None, shown: str | None = None) -> _T:
    """Declare a knob (a :class:`Profile` field): ``doc`` = its one-line meaning; ``check`` = its range (CHECKS);
    ``choices`` = its allowed values; ``truth`` = the truth-log key that shows its effect (a field of
    :class:`avv_sim.truth.TruthRecord`, with ``.key`` / ``[].key`` for a part of it); ``shares_draw`` = the
    name of one draw it is partitioned with (their sum must not exceed 1); ``shown`` = the default as the docs
    show it, when not the value itself.

    Why so many parameters: it mirrors :func:`dataclasses.field` — the default, then one keyword-only
    option per column of the knob table (``check``, ``choices``, ``truth``, ``shares_draw``, ``shown``), each
    defaulted; a knob's declaration names the few it uses.
    """
    metadata = {"doc": doc, "check": check, "choices": choices, "truth": truth, "shares_draw": shares_draw,
                "shown": shown}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Profile:
    """One simulated vendor. Field names are the YAML knob names; each is declared with :func:`knob`."""

    name: str = "default"
    # latency and length
    ttft_ms: float = knob(200.0, "delay from request arrival to the first token-bearing delta (the role chunk is "
                          "sent at once)", check="non_negative", truth="t_first_token")
    ttft_jitter_ms: float = knob(0.0, "TTFT varies uniformly in ±this, deterministic per (seed, body, attempt)",
                                 check="non_negative", truth="t_first_token")
    tokens_per_s: float = knob(50.0, "decode speed: token *i* is generated at first-token time + *i* / "
                               "`tokens_per_s`", check="positive", truth="t_last_byte")
    tokens_per_chunk: int = knob(1, "tokens per SSE event (the last event of a content / reasoning / tool-call run "
                                 "may carry fewer)", check="positive")
    output_tokens: int = knob(64, "content length in tokens (one short word per token)", check="non_negative",
                              truth="content_tokens")
    # tool-call behaviour
    tool_call_rate: float = knob(0.6, "fraction of bodies (with tools, `tool_choice` auto, no gold label) on which "
                                 "the **reference** model calls a tool; a hash of the body decides, so profiles with "
                                 "the same rate agree", check="rate", truth="reference_decision")
    flip_rate: float = knob(0.0, "fraction of bodies (hash of body and `seed`) on which this profile does the "
                            "opposite of the reference", check="rate", truth="flipped")
    self_flip_rate: float = knob(0.0, "fraction of (body, repeat) — hash of body, `seed` and the repeat of the "
                                 "`X-AVV-Item` tag (without a tag: the arrival count of the body) — on which this "
                                 "profile flips its own decision on top of `flip_rate`: sampling noise, so its "
                                 "repeats disagree with each other (a reference with it has a noise floor)",
                                 check="rate", truth="self_flipped")
    bad_args_rate: float = knob(0.0, "fraction of this profile's tool calls whose arguments break the schema "
                                "(missing required property, wrong type or unparseable JSON, varied)", check="rate",
                                truth="tool_calls[].broken")
    parallel_rate: float = knob(0.2, "fraction of calling bodies with ≥ 2 tools (and `parallel_tool_calls` not "
                                "false) that call two tools (`index` 0 and 1)", check="rate", truth="tool_calls")
    # tool-call correctness (see avv_sim/chosen_calls.py)
    follow_gold: bool = knob(True, "the reference follows the samples' gold labels where a request has them "
                             "(`--gold FILE`; the harness passes its sample file to the simulator it starts): "
                             "`expected_tool_call` decides whether it calls, `expected_calls` which calls with which "
                             "arguments (one acceptable value each, schema-valid when possible; only optional "
                             "arguments left out); false: `tool_call_rate` decides as without gold", truth="gold")
    wrong_tool_rate: float = knob(0.0, "fraction of this profile's calls (requests with ≥ 2 tools) that call "
                                  "another tool of the request, with schema-valid arguments for it", check="rate",
                                  truth="tool_calls[].wrong_tool")
    wrong_value_rate: float = knob(0.0, "fraction of this profile's calls that keep the tool but change one "
                                   "argument value (still schema-valid; with gold, to a value that is not "
                                   "acceptable)", check="rate", truth="tool_calls[].changed")
    drop_parallel_rate: float = knob(0.0, "fraction of responses with ≥ 2 calls that drop the last one",
                                     check="rate", truth="dropped_calls")
    tool_as_text_rate: float = knob(0.0, "fraction of calling responses that write the calls into the content as a "
                                    "fenced JSON block (`{\"name\", \"arguments\"}`) and finish with `stop`",
                                    check="rate", truth="call_form", shares_draw="call form")
    truncate_call_rate: float = knob(0.0, "fraction of calling responses cut in the middle of the last call's "
                                     "arguments, finish `length` (shares one draw with `tool_as_text_rate`; their "
                                     "sum ≤ 1)", check="rate", truth="call_form", shares_draw="call form")
    # agent tasks (see avv_sim/agent.py): decided from the request's message history
    steps_to_finish: int | None = knob(None, "agent tasks: the reference's tool turns before it answers; null = the "
                                       "task's recorded `tool_results`", check="non_negative",
                                       truth="agent.steps_to_finish", shown="null")
    extra_steps_rate: float = knob(0.0, "agent tasks: per step where the reference answers, call one more tool "
                                   "(picked by hash) instead", check="rate", truth="agent.action")
    give_up_on_error_rate: float = knob(0.0, "agent tasks: after a tool message starting with `Error`, answer with "
                                        "text and stop instead of retrying", check="rate", truth="agent.action")
    loop_rate: float = knob(0.0, "agent tasks: per step after a tool turn, repeat that turn's calls", check="rate",
                            truth="agent.action")
    # reasoning
    reasoning_tokens: int = knob(0, "reasoning tokens before the answer (in the `reasoning_field` field)",
                                 check="non_negative", truth="reasoning_tokens")
    reasoning_only_rate: float = knob(0.0, "fraction of responses that end after the reasoning (no content, no tool "
                                      "call; `reasoning_tokens`, or `output_tokens` if that is 0)", check="rate",
                                      truth="reasoning_only")
    reasoning_field: str = knob("reasoning_content", "the field reasoning is streamed in: a response field of "
                                "`avv_core/reasoning.py` — `reasoning_content`, `reasoning` or `reasoning_details` "
                                "(`[{\"type\": \"reasoning.text\", \"text\": …, \"index\": 0}]`); also the message "
                                "field of JSON bodies", choices=REASONING_FIELDS)
    # calls written as text
    tool_parser: str | None = knob(None, "the text tool-call format (`avv_core/tool_formats.py`; docs: "
                                   "Text tool-call formats) calls are written in where they go out as text: under "
                                   "`broken_template` (none: `json_fenced`) and on `/v1/completions` (none: "
                                   "`hermes`)", choices=TOOL_PARSERS, truth="text_tool_calls")
    # language
    language_drift_rate: float = knob(0.0, "fraction of content answers (per seed, body, attempt) written in another "
                                      "script than the prompt's: Cyrillic, or Latin for a Cyrillic prompt (the "
                                      "content is otherwise in the prompt's script)", check="rate",
                                      truth="language_drift")
    # the answer distribution (the identity test: docs/scoring.md, "Is it the same model?")
    sampling_rate: float = knob(0.0, "fraction of content words drawn per (body, `seed`, repeat) from the script's "
                                "words instead of the body's most likely word: the repeats of a body answer "
                                "differently, like sampling at a temperature above 0 (a request with `temperature` 0 "
                                "is answered greedily); profiles with the same rate answer from one distribution",
                                check="rate", truth="sampled_words")
    answer_shift_rate: float = knob(0.0, "fraction of content answers (per body, `seed`, repeat) written around "
                                    "another most likely word sequence: the answer distribution moved by that share "
                                    "away from a profile without it (the identity test's known shift)", check="rate",
                                    truth="answer_shifted")
    # faults
    error_rate: float = knob(0.0, "fraction of requests answered with `error_status` and an OpenAI error body, "
                             "before any stream byte", check="rate", truth="fault", shares_draw="fault")
    error_status: int = knob(500, "HTTP status for `error_rate`", check="http_status", truth="http_status")
    rate_limit_rate: float = knob(0.0, "fraction of requests answered 429 (`rate_limit_exceeded`) with "
                                  "`Retry-After`", check="rate", truth="fault", shares_draw="fault")
    retry_after_s: float | None = knob(1, "`Retry-After` seconds on every 429; `null` sends no header",
                                       check="non_negative")
    truncate_rate: float = knob(0.0, "fraction of requests whose connection is closed after 25–75 % of the token "
                                "events: no finish_reason, no `[DONE]`, no chunked terminator", check="rate",
                                truth="fault", shares_draw="fault")
    stream_error_rate: float = knob(0.0, "fraction of streams that send `data: {\"error\": {...}}` after 25–75 % of "
                                    "the token events, then `[DONE]` (no finish_reason)", check="rate", truth="fault",
                                    shares_draw="fault")
    omit_usage: bool = knob(False, "never report usage (no usage chunk even with `include_usage`; no `usage` in JSON "
                            "bodies)", truth="usage_sent")
    # admission control
    max_concurrency: int | None = knob(None, "in-flight requests allowed for this profile", check="positive",
                                       truth="fault")
    over_limit: str = knob("429", "beyond `max_concurrency`: `429` rejects at once (with `Retry-After`), `queue` "
                           "waits for a slot (the wait adds to TTFT)", choices=OVER_LIMIT_MODES, truth="queued_ms")
    messages_over_limit: str = knob("429", "the status of that rejection on `/v1/messages`: `429` "
                                    "(`rate_limit_error`) or `529` (`overloaded_error`, Anthropic's overload; truth "
                                    "`over_limit_529`)", choices=MESSAGES_OVER_LIMIT_STATUSES, truth="fault")
    # identity and determinism
    seed: int = knob(0, "varies flips, faults, broken arguments, tool-call deviations, jitter and quirk draws "
                     "between profiles", check="non_negative")
    api_key: str | None = knob(None, "if set, `Authorization: Bearer <key>` is required — `x-api-key: <key>` on "
                               "`/v1/messages` (else 401 `invalid_api_key`; Messages: `authentication_error`)",
                               truth="fault")
    model: str | None = knob(None, "model id served by `/v1/models` (any `model` is accepted in requests and echoed "
                             "back)", shown="profile name")
    # wire-format quirks (fault-injection tests)
    quirks: tuple[str, ...] = knob((), "wire-format deviations for fault-injection tests (docs/simulator.md, "
                                   "Quirks)", choices=QUIRKS, truth="quirks")
    quirk_rate: float = knob(1.0, "fraction of requests (per seed, body, attempt) to which `quirks` apply",
                             check="rate", truth="quirks")
    header_delay_ms: float = knob(0.0, "sleep before sending response headers (any response)",
                                  check="non_negative")
    stall_after_tokens: int | None = knob(None, "after this many tokens, stop sending for `stall_ms`",
                                          check="non_negative")
    stall_ms: float = knob(0.0, "length of that stall", check="non_negative")
    # conformance: whether the request's parameters are honoured (docs/how-to/conformance.md); by default every one
    # is: `tool_choice`, `parallel_tool_calls: false`, `max_tokens`, `stop` (the content ends before the first stop
    # string), `response_format` (`json_object`: a JSON object as content; `json_schema`: a value valid for the
    # schema), and `temperature` outside 0–2 or `top_p` outside 0–1 answered HTTP 400
    ignore_tool_choice: bool = knob(False, "`tool_choice` ignored: the response is planned as with `auto` (a "
                                    "`required`, named or `none` choice changes nothing)", truth="ignored")
    ignore_parallel_tool_calls: bool = knob(False, "`parallel_tool_calls: false` ignored: two calls may still go "
                                            "out (by default at most one does)", truth="ignored")
    ignore_max_tokens: bool = knob(False, "`max_tokens` / `max_completion_tokens` ignored: the answer is not cut, "
                                   "its finish is not `length`", truth="ignored")
    ignore_stop: bool = knob(False, "`stop` sequences ignored: the content goes on past them", truth="ignored")
    ignore_response_format: bool = knob(False, "`response_format` ignored: the content is filler words, not JSON",
                                        truth="ignored")
    clamp_out_of_range: bool = knob(False, "`temperature` outside 0–2 and `top_p` outside 0–1 accepted silently "
                                    "(clamped) instead of HTTP 400", truth="ignored")
    prompt_tokens_factor: float = knob(1.0, "usage reports `prompt_tokens` × this (rounded; the true count is "
                                       "truth `prompt_tokens`): a vendor that bills more prompt tokens than the "
                                       "model reads", check="positive", truth="usage_prompt_tokens")
    completion_tokens_factor: float = knob(1.0, "usage reports `completion_tokens` × this (rounded; the tokens "
                                           "sent are truth `completion_tokens`)", check="positive",
                                           truth="usage_completion_tokens")
    stream_other_calls: bool = knob(False, "a non-streamed answer's first call gets one argument value changed "
                                    "(schema-valid): the JSON body holds other calls than the same request streamed",
                                    truth="other_calls")
    repeat_tool_call_ids: bool = knob(False, "every tool call of a response carries the first call's id",
                                      truth="tool_calls[].id")
    # what the truth log shows of each request
    log_request: bool = knob(False, "add `request: {\"body\", \"headers\"}` (what it received; never "
                             "`Authorization` or `x-api-key`) to each truth-log line — for tests that check what "
                             "reached the wire; "
                             "the body may hold secrets", truth="request")

    @property
    def served_model(self) -> str:
        return self.model or self.name

    def to_knobs(self) -> JSONObject:
        """The knobs as plain YAML-able values (without ``name``)."""
        out = dataclasses.asdict(self)
        out.pop("name")
        out["quirks"] = list(self.quirks)
        return out


@dataclass(frozen=True)
class Knob:
    """A knob's declaration, read back from its :class:`Profile` field."""

    name: str
    type: str  # the field's annotation: "float", "int | None", …
    default: object
    doc: str
    check: str | None
    choices: tuple[str, ...] | None
    truth: str | None
    shares_draw: str | None
    shown: str | None

    @classmethod
    def of(cls, f: dataclasses.Field) -> Knob:
        return cls(f.name, str(f.type), f.default, **f.metadata)


KNOBS: dict[str, Knob] = {f.name: Knob.of(f) for f in dataclasses.fields(Profile) if f.name != "name"}
RATE_KNOBS: tuple[str, ...] = tuple(k.name for k in KNOBS.values() if k.check == "rate")
# Knobs that share one hash draw must sum to at most 1: the faults (behaviour.pick_fault), the call form
# (calls.call_form). In declaration order.
FAULT_RATE_KNOBS: tuple[str, ...] = tuple(k.name for k in KNOBS.values() if k.shares_draw == "fault")
CALL_FORM_KNOBS: tuple[str, ...] = tuple(k.name for k in KNOBS.values() if k.shares_draw == "call form")


def _err(profile: str, knob: str, msg: str) -> ProfileError:
    return ProfileError(f"profile {profile!r}: knob {knob!r}: {msg}")


def _coerce(profile: str, knob: str, value: object) -> JSONValue:
    """Check one knob's value against its declared type and choices; ints are accepted for floats."""
    declared = KNOBS[knob]
    ftype, allowed = declared.type, declared.choices
    if value is None:
        if "None" in ftype:
            return None
        raise _err(profile, knob, "must not be null")
    if ftype.startswith("tuple") and allowed is not None:  # a list of names (quirks)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(q, str) for q in value):
            raise _err(profile, knob, "must be a list of strings")
        unknown = [q for q in value if q not in allowed]
        if unknown:
            raise _err(profile, knob, f"unknown quirk(s) {unknown}; known: {', '.join(allowed)}")
        return tuple(value)
    if allowed is not None:
        value = str(value)
        if value not in allowed:
            raise _err(profile, knob, f"must be one of {allowed}, got {value!r}")
        return value
    if ftype.startswith("bool"):
        if not isinstance(value, bool):
            raise _err(profile, knob, f"must be true or false, got {value!r}")
        return value
    if ftype.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _err(profile, knob, f"must be an integer, got {value!r}")
        return value
    if ftype.startswith("float"):
        if isinstance(value, str):  # YAML 1.1 reads "1e6" as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _err(profile, knob, f"must be a number, got {value!r}")
        return float(value)
    if ftype.startswith("str"):
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise _err(profile, knob, f"must be a string, got {value!r}")
        return str(value)
    raise _err(profile, knob, f"unsupported type {ftype}")  # pragma: no cover - dataclass is fixed


def _check_ranges(p: Profile) -> None:
    """Each knob's declared check (rates first, then the other checks), then the sums of the shared draws."""
    for check, (_, passes, message) in CHECKS.items():
        for knob in (k.name for k in KNOBS.values() if k.check == check):
            v = getattr(p, knob)
            if v is not None and not passes(v):
                raise _err(p.name, knob, f"{message}, got {v}")
    for knobs in (FAULT_RATE_KNOBS, CALL_FORM_KNOBS):
        total = sum(getattr(p, k) for k in knobs)
        if total > 1.0 + 1e-9:
            raise _err(p.name, knobs[0], f"{' + '.join(knobs)} must not exceed 1, got {total}")


def make_profile(name: str, knobs: JSONMapping | None = None) -> Profile:
    """Build and validate one profile from a knob mapping."""
    name = str(name)
    if not _NAME_RE.match(name):
        raise ProfileError(f"profile {name!r}: name must match {_NAME_RE.pattern} (it is a URL path segment)")
    knobs = dict(knobs or {})
    values: JSONObject = {}
    for knob, value in knobs.items():
        if knob not in KNOBS:
            raise _err(name, str(knob), f"unknown knob{did_you_mean(str(knob), KNOBS)}; known knobs: "
                       f"{', '.join(KNOBS)}")
        values[knob] = _coerce(name, knob, value)
    profile = Profile(name=name, **values)
    _check_ranges(profile)
    return profile


def profiles_from_mapping(data: object, source: str = "<config>") -> dict[str, Profile]:
    """Profiles from a parsed config: ``{"profiles": {name: knobs}, "defaults": knobs?}``.

    ``defaults`` (optional) are applied to every profile before its own knobs.
    """
    if not isinstance(data, Mapping):
        raise ProfileError(f"{source}: top level must be a mapping with a 'profiles' key")
    extra = set(data) - {"profiles", "defaults"}
    if extra:
        raise ProfileError(f"{source}: unknown top-level key(s) {sorted(extra)}; expected 'profiles'")
    raw = data.get("profiles")
    if not isinstance(raw, Mapping) or not raw:
        raise ProfileError(f"{source}: 'profiles' must be a non-empty mapping of name -> knobs")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ProfileError(f"{source}: 'defaults' must be a mapping of knobs")
    out: dict[str, Profile] = {}
    for name, knobs in raw.items():
        if knobs is None:
            knobs = {}
        if not isinstance(knobs, Mapping):
            raise ProfileError(f"profile {name!r}: must be a mapping of knobs, got {type(knobs).__name__}")
        out[str(name)] = make_profile(str(name), {**defaults, **knobs})
    return out


def load_profiles(source: str | os.PathLike[str] | JSONMapping) -> dict[str, Profile]:
    """Load profiles from a YAML file path, or from an already-parsed mapping.

    A mapping may be the whole config (with a ``profiles`` key) or just ``{name: knobs}``.
    """
    if isinstance(source, Mapping):
        data = source if "profiles" in source else {"profiles": source}
        return profiles_from_mapping(data)
    path = os.fspath(source)
    try:  # the project's one YAML loader: duplicate keys and alias bombs refused, naming the line
        data = load_yaml(path, "simulator profiles")
    except InputError as exc:
        raise ProfileError(str(exc)) from None
    return profiles_from_mapping(data, source=path)


def parse_set(items: list[str]) -> JSONObject:
    """``KNOB=VALUE`` strings (from ``--set``) to a knob mapping; VALUE is parsed as YAML."""
    out: JSONObject = {}
    for item in items:
        knob, sep, text = item.partition("=")
        if not sep or not knob.strip():
            raise ProfileError(f"--set {item!r}: expected KNOB=VALUE")
        try:
            out[knob.strip()] = loads_yaml(text, f"--set {item!r}") if text.strip() else None
        except InputError as exc:
            raise ProfileError(str(exc)) from None  # names the --set item and the line
    return out


def split_set(item: str) -> tuple[str | None, str]:
    """``PROFILE:KNOB=VALUE`` → (PROFILE, ``KNOB=VALUE``); ``KNOB=VALUE`` → (None, itself). A profile name holds no
    ``:``, so the first one before the ``=`` separates it."""
    head, sep, _ = item.partition("=")
    profile, colon, knob = head.partition(":")
    if not sep or not colon:
        return None, item
    if not profile.strip() or not knob.strip():
        raise ProfileError(f"--set {item!r}: expected PROFILE:KNOB=VALUE")
    return profile.strip(), item[len(head) - len(knob):]


def apply_sets(profiles: Mapping[str, Profile], items: list[str]) -> dict[str, Profile]:
    """``profiles`` with ``--set`` items applied: ``KNOB=VALUE`` to every profile, ``PROFILE:KNOB=VALUE`` to that one
    (an unknown profile is an error). Each result is built and checked by :func:`make_profile`, so the truth log
    shows the knobs in effect. Later items win."""
    every: list[str] = []
    one: dict[str, list[str]] = {}
    for item in items:
        target, knob_item = split_set(item)
        if target is None:
            every.append(knob_item)
        elif target not in profiles:
            raise ProfileError(f"--set {item!r}: no profile {target!r}; profiles: {', '.join(profiles)}")
        else:
            one.setdefault(target, []).append(knob_item)
    out: dict[str, Profile] = {}
    for name, profile in profiles.items():
        knobs = {**profile.to_knobs(), **parse_set(every), **parse_set(one.get(name, []))}
        out[name] = make_profile(name, knobs) if (every or name in one) else profile
    return out


def _shown(k: Knob) -> str:
    if k.shown is not None:
        return k.shown
    if k.default is None:
        return "none"
    if isinstance(k.default, bool):
        return str(k.default).lower()
    if isinstance(k.default, float) and k.default.is_integer():
        return str(int(k.default))
    if isinstance(k.default, str):
        return f"`{k.default}`"
    if isinstance(k.default, tuple):
        return f"`{list(k.default)}`"
    return str(k.default)


def _type(k: Knob) -> str:
    base = k.type.replace(" | None", "")
    if k.choices is not None:
        text = "list of quirks" if base.startswith("tuple") else " / ".join(f"`{c}`" for c in k.choices)
    elif k.check == "rate":
        text = "rate 0–1"
    else:
        text = f"{base} {CHECKS[k.check][0]}" if k.check else base
    return text + (" or null" if "None" in k.type else "")


def render_knob_table() -> str:
    """The knob table of docs/simulator.md (``python -m avv_harness.docs``)."""
    rows = ["| knob | type | default | meaning | truth log |", "|---|---|---|---|---|"]
    for k in KNOBS.values():
        truth = f"`{k.truth}`" if k.truth else ""
        doc = k.doc.replace("|", "\\|")
        rows.append(f"| `{k.name}` | {_type(k)} | {_shown(k)} | {doc} | {truth} |")
    return "\n".join(rows)
