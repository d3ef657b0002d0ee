"""Profile knobs: the dataclass, YAML loading and validation.

A profile is one simulated vendor. Every knob has a default, so ``{}`` is a valid (faithful, 200 ms
TTFT, 50 tok/s) profile. Unknown knobs and bad values raise :class:`ProfileError` naming the profile and
the knob; the CLI turns that into exit status 2.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from avv_core.errors import InputError
from avv_core.reasoning import RESPONSE_FIELD_NAMES
from avv_core.tool_formats import TOOL_PARSERS
from avv_core.yaml_io import load_yaml, loads_yaml

QUIRKS: tuple[str, ...] = (
    "no_finish_reason",
    "tool_calls_under_stop",
    "usage_in_last_content_chunk",
    "repeat_tool_header",
    "interleave_parallel",
    "crlf",
    "multiline_data",
    "comments",
    "duplicate_done",
    "garbage_line",
    "json_body",
    "html_body",
    "empty_body",
    "invalid_utf8",
    "huge_args",
    "require_reasoning_content",
    "broken_template",
)

OVER_LIMIT_MODES = ("429", "queue")
REASONING_FIELDS = RESPONSE_FIELD_NAMES  # the reasoning_field knob's values (avv_core.reasoning)
_CHOICES = {"over_limit": OVER_LIMIT_MODES, "reasoning_field": REASONING_FIELDS, "tool_parser": TOOL_PARSERS}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Fault knobs share one hash draw per request (see behaviour.pick_fault), so their sum must fit in [0, 1].
FAULT_RATE_KNOBS = ("error_rate", "rate_limit_rate", "truncate_rate", "stream_error_rate")
# So do the two call-form knobs (see calls.call_form).
CALL_FORM_KNOBS = ("tool_as_text_rate", "truncate_call_rate")


class ProfileError(ValueError):
    """A profile file or knob is invalid (unknown knob, wrong type, out of range)."""


@dataclass(frozen=True)
class Profile:
    """One simulated vendor. Field names are the YAML knob names."""

    name: str = "default"
    # latency and length
    ttft_ms: float = 200.0
    ttft_jitter_ms: float = 0.0
    tokens_per_s: float = 50.0
    tokens_per_chunk: int = 1
    output_tokens: int = 64
    # tool-call behaviour
    tool_call_rate: float = 0.6
    flip_rate: float = 0.0
    self_flip_rate: float = 0.0  # flips its own decision on this fraction of (body, repeat): sampling noise
    bad_args_rate: float = 0.0
    parallel_rate: float = 0.2
    # tool-call correctness (see avv_sim/calls.py)
    follow_gold: bool = True
    wrong_tool_rate: float = 0.0
    wrong_value_rate: float = 0.0
    drop_parallel_rate: float = 0.0
    tool_as_text_rate: float = 0.0
    truncate_call_rate: float = 0.0
    # agent tasks (see avv_sim/agent.py): decided from the request's message history
    steps_to_finish: int | None = None  # the reference's tool turns before it answers (None: the task's recorded ones)
    extra_steps_rate: float = 0.0  # where the reference answers, call one more tool instead (per step)
    give_up_on_error_rate: float = 0.0  # after a tool error, answer with text instead of retrying
    loop_rate: float = 0.0  # after a tool turn, repeat its calls (per step)
    # reasoning
    reasoning_tokens: int = 0
    reasoning_only_rate: float = 0.0
    reasoning_field: str = "reasoning_content"  # the delta / message field reasoning is sent in
    # text tool-call format (avv_core.tool_formats) of calls written as text; None: json_fenced under
    # broken_template, hermes on /v1/completions
    tool_parser: str | None = None
    # language
    language_drift_rate: float = 0.0  # fraction of content answers in another script than the prompt's
    # faults
    error_rate: float = 0.0
    error_status: int = 500
    rate_limit_rate: float = 0.0
    retry_after_s: float | None = 1
    truncate_rate: float = 0.0
    stream_error_rate: float = 0.0
    omit_usage: bool = False
    # admission control
    max_concurrency: int | None = None
    over_limit: str = "429"
    # identity and determinism
    seed: int = 0
    api_key: str | None = None
    model: str | None = None
    # wire-format quirks (fault-injection tests)
    quirks: tuple[str, ...] = field(default_factory=tuple)
    quirk_rate: float = 1.0
    header_delay_ms: float = 0.0
    stall_after_tokens: int | None = None
    stall_ms: float = 0.0
    # what the truth log shows of each request
    log_request: bool = False  # add the received body and headers (never Authorization) to the truth line

    @property
    def served_model(self) -> str:
        return self.model or self.name

    def to_knobs(self) -> dict[str, Any]:
        """The knobs as plain YAML-able values (without ``name``)."""
        out = dataclasses.asdict(self)
        out.pop("name")
        out["quirks"] = list(self.quirks)
        return out


KNOBS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Profile) if f.name != "name"}

_RATES = {
    "tool_call_rate",
    "flip_rate",
    "self_flip_rate",
    "bad_args_rate",
    "parallel_rate",
    "wrong_tool_rate",
    "wrong_value_rate",
    "drop_parallel_rate",
    "tool_as_text_rate",
    "truncate_call_rate",
    "extra_steps_rate",
    "give_up_on_error_rate",
    "loop_rate",
    "reasoning_only_rate",
    "language_drift_rate",
    "error_rate",
    "rate_limit_rate",
    "truncate_rate",
    "stream_error_rate",
    "quirk_rate",
}
_NON_NEGATIVE = {
    "ttft_ms",
    "ttft_jitter_ms",
    "output_tokens",
    "reasoning_tokens",
    "seed",
    "header_delay_ms",
    "stall_ms",
    "retry_after_s",
    "stall_after_tokens",
    "steps_to_finish",
}
_POSITIVE = {"tokens_per_s", "tokens_per_chunk", "max_concurrency"}


def _err(profile: str, knob: str, msg: str) -> ProfileError:
    return ProfileError(f"profile {profile!r}: knob {knob!r}: {msg}")


def _coerce(profile: str, knob: str, value: Any) -> Any:
    """Check one knob's value against its declared type; ints are accepted for floats."""
    f = KNOBS[knob]
    ftype = str(f.type)
    if value is None:
        if "None" in ftype:
            return None
        raise _err(profile, knob, "must not be null")
    if knob == "quirks":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(q, str) for q in value):
            raise _err(profile, knob, "must be a list of strings")
        unknown = [q for q in value if q not in QUIRKS]
        if unknown:
            raise _err(profile, knob, f"unknown quirk(s) {unknown}; known: {', '.join(QUIRKS)}")
        return tuple(value)
    if knob in _CHOICES:
        value, allowed = str(value), _CHOICES[knob]
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
    for knob in _RATES:
        v = getattr(p, knob)
        if not 0.0 <= v <= 1.0:
            raise _err(p.name, knob, f"must be within [0, 1], got {v}")
    for knob in _NON_NEGATIVE:
        v = getattr(p, knob)
        if v is not None and v < 0:
            raise _err(p.name, knob, f"must be >= 0, got {v}")
    for knob in _POSITIVE:
        v = getattr(p, knob)
        if v is not None and v <= 0:
            raise _err(p.name, knob, f"must be > 0, got {v}")
    if not 100 <= p.error_status <= 599:
        raise _err(p.name, "error_status", f"must be an HTTP status (100-599), got {p.error_status}")
    for knobs in (FAULT_RATE_KNOBS, CALL_FORM_KNOBS):
        total = sum(getattr(p, k) for k in knobs)
        if total > 1.0 + 1e-9:
            raise _err(p.name, knobs[0], f"{' + '.join(knobs)} must not exceed 1, got {total}")


