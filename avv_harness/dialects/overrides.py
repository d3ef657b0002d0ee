"""Global request overrides (``--avv-temperature``, ``--avv-max-tokens``, ``--avv-extra-body``,
``--avv-header``): parsed and range-checked once, applied to every vendor's request, sent to workers
inside the execution context.

Layer: pure core (no I/O, no Locust). Applied last when a request is built, so they win over the sample
and over each vendor's own ``extra_body`` and ``headers``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from avv_core.errors import InputError
from avv_core.http_headers import refused_header
from avv_core.json_input import parse_json
from avv_core.json_types import JSONObject, JSONValue

SECRET_HEADER_WORDS = ("auth", "key", "token", "secret")
MAX_TEMPERATURE = 2.0


def deep_merge(base: JSONObject, extra: JSONObject) -> JSONObject:
    """``extra`` merged over ``base``: nested objects merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Overrides:
    temperature: float | None = None  # replaces the sample's temperature
    max_tokens: int | None = None  # replaces max_tokens (and max_completion_tokens where the sample has it)
    extra_body: JSONObject = field(default_factory=dict)  # deep-merged over each vendor's extra_body
    headers: tuple[tuple[str, str], ...] = ()  # added to every request, after the vendor's headers

    @property
    def empty(self) -> bool:
        return self == Overrides()

    def apply_body(self, body: JSONObject) -> JSONObject:
        out = deep_merge(body, self.extra_body) if self.extra_body else dict(body)
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
            if "max_completion_tokens" in out:
                out["max_completion_tokens"] = self.max_tokens
        return out

    def secrets(self) -> list[str]:
        """Values of override headers named like secrets (``*auth*``, ``*key*``, ``*token*``, ``*secret*``)."""
        return [value for name, value in self.headers
                if any(word in name.lower() for word in SECRET_HEADER_WORDS) and value]

    def to_message(self) -> JSONObject:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "extra_body": self.extra_body,
                "headers": [list(h) for h in self.headers]}

    @classmethod
    def from_message(cls, data: JSONObject | None) -> Overrides:
        if not data:
            return cls()
        return cls(temperature=data.get("temperature"), max_tokens=data.get("max_tokens"),
                   extra_body=dict(data.get("extra_body") or {}),
                   headers=tuple((str(n), str(v)) for n, v in data.get("headers") or []))


_HEADER_NAME_CHARS = set("!#$%&'*+.^_`|~-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header(text: str) -> tuple[str, str]:
    name, sep, value = str(text).partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or not set(name) <= _HEADER_NAME_CHARS:
        # the text is not shown: without a ':' it is likely "Authorization Bearer <key>" (or a ${VAR}'s value)
        got = "no ':'" if not sep else f"the name {name!r}"
        raise InputError(f"--avv-header: expected NAME:VALUE with a valid header name, got {got} (value not shown)")
    if any(ord(c) < 0x20 or ord(c) > 0x7E for c in value):
        raise InputError(f"--avv-header {name}: the value holds a line break, control or non-ASCII character")
    refused = refused_header(name)
    if refused:
        raise InputError(f"--avv-header {name}: {refused}: remove it (docs/reference/wire-faults.md)")
    return name, value


def _header_items(value: object) -> list[str]:
    """``--avv-header`` values: repeated flags give a list; ``locust.conf`` / ``LOCUST_AVV_HEADER`` may give
    one string holding a list (``[A:1, B:2]``), which configargparse does not always split."""
    items = value if isinstance(value, list) else [value] if value else []
    out: list[str] = []
    for item in items:
        text = str(item).strip()
        if text.startswith("[") and text.endswith("]"):
            out += [part.strip().strip("'\"") for part in text[1:-1].split(",") if part.strip()]
        elif text:
            out.append(text)
    return out


def parse_overrides(temperature: JSONValue, max_tokens: JSONValue, extra_body: JSONValue, headers: JSONValue
                    ) -> Overrides:
    """Check and type the override options; InputError naming the option."""
    temp = None
    if temperature is not None:
        temp = float(temperature)
        if not math.isfinite(temp) or not 0.0 <= temp <= MAX_TEMPERATURE:
            raise InputError(f"--avv-temperature: must be within [0, {MAX_TEMPERATURE:g}], got {temperature!r}")
    tokens = None
    if max_tokens is not None:
        tokens = int(max_tokens)
        if tokens < 1:
            raise InputError(f"--avv-max-tokens: must be ≥ 1, got {max_tokens!r}")
    extra: JSONObject = {}
    if extra_body:
        extra = parse_json(extra_body, "--avv-extra-body") if isinstance(extra_body, str) else extra_body
        if not isinstance(extra, dict):
            raise InputError(f"--avv-extra-body: must be a JSON object, got {type(extra).__name__}")
    parsed = dict(_header(item) for item in _header_items(headers))
    return Overrides(temp, tokens, extra, tuple(parsed.items()))
