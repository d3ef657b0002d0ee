"""A vendor's dialect in the config: request adapter and transforms, endpoint (the wire format: chat, raw
completions, Messages, Responses), chat template and tool parser; and ``${VAR}`` substitution in the config's
string values.

Layer: inputs (read by :mod:`avv_harness.inputs.config`, which stays the one entry point for the vendor YAML).
Keys (per vendor; ``adapter``, ``transforms`` and ``endpoint`` also per model, next to ``vendors``, as defaults):

- ``adapter``: ``generic`` (default) | ``kimi`` | ``none`` | ``auto`` (picked by model id).
- ``transforms``: names run after the adapter's own (see :mod:`avv_harness.dialects.transforms`).
- ``endpoint``: one of the wire formats (:data:`avv_core.api_formats.ENDPOINTS`, each a module of
  :mod:`avv_harness.wire.formats`; ``chat``, the default;
  ``completions`` — raw mode: the prompt is rendered here with ``chat_template`` and sent to
  ``/v1/completions``; ``tool_parser`` (a format of :mod:`avv_core.tool_formats`) reads the calls back from the
  text; ``messages``; ``responses``).

``${NAME}`` in ``url``, ``api_key``, header values and ``extra_body`` strings is replaced from the
environment / ``.env`` (``$${`` writes a literal ``${``). An unset variable is an input error naming file
and key; every substituted value is treated as a secret (see :meth:`VendorConfig.secrets`): no message shows
it, a message about a substituted value names the key and the variables instead (:attr:`Substitution.variables`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from avv_core.api_formats import CHAT, COMPLETIONS, ENDPOINTS
from avv_core.json_types import JSONObject, JSONValue
from avv_core.tool_formats import TOOL_PARSERS
from avv_harness.dialects.transforms import ADAPTERS, AUTO, TRANSFORMS, pick_adapter

if TYPE_CHECKING:
    from avv_harness.dialects.chat_template import ChatTemplate

VENDOR_DIALECT_KEYS = frozenset({"adapter", "transforms", "endpoint", "chat_template", "tool_parser"})
MODEL_DIALECT_KEYS = frozenset({"adapter", "transforms", "endpoint"})
SUBSTITUTED_KEYS = ("url", "api_key", "headers", "extra_body")  # where ${VAR} is replaced
TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "data" / "templates"


class Problems(Protocol):
    def add(self, where: str, message: str) -> None: ...


@dataclass(frozen=True)
class Dialect:
    """How requests to one vendor are shaped and read back."""

    adapter: str = "generic"  # the preset that ran (after auto's pick)
    adapter_source: str = "default"  # default | config | the reason auto gave
    transforms: tuple[str, ...] = ADAPTERS["generic"]  # names, in the order they run
    endpoint: str = CHAT  # the wire format's name (ENDPOINTS)
    chat_template: str | None = None  # resolved file or folder (completions only)
    tool_parser: str | None = None  # one of avv_core.tool_formats.TOOL_PARSERS (completions only)

    @property
    def raw(self) -> bool:
        return self.endpoint == COMPLETIONS

    @property
    def is_default(self) -> bool:
        """Sends what a vendor without dialect keys sends (however it was chosen)."""
        return self.identity() == Dialect().identity()

    def describe(self) -> JSONObject:
        """What run.json keeps for this vendor (auto's pick included)."""
        out: JSONObject = {"adapter": self.adapter, "adapter_source": self.adapter_source,
                               "transforms": list(self.transforms), "endpoint": self.endpoint}
        if self.raw:
            out.update(chat_template=self.chat_template, tool_parser=self.tool_parser)
        return out

    def identity(self) -> tuple[str, ...]:
        """What makes two dialects send different requests (part of the config identity when not default)."""
        return (self.endpoint, ",".join(self.transforms), self.chat_template or "", self.tool_parser or "")

    @cached_property
    def template(self) -> ChatTemplate:
        """The loaded chat template (raw mode), read once per process."""
        from avv_harness.dialects.chat_template import load_chat_template

        return load_chat_template(self.chat_template or "")


_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Substitution:
    """Values after ``${VAR}`` substitution, the values that were substituted (secrets) and, per key that
    held a placeholder (``url``, ``headers.X-Trace``, ``extra_body.a[0]``…), the variables it used."""

    raw: JSONObject
    secrets: list[str] = field(default_factory=list)
    variables: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def named(self, key: str) -> str | None:
        """``"${PORT}"`` / ``"${A}, ${B}"`` for a key whose value came (partly) from variables, else None: what
        a message shows instead of the value."""
        names = self.variables.get(key)
        return ", ".join(f"${{{n}}}" for n in names) if names else None


def _substitute_text(text: str, env: dict[str, str], problems: Problems, where: str, secrets: list[str],
                     names: list[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group(1)
        if name not in env:
            problems.add(where, f"${{{name}}} is not set (neither in the environment nor in .env)")
            return match.group(0)
        secrets.append(env[name])
        names.append(name)
        return env[name]

    return _VAR.sub(replace, text)


def _substitute_value(value: object, env: dict[str, str], problems: Problems, where: str, secrets: list[str],
                      key: str, variables: dict[str, tuple[str, ...]]) -> JSONValue:
    if isinstance(value, str):
        names: list[str] = []
        out = _substitute_text(value, env, problems, where, secrets, names)
        if names:
            variables[key] = tuple(dict.fromkeys(names))
        return out
    if isinstance(value, dict):
        return {k: _substitute_value(v, env, problems, f"{where}.{k}", secrets, f"{key}.{k}", variables)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_value(v, env, problems, f"{where}[{i}]", secrets, f"{key}[{i}]", variables)
                for i, v in enumerate(value)]
    return value


def substitute(raw: JSONObject, env: dict[str, str], problems: Problems, where: str) -> Substitution:
    """``${VAR}`` replaced in the vendor's url, api_key, header values and extra_body strings."""
    out = dict(raw)
    secrets: list[str] = []
    variables: dict[str, tuple[str, ...]] = {}
    for key in SUBSTITUTED_KEYS:
        if key in out:
            out[key] = _substitute_value(out[key], env, problems, f"{where}.{key}", secrets, key, variables)
    return Substitution(out, [s.strip() for s in secrets if s and s.strip()], variables)


def has_placeholder(value: object) -> bool:
    return isinstance(value, str) and "${" in value


def _names(problems: Problems, where: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(f"{where}.transforms", "must be a list of transform names")
        return ()
    unknown = [v for v in value if v not in TRANSFORMS]
    if unknown:
        problems.add(f"{where}.transforms", f"unknown transform(s) {', '.join(unknown)} "
                     f"(known: {', '.join(TRANSFORMS)})")
    return tuple(v for v in value if v in TRANSFORMS)


def _resolve_template(problems: Problems, where: str, value: object, config_dir: str) -> str | None:
    """A path relative to the config file's folder (or absolute), else the name of a shipped template."""
    if not isinstance(value, str) or not value.strip():
        problems.add(f"{where}.chat_template", "must be the path of a Jinja template, a tokenizer_config.json "
                     "or a tokenizer folder")
        return None
    path = Path(os.path.expanduser(value))
    candidates = [path] if path.is_absolute() else [Path(config_dir) / path, TEMPLATES_DIR / path]
    for candidate in candidates:
        if candidate.exists():
            return str(candidate.resolve())
    shipped = ", ".join(sorted(p.name for p in TEMPLATES_DIR.glob("*.jinja")))
    problems.add(f"{where}.chat_template", f"{value!r} not found (relative paths are read from the config "
                 f"file's folder; shipped templates: {shipped}); nothing is downloaded")
    return None


def parse_dialect(problems: Problems, where: str, raw: JSONObject, model_defaults: JSONObject,
                  model_id: str, config_dir: str) -> Dialect:
    """The vendor's dialect; a key set on the vendor wins over the same key on its model."""
    adapter = raw.get("adapter", model_defaults.get("adapter"))
    source = "config"
    if adapter is None:
        adapter, source = "generic", "default"
    elif adapter == AUTO:
        adapter, source = pick_adapter(model_id)
    elif adapter not in ADAPTERS:
        problems.add(f"{where}.adapter", f"must be one of {', '.join([*ADAPTERS, AUTO])}, got {adapter!r}")
        adapter = "generic"
    listed = raw["transforms"] if "transforms" in raw else model_defaults.get("transforms")
    transforms = tuple(dict.fromkeys((*ADAPTERS[adapter], *_names(problems, where, listed))))
    endpoint = raw.get("endpoint", model_defaults.get("endpoint", CHAT))
    if endpoint not in ENDPOINTS:
        problems.add(f"{where}.endpoint", f"must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
        endpoint = CHAT
    template = parser = None
    if endpoint == COMPLETIONS:
        if raw.get("chat_template") is None:
            problems.add(f"{where}.chat_template", "endpoint: completions needs a chat_template (a local file "
                         "or tokenizer folder)")
        else:
            template = _resolve_template(problems, where, raw["chat_template"], config_dir)
        parser = raw.get("tool_parser", "hermes")
        if parser not in TOOL_PARSERS:
            problems.add(f"{where}.tool_parser", f"must be one of {', '.join(TOOL_PARSERS)}, got {parser!r}")
            parser = "hermes"
    else:
        for key in ("chat_template", "tool_parser"):
            if raw.get(key) is not None:
                problems.add(f"{where}.{key}", "only used with endpoint: completions")
    dialect = Dialect(adapter, source, transforms, endpoint, template, parser)
    if template is not None:
        from avv_harness.dialects.chat_template import check_chat_template

        error = check_chat_template(template)
        if error:
            problems.add(f"{where}.chat_template", error)
    return dialect


def model_defaults(problems: Problems, model: str, section: JSONObject) -> JSONObject:
    """The dialect keys a model section sets for its vendors."""
    out = {k: section[k] for k in MODEL_DIALECT_KEYS if k in section}
    if "transforms" in out:
        out["transforms"] = list(_names(problems, model, out["transforms"]))
    if "adapter" in out and out["adapter"] not in (*ADAPTERS, AUTO):
        problems.add(f"{model}.adapter", f"must be one of {', '.join([*ADAPTERS, AUTO])}, got {out['adapter']!r}")
        out.pop("adapter")
    if "endpoint" in out and out["endpoint"] not in ENDPOINTS:
        problems.add(f"{model}.endpoint", f"must be one of {', '.join(ENDPOINTS)}, got {out['endpoint']!r}")
        out.pop("endpoint")
    return out