def make_profile(name: str, knobs: Mapping[str, Any] | None = None) -> Profile:
    """Build and validate one profile from a knob mapping."""
    name = str(name)
    if not _NAME_RE.match(name):
        raise ProfileError(f"profile {name!r}: name must match {_NAME_RE.pattern} (it is a URL path segment)")
    knobs = dict(knobs or {})
    values: dict[str, Any] = {}
    for knob, value in knobs.items():
        if knob not in KNOBS:
            raise _err(name, str(knob), f"unknown knob; known knobs: {', '.join(KNOBS)}")
        values[knob] = _coerce(name, knob, value)
    profile = Profile(name=name, **values)
    _check_ranges(profile)
    return profile


def profiles_from_mapping(data: Any, source: str = "<config>") -> dict[str, Profile]:
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


def load_profiles(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Profile]:
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


def parse_set(items: list[str]) -> dict[str, Any]:
    """``KNOB=VALUE`` strings (from ``--set``) to a knob mapping; VALUE is parsed as YAML."""
    out: dict[str, Any] = {}
    for item in items:
        knob, sep, text = item.partition("=")
        if not sep or not knob.strip():
            raise ProfileError(f"--set {item!r}: expected KNOB=VALUE")
        try:
            out[knob.strip()] = loads_yaml(text, f"--set {item!r}") if text.strip() else None
        except InputError as exc:
            raise ProfileError(str(exc)) from None  # names the --set item and the line
    return out
