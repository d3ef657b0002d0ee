"""Raw-completions mode, the prompt: a model's chat template read from local files and rendered the way
transformers' ``apply_chat_template`` renders it — never downloaded.

Layer: inputs (a template is checked when the config is loaded, read once per process on first use, and
rendered per request; rendering is pure).

Sources: a Jinja file (special tokens from a ``tokenizer_config.json`` beside it, if any), a
``tokenizer_config.json`` whose ``chat_template`` is a string or a list of named templates (``tool_use`` is
used when the request has tools, as transformers does, else ``default``), or a tokenizer folder holding
``chat_template.jinja`` and/or ``tokenizer_config.json``.

Rendering, as transformers: ``jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True)`` with ``loopcontrols`` and the ``{% generation %}`` tag, the ``tojson`` filter that keeps
key order and non-ASCII text, ``raise_exception`` and ``strftime_now``; variables ``messages``, ``tools``,
``add_generation_prompt=True`` and the special tokens (``bos_token``, ``eos_token``, …). Before rendering,
tool-call ``arguments`` given as JSON strings become objects, as vLLM does for templates.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import InputError
from .json_input import parse_json

TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"


class TemplateRenderError(RuntimeError):
    """The template refused a request (``raise_exception``) or failed on it: a client-side failure."""


class _GenerationTag(Extension):
    """``{% generation %}…{% endgeneration %}`` (transformers marks assistant text with it): renders its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _render_body(caller: Any) -> str:
        return caller()


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer configs store it: a string or an AddedToken dict with ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # the file or folder it came from
    templates: dict[str, str]  # name → Jinja source ("default", and "tool_use" when the tokenizer has one)
    special_tokens: dict[str, str] = field(default_factory=dict)  # bos_token, eos_token, …

    @cached_property
    def _compiled(self) -> dict[str, jinja2.Template]:
        env = _environment()
        return {name: env.from_string(text) for name, text in self.templates.items()}

    def render(self, messages: list[dict[str, Any]], tools: list[Any] | None = None) -> str:
        """The prompt for ``messages`` and ``tools`` with the generation prompt added."""
        name = "tool_use" if tools and "tool_use" in self.templates else "default"
        if name not in self.templates:
            raise TemplateRenderError(f"{self.source}: no default chat template (has: {', '.join(self.templates)})")
        variables = {"bos_token": "", "eos_token": "", **self.special_tokens}
        try:
            return self._compiled[name].render(messages=prepare_messages(messages), tools=tools or None,
                                               documents=None, add_generation_prompt=True, **variables)
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateRenderError(f"chat template {Path(self.source).name}: {exc}") from None


def prepare_messages(messages: list[Any]) -> list[Any]:
    """Messages as templates expect them: tool-call ``arguments`` that are JSON strings become objects
    (vLLM does the same before rendering); anything else is passed on unchanged."""
    out = []
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    try:
                        call = {**call, "function": {**function, "arguments": json.loads(function["arguments"])}}
                    except ValueError:
                        pass  # not JSON: the template gets the string
                calls.append(call)
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError:
        raise InputError(f"{path}: not UTF-8 text") from None
    data = parse_json(text, str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _special_tokens(config: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in config.items():
        text = _token_text(value)
        if key.endswith("_token") and text is not None:
            out[key] = text
    return out


def _templates_of(config: dict[str, Any], path: Path) -> dict[str, str]:
    value = config.get("chat_template")
    if isinstance(value, str) and value.strip():
        return {"default": value}
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        named = {str(k): v for k, v in named.items() if k and isinstance(v, str)}
        if named:
            return named
    raise InputError(f"{path}: has no chat_template")


def load_chat_template(path: str | os.PathLike[str]) -> ChatTemplate:
    """Read a template file, tokenizer_config.json or tokenizer folder; InputError naming the file."""
    path = Path(path)
    if path.is_dir():
        config_path = path / TOKENIZER_CONFIG
        config = _read_json(config_path) if config_path.is_file() else {}
        if (path / TEMPLATE_FILE).is_file():
            return ChatTemplate(str(path), {"default": _read_text(path / TEMPLATE_FILE)}, _special_tokens(config))
        if not config_path.is_file():
            raise InputError(f"{path}: neither {TEMPLATE_FILE} nor {TOKENIZER_CONFIG} in this folder")
        return ChatTemplate(str(path), _templates_of(config, config_path), _special_tokens(config))
    if path.suffix == ".json":
        config = _read_json(path)
        return ChatTemplate(str(path), _templates_of(config, path), _special_tokens(config))
    beside = path.parent / TOKENIZER_CONFIG
    tokens = _special_tokens(_read_json(beside)) if beside.is_file() else {}
    return ChatTemplate(str(path), {"default": _read_text(path)}, tokens)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def check_chat_template(path: str) -> str | None:
    """None when the template loads and compiles, else the problem (for the config's error list)."""
    try:
        template = load_chat_template(path)
        template._compiled  # noqa: B018 - compiling is the check
    except InputError as exc:
        return str(exc)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        return f"{path}: line {exc.lineno}: not a valid Jinja template ({exc.message})"
    return None
